"""Shared pytest fixtures: where the repository and the shared assets live, and a torch.compile that counts its
compilations."""

import os

# Before anything imports triton: its @triton.jit kernels then run in the CPU interpreter, so the
# kernel tests can launch train_gpt.py's Triton kernels on CPU tensors.
os.environ.setdefault("TRITON_INTERPRET", "1")

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
def shared_dir() -> Path:
    """../shared next to the repository: proxy shards, sample.jsonl, tokenizer cache."""
    shared = REPO_ROOT.parent / "shared"
    if not shared.is_dir():
        pytest.fail(f"{shared} is missing: these tests need the shared assets folder "
                    f"(proxy/sample.jsonl, tokenizer/tiktoken_cache) next to the repository")
    return shared
