"""perf/proxy_common.sh, the device runs' shell helpers, and perf/ab.sh and perf/startup_ab.sh built on them:
keep_kernel_sources copies, for a profiled run, the inductor source of each Triton kernel that the log lists among the
longest, so that a slow fused kernel can be read; ab.sh keeps each GPU's caches and compile artifacts apart;
startup_ab.sh runs two versions' warm or cold starts in turn from the track script's path and restores it, and
fullbatch_ab.sh their full batches the same way."""

import lzma
import os
import re
import shutil
import subprocess
import sys
import time

import pytest


def test_kernel_sources_of_a_profiled_run_are_kept(tmp_path, repo_root):
    cache, out = tmp_path / "inductor", tmp_path / "out"
    (cache / "ab").mkdir(parents=True)
    (cache / "ab" / "kernel.py").write_text("@triton.jit\ndef triton_poi_fused_clone_permute_0(in_ptr0):\n    pass\n")
    (cache / "ab" / "graph.py").write_text("x = 1\n" * 100 + "def triton_poi_fused_clone_permute_0(in_ptr0):\n")
    (out / "logs").mkdir(parents=True)
    (out / "logs" / "run.txt").write_text("kernel 9.6 ms in 24 calls: triton_poi_fused_clone_permute_0\n"
                                          "kernel 5.0 ms in 3 calls: nvjet_sm90_gemm\n"
                                          "kernel 1.0 ms in 3 calls: triton_red_fused_sum_1\n")
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache))
    subprocess.run(["bash", "-c", f"source perf/proxy_common.sh && keep_kernel_sources {out} run"], cwd=repo_root,
                   env=env, check=True, timeout=60)
    kept = sorted(p.name for p in (out / "kernels").iterdir())
    assert kept == ["run_1.py"]  # the smaller file with the first kernel; the second kernel is not in the cache
    assert "def triton_poi_fused_clone_permute_0(" in (out / "kernels" / "run_1.py").read_text()
    assert (out / "kernels" / "run_1.py").read_text().startswith("@triton.jit")


def test_an_unprofiled_run_keeps_nothing(tmp_path, repo_root):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "run.txt").write_text("step:1/10 train_loss:10.8\n")
    subprocess.run(["bash", "-c", f"source perf/proxy_common.sh && keep_kernel_sources {tmp_path} run"],
                   cwd=repo_root, check=True, timeout=60)
    assert not (tmp_path / "kernels").exists()


