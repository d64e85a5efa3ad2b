"""perf/gpu_checks.py's host-synchronisation check on the CPU: torch.cuda's debug mode replaced by a stand-in under
which a marked launch raises as a synchronising call does (the GPU runs come from the device)."""

import functools
import os
import subprocess
import sys

import torch


def test_synchronising_names_the_launches_that_raise_under_the_debug_mode_and_restores_it(repo_root, monkeypatch):
    sys.path.insert(0, str(repo_root / "perf"))
    import gpu_checks
    modes, calls = ["default"], []
    monkeypatch.setattr(torch.cuda, "set_sync_debug_mode", modes.append)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: calls.append("synchronize"))

    def launcher(name: str, synchronises: bool):
        calls.append(name)
        if synchronises and modes[-1] == "error":
            raise RuntimeError("called a synchronizing CUDA operation")

    def index_put(name: str, synchronises: bool):
        launcher(name, synchronises)

    launches = [functools.partial(launcher, "a", False), functools.partial(index_put, "b", True),
                functools.partial(launcher, "c", False)]
    assert gpu_checks.synchronising(launches) == ["index_put"]
    assert calls == ["a", "b", "c", "synchronize", "a", "b", "c"]  # built (and warm) before the debug mode
    assert modes == ["default"] + ["error", "default"] * 3


def test_host_sync_checks_fail_a_track_with_a_synchronising_launch_and_name_it(repo_root, monkeypatch, capsys):
    sys.path.insert(0, str(repo_root / "perf"))
    import gpu_checks
    for script in (gpu_checks.tg, gpu_checks.tm):
        monkeypatch.setattr(script, "tiny_kernel_launches", lambda args, device, script=script: [script] * 3)
    monkeypatch.setattr(gpu_checks, "synchronising", lambda launches: [] if launches[0] is gpu_checks.tg else
                        ["index_put"])
    assert gpu_checks.host_sync_checks() == [True, False]
    assert capsys.readouterr().out.splitlines() == [
        "ok  track 1's 3 kernel launches: 0 synchronise the host",
        "BAD track 2's 3 kernel launches: 1 synchronise the host: index_put"]


def test_help_prints_the_usage_and_an_argument_is_one_line_without_running_a_check(repo_root, capsys):
    sys.path.insert(0, str(repo_root / "perf"))
    import gpu_checks
    assert gpu_checks.main(["--help"]) == 0
    out, err = capsys.readouterr()
    assert "python perf/gpu_checks.py  ->" in out and "ptxas:" not in out and err == ""
    assert gpu_checks.main(["bogus"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == ["error: unknown argument 'bogus': it takes no arguments (see --help)"]


def test_without_a_gpu_it_is_one_line_naming_the_missing_gpu(repo_root, capsys, monkeypatch):
    sys.path.insert(0, str(repo_root / "perf"))
    import gpu_checks
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu_checks.main([]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [
        "error: perf/gpu_checks.py runs on an NVIDIA GPU and torch sees none (torch.cuda.is_available() is False); "
        "run it on the GPU machine"]


def test_importing_the_checks_configures_triton_builds_as_training_does(repo_root):
    """Code that calls the checks without main() builds their kernels as training does (torch's ptxas where it has
    one, FMA contraction) and runs cuBLASLt as training does: configure_triton_builds and configure_cublaslt run at
    import. Their settings show on any machine."""
    names = ("TRITON_DEFAULT_FP_FUSION", "CUBLASLT_WORKSPACE_SIZE", "TORCH_CUBLASLT_UNIFIED_WORKSPACE")
    env = {name: value for name, value in os.environ.items() if name not in names}
    code = f"import os, gpu_checks; print([os.environ.get(name) for name in {names}])"
    result = subprocess.run([sys.executable, "-c", code], cwd=repo_root / "perf", env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "['1', '0', '0']"
