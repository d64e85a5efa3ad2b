"""train_gpt.py, sections "Setup", "Warmup", "Training" and "Main", with train_gpt_medium.py's copies of the same
functions: the training clock and its log lines; the torch.compile artifact file of --compile_cache (a fresh process
whose local inductor cache is empty compiles from cache hits once it has loaded the file another process wrote), the
compiler's phase times, what a profiled warmup reports besides its table: the GPU's idle time and the communication
overlap of several processes; the ptxas that builds the Triton kernels (torch's, unless the user set one); the
start-up's kernel builds on worker threads, and the turns their threads take creating Triton's launchers (whose
modules Triton loads under one shared name); a CPU process's malloc, which keeps freed memory for reuse; the one line
a run out of GPU memory stops with; and the log header's nvidia-smi table, or the line that says why it is missing."""

import ctypes
import functools
import inspect
import itertools
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch.autograd.profiler_util import FunctionEvent
from torch.distributed.elastic.multiprocessing.errors import ProcessFailure

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
import train_gpt  # noqa: E402
import train_gpt_medium  # noqa: E402
from train_gpt import SetupError  # noqa: E402

sys.path.insert(0, str(REPO_ROOT / "data"))
from shards import write_shard  # noqa: E402
from stand_ins import WindowRecorder, documents, records_tool  # noqa: E402

COMPILE_AND_COUNT = """
import importlib, sys, torch
from torch._dynamo.utils import counters
path, action, script = sys.argv[1], sys.argv[2], importlib.import_module(sys.argv[3])
if action == "load":
    print(script.load_compile_cache(path))
f = torch.compile(lambda x: (x.sin() * 2 + x.cos()).sum(), dynamic=False)
f(torch.randn(64))
if action == "save":
    print(script.save_compile_cache(path))
print("phases", script.compile_phases(3))
print("lookups", script.compile_cache_lookups())
print("hits", counters["inductor"]["fxgraph_cache_hit"])
"""