def stand_in_python_env(tmp_path, stand_in_python: str, **env_vars: str) -> dict:
    """A stand-in python (a bash body; unpack_proxy_data's 'python -' runs the real one) in tmp_path/bin, and stand-in
    proxy shards in tmp_path/data/proxy; the environment that puts it on the PATH, with no carry folder and env_vars."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "data" / "proxy").mkdir(parents=True)
    for name in ("proxy_val_000000.bin", "proxy_train_000001.bin"):
        (tmp_path / "data" / "proxy" / name).write_bytes(b"")
    (tmp_path / "bin" / "python").write_text(f'#!/usr/bin/env bash\n[ "${{1:-}}" = - ] && exec {sys.executable} "$@"\n'
                                             + stand_in_python)
    (tmp_path / "bin" / "python").chmod(0o755)
    return dict(os.environ, PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}", PROXY_CARRY=str(tmp_path / "carry"),
                **env_vars)


def test_ab_gives_each_gpu_its_own_caches_and_compile_artifacts(tmp_path, repo_root):
    """Two variants of one script side by side on two GPUs: each run gets its GPU, that GPU's inductor cache and
    its own --compile_cache file, so that neither first run loads what the other wrote (a stand-in python prints
    what it was given)."""
    caches = tmp_path / "caches"
    (tmp_path / "train_gpt.py").write_text("")
    env = stand_in_python_env(tmp_path, 'echo "step:400/400 val_loss:4.1"\n'
                              'echo "gpu=$CUDA_VISIBLE_DEVICES inductor=$TORCHINDUCTOR_CACHE_DIR args=$*"\n',
                              AB_GPUS="2", AB_CACHES=str(caches))
    subprocess.run(["bash", str(repo_root / "perf/ab.sh"), "short", str(tmp_path / "out"), "--seed=0", "--seed=1"],
                   cwd=tmp_path, env=env, check=True, timeout=60, capture_output=True)
    for gpu, seed in [(0, 0), (1, 1)]:
        console = (tmp_path / "out" / f"variant{gpu}.out").read_text()
        assert f"gpu={gpu} inductor={caches}/gpu{gpu}/inductor " in console
        assert f"--compile_cache={caches}/gpu{gpu}/compile_cache_train_gpt.bin " in console
        assert console.rstrip().endswith(f"--seed={seed}")


def versions_ab_folder(tmp_path, repo_root, tool: str, stand_in_python: str) -> dict:
    """tmp_path set up for perf/TOOL: a copy of the perf helpers, train_gpt.py holding "# main as checked out", the
    versions a.py, b.py, c.py and a stand-in python (a bash body) in bin/; the environment that puts it on the PATH."""
    (tmp_path / "perf").mkdir()
    for name in ("proxy_common.sh", tool):
        (tmp_path / "perf" / name).write_text((repo_root / "perf" / name).read_text())
    (tmp_path / "train_gpt.py").write_text("# main as checked out\n")
    (tmp_path / "a.py").write_text("# version A\n")
    (tmp_path / "b.py").write_text("# version B\n")
    (tmp_path / "c.py").write_text("# version C\n")
    return stand_in_python_env(tmp_path, stand_in_python)


def run_versions_ab(tmp_path, repo_root, tool: str, stand_in_python: str, *options: str,
                    scripts: tuple[str, ...] = ("a.py", "b.py"), returncode: int = 0) -> subprocess.CompletedProcess:
    """perf/TOOL (startup_ab.sh or fullbatch_ab.sh, with options before the track) run on versions a.py and b.py (or
    scripts, of a.py, b.py, c.py) from a copy of the perf helpers, with a stand-in python (a bash body) on the PATH;
    train_gpt.py holds "# main as checked out". The tool must exit with returncode."""
    env = versions_ab_folder(tmp_path, repo_root, tool, stand_in_python)
    result = subprocess.run(["bash", f"perf/{tool}", *options, "short", "out", *scripts, "--seed=1"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == returncode, result.stderr
    assert (tmp_path / "train_gpt.py").read_text() == "# main as checked out\n"  # restored
    return result


def test_startup_ab_runs_a_b_b_a_a_b_from_the_track_scripts_path_and_restores_it(tmp_path, repo_root):
    """A stand-in python records which version sat at train_gpt.py for each run and answers with the run's position
    as its start-up seconds; each version keeps its own artifact file; the summary averages each version's three."""
    runs = tmp_path / "runs.txt"
    result = run_versions_ab(tmp_path, repo_root, "startup_ab.sh", f"""echo "$(head -n 1 train_gpt.py) $*" >> {runs}
echo "startup: first timed step at $(wc -l < {runs}).0s"
echo "step:20/20 val_loss:7.0 train_time:1ms step_avg:0.05ms"
""")
    lines = runs.read_text().splitlines()
    assert [line.split()[2] for line in lines] == list("ABABBAAB")  # cold A, first B, then A B B A A B
    caches = {line.split()[2]: re.search(r"--compile_cache=(\S+)", line)[1] for line in lines}
    assert len(set(caches.values())) == 2  # one artifact file a version, the same for all its runs
    assert all(f"--compile_cache={caches[line.split()[2]]} " in line for line in lines)
    assert all(line.endswith("--seed=1") for line in lines)
    assert result.stdout.splitlines()[-2:] == ["A: 3.0 6.0 7.0 s, mean 5.3 s", "B: 4.0 5.0 8.0 s, mean 5.7 s"]


def test_startup_ab_cold_runs_a_b_b_a_each_from_empty_caches_of_its_own(tmp_path, repo_root):
    """A stand-in python records, for each run, the version at train_gpt.py, its inductor and Triton cache folders
    (how many entries each held when it started), whether its --compile_cache file existed and how many runs' caches
    were on disk, then fills them as a compile would; every run must start from empty folders of its own, deleted
    after it."""
    runs = tmp_path / "runs.txt"
    stand_in = f"""cache=$(printf '%s\\n' "$@" | sed -n 's/^--compile_cache=//p')
echo "$(head -n 1 train_gpt.py) $TORCHINDUCTOR_CACHE_DIR $(ls -A "$TORCHINDUCTOR_CACHE_DIR" | wc -l) \\
$TRITON_CACHE_DIR $(ls -A "$TRITON_CACHE_DIR" | wc -l) $([ -e "$cache" ] && echo file || echo none) \\
$(ls "$(dirname "$(dirname "$TORCHINDUCTOR_CACHE_DIR")")" | wc -l) $*" >> {runs}
touch "$TORCHINDUCTOR_CACHE_DIR/graph" "$TRITON_CACHE_DIR/kernel" "$cache"
echo "startup: first timed step at $(( $(wc -l < {runs}) * 10 )).0s"
echo "step:20/20 val_loss:7.0 train_time:1ms step_avg:0.05ms"
"""
    result = run_versions_ab(tmp_path, repo_root, "startup_ab.sh", stand_in, "--cold")
    runs_seen = [line.split() for line in runs.read_text().splitlines()]
    assert [run[2] for run in runs_seen] == list("ABBA")
    assert all(run[4] == "0" and run[6] == "0" and run[7] == "none" for run in runs_seen)  # empty, no artifact file
    assert len({folder for run in runs_seen for folder in (run[3], run[5])}) == 8  # their own
    assert [run[8] for run in runs_seen] == ["1"] * 4  # the earlier runs' caches deleted
    assert all(" ".join(run).endswith("--seed=1") for run in runs_seen)
    assert result.stdout.splitlines()[-2:] == ["A: 10.0 40.0 s, mean 25.0 s", "B: 20.0 30.0 s, mean 25.0 s"]


