"""perf/pair.sh: two jobs side by side in one device call, job i on GPU i, each packed into one .tgz when it ends
or reaches PAIR_LIMIT, with the tracebacks of its console files kept (a call returns at most 8 files)."""

import os
import subprocess
import tarfile


def run_pair(repo_root, out, *jobs, limit="30", **env_vars):
    return subprocess.run(["bash", str(repo_root / "perf/pair.sh"), str(out), *jobs], cwd=repo_root,
                          env=dict(os.environ, PAIR_LIMIT=limit, **env_vars), capture_output=True, text=True,
                          timeout=120)


def test_each_job_is_packed_with_its_tracebacks_and_a_job_past_the_limit_too(tmp_path, repo_root):
    out = tmp_path / "out"
    frames = "".join(f"  File frame{i}\\n" for i in range(80))  # a deep stack, as torch.compile's are
    long_line = "x" * 1000
    finishing = ('mkdir -p $JOB_OUT/logs && echo log > $JOB_OUT/logs/run.txt && echo gpu=$GPU ids=$AB_GPU_IDS && '
                 f'printf "step 1\\nTraceback (most recent call last):\\n  boom\\n{frames}  {long_line}\\n'
                 'ValueError: the cause\\n" > $JOB_OUT/run.out && echo fine > $JOB_OUT/clean.out')
    stuck = 'echo log > $JOB_OUT/partial.txt; echo started; sleep 60; echo never'
    result = run_pair(repo_root, out, finishing, stuck, limit="10")  # time enough for the finishing job on a busy CPU
    assert result.returncode == 1, result.stderr  # a job did not exit 0
    assert sorted(result.stdout.splitlines()) == ["job0: exit 0", "job1: exit 124"]
    assert sorted(p.name for p in out.iterdir()) == ["job0.tgz", "job0.txt", "job1.tgz", "job1.txt"]
    assert (out / "job0.txt").read_text() == "gpu=0 ids=0\n"
    assert (out / "job1.txt").read_text() == "started\npair.sh: stopped at PAIR_LIMIT=10s\n"
    with tarfile.open(out / "job0.tgz") as packed:
        files = {m.name: m for m in packed.getmembers() if m.isfile()}
        assert sorted(files) == ["job0/logs/run.txt", "job0/run.out.err"]  # consoles gone, one traceback kept
        kept = packed.extractfile(files["job0/run.out.err"]).read().decode()
        assert "boom" in kept and "ValueError: the cause" in kept  # the stack's start and the error at the end
        assert "step 1" not in kept and max(len(line) for line in kept.splitlines()) == 300
    with tarfile.open(out / "job1.tgz") as packed:
        assert [m.name for m in packed.getmembers() if m.isfile()] == ["job1/partial.txt"]


def test_consoles_in_folders_with_spaces_are_packed_as_any_other(tmp_path, repo_root):
    """A console under a folder with a space (and OUT with one): its traceback kept, a clean one deleted (the paths
    were split at the space, and both consoles packed whole)."""
    out = tmp_path / "my out"
    job = ('mkdir -p "$JOB_OUT/run a" && printf "Traceback (most recent call last):\\nValueError: x\\n" > '
           '"$JOB_OUT/run a/crash.out" && echo fine > "$JOB_OUT/run a/clean.out"')
    result = run_pair(repo_root, out, job)
    assert result.returncode == 0, result.stderr
    with tarfile.open(out / "job0.tgz") as packed:
        assert sorted(m.name for m in packed.getmembers() if m.isfile()) == ["job0/run a/crash.out.err"]
        kept = packed.extractfile("job0/run a/crash.out.err").read().decode()
    assert kept.startswith("Traceback (most recent call last):\nValueError: x\n")


def test_one_job_runs_on_gpu_0(tmp_path, repo_root):
    result = run_pair(repo_root, tmp_path / "out", "echo $GPU")
    assert result.stdout == "job0: exit 0\n" and (tmp_path / "out" / "job0.txt").read_text() == "0\n"
    assert result.returncode == 0


def test_a_job_killed_at_the_limit_is_noted_and_a_failed_job_fails_pair(tmp_path, repo_root):
    """A job that ignores the limit's TERM ends by timeout's KILL 10 s later (exit 137) and gets the PAIR_LIMIT note
    (only 124 got it); a job that KILLs itself before the limit does not; pair.sh exits 1 (it exited 0)."""
    out = tmp_path / "out"
    result = run_pair(repo_root, out, "echo early; kill -KILL $$", 'trap "" TERM; echo started; sleep 30', limit="2")
    assert result.returncode == 1
    assert sorted(result.stdout.splitlines()) == ["job0: exit 137", "job1: exit 137"]
    assert (out / "job0.txt").read_text() == "early\n"
    assert (out / "job1.txt").read_text() == "started\npair.sh: stopped at PAIR_LIMIT=2s\n"


def test_pair_exits_1_when_one_job_fails(tmp_path, repo_root):
    result = run_pair(repo_root, tmp_path / "out", "exit 3", "true")
    assert result.returncode == 1 and sorted(result.stdout.splitlines()) == ["job0: exit 3", "job1: exit 0"]


def test_each_jobs_plain_command_sees_only_its_gpu(tmp_path, repo_root):
    """A plain command (python perf/muon_bench.py) takes CUDA_VISIBLE_DEVICES: each job's is its GPU, whatever the
    caller's was (both jobs ran on the caller's first GPU)."""
    out = tmp_path / "out"
    result = run_pair(repo_root, out, "echo $CUDA_VISIBLE_DEVICES", "echo $CUDA_VISIBLE_DEVICES",
                      CUDA_VISIBLE_DEVICES="5,6")
    assert result.returncode == 0, result.stderr
    assert [(out / f"job{i}.txt").read_text() for i in (0, 1)] == ["0\n", "1\n"]


def test_no_job_or_three_are_one_error_line(tmp_path, repo_root):
    for jobs in [(), ("true", "true", "true")]:
        result = run_pair(repo_root, tmp_path / "out", *jobs)
        assert result.returncode == 2 and result.stderr == "error: give one or two job commands\n"