def compile_in_fresh_process(tmp_path, name: str, path: Path, action: str, script="train_gpt") -> list[str]:
    """Compile a small function in a new process with its own, empty inductor cache folder."""
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / f"inductor_{name}"))
    result = subprocess.run([sys.executable, "-c", COMPILE_AND_COUNT, str(path), action, script], cwd=REPO_ROOT,
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip().splitlines()


@pytest.mark.parametrize("script", ["train_gpt", "train_gpt_medium"])
def test_artifacts_written_by_one_process_make_another_compile_from_cache_hits(tmp_path, script):
    path = tmp_path / "cache" / "artifacts.bin"
    saved = compile_in_fresh_process(tmp_path, "a", path, "save", script)
    assert re.fullmatch(rf"compile cache: \d+\.\d MiB written to {re.escape(str(path))} in \d+\.\ds", saved[0])
    assert path.stat().st_size > 0 and [f.name for f in path.parent.iterdir()] == [path.name]  # no partial file
    phases = saved[1].removeprefix("phases ").split(", ")  # the compiler's longest phases, for the log
    assert len(phases) == 3 and all(re.fullmatch(r"\S+ \d+\.\d", phase) for phase in phases), saved[1]
    assert "fxgraph_cache_miss 1" in saved[2] and "fxgraph_cache_hit" not in saved[2]  # what served the compile
    loaded = compile_in_fresh_process(tmp_path, "b", path, "load", script)
    assert re.fullmatch(rf"compile cache: \d+ artifacts loaded from {re.escape(str(path))} in \d+\.\ds", loaded[0])
    assert int(loaded[0].split()[2]) >= 1
    assert int(loaded[-1].split()[1]) >= 1  # the compile was served by what the file brought
    assert "fxgraph_cache_hit 1" in loaded[-2] and "fxgraph_cache_miss" not in loaded[-2]
    if script == "train_gpt":  # once: without loading, an empty cache folder has nothing to hit
        assert compile_in_fresh_process(tmp_path, "c", path, "none", script)[-1] == "hits 0"


AUTOGRAD_FUNCTION_COMPILE = """
import importlib, sys, torch
script_name, function_name, shapes, extra, x_dtype, version = sys.argv[1], sys.argv[2], eval(sys.argv[3]), \
    eval(sys.argv[4]), getattr(torch, sys.argv[5]), sys.argv[6]
script = importlib.import_module(script_name)
script.trace_autograd_functions_as_one_call()
if version == "edited":  # as if the function's source had changed
    torch._inductor.config.unsafe_marked_cacheable_functions[f"{script_name}.{function_name}"] += "edited"
function = getattr(script, function_name)
inputs = [torch.randn(*shape, dtype=x_dtype if i == 0 else torch.float32, requires_grad=True)
          for i, shape in enumerate(shapes)]
if function_name == "fp8_mlp":  # the weights' casts, made outside them (once a step in training)
    extra = (*script.mlp_weight_casts(*inputs[1:]), *extra)
if function_name == "fp8_attention_inputs":
    extra = (*extra, *script.qkv_weight_casts(inputs[1]))
if function_name == "summed_lookup":  # token ids, the table, its gradient sums (which the backward adds into),
    # the ids sorted and their order
    ids = torch.randint(0, shapes[0][0], shapes[1])
    inputs = [ids, inputs[0], torch.zeros(*shapes[0]), *ids.flatten().sort()]

def loss(*inputs):
    outputs = function(*inputs, *extra)
    return sum(out.float().square().sum() for out in (outputs if isinstance(outputs, tuple) else (outputs,)))


torch.compile(loss, dynamic=False)(*inputs).backward()
if function_name == "summed_lookup":  # the compiled backward's adds reached the sums: twice each looked-up row
    rows = 2 * script.F.embedding(*inputs[:2]).float()
    assert torch.equal(inputs[2], torch.zeros_like(inputs[2]).index_add_(0, inputs[0].flatten(), rows.flatten(0, 1)))
print(script.compile_cache_lookups())
"""


@pytest.mark.parametrize("script, function_name, shapes, extra, x_dtype", [
    ("train_gpt", "fp8_mlp", "[(32, 64), (64, 48), (64, 48)]", "(1,)", "float32"),  # track 1's amax row step
    ("train_gpt", "fp8_attention_inputs", "[(1, 16, 64), (96, 64), (16, 8), (16, 8), (2,)]", "(None, 16)",
     "bfloat16"),  # x, w, the rotary tables, lambdas; no value embedding, head_dim 16
    ("train_gpt_medium", "normed_relu_square_mlp", "[(32, 64), (48, 64), (64, 48)]", "()", "float32"),
    ("train_gpt", "summed_lookup", "[(50, 16), (2, 32)]", "()", "bfloat16")])  # a table and the ids' shape
def test_each_autograd_function_is_one_call_for_dynamo_and_its_graphs_are_served_by_aotautograds_cache(
        tmp_path, script, function_name, shapes, extra, x_dtype):
    """Each track's autograd.Functions (the MLPs, track 1's FP8 QKV projection and table lookups) are one call each
    in dynamo's graph, and AOTAutograd's cache keeps the graphs that call them, keyed by the source of what they run:
    a second process loads the traced forward and backward instead of tracing them again (a faster warm start), and
    one whose source differs misses. The lookups' compiled backward adds into the sums it was given."""
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    runs = [subprocess.run([sys.executable, "-c", AUTOGRAD_FUNCTION_COMPILE, script, function_name, shapes, extra,
                            x_dtype, version], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
            for version in ("same", "same", "edited")]
    assert all(run.returncode == 0 for run in runs), runs[-1].stderr[-3000:]
    first, second, edited = (run.stdout.strip().splitlines()[-1] for run in runs)
    assert "autograd_cache_miss 1" in first and "autograd_cache_saved 1" in first and "bypass" not in first
    assert "autograd_cache_hit 1" in second and "bypass" not in second
    assert "autograd_cache_miss 1" in edited and "autograd_cache_hit" not in edited


def python_code_run_by(script, function) -> list:
    """The script's own functions and classes that function runs in Python, directly or through one another: not
    through a torch.library op, which a traced graph calls by name (its code is the op's, not the graph's)."""
    found, todo = [], [function]
    while todo:
        part = todo.pop()
        if any(part is seen for seen in found):
            continue
        found.append(part)
        functions = [part] if inspect.isfunction(part) else [
            getattr(value, "__func__", value) for value in vars(part).values()
            if inspect.isfunction(getattr(value, "__func__", value))]
        codes = [f.__code__ for f in functions]
        while codes:
            code = codes.pop()
            codes += [const for const in code.co_consts if inspect.iscode(const)]  # comprehensions, nested functions
            todo += [value for value in map(vars(script).get, code.co_names)
                     if (inspect.isfunction(value) or inspect.isclass(value)) and value.__module__ == script.__name__]
    return found[1:]


@pytest.mark.parametrize("script, name", [(train_gpt, "fp8_mlp"), (train_gpt, "fp8_attention_inputs"),
                                          (train_gpt, "summed_lookup"), (train_gpt_medium, "normed_relu_square_mlp")])
def test_the_cache_key_of_an_autograd_function_changes_with_any_python_code_it_runs(script, name, monkeypatch):
    """AOTAutograd's cache serves the graphs traced from a marked function while its key stays the same: the key
    covers the source of everything the autograd.Function runs in Python (the run-time test edits the key itself),
    so that an edited helper of it (to_float8, a scale) misses instead of reusing graphs of the old code."""
    marks = {}
    monkeypatch.setattr(torch._inductor.config, "unsafe_marked_cacheable_functions", marks)
    monkeypatch.setattr(torch._dynamo, "allow_in_graph", lambda function: function)  # not this test's
    script.trace_autograd_functions_as_one_call()
    key = marks[f"{script.__name__}.{name}"]
    parts = python_code_run_by(script, getattr(script, name))
    assert any(inspect.isclass(part) for part in parts)  # the autograd.Function

    def edited():
        """A stand-in of other source."""

    for part in parts:
        with monkeypatch.context() as patch:
            patch.setattr(script, part.__name__, edited)
            script.trace_autograd_functions_as_one_call()
            assert marks[f"{script.__name__}.{name}"] != key, part.__name__


def test_no_setting_or_no_file_yet_is_not_an_error(tmp_path):
    assert train_gpt.load_compile_cache("") is None
    assert train_gpt.load_compile_cache(str(tmp_path / "not_written_yet.bin")) is None
    assert train_gpt.save_compile_cache("") is None


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_a_cache_the_warmup_cannot_write_is_a_note_and_the_run_goes_on(script, tmp_path, monkeypatch):
    """What the start-up check cannot foresee (a full disk, a folder that became a file): no partial file is left,
    and the log's note says the next start compiles again."""
    monkeypatch.setattr(torch.compiler, "save_cache_artifacts", lambda: (b"artifacts", None))
    (tmp_path / "notes.txt").write_text("not a folder\n")
    taken = tmp_path / "taken.bin"
    taken.mkdir()  # os.replace cannot put a file over a folder
    for path in [tmp_path / "notes.txt" / "cache.bin", taken]:
        note = script.save_compile_cache(str(path))
        assert re.fullmatch(rf"compile cache: not written to {re.escape(str(path))} \([A-Z][a-z ]+\); the next start "
                            "compiles again", note)
    assert sorted(f.name for f in tmp_path.iterdir()) == ["notes.txt", "taken.bin"]  # no partial file
    assert script.save_compile_cache(str(tmp_path / "new" / "cache.bin")).startswith("compile cache: 0.0 MiB written")
    assert (tmp_path / "new" / "cache.bin").read_bytes() == b"artifacts"


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_a_cache_write_that_fails_part_way_leaves_the_earlier_cache_whole(script, tmp_path, monkeypatch):
    """A disk that fills part-way through the write: an earlier run's cache stays as it was, where a write in place
    would leave the start of a file that the next start refuses ('could not be loaded (corrupt, ...)')."""
    path = tmp_path / "cache.bin"
    path.write_bytes(b"an earlier run's artifacts")
    monkeypatch.setattr(torch.compiler, "save_cache_artifacts", lambda: (b"this run's artifacts", None))

    class FillsUp:
        """A file opened for writing on a disk with 4 bytes left."""

        def __init__(self, *args):
            self.file = open(*args)

        def __enter__(self):
            return self

        def __exit__(self, *error):
            self.file.close()

        def write(self, data):
            self.file.write(data[:4])
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(script, "open", lambda file, mode="r": (FillsUp if "w" in mode else open)(file, mode),
                        raising=False)  # the script's own calls of open
    note = script.save_compile_cache(str(path))
    assert note == f"compile cache: not written to {path} (No space left on device); the next start compiles again"
    assert path.read_bytes() == b"an earlier run's artifacts" and [f.name for f in tmp_path.iterdir()] == [path.name]


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_two_runs_saving_one_cache_at_once_each_write_it_whole(script, tmp_path, monkeypatch):
    """Two runs side by side sharing a --compile_cache, their warmups ending together: each writes a file of its own
    and moves it into place, so both saves succeed and the cache is one run's whole artifacts, where one shared
    unfinished file, written by both and moved by one, would fail the other's move or mix the two. The other run
    is this process under another pid, saving while the first is about to move its file."""
    path = tmp_path / "cache.bin"
    saves = iter([(b"run A's artifacts", None), (b"run B's artifacts", None)])
    monkeypatch.setattr(torch.compiler, "save_cache_artifacts", lambda: next(saves))
    pid, notes, replace = [1000], [], os.replace
    monkeypatch.setattr(os, "getpid", lambda: pid[0])

    def other_run_saves_first(source, target):
        if pid[0] == 1000:
            pid[0] = 2000
            notes.append(script.save_compile_cache(str(path)))
            pid[0] = 1000
        replace(source, target)

    monkeypatch.setattr(os, "replace", other_run_saves_first)
    notes.append(script.save_compile_cache(str(path)))
    assert [note.split(" in ")[0] for note in notes] == [f"compile cache: 0.0 MiB written to {path}"] * 2
    assert path.read_bytes() == b"run A's artifacts" and [f.name for f in tmp_path.iterdir()] == [path.name]


def test_unreadable_artifact_file_is_one_setup_error_with_the_fix(tmp_path, capfd):
    path = tmp_path / "artifacts.bin"
    path.write_bytes(b"not torch.compile artifacts")
    with pytest.raises(SetupError) as error:
        train_gpt.load_compile_cache(str(path))
    assert str(error.value) == (f"--compile_cache={path} could not be loaded (corrupt, or not torch.compile "
                                "artifacts); delete it to compile from scratch and write a new one")
    assert capfd.readouterr().err == ""  # torch's own warning and traceback are kept off the console


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("artifacts", [b"not torch.compile artifacts", None], ids=["bad", "good"])
def test_loading_the_cache_silences_torchs_cache_log_for_the_load_only(script, artifacts, tmp_path, monkeypatch):
    """torch.compiler._cache's log is kept quiet while the file loads (a bad file's traceback) and speaks again
    after, for whatever the run's own compile has to say there; a good file's load too, whose note counts the
    artifacts of every kind."""
    import logging

    if artifacts is None:
        monkeypatch.setattr(torch.compiler, "load_cache_artifacts",
                            lambda data: SimpleNamespace(artifacts={"inductor": ["a", "b"], "aot_autograd": ["c"]}))
    path = tmp_path / "artifacts.bin"
    path.write_bytes(artifacts or b"artifacts")
    torch_log = logging.getLogger("torch.compiler._cache")
    monkeypatch.setattr(torch_log, "level", logging.INFO)
    if artifacts is None:
        assert script.load_compile_cache(str(path)).startswith(f"compile cache: 3 artifacts loaded from {path} in ")
    else:
        with pytest.raises(script.SetupError):
            script.load_compile_cache(str(path))
    assert torch_log.level == logging.INFO


def test_a_torch_that_raises_on_bad_artifacts_gives_the_same_error(tmp_path, monkeypatch):
    path = tmp_path / "artifacts.bin"
    path.write_bytes(b"\0" * 64)

    def raising_load(data):
        raise RuntimeError("Bytes object is corrupted")

    monkeypatch.setattr(torch.compiler, "load_cache_artifacts", raising_load)
    with pytest.raises(SetupError, match=r"could not be loaded \(corrupt, or not torch.compile artifacts\)"):
        train_gpt.load_compile_cache(str(path))


def kernel_event(name, start, end, annotation=False, device=torch.autograd.DeviceType.CUDA):
    return SimpleNamespace(name=name, time_range=SimpleNamespace(start=start, end=end), device_type=device,
                           is_user_annotation=annotation)


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_interval_union_and_intersection(script):
    assert script.merged([(5, 7), (0, 2), (1, 3), (7, 8)]) == [(0, 3), (5, 8)]
    assert script.overlap_length([(0, 3), (5, 8)], [(2, 6), (7, 10)]) == 1 + 1 + 1
    assert script.overlap_length([(0, 1)], [(1, 2)]) == 0


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_gpu_idle_of_a_profile_overall_and_inside_each_optimizer_step(script):
    """Idle = no kernel running: between the first and last kernel (annotations and CPU ops are not kernels), and
    inside the GPU-side spans of the optimizers' steps (two Muon steps here, back to back)."""
    events = [kernel_event("nvjet_gemm", 100, 300), kernel_event("triton_poi_fused", 250, 400),
              kernel_event("triton_red_fused", 600, 700), kernel_event("nvjet_gemm", 900, 1100),
              kernel_event("Optimizer.step#Muon.step", 500, 800, annotation=True),
              kernel_event("Optimizer.step#Muon.step", 800, 1000, annotation=True),
              kernel_event("Optimizer.step#Adam.step", 300, 400, annotation=True),
              kernel_event("ProfilerStep#1", 0, 2000, annotation=True),
              kernel_event("aten::mm", 0, 2000, device=torch.autograd.DeviceType.CPU)]
    assert script.gpu_idle(events) == ("GPU idle 0.4 ms of 1.0 ms (40%); Adam.step idle 0.0 ms of 0.1 ms; "
                                       "Muon.step idle 0.3 ms of 0.5 ms")
    assert script.gpu_idle([kernel_event("aten::mm", 0, 5, device=torch.autograd.DeviceType.CPU)]) is None


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_idle_gaps_split_hand_overs_from_the_host_falling_behind(script):
    """gpu_idle's time, gap by gap: 100 hand-overs of 6 us between queued kernels, a 50-us and a 480-us gap (after a
    kernel that outlasts the one launched after it: the gap starts when the GPU is free), no gap inside overlapping
    kernels; annotations and CPU ops are not kernels."""
    events = [kernel_event(f"triton_poi_{i}", 106 * i, 106 * i + 100) for i in range(101)]  # ends at 10,700
    events += [kernel_event("nvjet_gemm", 10_750, 10_900), kernel_event("triton_red_fused", 10_800, 10_850),
               kernel_event("triton_per_fused", 11_380, 11_500),
               kernel_event("Optimizer.step#Muon.step", 0, 11_500, annotation=True),
               kernel_event("aten::mm", 10_900, 11_380, device=torch.autograd.DeviceType.CPU)]
    assert script.idle_gaps(events, count=2) == (
        "idle gaps: 100 of at most 10 us, 0.6 ms; 2 longer, 0.5 ms; longest: 480 us after nvjet_gemm before "
        "triton_per_fused, 50 us after triton_poi_100 before nvjet_gemm")
    assert script.gpu_idle(events).startswith("GPU idle 1.1 ms of 11.5 ms")  # the same 600 + 530 us
    assert script.idle_gaps([kernel_event("nvjet_gemm", 0, 10), kernel_event("triton_poi", 5, 20)]) is None
    assert script.idle_gaps([kernel_event("nvjet_gemm", 0, 10), kernel_event("triton_poi", 10, 20)]) is None  # touching


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_an_idle_gap_of_exactly_short_gap_us_is_a_hand_over(script):
    events = [kernel_event("triton_poi_a", 0, 100), kernel_event("triton_poi_b", 110, 200),
              kernel_event("nvjet_gemm", 211, 300)]
    assert script.idle_gaps(events) == (
        "idle gaps: 1 of at most 10 us, 0.0 ms; 1 longer, 0.0 ms; longest: 11 us after triton_poi_b before "
        "nvjet_gemm, 10 us after triton_poi_a before triton_poi_b")


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_communication_overlap_of_a_profile(script):
    """NCCL kernel time, and the part of it during which compute kernels ran (annotations and CPU ops do not
    count as compute)."""
    events = [kernel_event("ncclDevKernel_ReduceScatter", 0, 400), kernel_event("ncclDevKernel_AllGather", 900, 1000),
              kernel_event("nvjet_gemm", 100, 300), kernel_event("triton_poi_fused", 250, 360),
              kernel_event("Optimizer.step#Muon.step", 0, 1000, annotation=True),
              kernel_event("aten::mm", 0, 1000, device=torch.autograd.DeviceType.CPU)]
    line = script.communication_overlap(events)
    assert line == "communication: NCCL kernels 0.5 ms, 0.3 ms of it (52%) overlapped by compute kernels"
    assert script.communication_overlap([kernel_event("nvjet_gemm", 0, 10)]) is None  # one process: no NCCL


MALLOC_AFTER_SETUP = """
import ctypes, importlib, resource, sys, torch
class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks "
                "fordblks keepcost".split()]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
if sys.argv[2] == "setup":
    importlib.import_module(sys.argv[1]).reuse_freed_cpu_memory()
elements = 32 * 2**20  # 128 MB of float32, as large as the tiny CPU run's head tensors
mapped = libc.mallinfo2().hblkhd
kept = torch.ones(elements)
mapped = libc.mallinfo2().hblkhd - mapped
del kept
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
torch.ones(elements // 2)  # fits in the freed block whatever small allocations came after it
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
print(mapped // 2**20, faults / (elements // 2 * 4 / resource.getpagesize()))
"""


@pytest.mark.parametrize("script", ["train_gpt", "train_gpt_medium"])
def test_a_cpu_run_reuses_freed_memory_instead_of_mapping_and_faulting_it_in_again(script):
    """glibc gives every block over 32 MB its own mapping, returned to the kernel when freed, so the next one faults
    in zeroed pages again (one fault a page, unless transparent huge pages serve the mapping); after
    reuse_freed_cpu_memory a 128-MB tensor comes from the heap, and a smaller one after it reuses its pages."""
    libc = ctypes.CDLL(None)
    if not (hasattr(libc, "mallopt") and hasattr(libc, "mallinfo2")):
        pytest.skip("not glibc 2.33 or newer: nothing to set")
    results = {}
    for case in ["setup", "default"]:
        run = subprocess.run([sys.executable, "-c", MALLOC_AFTER_SETUP, script, case], capture_output=True,
                             text=True, cwd=REPO_ROOT, timeout=120)
        assert run.returncode == 0, run.stderr
        mapped_mb, faults_per_page = run.stdout.split()
        results[case] = int(mapped_mb), float(faults_per_page)
    assert results["default"][0] >= 128  # the check tells the two apart
    assert results["setup"][0] == 0
    assert results["setup"][1] < 0.05


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_a_cpu_process_sets_up_malloc_and_a_gpu_one_does_not(script, monkeypatch):
    calls = []
    monkeypatch.setattr(script, "reuse_freed_cpu_memory", lambda: calls.append("cpu"))
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: calls.append(str(device)))
    assert (script.set_up_device(script.Hyperparameters(device="cpu"), 0).type, calls) == ("cpu", ["cpu"])
    assert str(script.set_up_device(script.Hyperparameters(device="cuda"), 1)) == "cuda:1"
    assert calls == ["cpu", "cuda:1"]


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_the_model_is_built_on_the_default_device(script):
    """main builds the model under `with torch.device(device)`, so every parameter and buffer that GPT creates must
    follow the default device (one made on the CPU regardless would leave a CUDA model with a CPU tensor)."""
    args = script.Hyperparameters(model_dim=64, num_heads=2, head_dim=32, train_seq_len=256, val_seq_len=256)
    with torch.device("meta"):
        model = script.GPT(args)
    tensors = dict(model.named_parameters()) | dict(model.named_buffers())
    assert len(tensors) > 10
    assert {name for name, t in tensors.items() if t.device.type != "meta"} == set()


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_longest_kernels_of_a_profile_by_total_time_with_full_names(script):
    """Kernels only (no annotations, no CPU ops), summed over their calls, longest first, the names uncut."""
    long_name = "triton_poi_fused__fused_rms_norm__scaled_mm__to_copy_clamp_div_mul_" + "x" * 80
    events = [kernel_event(long_name, 0, 300), kernel_event(long_name, 400, 700),
              kernel_event("nvjet_gemm", 300, 400), kernel_event("nvjet_gemm", 700, 1100),
              kernel_event("triton_red_fused", 1200, 1300),
              kernel_event("Optimizer.step#Muon.step", 0, 5000, annotation=True),
              kernel_event("aten::mm", 0, 9000, device=torch.autograd.DeviceType.CPU)]
    assert script.longest_kernels(events, count=2) == [f"kernel 0.6 ms in 2 calls: {long_name}",
                                                       "kernel 0.5 ms in 2 calls: nvjet_gemm"]
    assert script.longest_kernels(events)[-1] == "kernel 0.1 ms in 1 calls: triton_red_fused"


def cpu_op(name, parent=None, kernels=()):
    """A CPU op of a profile's events, as torch's profiler makes them: its caller, and the kernels the profiler linked
    to it (name, duration in us)."""
    op = FunctionEvent(id=0, name=name, thread=0, start_us=0, end_us=1)
    if parent is not None:
        op.set_cpu_parent(parent)
    for kernel, us in kernels:
        op.append_kernel(kernel, 0, us)
    return op


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_longest_kernels_name_the_ops_that_launched_most_of_their_time(script):
    """A copy launched from two places is named after the one with the most time, its callers innermost first; a
    kernel launched under its own name (as inductor's are) names only its callers; no link, no suffix."""
    region = cpu_op("Torch-Compiled Region")
    custom = cpu_op("nanogpt::mlp_grad_h", cpu_op("CompiledFunctionBackward", region))
    clone = cpu_op("aten::clone", cpu_op("aten::contiguous", custom))
    events = [kernel_event("Memcpy DtoD", 0, 300), kernel_event("triton_poi_fused_0", 300, 400),
              kernel_event("nvjet_gemm", 400, 450),
              cpu_op("aten::copy_", clone, [("Memcpy DtoD", 200)]),
              cpu_op("aten::copy_", cpu_op("Optimizer.step#Muon.step"), [("Memcpy DtoD", 100)]),
              cpu_op("triton_poi_fused_0", region, [("triton_poi_fused_0", 100)])]
    assert script.longest_kernels(events) == [
        "kernel 0.3 ms in 1 calls: Memcpy DtoD "
        "[from aten::copy_ < aten::clone < aten::contiguous < nanogpt::mlp_grad_h]",
        "kernel 0.1 ms in 1 calls: triton_poi_fused_0 [from Torch-Compiled Region]",
        "kernel 0.1 ms in 1 calls: nvjet_gemm"]


@pytest.fixture
def triton_build_env_unset(monkeypatch):
    """TRITON_PTXAS_PATH, TRITON_PTXAS_BLACKWELL_PATH and TRITON_DEFAULT_FP_FUSION unset for the test, and restored
    afterwards even where the test's code sets them."""
    for name in ("TRITON_PTXAS_PATH", "TRITON_PTXAS_BLACKWELL_PATH", "TRITON_DEFAULT_FP_FUSION"):
        monkeypatch.delenv(name, raising=False)  # conftest's restored_environment puts back what is set


def executable(path: Path, mode: int = 0o755, release: str | None = None) -> Path:
    """A program at path; with a release, one that answers --version as ptxas does."""
    answer = f"echo 'Cuda compilation tools, release {release}, V{release}.1'\n" if release else ""
    path.write_text("#!/bin/sh\n" + answer)
    path.chmod(mode)
    return path


@pytest.fixture
def gpu_of_capability(monkeypatch):
    """gpu(major, minor): torch reports one GPU of that compute capability."""
    def gpu(major: int, minor: int):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (major, minor))
    return gpu


