"""Compile a track's Triton kernels for an H100/H200 (sm_90) on any machine, GPU or not, and report what decides
their speed: registers and spills per thread (ptxas), shared memory, the widest global loads and stores, how
often each bf16 input element is converted (twice means Triton computes the block once per layout), the
special-function ops (exp2, log2, reciprocal, approximate division, rsqrt, tanh, sqrt approximate or correctly rounded:
a quarter of the FP32 rate), the load and store instructions with an L2 eviction policy, and for each loop of the
machine code (nvdisasm) the cycles a warp's iteration needs from its scheduler (one instruction a clock) and from the
special-function unit (MUFU: 16 lanes a clock an SM, so 8 clocks a warp instruction): the larger bounds the loop when
memory does not.

python perf/kernel_report.py [path/to/train_gpt.py | path/to/train_gpt_medium.py] [--launch=...]  ->  one line per
kernel and launch configuration (track 1 by default; a copy must keep its script's name). The configurations mirror
the launchers in the script; integer arguments and pointers are taken as divisible by 16, as Triton's JIT specialises
them for the model's shapes. Track 2's MLP GEMM is compiled at each pass's MLP_LAUNCH, or at the launches given as
--launch=BLOCK_M,BLOCK_N,BLOCK_K,GROUP_M,WARPS,STAGES,SPLIT,PROGRAMS_PER_SM (SPLIT 0 or 1; repeatable): whether its
pipeline stages fit in SHARED_LIMIT, an sm_90 block's most shared memory, and its programs in one SM. --help prints
this.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)  # compile for the GPU, not the interpreter
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.backends.nvidia.compiler import get_ptxas  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import option_values, usage_or_error  # noqa: E402
from track_scripts import ROOT, load_script  # noqa: E402

TARGET = GPUTarget("cuda", 90, 32)
SHARED_LIMIT = 232_448  # bytes of shared memory one block may use on sm_90 (227 KB)
SM_SHARED, SM_REGISTERS = 233_472, 65_536  # an sm_90 SM's shared memory (228 KB, 1 KB of it reserved a block) and
# registers, shared by the programs resident on it
PTXAS = Path(get_ptxas(TARGET.arch).path)  # the one Triton builds sm_90 with, and picks its PTX version by

# Argument types by name across the kernels; strides of 1 are constants, as the JIT specialises them.
ARG_TYPES = {"x_ptr": "*bf16", "y_ptr": "*bf16", "c_ptr": "*bf16", "out_ptr": "*bf16", "logits_ptr": "*bf16",
             "targets_ptr": "*i32", "loss_ptr": "*fp32", "lse_ptr": "*fp32", "grad_loss_ptr": "*fp32",
             "grad_ptr": "*fp8e5", "grad_t_ptr": "*fp8e5", "src_ptr": "*fp8e5", "dst_ptr": "*fp8e5", "alpha": "fp32",
             "beta": "fp32", "inv_grad_s": "fp32", "log2_inv_grad_s": "fp32", "grad_max": "fp32", "stride_xk": 1,
             "stride_yk": 1, "stride_on": 1, "row_stride": "i32", "qkv_ptr": "*bf16", "cos_ptr": "*fp32",
             "sin_ptr": "*fp32", "lambdas_ptr": "*fp32", "ve_ptr": "*bf16", "q_ptr": "*bf16", "k_ptr": "*bf16",
             "v_ptr": "*bf16", "grad_q_ptr": "*bf16", "grad_k_ptr": "*bf16", "grad_v_ptr": "*bf16",
             "grad_qkv_ptr": "*bf16", "grad_ve_ptr": "*bf16", "lambda_sums_ptr": "*fp32", "eps": "fp32",
             "diagonal": "fp32", "grad_f8_ptr": "*fp8e4nv", "grad_scale_ptr": "*fp32", "a_ptr": "*fp8e4nv",
             "grad_a_ptr": "*fp8e5", "a_scale_ptr": "*fp32", "a_t_ptr": "*fp8e4nv", "grad_h_ptr": "*fp8e5",
             "grad_h_t_ptr": "*fp8e5", "inverse_scale": "fp32", "limit": "fp32", "scales_ptr": "*fp32",
             "out_t_ptr": "*fp8e4nv", "sums_ptr": "*fp32", "sorted_ids_ptr": "*i32", "order_ptr": "*i64",
             "rows_ptr": "*bf16", "other_scales_ptr": "*fp32", "total_ptr": "*fp32", "parts_ptr": "*fp32",
             "w_ptr": "*bf16", "grad_x_ptr": "*bf16", "grad_w_parts_ptr": "*fp32"}
FP16_SYM_MATMUL = {name: "*fp16" for name in ("x_ptr", "y_ptr", "c_ptr", "out_ptr")}  # track 2's orthogonalize
# the FP8 head's x (bf16) and weight (fp32) to e4m3 both ways; fp8_qkv_weight_grad's scaled copy of x's e4m3 copy
FLOAT8_BOTH_WAYS = [(dict(ROUND_TO_BF16=src == "*bf16", BLOCK=64), 4, {"src_ptr": src, "out_ptr": "*fp8e4nv"})
                    for src in ("*bf16", "*fp32")]
ATTENTION_INPUTS = [(dict(HALF=64, BLOCK_ROWS=16, HAS_VE=True), 4)]  # head_dim 128, the scripts' launch
# track 1's backward without the rowwise e4m3 gradient and with it (--fp8_qkv, training's: whole tokens a program,
# 2 x 6 heads padded to 8 rows)
TOKENS_BACKWARD = [(dict(HALF=64, BLOCK_ROWS=16, HEADS_BLOCK=8, HAS_VE=True, ROWWISE_FP8=fp8), 4)
                   for fp8 in (False, True)]
# track 1's MLP up projection at RELU_SQUARE_UP_LAUNCH: K = model_dim, e4m3 tiles of 128 x 128, 256 x 128 and the
# epilogue's whole tile, 4 stages, one program an SM of an H100
RELU_SQUARE_UP = [(dict(K=768, BLOCK_M=128, BLOCK_N=256, BLOCK_K=128, GROUP_M=8, PROGRAMS=132, SPLIT_EPILOGUE=False), 8,
                   {"x_desc": "tensordesc<fp8e4nv[128, 128]>", "w_desc": "tensordesc<fp8e4nv[256, 128]>",
                    "a_desc": "tensordesc<fp8e4nv[128, 256]>", "x_scale_ptr": "*fp32", "w_scale_ptr": "*fp32",
                    "a_max": "fp32"}, 4)]
# column_sums at COLUMN_SUMS_LAUNCH: the lambdas' sums (2 columns, fp32) and the gate weight's gradient (6 x 12
# columns padded to 128, in w's bf16)
COLUMN_SUMS = [(dict(BLOCK_ROWS=16384 // block_cols, BLOCK_COLS=block_cols), 16, {"sums_ptr": dtype})
               for block_cols, dtype in ((2, "*fp32"), (128, "*bf16"))]
GATE_LOGITS = [(dict(DIMS=12, HEADS=6, BLOCK_TOKENS=128, BLOCK_DIMS=16, BLOCK_HEADS=8), 4)]  # 6 heads, 12 dims
# script: kernel name: its launch configurations there, as (constexprs, num_warps[, argument types[, stages]])
CONFIGS = {
    "train_gpt.py": {
        "sym_matmul_kernel": [(dict(HAS_C=False, BLOCK_M=128, BLOCK_K=64), 8)],
        "softcap_ce_kernel": [(dict(BLOCK=8192, ON_GPU=True), 16)],
        "transpose_kernel": [(dict(BLOCK=128), 8)],
        "relu_square_grads_kernel": [(dict(BLOCK_ROWS=32, BLOCK_COLS=128, STORE_GRAD_H_T=True), 4)],  # one pass
        "float8_both_ways_kernel": FLOAT8_BOTH_WAYS,
        "row_scaled_transposed_kernel": [(dict(BLOCK=128), 4, {"src_ptr": "*fp8e4nv"})],
        "relu_square_up_kernel": RELU_SQUARE_UP,
        "attention_inputs_kernel": ATTENTION_INPUTS,
        "attention_inputs_backward_kernel": TOKENS_BACKWARD,
        "add_rows_kernel": [(dict(BLOCK_TOKENS=32, BLOCK_COLS=256), 4)],
        "column_sums_kernel": COLUMN_SUMS,
        "largest_product_kernel": [(dict(BLOCK=16384), 16, {"a_ptr": "*fp32", "b_ptr": "*fp32", "out_ptr": "*fp32",
                                                            "floor": "fp32"})],
        "gate_logits_kernel": GATE_LOGITS,
        "gate_logits_backward_kernel": [(*GATE_LOGITS[0][:2], {"grad_ptr": "*bf16"})],
    },
    "train_gpt_medium.py": {
        "sym_matmul_kernel": [(dict(HAS_C=False, BLOCK_M=128, BLOCK_K=64), 8, FP16_SYM_MATMUL)],
        "softcap_ce_kernel": [(dict(BLOCK=2048, ON_GPU=True), 8)],
        "attention_inputs_kernel": ATTENTION_INPUTS,
        "attention_inputs_backward_kernel": ATTENTION_INPUTS,
    },
}


def compile_kernel(kernel, constexprs: dict, num_warps: int, num_stages: int = 3, types: dict | None = None):
    """types: argument types beyond ARG_TYPES (tensor descriptors, whose block shape is the launch's). Other integers
    are i32 and, like pointers, divisible by 16 (the model's shapes are)."""
    signature, constants, attrs, types = {}, dict(constexprs), {}, {**ARG_TYPES, **(types or {})}
    for i, name in enumerate(kernel.arg_names):
        kind = "constexpr" if name in constexprs else types.get(name, "i32")
        if isinstance(kind, int):
            constants[name], kind = kind, "constexpr"
        signature[name] = kind
        if kind.startswith("*") or kind == "i32":
            attrs[(i,)] = [["tt.divisibility", 16]]
    source = ASTSource(fn=kernel, signature=signature, constexprs=constants, attrs=attrs)
    return triton.compile(source, target=TARGET, options=dict(num_warps=num_warps, num_stages=num_stages))


def ptxas_usage(ptx: str) -> tuple[int, int]:
    """(registers, spill-store bytes) per thread, from ptxas -v."""
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"kernel_report_{os.getpid()}.ptx"
    path.write_text(ptx)
    try:
        result = subprocess.run([str(PTXAS), "-v", f"-arch=sm_{TARGET.arch}a", str(path), "-o", os.devnull],
                                capture_output=True, text=True)
    finally:
        path.unlink()
    out = result.stderr
    if result.returncode != 0:  # e.g. a TRITON_PTXAS_PATH older than the CUDA that Triton's PTX version needs
        fatal = [line for line in out.splitlines() if "fatal" in line] or [f"exit status {result.returncode}"]
        sys.exit(f"error: {PTXAS} cannot build this Triton's PTX: {fatal[0].split(' fatal ')[-1].strip(' :')}")
    return int(re.search(r"Used (\d+) registers", out)[1]), int(re.search(r"(\d+) bytes spill stores", out)[1])


def widest(ptx: str, op: str) -> int:
    """Bytes of the widest global load (ld, or cp.async into shared memory) or store (st, or an atomic add) in the
    PTX."""
    pattern = rf"{op}\.global(?:\.[\w:]+)*?(?:\.v(\d))?\.b(\d+)"  # qualifiers include L2 hints' L1::evict_first
    sizes = [int(vec or 1) * int(bits) // 8 for vec, bits in re.findall(pattern, ptx)]
    if op == "st":
        sizes += [int(vec or 1) * int(bits) // 8
                  for vec, bits in re.findall(r"(?:atom|red)\.global[\w.]*?\.add(?:\.v(\d))?\.f(\d+)", ptx)]
    if op == "ld":
        sizes += [int(size, 0) for size in re.findall(r"cp\.async[\w.]*\s+\[[^\]]+\],\s*\[[^\]]+\],\s*(\w+)", ptx)]
    return max(sizes, default=0)


def l2_hints(ptx: str) -> str:
    """The global load and store instructions that carry an L2 eviction policy (evict_first / evict_last), counted
    by kind, e.g. '2 ld evict_last, 1 st evict_first'; 'none' without any."""
    hints = re.findall(r"\b(ld|st)\.global\.L1::(evict_\w+)\.L2::cache_hint", ptx)
    return ", ".join(f"{hints.count(kind)} {kind[0]} {kind[1]}" for kind in sorted(set(hints))) or "none"


def disassemble(cubin: bytes) -> str:
    """The machine code (SASS) of a compiled kernel, from nvdisasm."""
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"kernel_report_{os.getpid()}.cubin"
    path.write_bytes(cubin)
    try:
        return subprocess.run([str(PTXAS.parent / "nvdisasm"), "-c", str(path)], capture_output=True, text=True,
                              check=True).stdout
    finally:
        path.unlink()


def loop_cycles(cubin: bytes) -> list[tuple[int, int]]:
    """(issue, MUFU) cycles of one warp's iteration of each loop in the machine code: a loop is the code from a label
    to a branch back to it."""
    loops, starts, body = [], {}, []
    for line in disassemble(cubin).splitlines():
        if label := re.match(r"(\.L_x_\d+):", line):
            starts[label[1]] = len(body)
        elif opcode := re.match(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", line):
            body.append(opcode[1])
            target = re.search(r"BRA `\((\.L_x_\d+)\)", line)
            if opcode[1] == "BRA" and target and target[1] in starts:
                loop = [op for op in body[starts[target[1]]:] if op != "NOP"]
                if len(loop) > 1:  # not the branch-to-itself that ends every kernel's code
                    loops.append((len(loop), 8 * loop.count("MUFU")))
    return loops


def report(kernel_name: str, kernel, constexprs: dict, num_warps: int, num_stages: int = 3,
           types: dict | None = None) -> str:
    constexprs = {name: value for name, value in constexprs.items() if name in kernel.arg_names}
    compiled = compile_kernel(kernel, constexprs, num_warps, num_stages, types)
    ptx = compiled.asm["ptx"]
    registers, spills = ptxas_usage(ptx)
    conversions = len(re.findall(r"cvt\.f32\.bf16", ptx))
    special = len(re.findall(r"\b(?:ex2|lg2|rcp|rsqrt|sqrt|tanh)\.approx|\bdiv\.full|\bsqrt\.rn", ptx))
    settings = " ".join(f"{k}={v}" for k, v in constexprs.items() if not k.endswith("_desc"))
    return (f"{kernel_name} [{settings} warps={num_warps} stages={num_stages}]: {registers} registers, "
            f"{spills} B spilled, "
            f"{compiled.metadata.shared} B shared, widest load {widest(ptx, 'ld')} B / store {widest(ptx, 'st')} B, "
            f"{conversions} bf16->fp32 conversions a thread, {special} special-function ops a thread, L2 hints: "
            f"{l2_hints(ptx)}; loops: "
            + (", ".join(f"{issue} issue / {mufu} MUFU cycles" for issue, mufu in loop_cycles(compiled.asm["cubin"]))
               or "none"))


def relu_square_gemm_report(script, launch: tuple, backward: bool, k: int = 1024) -> str:
    """Track 2's MLP GEMM at one launch (as relu_square_gemm's tuple) for one pass, K = model_dim, whether its shared
    memory fits a block and whether programs_per_sm of it fit an SM together (shared memory and registers)."""
    block_m, block_n, block_k, group_m, num_warps, num_stages, split, programs_per_sm = launch
    epilogue_cols = block_n // 2 if split else block_n
    types = {"x_desc": f"tensordesc<bf16[{block_m}, {block_k}]>",
             "w_desc": f"tensordesc<bf16[{block_k}, {block_n}]>" if backward
             else f"tensordesc<bf16[{block_n}, {block_k}]>",
             "out_desc": f"tensordesc<bf16[{block_m}, {epilogue_cols}]>",
             "a_desc": f"tensordesc<bf16[{block_m}, {epilogue_cols}]>", "row_scale_ptr": "*fp32"}
    constexprs = dict(K=k, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=group_m, PROGRAMS=132,
                      BACKWARD=backward, SPLIT_EPILOGUE=split, **({} if backward else {"a_desc": None}))
    line = report("relu_square_gemm_kernel", script.relu_square_gemm_kernel, constexprs, num_warps, num_stages, types)
    registers, shared = (int(re.search(pattern, line)[1]) for pattern in (r"(\d+) registers", r"(\d+) B shared"))
    sm_shared, sm_registers = programs_per_sm * (shared + 1024), programs_per_sm * registers * 32 * num_warps
    together = sm_shared <= SM_SHARED and sm_registers <= SM_REGISTERS
    return (f"{line}; {'fits' if shared <= SHARED_LIMIT else 'does not fit'} in {SHARED_LIMIT} B; "
            f"{programs_per_sm} an SM {'fit' if together else 'do not fit'} ({sm_shared} of {SM_SHARED} B shared, "
            f"{sm_registers} of {SM_REGISTERS} registers)")


def argument_error(path: Path, launches: list[str]) -> int | None:
    """2 after one line when path is no file or not named as one of CONFIGS's scripts, or --launch is given for a script
    other than track 2's or with a value that is not 8 integers; None when all are fine."""
    if not path.is_file():
        print(f"error: {path}: no such file; give train_gpt.py or train_gpt_medium.py, or a copy keeping its name (see "
              "--help)", file=sys.stderr)
        return 2
    if path.name not in CONFIGS:
        print(f"error: {path}: the report knows the kernels of {' and '.join(CONFIGS)} only; give one of them, or a "
              "copy keeping its name (see --help)", file=sys.stderr)
        return 2
    if launches and path.name != "train_gpt_medium.py":  # was ignored: track 1 has no MLP GEMM of its own
        print(f"error: --launch sets track 2's MLP GEMM, which {path.name} does not have; give train_gpt_medium.py "
              "with it (see --help)", file=sys.stderr)
        return 2
    if bad := [launch for launch in launches if not re.fullmatch(r"\d+(,\d+){7}", launch)]:
        print(f"error: --launch={bad[0]}: give 8 comma-separated integers, "
              "BLOCK_M,BLOCK_N,BLOCK_K,GROUP_M,WARPS,STAGES,SPLIT,PROGRAMS_PER_SM (see --help)", file=sys.stderr)
        return 2
    return None


def main(argv: list[str]) -> int:
    paths = [arg for arg in argv if not arg.startswith("-")]
    if (answer := usage_or_error([arg for arg in argv if arg.startswith("-")] + paths[1:], __doc__, (),
                                 ("launch",))) is not None:
        return answer
    path = Path(paths[0]) if paths else ROOT / "train_gpt.py"
    if (answer := argument_error(path, option_values(argv, "launch"))) is not None:
        return answer
    launches = [tuple(int(value) for value in launch.split(",")) for launch in option_values(argv, "launch")]
    script = load_script(path)
    for name, configs in CONFIGS[path.name].items():
        for constexprs, num_warps, *rest in configs:
            if not hasattr(script, name):
                print(f"{name}: not in this script")
                continue
            types, num_stages = rest[0] if rest else None, rest[1] if len(rest) > 1 else 3
            print(report(name, getattr(script, name), constexprs, num_warps, num_stages, types))
    if hasattr(script, "MLP_LAUNCH"):
        for backward in (False, True):
            for launch in launches or [script.MLP_LAUNCH["backward" if backward else "forward"]]:
                print(relu_square_gemm_report(script, launch, backward))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