def test_fullbatch_ab_runs_a_b_b_a_full_batches_from_the_track_scripts_path_and_restores_it(tmp_path, repo_root):
    """A stand-in python records the version at train_gpt.py and its arguments for each run and answers with step
    lines whose last step_avg is the run's position x 100 ms; the summary averages each version's two."""
    runs = tmp_path / "runs.txt"
    result = run_versions_ab(tmp_path, repo_root, "fullbatch_ab.sh", f"""echo "$(head -n 1 train_gpt.py) $*" >> {runs}
n=$(wc -l < {runs})
echo "step:29/30 train_loss:5.2 train_time:1ms step_avg:1.00ms"
echo "step:30/30 val_loss:5.1 train_time:1ms step_avg:$(( n * 100 )).25ms"
""")
    lines = runs.read_text().splitlines()
    assert [line.split()[2] for line in lines] == list("ABBA")
    for line in lines:  # the full batch's settings, the caller's overrides last
        assert ("--num_iterations=30 --val_loss_every=0 --grad_accum_steps=8 --val_tokens=262144 --seed=1"
                in line) and line.endswith("--seed=1")
    caches = {line.split()[2]: re.search(r"--compile_cache=(\S+)", line)[1] for line in lines}
    assert len(set(caches.values())) == 2
    assert result.stdout.splitlines()[-2:] == ["A: 100.25 400.25 ms, mean 250.25 ms",
                                               "B: 200.25 300.25 ms, mean 250.25 ms"]


def test_fullbatch_ab_of_three_versions_runs_a_b_c_c_b_a(tmp_path, repo_root):
    """Three script files: each version's first run in order, then their second runs back (A B C C B A), each version
    with an artifact file of its own and its mean in the summary."""
    runs = tmp_path / "runs.txt"
    result = run_versions_ab(tmp_path, repo_root, "fullbatch_ab.sh", f"""echo "$(head -n 1 train_gpt.py) $*" >> {runs}
echo "step:30/30 val_loss:5.1 train_time:1ms step_avg:$(( $(wc -l < {runs}) * 100 )).00ms"
""", scripts=("a.py", "b.py", "c.py"))
    lines = runs.read_text().splitlines()
    assert [line.split()[2] for line in lines] == list("ABCCBA")
    assert all(line.endswith("--seed=1") for line in lines)
    caches = {line.split()[2]: re.search(r"--compile_cache=(\S+)", line)[1] for line in lines}
    assert len(set(caches.values())) == 3
    assert result.stdout.splitlines()[-4:] == ["== full batch, A B C C B A (mean step time)",
                                               "A: 100.00 600.00 ms, mean 350.00 ms",
                                               "B: 200.00 500.00 ms, mean 350.00 ms",
                                               "C: 300.00 400.00 ms, mean 350.00 ms"]


def test_fullbatch_ab_counts_only_completed_runs(tmp_path, repo_root):
    """A B B A where B2 stops at step 10 (its last step_avg was averaged in) and A2 dies before any step (A's mean
    was A1's alone): each is 'failed' with its exit status and last line, neither version has a mean, and the tool
    exits 1 after the whole summary."""
    runs = tmp_path / "runs.txt"
    result = run_versions_ab(tmp_path, repo_root, "fullbatch_ab.sh", f"""echo "$(head -n 1 train_gpt.py)" >> {runs}
n=$(wc -l < {runs})
case $n in
    3) echo "step:10/30 train_loss:nan train_time:9ms step_avg:0.90ms"
       echo "stopped: non-finite train loss at step 10; lower the learning rates or check the data"; exit 1 ;;
    4) echo "error: out of GPU memory in the warmup"; exit 2 ;;
esac
echo "step:30/30 val_loss:5.1 train_time:1ms step_avg:$(( n * 100 )).25ms"
""", returncode=1)
    assert result.stdout.splitlines()[-5:] == [
        "== full batch, A B B A (mean step time)",
        "A: 100.25 failed ms, no mean (A2 failed)",
        "  fullbatch_A2 failed (exit 2): error: out of GPU memory in the warmup",
        "B: 200.25 failed ms, no mean (B2 failed)",
        "  fullbatch_B2 failed (exit 1): stopped: non-finite train loss at step 10; lower the learning rates or check "
        "the data"]


