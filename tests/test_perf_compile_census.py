"""perf/compile_census.py: which compiled graphs own a cold start's kernels, read from an inductor cache folder.
Checked on hand-written graph modules (kinds, sources shared between graphs, compile order, ranks sharing the
folder) and on the folder of a real compile in a subprocess (training and inference of a small function), so a
torch whose generated modules no longer carry the ids or kernel definitions fails here, not on the device."""

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest


@pytest.fixture(scope="module")
def census_module(repo_root):
    spec = importlib.util.spec_from_file_location("compile_census", repo_root / "perf" / "compile_census.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_graph(folder, file_name, graph_id, kernels):
    """A graph module as inductor writes one: its AOT id, then each kernel's name and source."""
    lines = [f"# AOT ID: ['{graph_id}']", "from torch._inductor.async_compile import AsyncCompile",
             "async_compile = AsyncCompile()", ""]
    for name, body in kernels:
        lines += [f"{name} = async_compile.triton('{name}', '''", "import triton", f"def {name}():",
                  f"    {body}", "''', device_str='cuda')", ""]
    (folder / file_name[:2]).mkdir(exist_ok=True)
    (folder / file_name[:2] / f"{file_name}.py").write_text("\n".join(lines))


def test_census_counts_kinds_and_sources_new_in_compile_order(tmp_path, census_module):
    write_graph(tmp_path, "bbackward", "0_backward", [("triton_red_fused_sum_0", "a"), ("triton_poi_fused_mul_1", "b")])
    write_graph(tmp_path, "aforward", "0_forward", [("triton_poi_fused_mul_1", "b"), ("triton_per_fused_norm_0", "c"),
                                                    ("triton_tem_fused_flex_2", "d")])
    write_graph(tmp_path, "cinference", "1_inference", [("triton_poi_fused_mul_1", "b"), ("triton_poi_add_0", "e")])
    (tmp_path / "kernel_source.py").write_text("import triton\n")  # a kernel's own file: no AOT id, not a graph
    rows = census_module.census(census_module.graph_modules(tmp_path))
    assert [r["graph"] for r in rows] == ["0_forward", "0_backward", "1_inference"]
    forward, backward, inference = rows
    assert (forward["kernels"], forward["new"], forward["triton_poi"], forward["triton_per"],
            forward["triton_tem"]) == (3, 3, 1, 1, 1)
    assert (backward["kernels"], backward["new"], backward["triton_red"]) == (2, 1, 1)  # the mul kernel was compiled
    assert (inference["kernels"], inference["new"], inference["triton_poi"]) == (2, 1, 2)


def test_graphs_of_processes_sharing_the_folder_are_all_counted(tmp_path, census_module):
    write_graph(tmp_path, "arank0", "0_forward", [("triton_poi_fused_0", "x")])
    write_graph(tmp_path, "brank1", "0_forward", [("triton_poi_fused_0", "y")])
    rows = census_module.census(census_module.graph_modules(tmp_path))
    assert [r["graph"] for r in rows] == ["0_forward", "0_forward'"]
    assert sum(r["new"] for r in rows) == 2


def test_a_real_compile_folder_is_read(tmp_path, repo_root):
    """A small function compiled for training, then for inference, in a fresh process with an empty cache folder:
    three graphs, each with its own (C++ on this machine) kernel; the report's last line totals them."""
    script = textwrap.dedent("""
        import torch
        def f(x, w):
            return torch.relu(x @ w).square().sum(-1).softmax(0)
        g = torch.compile(f)
        x, w = torch.randn(64, 32, requires_grad=True), torch.randn(32, 16, requires_grad=True)
        g(x, w).sum().backward()
        with torch.no_grad():
            g(torch.randn(128, 32), w)
    """)
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=600)
    result = subprocess.run([sys.executable, "perf/compile_census.py", str(tmp_path / "inductor")], cwd=repo_root,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    graphs = [line.split()[0] for line in lines[1:-1]]
    assert graphs == ["0_forward", "0_backward", "1_inference"], result.stdout
    assert all(int(line.split()[1]) >= 1 for line in lines[1:-1]), result.stdout
    assert lines[-1].startswith("3 graphs, "), result.stdout


def test_an_empty_or_missing_folder_is_one_clear_line(tmp_path, repo_root):
    for folder, code in ((tmp_path, 1), (tmp_path / "missing", 2)):
        result = subprocess.run([sys.executable, "perf/compile_census.py", str(folder)], cwd=repo_root,
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == code
        assert len(result.stderr.strip().splitlines()) == 1


def write_binary(folder, key, name):
    """A Triton cache entry as Triton writes one: a folder per compile key, the kernel's files named after it."""
    entry = folder / key
    entry.mkdir(parents=True)
    for suffix in (".cubin", ".json", ".ptx", ".ttir"):
        (entry / f"{name}{suffix}").write_text("")
    (entry / f"__grp__{name}.json").write_text("{}")


def test_triton_binaries_are_split_into_the_graphs_kernels_and_names_in_no_graph(tmp_path, census_module):
    inductor, triton = tmp_path / "inductor", tmp_path / "triton"
    inductor.mkdir()
    long_name = "triton_poi_fused_" + "_".join(["clamp"] * 40) + "_3"  # its files' names are cut at 150 characters
    write_graph(inductor, "aforward", "0_forward", [("triton_poi_fused_mul_0", "a"), ("triton_red_fused_sum_1", "b"),
                                                    (long_name, "c")])
    for key, name in [("k1", "triton_poi_fused_mul_0"), ("k2", "triton_red_fused_sum_1"), ("k8", long_name[:150]),
                      ("k3", "triton_red_fused_sum_1"), ("k4", "triton_red_fused_sum_1"),
                      ("k5", "transpose_kernel"), ("k6", "triton_per_fused_dropped_2"),
                      ("k7", "triton_per_fused_dropped_2")]:
        write_binary(triton, key, name)
    binaries = census_module.triton_binaries(triton)
    assert binaries == {"triton_poi_fused_mul_0": 1, "triton_red_fused_sum_1": 3, "transpose_kernel": 1,
                        "triton_per_fused_dropped_2": 2, long_name[:150]: 1}
    lines = census_module.binaries_report(binaries, census_module.graph_modules(inductor))
    assert lines == ["8 Triton binaries of 5 kernel names",
                     "  graph modules' kernels: 5 binaries of 3 names (1 with more than one launch configuration)",
                     "  names in no graph module: 3 binaries of 2 names",
                     "       2  triton_per_fused_dropped_2",
                     "       1  transpose_kernel"]


def test_the_triton_folder_is_reported_after_the_table(tmp_path, repo_root):
    inductor, triton = tmp_path / "inductor", tmp_path / "triton"
    inductor.mkdir()
    write_graph(inductor, "aforward", "0_forward", [("triton_poi_fused_mul_0", "a")])
    write_binary(triton, "k1", "triton_poi_fused_mul_0")
    command = [sys.executable, "perf/compile_census.py", str(inductor)]
    result = subprocess.run(command + [str(triton)], cwd=repo_root, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    report = lines.index("1 Triton binaries of 1 kernel names")
    assert lines[report + 1:report + 3] == ["  graph modules' kernels: 1 binaries of 1 names (0 with more than one "
                                            "launch configuration)",
                                            "  names in no graph module: 0 binaries of 0 names"]
    assert lines[report + 3] == "compile timeline (seconds after the first file written):"  # then the timeline
    assert "graph module 0_forward written" in lines[report + 4] and "1 binaries" in lines[report + 5]
    missing = subprocess.run(command + [str(tmp_path / "none")], cwd=repo_root, capture_output=True, text=True,
                             timeout=60)
    assert missing.returncode == 2 and missing.stderr.startswith(f"error: {tmp_path / 'none'}: no such folder")


def test_the_timeline_puts_graph_modules_and_binary_waves_in_the_order_their_files_were_written(tmp_path,
                                                                                                 census_module):
    inductor, triton = tmp_path / "inductor", tmp_path / "triton"
    inductor.mkdir()
    write_graph(inductor, "aforward", "0_forward", [("triton_poi_fused_mul_0", "a")])
    write_graph(inductor, "bbackward", "0_backward", [("triton_red_fused_sum_1", "b")])
    base = 1_700_000_000.0
    os.utime(inductor / "af" / "aforward.py", (base, base))
    os.utime(inductor / "bb" / "bbackward.py", (base + 50, base + 50))
    # the forward's binaries: three close together, one slow kernel 30 s later (its own wave); the backward's two
    finished = [("k1", "triton_poi_fused_mul_0", 1.0), ("k2", "triton_poi_fused_mul_0", 2.5),
                ("k3", "flex_forward", 4.0), ("k4", "flex_backward_slow", 34.0), ("k5", "triton_red_fused_sum_1", 51.0),
                ("k6", "triton_red_fused_sum_1", 52.0)]
    for key, name, after in finished:
        write_binary(triton, key, name)
        os.utime(triton / key / f"{name}.cubin", (base + after, base + after))
    events = census_module.timeline(inductor, triton)
    assert [(at - base, what) for at, what, _ in events] == [(0.0, "graph"), (1.0, "binary"), (2.5, "binary"),
                                                             (4.0, "binary"), (34.0, "binary"), (50.0, "graph"),
                                                             (51.0, "binary"), (52.0, "binary")]
    lines = census_module.timeline_report(events, gap=2.0, named=2)
    assert lines == ["compile timeline (seconds after the first file written):",
                     "      0.0: graph module 0_forward written",
                     "      1.0 to 4.0: 3 binaries, half by 2.5; last: triton_poi_fused_mul_0 2.5, flex_forward 4.0",
                     "     34.0 to 34.0: 1 binaries, half by 34.0; last: flex_backward_slow 34.0",
                     "     50.0: graph module 0_backward written",
                     "     51.0 to 52.0: 2 binaries, half by 52.0; last: triton_red_fused_sum_1 51.0, "
                     "triton_red_fused_sum_1 52.0"]
    assert census_module.timeline_report([]) == []


def test_build_seconds_come_from_the_stage_files_and_the_slowest_are_listed_first(tmp_path, census_module):
    base = 1_700_000_000.0
    for key, name, stage_ends in [("k1", "quick_kernel", [0, 0.5, 0.7, 1.0, 1.5]),
                                  ("k2", "slow_ptxas_kernel", [3, 4, 5, 6, 76]),
                                  ("k3", "slow_llvm_kernel", [1, 2, 3, 33, 34])]:
        write_binary(tmp_path, key, name)
        for suffix, after in zip(census_module.STAGES, stage_ends):
            path = tmp_path / key / f"{name}{suffix}"
            path.touch()
            os.utime(path, (base + after, base + after))
    (tmp_path / "k4").mkdir()  # a failed build: no binary
    (tmp_path / "k4" / "broken.ttir").write_text("")
    builds = census_module.build_seconds(tmp_path)
    assert [(name, round(seconds, 3)) for seconds, name, _ in builds] == [
        ("slow_ptxas_kernel", 73.0), ("slow_llvm_kernel", 33.0), ("quick_kernel", 1.5)]
    assert [round(stage, 3) for stage in builds[0][2]] == [1.0, 1.0, 1.0, 70.0]
    lines = census_module.slowest_builds_report(builds, listed=2)
    assert lines == ["Triton builds: 107.5 s in all, 3 binaries; the slowest (seconds: all, then ttgir, llir, ptx, "
                     "cubin):",
                     "    73.0    1.0   1.0   1.0  70.0  slow_ptxas_kernel",
                     "    33.0    1.0   1.0  30.0   1.0  slow_llvm_kernel"]
    assert census_module.slowest_builds_report([]) == []


@pytest.mark.parametrize("argv, line", [
    (["--bogus"], "error: unknown argument '--bogus': it takes one or two folders, no options (see --help)"),
    ([], "error: 0 arguments; give CACHE_DIR [TRITON_CACHE_DIR], the run's TORCHINDUCTOR_CACHE_DIR and "
         "TRITON_CACHE_DIR, each filled from empty (see --help)"),
    (["a", "b", "c"], "error: 3 arguments; give CACHE_DIR [TRITON_CACHE_DIR], the run's TORCHINDUCTOR_CACHE_DIR and "
                      "TRITON_CACHE_DIR, each filled from empty (see --help)")])
def test_a_bad_command_line_is_one_line_and_help_prints_the_usage(census_module, capsys, argv, line):
    """Were the usage on stderr for any of them (--help included, with exit status 2)."""
    assert census_module.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [line]
    assert census_module.main(["--help"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == census_module.__doc__.strip() and err == ""
