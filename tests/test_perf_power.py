"""perf/power.sh and perf/power_summary.py on the CPU: the summary reads nvidia-smi's CSV (busy samples only, the
power cap's share), and power.sh runs its command under a logger, exits with the command's status and prints the
summary for the command's first visible GPU (a fake nvidia-smi on PATH stands in for the GPU's); the summary's
command line: --help, and one error line each for an option, a wrong count of arguments and a missing CSV."""

import os
import subprocess
import sys

import pytest

SAMPLES = [  # timestamp, utilisation, power, limit, SM clock, memory clock, temperature, cap, thermal, hardware
    "2026/12/02 13:00:00.000, 0, 80.10, 700.00, 345, 3201, 30, Not Active, Not Active, Not Active",
    "2026/12/02 13:00:00.100, 100, 690.00, 700.00, 1500, 3201, 55, Active, Not Active, Not Active",
    "2026/12/02 13:00:00.200, 95, 700.00, 700.00, 1410, 3201, 60, Active, Not Active, Not Active",
    "2026/12/02 13:00:00.300, 100, 600.00, 700.00, 1980, 3201, 58, Not Active, Not Active, Not Active",
    "2026/12/02 13:00:00.400, 100, [N/A], 700.00, 1980, 3201, 58, Not Active, Not Active, Not Active",
    "2026/12/02 13:00:00.500, 100, 650.0",
]


@pytest.fixture
def power_summary(repo_root):
    sys.path.insert(0, str(repo_root / "perf"))
    import power_summary
    return power_summary


def test_summary_counts_busy_samples_and_the_power_cap(power_summary):
    rows = [line.split(",") for line in SAMPLES]
    line = power_summary.summary(rows, "t2")
    assert line.startswith("t2: 3 busy samples of 6;")
    assert "power 690 W (600-700) of 700.00 W" in line
    assert "SM clock 1500 MHz (1410-1980)" in line
    assert "power cap active in 67%, thermal slowdown 0%, hardware slowdown 0%" in line
    assert "max temperature 60 C" in line


def test_summary_without_busy_samples_says_so(power_summary):
    assert power_summary.summary([SAMPLES[0].split(",")], "idle") == (
        "idle: no busy samples (utilisation >= 90%) among 1")


def test_power_sh_logs_while_the_command_runs_and_keeps_its_status(repo_root, tmp_path):
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    smi = fake_bin / "nvidia-smi"  # prints the samples, says so, then waits to be stopped as the real logger would
    smi.write_text(f"#!/usr/bin/env bash\necho \"$@\" > {tmp_path}/smi_args\n"
                   + "".join(f"echo '{s}'\n" for s in SAMPLES[:4]) + f"touch {tmp_path}/sampled\nexec sleep 30\n")
    smi.chmod(0o755)
    env = dict(os.environ, PATH=f"{fake_bin}:{os.environ['PATH']}", CUDA_VISIBLE_DEVICES="3,1")
    # ends once the samples are written (or after 20 s, for a logger that never writes them)
    command = f"for _ in $(seq 400); do [ -e {tmp_path}/sampled ] && break; sleep 0.05; done; exit 3"
    result = subprocess.run(["bash", "perf/power.sh", str(tmp_path / "out"), "job", "bash", "-c", command],
                            cwd=repo_root, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 3
    assert "job: 3 busy samples of 4;" in result.stdout
    assert (tmp_path / "out" / "job_power.csv").read_text().count("\n") == 4
    assert (tmp_path / "smi_args").read_text().startswith("-i 3 --query-gpu=")  # the command's first GPU


def test_main_prints_the_summary_of_the_csv_under_the_name(power_summary, capsys, tmp_path):
    (tmp_path / "t2_power.csv").write_text("\n".join(SAMPLES) + "\n")
    assert power_summary.main([str(tmp_path / "t2_power.csv"), "t2"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("t2: 3 busy samples of 6;") and len(out.splitlines()) == 1 and err == ""


def test_help_prints_the_usage_and_a_bad_command_line_is_one_line(power_summary, capsys, tmp_path):
    assert power_summary.main(["--help"]) == 0
    out, err = capsys.readouterr()
    assert "python perf/power_summary.py OUT/NAME_power.csv NAME  ->" in out and err == ""
    errors = {("--bogus",): "error: unknown argument '--bogus': it takes a CSV and a name, no options (see --help)",
              (): "error: 0 arguments; give the CSV perf/power.sh logged and the run's name, e.g. OUT/NAME_power.csv "
                  "NAME (see --help)",  # this and the missing file were tracebacks
              (f"{tmp_path}/t2_power.csv", "t2"): f"error: {tmp_path}/t2_power.csv: no such file; give the CSV "
                                                  "perf/power.sh logged, OUT/NAME_power.csv (see --help)"}
    for argv, line in errors.items():
        assert power_summary.main(list(argv)) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.splitlines() == [line]
