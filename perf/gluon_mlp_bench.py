"""Would track 2's MLP GEMM reach cuBLAS's rate with its epilogue under another tile's MMAs? A candidate kernel in
Gluon (Triton's lower-level language: warp groups, shared buffers and barriers by hand), timed against the script's
Triton kernel (relu_square_gemm at MLP_LAUNCH) at the proxy's 65,536 tokens, 1,024 -> 4,096, both passes.

The script's kernel runs one 128 x 256 tile at a time an SM, its epilogue (the forward's store of relu(h)^2, the
backward's load of a and store of the gradient) after the tile's MMAs: ~2 and ~5 us of each ~12-us tile
(perf/NOTES.md, session 28). Here each program holds three warp groups: one issues the TMA loads of x and w into a
ring of STAGES shared buffers (and, backward, of a's tile), and two compute 128 x 128 tiles in turn ("ping-pong"):
while one runs its epilogue, the other's MMAs keep the tensor cores busy. The groups take turns at the ring (a pair of
barriers), so the second group's MMAs start as the first one's are issued. Each group's a buffer doubles as its
output's staging buffer. Status (perf/NOTES.md, session 29): equal to the script's kernel bit for bit at every shape
checked; its main loop alone runs near cuBLAS's rate, but with the epilogue the forward is no faster than the
script's kernel and the backward ~10% faster: each part of the epilogue slows the other group's MMAs.

python perf/gluon_mlp_bench.py [--stages=N,...] [--epilogue_parts]  ->  per pass: cuBLAS's bare GEMM (the bound), the
script's kernel, this one at each STAGES (--stages=4 for one: a hung barrier then costs one process), with the largest
difference of each from the script's output; --epilogue_parts adds this kernel without its epilogue (the main loop's
own rate), without the epilogue's TMA store, and with only that store (EPILOGUE_PARTS; the output then wrong).
python perf/gluon_mlp_bench.py --check=PASS,ROWS,COLS ...  ->  one launch of the pass (forward or backward) at that
shape against the script's kernel, a line each (run each in its own process: a fault ends the process's CUDA context).
python perf/gluon_mlp_bench.py --compile_only  ->  both passes built for sm_90 on any machine (no GPU): their shared
memory (whether it fits a block's), the registers each warp group asks for (setmaxnreg), and the machine code's MMA
instructions with each part of the epilogue (tests/test_perf_gluon_mlp_bench.py). --help prints this.
"""
import re
import sys
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import printed_help  # noqa: E402

GLUON_TRITON = "3.6"  # Gluon is experimental: Triton 3.9 removed tma.async_copy_global_to_shared, which this uses
if __name__ == "__main__" and printed_help(sys.argv[1:], __doc__):  # the usage needs no Gluon: any Triton prints it
    sys.exit(0)
if triton.__version__.rsplit(".", 1)[0] != GLUON_TRITON:
    sys.exit(f"error: this bench is written against Triton {GLUON_TRITON}'s Gluon API, which is experimental and has "
             f"changed since; this is Triton {triton.__version__} (torch 2.11 ships {GLUON_TRITON})")

from triton.experimental import gluon  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon._runtime import GluonASTSource  # noqa: E402
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma,  # noqa: E402
                                                              warpgroup_mma, warpgroup_mma_wait)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import train_gpt_medium as medium  # noqa: E402
import kernel_report  # noqa: E402
from bench_common import no_gpu_error, option_list, option_values, timed_us, usage_or_error  # noqa: E402

BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M = 128, 128, 64, 8
STAGES = (3, 4, 5)  # ring depths: 32 KB a stage, 64 KB of tile buffers; 5 stages take 229,576 of 232,448 B
CONSUMER_REGISTERS = gl.constexpr(232)  # a thread of each computing group: 2 x 128 x 232 + 128 x 40 <= 65,536
KERNEL_MAX_REGISTERS = 168  # x 12 warps x 32: the loading group gets what the computing groups leave, 40
# The epilogue's parts (the kernel's EPILOGUE, a sum of them), to time each one's cost: the arithmetic with its store
# into the tile buffer (backward: with a's load), and the buffer's TMA store to the output
SHARED_STORE, TMA_STORE = gl.constexpr(1), gl.constexpr(2)
WHOLE_EPILOGUE = 3
EPILOGUE_PARTS = {"MMAs only": 0, "without the TMA store": 1, "with only the TMA store": 2}