def bundled_ptxas(name: str) -> str:
    import triton
    return str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name)


def triton_version() -> tuple[int, int]:
    import triton
    return tuple(int(part) for part in triton.__version__.split(".")[:2])


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_torch_ptxas_is_used_when_none_is_set(script, triton_build_env_unset, gpu_of_capability, tmp_path):
    """The log names the ptxas Triton builds the GPU's kernels with: torch's, which the scripts set, on an L4 (sm_89)
    in every Triton; on an H100 (sm_90) in Triton 3.6-3.8, while 3.9 takes its own ptxas-blackwell there, for
    inductor's kernels too; on a B200 (sm_100) Triton's own ptxas-blackwell in every Triton."""
    ptxas = executable(tmp_path / "ptxas", release="13.0")
    script.configure_triton_builds(ptxas)
    assert os.environ["TRITON_PTXAS_PATH"] == str(ptxas)
    gpu_of_capability(8, 9)
    assert script.environment()["ptxas"] == f"{ptxas} (CUDA 13.0)"  # the run log's header line
    gpu_of_capability(9, 0)
    if triton_version() < (3, 9):
        assert script.ptxas_in_use() == f"{ptxas} (CUDA 13.0)"
    else:
        assert script.ptxas_in_use().startswith(bundled_ptxas("ptxas-blackwell") + " (CUDA ")
    gpu_of_capability(10, 0)
    assert script.ptxas_in_use().startswith(bundled_ptxas("ptxas-blackwell") + " (CUDA ")


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("gpu", ["none", "ROCm"])
def test_without_an_nvidia_gpu_the_log_names_no_ptxas(script, gpu, triton_build_env_unset, gpu_of_capability,
                                                      monkeypatch, tmp_path):
    """A ROCm build of torch answers torch.cuda's calls too (an MI300X reports capability 9.4); no ptxas builds for
    it."""
    if gpu == "none":
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    else:
        gpu_of_capability(9, 4)
        monkeypatch.setattr(torch.version, "hip", "7.0.51831")
    script.configure_triton_builds(executable(tmp_path / "ptxas", release="13.0"))
    assert script.environment()["ptxas"] == "none (no NVIDIA GPU)"


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_a_ptxas_triton_cannot_name_leaves_the_header_line_unknown(script, gpu_of_capability, monkeypatch):
    """get_ptxas is Triton's own function, not its API: where it fails (no ptxas found) or moves in a later Triton,
    the log's header said nothing and the run died there with a traceback."""
    import triton.backends.nvidia.compiler as compiler

    def no_ptxas(arch):
        raise RuntimeError("Cannot find ptxas\nsearched: a, b")

    gpu_of_capability(9, 0)
    monkeypatch.setattr(compiler, "get_ptxas", no_ptxas)
    assert script.ptxas_in_use() == "unknown (RuntimeError: Cannot find ptxas)"
    monkeypatch.delattr(compiler, "get_ptxas")
    assert script.ptxas_in_use().startswith("unknown (ImportError: cannot import name 'get_ptxas' from ")


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("user_setting, in_effect", [(None, "1"), ("0", "0"), ("1", "1")])
def test_our_kernels_keep_fma_contraction_unless_the_user_says(script, triton_build_env_unset, monkeypatch, tmp_path,
                                                               user_setting, in_effect):
    """Triton 3.9 warns once per process that 3.10 turns FMA contraction off by default; our kernels were checked
    with it on (Triton 3.6's default)."""
    if user_setting is not None:
        monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", user_setting)
    script.configure_triton_builds(executable(tmp_path / "ptxas"))
    assert os.environ["TRITON_DEFAULT_FP_FUSION"] == in_effect


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_a_ptxas_the_user_set_is_left_alone(script, triton_build_env_unset, gpu_of_capability, monkeypatch,
                                            tmp_path):
    users = executable(tmp_path / "cuda_ptxas", release="12.9")
    monkeypatch.setenv("TRITON_PTXAS_PATH", str(users))
    script.configure_triton_builds(executable(tmp_path / "ptxas", release="13.0"))
    assert os.environ["TRITON_PTXAS_PATH"] == str(users)
    gpu_of_capability(8, 9)
    assert script.ptxas_in_use() == f"{users} (CUDA 12.9)"


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("case", ["missing", "not executable", "a folder"])
def test_without_an_executable_torch_ptxas_triton_keeps_its_own(script, case, triton_build_env_unset,
                                                                gpu_of_capability, tmp_path):
    ptxas = tmp_path / "ptxas"
    if case == "not executable":
        executable(ptxas, 0o644, release="13.0")
    elif case == "a folder":
        ptxas.mkdir()
    script.configure_triton_builds(ptxas)
    assert "TRITON_PTXAS_PATH" not in os.environ
    gpu_of_capability(8, 9)
    assert script.environment()["ptxas"].startswith(bundled_ptxas("ptxas") + " (CUDA ")


@pytest.mark.parametrize("user_size", [None, "4096"])
def test_cublaslt_runs_without_a_workspace_unless_the_user_says(user_size, monkeypatch):
    """Track 1's FP8 GEMMs ran faster with cuBLASLt's workspace 0, not shared with cuBLAS (no memset before each);
    a size the user set stays, and the log's header says what was in effect."""
    for name in train_gpt.CUBLASLT_SETTINGS:
        monkeypatch.delenv(name, raising=False)  # conftest's restored_environment puts back what is set
    assert train_gpt.environment()["cublaslt"] == ("CUBLASLT_WORKSPACE_SIZE=unset "
                                                   "TORCH_CUBLASLT_UNIFIED_WORKSPACE=unset")
    if user_size is not None:
        monkeypatch.setenv("CUBLASLT_WORKSPACE_SIZE", user_size)
    train_gpt.configure_cublaslt()
    assert os.environ["CUBLASLT_WORKSPACE_SIZE"] == (user_size or "0")
    assert os.environ["TORCH_CUBLASLT_UNIFIED_WORKSPACE"] == "0"
    assert train_gpt.environment()["cublaslt"] == (f"CUBLASLT_WORKSPACE_SIZE={user_size or 0} "
                                                   "TORCH_CUBLASLT_UNIFIED_WORKSPACE=0")


def test_cublaslt_settings_are_in_place_before_the_gpu_check_runs_its_gemm(monkeypatch):
    """check_settings' GPU check runs a rowwise FP8 GEMM (rowwise_fp8_matmul_runs), and torch may read the settings
    once, at its first cuBLASLt GEMM: set after the checks, as they were, a torch that reads them once would keep its
    32-MiB shared workspace and the memsets that cost 1.2-2.2 ms a full step."""
    for name in train_gpt.CUBLASLT_SETTINGS:
        monkeypatch.delenv(name, raising=False)  # conftest's restored_environment puts back what is set
    seen = {}

    def check_settings(args, world_size):
        seen.update({name: os.environ.get(name) for name in train_gpt.CUBLASLT_SETTINGS})
        raise train_gpt.SetupError("stop here")

    monkeypatch.setattr(train_gpt, "check_settings", check_settings)
    monkeypatch.setattr(sys, "argv", ["train_gpt.py", "--device=cpu", "--check_only=true"])
    with pytest.raises(train_gpt.SetupError, match="stop here"):
        train_gpt.main()
    assert seen == train_gpt.CUBLASLT_SETTINGS


# Two tests run in order under the suite's conftest: the first runs main() as test_train_gpt_hyperparameters.py's do
MAIN_THEN_NEXT_TEST = """
import os
import sys

sys.path.insert(0, {root!r})
import train_gpt


def test_main_sets_the_cublaslt_settings(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(train_gpt, "check_data", lambda args, world_size, accum: ([], []))
    monkeypatch.setattr(sys, "argv", ["train_gpt.py", "--device=cpu", "--check_only=true"])
    train_gpt.main()
    assert {{name: os.environ.get(name) for name in train_gpt.CUBLASLT_SETTINGS}} == train_gpt.CUBLASLT_SETTINGS


def test_the_next_test_finds_them_unset():
    assert [name for name in train_gpt.CUBLASLT_SETTINGS if name in os.environ] == []
"""


