"""perf/proxy_common.sh, the device runs' shell helpers, and perf/ab.sh built on them: keep_kernel_sources copies, for
a profiled run, the inductor source of each Triton kernel that the log lists among the longest, so that a slow fused
kernel can be read; ab.sh keeps each GPU's caches and compile artifacts apart."""

import os
import subprocess


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


def test_ab_gives_each_gpu_its_own_caches_and_compile_artifacts(tmp_path, repo_root):
    """Two variants of one script side by side on two GPUs: each run gets its GPU, that GPU's inductor cache and
    its own --compile_cache file, so that neither first run loads what the other wrote (a stand-in python prints
    what it was given)."""
    bin_dir, caches = tmp_path / "bin", tmp_path / "caches"
    bin_dir.mkdir()
    (bin_dir / "python").write_text('#!/usr/bin/env bash\necho "gpu=$CUDA_VISIBLE_DEVICES '
                                    'inductor=$TORCHINDUCTOR_CACHE_DIR args=$*"\n')
    (bin_dir / "python").chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", AB_GPUS="2", AB_CACHES=str(caches),
               PROXY_CARRY=str(tmp_path / "carry"))
    subprocess.run(["bash", str(repo_root / "perf/ab.sh"), "short", str(tmp_path / "out"), "--seed=0", "--seed=1"],
                   cwd=tmp_path, env=env, check=True, timeout=60, capture_output=True)
    for gpu, seed in [(0, 0), (1, 1)]:
        console = (tmp_path / "out" / f"variant{gpu}.out").read_text()
        assert f"gpu={gpu} inductor={caches}/gpu{gpu}/inductor " in console
        assert f"--compile_cache={caches}/gpu{gpu}/compile_cache_train_gpt.bin " in console
        assert console.rstrip().endswith(f"--seed={seed}")


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
