"""perf/head_weight_grad_bench.py on small shapes on the CPU (--tiny, fp32 stand-ins, the kernels under Triton's
interpreter): training's way, the token-major GEMM at each launch and cuBLAS's GEMM alone all give the fp64 product
(the GPU numbers come from the device). Run in this process, so that the interpreter fixture's patch applies."""

import re
import sys

import torch


def test_tiny_run_gives_the_fp64_product_every_way(repo_root, require_interpreted, capsys):
    sys.path.insert(0, str(repo_root / "perf"))
    import head_weight_grad_bench as bench
    require_interpreted(bench.token_major_weight_grad_kernel)
    assert bench.main(["--tiny"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = ["training's (transpose_kernel, then cuBLAS's GEMM, precise)",
             *(f"token_major_weight_grad_kernel {launch}" for launch in bench.TINY_LAUNCHES),
             "cuBLAS's GEMM alone (the gradient's copy made before)"]
    assert len(lines) == len(names)
    for line, name in zip(lines, names):
        match = re.fullmatch(rf"{re.escape(name)}: [\d.]+ ms, \d+ TFLOP/s, largest error ([\d.e+-]+) of the largest "
                             r"entry", line)
        assert match and float(match[1]) < 1e-5, line  # fp32 sums of fp32 products


def test_the_kernel_covers_partial_tiles_and_scales(repo_root, require_interpreted):
    """200 x 96 outputs over tiles of 32 x 64 (partial at both edges, more tiles than the interpreter's 4 programs),
    tokens in blocks of 32 and 64: every entry is scale (a^T @ b), precise or fast."""
    sys.path.insert(0, str(repo_root / "perf"))
    import head_weight_grad_bench as bench
    require_interpreted(bench.token_major_weight_grad_kernel)
    gen = torch.Generator().manual_seed(5)
    a, b = torch.randn(128, 200, generator=gen), torch.randn(128, 96, generator=gen)
    for launch in [(32, 64, 32, 2, 4, 1, True), (32, 64, 64, 1, 4, 1, False)]:
        out = bench.token_major_weight_grad(a, b.T.contiguous(), 0.25, launch)
        torch.testing.assert_close(out, 0.25 * a.T @ b, rtol=1e-5, atol=1e-5)


def test_every_launch_builds_for_an_h100_within_its_shared_memory_and_registers(repo_root, run_gpu_compiler):
    """Each of the bench's launches compiled for sm_90 by perf/kernel_report.py's compiler: its shared memory fits a
    block's, ptxas spills nothing and the product is on the tensor cores (wgmma), so that no launch fails or crawls
    on the device."""
    sys.path.insert(0, str(repo_root / "perf"))
    import head_weight_grad_bench as bench
    code = """import sys; sys.path.insert(0, 'perf'); import kernel_report as kr; import head_weight_grad_bench as b
for bm, bn, bt, group, warps, stages, precise in b.LAUNCHES:
    types = {'a_desc': f'tensordesc<fp8e5[{bt}, {bm}]>', 'b_t_desc': f'tensordesc<fp8e4nv[{bn}, {bt}]>',
             'out_ptr': '*fp32', 'scale': 'fp32'}
    constexprs = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_T=bt, GROUP_M=group, PROGRAMS=132, PRECISE=precise)
    kernel = kr.compile_kernel(b.token_major_weight_grad_kernel, constexprs, warps, stages, types)
    print(kernel.metadata.shared, kr.SHARED_LIMIT, *kr.ptxas_usage(kernel.asm['ptx']), 'wgmma' in kernel.asm['ptx'])
"""
    result = run_gpu_compiler("-c", code, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [line.split() for line in result.stdout.splitlines()]
    assert len(lines) == len(bench.LAUNCHES)
    for shared, limit, registers, spilled, tensor_cores in lines:
        assert int(shared) <= int(limit) and int(registers) <= 255 and spilled == "0" and tensor_cores == "True"