def test_a_test_that_runs_main_leaves_the_cublaslt_settings_unset_for_the_next(pytester, monkeypatch):
    """main() sets the settings for the process (configure_cublaslt), and the tests that call it in-process left
    them set in pytest's process afterwards: every later test in that process, and every script it started, ran with
    them (conftest.py's restored_environment now puts os.environ back after each test)."""
    for name in train_gpt.CUBLASLT_SETTINGS:
        monkeypatch.delenv(name, raising=False)  # conftest's restored_environment puts back what is set
    pytester.makeconftest((REPO_ROOT / "tests" / "conftest.py").read_text())
    pytester.makepyfile(MAIN_THEN_NEXT_TEST.format(root=str(REPO_ROOT)))
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=2)


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium])
def test_warmup_laps_give_each_part_its_time_and_the_compilers_share_of_it(script):
    torch._dynamo.reset()  # the other case compiled the same code: trace it again here
    laps = script.WarmupLaps(torch.device("cpu"))
    before = script.compiling_seconds()
    f = torch.compile(lambda x: (x.cos() * 3 + x).sum(), dynamic=False)
    f(torch.randn(16))
    assert script.compiling_seconds() > before  # the compile was timed (with warm caches, in hundredths of a second)
    laps.lap("compiled")
    f(torch.randn(16))
    laps.lap("run again")
    compiled, again = str(laps).split(", ")
    total, compiling = map(float, re.fullmatch(r"compiled ([\d.]+)s \(compiling ([\d.]+)s\)", compiled).groups())
    assert round(compiling - total, 6) <= 0.1  # the compile is part of the lap (both printed to 0.1 s)
    assert re.fullmatch(r"run again [\d.]+s \(compiling 0\.0s\)", again), again


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_warmup_laps_wait_for_the_device_and_count_the_compilers_seconds_from_the_warmups_start(script, monkeypatch):
    """On a fake clock, with the compiler's seconds stood in for: the 5 s it spent before the warmup began (a compile
    earlier in the process) are in no lap, and each lap waits for the device's queued work (0.5 s here) before it
    reads the clock, so that a lap is the device's time, not the host's time to queue the work."""
    now, compiled = [100.0], [5.0]
    fake_clock_time(monkeypatch, script, now)
    monkeypatch.setattr(script, "compiling_seconds", lambda: compiled[0])
    waits = slow_device_sync(monkeypatch, script, now)
    cpu = torch.device("cpu")
    laps = script.WarmupLaps(cpu)
    now[0], compiled[0] = 103.0, 7.0
    laps.lap("step 1")
    now[0] = 104.0
    laps.lap("validation")
    assert str(laps) == "step 1 3.5s (compiling 2.0s), validation 1.0s (compiling 0.0s)" and waits == [cpu] * 2


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_compile_phases_come_longest_first_and_cache_lookups_say_none_where_there_were_none(script, monkeypatch):
    """The log's compile line: the count longest of the compiler's phases, longest first (the first phases of the
    compile are not its longest), and the cache lookups by name, the other counters left out."""
    phases = (["_compile.compile_inner", "inductor_compile", "aot_collect_metadata"], ["9.25", "30.5", "0.04"])
    monkeypatch.setattr(torch._dynamo.utils, "compile_times", lambda repr, aggregate: phases)
    assert script.compile_phases() == "inductor_compile 30.5, _compile.compile_inner 9.2, aot_collect_metadata 0.0"
    assert script.compile_phases(2) == "inductor_compile 30.5, _compile.compile_inner 9.2"
    counters = {"aot_autograd": {"total": 2, "autograd_cache_miss": 1, "autograd_cache_hit": 1},
                "inductor": {"fxgraph_cache_miss": 3, "pattern_matcher_count": 7}}
    monkeypatch.setattr(torch._dynamo.utils, "counters", counters)
    assert script.compile_cache_lookups() == "autograd_cache_hit 1, autograd_cache_miss 1, fxgraph_cache_miss 3"
    monkeypatch.setattr(torch._dynamo.utils, "counters", {"aot_autograd": {"total": 2}, "inductor": {}})
    assert script.compile_cache_lookups() == "none"


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("warmup_steps, profile_steps, parts", [
    (4, 1, ["step 1", "steps 2-3", "steps 4-4 profiled", "validation", "state restored"]),
    (3, 0, ["step 1", "steps 2-3", "validation", "state restored"]),
    (1, 0, ["step 1", "validation", "state restored"]),
    (2, 2, ["steps 1-2 profiled", "validation", "state restored"]),
    (0, 0, ["state restored"]),
])
def test_the_warmups_laps_name_the_steps_each_part_ran(script, warmup_steps, profile_steps, parts, monkeypatch):
    """The log's warmup parts: step 1 (the compile) alone, the other unprofiled steps, then the profiled ones, each
    named by its steps as the profile's table is (the e2e runs have 1 unprofiled step: no "steps 2-N")."""
    monkeypatch.setattr(script, "train_batches", lambda *args: itertools.repeat(
        (torch.ones(128, dtype=torch.int32), torch.zeros(128, dtype=torch.int32))))
    monkeypatch.setattr(script, "profile_table", lambda run, device: run())
    args = script.Hyperparameters(num_iterations=6, warmup_steps=warmup_steps, profile_steps=profile_steps,
                                  grad_accum_steps=1, train_seq_len=128, val_tokens=256, val_seq_len=128, device="cpu")
    cpu, model = torch.device("cpu"), WindowRecorder()
    optimizers = [torch.optim.SGD(model.parameters(), lr=0.1)]
    for group in optimizers[0].param_groups:
        group["initial_lr"] = group["lr"]
    casts = (lambda: None,) if script is train_gpt else ()  # track 1's weight_casts
    _, laps = script.warmup(model, model, optimizers, *casts, torch.arange(257), script.window_tensors(args, cpu), [],
                            args, 0, 1, cpu)
    names = [re.fullmatch(r"(.*) [\d.]+s \(compiling [\d.]+s\)", part).group(1) for part in str(laps).split(", ")]
    assert names == parts
    assert len(model.windows) == warmup_steps + (1 if warmup_steps else 0)


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("profile_steps", [0, 1])
def test_the_warmup_trains_then_leaves_the_weights_and_every_optimizers_state_as_it_found_them(script, profile_steps,
                                                                                               monkeypatch):
    """3 real warmup steps (the last profiled, or not) and a validation, on a stand-in model with Adam and SGD with
    momentum (both keep state, and each micro-step's batch differs, so a state left behind changes the next update):
    training's first step after the warmup, on a stream of its own from the data's start, is the step of a model and
    optimizers that never warmed up. --warmup_steps=0 runs neither a step nor the validation."""

    def batches(*args):  # a fresh stream from the data's start each time: micro-step k's inputs are all k
        return ((torch.full((128,), k, dtype=torch.int32), torch.zeros(128, dtype=torch.int32))
                for k in itertools.count(1))

    def model_and_optimizers():
        model = WindowRecorder()
        adam = torch.optim.Adam([model.a], lr=0.1)
        sgd = torch.optim.SGD([model.b, model.c], lr=0.1, momentum=0.9)
        for group in adam.param_groups + sgd.param_groups:
            group["initial_lr"] = group["lr"]
        return model, [adam, sgd]

    monkeypatch.setattr(script, "train_batches", batches)
    args = script.Hyperparameters(num_iterations=6, warmup_steps=3, profile_steps=profile_steps, grad_accum_steps=2,
                                  train_seq_len=128, val_tokens=256, val_seq_len=128, device="cpu")
    cpu = torch.device("cpu")
    windows = script.window_tensors(args, cpu)
    casts = (lambda: None,) if script is train_gpt else ()  # track 1's weight_casts
    warmed, warmed_optimizers = model_and_optimizers()
    script.warmup(warmed, warmed, warmed_optimizers, *casts, torch.arange(257), windows, [], args, 0, 1, cpu)
    assert len(warmed.windows) == 3 * 2 + 1  # it ran: 3 steps of 2 micro-steps, then one validation sequence
    fresh, fresh_optimizers = model_and_optimizers()
    for model, optimizers in [(warmed, warmed_optimizers), (fresh, fresh_optimizers)]:
        script.train_step(model, optimizers, batches(), 0, args, windows, *casts)
    assert all(torch.equal(a, b) for a, b in zip(warmed.parameters(), fresh.parameters()))
    assert [p.item() for p in fresh.parameters()] != [1.0] * 3  # the step moved them
    args.warmup_steps, args.profile_steps = 0, 0
    script.warmup(fresh, fresh, fresh_optimizers, *casts, torch.arange(257), windows, [], args, 0, 1, cpu)
    assert len(fresh.windows) == 2  # the training step's 2 micro-steps alone


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_a_steps_loss_is_logged_from_its_host_copy_and_a_non_finite_one_stops_the_run(script):
    """On the CPU the host copy is the tensor itself and the mark a clock reading; the GPU's pinned copy and event
    are measured on the device (perf/NOTES.md)."""
    clock = script.TrainingClock(torch.device("cpu"))
    clock.start()
    lines = []
    log = SimpleNamespace(write=lines.append)
    args = SimpleNamespace(num_iterations=10)
    for step, value in [(3, 2.5), (4, float("nan")), (5, float("inf")), (6, float("-inf"))]:
        loss = torch.tensor(value)
        host_loss, end_mark = script.to_host_at_mark(loss, torch.device("cpu"))
        assert host_loss is loss
        stop = script.log_train_loss(log, (step, host_loss, end_mark), clock, args)
        assert stop == (None if step == 3 else f"non-finite train loss at step {step}")
    assert re.fullmatch(r"step:3/10 train_loss:2\.5000 train_time:\d+ms step_avg:[\d.]+ms", lines[0]), lines
    assert lines[1].startswith("step:4/10 train_loss:nan ")


