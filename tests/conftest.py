"""Shared pytest fixtures: where the repository and the shared assets live, a torch.compile that counts its
compilations, and the code inductor generates for a function."""

import os

# Before anything imports triton: its @triton.jit kernels then run in the CPU interpreter, so the
# kernel tests can launch train_gpt.py's Triton kernels on CPU tensors.
os.environ.setdefault("TRITON_INTERPRET", "1")
# Under pytest-xdist (the README's -n auto) each worker's torch, and the scripts it starts, get an equal share of the
# cores instead of all of them each; set before torch loads, which reads it once.
if "PYTEST_XDIST_WORKER_COUNT" in os.environ:
    _share = (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, _share)))

import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository root (the folder holding train_gpt.py and data/)."""
    return REPO_ROOT


@pytest.fixture
def counted_compile():
    """(compile, graphs): compile(fn) is torch.compile(fn, dynamic=False) with a backend that runs each graph
    as traced and appends it to graphs, so a test can count (re)compilations."""
    import torch
    graphs = []

    def recording_backend(graph, example_inputs):
        graphs.append(graph)
        return graph.forward

    torch._dynamo.reset()
    return (lambda fn: torch.compile(fn, backend=recording_backend, dynamic=False)), graphs


@pytest.fixture
def inductor_source():
    """source(fn, *args): the Python code inductor generates when it compiles fn for these (CPU) inputs, e.g. to
    check which library calls (extern_kernels.*) a graph makes and which passes it fuses."""
    import torch
    from torch._inductor.utils import run_and_get_code

    def source(fn, *args) -> str:
        torch._dynamo.reset()
        return "\n".join(run_and_get_code(torch.compile(fn, dynamic=False), *args)[1])
    return source


@pytest.fixture
def shared_dir() -> Path:
    """../shared next to the repository: proxy shards, sample.jsonl, tokenizer cache."""
    shared = REPO_ROOT.parent / "shared"
    if not shared.is_dir():
        pytest.fail(f"{shared} is missing: these tests need the shared assets folder "
                    f"(proxy/sample.jsonl, tokenizer/tiktoken_cache) next to the repository")
    return shared


@pytest.fixture
def triton_interpreter(monkeypatch):
    """Triton's interpreter module, for kernel tests on CPU tensors (TRITON_INTERPRET=1 above). numpy >= 2.4
    refuses int() of a 1-element array, which triton 3.6's interpreter does for loop bounds
    (triton-lang/triton#9171): that one conversion is patched for the test."""
    import numpy as np
    from triton.runtime import interpreter

    try:
        int(np.ones(1))
    except TypeError:
        original = interpreter._patch_lang_tensor

        def patch_lang_tensor(tensor, scope):
            original(tensor, scope)
            scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

        monkeypatch.setattr(interpreter, "_patch_lang_tensor", patch_lang_tensor)
    return interpreter


@pytest.fixture
def require_interpreted(triton_interpreter):
    """A check that skips the test unless a script's Triton kernel runs in the interpreter (a script imported before
    TRITON_INTERPRET=1 was set compiles its kernels for a GPU)."""
    def check(kernel):
        if not isinstance(kernel, triton_interpreter.InterpretedFunction):
            pytest.skip(f"{kernel.fn.__module__} was imported before TRITON_INTERPRET=1 was set "
                        "(see tests/conftest.py)")
    return check


@pytest.fixture(scope="session")
def run_gpu_compiler(repo_root):
    """run(script, *args, timeout=300): a perf script that builds Triton kernels for sm_90 on this machine, in a
    subprocess without TRITON_INTERPRET (it needs Triton's GPU compiler, not the interpreter the other tests import
    the scripts under). Returns the completed process; a ptxas that refuses the PTX (a newer Triton's) skips the test
    with its last line."""
    def run(script: str, *args: str, timeout: int = 300) -> "subprocess.CompletedProcess[str]":
        env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
        result = subprocess.run([sys.executable, script, *args], cwd=repo_root, env=env, capture_output=True,
                                text=True, timeout=timeout)
        if result.returncode != 0 and "ptxas" in result.stderr:
            pytest.skip(result.stderr.strip().splitlines()[-1])
        return result
    return run
