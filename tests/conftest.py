"""Shared pytest fixtures: each test's os.environ restored after it, where the repository lives, a generated English
corpus and the environment that loads the GPT-2 tokenizer (for the data tools), a torch.compile that counts its
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

import json  # noqa: E402
import random  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import NamedTuple  # noqa: E402

import pytest  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
pytest_plugins = ["pytester"]  # for the test that runs tests under this file's restored_environment


@pytest.fixture(autouse=True)
def restored_environment():
    """os.environ as it was before each test, after it: the track scripts' main() sets cuBLASLt's settings
    (configure_cublaslt) and Triton's build settings (configure_triton_builds), and perf tools set them at import,
    for the whole process; a test that ran them left them set for every later test in its process (and the scripts
    those start), so what a test saw depended on which tests ran before it. monkeypatch undoes only what it set."""
    saved = dict(os.environ)
    yield
    for name in set(os.environ) - set(saved):
        del os.environ[name]
    for name, value in saved.items():
        if os.environ.get(name) != value:
            os.environ[name] = value


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


# Where it exists (as on CI), ../shared next to the repository holds tiktoken's GPT-2 files; a plain clone has none.
SHARED_TIKTOKEN_CACHE = REPO_ROOT.parent / "shared" / "tokenizer" / "tiktoken_cache"
# data/fineweb.py's own load of the encoding; exit status 3 where tiktoken cannot get the encoding's files
LOAD_GPT2 = """import sys, fineweb, tiktoken
try:
    fineweb.load_encoder()
except Exception as e:
    print(f"{type(e).__name__}: {e}", file=sys.stderr)
    sys.exit(3)
"""

# The generated corpus's words
WORDS = """the of and to in a is that for it as was with be by on not he this are or his from at which but have an they
you were her she there been one all we their has would when if so no will what up out more about into other time than
them some could these two may first then do any like my now over such our man me even most made after also did many
before must through years where much your way well down should because each just those people how too little state
good very make world still own see men work long get here between both life being under never day same another know
while last might us great old year off come since against go came right used take three river city market garden
winter summer letter school music water mountain""".split()
FOREIGN_WORDS = ["café", "naïve", "Zürich", "façade", "résumé", "São Paulo", "—", "“quoted”", "…", "déjà vu", "€5",
                 "Ελλάδα", "日本語", "שלום", "Москва", "🙂", "a\u00a0b"]


class Corpus(NamedTuple):
    path: Path  # the documents as a .jsonl file, one {"text": ...} a line, UTF-8 as is (not \u escapes)
    documents: list  # their texts, in order


def english_documents() -> list:
    """400 documents of English-like text, the same every call: 333,573 GPT-2 tokens with their end-of-text tokens
    (7 shards of 50,000), mostly a few hundred each, one of 58,670 (longer than a shard of 50,000: a shard starts
    inside it), some foreign words (2, 3 and 4 UTF-8 bytes a character), and documents that are empty, blank, one
    word, quotes, backslashes and control characters that JSON escapes, a line separator it does not, and the
    end-of-text marker as plain text."""
    rng = random.Random(20261205)

    def sentence() -> str:
        words = [rng.choice(WORDS) for _ in range(rng.randint(4, 18))]
        if rng.random() < 0.15:
            words.insert(rng.randrange(len(words)), rng.choice(FOREIGN_WORDS))
        text = " ".join(words)
        return text[0].upper() + text[1:] + rng.choice(".....?!")

    def document(paragraphs: int) -> str:
        return "\n\n".join(" ".join(sentence() for _ in range(rng.randint(1, 8))) for _ in range(paragraphs))

    documents = [document(rng.randint(1, 23)) for _ in range(392)]
    documents[200] = document(1000)
    edge_cases = {0: "", 1: " \n\t ", 57: "Yes.",
                  123: "Café au lait in Zürich — a naïve façade, “déjà vu”… 日本語, עברית, Ελληνικά, Москва, "
                       "🙂👍🏽, a\u00a0non-breaking space and a line\u2028separator",
                  250: 'He said "hi", C:\\path\\file\ttab\r\nand a CRLF, {"text": "nested"} and \x01 a control byte.',
                  311: "Not the end: <|endoftext|> is plain text here."}
    for index, text in edge_cases.items():  # in increasing order: each lands at its index
        documents.insert(index, text)
    return documents + ["", ""]  # the stream ends in two end-of-text tokens


@pytest.fixture(scope="session")
def english_corpus(tmp_path_factory) -> Corpus:
    """english_documents() written as a .jsonl file (the input the data tools read)."""
    documents = english_documents()
    path = tmp_path_factory.mktemp("corpus") / "sample.jsonl"
    with open(path, "w", encoding="utf-8", newline="\n") as file:
        for text in documents:
            file.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
    return Corpus(path, documents)


@pytest.fixture(scope="session")
def gpt2_env() -> dict:
    """os.environ for processes that load tiktoken's GPT-2 encoding as data/fineweb.py does: with TIKTOKEN_CACHE_DIR
    set to ../shared/tokenizer/tiktoken_cache where that exists (CI), else as it is (tiktoken's own cache, or its
    download). Without the encoding (no cache and no network) the test is skipped, saying how to provide it; a
    ../shared cache that does not load fails the test."""
    env = dict(os.environ)
    if SHARED_TIKTOKEN_CACHE.is_dir():
        env["TIKTOKEN_CACHE_DIR"] = str(SHARED_TIKTOKEN_CACHE)
    try:
        probe = subprocess.run([sys.executable, "-c", LOAD_GPT2], cwd=REPO_ROOT / "data", env=env, capture_output=True,
                               text=True, timeout=120)
    except subprocess.TimeoutExpired:  # tiktoken's download has no timeout of its own
        probe = subprocess.CompletedProcess([], 3, "", "TimeoutExpired: no answer in 120 s")
    if probe.returncode == 0:
        return env
    if probe.returncode != 3:
        pytest.fail(f"data/fineweb.py or tiktoken does not import (pip install -r requirements-dev.txt):\n"
                    f"{probe.stderr}")
    error = probe.stderr.strip()
    if SHARED_TIKTOKEN_CACHE.is_dir():
        pytest.fail(f"{SHARED_TIKTOKEN_CACHE} does not load tiktoken's GPT-2 encoding: {error}")
    pytest.skip(f"tiktoken cannot load the GPT-2 tokenizer ({error.split(':')[0]}): set TIKTOKEN_CACHE_DIR to a folder "
                "holding tiktoken's GPT-2 cache files (../shared/tokenizer/tiktoken_cache next to the repository is "
                "used where it exists), or allow network access for tiktoken to download them")


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