@gluon.jit
def tile_origin(tile, rows, cols, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, GROUP_M: gl.constexpr):
    """First row and column of output tile number `tile`, GROUP_M block-rows at a time (as the script's)."""
    blocks_m, blocks_n = gl.cdiv(rows, BLOCK_M), gl.cdiv(cols, BLOCK_N)
    group, in_group = tile // (GROUP_M * blocks_n), tile % (GROUP_M * blocks_n)
    group_rows = gl.minimum(blocks_m - group * GROUP_M, GROUP_M)
    return (group * GROUP_M + in_group % group_rows) * BLOCK_M, (in_group // group_rows) * BLOCK_N


@gluon.jit
def load_partition(x_desc, w_desc, a_desc, out_desc, row_scale_ptr, x_bufs, w_bufs, tile_bufs, ready, empty,
                   a_ready, a_empty, turns, rows, cols, K: gl.constexpr, GROUP_M: gl.constexpr,
                   BACKWARD: gl.constexpr, EPILOGUE: gl.constexpr, CONSUMER: gl.constexpr):
    """The loading warps: this program's tiles in order, each one's K steps into the ring (waiting for a stage to be
    freed), and backward, halfway through them, the tile's a into its consumer's buffer (waiting for that buffer's
    last store, long done by then: waiting before the tile's first loads held them up)."""
    BLOCK_M: gl.constexpr = x_bufs.shape[1]
    BLOCK_K: gl.constexpr = x_bufs.shape[2]
    BLOCK_N: gl.constexpr = out_desc.block_type.shape[1]
    STAGES: gl.constexpr = x_bufs.shape[0]
    tiles = gl.cdiv(rows, BLOCK_M) * gl.cdiv(cols, BLOCK_N)
    step = 0
    local = 0
    for tile in range(gl.program_id(0), tiles, gl.num_programs(0)):
        row, col = tile_origin(tile, rows, cols, BLOCK_M, BLOCK_N, GROUP_M)
        for k0 in range(0, K, BLOCK_K):
            stage = step % STAGES
            mbarrier.wait(empty.index(stage), ((step // STAGES) & 1) ^ 1)
            mbarrier.expect(ready.index(stage), x_desc.block_type.nbytes + w_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(x_desc, [row, k0], ready.index(stage), x_bufs.index(stage))
            if BACKWARD:
                tma.async_copy_global_to_shared(w_desc, [k0, col], ready.index(stage), w_bufs.index(stage))
            else:
                tma.async_copy_global_to_shared(w_desc, [col, k0], ready.index(stage), w_bufs.index(stage))
            step += 1
            if BACKWARD and EPILOGUE & SHARED_STORE and k0 == K // 2:  # the buffer's last tile is stored by then
                consumer = local % 2
                mbarrier.wait(a_empty.index(consumer), ((local // 2) & 1) ^ 1)
                mbarrier.expect(a_ready.index(consumer), a_desc.block_type.nbytes)
                tma.async_copy_global_to_shared(a_desc, [row, col], a_ready.index(consumer),
                                                tile_bufs.index(consumer))
        local += 1


@gluon.jit
def relu_square_epilogue_stored(acc, out_desc, row_scale_ptr, tile_buf, a_ready, a_empty, rows, row, col, local,
                                BACKWARD: gl.constexpr, EPILOGUE: gl.constexpr, CONSUMER: gl.constexpr):
    """A computing group's epilogue: the script's relu_square_epilogue of the tile's product, stored by TMA from
    the group's tile buffer (backward: which first holds the tile's a), or only the parts in EPILOGUE. Without the
    arithmetic it is kept behind a condition that never holds: ptxas drops MMAs whose results go unused."""
    layout: gl.constexpr = acc.type.layout
    BLOCK_M: gl.constexpr = acc.type.shape[0]
    if EPILOGUE & SHARED_STORE or rows < 0:
        tile_rows = row + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, layout))
        row_scale = gl.expand_dims(gl.load(row_scale_ptr + tile_rows, mask=tile_rows < rows, other=0.0), 1)
        if BACKWARD:
            mbarrier.wait(a_ready.index(CONSUMER), (local // 2) & 1)
            relu = gl.sqrt(tile_buf.load(layout).to(gl.float32))
            out = 2.0 * relu * acc.to(out_desc.dtype).to(gl.float32) * row_scale
        else:
            relu = gl.maximum(acc * row_scale, 0.0)
            out = relu * relu
        if not BACKWARD and EPILOGUE & TMA_STORE:
            tma.store_wait(pendings=0)  # the previous tile's store has read the buffer
        tile_buf.store(out.to(out_desc.dtype))
    if EPILOGUE & TMA_STORE:
        fence_async_shared()
        tma.async_copy_shared_to_global(out_desc, [row, col], tile_buf)
        if BACKWARD or not EPILOGUE & SHARED_STORE:
            tma.store_wait(pendings=0)
    if BACKWARD and EPILOGUE & SHARED_STORE:
        mbarrier.arrive(a_empty.index(CONSUMER), count=1)


@gluon.jit
def mma_partition(x_desc, w_desc, a_desc, out_desc, row_scale_ptr, x_bufs, w_bufs, tile_bufs, ready, empty,
                  a_ready, a_empty, turns, rows, cols, K: gl.constexpr, GROUP_M: gl.constexpr,
                  BACKWARD: gl.constexpr, EPILOGUE: gl.constexpr, CONSUMER: gl.constexpr):
    """One computing warp group: every other tile of the program (CONSUMER 0 or 1), its MMAs from the ring (each
    stage freed once the MMA after it is issued and it is done), then its epilogue as the script's
    relu_square_epilogue, stored by TMA from the group's tile buffer. The groups take turns at the ring (turns: each
    waits until the other has issued its previous K loop's MMAs), so that neither waits on a stage's barrier more
    than one phase ahead of its loads: a barrier's wait knows only the parity of the phase."""
    BLOCK_M: gl.constexpr = x_bufs.shape[1]
    BLOCK_K: gl.constexpr = x_bufs.shape[2]
    BLOCK_N: gl.constexpr = out_desc.block_type.shape[1]
    STAGES: gl.constexpr = x_bufs.shape[0]
    K_STEPS: gl.constexpr = K // BLOCK_K
    layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                     instr_shape=[16, BLOCK_N, 16])
    tiles = gl.cdiv(rows, BLOCK_M) * gl.cdiv(cols, BLOCK_N)
    tile_buf = tile_bufs.index(CONSUMER)
    local = CONSUMER
    for tile in range(gl.program_id(0) + CONSUMER * gl.num_programs(0), tiles, 2 * gl.num_programs(0)):
        row, col = tile_origin(tile, rows, cols, BLOCK_M, BLOCK_N, GROUP_M)
        acc = gl.zeros((BLOCK_M, BLOCK_N), gl.float32, layout)
        mbarrier.wait(turns.index(CONSUMER), ((local // 2) & 1) ^ (1 - CONSUMER))
        first_step = local * K_STEPS
        for k in range(K_STEPS):
            step = first_step + k
            stage = step % STAGES
            mbarrier.wait(ready.index(stage), (step // STAGES) & 1)
            w = w_bufs.index(stage)
            if not BACKWARD:
                w = w.permute((1, 0))
            acc = warpgroup_mma(x_bufs.index(stage), w, acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc, ))
            mbarrier.arrive(empty.index((step + STAGES - 1) % STAGES), count=1, pred=k > 0)
        mbarrier.arrive(turns.index(1 - CONSUMER), count=1)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
        mbarrier.arrive(empty.index((first_step + K_STEPS - 1) % STAGES), count=1)
        relu_square_epilogue_stored(acc, out_desc, row_scale_ptr, tile_buf, a_ready, a_empty, rows, row, col, local,
                                    BACKWARD, EPILOGUE, CONSUMER)
        local += 2
    tma.store_wait(pendings=0)


@gluon.jit
def ping_pong_relu_square_kernel(x_desc, w_desc, a_desc, out_desc, row_scale_ptr, rows, cols, K: gl.constexpr,
                                 GROUP_M: gl.constexpr, STAGES: gl.constexpr, BACKWARD: gl.constexpr,
                                 EPILOGUE: gl.constexpr):
    """relu_square_gemm_kernel's products and epilogues (forward: w is cols x K and a_desc is out_desc, unused;
    backward: w is K x cols) with a loading partition and two computing warp groups."""
    x_bufs = gl.allocate_shared_memory(x_desc.dtype, [STAGES] + x_desc.block_type.shape, x_desc.layout)
    w_bufs = gl.allocate_shared_memory(w_desc.dtype, [STAGES] + w_desc.block_type.shape, w_desc.layout)
    tile_bufs = gl.allocate_shared_memory(out_desc.dtype, [2] + out_desc.block_type.shape, out_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    a_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    a_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    turns = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    for i in gl.static_range(2):
        mbarrier.init(a_ready.index(i), count=1)
        mbarrier.init(a_empty.index(i), count=1)
        mbarrier.init(turns.index(i), count=1)
    gl.warp_specialize([
        (load_partition, (x_desc, w_desc, a_desc, out_desc, row_scale_ptr, x_bufs, w_bufs, tile_bufs, ready, empty,
                          a_ready, a_empty, turns, rows, cols, K, GROUP_M, BACKWARD, EPILOGUE, 0)),
        (mma_partition, (x_desc, w_desc, a_desc, out_desc, row_scale_ptr, x_bufs, w_bufs, tile_bufs, ready, empty,
                         a_ready, a_empty, turns, rows, cols, K, GROUP_M, BACKWARD, EPILOGUE, 0)),
        (mma_partition, (x_desc, w_desc, a_desc, out_desc, row_scale_ptr, x_bufs, w_bufs, tile_bufs, ready, empty,
                         a_ready, a_empty, turns, rows, cols, K, GROUP_M, BACKWARD, EPILOGUE, 1)),
    ], [4, 4], [CONSUMER_REGISTERS, CONSUMER_REGISTERS])


def block_shapes(backward: bool) -> dict:
    """Each descriptor's block: x's rows and K step, w's (K x cols backward, cols x K forward), the output's (and
    a's) tile."""
    return {"x": [BLOCK_M, BLOCK_K], "w": [BLOCK_K, BLOCK_N] if backward else [BLOCK_N, BLOCK_K],
            "out": [BLOCK_M, BLOCK_N]}


def descriptor_layouts(backward: bool) -> dict:
    return {name: gl.NVMMASharedLayout.get_default_for(shape, gl.bfloat16)
            for name, shape in block_shapes(backward).items()}


def ping_pong_relu_square_gemm(x, w, row_scale, a=None, stages: int = 4, epilogue: int = WHOLE_EPILOGUE):
    """As medium.relu_square_gemm: forward (w: cols x K) returns relu(h)^2, backward (w: K x cols, a) the gradient at
    h times row_scale. bf16 on an sm_90 GPU, rows a multiple of 128, K of 64, cols of 128. With only some of the
    epilogue's parts (EPILOGUE_PARTS) the output is wrong: to time what each part costs."""
    backward = a is not None
    rows, k = x.shape
    cols = w.size(1) if backward else w.size(0)
    out = x.new_empty(rows, cols)
    shapes, layouts = block_shapes(backward), descriptor_layouts(backward)

    def descriptor(t, name: str):
        return TensorDescriptor.from_tensor(t, shapes[name], layouts[name])

    out_desc = descriptor(out, "out")
    descriptors = [descriptor(x, "x"), descriptor(w, "w"), descriptor(a, "out") if backward else out_desc, out_desc]
    tiles = triton.cdiv(rows, BLOCK_M) * triton.cdiv(cols, BLOCK_N)
    programs = min(tiles, torch.cuda.get_device_properties(x.device).multi_processor_count)
    ping_pong_relu_square_kernel[(programs, )](*descriptors, row_scale, rows, cols, K=k, GROUP_M=GROUP_M,
                                               STAGES=stages, BACKWARD=backward, EPILOGUE=epilogue, num_warps=4,
                                               maxnreg=KERNEL_MAX_REGISTERS)
    return out


def compile_for_sm90(backward: bool, stages: int, k: int = 1024, epilogue: int = WHOLE_EPILOGUE):
    """The kernel built for sm_90 without a GPU (argument types as the JIT would specialise them)."""
    shapes, layouts = block_shapes(backward), descriptor_layouts(backward)
    desc = {name: f"tensordesc<bf16{shapes[name]},{layouts[name]!r}>" for name in shapes}
    signature = {"x_desc": desc["x"], "w_desc": desc["w"], "a_desc": desc["out"], "out_desc": desc["out"],
                 "row_scale_ptr": "*fp32", "rows": "i32", "cols": "i32", "K": "constexpr", "GROUP_M": "constexpr",
                 "STAGES": "constexpr", "BACKWARD": "constexpr", "EPILOGUE": "constexpr"}
    constexprs = {"K": k, "GROUP_M": GROUP_M, "STAGES": stages, "BACKWARD": backward, "EPILOGUE": epilogue}
    attrs = {(i,): [["tt.divisibility", 16]] for i, name in enumerate(signature) if name in ("rows", "cols")}
    source = GluonASTSource(ping_pong_relu_square_kernel, signature, constexprs, attrs)
    return triton.compile(source, target=kernel_report.TARGET,
                          options=dict(num_warps=4, maxnreg=KERNEL_MAX_REGISTERS))


def mma_instructions(compiled) -> int:
    """The HGMMA instructions in a build's machine code (ptxas drops MMAs whose results go unused)."""
    return len(re.findall(r"\bHGMMA\.", kernel_report.disassemble(compiled.asm["cubin"])))


def compile_report() -> list[str]:
    lines = []
    for backward in (False, True):
        name = "backward" if backward else "forward"
        for stages in STAGES:
            compiled = compile_for_sm90(backward, stages)
            registers = sorted(set(int(n) for n in re.findall(r"setmaxnreg\.\w+\.sync\.aligned\.u32\s+(\d+)",
                                                             compiled.asm["ptx"])))
            shared = compiled.metadata.shared
            fits = "fits" if shared <= kernel_report.SHARED_LIMIT else "does not fit"
            lines.append(f"{name} STAGES={stages}: {shared} B shared ({fits} in {kernel_report.SHARED_LIMIT}), "
                         f"setmaxnreg {registers}")
        counts = [mma_instructions(compile_for_sm90(backward, 4, epilogue=parts))
                  for parts in (WHOLE_EPILOGUE, *EPILOGUE_PARTS.values())]
        lines.append(f"{name} MMA instructions: {counts[0]} with the whole epilogue, "
                     + ", ".join(f"{n} {label}" for label, n in zip(EPILOGUE_PARTS, counts[1:])))
    return lines


def bench(stages_list: list[int], epilogue_parts: bool) -> None:
    medium.configure_triton_builds()
    gen = torch.Generator("cuda").manual_seed(0)
    rows, dim, hidden = 65536, 1024, 4096
    x, grad_y = (torch.randn(rows, dim, device="cuda", generator=gen).bfloat16() for _ in range(2))
    fc_w = (torch.randn(hidden, dim, device="cuda", generator=gen) * dim ** -0.5).bfloat16()
    proj_w = (torch.randn(dim, hidden, device="cuda", generator=gen) * hidden ** -0.5).bfloat16()
    row_scale = medium.reciprocal_rms(x)
    teraflop = 2 * rows * dim * hidden / 1e12
    a = medium.relu_square_gemm(x, fc_w, row_scale)
    passes = {"forward": ((x, fc_w, row_scale), lambda: x @ fc_w.T),
              "backward": ((grad_y, proj_w, row_scale, a), lambda: grad_y @ proj_w)}
    for name, (args, bare) in passes.items():
        expected = medium.relu_square_gemm(*args)
        results = {"cuBLAS bare GEMM": (timed_us(bare, False), None),
                   "script's kernel": (timed_us(lambda: medium.relu_square_gemm(*args), False), expected)}
        for stages in stages_list:
            try:
                out = ping_pong_relu_square_gemm(*args, stages=stages)
                torch.cuda.synchronize()
            except Exception as error:
                print(f"{name} ping-pong STAGES={stages}: {type(error).__name__}: {str(error)[:200]}")
                continue
            results[f"ping-pong STAGES={stages}"] = (
                timed_us(lambda: ping_pong_relu_square_gemm(*args, stages=stages), False), out)
            for label, parts in EPILOGUE_PARTS.items() if epilogue_parts else ():
                results[f"ping-pong STAGES={stages}, {label}"] = (
                    timed_us(lambda: ping_pong_relu_square_gemm(*args, stages=stages, epilogue=parts), False), None)
        largest = expected.float().abs().max().item()
        for label, (us, out) in results.items():
            difference = "" if out is None else (
                f", largest difference {(out.float() - expected.float()).abs().max().item() / largest:.1e} of the "
                "script's largest output")
            print(f"{name} {label}: {us:.1f} us, {teraflop / us * 1e6:.0f} TFLOP/s{difference}")


def check(name: str, rows: int, cols: int, k: int = 1024) -> None:
    """One launch of a pass at rows x k -> cols against the script's kernel on the same inputs (the outputs should be
    equal: the same products, rounded the same way). Tiles up to the SM count are one a program, where the second
    warp group has nothing to do; more exercise the turns."""
    medium.configure_triton_builds()
    gen = torch.Generator("cuda").manual_seed(0)
    x = torch.randn(rows, k, device="cuda", generator=gen).bfloat16()
    w = (torch.randn(k, cols, device="cuda", generator=gen) * k ** -0.5).bfloat16()
    row_scale = torch.rand(rows, device="cuda", generator=gen) + 0.5
    if name == "backward":
        args = (x, w, row_scale, torch.rand(rows, cols, device="cuda", generator=gen).bfloat16())
    else:
        args = (x, w.T.contiguous(), row_scale)
    out, expected = ping_pong_relu_square_gemm(*args), medium.relu_square_gemm(*args)
    tiles = triton.cdiv(rows, BLOCK_M) * triton.cdiv(cols, BLOCK_N)
    print(f"{name} {rows} x {k} -> {cols} ({tiles} tiles): largest difference from the script's kernel "
          f"{(out.float() - expected.float()).abs().max().item():.3g}")


def option_value_error(argv: list[str]) -> int | None:
    """2 after one line naming the first --check that is not PASS,ROWS,COLS (forward or backward, two integers) or
    --stages item that is not an integer; None when all are."""
    for value in option_values(argv, "check"):
        name, *sizes = value.split(",")
        if name not in ("forward", "backward") or len(sizes) != 2 or not all(size.isdecimal() for size in sizes):
            print(f"error: --check={value}: give PASS,ROWS,COLS, PASS forward or backward and ROWS and COLS integers, "
                  "e.g. --check=backward,65536,4096 (see --help)", file=sys.stderr)
            return 2
    if bad := [stages for stages in option_list(argv, "stages") if not stages.isdecimal()]:
        print(f"error: --stages: {bad[0]!r} is not a ring depth; give integers, e.g. --stages=4 (see --help)",
              file=sys.stderr)
        return 2
    return None


def main(argv: list[str]) -> int:
    flags = ("--epilogue_parts", "--compile_only")
    if (answer := usage_or_error(argv, __doc__, flags, ("check", "stages"))) is not None:
        return answer
    if (answer := option_value_error(argv)) is not None:
        return answer
    checks = [value.split(",") for value in option_values(argv, "check")]
    if (checks or "--compile_only" not in argv) and (answer := no_gpu_error(
            "perf/gluon_mlp_bench.py", " (--compile_only builds the kernels for sm_90 without one)")):
        return answer
    for name, rows, cols in checks:
        check(name, int(rows), int(cols))
    if checks:
        return 0
    if "--compile_only" in argv:
        print("\n".join(compile_report()))
        return 0
    bench([int(n) for n in option_list(argv, "stages")] or STAGES, "--epilogue_parts" in argv)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