def fake_clock_time(monkeypatch, script, now: list):
    """script's time.perf_counter reads now[0]; its process started at 100 s."""
    monkeypatch.setattr(script, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    monkeypatch.setattr(script, "PROCESS_START", 100.0)


def slow_device_sync(monkeypatch, script, now: list) -> list:
    """script's sync waits 0.5 s on the fake clock now[0] (the device running the work queued before it); returns the
    devices it waited for, in order."""
    waits = []

    def sync(device):
        waits.append(device)
        now[0] += 0.5

    monkeypatch.setattr(script, "sync", sync)
    return waits


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_the_training_clock_adds_up_its_running_spans_and_keeps_the_stopped_ones_as_validation_time(script,
                                                                                                   monkeypatch):
    """On a fake clock: 2 s of training, 3 s stopped for validation, 2 s of training (a step logged 1.5 s in), 1 s
    stopped, 0.25 s of training."""
    now = [100.0]
    fake_clock_time(monkeypatch, script, now)
    cpu, lines = torch.device("cpu"), []
    clock = script.TrainingClock(cpu)
    clock.start()
    now[0] = 102.0
    clock.stop()
    now[0] = 105.0
    clock.start()
    now[0] = 106.5
    end_mark = script.mark(cpu)
    assert clock.ms_at(end_mark) == 3500.0  # the earlier span and this one's time so far
    script.log_train_loss(SimpleNamespace(write=lines.append), (7, torch.tensor(2.0), end_mark), clock,
                          SimpleNamespace(num_iterations=10))
    assert lines == ["step:7/10 train_loss:2.0000 train_time:3500ms step_avg:500.00ms"]
    now[0] = 107.0
    clock.stop()
    now[0] = 108.0
    clock.start()
    now[0] = 108.25
    clock.stop()
    assert (clock.total_ms, clock.validation_s) == (4250.0, 4.0)


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_the_training_clock_reads_the_time_once_the_device_has_run_the_queued_work(script, monkeypatch):
    """The host runs ahead of the GPU: each of the clock's readings waits for the device first (here each wait takes
    0.5 s, the work queued when the host got there). A span's queued steps then count as training, and the queued
    work of a validation as validation: 2 s and 1 s of training, 3 s of validation."""
    now = [100.0]
    fake_clock_time(monkeypatch, script, now)
    waits = slow_device_sync(monkeypatch, script, now)
    cpu = torch.device("cpu")
    clock = script.TrainingClock(cpu)
    clock.start()  # the device catches up at 100.5 s: training starts
    now[0] = 102.0
    clock.stop()  # the steps queued until 102 s run until 102.5 s
    now[0] = 105.0
    clock.start()  # the validation queued until 105 s runs until 105.5 s
    now[0] = 106.0
    clock.stop()
    assert (clock.total_ms, clock.validation_s) == (3000.0, 3.0) and waits == [cpu] * 4


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_a_steps_loss_is_read_only_once_the_device_has_reached_the_steps_end(script, monkeypatch):
    """On the GPU the loss's host copy is filled while the host runs on: the host waits for the step's end mark (a
    CUDA event, stood in for here) before it reads the copy, and the step's time is the events' elapsed time."""

    class Event:
        """torch.cuda.Event's stand-in: synchronize() is the host's wait for the device to reach it."""

        def __init__(self):
            self.reached = False

        def synchronize(self):
            self.reached = True

        def elapsed_time(self, end):
            assert end.reached
            return 1500.0

    class HostCopy:
        def item(self):
            assert end_mark.reached, "the loss was read before the device wrote it"
            return 2.0

    monkeypatch.setattr(torch.cuda, "Event", Event)
    end_mark, clock, lines = Event(), script.TrainingClock(torch.device("cpu")), []
    clock.started_mark = Event()
    stop = script.log_train_loss(SimpleNamespace(write=lines.append), (3, HostCopy(), end_mark), clock,
                                 SimpleNamespace(num_iterations=10))
    assert stop is None and lines == ["step:3/10 train_loss:2.0000 train_time:1500ms step_avg:500.00ms"]


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("val_loss_every", [0, 2])
def test_training_stops_at_the_first_non_finite_train_loss_whether_read_in_the_loop_or_at_a_validation(
        script, val_loss_every, monkeypatch):
    """Step 2's loss is NaN: read once step 3 is queued (no validation), or at step 2's validation, where the run
    stops before validating (a NaN model validated would stop on its validation loss instead). Stand-ins for the
    step and the validation, on the CPU."""
    validated, stepped = [], []
    monkeypatch.setattr(script, "train_step", lambda *a: stepped.append(a[3]) or torch.tensor(
        float("nan") if a[3] == 1 else 2.0))
    monkeypatch.setattr(script, "evaluate", lambda model, tokens, args, rank, ws, window: validated.append(0) or 3.0)
    args = script.Hyperparameters(num_iterations=6, val_loss_every=val_loss_every, window_start=0, window_end=128,
                                  device="cpu")
    lines, cpu = [], torch.device("cpu")
    casts = (None,) if script is train_gpt else ()  # track 1's weight_casts
    stop = script.train(None, [], *casts, None, None, {1: None, 2: None}, SimpleNamespace(write=lines.append),
                        script.TrainingClock(cpu), args, 0, 1, cpu, 1e9)
    assert stop == "non-finite train loss at step 2"
    assert validated == ([0] if val_loss_every else [])  # step 0's validation only
    assert stepped == ([0, 1, 2] if val_loss_every == 0 else [0, 1])
    assert lines[-1].startswith("step:2/6 train_loss:nan ")


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_the_timed_loop_validates_on_its_cadence_and_at_the_end_and_times_the_steps_alone(script, monkeypatch):
    """On a fake clock, 5 steps of 1 s each with validation every 2 steps, 10 s each: validations at steps 0, 2, 4 and
    5 (the last, off the cadence), each with its own step's window; the train loss of a step logged before the
    validation that follows it, as the mean of the 2 ranks' (this rank's loss is step + 1, the other's 2 more); the
    clock's time the steps' alone, 1 s each, and the validations' 40 s kept apart; the start-up stamped once step 0's
    validation is done, before step 0 runs. 2 ranks x 256 tokens a step in 1 s: 512 tokens/s; 4e11 FLOPs a step in
    1 s against 2 GPUs of 1 TFLOPS: 20%."""
    now = [100.0]
    fake_clock_time(monkeypatch, script, now)
    stepped, validated, reduced = [], [], []

    def train_step(*args):
        stepped.append(args[3])
        now[0] += 1.0
        return torch.tensor(args[3] + 1.0)

    def evaluate(model, tokens, args, rank, world_size, window):
        validated.append((len(stepped), window))
        now[0] += 10.0
        return 9.0 - len(validated)

    def all_reduce(loss, op):  # the mean with the other rank, whose loss is 2 more
        reduced.append(op)
        loss += 1.0

    monkeypatch.setattr(script, "train_step", train_step)
    monkeypatch.setattr(script, "evaluate", evaluate)
    monkeypatch.setattr(script.dist, "all_reduce", all_reduce)
    # the window grows by a block a step: 1, 1, 2, 3, 4, 5 blocks at steps 0-5
    args = script.Hyperparameters(num_iterations=5, val_loss_every=2, window_start=0, window_end=5 * 128,
                                  train_seq_len=256, grad_accum_steps=1, peak_tflops=1.0, device="cpu")
    windows = {blocks: f"window of {blocks}" for blocks in range(1, 6)}
    lines, cpu = [], torch.device("cpu")
    clock = script.TrainingClock(cpu)
    casts = (None,) if script is train_gpt else ()  # track 1's weight_casts
    assert script.train(None, [], *casts, None, None, windows, SimpleNamespace(write=lines.append), clock, args, 0, 2,
                        cpu, 4e11) is None
    assert stepped == [0, 1, 2, 3, 4] and reduced == [script.dist.ReduceOp.AVG] * 5
    assert validated == [(0, "window of 1"), (2, "window of 2"), (4, "window of 4"), (5, "window of 5")]
    throughput = "step_avg:1000.00ms tokens/s:512 mfu:20.0%"
    assert lines == ["step:0/5 val_loss:8.0000 train_time:0ms",
                     "startup: first timed step at 10.0s",
                     "step:1/5 train_loss:2.0000 train_time:1000ms step_avg:1000.00ms",
                     "step:2/5 train_loss:3.0000 train_time:2000ms step_avg:1000.00ms",
                     f"step:2/5 val_loss:7.0000 train_time:2000ms {throughput}",
                     "step:3/5 train_loss:4.0000 train_time:3000ms step_avg:1000.00ms",
                     "step:4/5 train_loss:5.0000 train_time:4000ms step_avg:1000.00ms",
                     f"step:4/5 val_loss:6.0000 train_time:4000ms {throughput}",
                     "step:5/5 train_loss:6.0000 train_time:5000ms step_avg:1000.00ms",
                     f"step:5/5 val_loss:5.0000 train_time:5000ms {throughput}"]
    assert (clock.total_ms, clock.validation_s) == (5000.0, 40.0)
    # --val_loss_every=0: the last step's validation alone
    validated.clear()
    args.val_loss_every = 0
    script.train(None, [], *casts, None, None, windows, SimpleNamespace(write=lines.append), script.TrainingClock(cpu),
                 args, 0, 2, cpu, 4e11)
    assert validated == [(10, "window of 5")]


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("val_loss", [float("nan"), float("inf")], ids=["nan", "inf"])
def test_a_non_finite_validation_loss_stops_the_run_after_its_line(script, val_loss, monkeypatch):
    """Step 2's validation loss is not finite (NaN, or inf where the logits overflowed): its line is logged, then the
    run stops there, before step 2 runs. Stand-ins for the step and the validation, on the CPU."""
    stepped = []
    monkeypatch.setattr(script, "train_step", lambda *a: stepped.append(a[3]) or torch.tensor(2.0))
    monkeypatch.setattr(script, "evaluate", lambda model, tokens, args, rank, ws, window: val_loss if stepped else 3.0)
    args = script.Hyperparameters(num_iterations=6, val_loss_every=2, window_start=0, window_end=128, device="cpu")
    lines, cpu = [], torch.device("cpu")
    casts = (None,) if script is train_gpt else ()  # track 1's weight_casts
    stop = script.train(None, [], *casts, None, None, {1: None, 2: None}, SimpleNamespace(write=lines.append),
                        script.TrainingClock(cpu), args, 0, 1, cpu, 1e9)
    assert stop == "non-finite validation loss at step 2" and stepped == [0, 1]
    assert lines[-1].startswith(f"step:2/6 val_loss:{val_loss} ")


class LogLines:
    """A stand-in RunLog: each line written, with whether it goes to the console too."""

    def __init__(self):
        self.lines = []

    def write(self, text: str, console: bool = True):
        self.lines.append((text, console))


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("rank", [0, 1])
def test_finish_startup_logs_what_the_start_up_found_in_order_and_returns_the_start_ups_seconds(script, rank,
                                                                                              monkeypatch):
    """The builds' line, the profile table (log only), the compile cache's note (rank 0 writes the cache), the
    compile phases and the warmup's parts (log only), then the warmup's line with the start-up's seconds, which the
    closing time line repeats. The e2e runs reach none of the first lines: no builds or compile on the CPU."""
    now, saved = [130.0], []
    fake_clock_time(monkeypatch, script, now)
    monkeypatch.setattr(script, "save_compile_cache", lambda path: saved.append(path) or f"compile cache: to {path}")
    monkeypatch.setattr(script, "compile_phases", lambda: "_compile.compile_inner 9.0")
    monkeypatch.setattr(script, "compile_cache_lookups", lambda: "1 hit")
    device = (torch.device("cpu"),) if script is train_gpt else ()  # track 1's FP8 MLP line is the GPU's
    args = script.Hyperparameters(warmup_steps=10, profile_steps=2, compile=True, compile_cache="c.bin")
    log, builds = LogLines(), SimpleNamespace(finish=lambda: "startup: 3 kernel launches built")
    assert script.finish_startup(log, builds, "TABLE", "step 1 2.0s", args, rank, *device, 110.0) == 30.0
    assert log.lines == [("startup: 3 kernel launches built", True),
                         ("profile of warmup steps 9-10:\nTABLE", False),
                         *([("compile cache: to c.bin", True)] if rank == 0 else []),
                         ("compile phases (s): _compile.compile_inner 9.0; cache lookups: 1 hit", False),
                         ("warmup parts: step 1 2.0s", False),
                         ("warmup: 10 steps in 20.0s (compile included, state restored); training starts at 30.0s",
                          True)]
    assert saved == (["c.bin"] if rank == 0 else [])
    monkeypatch.setattr(script, "save_compile_cache", lambda path: None)  # no --compile_cache: no note
    log, args = LogLines(), script.Hyperparameters(warmup_steps=0, profile_steps=0, compile=False)
    assert script.finish_startup(log, None, None, "", args, rank, *device, 125.0) == 30.0
    assert log.lines == [("warmup parts: ", False),
                         ("warmup: 0 steps in 5.0s (compile included, state restored); training starts at 30.0s", True)]


class ModelBuilt(Exception):
    """Raised by main's stand-in GPT: the test stops main there, once the start-up's first lines are logged."""


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("note", ["compile cache: 3 artifacts loaded from c.bin in 0.2s", None], ids=["loaded", "none"])
def test_main_logs_the_compile_caches_load_once_the_log_is_open(script, note, tmp_path, monkeypatch):
    """The cache is loaded before the log opens (its note waits): the log-opened line says it was loaded, and its note
    (load_compile_cache's, None without a file) follows the setup's notes. The e2e runs have no cache."""
    monkeypatch.setattr(script, "ERROR_LOG", script.NullLog())  # main's log becomes it
    monkeypatch.setattr(script, "check_data", lambda args, ws, accum: ([], []))
    monkeypatch.setattr(script, "reuse_freed_cpu_memory", lambda: None)
    monkeypatch.setattr(script, "load_compile_cache", lambda path: note)
    monkeypatch.setattr(script, "GPT", lambda args: (_ for _ in ()).throw(ModelBuilt()))
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    argv = ["--device=cpu", f"--logs_dir={tmp_path}", "--run_id=cache", "--compile_cache=c.bin"]
    monkeypatch.setattr(sys, "argv", [f"{script.__name__}.py", *argv])
    with pytest.raises(ModelBuilt):
        script.main()
    lines = (tmp_path / "cache.txt").read_text().splitlines()
    opened = [i for i, line in enumerate(lines) if line.startswith("startup: settings and data checked")]
    loaded = ", compile cache loaded" if note else ""
    assert len(opened) == 1
    assert re.fullmatch(rf"startup: settings and data checked{loaded}, log opened at [\d.]+s", lines[opened[0]])
    args = script.parse_args(argv)
    args.grad_accum_steps = 8
    assert lines[opened[0] + 1:] == [*script.setup_notes(args, 1), *([note] if note else [])]


@pytest.mark.parametrize("fp8_mlp, exact, line", [
    (True, True, "FP8 MLP backward: one pass (start-up check exact)"),
    (True, False, "FP8 MLP backward: two passes (the one-pass kernel failed its start-up check: ptxas torch's)"),
    (False, None, None),
])
def test_finish_startup_says_which_fp8_mlp_backward_the_gpus_start_up_check_chose(fp8_mlp, exact, line, monkeypatch):
    """After the builds' line (the builds answer the check), on the GPU with --fp8_mlp only; never on the CPU."""
    fake_clock_time(monkeypatch, train_gpt, [130.0])
    checked = []
    monkeypatch.setattr(train_gpt, "one_pass_relu_square_is_exact", lambda device: checked.append(device) or exact)
    monkeypatch.setattr(train_gpt, "ptxas_in_use", lambda: "torch's")
    args = train_gpt.Hyperparameters(warmup_steps=0, profile_steps=0, compile=False, fp8_mlp=fp8_mlp)
    builds = SimpleNamespace(finish=lambda: "startup: built")
    for device in (torch.device("cuda", 0), torch.device("cpu")):
        log = LogLines()
        train_gpt.finish_startup(log, builds if device.type == "cuda" else None, None, "", args, 1, device, 130.0)
        fp8 = [(line, True)] if device.type == "cuda" and line else []
        assert log.lines[:-2] == ([("startup: built", True)] if device.type == "cuda" else []) + fp8
    assert checked == ([torch.device("cuda", 0)] if fp8_mlp else [])


class Exited(Exception):
    """os._exit's stand-in: the process would end here."""


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("stop", [None, "non-finite train loss at step 7"], ids=["finished", "stopped"])
@pytest.mark.parametrize("rank, world_size, device", [(0, 1, "cpu"), (1, 2, "cpu"), (0, 2, "cuda")])
def test_end_run_writes_the_closing_lines_and_exits_1_where_the_run_stopped_short(script, stop, rank, world_size,
                                                                                  device, monkeypatch):
    """Why the run stopped (the log's and, shown on the console by rank 0 only, torchrun's summary's), the time line
    (a stopped run's clock stopped first, so that its last steps count), the GPU's peak memory; then the process
    group left, and exit status 1 for a stopped run: through os._exit for several CPU processes, whose gloo threads
    can abort the interpreter's teardown."""
    now, told, left = [110.0], [], []
    fake_clock_time(monkeypatch, script, now)
    monkeypatch.setattr(script, "tell_launcher", lambda line, shown: told.append((line, shown)))
    monkeypatch.setattr(script.dist, "destroy_process_group", lambda: left.append(True))
    monkeypatch.setattr(os, "_exit", lambda code: (_ for _ in ()).throw(Exited(code)))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda: 3 * 2**20 + 5)
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda: 4 * 2**20)
    clock = script.TrainingClock(torch.device("cpu"))  # 1 s of training, 3 s of validation, 2 s of training
    clock.start()
    now[0] = 111.0
    clock.stop()
    now[0] = 114.0
    clock.start()
    now[0] = 116.0
    if stop is None:  # train stopped it for the last validation
        clock.stop()
    now[0] = 117.0  # a stopped run's clock runs until end_run: 1 s more of training
    log = LogLines()
    code = 0 if stop is None else 1
    exits = Exited if world_size > 1 and device == "cpu" else SystemExit
    if code or exits is Exited:
        with pytest.raises(exits) as exited:
            script.end_run(log, stop, clock, 9.5, rank, world_size, torch.device(device))
        assert exited.value.args[0] == code
    else:
        assert script.end_run(log, stop, clock, 9.5, rank, world_size, torch.device(device)) is None
    stopped = f"stopped: {stop}; lower the learning rates or check the data"
    training = "3.0" if stop is None else "4.0"
    assert log.lines == [*([(stopped, True)] if stop else []),
                         (f"time: startup 9.5s, training {training}s, validation 3.0s, total 17.0s", True),
                         *([("peak memory allocated: 3 MiB reserved: 4 MiB", True)] if device == "cuda" else [])]
    assert told == ([(stopped, rank == 0)] if stop else [])
    assert left == ([True] if world_size > 1 else [])


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_a_validation_line_gives_throughput_of_all_ranks_and_mfu_per_gpu(script):
    """8 GPUs x 1 micro-step or 2 x 4 take the same 8 x 48K = 393,216 tokens a step. 50 steps in 25 s: 500 ms a
    step, 393,216 / 0.5 s = 786,432 tokens/s. 8e14 FLOPs a step in 0.5 s is 1.6e15 FLOP/s, against 8 GPUs x 500
    TFLOPS = 4e15: 40% (one GPU's peak alone would give 320%)."""
    args = script.Hyperparameters(num_iterations=100, peak_tflops=500.0, train_seq_len=48 * 1024, grad_accum_steps=1)
    assert script.global_batch_tokens(args, 8) == 8 * 1 * 49_152 == 393_216
    args.grad_accum_steps = 4
    assert script.global_batch_tokens(args, 2) == 2 * 4 * 49_152 == 393_216
    line = script.validation_line(50, 3.2817, 25_000.0, args, 393_216, 8e14, 8)
    assert line == "step:50/100 val_loss:3.2817 train_time:25000ms step_avg:500.00ms tokens/s:786432 mfu:40.0%"
    # before the first step there is no step time to divide by
    first = script.validation_line(0, 10.8258, 0.0, args, 393_216, 8e14, 8)
    assert first == "step:0/100 val_loss:10.8258 train_time:0ms"


