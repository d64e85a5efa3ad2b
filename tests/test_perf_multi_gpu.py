"""perf/multi_gpu.sh: NPROC processes against 1 process with 8 micro-steps, run here with a stand-in python and
torchrun that record their arguments."""

import os
import subprocess

import pytest


def run_multi_gpu(tmp_path, repo_root, *args: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    """perf/multi_gpu.sh ARGS from tmp_path, with stand-in proxy shards in data/proxy: its result and the commands it
    ran, each argument in brackets."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "data" / "proxy").mkdir(parents=True)
    for name in ("proxy_val_000000.bin", "proxy_train_000001.bin"):
        (tmp_path / "data" / "proxy" / name).write_bytes(b"")
    for name in ("python", "torchrun"):
        (tmp_path / "bin" / name).write_text(f"#!/usr/bin/env bash\necho \"{name} $(printf '[%s]' \"$@\")\" >> "
                                             f"{tmp_path / 'ran.txt'}\n")
        (tmp_path / "bin" / name).chmod(0o755)
    env = dict(os.environ, PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}", PROXY_CARRY=str(tmp_path / "carry"))
    result = subprocess.run(["bash", str(repo_root / "perf" / "multi_gpu.sh"), *args], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=60)
    ran = tmp_path / "ran.txt"
    return result, ran.read_text().splitlines() if ran.exists() else []


@pytest.mark.parametrize("nproc", ["short", "0", "3", "16"])
def test_a_process_count_that_does_not_divide_8_is_one_error_line_before_any_run(tmp_path, repo_root, nproc):
    """'short "my out"' (the count left out) ran the 1-process references, then failed torchrun."""
    result, ran = run_multi_gpu(tmp_path, repo_root, nproc, "my out")
    assert result.returncode == 2
    assert result.stderr == f"error: NPROC must be 1, 2, 4 or 8 (dividing the 8 micro-steps), not '{nproc}'\n"
    assert ran == [] and sorted(p.name for p in tmp_path.iterdir()) == ["bin", "data"]


def test_an_output_folder_with_a_space_stays_one_argument(tmp_path, repo_root):
    result, ran = run_multi_gpu(tmp_path, repo_root, "2", "my out", "short")
    assert result.returncode == 0, result.stderr
    runs = [line for line in ran if "[--run_id=" in line]
    assert [line.split()[0] for line in runs] == ["python", "torchrun"]
    assert all("[--logs_dir=my out/logs]" in line for line in runs)
    assert "[--run_id=short_2proc]" in runs[1] and "[--nproc_per_node=2]" in runs[1]
    assert sorted(p.name for p in (tmp_path / "my out" / "console").iterdir()) == ["short_1proc.out",
                                                                                   "short_2proc.out"]