def test_a_run_without_its_last_step_line_or_with_an_error_line_is_failed(tmp_path, repo_root):
    """Cold starts A B B A whose python exits 0: B1 ends at step 19 of 20, A2 reaches step 20 and then logs an
    error: line; both are failed, with their last line, and the tool exits 1."""
    runs = tmp_path / "runs.txt"
    result = run_versions_ab(tmp_path, repo_root, "startup_ab.sh", f"""echo "$(head -n 1 train_gpt.py)" >> {runs}
n=$(wc -l < {runs})
echo "startup: first timed step at $n.0s"
[ $n = 2 ] && {{ echo "step:19/20 train_loss:5.0 train_time:1ms step_avg:0.05ms"; exit 0; }}
echo "step:20/20 val_loss:7.0 train_time:1ms step_avg:0.05ms"
[ $n = 4 ] && echo "error: the log could not be written"
exit 0
""", "--cold", returncode=1)
    assert result.stdout.splitlines()[-4:] == [
        "A: 1.0 failed s, no mean (A2 failed)", "  cold_A2 failed: error: the log could not be written",
        "B: failed 3.0 s, no mean (B1 failed)", "  cold_B1 failed: step:19/20 train_loss:5.0 train_time:1ms "
        "step_avg:0.05ms"]


def test_startup_ab_fails_when_an_uncounted_first_start_failed(tmp_path, repo_root):
    """Warm starts: B's first start (not counted, but it fills the caches B's warm starts load) fails; the table
    keeps both means, then names it, and the tool exits 1."""
    runs = tmp_path / "runs.txt"
    result = run_versions_ab(tmp_path, repo_root, "startup_ab.sh", f"""echo "$(head -n 1 train_gpt.py)" >> {runs}
n=$(wc -l < {runs})
[ $n = 2 ] && {{ echo "Traceback (most recent call last):"; echo "RuntimeError: compile failed"; exit 1; }}
echo "startup: first timed step at $n.0s"
echo "step:20/20 val_loss:7.0 train_time:1ms step_avg:0.05ms"
""", returncode=1)
    assert result.stdout.splitlines()[-3:] == ["A: 3.0 6.0 7.0 s, mean 5.3 s", "B: 4.0 5.0 8.0 s, mean 5.7 s",
                                               "first_B (not counted) failed (exit 1): RuntimeError: compile failed"]