def fake_nvidia_smi(folder: Path, body: str, monkeypatch):
    """An executable nvidia-smi in folder, first on PATH: a shell script whose lines after the first are body."""
    smi = folder / "nvidia-smi"
    smi.write_text(body)
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_the_log_header_ends_with_nvidia_smis_table(script, tmp_path, monkeypatch):
    fake_nvidia_smi(tmp_path, '#!/bin/sh\necho "| NVIDIA-SMI 580.65 |"\necho "| 0  NVIDIA H200 |"\n', monkeypatch)
    log = script.RunLog(str(tmp_path / "run.txt"), b"source\n", "train_gpt.py")
    log.header(script.Hyperparameters(), "run", 1)
    assert (tmp_path / "run.txt").read_text().endswith("nvidia-smi:\n  | NVIDIA-SMI 580.65 |\n  | 0  NVIDIA H200 |\n")


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("under_torchrun, world_size, launcher", [
    (True, 1, "torchrun --standalone --nproc_per_node=1"), (True, 2, "torchrun --standalone --nproc_per_node=2"),
    (False, 1, "python")], ids=["torchrun 1 process", "torchrun 2 processes", "python"])
def test_the_log_headers_command_is_torchrun_for_a_torchrun_launch_of_one_process_too(script, tmp_path, monkeypatch,
                                                                                      under_torchrun, world_size,
                                                                                      launcher):
    """records/tool.py reruns a log by its command: line. A 1-process torchrun run (./run.sh on one GPU) set
    TORCHELASTIC_RUN_ID but has world size 1; a launcher chosen by the world size would log `python`, and the rerun
    would start the script without torchrun's variables and its error file."""
    monkeypatch.setattr(sys, "argv", ["train_gpt.py", "--device=cpu", "--run_id=a b"])
    if under_torchrun:
        monkeypatch.setenv("TORCHELASTIC_RUN_ID", "none")
    else:
        monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi: the header's table is not this test's
    log = script.RunLog(str(tmp_path / "run.txt"), b"source\n", "train_gpt.py")
    log.header(script.Hyperparameters(), "run", world_size)
    commands = [line for line in (tmp_path / "run.txt").read_text().splitlines() if line.startswith("command: ")]
    assert commands == [f"command: {launcher} train_gpt.py --device=cpu '--run_id=a b'"]


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_a_hung_nvidia_smi_costs_the_header_its_table_not_the_run(script, tmp_path, monkeypatch):
    """The header asks nvidia-smi with a time limit of its own (the case below passes one): without it, a broken
    driver's nvidia-smi that never answers would hold the run in its header forever. A stand-in for the call."""
    fake_nvidia_smi(tmp_path, "#!/bin/sh\n", monkeypatch)

    def hung(command, timeout=None, **kwargs):
        if timeout is None:
            raise AssertionError("nvidia-smi never answers: the run would wait here forever")
        raise subprocess.TimeoutExpired(command, timeout)

    monkeypatch.setattr(script.subprocess, "run", hung)
    log = script.RunLog(str(tmp_path / "run.txt"), b"source\n", "train_gpt.py")
    log.header(script.Hyperparameters(), "run", 1)
    assert re.search(r"\nnvidia-smi:\n  not read: Command '\['nvidia-smi'\]' timed out after \d+ seconds\n\Z",
                     (tmp_path / "run.txt").read_text())


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_rank_0s_log_is_made_with_its_folders_and_starts_with_the_scripts_exact_source(script, tmp_path, monkeypatch,
                                                                                          capsys):
    """check_files makes nothing, so a --logs_dir that does not exist yet is made with the log; other ranks write
    nothing. The source, byte for byte, then the separator that records/tool.py cuts it at; the error line of a
    later failure goes to this log."""
    monkeypatch.setattr(script, "ERROR_LOG", script.NullLog())
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi: no table, and no line saying it is missing
    argv = ["train_gpt.py", "--run_id=r", "--logs_dir=a b", "--train_files=\"x\"*.bin"]
    monkeypatch.setattr(sys, "argv", argv)
    args = script.Hyperparameters(device="cpu", logs_dir=str(tmp_path / "new" / "logs"), run_id="r", compile=False)
    assert isinstance(script.open_log(args, 1, 2), script.NullLog) and not (tmp_path / "new").exists()
    log = script.open_log(args, 0, 2)
    path = tmp_path / "new" / "logs" / "r.txt"
    assert capsys.readouterr().out == f"log: {path}\n" and script.ERROR_LOG is log  # the header is the log's only
    source, name = Path(script.__file__).read_bytes(), Path(script.__file__).name
    written = path.read_bytes()
    assert written[:len(source)] == source and source.endswith(b"\n")
    header = written[len(source):].decode()
    assert header.startswith(f"{'=' * 20} end of source: {name}, {len(source)} bytes {'=' * 20}\nrun_id: r\n")
    lines = dict(line.split(": ", 1) for line in header.splitlines()[1:] if ": " in line and line[0] != " ")
    assert json.loads(lines["argv"]) == argv and lines["world_size"] == "2"  # what records/tool.py reruns by
    assert "  compile: false" in header.splitlines() and "nvidia-smi" not in header


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_the_headers_date_is_utc_whatever_the_machines_time_zone(script, tmp_path, monkeypatch):
    """The date line ends in Z (UTC): a machine 5.5 hours east of it must not write its own clock's time there."""
    from datetime import datetime, timezone

    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi: the header's table is not this test's
    zone = os.environ.get("TZ")
    os.environ["TZ"] = "IST-5:30"  # POSIX: UTC + 5:30, no zone files needed
    time.tzset()
    try:
        log = script.RunLog(str(tmp_path / "run.txt"), b"source\n", "train_gpt.py")
        log.header(script.Hyperparameters(), "run", 1)
    finally:
        os.environ.pop("TZ") if zone is None else os.environ.update(TZ=zone)
        time.tzset()
    [date] = re.findall(r"^date: (.*)$", (tmp_path / "run.txt").read_text(), re.MULTILINE)
    written = datetime.strptime(date, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    assert abs((datetime.now(timezone.utc) - written).total_seconds()) < 60


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("gpus", [[], ["NVIDIA H100 80GB HBM3"] * 8], ids=["no GPU", "8 GPUs"])
def test_the_headers_environment_lines_are_what_records_tool_compares_a_rerun_with(script, gpus, monkeypatch):
    """rerun warns about each of python, torch, cuda, triton and gpu that differs between a log's header and the
    machine: a line missing from the header (a key renamed or dropped) is never compared, and one written otherwise
    ('None' for no CUDA, a GPU without its count) differs on the very machine that wrote it."""
    tool = records_tool()
    monkeypatch.setattr(tool, "torch_build", lambda: {"__version__": torch.__version__, "cuda": "13.0"})
    monkeypatch.setattr(torch.cuda, "is_available", lambda: bool(gpus))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(gpus))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: gpus[i])
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))  # the header's ptxas line
    header = script.environment()
    assert {key: header[key] for key in tool.ENV_KEYS} == tool.current_environment()


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("case", ["hangs", "cannot start"])
def test_an_nvidia_smi_that_hangs_or_cannot_start_is_one_line_in_the_log_not_a_crash(script, case, tmp_path,
                                                                                    monkeypatch):
    """The table is for the record; a broken driver's nvidia-smi that never answers, or one that cannot run, leaves
    a line saying why in its place."""
    body = "#!/bin/sh\nexec sleep 30\n" if case == "hangs" else "#!/no/such/shell\n"
    fake_nvidia_smi(tmp_path, body, monkeypatch)
    started = time.monotonic()
    [line] = script.nvidia_smi_lines(timeout_s=0.5)
    assert time.monotonic() - started < 10
    if case == "hangs":
        assert line == "not read: Command '['nvidia-smi']' timed out after 0.5 seconds"
    else:
        assert line.startswith("not read: [Errno ") and "nvidia-smi" in line


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_an_uncaught_error_ends_the_log_with_its_first_line_then_reaches_the_console(script, tmp_path,
                                                                                    monkeypatch, capsys):
    """A crash's type and first line: torchrun's error file gets it on every rank, rank 0's log once it is open, and
    the console the whole error after (Python's hook, here a stand-in), not the line as well."""
    seen = []
    monkeypatch.setattr(sys, "excepthook", lambda *error: seen.append(error))
    monkeypatch.setattr(script, "ERROR_LOG", script.NullLog())
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(tmp_path / "error.json"))
    script.report_crashes()
    error = RuntimeError("NCCL communicator was aborted on rank 1\nmore detail")
    line = "error: RuntimeError: NCCL communicator was aborted on rank 1"
    sys.excepthook(type(error), error, None)  # before a log opens, or on a rank without one
    assert json.loads((tmp_path / "error.json").read_text())["message"] == line
    assert json.loads((tmp_path / "error.json").read_text())["shown"] is True  # the traceback is on its console

    log = script.RunLog(str(tmp_path / "run.txt"), b"source\n", "train_gpt.py")
    script.end_log_with_errors(log)
    sys.excepthook(type(error), error, None)
    assert (tmp_path / "run.txt").read_text().splitlines()[-1] == line
    assert seen == [(type(error), error, None)] * 2
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("rank", ["0", "1"])
def test_a_setup_error_after_the_log_opened_ends_the_log_with_the_consoles_line(script, rank, tmp_path, monkeypatch,
                                                                                capsys):
    """A shard that changes during the run raises a DataError from the training loop: the log ends with the same one
    line as rank 0's console, and the process exits with 2; before a log opens, only the console has it."""
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    monkeypatch.setattr(script, "ERROR_LOG", script.NullLog())
    monkeypatch.setenv("RANK", rank)
    monkeypatch.setenv("WORLD_SIZE", "2")
    error = script.DataError("data/train_001.bin: truncated: header promises 100 tokens (456 bytes) but the file has "
                             "300 bytes; download it again")
    with pytest.raises(SystemExit) as before_log:
        script.exit_with_setup_error(error)
    assert before_log.value.code == 2
    assert capsys.readouterr().err == ("" if rank == "1" else f"error: {error}\n")

    log = script.RunLog(str(tmp_path / "run.txt"), b"source\n", "train_gpt.py")
    script.end_log_with_errors(log)
    log.write("step:10/100 train_time:500ms", console=False)
    with pytest.raises(SystemExit) as after_log:
        script.exit_with_setup_error(error)
    assert after_log.value.code == 2
    assert (tmp_path / "run.txt").read_text().splitlines()[-2:] == ["step:10/100 train_time:500ms", f"error: {error}"]
    assert capsys.readouterr() == ("", "" if rank == "1" else f"error: {error}\n")



@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_an_error_line_goes_to_the_error_file_torchrun_reads_for_its_summary(script, tmp_path, monkeypatch, capsys):
    """Under torchrun each rank has an error file whose message the launcher's summary prints as the failure's cause
    ("To enable traceback see ..." where a rank wrote none): the error's one line, read back by torch's own reader;
    every rank writes its own, also one that prints nothing. Without the variable no file is written, and a file that
    cannot be written leaves the exit as it was."""
    monkeypatch.setattr(script, "ERROR_LOG", script.NullLog())
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.delenv("TORCHELASTIC_ERROR_FILE", raising=False)
    error = script.DataError("no train shards match data/x_*.bin; download them")
    with pytest.raises(SystemExit):
        script.exit_with_setup_error(error)
    assert list(tmp_path.iterdir()) == []

    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(tmp_path / "error.json"))
    with pytest.raises(SystemExit) as exited:
        script.exit_with_setup_error(error)
    assert exited.value.code == 2 and capsys.readouterr().err == ""
    failure = ProcessFailure(local_rank=1, pid=1, exitcode=2, error_file=str(tmp_path / "error.json"))
    assert failure.message == f"error: {error}" and abs(failure.timestamp - time.time()) < 60
    assert failure.error_file_data["shown"] is False  # rank 0 prints a setting's error: run.sh names rank 0
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(SystemExit):
        script.exit_with_setup_error(error)
    assert json.loads((tmp_path / "error.json").read_text())["shown"] is True

    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(tmp_path))  # a folder: open() fails
    with pytest.raises(SystemExit) as exited:
        script.exit_with_setup_error(error)
    assert exited.value.code == 2


@pytest.mark.parametrize("script", ["train_gpt.py", "train_gpt_medium.py"])
def test_torchruns_summary_names_the_error_when_torchrun_is_run_directly(script):
    """torchrun run by hand (not ./run.sh), a bad setting: the launcher's own summary after the ranks' lines gives the
    error's line as each rank's cause."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT")}
    result = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                             script, "--device=cpu", "--num_iterations=abc"], cwd=REPO_ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stderr[-3000:]
    summary = result.stderr[result.stderr.index("Root Cause"):]
    assert "traceback : error: --num_iterations=abc is not an integer" in summary, summary
    assert "To enable traceback" not in result.stderr

TORCH_OOM = ("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.55 GiB of which "
             "1.20 GiB is free. Including non-PyTorch memory, this process has 22.33 GiB memory in use. If reserved "
             "but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")


class OutOfMemoryModel(torch.nn.Module):
    def __init__(self, in_forward: bool):
        super().__init__()
        self.in_forward = in_forward

    def forward(self, *inputs):
        if self.in_forward:
            raise torch.OutOfMemoryError(TORCH_OOM)
        return torch.zeros((), requires_grad=True)

    def take_table_grads(self):
        """GPT's hand-over of its embedding tables' summed gradients: this model has no tables."""


class OutOfMemoryOptimizer:
    """An optimizer step runs under no_grad, as validation does."""
    param_groups = []

    @torch.no_grad()
    def step(self):
        raise torch.OutOfMemoryError(TORCH_OOM)


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("phase", ["training", "optimizer", "validation"])
@pytest.mark.parametrize("world", [("1", "0"), ("2", "1")], ids=["one_rank", "rank_1_of_2"])
def test_out_of_gpu_memory_ends_in_one_line_naming_the_setting_to_lower(script, phase, world, tmp_path, monkeypatch,
                                                                         capsys):
    """A card too small for the settings: the line names the sequence length of the phase that ran out (validation
    runs at its own length; the optimizer's step, no_grad as validation is, counts as training) and torch's first
    three sentences, on the rank's own console (any rank can run out first), and ends the log; exit code 2, no
    traceback."""
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    monkeypatch.setenv("WORLD_SIZE", world[0])
    monkeypatch.setenv("RANK", world[1])
    log = script.RunLog(str(tmp_path / "run.txt"), b"source\n", "train_gpt.py")
    script.end_log_with_errors(log)
    args = script.Hyperparameters(val_tokens=512, val_seq_len=256, grad_accum_steps=1)
    window = torch.tensor(1)
    with pytest.raises(torch.OutOfMemoryError) as raised:
        if phase == "validation":
            script.evaluate(OutOfMemoryModel(True), torch.zeros(1024, dtype=torch.long), args, 0, 1, window)
        else:
            casts = [list] if script is train_gpt else []  # track 1's weight casts: none here
            script.train_step(OutOfMemoryModel(phase == "training"), [OutOfMemoryOptimizer()], iter([(None, None)]),
                              0, args, {script.window_blocks_at(0, args): window}, *casts)
    with pytest.raises(SystemExit) as exited:
        script.exit_with_out_of_memory(raised.value)
    setting = ("--val_seq_len (a multiple of 128 that divides --val_tokens / world size)" if phase == "validation" else
               "--train_seq_len (a multiple of 128; a shorter sequence changes the batch and so the result)")
    line = (f"error: {'rank 1: ' if world[0] == '2' else ''}out of GPU memory in "
            f"{'validation' if phase == 'validation' else 'training'} (CUDA out of memory. Tried to "
            "allocate 2.00 GiB. GPU 0 has a total capacity of 23.55 GiB of which 1.20 GiB is free); lower "
            f"{setting}, or stop the GPU's other processes")
    assert exited.value.code == 2
    assert capsys.readouterr() == ("", line + "\n")
    assert (tmp_path / "run.txt").read_text().splitlines()[-1] == line


def raise_out_of_memory(*args, **kwargs):
    raise torch.OutOfMemoryError(TORCH_OOM)


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("part", ["model", "optimizers"])
def test_out_of_memory_building_the_model_names_its_size_settings(script, part, tmp_path, monkeypatch, capsys):
    """Out of memory while the model or its optimizers are built (a block's MLP, Muon's state): the sequence length
    would not help, the model's size settings would."""
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("RANK", "0")
    script.end_log_with_errors(script.RunLog(str(tmp_path / "run.txt"), b"source\n", "train_gpt.py"))
    args = script.parse_args(["--device=cpu", "--model_dim=64", "--vocab_size=200", "--num_heads=2", "--head_dim=32"])
    monkeypatch.setattr(script, "MLP" if part == "model" else "Muon", raise_out_of_memory)
    with pytest.raises(torch.OutOfMemoryError) as raised:
        script.build_optimizers(script.GPT(args), args, script.Comm(0, 1))
    with pytest.raises(SystemExit) as exited:
        script.exit_with_out_of_memory(raised.value)
    line = ("error: out of GPU memory building the model (CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has "
            "a total capacity of 23.55 GiB of which 1.20 GiB is free); lower --model_dim, --num_layers, --mlp_ratio "
            "or --vocab_size (the model's size: they change the method), or stop the GPU's other processes")
    assert exited.value.code == 2
    assert capsys.readouterr() == ("", line + "\n")
    assert (tmp_path / "run.txt").read_text().splitlines()[-1] == line


CPU_OOM = ("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to "
           "allocate 4398046511104 bytes. Error code 12 (Cannot allocate memory)")  # torch 2.13's, for 4 TiB
# run_through_harness's harness: the script's first backward raises torch's error with the message given last in
# its place (torch.OutOfMemoryError for the GPU's message, else RuntimeError)
RUN_WITH_BACKWARD_RAISING = """
import runpy, sys, torch
message = sys.argv.pop()
def raise_in_backward(*args, **kwargs):
    out_of_gpu_memory = "CUDA out of memory" in message
    raise (torch.OutOfMemoryError if out_of_gpu_memory else RuntimeError)(message)
torch.Tensor.backward = raise_in_backward
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def run_through_harness(harness: str, script: str, tmp_path: Path, env: dict, *harness_args: str
                        ) -> subprocess.CompletedProcess:
    """A tiny CPU run of script as a user starts it, under harness (Python source that takes harness_args off the
    end of sys.argv, then runs the script), on shards written to tmp_path; its log is tmp_path/run.txt. The launch
    variables are env's only."""
    tokens = documents(60_000)
    write_shard(tmp_path / "t_train_000001.bin", tokens)
    write_shard(tmp_path / "t_val_000000.bin", tokens[:4_000])
    env = {**{k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}, **env}
    return subprocess.run([sys.executable, "-c", harness, script, "--device=cpu", "--compile=false", "--model_dim=64",
                           "--num_heads=2", "--head_dim=32", "--train_seq_len=512", "--val_seq_len=512",
                           "--val_tokens=1024", "--num_iterations=2", f"--train_files={tmp_path}/t_train_*.bin",
                           f"--val_files={tmp_path}/t_val_*.bin", f"--logs_dir={tmp_path}", "--run_id=run",
                           *harness_args], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("script", ["train_gpt.py", "train_gpt_medium.py"])
@pytest.mark.parametrize("memory", ["GPU", "CPU"])
def test_a_run_out_of_memory_stops_with_the_one_line_and_no_traceback(script, memory, tmp_path):
    """The script as a user runs it, its first backward out of memory (torch's error raised in its place: a CPU run
    cannot run out of GPU memory, and running out of the machine's is no test to run): the console's only error
    output and the log's last line are the one line, exit code 2. Out of CPU memory (torch's RuntimeError) used to be
    a traceback."""
    result = run_through_harness(RUN_WITH_BACKWARD_RAISING, script, tmp_path, {},
                                 TORCH_OOM if memory == "GPU" else CPU_OOM)
    torch_says = ("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.55 GiB of which "
                  "1.20 GiB is free" if memory == "GPU" else
                  "can't allocate memory: you tried to allocate 4398046511104 bytes. Error code 12 (Cannot allocate "
                  "memory)")
    line = (f"error: out of {memory} memory in training ({torch_says}); lower --train_seq_len (a multiple of 128; a "
            f"shorter sequence changes the batch and so the result), or stop the "
            f"{'GPU' if memory == 'GPU' else 'machine'}'s other processes")
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1] == line and "Traceback" not in result.stderr
    assert (tmp_path / "run.txt").read_text().splitlines()[-1] == line


@pytest.mark.parametrize("script", ["train_gpt.py", "train_gpt_medium.py"])
def test_a_crash_ends_the_log_and_torchruns_error_file_with_its_first_line(script, tmp_path):
    """The script as a user runs it under torchrun (its error file named), its first backward raising an error of no
    kind the script expects: the console gets the whole traceback, the log and the error file the error's type and
    first line; exit code 1, Python's own."""
    result = run_through_harness(RUN_WITH_BACKWARD_RAISING, script, tmp_path,
                                 {"TORCHELASTIC_ERROR_FILE": str(tmp_path / "error.json")},
                                 "NCCL communicator was aborted on rank 1\nmore detail")
    line = "error: RuntimeError: NCCL communicator was aborted on rank 1"
    assert result.returncode == 1 and "Traceback" in result.stderr, result.stderr[-3000:]
    assert (tmp_path / "run.txt").read_text().splitlines()[-1] == line
    assert json.loads((tmp_path / "error.json").read_text())["message"] == line
    assert json.loads((tmp_path / "error.json").read_text())["shown"] is True  # the traceback is on its console


TINY_KERNEL_ARGS = ["--device=cpu", "--model_dim=64", "--vocab_size=200", "--num_heads=2", "--head_dim=32"]


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_the_start_ups_kernel_builds_launch_every_kernel_a_custom_op_launches(script, triton_interpreter,
                                                                              require_interpreted, monkeypatch):
    """Every Triton kernel of the script is launched from a custom op at run time, where a cold start built it inside
    warmup step 1: the start-up's tiny launches and Newton-Schulz builds cover them all, and each runs (here in turn:
    Triton's interpreter is not thread-safe)."""
    require_interpreted(script.softcap_ce_kernel)
    launched, run = [], triton_interpreter.InterpretedFunction.run

    def recording_run(kernel, *args, **kwargs):
        launched.append(kernel.fn.__name__)
        return run(kernel, *args, **kwargs)

    monkeypatch.setattr(triton_interpreter.InterpretedFunction, "run", recording_run)
    args = script.parse_args(TINY_KERNEL_ARGS)
    for launch in script.tiny_kernel_launches(args, torch.device("cpu")):
        launch()
    script.newton_schulz_builds(script.build_optimizers(script.GPT(args), args, script.Comm(0, 1))[-1],
                                torch.device("cpu"))
    kernels = {name for name, value in vars(script).items()
               if isinstance(value, triton_interpreter.InterpretedFunction) and name.endswith("_kernel")}
    assert set(launched) == kernels


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_kernel_builds_run_on_worker_threads_the_first_alone_and_a_failed_one_raises_when_they_finish(script):
    events, lock = [], threading.Lock()
    switch_interval = sys.getswitchinterval()
    builds_interval = getattr(script, "BUILDS_SWITCH_INTERVAL", switch_interval)  # track 2 keeps Python's
    assert train_gpt.BUILDS_SWITCH_INTERVAL < switch_interval

    def build(name: str, error: Exception | None = None):
        def launch():
            with lock:
                events.append(("start", name, threading.get_ident()))
                assert sys.getswitchinterval() == builds_interval
            time.sleep(0.05)
            with lock:
                events.append(("end", name, threading.get_ident()))
            if error is not None:
                raise error
        return launch

    note = script.KernelBuilds([build("a"), build("b"), build("c")], torch.device("cpu")).finish()
    assert re.fullmatch(r"startup: 3 kernel launches built on worker threads in [\d.]+s", note), note
    assert [event[:2] for event in events[:2]] == [("start", "a"), ("end", "a")]  # the others wait for the first
    assert sorted(event[:2] for event in events[2:]) == [("end", "b"), ("end", "c"), ("start", "b"), ("start", "c")]
    assert threading.get_ident() not in {event[2] for event in events}
    assert sys.getswitchinterval() == switch_interval  # restored for training

    for failing_at in (0, 1):  # the first (the others never run) or another
        events.clear()
        launches = [build(name, RuntimeError("ptxas failed") if i == failing_at else None)
                    for i, name in enumerate("ab")]
        builds = script.KernelBuilds(launches, torch.device("cpu"))
        with pytest.raises(RuntimeError, match="ptxas failed"):
            builds.finish()
        assert sys.getswitchinterval() == switch_interval
        assert len(events) == (2 if failing_at == 0 else 4)


def on_four_threads_at_once(target):
    """target(0), ..., target(3), each on a thread of its own, all started before any is joined."""
    threads = [threading.Thread(target=target, args=(index,)) for index in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_threads_take_turns_creating_launchers_and_a_second_call_adds_no_turn(script):
    inside, most, lock = [0], [0], threading.Lock()

    class Launcher:
        def __init__(self, arity):
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(0.02)
            with lock:
                inside[0] -= 1

    def create_at_once(launcher_class):
        most[0] = 0
        on_four_threads_at_once(launcher_class)
        return most[0]

    assert create_at_once(Launcher) > 1  # the count sees threads overlap
    driver = SimpleNamespace(launcher_cls=Launcher)
    script.launchers_one_at_a_time(driver)
    one_at_a_time = driver.launcher_cls
    script.launchers_one_at_a_time(driver)
    assert driver.launcher_cls is one_at_a_time and issubclass(one_at_a_time, Launcher)
    assert create_at_once(driver.launcher_cls) == 1


def launcher_module_source(arity: int) -> str:
    """A C module named as Triton's launchers, whose launch() takes arity ints and returns arity."""
    names = [f"a{i}" for i in range(arity)]
    return f"""#include <Python.h>
static PyObject* launch(PyObject* self, PyObject* args) {{
  int {", ".join(names)};
  if (!PyArg_ParseTuple(args, "{"i" * arity}", {", ".join("&" + name for name in names)})) return NULL;
  return PyLong_FromLong({arity});
}}
static PyMethodDef methods[] = {{{{"launch", launch, METH_VARARGS, NULL}}, {{NULL, NULL, 0, NULL}}}};
static struct PyModuleDef module = {{PyModuleDef_HEAD_INIT, "__triton_launcher", NULL, -1, methods}};
PyMODINIT_FUNC PyInit___triton_launcher(void) {{ return PyModule_Create(&module); }}
"""


@pytest.fixture(scope="module")
def triton_module_loader(tmp_path_factory):
    """Triton's compile_module_from_src, building into a cache folder of this module's tests; skips where no C
    compiler or Python headers build a module."""
    from triton.runtime.build import compile_module_from_src
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRITON_CACHE_DIR", str(tmp_path_factory.mktemp("triton_cache")))
        try:
            compile_module_from_src(launcher_module_source(2), "__triton_launcher")
        except (RuntimeError, subprocess.CalledProcessError) as error:
            pytest.skip(f"Triton cannot build a C module here: {error}")
        yield compile_module_from_src


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_launchers_created_in_turns_keep_their_own_launch_where_triton_shares_one_module(script,
                                                                                         triton_module_loader):
    class Launcher:  # what Triton's CudaLauncher does: load its signature's module, keep its launch
        def __init__(self, arity):
            self.launch = triton_module_loader(launcher_module_source(arity), "__triton_launcher").launch

    arities = list(range(3, 11))
    for arity in arities:  # each module built and loaded once
        Launcher(arity)
    three, four = (triton_module_loader(launcher_module_source(arity), "__triton_launcher") for arity in (3, 4))
    assert three is four and four.launch(*range(4)) == 4  # a later load hands out the last load's module object
    driver = SimpleNamespace(launcher_cls=Launcher)
    script.launchers_one_at_a_time(driver)
    wrong = []

    def create(thread: int):
        for _ in range(150):
            for arity in arities[thread::4]:
                try:
                    returned = driver.launcher_cls(arity).launch(*range(arity))
                except TypeError as error:  # "function takes exactly N arguments (M given)"
                    returned = str(error)
                if returned != arity:
                    wrong.append((arity, returned))

    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # a thread switch inside a load's window is likely, not rare
    try:
        on_four_threads_at_once(create)
    finally:
        sys.setswitchinterval(switch_interval)
    assert wrong == []


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_kernel_builds_on_the_gpu_make_triton_launchers_take_turns_before_a_thread_starts(script, monkeypatch):
    driver, calls = SimpleNamespace(launcher_cls=object), []
    monkeypatch.setattr(script.triton.runtime, "driver", SimpleNamespace(active=driver))
    monkeypatch.setattr(script, "launchers_one_at_a_time", lambda given: calls.append((given, "turns")))
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)  # each build thread's initializer
    script.KernelBuilds([lambda: calls.append("build")], torch.device("cuda", 0)).finish()
    assert calls == [(driver, "turns"), "build"]
    script.KernelBuilds([lambda: calls.append("build")], torch.device("cpu")).finish()
    assert calls == [(driver, "turns"), "build", "build"]  # no launchers on the CPU


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_the_kernel_builds_after_the_first_run_side_by_side(script):
    """Triton lets go of the GIL in LLVM and ptxas, so the launches after the first build at once, each on a thread
    of its own, the one submitted later too: three that wait for each other all finish (on one thread they would
    wait for ever, here 10 s)."""
    together = threading.Barrier(3, timeout=10)
    builds = script.KernelBuilds([lambda: None, together.wait, together.wait], torch.device("cpu"))
    builds.submit(together.wait)
    assert builds.finish().startswith("startup: 4 kernel launches built on worker threads in ")


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_kernel_builds_on_the_gpu_run_on_threads_whose_device_is_the_ranks_gpu(script, monkeypatch):
    """A thread's current CUDA device is its own, GPU 0 until it sets one: a build thread left there would build and
    launch rank 3's kernels on GPU 0 (every rank opening a context there). The queued launches run there too."""
    current = threading.local()
    monkeypatch.setattr(script.triton.runtime, "driver", SimpleNamespace(active=SimpleNamespace(launcher_cls=object)))
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: setattr(current, "device", device))
    seen = []

    def build():
        seen.append(getattr(current, "device", "GPU 0"))

    builds = script.KernelBuilds([build, build, build], torch.device("cuda", 3))
    builds.submit(build)
    builds.finish()
    assert seen == [torch.device("cuda", 3)] * 4 and getattr(current, "device", None) is None  # not the main thread's


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("message, line", [("\nCUDA error: an illegal memory access\nCompile with TORCH_USE_CUDA_DSA",
                                            "CUDA error: an illegal memory access"), ("", ""), (" \n ", "")])