def run_with_stand_in_python(tmp_path, command: list[str], stand_in_python: str, **env_vars: str):
    """command (a perf tool and its arguments) run from tmp_path with a stand-in python (a bash body) on the PATH and
    no proxy shards to unpack."""
    env = stand_in_python_env(tmp_path, stand_in_python, **env_vars)
    return subprocess.run(["bash", *command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)


# a stand-in python's run that completes: its last step's line, for the run's --num_iterations
COMPLETES = """steps=$(printf '%s\\n' "$@" | sed -n 's/^--num_iterations=//p' | tail -n 1)
echo "step:$steps/$steps val_loss:4.1000 train_time:1ms step_avg:0.25ms"
"""


def test_a_second_job_staging_over_the_same_script_stops_with_one_line(tmp_path, repo_root):
    """While fullbatch_ab.sh stages versions over train_gpt.py (its first run waits for a go file), a second
    fullbatch_ab.sh (whose runs would not wait) stops with one error line naming the first, before it stages anything;
    the first then ends normally and restores train_gpt.py (two such jobs swapped each other's versions)."""
    env = versions_ab_folder(tmp_path, repo_root, "fullbatch_ab.sh", f"""case "$*" in *--logs_dir=first/*)
    touch {tmp_path}/started; for _ in $(seq 300); do [ -e {tmp_path}/go ] && break; sleep 0.1; done ;;
esac
echo "step:30/30 val_loss:5.1 train_time:1ms step_avg:1.00ms"
""")
    first = subprocess.Popen(["bash", "perf/fullbatch_ab.sh", "short", "first", "a.py", "b.py"], cwd=tmp_path, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(300):
            if (tmp_path / "started").exists() or first.poll() is not None:
                break
            time.sleep(0.1)
        second = subprocess.run(["bash", "perf/fullbatch_ab.sh", "short", "second", "c.py", "b.py"], cwd=tmp_path,
                                env=env, capture_output=True, text=True, timeout=60)
        assert (tmp_path / "train_gpt.py").read_text() == "# version A\n"  # the first job's staged version
    finally:
        (tmp_path / "go").touch()
        assert first.wait(timeout=60) == 0, first.stderr.read()
    assert second.returncode == 2 and not (tmp_path / "second").exists()
    assert re.fullmatch(r"error: train_gpt\.py is staged by another job \(perf/fullbatch_ab\.sh, pid \d+, since "
                        r"[\d-]+ [\d:]+\); run this one after it\n", second.stderr), second.stderr
    assert (tmp_path / "train_gpt.py").read_text() == "# main as checked out\n"


def test_staging_without_flock_is_one_warning_line_and_goes_on(tmp_path, repo_root):
    """A machine without util-linux's flock (a device image, macOS) still runs its A/B, unguarded, and says so."""
    for name in ("train_gpt.py", "a.py", "b.py"):
        (tmp_path / name).write_text(f"# {name}\n")
    tools = tmp_path / "bin"  # the tools staging uses, and no flock
    tools.mkdir()
    for tool in ("cp", "rm", "mktemp", "seq", "cat"):
        (tools / tool).symlink_to(shutil.which(tool))
    result = subprocess.run(["bash", "-c", f"source {repo_root / 'perf' / 'proxy_common.sh'} && PATH={tools} && "
                             'stage_versions train_gpt.py a.py b.py && cp "$versions/B.py" train_gpt.py && '
                             "cat train_gpt.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stderr == (
        "warning: flock (util-linux) is missing: nothing keeps another job from staging versions over train_gpt.py\n")
    assert result.stdout == "# b.py\n"
    assert (tmp_path / "train_gpt.py").read_text() == "# train_gpt.py\n"  # restored at the shell's exit


def test_proxy_runs_the_same_full_batch(tmp_path, repo_root):
    """perf/proxy.sh's third run is the full batch fullbatch_ab.sh compares (one FULL_BATCH for both)."""
    result = run_with_stand_in_python(tmp_path, [str(repo_root / "perf" / "proxy.sh"), "short", "out", "--seed=2"],
                                      'echo "args=$*"\n' + COMPLETES)
    assert result.returncode == 0, result.stdout
    console = (tmp_path / "out" / "fullbatch.out").read_text()
    assert "--num_iterations=30 --val_loss_every=0 --grad_accum_steps=8 --val_tokens=262144 --seed=2" in console


def test_proxy_marks_a_failed_run_and_exits_1_after_the_whole_summary(tmp_path, repo_root):
    """The warm run crashes (a traceback, exit 1): its row says FAILED with its exit status and last line instead of
    the start-up and val columns, the full batch's row still follows, and proxy.sh exits 1 (it exited 0)."""
    result = run_with_stand_in_python(tmp_path, [str(repo_root / "perf" / "proxy.sh"), "short", "out"], """
case "$*" in *--run_id=warm*)
    echo "Traceback (most recent call last):"; echo "RuntimeError: CUDA error: an illegal memory access"; exit 1 ;;
esac
""" + COMPLETES)
    assert result.returncode == 1
    assert result.stdout.splitlines()[-3:] == [
        "cold |  (no compile cache) | step:400/400 val_loss:4.1000 step_avg:0.25ms;  | ",
        "warm | FAILED (exit 1): RuntimeError: CUDA error: an illegal memory access",
        "fullbatch |  (no compile cache) | step:30/30 val_loss:4.1000 step_avg:0.25ms;  | "]


def test_ab_marks_a_run_stopped_at_step_200_failed(tmp_path, repo_root):
    """variant1 stops at step 200 of 400 (its row looked like any other's, with the val lines it had) and variant2's
    run never started: both rows say FAILED, variant0's is as it was, and ab.sh exits 1."""
    (tmp_path / "train_gpt.py").write_text("")
    result = run_with_stand_in_python(tmp_path, [str(repo_root / "perf" / "ab.sh"), "short", "out", "--seed=0",
                                                 "--seed=1", "--seed=2"], """
case "$*" in
    *--seed=1) echo "step:100/400 val_loss:4.5000 train_time:1ms step_avg:0.25ms"
               echo "stopped: non-finite train loss at step 200; lower the learning rates or check the data"; exit 1 ;;
    *--seed=2) exit 2 ;;
esac
""" + COMPLETES, AB_GPUS="1")
    assert result.returncode == 1
    assert result.stdout.splitlines()[-3:] == [
        "variant0 |  (no compile cache) | step:400/400 val_loss:4.1000 step_avg:0.25ms;  | ",
        "variant1 | FAILED (exit 1): stopped: non-finite train loss at step 200; lower the learning rates or check "
        "the data",
        "variant2 | FAILED (exit 2): no step:N/N line"]


@pytest.mark.parametrize("variants, error", [
    ((), "error: give one or more variants, each one quoted argument (see --help)"),
    (("--seed=0", "perf/base/my copy.py --seed=0"), "error: variant1: 'perf/base/my' is neither its script (first, a "
     ".py path without spaces) nor an --override"),
    (("--seed=0", "perf/base/gone.py --seed=0"), "error: variant1: no script perf/base/gone.py"),
    (("--seed=0 seed=1",), "error: variant0: 'seed=1' is neither its script (first, a .py path without spaces) nor "
     "an --override")])
def test_ab_without_variants_or_with_a_bad_one_is_one_error_line_before_any_run(tmp_path, repo_root, variants,
                                                                                error):
    """No variants printed an empty table and exited 0; a script path with a space ran the track script with the
    path's pieces as arguments; a missing script ran as a row with '(no compile cache)'."""
    (tmp_path / "perf" / "base").mkdir(parents=True)
    (tmp_path / "perf" / "base" / "my copy.py").write_text("")
    (tmp_path / "train_gpt.py").write_text("")
    result = run_with_stand_in_python(tmp_path, [str(repo_root / "perf" / "ab.sh"), "short", "out", *variants],
                                      'echo "$*" >> runs.txt\n' + COMPLETES)
    assert result.returncode == 2 and result.stderr == error + "\n" and result.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin", "data", "perf", "train_gpt.py"]
    assert not (tmp_path / "runs.txt").exists()


@pytest.mark.parametrize("tool", ["startup_ab.sh", "fullbatch_ab.sh"])
def test_versions_ab_without_two_scripts_is_one_error_line(tmp_path, repo_root, tool):
    result = subprocess.run(["bash", str(repo_root / "perf" / tool), "short", "out", "a.py"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stderr == "error: give two to 8 script files, A then B (then C, ...)\n"


@pytest.mark.parametrize("tool", ["startup_ab.sh", "fullbatch_ab.sh"])
def test_versions_ab_of_an_unknown_track_is_one_error_line_before_staging(tmp_path, repo_root, tool):
    """A track name that is neither short nor medium (it staged the versions over train_gpt.py and ran them)."""
    env = versions_ab_folder(tmp_path, repo_root, tool, 'echo "ran $*" >> runs.txt\n')
    result = subprocess.run(["bash", f"perf/{tool}", "shrot", "out", "a.py", "b.py"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stderr == "error: track must be short or medium, not 'shrot'\n"
    assert not (tmp_path / "runs.txt").exists() and not (tmp_path / "out").exists()
    assert (tmp_path / "train_gpt.py").read_text() == "# main as checked out\n"
    assert not (tmp_path / "train_gpt.py.lock").exists()  # not even locked


def test_proxy_of_an_unknown_track_is_the_same_error_line(tmp_path, repo_root):
    result = run_with_stand_in_python(tmp_path, [str(repo_root / "perf" / "proxy.sh"), "long", "out"], "exit 0\n")
    assert result.returncode == 2 and result.stderr == "error: track must be short or medium, not 'long'\n"


def test_pack_without_shards_is_one_error_line_and_writes_nothing(tmp_path, repo_root):
    (tmp_path / "empty").mkdir()
    result = subprocess.run(["bash", str(repo_root / "perf" / "pack.sh"), "empty"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr == ("error: no proxy shards (*.bin) in empty/; pass their folder (bash perf/pack.sh "
                             "../shared/proxy) or copy them there\n")
    assert not (tmp_path / "perf").exists()


def test_packed_shards_unpack_to_the_same_bytes(tmp_path, repo_root):
    source = tmp_path / "shards"
    source.mkdir()
    for index, name in enumerate(["proxy_val_000000.bin", "proxy_train_000001.bin"]):
        (source / name).write_bytes(bytes(range(256)) * (index + 3))
    subprocess.run(["bash", str(repo_root / "perf" / "pack.sh"), "shards"], cwd=tmp_path, check=True,
                   capture_output=True, timeout=60)
    assert sorted(p.name for p in (tmp_path / "perf" / "carry").iterdir()) == [
        "proxy_train_000001.bin.xz", "proxy_val_000000.bin.xz"]
    subprocess.run(["bash", "-c", f"source {repo_root / 'perf' / 'proxy_common.sh'} && unpack_proxy_data"],
                   cwd=tmp_path, check=True, timeout=60)
    for shard in source.iterdir():
        assert (tmp_path / "data" / "proxy" / shard.name).read_bytes() == shard.read_bytes()


def unpack_in(folder, repo_root, before: str = "") -> subprocess.CompletedProcess:
    """unpack_proxy_data run from folder, after the shell commands before, and a line once it returns."""
    return subprocess.run(["bash", "-c", f"{before}source {repo_root / 'perf' / 'proxy_common.sh'} && "
                           "unpack_proxy_data && echo unpacked"], cwd=folder, capture_output=True, text=True,
                          timeout=60)


def carry_with(folder, **packed: bytes):
    """folder/perf/carry holding each proxy_NAME_*.bin.xz given (val=, train=): the .xz bytes."""
    (folder / "perf" / "carry").mkdir(parents=True)
    names = {"val": "proxy_val_000000.bin.xz", "train": "proxy_train_000001.bin.xz"}
    for split, data in packed.items():
        (folder / "perf" / "carry" / names[split]).write_bytes(data)


VAL, TRAIN = bytes(range(256)) * 4000, bytes(range(255, -1, -1)) * 3000


def test_a_truncated_xz_leaves_no_shard_to_take_as_unpacked(tmp_path, repo_root):
    """A .xz cut short fails to unpack and leaves no shard (a short one was kept, and skipped by every later call),
    with one error line naming it and the fix (a Python traceback went by, and the tool went on to runs that all
    failed on the missing shard); once the carry holds the whole file, the next call unpacks it."""
    whole = lzma.compress(VAL)
    carry_with(tmp_path, val=whole[:len(whole) // 2], train=lzma.compress(TRAIN))
    result = unpack_in(tmp_path, repo_root)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == ("error: perf/carry/proxy_val_000000.bin.xz does not unpack (Compressed file ended before "
                             "the end-of-stream marker was reached); delete it, re-create it with bash perf/pack.sh "
                             "../shared/proxy and carry perf/carry again\n")
    assert [p.name for p in (tmp_path / "data" / "proxy").iterdir()] == ["proxy_train_000001.bin"]  # unpacked first
    (tmp_path / "perf" / "carry" / "proxy_val_000000.bin.xz").write_bytes(whole)
    assert unpack_in(tmp_path, repo_root).stdout == "unpacked\n"
    assert (tmp_path / "data" / "proxy" / "proxy_val_000000.bin").read_bytes() == VAL
    assert (tmp_path / "data" / "proxy" / "proxy_train_000001.bin").read_bytes() == TRAIN


@pytest.mark.parametrize("packed, reason", [
    (b"not xz at all", "Input format not supported by decoder"),
    (lzma.compress(VAL)[:12] + bytes(64) + lzma.compress(VAL)[76:], "Corrupt input data"),
    (None, "Is a directory"),
], ids=["not xz", "corrupt", "a folder"])
def test_a_xz_that_does_not_unpack_is_one_line_naming_it_and_the_fix(tmp_path, repo_root, packed, reason):
    carry_with(tmp_path, train=lzma.compress(TRAIN), **({} if packed is None else {"val": packed}))
    if packed is None:  # a folder where the file was
        (tmp_path / "perf" / "carry" / "proxy_val_000000.bin.xz").mkdir()
    result = unpack_in(tmp_path, repo_root)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (f"error: perf/carry/proxy_val_000000.bin.xz does not unpack ({reason}); delete it, "
                             "re-create it with bash perf/pack.sh ../shared/proxy and carry perf/carry again\n")
    assert [p.name for p in (tmp_path / "data" / "proxy").iterdir()] == ["proxy_train_000001.bin"]  # no .part left


def test_a_xz_that_does_not_unpack_names_the_carry_folder_it_came_from(tmp_path, repo_root):
    """PROXY_CARRY names another folder than perf/carry: the fix carries that one again."""
    carry_with(tmp_path, val=b"not xz at all", train=lzma.compress(TRAIN))
    (tmp_path / "perf" / "carry").rename(tmp_path / "packed")
    result = unpack_in(tmp_path, repo_root, before="PROXY_CARRY=packed && ")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == ("error: packed/proxy_val_000000.bin.xz does not unpack (Input format not supported by "
                             "decoder); delete it, re-create it with bash perf/pack.sh ../shared/proxy and carry "
                             "packed again\n")


def test_a_shard_that_cannot_be_written_is_one_line_naming_it(tmp_path, repo_root):
    """The shard's side (here a file size limit, where a full disk would say 'No space left on device'), told apart
    from a bad .xz: the fix is not to pack again."""
    carry_with(tmp_path, val=lzma.compress(VAL), train=lzma.compress(TRAIN))
    result = unpack_in(tmp_path, repo_root, before="ulimit -f 100 && ")  # 100 KiB: the train shard (768 KB) is cut
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == ("error: cannot write data/proxy/proxy_train_000001.bin (File too large); free space in "
                             "data/proxy/ or make it writable\n")
    assert list((tmp_path / "data" / "proxy").iterdir()) == []


@pytest.mark.parametrize("carry", ["missing", "empty", "val only", "train only"])
def test_no_shards_to_run_on_is_one_line_naming_the_carry(tmp_path, repo_root, carry):
    """The carry folder left out of a device call (or holding only some shards): nothing said, then every run of the
    tool failed on the missing shards, with the track script's fix for FineWeb's (a download)."""
    if carry != "missing":
        packed = {"val only": {"val": lzma.compress(VAL)}, "train only": {"train": lzma.compress(TRAIN)}}
        carry_with(tmp_path, **packed.get(carry, {}))
    result = unpack_in(tmp_path, repo_root)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == ("error: no proxy shards (proxy_val_*.bin and proxy_train_*.bin) in data/proxy/ or packed "
                             "in perf/carry/; pack them (bash perf/pack.sh ../shared/proxy) and carry perf/carry\n")


def test_shards_in_place_need_no_carry(tmp_path, repo_root):
    (tmp_path / "data" / "proxy").mkdir(parents=True)
    for name in ("proxy_val_000000.bin", "proxy_train_000001.bin"):
        (tmp_path / "data" / "proxy" / name).write_bytes(b"a shard")
    assert unpack_in(tmp_path, repo_root).stdout == "unpacked\n"


def test_an_unpack_leaves_another_jobs_part_file_alone(tmp_path, repo_root):
    """Two jobs side by side (perf/pair.sh) on a fresh machine unpack the same shards: both wrote one .part file, the
    second truncating what the first had written, and the first renamed it into the shard while the second still
    wrote it (its runs then read a short shard). Each job's .part file is its own."""
    carry_with(tmp_path, val=lzma.compress(VAL), train=lzma.compress(TRAIN))
    (tmp_path / "data" / "proxy").mkdir(parents=True)
    other = tmp_path / "data" / "proxy" / "proxy_val_000000.bin.part"  # as the other job's unpack names its own
    other.write_bytes(b"the other job's first megabytes")
    assert unpack_in(tmp_path, repo_root).stdout == "unpacked\n"
    assert other.read_bytes() == b"the other job's first megabytes"
    assert (tmp_path / "data" / "proxy" / "proxy_val_000000.bin").read_bytes() == VAL
    assert sorted(p.name for p in (tmp_path / "data" / "proxy").iterdir()) == [
        "proxy_train_000001.bin", "proxy_val_000000.bin", "proxy_val_000000.bin.part"]


@pytest.mark.parametrize("tool, args", [("proxy.sh", ["short", "out"]), ("ab.sh", ["short", "out", "--seed=0"]),
                                        ("multi_gpu.sh", ["2", "out", "short"]),
                                        ("startup_ab.sh", ["short", "out", "a.py", "b.py"]),
                                        ("fullbatch_ab.sh", ["short", "out", "a.py", "b.py"])])
def test_every_tool_stops_before_its_runs_where_the_shards_do_not_unpack(tmp_path, repo_root, tool, args):
    """The error line alone, exit status 2, no run started, and the track script restored where it was staged."""
    env = versions_ab_folder(tmp_path, repo_root, tool, 'echo "$*" >> runs.txt\n' + COMPLETES)
    shutil.rmtree(tmp_path / "data")
    whole = lzma.compress(VAL)
    carry_with(tmp_path, val=whole[:len(whole) // 2], train=lzma.compress(TRAIN))
    env["PROXY_CARRY"] = "perf/carry"
    result = subprocess.run(["bash", f"perf/{tool}", *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=60)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("error: perf/carry/proxy_val_000000.bin.xz does not unpack (")
    assert result.stderr.count("\n") == 1 and not (tmp_path / "runs.txt").exists()
    assert (tmp_path / "train_gpt.py").read_text() == "# main as checked out\n"


def test_pack_leaves_another_packs_part_file_alone(tmp_path, repo_root):
    """Two packs at once (a second terminal) both wrote one .part file, and the first renamed it into the .xz while
    the second still wrote it: a truncated .xz, which later packs kept. Each pack's .part file is its own."""
    (tmp_path / "shards").mkdir()
    (tmp_path / "shards" / "proxy_val_000000.bin").write_bytes(VAL)
    (tmp_path / "perf" / "carry").mkdir(parents=True)
    other = tmp_path / "perf" / "carry" / "proxy_val_000000.bin.xz.part"  # as the other pack names its own
    other.write_bytes(b"the other pack's first bytes")
    subprocess.run(["bash", str(repo_root / "perf" / "pack.sh"), "shards"], cwd=tmp_path, check=True,
                   capture_output=True, timeout=60)
    assert other.read_bytes() == b"the other pack's first bytes"
    assert lzma.decompress((tmp_path / "perf" / "carry" / "proxy_val_000000.bin.xz").read_bytes()) == VAL


def test_pack_keeps_no_partial_xz_when_xz_fails(tmp_path, repo_root):
    """An xz that fails after writing part of its output (a full disk) fails pack.sh and leaves no .xz (the partial
    one was kept, and skipped by the next pack); the next pack writes the whole one."""
    (tmp_path / "shards").mkdir()
    (tmp_path / "shards" / "proxy_val_000000.bin").write_bytes(bytes(range(256)) * 8)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "xz").write_text("#!/usr/bin/env bash\nprintf partial\nexit 1\n")
    (tmp_path / "bin" / "xz").chmod(0o755)
    pack = ["bash", str(repo_root / "perf" / "pack.sh"), "shards"]
    result = subprocess.run(pack, cwd=tmp_path, env=dict(os.environ, PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}"),
                            capture_output=True, timeout=60)
    assert result.returncode != 0 and list((tmp_path / "perf" / "carry").iterdir()) == []
    subprocess.run(pack, cwd=tmp_path, check=True, capture_output=True, timeout=60)
    packed = (tmp_path / "perf" / "carry" / "proxy_val_000000.bin.xz").read_bytes()
    assert lzma.decompress(packed) == bytes(range(256)) * 8