def test_an_errors_first_line_is_its_first_line_with_text(script, message, line):
    """The one line of a crash, a failed meeting or an nvidia-smi that did not answer: an error whose message starts
    with a line end (as many of torch's do) would give an empty line, 'error: RuntimeError: '."""
    assert script.first_line(RuntimeError(message)) == line


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_a_first_launch_that_returns_at_once_still_has_the_others_queued_and_counted(script):
    ran = []
    for _ in range(20):  # the first thread's return raced the constructor's bookkeeping once
        builds = script.KernelBuilds([functools.partial(ran.append, name) for name in "abc"], torch.device("cpu"))
        builds.submit(functools.partial(ran.append, "d"))
        assert builds.finish().startswith("startup: 4 kernel launches built on worker threads in ")
        this_attempt = ran[-4:]
        assert sorted(this_attempt) == ["a", "b", "c", "d"]
        assert this_attempt.index("a") < min(this_attempt.index("b"), this_attempt.index("c"))  # "a" alone first


STOP_THROUGH_EXCEPT_EXCEPTION = """
import os, signal, sys, time
sys.path.insert(0, sys.argv[1])
script = __import__(sys.argv[2])
# Python's handlers as a terminal starts it: pytest under nohup (SIGHUP) or as a shell's background job (SIGINT)
# passes the signal on ignored, and the script rightly keeps an ignored signal so
signal.signal(signal.SIGINT, signal.default_int_handler)
for signum in (signal.SIGTERM, signal.SIGHUP):
    signal.signal(signum, signal.SIG_DFL)
handlers = script.stop_on_signals()
for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    try:
        try:  # as torch's compiler wraps its work, e.g. cpu_vec_isa's check build around subprocess.run
            os.kill(os.getpid(), signum)
            time.sleep(5)
        except Exception:
            print("swallowed")
    except script.Stopped as stopped:
        print(stopped, 128 + stopped.signum)
script.restore_signals(handlers)
print(signal.getsignal(signal.SIGINT) is signal.default_int_handler, signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)
"""


@pytest.mark.parametrize("script", ["train_gpt", "train_gpt_medium"])
def test_a_stopping_signal_gets_through_except_exception_and_every_later_one_stops_too(script):
    """Stopped was an Exception: an `except Exception` in torch's compiler swallowed it (the run then ignored every
    later signal, as the handler had set them to be ignored, and finished) or wrapped it in an InductorError
    traceback. At the run's end Python's own handlers come back, so a signal in the interpreter's teardown is not a
    Stopped traceback after a finished run."""
    result = subprocess.run([sys.executable, "-c", STOP_THROUGH_EXCEPT_EXCEPTION, str(REPO_ROOT), script],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines() == ["stopped by SIGTERM 143", "stopped by SIGINT 130", "stopped by SIGHUP 129",
                                          "True True"]


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_a_stopping_signal_ignored_at_start_stays_ignored(script):
    """nohup starts a run with SIGHUP ignored, a shell's background job with SIGINT: the run keeps them so (as Python
    keeps an ignored SIGINT), and stops on the others; the run's end leaves them ignored."""
    import signal

    saved = {signum: signal.getsignal(signum) for signum in script.SIGNALS_THAT_STOP}
    try:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        handlers = script.stop_on_signals()
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        assert callable(signal.getsignal(signal.SIGTERM))  # the handler that raises Stopped
        script.restore_signals(handlers)
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_a_handler_set_outside_python_comes_back_as_the_default(script):
    """signal.getsignal answers None for a handler that C code installed (a library, an embedding program), which
    signal.signal refuses: the run's end would raise TypeError in its finally, a traceback after a finished run."""
    import signal

    saved = signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGTERM, lambda signum, frame: None)
        script.restore_signals({signal.SIGTERM: None})
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, saved)


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_a_stopped_run_ignores_later_stopping_signals_before_it_writes_its_line(script, monkeypatch):
    """torchrun sends its ranks SIGTERM after a Ctrl-C that they got too: every stopping signal is ignored before the
    first one's line is written, so that the second cannot raise Stopped in the middle of it (a traceback instead of
    the one line); the exit status is the first signal's, 128 + SIGINT."""
    import signal

    events = []
    monkeypatch.setattr(signal, "signal", lambda signum, handler: events.append((signum, handler)))
    monkeypatch.setattr(script, "report_error", lambda line, console: events.append((line, console)))
    monkeypatch.setattr(script, "prints_errors", lambda error: True)
    monkeypatch.setattr(os, "_exit", lambda code: (_ for _ in ()).throw(Exited(code)))
    with pytest.raises(Exited) as exited:
        script.exit_when_stopped(script.Stopped(signal.SIGINT))
    ignored = [(signum, signal.SIG_IGN) for signum in script.SIGNALS_THAT_STOP]
    assert events == [*ignored, ("error: stopped by SIGINT", True)] and exited.value.args[0] == 130


# a script run as the launcher runs it, then the signal handlers in place once it is over
RUN_AS_MAIN_THEN_HANDLERS = """
import runpy, signal, sys
sys.argv = sys.argv[1:]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit as exit:
    print("exit", exit.code)
print(signal.getsignal(signal.SIGINT) is signal.default_int_handler, signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)
"""


@pytest.mark.parametrize("script", ["train_gpt.py", "train_gpt_medium.py"])
def test_pythons_own_signal_handlers_are_back_once_the_script_is_over(script, tmp_path):
    """However main ends (here in a data error), the script puts back the handlers it replaced, so that a signal in
    the interpreter's teardown ends the process as Python's own handlers would, not in a Stopped traceback."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT",
                                                            "TORCHELASTIC_ERROR_FILE")}
    result = subprocess.run([sys.executable, "-c", RUN_AS_MAIN_THEN_HANDLERS, str(REPO_ROOT / script), "--device=cpu",
                             "--check_only=true", f"--train_files={tmp_path}/none_*.bin"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.stdout.splitlines()[-2:] == ["exit 2", "True True"], result.stdout + result.stderr[-2000:]


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_a_settings_error_is_printed_where_the_launch_variables_cannot_say_which_rank_this_is(script, monkeypatch,
                                                                                             capsys):
    """A bad setting is found before the launch variables are read: where those are bad too (RANK=x), no process
    can tell it is rank 0, and each prints the setting's line (rather than none of them)."""
    monkeypatch.setattr(script, "ERROR_LOG", script.NullLog())
    monkeypatch.delenv("TORCHELASTIC_ERROR_FILE", raising=False)
    monkeypatch.setenv("RANK", "x")
    monkeypatch.setattr(sys, "argv", [f"{script.__name__}.py", "--device=cpu", "--num_iterations=abc"])
    with pytest.raises(script.SetupError) as error:
        script.main()
    with pytest.raises(SystemExit):
        script.exit_with_setup_error(error.value)
    assert capsys.readouterr().err == "error: --num_iterations=abc is not an integer\n"


# run_through_harness's harness: the process group's rendezvous times out after 2 s
RUN_WITH_SHORT_MEETING = """
import datetime, runpy, sys
import torch.distributed.distributed_c10d as c10d
c10d._get_default_timeout = lambda backend: datetime.timedelta(seconds=2)  # torch's 30 minutes for gloo
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.parametrize("script", ["train_gpt.py", "train_gpt_medium.py"])
def test_ranks_that_never_meet_are_one_line_naming_the_meeting_point(script, tmp_path):
    """WORLD_SIZE=2 and torchrun's other variables set by hand, one process started: the group's rendezvous timed out
    (after 30 minutes by default; 2 s here) in torch's DistStoreError traceback. Now one line on the console, exit
    code 2, as the other launch errors."""
    with socket.socket() as probe:  # a free port for rank 0's store
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = run_through_harness(RUN_WITH_SHORT_MEETING, script, tmp_path,
                                 {"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                                  "MASTER_PORT": str(port)})
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    line = result.stderr.strip()
    assert re.fullmatch(rf"error: the 2 processes of WORLD_SIZE did not all meet at 127\.0\.0\.1:{port} \(Timed out "
                        r"after \d+ seconds waiting for clients\. 1/2 clients joined\.\); start every rank together "
                        r"with \./run\.sh or torchrun, or unset WORLD_SIZE for one process", line), line
