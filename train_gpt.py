"""NanoGPT speedrun, track 1: GPT-2 small (~124M) to 3.28 val loss on FineWeb with 8 GPUs.

Launch: ./run.sh  (or: torchrun --standalone --nproc_per_node=8 train_gpt.py [--name=value ...])
Every setting is a field of Hyperparameters below; --help lists them with their defaults.
The log (logs/<run_id>.txt) starts with this file's exact source, so any run can be re-run.
"""
import time

PROCESS_START = time.perf_counter()  # startup time counts the imports too

import copy
import ctypes
import dataclasses
import functools
import glob
import hashlib
import inspect
import itertools
import json
import logging
import math
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import traceback
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl
from torch import Tensor
from triton.tools.tensor_descriptor import TensorDescriptor
from torch.nn.attention.flex_attention import BlockMask, flex_attention

# ----------------------------------------------------------------------------------------------
# Hyperparameters: the defaults are the 8-GPU record run; override any field as --name=value


def setting(default, help):
    return field(default=default, metadata={"help": help})


@dataclass
class Hyperparameters:
    # data
    train_files: str = setting("data/fineweb10B/fineweb_train_*.bin", "glob of training shards")
    val_files: str = setting("data/fineweb10B/fineweb_val_*.bin", "glob of validation shards")
    val_tokens: int = setting(10_485_760, "validation tokens (the speedrun fixes 10,485,760)")
    train_seq_len: int = setting(48 * 1024, "tokens per rank per micro-step (multiple of 128)")
    val_seq_len: int = setting(4 * 64 * 1024, "tokens per rank per validation step (multiple of 128)")
    grad_accum_steps: int = setting(0, "micro-steps per step; 0 = 8 // world_size (same global batch)")
    # schedule
    num_iterations: int = setting(1619, "optimizer steps (the 2025 record's 1695, cut to 1640 with NorMuon, 1625 with "
                                  "backout and 1619 with the longer cooldown: records/track_1_short/*_NorMuonDefault, "
                                  "*_BackoutDefault, *_Cooldown055)")
    cooldown_frac: float = setting(0.55, "fraction of steps at the end with linearly decaying lr")
    final_lr_frac: float = setting(0.1, "lr multiplier reached at the last step")
    val_loss_every: int = setting(125, "validate every N steps (0 = only at the end)")
    window_start: int = setting(0, "attention window (tokens) at step 0, rounded up to 128-token blocks (min 1)")
    window_end: int = setting(1728, "attention window (tokens) at the last step, rounded up: 1728 -> 1792")
    # model
    vocab_size: int = setting(50257, "GPT-2 vocabulary (padded to a multiple of 128 inside)")
    num_layers: int = setting(12, "transformer blocks (at least 6)")
    model_dim: int = setting(768, "residual stream width")
    num_heads: int = setting(6, "attention heads (num_heads x head_dim = model_dim)")
    head_dim: int = setting(128, "width of each head (multiple of 4)")
    mlp_ratio: int = setting(4, "MLP hidden width = mlp_ratio * model_dim")
    fp8_mlp: bool = setting(True, "MLP matmuls on the FP8 tensor cores in training, forward and backward: the "
                            "weights' scales from their maximum, the RMS-normed input's fixed (its bound, "
                            "sqrt(model_dim), to 448), the hidden activation's gradient's from a bound on the weight, "
                            "the others' from sampled maxima")
    fp8_amax_row_step: int = setting(16, "the FP8 MLP's sampled scales (its hidden activation's, output gradient's "
                                     "and pre-activation gradient's) come from every Nth row's maximum, with 2x "
                                     "headroom (1 = every row, no headroom)")
    fp8_qkv: bool = setting(True, "the attention's QKV projection on the FP8 tensor cores in training (e4m3, a scale "
                            "per token and per output feature): its forward, input gradient and weight gradient")
    no_attention_layer: int = setting(7, "index of the block without attention (-1 = none; the 2024 records "
                                      "dropped block 7's)")
    window_pattern: str = setting("LSSSLSSLSSSL", "per block: L = long window, S = short (half); long-short "
                                  "attention: the 2025 records")
    smear: bool = setting(False, "each token's embedding adds a gated share of the previous token's (smear)")
    backout_layer: int = setting(8, "subtract a learned share of the residual after this many blocks before "
                                 "the head (backout; -1 = off)")
    # optimizers
    muon_lr: float = setting(0.05, "Muon learning rate (hidden matrices)")
    muon_momentum: float = setting(0.95, "Muon momentum after warmup")
    muon_momentum_start: float = setting(0.85, "Muon momentum at step 0")
    muon_momentum_warmup_steps: int = setting(300, "steps of linear momentum warmup")
    muon_weight_decay: float = setting(0.0, "Muon weight decay: p *= 1 - lr * weight_decay")
    ns_coefficients: str = setting("jordan", "Newton-Schulz coefficients: jordan (fixed, 2024) or polar_express "
                                   "(per iteration, 2025)")
    muon_variant: str = setting("normuon", "muon, or normuon (per-neuron second-moment normalisation after "
                                "orthogonalisation)")
    normuon_beta2: float = setting(0.95, "NorMuon: EMA decay of each neuron's mean square update")
    adam_lr: float = setting(0.008, "base Adam learning rate (times the multipliers below)")
    adam_beta1: float = setting(0.8, "Adam beta1")
    adam_beta2: float = setting(0.95, "Adam beta2")
    adam_eps: float = setting(1e-10, "Adam epsilon")
    embed_lr_mult: float = setting(75.0, "Adam lr multiplier of the token embedding")
    value_embed_lr_mult: float = setting(75.0, "Adam lr multiplier of the value embeddings")
    scalar_lr_mult: float = setting(5.0, "Adam lr multiplier of the scalar weights")
    head_lr_mult: float = setting(1.0, "Adam lr multiplier of the lm_head")
    # run
    warmup_steps: int = setting(10, "compile-warmup steps before the clock, undone afterwards")
    profile_steps: int = setting(0, "profile the last N warmup steps; the op table goes to the log")
    seed: int = setting(0, "seed of the parameter initialisation")
    device: str = setting("cuda", "cuda, or cpu for tiny test runs")
    compile: bool = setting(True, "torch.compile the model, its weight casts and both optimizers' updates")
    compile_cache: str = setting("", "file of torch.compile artifacts: loaded before compiling if it exists, "
                                 "written after warmup (reusable with the same torch, Triton and GPU)")
    logs_dir: str = setting("logs", "folder of the run logs")
    run_id: str = setting("", "log name (default: a fresh uuid)")
    peak_tflops: float = setting(989.0, "per-GPU dense bf16 peak used for the MFU estimate")
    check_only: bool = setting(False, "check settings, data and device, then exit")


class SetupError(Exception):
    """A bad setting, file or machine, found before training starts; the message says the fix."""


class DataError(SetupError):
    """A missing, corrupt or too small data file."""


class LaunchError(SetupError):
    """Launch variables (WORLD_SIZE, RANK, ...) that do not fit together: every process that has them says so."""


PATH_SETTINGS = ("train_files", "val_files", "logs_dir", "compile_cache")  # a leading ~ is the home folder


def parse_value(name: str, default, raw: str):
    """A setting's value from its text, which may have spaces around it."""
    kind, raw = type(default), raw.strip()
    if kind is bool:
        if raw.lower() in ("1", "true", "yes"):
            return True
        if raw.lower() in ("0", "false", "no"):
            return False
        raise SetupError(f"--{name}={raw} is not a boolean; use true or false")
    if kind is str:
        return os.path.expanduser(raw) if name in PATH_SETTINGS else raw
    try:
        return kind(raw)
    except ValueError:
        raise SetupError(f"--{name}={raw} is not {'an integer' if kind is int else 'a number'}") from None


def format_value(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def help_text() -> str:
    lines = ["usage: torchrun --standalone --nproc_per_node=N train_gpt.py [--name=value ...]", ""]
    for f in dataclasses.fields(Hyperparameters):
        lines.append(f"{'  --' + f.name + '=' + format_value(f.default):<58} {f.metadata['help']}")
    return "\n".join(lines)


def print_help():
    """The settings' list on stdout, exit code 0; a reader that closed the pipe early (| head -0) ends it quietly."""
    try:
        print(help_text(), flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # else the exit's flush raises again
    sys.exit(0)


def parse_args(argv: list[str]) -> Hyperparameters:
    defaults = {f.name: f.default for f in dataclasses.fields(Hyperparameters)}
    values = {}
    for arg in argv:
        if arg in ("-h", "--help") or arg.startswith("--help="):  # --help=1 or --help=true asks for help too
            print_help()
        match = re.fullmatch(r"--([\w-]+)=(.*)", arg, re.DOTALL)
        if match is None:
            raise SetupError(f"malformed argument {arg!r}: write settings as --name=value (see --help)")
        name, raw = match.groups()
        if "-" in name and name.replace("-", "_") in defaults:
            raise SetupError(f"--{name}: setting names are written with underscores, --{name.replace('-', '_')}")
        if name not in defaults:
            raise SetupError(f"unknown setting --{name} (see --help for the list)")
        if len(raw.strip().splitlines()) > 1:  # its error, or the log header's line, would run over several lines
            raise SetupError(f"--{name}={raw.strip()!r} holds a line break; give the value on one line")
        values[name] = parse_value(name, defaults[name], raw)
    return Hyperparameters(**values)


# ----------------------------------------------------------------------------------------------
# FP8 matmuls (e4m3 forward, e5m2 gradient; the QKV projection's e4m3 both ways): a custom op with fixed scales for
# the lm_head off the GPU (the FP8 head: the 2025 records; on the GPU, the fused head below), for the MLP (--fp8_mlp)
# scales from the weights' maximum, fixed for the normed input, bounded for a's gradient and sampled for the other
# activations and gradients (--fp8_amax_row_step), and the rowwise GEMM that the QKV projection takes (--fp8_qkv, with
# the attention inputs' kernels below)


def scaled_mm(a: Tensor, b: Tensor, a_scale: float | Tensor, b_scale: float | Tensor, out_dtype,
              fast_accum: bool) -> Tensor:
    """(a * a_scale) @ (b * b_scale) for float8 a, b with fp32 accumulation; scales are floats or 0-d tensors.
    CUDA uses the FP8 tensor cores; elsewhere the same float8 values are multiplied in fp32."""
    if a.is_cuda:
        one = torch.ones((), dtype=torch.float32, device=a.device)
        return torch._scaled_mm(a, b, scale_a=one * a_scale, scale_b=one * b_scale,
                                out_dtype=out_dtype, use_fast_accum=fast_accum)
    return ((a.float() * a_scale) @ (b.float() * b_scale)).to(out_dtype)


def to_float8(t: Tensor, scale: float | Tensor, dtype: torch.dtype) -> Tensor:
    """t / scale in float8, saturating at the format's largest value as compiled casts do
    (eager casts before torch 2.12 turn overflow into NaN: a head weight past 448 * w_s stopped runs)."""
    limit = torch.finfo(dtype).max
    return t.div(scale).clamp_(-limit, limit).to(dtype)


def normed_e4m3_scale(dim: int) -> float:
    """The e4m3 scale of an RMS-normed input of width dim: no entry exceeds sqrt(dim) (but by bf16's rounding, which
    to_float8's clamp takes), which this maps to e4m3's largest value, 448. No maximum is needed first."""
    return dim ** 0.5 / 448


@torch.library.custom_op("nanogpt::fp8_mm", mutates_args=())
def fp8_mm(x: Tensor, w: Tensor, x_s: float, w_s: float, grad_s: float) -> tuple[Tensor, Tensor, Tensor]:
    """x @ w.T in bf16 from float8 x and w, which are returned for the backward (the FP8 head off the GPU)."""
    x_f8 = to_float8(x, x_s, torch.float8_e4m3fn)
    w_f8 = to_float8(w, w_s, torch.float8_e4m3fn)
    return scaled_mm(x_f8, w_f8.T, x_s, w_s, torch.bfloat16, fast_accum=True), x_f8, w_f8


@fp8_mm.register_fake
def _(x, w, x_s, w_s, grad_s):
    return (x.new_empty(x.size(0), w.size(0), dtype=torch.bfloat16),
            torch.empty_like(x, dtype=torch.float8_e4m3fn), torch.empty_like(w, dtype=torch.float8_e4m3fn))


@torch.library.custom_op("nanogpt::fp8_mm_backward", mutates_args=())
def fp8_mm_backward(grad_f8: Tensor, grad_f8_t: Tensor, x_f8_t: Tensor, w_f8_t: Tensor, x_s: float, w_s: float,
                    grad_s: float) -> tuple[Tensor, Tensor]:
    """grad_x and grad_w from the float8 gradient and operands, given in the layouts the FP8 tensor cores need: the
    gradient both ways, x and w transposed. The caller makes those copies: on the GPU with Triton kernels, as torch's
    own transposed float8 copy took ~250 us a call (~0.3 TB/s)."""
    # Precise accumulation: grad_x sums over the whole vocabulary, where fast accumulation loses bits.
    grad_x = scaled_mm(grad_f8, w_f8_t.T, grad_s, w_s, torch.bfloat16, fast_accum=False)
    grad_w = scaled_mm(grad_f8_t, x_f8_t.T, grad_s, x_s, torch.float32, fast_accum=False)
    return grad_x, grad_w


@fp8_mm_backward.register_fake
def _(grad_f8, grad_f8_t, x_f8_t, w_f8_t, x_s, w_s, grad_s):
    return (x_f8_t.new_empty(x_f8_t.size(1), x_f8_t.size(0), dtype=torch.bfloat16),
            w_f8_t.new_empty(w_f8_t.size(1), w_f8_t.size(0), dtype=torch.float32))


def _fp8_mm_setup_context(ctx, inputs, output):
    _, _, x_s, w_s, grad_s = inputs
    _, x_f8, w_f8 = output
    ctx.save_for_backward(x_f8, w_f8)
    ctx.scales = (x_s, w_s, grad_s)


def _fp8_mm_grad(ctx, grad_out, *_):
    """The gradient's float8 cast and the transposed copies in plain torch, then both gradient GEMMs in one op (the
    fused head's backward on the GPU does the same with Triton kernels)."""
    x_f8, w_f8 = ctx.saved_tensors
    x_s, w_s, grad_s = ctx.scales
    grad_f8 = to_float8(grad_out, grad_s, torch.float8_e5m2)
    grad_x, grad_w = fp8_mm_backward(grad_f8, grad_f8.T.contiguous(), x_f8.T.contiguous(), w_f8.T.contiguous(),
                                     x_s, w_s, grad_s)
    return grad_x, grad_w, None, None, None


fp8_mm.register_autograd(_fp8_mm_grad, setup_context=_fp8_mm_setup_context)


def float8_scale(sampled_rows: Tensor, dtype: torch.dtype, row_step: int) -> Tensor:
    """The scale (a 0-d tensor) that maps a tensor's largest magnitude to the format's largest value, from every
    row_step-th row of the tensor (sampled_rows). With row_step > 1 the sample's maximum is doubled: a pass over
    1/row_step of an MLP activation or gradient (tokens x hidden, or x dim) instead of all of it; an entry past the
    doubled sample maximum saturates. Float8's relative precision does not depend on the scale, so the headroom costs
    one binade at the bottom of the range."""
    headroom = 2.0 if row_step > 1 else 1.0
    return sampled_rows.detach().abs().amax().float().clamp_min(1e-30) * headroom / torch.finfo(dtype).max


def to_float8_scaled(t: Tensor, dtype: torch.dtype, row_step: int = 1) -> tuple[Tensor, Tensor]:
    """t in float8 and its scale (float8_scale of every row_step-th row)."""
    scale = float8_scale(t[::row_step], dtype, row_step)
    return to_float8(t, scale, dtype), scale


@triton.jit
def transpose_kernel(src_ptr, dst_ptr, rows, cols, BLOCK: tl.constexpr):
    """dst (cols x rows) = src (rows x cols).T, a square block per program: loads and stores both coalesced
    (Triton swaps the block's layout through shared memory)."""
    first_row, first_col = tl.program_id(0) * BLOCK, tl.program_id(1) * BLOCK
    local = tl.arange(0, BLOCK)
    mask = (first_row + local < rows)[:, None] & (first_col + local < cols)[None, :]
    block = tl.load(src_ptr + first_row.to(tl.int64) * cols + first_col + local[:, None] * cols + local[None, :],
                    mask=mask)
    tl.store(dst_ptr + first_col.to(tl.int64) * rows + first_row + local[:, None] * rows + local[None, :],
             tl.trans(block), mask=tl.trans(mask))


TRANSPOSE_LAUNCH = (128, 8)  # BLOCK, num_warps: 1.27 ms for the proxy's float8 gradient, 1.62 ms at (64, 4)
# (perf/head_kernels_bench.py, session 46: a 128-byte row of float8 a block, whole cache lines both ways)


def transposed(t: Tensor, launch: tuple = TRANSPOSE_LAUNCH) -> Tensor:
    """t.T.contiguous() of a 2-D tensor by the Triton kernel."""
    rows, cols = t.shape
    out, (block, num_warps) = t.new_empty(cols, rows), launch
    transpose_kernel[(triton.cdiv(rows, block), triton.cdiv(cols, block))](t, out, rows, cols, BLOCK=block,
                                                                            num_warps=num_warps)
    return out


@torch.library.custom_op("nanogpt::float8_transposed", mutates_args=())
def float8_transposed(t: Tensor) -> Tensor:
    """t.T.contiguous() of a 2-D float8 tensor for compiled code: transposed on the GPU, torch's copy elsewhere. An op
    opaque to torch.compile, because inductor fuses such a copy into the kernel that makes t, as one-byte stores a
    row apart (the MLP's x and output gradient: ~58 us a call more than the same kernel without the copy on an H100,
    perf/NOTES.md session 67)."""
    return transposed(t) if t.is_cuda else t.T.contiguous()


@float8_transposed.register_fake
def _(t):
    return t.new_empty(t.size(1), t.size(0))


@triton.jit
def float8_both_ways_kernel(src_ptr, out_ptr, out_t_ptr, rows, cols, inverse_scale, limit,
                            ROUND_TO_BF16: tl.constexpr, BLOCK: tl.constexpr):
    """out = src * inverse_scale in float8, saturating at +-limit, and out_t = out.T, a square block per program. As
    to_float8 rounds on CUDA: torch divides by a CPU scalar as a product with its fp32 reciprocal, in the input's
    dtype (so through bf16 for a bf16 src)."""
    first_row, first_col = tl.program_id(0) * BLOCK, tl.program_id(1) * BLOCK
    local = tl.arange(0, BLOCK)
    mask = (first_row + local < rows)[:, None] & (first_col + local < cols)[None, :]
    at = first_row.to(tl.int64) * cols + first_col + local[:, None] * cols + local[None, :]
    scaled = tl.load(src_ptr + at, mask=mask, other=0.0).to(tl.float32) * inverse_scale
    if ROUND_TO_BF16:
        scaled = scaled.to(tl.bfloat16).to(tl.float32)
    block = tl.clamp(scaled, -limit, limit, propagate_nan=tl.PropagateNan.ALL).to(out_ptr.dtype.element_ty)
    tl.store(out_ptr + at, block, mask=mask)
    tl.store(out_t_ptr + first_col.to(tl.int64) * rows + first_row + local[:, None] * rows + local[None, :],
             tl.trans(block), mask=tl.trans(mask))


FLOAT8_BOTH_WAYS_LAUNCH = (64, 4)  # BLOCK, num_warps: as fast as any other (perf/head_kernels_bench.py, session 46)


def float8_both_ways(t: Tensor, scale: float, launch: tuple = FLOAT8_BOTH_WAYS_LAUNCH) -> tuple[Tensor, Tensor]:
    """to_float8(t, scale, e4m3) of a 2-D fp32 or bf16 t, and its transpose, from one pass over t (the eager cast's
    division, clamp and cast were three passes, and the transposed copy a fourth)."""
    rows, cols = t.shape
    out = t.new_empty(rows, cols, dtype=torch.float8_e4m3fn)
    out_t, (block, num_warps) = t.new_empty(cols, rows, dtype=torch.float8_e4m3fn), launch
    inverse_scale = torch.tensor(1.0).div(torch.tensor(scale, dtype=torch.float32)).item()  # fp32, as torch's
    float8_both_ways_kernel[(triton.cdiv(rows, block), triton.cdiv(cols, block))](
        t, out, out_t, rows, cols, inverse_scale, torch.finfo(torch.float8_e4m3fn).max,
        ROUND_TO_BF16=t.dtype == torch.bfloat16, BLOCK=block, num_warps=num_warps)
    return out, out_t


@triton.jit
def tile_origin(tile, rows, cols, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """First row and column of output tile number `tile`: tiles go GROUP_M block-rows at a time down each
    block-column, so a group's rows of x stay in L2."""
    blocks_m, blocks_n = tl.cdiv(rows, BLOCK_M), tl.cdiv(cols, BLOCK_N)
    group, in_group = tile // (GROUP_M * blocks_n), tile % (GROUP_M * blocks_n)
    group_rows = min(blocks_m - group * GROUP_M, GROUP_M)
    return (group * GROUP_M + in_group % group_rows) * BLOCK_M, (in_group // group_rows) * BLOCK_N


@triton.jit
def store_relu_square(acc, h_scale, inverse_a_scale, a_max, a_desc, row, col):
    """a = relu(h)^2 / a_scale, saturating at a_max, of h = h_scale * acc (a NaN in h stays one, as in torch's relu
    and clamp: the GPU's max and min return the other operand)."""
    relu = tl.maximum(acc * h_scale, 0.0, propagate_nan=tl.PropagateNan.ALL)
    a = tl.minimum(relu * relu * inverse_a_scale, a_max, propagate_nan=tl.PropagateNan.ALL)
    a_desc.store([row, col], a.to(a_desc.dtype))


@triton.jit
def relu_square_up_kernel(x_desc, w_desc, a_desc, x_scale_ptr, w_scale_ptr, a_scale_ptr, rows, cols, a_max,
                          K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                          GROUP_M: tl.constexpr, PROGRAMS: tl.constexpr, SPLIT_EPILOGUE: tl.constexpr):
    """The MLP's up projection with a's e4m3 cast in its epilogue: h = x_scale w_scale (x @ w^T) (x: rows x K, w:
    cols x K, both e4m3) accumulated in fp32 and stored only as a = relu(h)^2 / a_scale (store_relu_square). Each of
    PROGRAMS programs (one an SM) walks output tiles through TMA descriptors; flatten pipelines the next tile's loads
    under this tile's epilogue. SPLIT_EPILOGUE stores each tile as two halves of BLOCK_N / 2 columns, so the epilogue
    stages half a tile in shared memory (Triton's persistent-matmul tutorial); track 2's relu_square_gemm_kernel is
    this GEMM in bf16."""
    h_scale, inverse_a_scale = tl.load(x_scale_ptr) * tl.load(w_scale_ptr), 1.0 / tl.load(a_scale_ptr)
    tiles = tl.cdiv(rows, BLOCK_M) * tl.cdiv(cols, BLOCK_N)
    for tile in tl.range(tl.program_id(0), tiles, PROGRAMS, flatten=True):
        first_row, first_col = tile_origin(tile, rows, cols, BLOCK_M, BLOCK_N, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            acc = tl.dot(x_desc.load([first_row, k0]), w_desc.load([first_col, k0]).T, acc)
        if SPLIT_EPILOGUE:
            left, right = acc.reshape(BLOCK_M, 2, BLOCK_N // 2).permute(0, 2, 1).split()
            store_relu_square(left, h_scale, inverse_a_scale, a_max, a_desc, first_row, first_col)
            store_relu_square(right, h_scale, inverse_a_scale, a_max, a_desc, first_row, first_col + BLOCK_N // 2)
        else:
            store_relu_square(acc, h_scale, inverse_a_scale, a_max, a_desc, first_row, first_col)


# BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages, split epilogue: perf/mlp_up_bench.py times others (on
# an H100: 198.0 us, the best of 16; 205.3 at 3 stages with the epilogue in halves; 219-295 at 128 x 128 tiles)
RELU_SQUARE_UP_LAUNCH = (128, 256, 128, 8, 8, 4, False)


def multiprocessors(device: torch.device) -> int:
    """The GPU's SM count, which sets relu_square_up_kernel's program count (4 elsewhere: Triton's interpreter)."""
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4


def relu_square_up_triton(x_f8: Tensor, w_f8: Tensor, x_scale: Tensor, w_scale: Tensor, a_scale: Tensor,
                          out_dtype: torch.dtype = torch.float8_e4m3fn,
                          launch: tuple = RELU_SQUARE_UP_LAUNCH) -> Tensor:
    """fp8_relu_square_up by relu_square_up_kernel (a in e4m3 in training; any float dtype, for tests under Triton's
    interpreter, whose float8 casts misround). TMA needs rows of a multiple of 16 bytes: K, and w's row count (a's
    width), multiples of 16 in e4m3."""
    block_m, block_n, block_k, group_m, num_warps, num_stages, split_epilogue = launch
    (rows, k), cols = x_f8.shape, w_f8.size(0)
    programs = min(triton.cdiv(rows, block_m) * triton.cdiv(cols, block_n), multiprocessors(x_f8.device))
    a = x_f8.new_empty(rows, cols, dtype=out_dtype)
    descriptors = [TensorDescriptor.from_tensor(x_f8, [block_m, block_k]),
                   TensorDescriptor.from_tensor(w_f8, [block_n, block_k]),
                   TensorDescriptor.from_tensor(a, [block_m, block_n // 2 if split_epilogue else block_n])]
    relu_square_up_kernel[(programs,)](*descriptors, x_scale, w_scale, a_scale, rows, cols,
                                       torch.finfo(torch.float8_e4m3fn).max, K=k, BLOCK_M=block_m, BLOCK_N=block_n,
                                       BLOCK_K=block_k, GROUP_M=group_m, PROGRAMS=programs,
                                       SPLIT_EPILOGUE=split_epilogue, num_warps=num_warps, num_stages=num_stages)
    return a


def relu_square_up_torch(x_f8: Tensor, w_f8: Tensor, x_scale: Tensor, w_scale: Tensor, a_scale: Tensor) -> Tensor:
    """fp8_relu_square_up in torch ops: the path of the CPU and of GPUs without TMA, and the GPU checks' reference."""
    h = scaled_mm(x_f8, w_f8.T, x_scale, w_scale, torch.float32, fast_accum=True)
    return to_float8(F.relu(h).square(), a_scale, torch.float8_e4m3fn)


@functools.cache
def lacks_tma(device: torch.device) -> bool:
    """Whether device is a GPU before sm_90, without the TMA that relu_square_up_kernel loads and stores by (sm_89
    has the FP8 tensor cores that the rest of the FP8 MLP needs)."""
    return device.type == "cuda" and torch.cuda.get_device_capability(device) < (9, 0)


@torch.library.custom_op("nanogpt::fp8_relu_square_up", mutates_args=())
def fp8_relu_square_up(x_f8: Tensor, w_f8: Tensor, x_scale: Tensor, w_scale: Tensor, a_scale: Tensor) -> Tensor:
    """a = relu(h)^2 / a_scale in e4m3, saturating, of h = (x_f8 x_scale) @ (w_f8 w_scale)^T in fp32 (x_f8: tokens x
    dim, w_f8: hidden x dim, both e4m3; the scales 0-d tensors): on the GPU one GEMM with the cast in its epilogue
    (relu_square_up_kernel), so h is never written (cuBLAS's GEMM writing bf16 h and inductor's cast reading it
    moved 4 bytes an entry more, perf/NOTES.md session 65); torch elsewhere, and on GPUs without TMA (lacks_tma)."""
    if not x_f8.is_cuda or lacks_tma(x_f8.device):
        return relu_square_up_torch(x_f8, w_f8, x_scale, w_scale, a_scale)
    return relu_square_up_triton(x_f8, w_f8, x_scale, w_scale, a_scale)


@fp8_relu_square_up.register_fake
def _(x_f8, w_f8, x_scale, w_scale, a_scale):
    return x_f8.new_empty(x_f8.size(0), w_f8.size(0), dtype=torch.float8_e4m3fn)


def sampled_relu_square_scale(x_f8: Tensor, w_f8: Tensor, x_scale: Tensor, w_scale: Tensor, row_step: int) -> Tensor:
    """a's scale for fp8_relu_square_up before its GEMM runs: float8_scale of relu(h)^2 over every row_step-th row,
    from a GEMM of those rows alone (fp32, as the epilogue sees h)."""
    sampled_h = scaled_mm(x_f8[::row_step].contiguous(), w_f8.T, x_scale, w_scale, torch.float32, fast_accum=True)
    return float8_scale(F.relu(sampled_h).square(), torch.float8_e4m3fn, row_step)


def relu_square_grad(a_f8: Tensor, a_scale: Tensor, grad_a: Tensor) -> Tensor:
    """The gradient of h for a = relu(h)^2, in fp32, from a's e4m3 copy (a_f8 * a_scale): relu(h) = sqrt(a)."""
    return 2 * torch.sqrt(a_f8.float() * a_scale) * grad_a.float()


@triton.jit
def relu_square_grads_kernel(a_ptr, grad_a_ptr, a_scale_ptr, grad_scale_ptr, a_t_ptr, grad_h_ptr, grad_h_t_ptr, rows,
                             cols, grad_max, BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr,
                             STORE_GRAD_H_T: tl.constexpr):
    """One block of a = relu(h)^2 / a_scale (tokens x hidden, the forward's e4m3 copy) and of a's gradient to a
    transposed (the same bytes) and h's gradient / grad_scale, clamped to e5m2's range, with relu(h) = sqrt(a *
    a_scale) by the approximate root (one MUFU op; the correctly rounded one sends relu's zeros down a slow path, and
    the e5m2 cast hides the last-bit differences: the start-up check and perf/gpu_checks.py find torch's bytes); with
    STORE_GRAD_H_T h's gradient also transposed (one pass, no transpose kernel after it). Triton swaps each
    transposed store's layout through shared memory, so every load and store is coalesced. a's transposed store
    comes last, so that the loaded bytes are not kept live through the arithmetic (registers: perf/kernel_report.py).
    Triton 3.6's bundled ptxas built the one pass wrong on the H200 (its transposed gradient), torch's right: the op
    takes it only where one_pass_relu_square_is_exact, its start-up check, found it so (perf/NOTES.md, session 14)."""
    r = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    c = tl.program_id(1) * BLOCK_COLS + tl.arange(0, BLOCK_COLS)
    mask = (r < rows)[:, None] & (c < cols)[None, :]
    at, at_t = r.to(tl.int64)[:, None] * cols + c[None, :], c.to(tl.int64)[:, None] * rows + r[None, :]
    a = tl.load(a_ptr + at, mask=mask, other=0.0).to(tl.float32)
    relu = tl.sqrt(a * tl.load(a_scale_ptr))
    grad = tl.load(grad_a_ptr + at, mask=mask, other=0.0).to(tl.float32) * (relu * 2.0) / tl.load(grad_scale_ptr)
    grad_h = tl.clamp(grad, -grad_max, grad_max).to(grad_h_ptr.dtype.element_ty)
    tl.store(grad_h_ptr + at, grad_h, mask=mask)
    if STORE_GRAD_H_T:
        tl.store(grad_h_t_ptr + at_t, tl.trans(grad_h), mask=tl.trans(mask))
    tl.store(a_t_ptr + at_t, tl.trans(a).to(a_t_ptr.dtype.element_ty), mask=tl.trans(mask))


RELU_SQUARE_LAUNCH = (32, 128, 4)  # BLOCK_ROWS, BLOCK_COLS, num_warps (one pass or two): perf/mlp_bench.py times others


def launch_relu_square_grads(a_f8: Tensor, grad_a: Tensor, a_scale: Tensor, grad_scale: Tensor, a_t: Tensor,
                             grad_h: Tensor, grad_h_t: Tensor | None = None, launch: tuple = RELU_SQUARE_LAUNCH):
    """Fills a_t and grad_h, and grad_h_t where given (one pass), by relu_square_grads_kernel (float8 in training; any
    float dtype, for tests under Triton's interpreter, whose float8 casts misround)."""
    rows, cols = a_f8.shape
    block_rows, block_cols, num_warps = launch
    grid = (triton.cdiv(rows, block_rows), triton.cdiv(cols, block_cols))
    relu_square_grads_kernel[grid](a_f8, grad_a, a_scale, grad_scale, a_t, grad_h, grad_h_t, rows, cols,
                                   torch.finfo(torch.float8_e5m2).max, BLOCK_ROWS=block_rows, BLOCK_COLS=block_cols,
                                   STORE_GRAD_H_T=grad_h_t is not None, num_warps=num_warps)


def relu_square_grads_triton(a_f8: Tensor, grad_a: Tensor, a_scale: Tensor, grad_scale: Tensor,
                             one_pass: bool | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """fp8_relu_square_grads by the kernel: in one pass if one_pass (by default: where one_pass_relu_square_is_exact
    on a_f8's device), else the kernel, then the transpose kernel for grad_h's transposed copy."""
    rows, cols = a_f8.shape
    if one_pass is None:
        one_pass = one_pass_relu_square_is_exact(a_f8.device)
    a_t = a_f8.new_empty(cols, rows, dtype=torch.float8_e4m3fn)
    grad_h = a_f8.new_empty(rows, cols, dtype=torch.float8_e5m2)
    grad_h_t = a_f8.new_empty(cols, rows, dtype=torch.float8_e5m2) if one_pass else None
    launch_relu_square_grads(a_f8, grad_a, a_scale, grad_scale, a_t, grad_h, grad_h_t)
    return a_t, grad_h, grad_h_t if one_pass else transposed(grad_h)


def relu_square_grads_torch(a_f8: Tensor, grad_a: Tensor, a_scale: Tensor, grad_scale: Tensor) -> tuple[Tensor, Tensor,
                                                                                                         Tensor]:
    """fp8_relu_square_grads in torch ops: the CPU's path and the start-up check's reference (perf/mlp_bench.py
    compiles it to the kernel inductor made)."""
    grad_h = to_float8(relu_square_grad(a_f8, a_scale, grad_a), grad_scale, torch.float8_e5m2)
    return a_f8.T.contiguous(), grad_h, grad_h.T.contiguous()


def relu_square_check_inputs(rows: int, cols: int, device: torch.device) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """fp8_relu_square_grads's inputs as FP8MLP makes them, from a random h and a's gradient (e5m2, at 1e-3 of its
    largest value): a = relu(h)^2's e4m3 copy, the gradient, a's scale and h's gradient's scale (both from all
    rows)."""
    gen = torch.Generator(device).manual_seed(0)
    h = torch.randn(rows, cols, device=device, generator=gen).bfloat16()
    grad_a = (torch.randn(rows, cols, device=device, generator=gen) * 57.344).to(torch.float8_e5m2)
    a_f8, a_scale = to_float8_scaled(F.relu(h.float()).square(), torch.float8_e4m3fn)
    return a_f8, grad_a, a_scale, float8_scale(relu_square_grad(a_f8, a_scale, grad_a), torch.float8_e5m2, 1)


@functools.cache
def one_pass_relu_square_is_exact(device: torch.device) -> bool:
    """Whether the kernel's one pass gives the torch path's bytes in all three outputs on this device, for a random
    192 x 384 block made as the MLP makes it (relu_square_check_inputs): the guard against a miscompiled build
    (relu_square_grads_kernel). Run once per device: by the start-up's kernel builds (tiny_kernel_launches), before
    the op asks from compiled code."""
    inputs = relu_square_check_inputs(192, 384, device)
    ours = relu_square_grads_triton(*inputs, one_pass=True)
    theirs = relu_square_grads_torch(*inputs)
    return all(torch.equal(a.view(torch.uint8), b.view(torch.uint8)) for a, b in zip(ours, theirs))


@torch.library.custom_op("nanogpt::fp8_relu_square_grads", mutates_args=())
def fp8_relu_square_grads(a_f8: Tensor, grad_a: Tensor, a_scale: Tensor, grad_scale: Tensor) -> tuple[Tensor, Tensor,
                                                                                                       Tensor]:
    """For a = relu(h)^2 (h: tokens x hidden), given as the forward's e4m3 copy a_f8 = a / a_scale, and a's gradient:
    a_f8 transposed (its bytes), and h's gradient / grad_scale in e5m2, row-major and transposed, saturating, with
    relu(h) = sqrt(a_f8 * a_scale) (relu_square_grad). On the GPU one pass over a_f8 and the gradient where the
    start-up check found it exact (inductor's fused kernel ran at ~2.1 TB/s), else that pass and the transpose
    kernel; torch elsewhere."""
    if not a_f8.is_cuda:
        return relu_square_grads_torch(a_f8, grad_a, a_scale, grad_scale)
    return relu_square_grads_triton(a_f8, grad_a, a_scale, grad_scale)


@fp8_relu_square_grads.register_fake
def _(a_f8, grad_a, a_scale, grad_scale):
    rows, cols = a_f8.shape
    return (a_f8.new_empty(cols, rows, dtype=torch.float8_e4m3fn), a_f8.new_empty(rows, cols, dtype=torch.float8_e5m2),
            a_f8.new_empty(cols, rows, dtype=torch.float8_e5m2))


@torch.no_grad()
def mlp_weight_casts(fc_w: Tensor, proj_w: Tensor) -> tuple[Tensor, ...]:
    """The MLP weights as FP8MLP's products take them (the tensor cores take a row-major A and a column-major B):
    fc_w and proj_w (dim x hidden) in e4m3, each also transposed (hidden x dim, contiguous), and their scales, each
    a 0-d tensor of its own (inductor's GEMM templates cannot take a scale that views another tensor: a lowering
    error on the GPU, perf/NOTES.md session 63). The weights do not change between micro-steps, so training makes
    these once a step (GPT.weight_casts). Last, the bound of a's gradient: proj_w's e4m3 copy's largest column sum
    of magnitudes (grad_a_bound)."""
    fc_f8, fc_scale = to_float8_scaled(fc_w, torch.float8_e4m3fn)
    proj_f8, proj_scale = to_float8_scaled(proj_w, torch.float8_e4m3fn)
    return (fc_f8, fc_f8.T.contiguous(), proj_f8, proj_f8.T.contiguous(), fc_scale, proj_scale,
            grad_a_bound(proj_f8))


def grad_a_bound(proj_f8: Tensor) -> Tensor:
    """The largest column sum of |proj_f8| (dim x hidden, e4m3; at least 1, so that a zero weight divides nothing):
    each entry of the e5m2 grad_y @ proj_f8 is at most e5m2's largest value times this (grad_y's cast saturates), so
    the product divided by it fits e5m2 without a maximum taken first. On random data the bound lay 2^4.5-2^5.5 above
    the largest entry (perf/NOTES.md, session 73); e5m2 keeps ~2^30 of range below it."""
    return proj_f8.float().abs().sum(dim=0).amax().clamp_min(1.0)


class FP8MLP(torch.autograd.Function):
    """relu(x @ fc_w)^2 @ proj_w.T (x: tokens x dim, RMS-normed; fc_w, proj_w: dim x hidden) on the FP8 tensor cores:
    e4m3 operands forward, e5m2 gradients backward (--fp8_mlp; later records quantise the up projection's forward
    only). x's scale is fixed, as the head's (normed_e4m3_scale), so the cast needs no maximum first (no reduction
    kernels, no second pass over x) and fuses into the norm's kernel; the other scales come from the tensors
    themselves. The weights come cast (mlp_weight_casts of fc_w and proj_w as they are); fc_w and proj_w are here for
    their gradients. Plain autograd traced by torch.compile, so the scaling and the casts fuse with the neighbouring
    elementwise work, except the two passes over the hidden activations: the up projection, whose GEMM writes a's
    e4m3 copy from its fp32 h (fp8_relu_square_up; a's scale comes first, from a GEMM of the sampled rows alone), and
    the backward's fp8_relu_square_grads, from a's e4m3 copy (the down projection's operand), which the forward keeps
    instead of the bf16 h (half the bytes), and from a's gradient, which its GEMM writes in e5m2 divided by
    grad_a_bound (half the bytes of bf16 to write and to read). The weight gradients' transposed operands x and
    grad_y come from float8_transposed, x's made in the forward and kept. a's, grad_y's and h's gradient's scales
    sample every row_step-th row (float8_scale; at row_step 1 the sampled GEMM is the whole one again). Measured:
    perf/NOTES.md, sessions 67 and 73."""

    @staticmethod
    def forward(ctx, x: Tensor, fc_w: Tensor, proj_w: Tensor, fc_f8: Tensor, fc_f8_t: Tensor, proj_f8: Tensor,
                proj_f8_t: Tensor, fc_scale: Tensor, proj_scale: Tensor, proj_bound: Tensor, row_step: int) -> Tensor:
        x_scale = x.new_full((), normed_e4m3_scale(x.size(-1)), dtype=torch.float32)
        x_f8 = to_float8(x, x_scale, torch.float8_e4m3fn)
        a_scale = sampled_relu_square_scale(x_f8, fc_f8_t, x_scale, fc_scale, row_step)
        a_f8 = fp8_relu_square_up(x_f8, fc_f8_t, x_scale, fc_scale, a_scale)
        x_f8_t = float8_transposed(x_f8)  # made here and kept: the backward would recompute x_f8 and copy it there
        ctx.save_for_backward(x_f8_t, fc_f8, proj_f8_t, a_f8, x_scale, fc_scale, proj_scale, proj_bound, a_scale)
        ctx.row_step = row_step
        return scaled_mm(a_f8, proj_f8.T, a_scale, proj_scale, torch.bfloat16, fast_accum=True)

    @staticmethod
    def backward(ctx, grad_y: Tensor) -> tuple:
        x_f8_t, fc_f8, proj_f8_t, a_f8, x_scale, fc_scale, proj_scale, proj_bound, a_scale = ctx.saved_tensors
        step = ctx.row_step
        grad_y_f8, grad_y_scale = to_float8_scaled(grad_y, torch.float8_e5m2, step)
        # fast accumulation where the sum is short (model_dim, hidden width), precise where it runs over the tokens;
        # a's gradient is grad_a_f8 * grad_a_scale, and so h's is grad_h_f8 * grad_h_scale * grad_a_scale
        grad_a_f8 = scaled_mm(grad_y_f8, proj_f8_t.T, 1.0, 1 / proj_bound, torch.float8_e5m2, fast_accum=True)
        grad_a_scale = grad_y_scale * proj_scale * proj_bound
        grad_h_scale = float8_scale(relu_square_grad(a_f8[::step], a_scale, grad_a_f8[::step]), torch.float8_e5m2,
                                    step)
        a_f8_t, grad_h_f8, grad_h_f8_t = fp8_relu_square_grads(a_f8, grad_a_f8, a_scale, grad_h_scale)
        grad_h_scale = grad_h_scale * grad_a_scale
        grad_proj = scaled_mm(float8_transposed(grad_y_f8), a_f8_t.T, grad_y_scale, a_scale, torch.float32,
                              fast_accum=False)
        grad_fc = scaled_mm(x_f8_t, grad_h_f8_t.T, x_scale, grad_h_scale, torch.float32, fast_accum=False)
        grad_x = scaled_mm(grad_h_f8, fc_f8.T, grad_h_scale, fc_scale, torch.bfloat16, fast_accum=True)
        return grad_x, grad_fc, grad_proj, None, None, None, None, None, None, None, None


def fp8_mlp(x: Tensor, fc_w: Tensor, proj_w: Tensor, fc_f8: Tensor, fc_f8_t: Tensor, proj_f8: Tensor,
            proj_f8_t: Tensor, fc_scale: Tensor, proj_scale: Tensor, proj_bound: Tensor, row_step: int) -> Tensor:
    return FP8MLP.apply(x, fc_w, proj_w, fc_f8, fc_f8_t, proj_f8, proj_f8_t, fc_scale, proj_scale, proj_bound,
                        row_step)


def rowwise_float8(t: Tensor) -> tuple[Tensor, Tensor]:
    """t (rows x cols) in e4m3 with one scale per row (rows x 1) that takes the row's largest magnitude to e4m3's
    largest value: a row reduction, which compiles into the kernel that makes t (the attention input's norm)."""
    scale = t.detach().abs().amax(dim=1, keepdim=True).float().clamp_min(1e-30) / torch.finfo(torch.float8_e4m3fn).max
    return to_float8(t, scale, torch.float8_e4m3fn), scale


def rowwise_scaled_mm(a: Tensor, a_scale: Tensor, b: Tensor, b_scale: Tensor) -> Tensor:
    """(a * a_scale) @ (b * b_scale).T in bf16 for e4m3 a and b scaled by rows (b's rows: the product's columns): the
    rowwise FP8 GEMM on the GPU (cuBLAS on the H200), the same float8 values multiplied in fp32 elsewhere."""
    if a.is_cuda:
        return torch._scaled_mm(a, b.T, scale_a=a_scale, scale_b=b_scale.T, out_dtype=torch.bfloat16,
                                use_fast_accum=True)
    return ((a.float() * a_scale) @ (b.float() * b_scale).T).bfloat16()


# ----------------------------------------------------------------------------------------------
# Fused head: the training loss is the graph's end, so the FP8 head computes its gradients in the forward; a
# Triton kernel takes each row of bf16 logits to its loss and its float8 gradient (no fp32 logits, no saved
# logits), a transpose kernel writes the other layout the FP8 backward matmuls need


def softcap(logits: Tensor) -> Tensor:
    """Logit softcap (Gemma 2, 2024) in the 2025 records' sigmoid form: logits bounded to (0, 30)."""
    return 30 * torch.sigmoid(logits.float() / 7.5)


CAP_LOG2 = tl.constexpr(15 * math.log2(math.e))  # exp(softcap(z)) = 2^(CAP_LOG2 * (1 + tanh(z / 15)))
LN2 = tl.constexpr(math.log(2))


@triton.jit
def tanh_of(u, ON_GPU: tl.constexpr):
    """tanh(u) in fp32: one tanh.approx on the GPU (absolute error < 2^-10.7), exact under Triton's interpreter, which
    has no inline asm. softcap(z) = 30 sigmoid(z / 7.5) = 15 + 15 tanh(z / 15): one special-function op an entry
    instead of an exp and a reciprocal."""
    if ON_GPU:
        return tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=f,f", [u], dtype=tl.float32, is_pure=True,
                                         pack=1)
    return 2.0 * tl.sigmoid(2.0 * u) - 1.0


@triton.jit
def tanh_of_block(row_logits, cols, vocab, ON_GPU: tl.constexpr, EVICTION: tl.constexpr):
    """t = tanh(z / 15) of one row's logits z at cols (z = 0 past the vocabulary): softcap(z) = 15 + 15 t. EVICTION:
    the load's L2 eviction policy."""
    z = tl.load(row_logits + cols, mask=cols < vocab, other=0.0, eviction_policy=EVICTION)
    return tanh_of(z.to(tl.float32) * (1 / 15), ON_GPU)


@triton.jit
def exp2_of(x, ON_GPU: tl.constexpr):
    """2^x in fp32: one ex2.approx.ftz on the GPU, where tl.exp2's ex2.approx adds a compare and two predicated
    multiplies for subnormal results, which no entry here needs."""
    if ON_GPU:
        return tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True,
                                         pack=1)
    return tl.exp2(x)


@triton.jit
def exp2_on_fma(x):
    """2^x in fp32 for |x| < 126 without the special-function unit (FlashAttention-4's trick): x = n + f, n the
    nearest integer (rounded by adding 1.5 * 2^23), 2^f for f in [-1/2, 1/2] by a cubic (relative error 7.5e-5,
    far below tanh.approx's), and n added to its exponent bits. 8 FMA-unit and integer instructions. Past that range
    the exponent add wraps (to NaN or huge values), so the callers keep x in it: the loss kernel's first pass by its
    arguments' range, (0, 2 CAP_LOG2), and its second pass by a clamp (exp2_a_quarter_on_fma)."""
    shifted = x + 12582912.0
    f = x - (shifted - 12582912.0)
    power = ((0.055171669 * f + 0.24261115) * f + 0.69326097) * f + 0.99992806
    return (power.to(tl.int32, bitcast=True) + (shifted.to(tl.int32, bitcast=True) << 23)).to(tl.float32,
                                                                                                bitcast=True)


@triton.jit
def exp2_a_quarter_on_fma(x, ON_GPU: tl.constexpr):
    """2^x of a 1-D block in fp32, every fourth entry's by exp2_on_fma and the others' by exp2_of, in x's order: the
    block reshaped to pairs and split, twice, gives four interleaved quarters, joined back the same way within each
    thread's registers (no shared memory; the loss kernel's store stays 16 bytes). The FMA quarter's x is clamped at
    -125 first: the loss kernel's x = log2(softmax / grad_s) falls below -126, where exp2_on_fma wraps, for a grad_s
    past ~2^67 (training's 1/448 keeps it above -51), and 2^-125 is zero in e5m2 as the exact value is."""
    even, odd = tl.split(tl.reshape(x, [x.shape[0] // 2, 2]))
    first, third = tl.split(tl.reshape(even, [x.shape[0] // 4, 2]))
    second, fourth = tl.split(tl.reshape(odd, [x.shape[0] // 4, 2]))
    first = exp2_on_fma(tl.maximum(first, -125.0))
    even = tl.reshape(tl.join(first, exp2_of(third, ON_GPU)), [x.shape[0] // 2])
    odd = tl.reshape(tl.join(exp2_of(second, ON_GPU), exp2_of(fourth, ON_GPU)), [x.shape[0] // 2])
    return tl.reshape(tl.join(even, odd), [x.shape[0]])


@triton.jit(do_not_specialize_on_alignment=["targets_ptr"])  # targets: the window one token in
def softcap_ce_kernel(logits_ptr, targets_ptr, loss_ptr, grad_ptr, vocab, inv_grad_s, log2_inv_grad_s, grad_max,
                      BLOCK: tl.constexpr, ON_GPU: tl.constexpr):
    """With t = tanh(z / 15): exp(softcap) = 2^(CAP_LOG2 (1 + t)) and d softcap / dz = 1 - t^2, so each entry costs
    one tanh and one exp2 a pass, the constants folded into one FMA. The special-function unit bounds both passes
    (perf/kernel_report.py counts the cycles), so exp2_on_fma takes some exps to the FMA units, otherwise idle: half
    of each block's in the first pass, a quarter in the second (exp2_a_quarter_on_fma), where the gradient's
    arithmetic already takes more issue slots: a quarter brings them level with the unit's cycles. The second pass
    rereads the row (100 KB of bf16 at the GPT-2 vocabulary): the first pass's loads ask L2 to keep it (evict_last),
    the second's, and the gradient's stores, to drop theirs first, so that the reread comes from L2 rather than HBM
    (with CE_BLOCK's launch; perf/NOTES.md, session 67)."""
    row = tl.program_id(0).to(tl.int64)
    row_logits, row_grad = logits_ptr + row * vocab, grad_ptr + row * vocab
    # softcap(z) lies in (0, 30): 2^(...) cannot overflow, no max needed
    total = tl.zeros([BLOCK // 2], tl.float32)
    for start in range(0, vocab, BLOCK):
        cols = start + tl.arange(0, BLOCK // 2)
        t = tanh_of_block(row_logits, cols, vocab, ON_GPU, "evict_last")
        total += tl.where(cols < vocab, exp2_of(t * CAP_LOG2 + CAP_LOG2, ON_GPU), 0.0)
        cols += BLOCK // 2
        t = tanh_of_block(row_logits, cols, vocab, ON_GPU, "evict_last")
        total += tl.where(cols < vocab, exp2_on_fma(t * CAP_LOG2 + CAP_LOG2), 0.0)
    log2_sum = tl.log2(tl.sum(total, axis=0))
    target = tl.load(targets_ptr + row)
    target_t = tanh_of(tl.load(row_logits + target).to(tl.float32) * (1 / 15), ON_GPU)
    tl.store(loss_ptr + row, (log2_sum - CAP_LOG2 * (1 + target_t)) * LN2)
    scaled_offset = CAP_LOG2 - log2_sum + log2_inv_grad_s  # 2^(t * CAP_LOG2 + this) = softmax / grad_s
    for start in range(0, vocab, BLOCK):  # the row again, from L2 where it stayed
        cols = start + tl.arange(0, BLOCK)
        t = tanh_of_block(row_logits, cols, vocab, ON_GPU, "evict_first")
        scaled_softmax = exp2_a_quarter_on_fma(t * CAP_LOG2 + scaled_offset, ON_GPU)
        grad = (scaled_softmax - tl.where(cols == target, inv_grad_s, 0.0)) * (1.0 - t * t)
        if grad_ptr.dtype.element_ty != tl.float8e5:  # a float8 store saturates by itself (cvt.rn.satfinite)
            grad = tl.clamp(grad, -grad_max, grad_max)
        tl.store(row_grad + cols, grad.to(grad_ptr.dtype.element_ty), mask=cols < vocab,
                 eviction_policy="evict_first")


CE_BLOCK = 8192  # 16 elements a thread: 16-byte float8 stores; 16 warps, so that fewer rows are in flight an SM
CE_WARPS = 16  # and their rereads stay in L2: 3.27 ms a call against 3.55 at 4096 over 8 warps (H100, session 67)


def softcap_ce_rows(logits: Tensor, targets: Tensor, grad_s: float, grad: Tensor,
                    launch: tuple | None = None) -> Tensor:
    """Each row's cross entropy of softcap(logits); its gradient / grad_s, clamped to e5m2's range, goes to grad
    (float8 in training; any float dtype, for tests under Triton's interpreter, whose float8 casts misround). launch:
    (BLOCK, num_warps), by default CE_BLOCK over CE_WARPS."""
    rows, vocab = logits.shape
    loss, (block, num_warps) = logits.new_empty(rows, dtype=torch.float32), launch or (CE_BLOCK, CE_WARPS)
    softcap_ce_kernel[(rows,)](logits, targets, loss, grad, vocab, 1 / grad_s, -math.log2(grad_s),
                               torch.finfo(torch.float8_e5m2).max, BLOCK=block, ON_GPU=logits.is_cuda,
                               num_warps=num_warps)
    return loss


def takes_fused_head(t: Tensor) -> bool:
    """Whether training's head is fp8_head_ce with the weight's casts given (CUDA) rather than fp8_mm (the CPU's)."""
    return t.is_cuda


@torch.library.custom_op("nanogpt::head_weight_casts", mutates_args=())
def head_weight_casts(w: Tensor, w_s: float) -> tuple[Tensor, Tensor]:
    """The head weight (vocabulary x dim) in e4m3 both ways (float8_both_ways) for fp8_head_ce. The weight does not
    change between micro-steps, so training makes these once a step (GPT.weight_casts): 91 us a micro-step on an
    H100 when the head cast its own (perf/NOTES.md, session 62)."""
    return float8_both_ways(w, w_s)


@head_weight_casts.register_fake
def _(w, w_s):
    return torch.empty_like(w, dtype=torch.float8_e4m3fn), w.new_empty(w.size(1), w.size(0), dtype=torch.float8_e4m3fn)


@torch.library.custom_op("nanogpt::fp8_head_ce", mutates_args=())
def fp8_head_ce(x: Tensor, w: Tensor, w_f8: Tensor, w_f8_t: Tensor, targets: Tensor, x_s: float, w_s: float,
                grad_s: float) -> tuple[Tensor, Tensor, Tensor]:
    """Summed cross entropy of the FP8 head's softcapped logits (x: tokens x dim, w: vocabulary x dim, whose e4m3
    layouts w_f8 and w_f8_t come made by head_weight_casts; w is here for its gradient) and its gradients for x and
    w. CUDA, or Triton's interpreter on CPU tensors."""
    x_f8, x_f8_t = float8_both_ways(x, x_s)
    logits = scaled_mm(x_f8, w_f8.T, x_s, w_s, torch.bfloat16, fast_accum=True)
    grad_f8 = torch.empty_like(logits, dtype=torch.float8_e5m2)
    loss = softcap_ce_rows(logits, targets, grad_s, grad_f8).sum()
    del logits  # 4.9 GB at 48K tokens: freed before the transpose allocates
    return loss, *fp8_mm_backward(grad_f8, transposed(grad_f8), x_f8_t, w_f8_t, x_s, w_s, grad_s)


@fp8_head_ce.register_fake
def _(x, w, w_f8, w_f8_t, targets, x_s, w_s, grad_s):
    return (x.new_empty((), dtype=torch.float32), torch.empty_like(x, dtype=torch.bfloat16),
            torch.empty_like(w, dtype=torch.float32))


def _fp8_head_ce_setup_context(ctx, inputs, output):
    ctx.save_for_backward(*output[1:])


def _fp8_head_ce_grad(ctx, grad_loss, *_):
    grad_x, grad_w = ctx.saved_tensors
    return grad_x * grad_loss, grad_w * grad_loss, None, None, None, None, None, None


fp8_head_ce.register_autograd(_fp8_head_ce_grad, setup_context=_fp8_head_ce_setup_context)


# ----------------------------------------------------------------------------------------------
# Embedding tables' gradients: summed in fp32 over a step's micro-steps by atomic adds of the looked-up rows'
# gradients, instead of a table-sized fp32 gradient zeroed, scattered into and cast to bf16 each micro-step and then
# added to the bf16 .grad (~190 us a table a micro-step on an H100, perf/NOTES.md session 67); the tokens taken in id
# order, so that each id's rows are summed in registers first and added once (~5x fewer atomic adds)


@triton.jit
def segmented_add(a, a_starts, b, b_starts):
    """The combine of a segmented sum: b's run restarts at a segment start."""
    return tl.where(b_starts, b, a + b), a_starts | b_starts


@triton.jit
def add_rows_kernel(sums_ptr, sorted_ids_ptr, order_ptr, rows_ptr, tokens, dim, BLOCK_TOKENS: tl.constexpr,
                    BLOCK_COLS: tl.constexpr):
    """sums[ids[t]] += rows[t], the tokens taken in id order (sorted_ids = ids[order]): a block's rows of one id are
    summed in registers (a segmented scan) and only each run's last position adds atomically, so that a repeated id
    costs one atomic add a block rather than one a token (a micro-step's 49,152 ids hold ~8.5K distinct)."""
    s = tl.program_id(0) * BLOCK_TOKENS + tl.arange(0, BLOCK_TOKENS)
    c = tl.program_id(1) * BLOCK_COLS + tl.arange(0, BLOCK_COLS)
    in_range, first, last = s < tokens, s % BLOCK_TOKENS == 0, (s + 1) % BLOCK_TOKENS == 0
    ids = tl.load(sorted_ids_ptr + s, mask=in_range, other=-1)
    starts = first | (ids != tl.load(sorted_ids_ptr + s - 1, mask=in_range & ~first, other=-1))
    ends = in_range & (last | (ids != tl.load(sorted_ids_ptr + s + 1, mask=(s + 1 < tokens) & ~last, other=-1)))
    token = tl.load(order_ptr + s, mask=in_range, other=0).to(tl.int64)
    mask = in_range[:, None] & (c < dim)[None, :]
    rows = tl.load(rows_ptr + token[:, None] * dim + c[None, :], mask=mask, other=0.0).to(tl.float32)
    run_sums, _ = tl.associative_scan((rows, tl.broadcast_to(starts[:, None], rows.shape)), 0, segmented_add)
    tl.atomic_add(sums_ptr + ids.to(tl.int64)[:, None] * dim + c[None, :], run_sums, mask=ends[:, None] & mask,
                  sem="relaxed")


ADD_ROWS_LAUNCH = (32, 256, 4)  # BLOCK_TOKENS, BLOCK_COLS, num_warps (0.692 ms for four tables with the sort, H100)


def add_rows_triton(sums: Tensor, sorted_ids: Tensor, order: Tensor, rows: Tensor, launch: tuple = ADD_ROWS_LAUNCH):
    """add_rows_ by the kernel: sorted_ids and order (tokens), rows (tokens x dim, contiguous), sums (vocabulary x
    dim, fp32)."""
    tokens, dim = sorted_ids.numel(), sums.size(1)
    block_tokens, block_cols, num_warps = launch
    add_rows_kernel[(triton.cdiv(tokens, block_tokens), triton.cdiv(dim, block_cols))](
        sums, sorted_ids, order, rows, tokens, dim, BLOCK_TOKENS=block_tokens, BLOCK_COLS=block_cols,
        num_warps=num_warps)


@torch.library.custom_op("nanogpt::add_rows_", mutates_args=("sums",))
def add_rows_(sums: Tensor, sorted_ids: Tensor, order: Tensor, rows: Tensor) -> None:
    """sums[ids[t]] += rows[t] for each token t, given the ids sorted and their order (ids.flatten().sort(): the
    values and the indices; rows: the tokens' rows, ... x dim, any float dtype; sums: vocabulary x dim, fp32): the
    kernel on the GPU, index_add_ elsewhere."""
    rows = rows.reshape(-1, sums.size(1))
    if sums.is_cuda:
        add_rows_triton(sums, sorted_ids, order, rows.contiguous())
    else:
        sums.index_add_(0, sorted_ids.long(), rows[order].float())


@add_rows_.register_fake
def _(sums, sorted_ids, order, rows):
    return None


class SummedLookup(torch.autograd.Function):
    """table[ids], whose gradient add_rows_ adds into sums (fp32, the table's shape) instead of giving it to the table:
    a step's micro-steps add into the same sums, and GPT.take_table_grads makes the tables' .grad from them once a
    step. sorted_ids and order (ids.flatten().sort()) come sorted once for all the tables. The sums are not saved for
    the backward but held by ctx, as the backward mutates them (a saved tensor mutated in the backward can make an
    invalid compiled graph: pytorch/pytorch#172956)."""

    @staticmethod
    def forward(ctx, ids: Tensor, table: Tensor, sums: Tensor, sorted_ids: Tensor, order: Tensor) -> Tensor:
        ctx.save_for_backward(sorted_ids, order)
        ctx.sums = sums
        return F.embedding(ids, table)

    @staticmethod
    def backward(ctx, grad: Tensor):
        sorted_ids, order = ctx.saved_tensors
        add_rows_(ctx.sums, sorted_ids, order, grad)
        return None, None, None, None, None


def summed_lookup(ids: Tensor, table: Tensor, sums: Tensor, sorted_ids: Tensor, order: Tensor) -> Tensor:
    return SummedLookup.apply(ids, table, sums, sorted_ids, order)


# ----------------------------------------------------------------------------------------------
# Attention inputs: q and k RMS-normed and rotated, v mixed with the value embedding, one Triton kernel each way;
# the backward writes the whole qkv gradient (inductor's two kernels for this moved ~2 TB/s, half a copy's rate)

RMS_EPS = torch.finfo(torch.float32).eps  # F.rms_norm's default for bf16 inputs (its computation dtype's)


def rms_norm(x: Tensor) -> Tensor:
    return F.rms_norm(x, (x.size(-1),))


@triton.jit
def load_halves(ptr, at, mask, HALF: tl.constexpr):
    return (tl.load(ptr + at, mask=mask, other=0.0).to(tl.float32),
            tl.load(ptr + at + HALF, mask=mask, other=0.0).to(tl.float32))


@triton.jit
def store_halves(ptr, at, mask, first, second, HALF: tl.constexpr):
    tl.store(ptr + at, first.to(ptr.dtype.element_ty), mask=mask)
    tl.store(ptr + at + HALF, second.to(ptr.dtype.element_ty), mask=mask)


@triton.jit
def normed_halves(ptr, at, mask, eps, HALF: tl.constexpr):
    """A block of rows, RMS-normed: the two halves in fp32, and each row's scale."""
    x1, x2 = load_halves(ptr, at, mask, HALF)
    scale = tl.rsqrt((tl.sum(x1 * x1, 1) + tl.sum(x2 * x2, 1)) / (2 * HALF) + eps)[:, None]
    return x1 * scale, x2 * scale, scale


@triton.jit
def norm_backward(y1, y2, scale, g1, g2, HALF: tl.constexpr):
    """The gradient of the rows x that normed to y, given y's: scale (g - y mean(g y))."""
    mean = ((tl.sum(g1 * y1, 1) + tl.sum(g2 * y2, 1)) / (2 * HALF))[:, None]
    return scale * (g1 - y1 * mean), scale * (g2 - y2 * mean)


@triton.jit
def norm_rotate_rows(qkv_ptr, out_ptr, src, dst, mask, cos, sin, eps, HALF: tl.constexpr):
    """Rows of q (or k) RMS-normed, then each first-half dim rotated with its second-half partner (the tables'
    second halves are cos 1, sin 0: those dims stay position-free)."""
    y1, y2, _ = normed_halves(qkv_ptr, src, mask, eps, HALF)
    store_halves(out_ptr, dst, mask, y1 * cos + y2 * sin, y2 * cos - y1 * sin, HALF)


@triton.jit
def norm_rotate_rows_backward(qkv_ptr, grad_ptr, src, grad_at, mask, cos, sin, eps, HALF: tl.constexpr):
    """norm_rotate_rows' gradient: rotated back, then through the norm; the gradient of qkv's rows, in fp32."""
    y1, y2, scale = normed_halves(qkv_ptr, src, mask, eps, HALF)
    g1, g2 = load_halves(grad_ptr, grad_at, mask, HALF)
    return norm_backward(y1, y2, scale, g1 * cos - g2 * sin, g1 * sin + g2 * cos, HALF)


@triton.jit
def row_offsets(token, head, heads, HALF: tl.constexpr):
    """(token, head) rows: q's offsets in qkv (tokens x 3 heads x head_dim; k's are heads rows later, v's twice that),
    the offsets in a tokens x heads x head_dim tensor, and in the tokens x head_dim / 2 tables."""
    c = tl.arange(0, HALF)[None, :]
    row = token.to(tl.int64) * heads + head
    src = (row + token.to(tl.int64) * 2 * heads)[:, None] * (2 * HALF) + c
    return src, row[:, None] * (2 * HALF) + c, token.to(tl.int64)[:, None] * HALF + c


@triton.jit
def row_addresses(rows, heads, BLOCK_ROWS: tl.constexpr, HALF: tl.constexpr):
    """A block of BLOCK_ROWS (token, head) rows in order: row_offsets and the mask."""
    r = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    src, dst, table = row_offsets(r // heads, r % heads, heads, HALF)
    return src, dst, table, (r < rows)[:, None]


# lambdas: a block's two scalars, at an offset into their parameter that differs by block: not specialised on their
# alignment, so that each kernel has one build per value-embedding variant instead of two
@triton.jit(do_not_specialize_on_alignment=["lambdas_ptr"])
def attention_inputs_kernel(qkv_ptr, cos_ptr, sin_ptr, lambdas_ptr, ve_ptr, q_ptr, k_ptr, v_ptr, rows, heads, eps,
                            HALF: tl.constexpr, BLOCK_ROWS: tl.constexpr, HAS_VE: tl.constexpr):
    src, dst, table, mask = row_addresses(rows, heads, BLOCK_ROWS, HALF)
    cos, sin = tl.load(cos_ptr + table, mask=mask, other=0.0), tl.load(sin_ptr + table, mask=mask, other=0.0)
    norm_rotate_rows(qkv_ptr, q_ptr, src, dst, mask, cos, sin, eps, HALF)
    norm_rotate_rows(qkv_ptr, k_ptr, src + heads * 2 * HALF, dst, mask, cos, sin, eps, HALF)
    v1, v2 = load_halves(qkv_ptr, src + heads * 4 * HALF, mask, HALF)
    v1, v2 = v1 * tl.load(lambdas_ptr), v2 * tl.load(lambdas_ptr)
    if HAS_VE:
        e1, e2 = load_halves(ve_ptr, dst, mask, HALF)
        v1, v2 = v1 + e1 * tl.load(lambdas_ptr + 1), v2 + e2 * tl.load(lambdas_ptr + 1)
    store_halves(v_ptr, dst, mask, v1, v2, HALF)


@triton.jit
def rounded_halves(ptr, first, second):
    """Two halves rounded to ptr's dtype (the values a store there keeps), in fp32."""
    return first.to(ptr.dtype.element_ty).to(tl.float32), second.to(ptr.dtype.element_ty).to(tl.float32)


@triton.jit
def halves_amax(first, second):
    return tl.max(tl.maximum(tl.abs(first), tl.abs(second)), 1)


@triton.jit
def store_float8_halves(ptr, at, mask, first, second, inverse_scale, HALF: tl.constexpr):
    """first and second times inverse_scale in e4m3 (ptr's format), saturated at its largest value (as to_float8,
    which divides by the scale: a product takes an FMA unit, a division the special-function unit)."""
    limit: tl.constexpr = 448.0
    store_halves(ptr, at, mask, tl.clamp(first * inverse_scale, -limit, limit),
                 tl.clamp(second * inverse_scale, -limit, limit), HALF)


@triton.jit
def store_tokens_rowwise_float8(grad_qkv_ptr, grad_f8_ptr, grad_scale_ptr, src, mask, tokens, heads, q1, q2, k1, k2,
                                gv1, gv2, HALF: tl.constexpr, BLOCK_TOKENS: tl.constexpr, HEADS_BLOCK: tl.constexpr):
    """A block of whole tokens' qkv gradient (q, k and v halves of BLOCK_TOKENS x HEADS_BLOCK rows) in e4m3 with one
    scale per token, from the values its bf16 store kept, as rowwise_float8 casts that gradient; and the scales."""
    q1, q2 = rounded_halves(grad_qkv_ptr, q1, q2)
    k1, k2 = rounded_halves(grad_qkv_ptr, k1, k2)
    gv1, gv2 = rounded_halves(grad_qkv_ptr, gv1, gv2)
    row_amax = tl.maximum(tl.maximum(halves_amax(q1, q2), halves_amax(k1, k2)), halves_amax(gv1, gv2))
    token_scale = tl.maximum(tl.max(tl.reshape(row_amax, (BLOCK_TOKENS, HEADS_BLOCK)), 1), 1e-30) / 448.0
    tokens_here = tl.program_id(0) * BLOCK_TOKENS + tl.arange(0, BLOCK_TOKENS)
    tl.store(grad_scale_ptr + tokens_here, token_scale, mask=tokens_here < tokens)
    inverse = tl.reshape(tl.broadcast_to(1.0 / token_scale[:, None], (BLOCK_TOKENS, HEADS_BLOCK)),
                         (BLOCK_TOKENS * HEADS_BLOCK,))[:, None]
    store_float8_halves(grad_f8_ptr, src, mask, q1, q2, inverse, HALF)
    store_float8_halves(grad_f8_ptr, src + heads * 2 * HALF, mask, k1, k2, inverse, HALF)
    store_float8_halves(grad_f8_ptr, src + heads * 4 * HALF, mask, gv1, gv2, inverse, HALF)


@triton.jit(do_not_specialize_on_alignment=["lambdas_ptr"])
def attention_inputs_backward_kernel(qkv_ptr, cos_ptr, sin_ptr, lambdas_ptr, ve_ptr, grad_q_ptr, grad_k_ptr,
                                     grad_v_ptr, grad_qkv_ptr, grad_ve_ptr, lambda_sums_ptr, grad_f8_ptr,
                                     grad_scale_ptr, tokens, heads, eps, grad_token_stride, grad_head_stride,
                                     HALF: tl.constexpr, BLOCK_ROWS: tl.constexpr, HEADS_BLOCK: tl.constexpr,
                                     HAS_VE: tl.constexpr, ROWWISE_FP8: tl.constexpr):
    """The gradients of qkv (all of it) and of the value embedding, and this block's sums for the two lambdas'. With
    ROWWISE_FP8 qkv's gradient in e4m3 with one scale per token instead of bf16 (as rowwise_float8 makes it from the
    bf16 gradient; grad_qkv_ptr then only names the bf16 dtype it rounds to) for the QKV projection's FP8 GEMMs: then
    a program takes whole tokens (BLOCK_ROWS / HEADS_BLOCK of them, heads padded to a power of two); without,
    BLOCK_ROWS (token, head) rows in order (no padded rows: 26 us less a call at 6 heads). The incoming gradients may
    have any token and head strides (FlexAttention's backward picks their layout)."""
    if ROWWISE_FP8:
        r = tl.arange(0, BLOCK_ROWS)
        token, head = tl.program_id(0) * (BLOCK_ROWS // HEADS_BLOCK) + r // HEADS_BLOCK, r % HEADS_BLOCK
    else:
        r = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
        token, head = r // heads, r % heads
    src, dst, table = row_offsets(token, head, heads, HALF)
    mask = ((token < tokens) & (head < heads))[:, None]
    at = token.to(tl.int64) * grad_token_stride + head.to(tl.int64) * grad_head_stride
    grad_at = at[:, None] + tl.arange(0, HALF)[None, :]
    cos, sin = tl.load(cos_ptr + table, mask=mask, other=0.0), tl.load(sin_ptr + table, mask=mask, other=0.0)
    q1, q2 = norm_rotate_rows_backward(qkv_ptr, grad_q_ptr, src, grad_at, mask, cos, sin, eps, HALF)
    k1, k2 = norm_rotate_rows_backward(qkv_ptr, grad_k_ptr, src + heads * 2 * HALF, grad_at, mask, cos, sin, eps, HALF)
    g1, g2 = load_halves(grad_v_ptr, grad_at, mask, HALF)
    v1, v2 = load_halves(qkv_ptr, src + heads * 4 * HALF, mask, HALF)
    gv1, gv2 = g1 * tl.load(lambdas_ptr), g2 * tl.load(lambdas_ptr)
    tl.store(lambda_sums_ptr + 2 * tl.program_id(0), tl.sum(tl.sum(g1 * v1 + g2 * v2, 1), 0))
    if HAS_VE:
        e1, e2 = load_halves(ve_ptr, dst, mask, HALF)
        store_halves(grad_ve_ptr, dst, mask, g1 * tl.load(lambdas_ptr + 1), g2 * tl.load(lambdas_ptr + 1), HALF)
        tl.store(lambda_sums_ptr + 2 * tl.program_id(0) + 1, tl.sum(tl.sum(g1 * e1 + g2 * e2, 1), 0))
    else:
        tl.store(lambda_sums_ptr + 2 * tl.program_id(0) + 1, 0.0)
    if ROWWISE_FP8:
        store_tokens_rowwise_float8(grad_qkv_ptr, grad_f8_ptr, grad_scale_ptr, src, mask, tokens, heads, q1, q2, k1, k2,
                                    gv1, gv2, HALF, BLOCK_ROWS // HEADS_BLOCK, HEADS_BLOCK)
    else:
        store_halves(grad_qkv_ptr, src, mask, q1, q2, HALF)
        store_halves(grad_qkv_ptr, src + heads * 2 * HALF, mask, k1, k2, HALF)
        store_halves(grad_qkv_ptr, src + heads * 4 * HALF, mask, gv1, gv2, HALF)


ATTENTION_INPUTS_LAUNCH = (16, 4)  # BLOCK_ROWS, num_warps: as fast as any of five (perf/gpu_checks.py, session 46)


@triton.jit(do_not_specialize=["rows"])  # one build for every count of programs that left sums
def column_sums_kernel(parts_ptr, sums_ptr, rows, cols, BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr):
    """sums = parts.sum(0) in sums' dtype, for parts rows x cols (fp32, contiguous), in one program."""
    c = tl.arange(0, BLOCK_COLS)
    total = tl.zeros((BLOCK_ROWS, BLOCK_COLS), dtype=tl.float32)
    for start in range(0, rows, BLOCK_ROWS):
        r = start + tl.arange(0, BLOCK_ROWS)
        total += tl.load(parts_ptr + r[:, None] * cols + c[None, :], mask=(r < rows)[:, None] & (c < cols)[None, :],
                         other=0.0)
    tl.store(sums_ptr + c, tl.sum(total, axis=0).to(sums_ptr.dtype.element_ty), mask=c < cols)


COLUMN_SUMS_LAUNCH = (16384, 16)  # entries a loop iteration, num_warps: 8.4 us for the lambdas' sums, 11.9 at (8192,
# 8) (H100, perf/gpu_checks.py, session 70)


def column_sums(parts: Tensor, dtype: torch.dtype, launch: tuple = COLUMN_SUMS_LAUNCH) -> Tensor:
    """parts.sum(0) in dtype, for the fp32 partial sums (rows x cols) that a kernel's programs left, by one program:
    ATen's sum along the rows took 15 us a call for the lambdas' 24,576 x 2 (H100, perf/NOTES.md session 70)."""
    rows, cols = parts.shape
    (entries, num_warps), block_cols = launch, triton.next_power_of_2(cols)
    sums = parts.new_empty(cols, dtype=dtype)
    column_sums_kernel[(1,)](parts, sums, rows, cols, BLOCK_ROWS=max(1, entries // block_cols), BLOCK_COLS=block_cols,
                             num_warps=num_warps)
    return sums


def attention_inputs_torch(qkv: Tensor, cos: Tensor, sin: Tensor, lambdas: Tensor,
                           ve: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    """The op in torch ops (the CPU's path, and the kernels' reference): qkv is batch x tokens x 3 heads x head_dim,
    cos and sin tokens x head_dim / 2, ve batch x tokens x heads x head_dim."""
    q, k, v = qkv.chunk(3, dim=-2)
    q, k = (rotated(rms_norm(x), cos, sin) for x in (q, k))
    v = lambdas[0] * v if ve is None else lambdas[0] * v + lambdas[1] * ve
    return q, k, v


def rotated(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    x1, x2 = x.float().chunk(2, dim=-1)
    return torch.cat((x1 * cos + x2 * sin, x2 * cos - x1 * sin), dim=-1).type_as(x)


def attention_inputs_triton(qkv: Tensor, cos: Tensor, sin: Tensor, lambdas: Tensor, ve: Tensor | None,
                            launch: tuple = ATTENTION_INPUTS_LAUNCH) -> tuple[Tensor, Tensor, Tensor]:
    qkv, ve = qkv.contiguous(), ve.contiguous() if ve is not None else None
    batch, tokens, heads3, head_dim = qkv.shape
    q, k, v = (qkv.new_empty(batch, tokens, heads3 // 3, head_dim) for _ in range(3))
    rows, (block_rows, num_warps) = batch * tokens * heads3 // 3, launch
    attention_inputs_kernel[(triton.cdiv(rows, block_rows),)](
        qkv, cos, sin, lambdas, ve if ve is not None else v, q, k, v, rows, heads3 // 3, RMS_EPS,
        HALF=head_dim // 2, BLOCK_ROWS=block_rows, HAS_VE=ve is not None, num_warps=num_warps)
    return q, k, v


def attention_inputs_backward_triton(grads: tuple[Tensor, Tensor, Tensor], qkv: Tensor, cos: Tensor, sin: Tensor,
                                     lambdas: Tensor, ve: Tensor | None, launch: tuple = ATTENTION_INPUTS_LAUNCH,
                                     rowwise_fp8: bool = False):
    """The gradients of qkv, of the two lambdas and of the value embedding (None without one), then None. With
    rowwise_fp8 qkv's gradient is None (its bf16 values are not stored) and the last place holds it as rowwise_float8
    makes it (tokens x 3 heads head_dim, e4m3; the scales tokens x 1)."""
    grad_q, grad_k, grad_v = (g.reshape(-1, *g.shape[-2:]) for g in grads)  # tokens x heads x head_dim views
    if len({g.stride() for g in (grad_q, grad_k, grad_v)}) > 1 or grad_q.stride(-1) != 1:
        grad_q, grad_k, grad_v = (g.contiguous() for g in (grad_q, grad_k, grad_v))
    qkv, ve = qkv.contiguous(), ve.contiguous() if ve is not None else None
    heads, head_dim = qkv.size(-2) // 3, qkv.size(-1)
    tokens, (block_rows, num_warps) = qkv.numel() // (3 * heads * head_dim), launch
    heads_block = triton.next_power_of_2(heads)
    if rowwise_fp8:  # whole tokens a program (both sizes are powers of two)
        block_rows = max(block_rows, heads_block)
        blocks = triton.cdiv(tokens, block_rows // heads_block)
    else:
        blocks = triton.cdiv(tokens * heads, block_rows)
    grad_qkv = None if rowwise_fp8 else torch.empty_like(qkv)
    lambda_sums = qkv.new_empty(blocks, 2, dtype=torch.float32)
    grad_ve = torch.empty_like(ve) if ve is not None else None
    grad_f8 = qkv.new_empty(tokens, 3 * heads * head_dim, dtype=torch.float8_e4m3fn) if rowwise_fp8 else None
    grad_scale = qkv.new_empty(tokens, 1, dtype=torch.float32) if rowwise_fp8 else None
    attention_inputs_backward_kernel[(blocks,)](
        qkv, cos, sin, lambdas, ve if ve is not None else qkv, grad_q, grad_k, grad_v,
        qkv if grad_qkv is None else grad_qkv, grad_ve if ve is not None else qkv, lambda_sums,
        grad_f8 if rowwise_fp8 else qkv,
        grad_scale if rowwise_fp8 else lambda_sums, tokens, heads, RMS_EPS, grad_q.stride(0), grad_q.stride(1),
        HALF=head_dim // 2, BLOCK_ROWS=block_rows, HEADS_BLOCK=heads_block, HAS_VE=ve is not None,
        ROWWISE_FP8=rowwise_fp8, num_warps=num_warps)
    rowwise = (grad_f8, grad_scale) if rowwise_fp8 else None
    return grad_qkv, column_sums(lambda_sums, lambdas.dtype), grad_ve, rowwise


def norm_grad(x: Tensor, grad: Tensor) -> Tensor:
    """The gradient of x (fp32) for rms_norm(x), given the output's."""
    scale = torch.rsqrt(x.square().mean(-1, keepdim=True) + RMS_EPS)
    y = x * scale
    return scale * (grad - y * (grad * y).mean(-1, keepdim=True))


def norm_rotary_grad(x: Tensor, grad: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """The gradient of x (fp32) for rotated(rms_norm(x)), given the output's."""
    g1, g2 = grad.chunk(2, dim=-1)
    return norm_grad(x, torch.cat((g1 * cos - g2 * sin, g1 * sin + g2 * cos), dim=-1))


def attention_inputs_backward_torch(grads: tuple[Tensor, Tensor, Tensor], qkv: Tensor, cos: Tensor, sin: Tensor,
                                    lambdas: Tensor, ve: Tensor | None, rowwise_fp8: bool = False):
    """attention_inputs_backward_triton's formulas in torch ops, in fp32 (a custom op's own code runs without
    autograd, so this path, taken on the CPU and for head sizes the kernel does not fit, cannot ask autograd for
    them)."""
    grad_q, grad_k, grad_v = (g.float() for g in grads)
    q, k, v = qkv.float().chunk(3, dim=-2)
    cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    grad_qkv = torch.cat((norm_rotary_grad(q, grad_q, cos, sin), norm_rotary_grad(k, grad_k, cos, sin),
                          lambdas[0] * grad_v), dim=-2)
    ve_sum = (grad_v * ve.float()).sum() if ve is not None else grad_v.new_zeros(())
    grad_lambdas = torch.stack([(grad_v * v).sum(), ve_sum]).to(lambdas.dtype)
    grad_ve = (lambdas[1] * grad_v).to(ve.dtype) if ve is not None else None
    grad_qkv = grad_qkv.to(qkv.dtype)
    if rowwise_fp8:
        return None, grad_lambdas, grad_ve, rowwise_float8(grad_qkv.flatten(-2).flatten(0, -2))
    return grad_qkv, grad_lambdas, grad_ve, None


def attention_kernel_fits(head_dim: int) -> bool:
    """The kernels take heads whose head_dim / 2 is a power of two (a Triton block's width)."""
    half = head_dim // 2
    return half & (half - 1) == 0


def takes_attention_kernel(qkv: Tensor) -> bool:
    """On the GPU, for one sequence (the model's batch of 1): the kernels take a row's rotary angles at its token's
    index among all batch x tokens rows, past the tables for a second sequence's rows."""
    return qkv.is_cuda and qkv.size(0) == 1 and attention_kernel_fits(qkv.size(-1))


@torch.library.custom_op("nanogpt::attention_inputs", mutates_args=())
def attention_inputs(qkv: Tensor, cos: Tensor, sin: Tensor, lambdas: Tensor,
                     ve: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    """q and k RMS-normed and rotated, v * lambdas[0] (+ ve * lambdas[1]): the kernel on the GPU, torch elsewhere
    (and where head_dim / 2 is not a power of two, or for a batch of several sequences)."""
    if not takes_attention_kernel(qkv):
        return tuple(t.contiguous() for t in attention_inputs_torch(qkv, cos, sin, lambdas, ve))
    return attention_inputs_triton(qkv, cos, sin, lambdas, ve)


@attention_inputs.register_fake
def _(qkv, cos, sin, lambdas, ve):
    batch, tokens, heads3, head_dim = qkv.shape
    return tuple(qkv.new_empty(batch, tokens, heads3 // 3, head_dim) for _ in range(3))


@torch.library.custom_op("nanogpt::attention_inputs_backward", mutates_args=())
def attention_inputs_backward(grad_q: Tensor, grad_k: Tensor, grad_v: Tensor, qkv: Tensor, cos: Tensor, sin: Tensor,
                              lambdas: Tensor, ve: Tensor | None,
                              rowwise_fp8: bool = False) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """The gradients of qkv, lambdas and ve (empty without one), and with rowwise_fp8 qkv's gradient in rowwise e4m3
    and its scales instead of bf16 (empty in the places not taken): the kernel on the GPU, torch elsewhere."""
    backward = attention_inputs_backward_triton if takes_attention_kernel(qkv) else attention_inputs_backward_torch
    grad_qkv, grad_lambdas, grad_ve, rowwise = backward((grad_q, grad_k, grad_v), qkv, cos, sin, lambdas, ve,
                                                        rowwise_fp8=rowwise_fp8)
    grad_f8, grad_scale = rowwise if rowwise is not None else (qkv.new_empty(0), qkv.new_empty(0))
    return (grad_qkv if grad_qkv is not None else qkv.new_empty(0), grad_lambdas,
            grad_ve if grad_ve is not None else qkv.new_empty(0), grad_f8, grad_scale)


@attention_inputs_backward.register_fake
def _(grad_q, grad_k, grad_v, qkv, cos, sin, lambdas, ve, rowwise_fp8=False):
    grad_ve = torch.empty_like(ve) if ve is not None else qkv.new_empty(0)
    width = qkv.size(-2) * qkv.size(-1)
    tokens = qkv.numel() // width
    grad_f8 = qkv.new_empty(tokens, width, dtype=torch.float8_e4m3fn) if rowwise_fp8 else qkv.new_empty(0)
    grad_scale = qkv.new_empty(tokens, 1, dtype=torch.float32) if rowwise_fp8 else qkv.new_empty(0)
    grad_qkv = qkv.new_empty(0) if rowwise_fp8 else torch.empty_like(qkv)
    return grad_qkv, torch.empty_like(lambdas), grad_ve, grad_f8, grad_scale


def _attention_inputs_setup_context(ctx, inputs, output):
    qkv, cos, sin, lambdas, ve = inputs
    ctx.save_for_backward(qkv, cos, sin, lambdas, ve)


def _attention_inputs_grad(ctx, grad_q, grad_k, grad_v):
    qkv, cos, sin, lambdas, ve = ctx.saved_tensors
    grad_qkv, grad_lambdas, grad_ve, _, _ = attention_inputs_backward(grad_q, grad_k, grad_v, qkv, cos, sin, lambdas,
                                                                       ve)
    return grad_qkv, None, None, grad_lambdas, grad_ve if ve is not None else None


attention_inputs.register_autograd(_attention_inputs_grad, setup_context=_attention_inputs_setup_context)


@triton.jit
def row_scaled_transposed_kernel(src_ptr, scales_ptr, other_scales_ptr, total_ptr, out_t_ptr, rows, cols, limit,
                                 BLOCK: tl.constexpr):
    """out_t (cols x rows) = (src * multipliers[row]).T in out_t's dtype, saturating at +-limit, a square block per
    program (the layout swapped through shared memory, as transpose_kernel's), with multipliers = scales *
    other_scales / total (rounded as torch's division)."""
    first_row, first_col = tl.program_id(0) * BLOCK, tl.program_id(1) * BLOCK
    local = tl.arange(0, BLOCK)
    row_in = first_row + local < rows
    mask = row_in[:, None] & (first_col + local < cols)[None, :]
    products = (tl.load(scales_ptr + first_row + local, mask=row_in, other=0.0)
                * tl.load(other_scales_ptr + first_row + local, mask=row_in, other=0.0))
    multipliers = tl.math.div_rn(products, tl.load(total_ptr))
    block = tl.load(src_ptr + first_row.to(tl.int64) * cols + first_col + local[:, None] * cols + local[None, :],
                    mask=mask, other=0.0).to(tl.float32) * multipliers[:, None]
    block = tl.clamp(block, -limit, limit, propagate_nan=tl.PropagateNan.ALL).to(out_t_ptr.dtype.element_ty)
    tl.store(out_t_ptr + first_col.to(tl.int64) * rows + first_row + local[:, None] * rows + local[None, :],
             tl.trans(block), mask=tl.trans(mask))


ROW_SCALED_TRANSPOSED_LAUNCH = (128, 4)  # BLOCK, num_warps: 32.5 us for x's e4m3 copy at 49,152 tokens, 37.5 at (64,
# 4) (H100, perf/gpu_checks.py, session 65)


def row_scaled_transposed(t: Tensor, scales: Tensor, other_scales: Tensor, total: Tensor,
                          dtype: torch.dtype = torch.float8_e4m3fn, launch: tuple = ROW_SCALED_TRANSPOSED_LAUNCH
                          ) -> Tensor:
    """(t * (scales * other_scales / total)).T in dtype (e4m3 in training, saturating; any float dtype for tests
    under Triton's interpreter, whose float8 casts misround) for a 2-D t (e4m3 in training, any float dtype), two
    scales per row (rows x 1 each, fp32) and a 0-d fp32 total."""
    rows, cols = t.shape
    out_t, (block, num_warps) = t.new_empty(cols, rows, dtype=dtype), launch
    row_scaled_transposed_kernel[(triton.cdiv(rows, block), triton.cdiv(cols, block))](
        t, scales, other_scales, total, out_t, rows, cols, torch.finfo(torch.float8_e4m3fn).max, BLOCK=block,
        num_warps=num_warps)
    return out_t


@triton.jit
def nan_keeping_max(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def largest_product_kernel(a_ptr, b_ptr, out_ptr, rows, floor, BLOCK: tl.constexpr):
    """out = max(floor, the largest a * b) over rows of non-negative fp32 a and b, in one program; NaN kept."""
    largest = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, rows, BLOCK):
        r = start + tl.arange(0, BLOCK)
        products = tl.load(a_ptr + r, mask=r < rows, other=0.0) * tl.load(b_ptr + r, mask=r < rows, other=0.0)
        largest = nan_keeping_max(largest, products)
    tl.store(out_ptr, nan_keeping_max(tl.reduce(largest, 0, nan_keeping_max), floor))


LARGEST_PRODUCT_LAUNCH = (16384, 16)  # BLOCK, num_warps: 9.8 us at 49,152 tokens, 12.8 at (8192, 8) (H100,
# perf/gpu_checks.py, session 70)


def largest_product(a: Tensor, b: Tensor, floor: float, launch: tuple = LARGEST_PRODUCT_LAUNCH) -> Tensor:
    """(a * b).amax().clamp_min(floor) as a 0-d fp32 tensor, for a and b of non-negative fp32 values (rows x 1), by
    one program."""
    out, (block, num_warps) = a.new_empty((), dtype=torch.float32), launch
    largest_product_kernel[(1,)](a, b, out, a.numel(), floor, BLOCK=block, num_warps=num_warps)
    return out


WEIGHT_GRAD_X_SCALE_FLOOR = 1e-30


def weight_grad_x_scales(grad_scale: Tensor, x_scale: Tensor) -> tuple[Tensor, Tensor]:
    """For fp8_qkv_weight_grad in torch ops: x's one e4m3 scale once each token's gradient scale s_t is on its row (the
    largest s_t * xs_t, xs_t = max|x_t| / 448 its rowwise scale), and the multiplier that takes each row of x's
    rowwise e4m3 copy (x_t / xs_t) there: s_t * xs_t / that scale. On the GPU largest_product and
    row_scaled_transposed compute the same in two kernels, where these ops took five launches (~12 us a call on an
    H100, perf/NOTES.md session 70)."""
    row_scales = grad_scale * x_scale
    x_total_scale = row_scales.amax().clamp_min(WEIGHT_GRAD_X_SCALE_FLOOR)
    return x_total_scale, row_scales / x_total_scale


@torch.library.custom_op("nanogpt::fp8_qkv_weight_grad", mutates_args=())
def fp8_qkv_weight_grad(grad_f8: Tensor, grad_scale: Tensor, x_f8: Tensor, x_scale: Tensor) -> Tensor:
    """The QKV weight's gradient, sum over tokens t of grad_t^T x_t in fp32, on the FP8 tensor cores (precise
    accumulation: the sum runs over the tokens). grad_f8 (tokens x width) and grad_scale (tokens x 1) are the
    gradient, x_f8 (tokens x dim) and x_scale the projection's input, each as rowwise_float8 makes it (e4m3, scales
    max |row| / 448): x's copy is the forward's, kept for the backward in place of the bf16 x (half its bytes to
    keep and to read here). A sum over the tokens cannot take a scale per token, so each token's gradient scale
    moves onto x's row: grad_t^T x_t = (grad_t / s_t)^T (s_t x_t); x then goes to e4m3 again with one scale, the
    largest s_t * xs_t, so that its largest row reaches 448 (a second rounding of x, within two of e4m3's steps).
    Both operands token-major, as the FP8 tensor cores take them: the gradient's bytes by transpose_kernel, x's
    scaled copy by row_scaled_transposed_kernel on the GPU (inductor stored such copies a byte at a time); torch's
    copies elsewhere."""
    if grad_f8.is_cuda:
        x_total_scale = largest_product(grad_scale, x_scale, WEIGHT_GRAD_X_SCALE_FLOOR)
        grad_t, x_t = transposed(grad_f8), row_scaled_transposed(x_f8, grad_scale, x_scale, x_total_scale)
    else:
        x_total_scale, multipliers = weight_grad_x_scales(grad_scale, x_scale)
        grad_t = grad_f8.T.contiguous()
        x_t = to_float8(x_f8.float() * multipliers, 1.0, torch.float8_e4m3fn).T.contiguous()
    return scaled_mm(grad_t, x_t.T, 1.0, x_total_scale, torch.float32, fast_accum=False)


@fp8_qkv_weight_grad.register_fake
def _(grad_f8, grad_scale, x_f8, x_scale):
    return grad_f8.new_empty(grad_f8.size(1), x_f8.size(1), dtype=torch.float32)


@torch.no_grad()
def qkv_weight_casts(w: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The QKV weight (3 heads head_dim x dim) as FP8AttentionInputs' products take it: rowwise e4m3 and its scales
    for the forward, and the same of its transpose for x's gradient. Made once a step in training
    (GPT.weight_casts), as the MLP's."""
    return (*rowwise_float8(w), *rowwise_float8(w.T.contiguous()))


class FP8AttentionInputs(torch.autograd.Function):
    """attention_inputs(x @ w.T) (x: batch x tokens x dim, w: 3 heads head_dim x dim) with the QKV projection on the
    FP8 tensor cores in e4m3 with a scale per row (rowwise scaling, torchao's float8 recipes 2024: each scale from its
    own row, which the kernel that makes the row can take): the forward from x and w (the norm before it computes x's
    scales); grad_x and the weight's gradient (fp8_qkv_weight_grad) from qkv's gradient, which
    attention_inputs_backward's kernel writes in e4m3 with a scale per token (--fp8_qkv). The backward keeps x's e4m3
    copy and scales, not x. The weight comes cast (qkv_weight_casts of w as it is); w is here for its gradient."""

    @staticmethod
    def forward(ctx, x: Tensor, w: Tensor, cos: Tensor, sin: Tensor, lambdas: Tensor, ve: Tensor | None,
                head_dim: int, w_f8: Tensor, w_scale: Tensor, w_t_f8: Tensor, w_t_scale: Tensor
                ) -> tuple[Tensor, Tensor, Tensor]:
        x_f8, x_scale = rowwise_float8(x.flatten(0, 1))
        qkv = rowwise_scaled_mm(x_f8, x_scale, w_f8, w_scale).view(*x.shape[:2], -1, head_dim)
        ctx.save_for_backward(x_f8, x_scale, w_t_f8, w_t_scale, qkv, cos, sin, lambdas, ve)
        ctx.x_shape, ctx.w_dtype = x.shape, w.dtype
        return attention_inputs(qkv, cos, sin, lambdas, ve)

    @staticmethod
    def backward(ctx, grad_q: Tensor, grad_k: Tensor, grad_v: Tensor):
        x_f8, x_scale, w_t_f8, w_t_scale, qkv, cos, sin, lambdas, ve = ctx.saved_tensors
        _, grad_lambdas, grad_ve, grad_f8, grad_scale = attention_inputs_backward(
            grad_q, grad_k, grad_v, qkv, cos, sin, lambdas, ve, rowwise_fp8=True)
        grad_x = rowwise_scaled_mm(grad_f8, grad_scale, w_t_f8, w_t_scale).view(ctx.x_shape)
        grad_w = fp8_qkv_weight_grad(grad_f8, grad_scale, x_f8, x_scale).to(ctx.w_dtype)
        return (grad_x, grad_w, None, None, grad_lambdas, grad_ve if ve is not None else None, None, None, None, None,
                None)


def fp8_attention_inputs(x: Tensor, w: Tensor, cos: Tensor, sin: Tensor, lambdas: Tensor, ve: Tensor | None,
                         head_dim: int, w_f8: Tensor, w_scale: Tensor, w_t_f8: Tensor,
                         w_t_scale: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    return FP8AttentionInputs.apply(x, w, cos, sin, lambdas, ve, head_dim, w_f8, w_scale, w_t_f8, w_t_scale)


# ----------------------------------------------------------------------------------------------
# Attention output gate's logits: each head's from a token's first dims (a dozen), one Triton kernel each way; cuBLAS
# gave this tiny product three cutlass GEMMs and two split-K reductions, ~32 us a layer a micro-step on an H100


@triton.jit
def gate_logits_kernel(x_ptr, w_ptr, logits_ptr, tokens, DIMS: tl.constexpr, HEADS: tl.constexpr,
                       BLOCK_TOKENS: tl.constexpr, BLOCK_DIMS: tl.constexpr, BLOCK_HEADS: tl.constexpr):
    """logits = x @ w.T for a block of tokens (x: tokens x DIMS, w: HEADS x DIMS), in fp32, stored in logits' dtype."""
    t = tl.program_id(0) * BLOCK_TOKENS + tl.arange(0, BLOCK_TOKENS)
    d, h = tl.arange(0, BLOCK_DIMS), tl.arange(0, BLOCK_HEADS)
    x = tl.load(x_ptr + t[:, None] * DIMS + d[None, :], mask=(t < tokens)[:, None] & (d < DIMS)[None, :], other=0.0)
    w = tl.load(w_ptr + h[:, None] * DIMS + d[None, :], mask=(h < HEADS)[:, None] & (d < DIMS)[None, :], other=0.0)
    logits = tl.sum(x.to(tl.float32)[:, None, :] * w.to(tl.float32)[None, :, :], axis=2)
    tl.store(logits_ptr + t[:, None] * HEADS + h[None, :], logits.to(logits_ptr.dtype.element_ty),
             mask=(t < tokens)[:, None] & (h < HEADS)[None, :])


@triton.jit
def gate_logits_backward_kernel(grad_ptr, x_ptr, w_ptr, grad_x_ptr, grad_w_parts_ptr, tokens, DIMS: tl.constexpr,
                                HEADS: tl.constexpr, BLOCK_TOKENS: tl.constexpr, BLOCK_DIMS: tl.constexpr,
                                BLOCK_HEADS: tl.constexpr):
    """For a block of tokens: grad_x = grad @ w in grad_x's dtype, and the block's part of grad_w = grad.T @ x (fp32,
    HEADS x DIMS a program, summed by column_sums)."""
    t = tl.program_id(0) * BLOCK_TOKENS + tl.arange(0, BLOCK_TOKENS)
    d, h = tl.arange(0, BLOCK_DIMS), tl.arange(0, BLOCK_HEADS)
    token_dims = (t < tokens)[:, None] & (d < DIMS)[None, :]
    head_dims = (h < HEADS)[:, None] & (d < DIMS)[None, :]
    grad = tl.load(grad_ptr + t[:, None] * HEADS + h[None, :], mask=(t < tokens)[:, None] & (h < HEADS)[None, :],
                   other=0.0).to(tl.float32)
    w = tl.load(w_ptr + h[:, None] * DIMS + d[None, :], mask=head_dims, other=0.0).to(tl.float32)
    x = tl.load(x_ptr + t[:, None] * DIMS + d[None, :], mask=token_dims, other=0.0).to(tl.float32)
    grad_x = tl.sum(grad[:, :, None] * w[None, :, :], axis=1)
    tl.store(grad_x_ptr + t[:, None] * DIMS + d[None, :], grad_x.to(grad_x_ptr.dtype.element_ty), mask=token_dims)
    grad_w_part = tl.sum(grad[:, :, None] * x[:, None, :], axis=0)
    tl.store(grad_w_parts_ptr + tl.program_id(0) * HEADS * DIMS + h[:, None] * DIMS + d[None, :], grad_w_part,
             mask=head_dims)


GATE_LOGITS_LAUNCH = (128, 4)  # BLOCK_TOKENS, num_warps: 6.8 + 4.5 us a call both ways (H100, session 70's census)


def gate_logits_blocks(w: Tensor, launch: tuple) -> dict:
    """The kernels' block sizes (constexprs) and warps for w (heads x dims)."""
    (block_tokens, num_warps), (heads, dims) = launch, w.shape
    return dict(DIMS=dims, HEADS=heads, BLOCK_TOKENS=block_tokens, BLOCK_DIMS=triton.next_power_of_2(dims),
                BLOCK_HEADS=triton.next_power_of_2(heads), num_warps=num_warps)


def gate_logits_triton(x: Tensor, w: Tensor, launch: tuple = GATE_LOGITS_LAUNCH) -> Tensor:
    tokens = x.size(0)
    logits = x.new_empty(tokens, w.size(0))
    gate_logits_kernel[(triton.cdiv(tokens, launch[0]),)](x, w, logits, tokens, **gate_logits_blocks(w, launch))
    return logits


def gate_logits_backward_triton(grad: Tensor, x: Tensor, w: Tensor,
                                launch: tuple = GATE_LOGITS_LAUNCH) -> tuple[Tensor, Tensor]:
    tokens, programs = x.size(0), triton.cdiv(x.size(0), launch[0])
    grad_x, grad_w_parts = torch.empty_like(x), x.new_empty(programs, w.numel(), dtype=torch.float32)
    gate_logits_backward_kernel[(programs,)](grad, x, w, grad_x, grad_w_parts, tokens,
                                             **gate_logits_blocks(w, launch))
    return grad_x, column_sums(grad_w_parts, w.dtype).view_as(w)


@torch.library.custom_op("nanogpt::gate_logits", mutates_args=())
def gate_logits(x: Tensor, w: Tensor) -> Tensor:
    """x @ w.T (x: tokens x dims; w: heads x dims) in x's dtype: the kernel on the GPU, torch elsewhere."""
    return gate_logits_triton(x.contiguous(), w.contiguous()) if x.is_cuda else F.linear(x, w)


@gate_logits.register_fake
def _(x, w):
    return x.new_empty(x.size(0), w.size(0))


@torch.library.custom_op("nanogpt::gate_logits_backward", mutates_args=())
def gate_logits_backward(grad: Tensor, x: Tensor, w: Tensor) -> tuple[Tensor, Tensor]:
    """gate_logits' gradients for x and w, given the logits': the kernel and column_sums on the GPU, torch
    elsewhere."""
    if x.is_cuda:
        return gate_logits_backward_triton(grad.contiguous(), x.contiguous(), w.contiguous())
    return grad @ w, grad.T @ x


@gate_logits_backward.register_fake
def _(grad, x, w):
    return torch.empty_like(x), torch.empty_like(w)


def _gate_logits_setup_context(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _gate_logits_grad(ctx, grad):
    return gate_logits_backward(grad, *ctx.saved_tensors)


gate_logits.register_autograd(_gate_logits_grad, setup_context=_gate_logits_setup_context)


# ----------------------------------------------------------------------------------------------
# Symmetric matmul kernel: out = alpha * X @ X^T + beta * C + diagonal * I, computing only the upper triangle (Muon's
# symmetric products in Triton: the 2025-07 records)


@triton.jit
def sym_matmul_kernel(x_ptr, c_ptr, out_ptr, M, K, alpha, beta, diagonal,
                      stride_xb, stride_xm, stride_xk, stride_ob, stride_om, stride_on,
                      HAS_C: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    num_blocks = tl.cdiv(M, BLOCK_M)
    block_i = tl.program_id(0) // num_blocks
    block_j = tl.program_id(0) % num_blocks
    if block_j < block_i:  # the lower triangle is the mirror of the upper one
        return
    batch = tl.program_id(1)
    rows = block_i * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = block_j * BLOCK_M + tl.arange(0, BLOCK_M)
    x_batch = x_ptr + batch * stride_xb
    acc = tl.zeros((BLOCK_M, BLOCK_M), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(x_batch + rows[:, None] * stride_xm + ks[None, :] * stride_xk,
                    mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = tl.load(x_batch + cols[None, :] * stride_xm + ks[:, None] * stride_xk,
                    mask=(cols[None, :] < M) & (ks[:, None] < K), other=0.0)
        acc = tl.dot(a, b, acc)
    acc = acc * alpha
    offsets = batch * stride_ob + rows[:, None] * stride_om + cols[None, :] * stride_on
    mirrored = batch * stride_ob + cols[None, :] * stride_om + rows[:, None] * stride_on
    mask = (rows[:, None] < M) & (cols[None, :] < M)
    if HAS_C:
        acc += beta * tl.load(c_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    if block_i == block_j:
        acc += tl.where(rows[:, None] == cols[None, :], diagonal, 0.0)
    tl.store(out_ptr + offsets, acc.to(out_ptr.dtype.element_ty), mask=mask)
    if block_i != block_j:
        tl.store(out_ptr + mirrored, acc.to(out_ptr.dtype.element_ty), mask=mask)


def sym_matmul_triton(x: Tensor, c: Tensor | None = None, alpha: float = 1.0, beta: float = 0.0,
                      diagonal: float = 0.0) -> Tensor:
    """Batched alpha * x @ x.mT + beta * c + diagonal * I for x of shape (B, M, K); c (B, M, M) symmetric, same
    strides as out."""
    batch, m, k = x.shape
    out = x.new_empty(batch, m, m)
    block_m, block_k = 128, 64
    grid = (triton.cdiv(m, block_m) ** 2, batch)
    sym_matmul_kernel[grid](x, out if c is None else c, out, m, k, alpha, beta, diagonal,
                            *x.stride(), *out.stride(), HAS_C=c is not None,
                            BLOCK_M=block_m, BLOCK_K=block_k, num_warps=8, num_stages=3)
    return out


@torch.library.custom_op("nanogpt::sym_matmul", mutates_args=())
def sym_matmul(x: Tensor, c: Tensor | None = None, alpha: float = 1.0, beta: float = 0.0,
               diagonal: float = 0.0) -> Tensor:
    """sym_matmul_triton on CUDA tensors, torch's matmuls on others. An op opaque to torch.compile: traced into Muon's
    compiled update, the kernel was launched through inductor's path for user Triton kernels, which types the float
    arguments fp64 (Triton: fp32; pytorch/pytorch#190340), so the epilogue ran in fp64, 1.3-1.8x slower (perf/NOTES.md,
    session 33). The op keeps x's strides, so that newton_schulz_builds can build at start-up what training launches."""
    if x.is_cuda:
        return sym_matmul_triton(x, c, alpha, beta, diagonal)
    product = alpha * (x @ x.mT) if c is None else alpha * (x @ x.mT) + beta * c
    return product + diagonal * torch.eye(x.size(-2), dtype=x.dtype, device=x.device) if diagonal else product


@sym_matmul.register_fake
def _(x, c=None, alpha=1.0, beta=0.0, diagonal=0.0):
    return x.new_empty(x.size(0), x.size(1), x.size(1))


# ----------------------------------------------------------------------------------------------
# Optimizers: Muon for hidden matrices, Adam for the rest; both shard their work across ranks


JORDAN_COEFFICIENTS = ((3.4445, -4.7750, 2.0315),) * 5  # Keller Jordan's Muon (2024): one quintic, 5 times
# Polar Express (Amsel, Persson, Musco, Gower 2025): 5 steps, safety factor 2e-2, cushion 2, as in modded-nanogpt
POLAR_EXPRESS_COEFFICIENTS = ((8.156554524902461, -22.48329292557795, 15.878769915207462),
                              (4.042929935166739, -2.808917465908714, 0.5000178451051316),
                              (3.8916678022926607, -2.772484153217685, 0.5060648178503393),
                              (3.285753657755655, -2.3681294933425376, 0.46449024233003106),
                              (2.3465413258596377, -1.7097828382687081, 0.42323551169305323))
# --ns_coefficients: the per-step (a, b, c) of x -> a x + b x^3 + c x^5, and the factor on the Frobenius norm
NS_COEFFICIENTS = {"jordan": (JORDAN_COEFFICIENTS, 1.0), "polar_express": (POLAR_EXPRESS_COEFFICIENTS, 1.02)}


def orthogonalize(g: Tensor, coefficients: tuple = JORDAN_COEFFICIENTS, norm_scale: float = 1.0) -> Tensor:
    """Approximate U @ V^T of each matrix's SVD by quintic Newton-Schulz iterations in bf16, one per
    (a, b, c) in coefficients, after dividing by the Frobenius norm times norm_scale. g: (B, rows, cols)."""
    x = g.bfloat16()
    tall = x.size(-2) > x.size(-1)
    if tall:
        x = x.mT
    x = x / (x.norm(dim=(-2, -1), keepdim=True) * norm_scale + 1e-7)
    for a, b, c in coefficients:
        xxt = sym_matmul(x)
        # poly = a * I + b * A + c * A @ A: the kernel adds a on the diagonal, so that a * x + (b A + c A A) x is
        # one plain bmm, poly @ x
        # (cuBLAS's baddbmm ran 1.4-1.6x slower than bmm at these shapes: perf/muon_bench.py, session 25)
        poly = sym_matmul(xxt, xxt, alpha=c, beta=b, diagonal=a)
        x = torch.bmm(poly, x)
    return x.mT if tall else x


# torch 2.13 has new names for these collectives (its old names print a FutureWarning in every process); older
# releases have only the old ones
REDUCE_SCATTER = getattr(dist, "reduce_scatter_single", dist.reduce_scatter_tensor)
ALL_GATHER = getattr(dist, "all_gather_single", dist.all_gather_into_tensor)


class Comm:
    """Reduce-scatter / all-gather over the first dimension; with one process there is nothing to do: the full
    tensor is the shard."""

    def __init__(self, rank: int, world_size: int):
        self.rank, self.world_size = rank, world_size

    def reduce_scatter_avg(self, full: Tensor):
        if self.world_size == 1:
            return full, None
        shard = full.new_empty(full.size(0) // self.world_size, *full.shape[1:])
        return shard, REDUCE_SCATTER(shard, full, op=dist.ReduceOp.AVG, async_op=True)

    def all_gather(self, full: Tensor, shard: Tensor):
        if self.world_size == 1:
            return None
        return ALL_GATHER(full, shard, async_op=True)

    def own(self, full: Tensor) -> Tensor:
        size = full.size(0) // self.world_size
        return full[self.rank * size:(self.rank + 1) * size]


def padded_stack(tensors: list[Tensor], world_size: int) -> Tensor:
    """Same-shape tensors stacked and zero-padded to a multiple of world_size, so that each rank owns as many."""
    return torch.stack(tensors + [torch.zeros_like(tensors[0])] * (-len(tensors) % world_size))


def stack_in_place(params: list[Tensor], world_size: int) -> Tensor:
    """One tensor holding a group's same-shape matrices, zero-padded to a multiple of world_size; each parameter
    becomes a view of its row, so that Muon updates and all-gathers the parameters in place, without stacking them
    and copying them back every step."""
    stack = padded_stack([p.detach() for p in params], world_size)
    for p, row in zip(params, stack):
        p.data = row
    return stack


def wait_all(handles):
    for handle in handles:
        if handle is not None:
            handle.wait()


def neuron_mean_square(update: Tensor) -> Tensor:
    """Mean square of an update (..., rows, cols) per index of its longer side, as in modded-nanogpt's NorMuon:
    U V^T of a wide matrix has unit-norm rows, so only its columns can differ (tall: the reverse). Our (dim, hidden)
    MLP weights thus get one value per hidden unit: fc_w's output neurons (x @ W), proj_w's input ones (x @ W^T);
    square matrices get one per row (q, k, v: output neurons; o, used as y @ W: input channels)."""
    return update.square().mean(-1 if update.size(-2) >= update.size(-1) else -2, keepdim=True)


def normuon_scale(update: Tensor, second_moment: Tensor, beta2: float) -> Tensor:
    """NorMuon (Li et al. 2025): update the EMA second_moment of neuron_mean_square(update), divide each neuron by
    its root, then rescale each matrix to the Frobenius norm it had (which also makes bias correction moot)."""
    second_moment.lerp_(neuron_mean_square(update), 1 - beta2)
    scaled = update * second_moment.clamp_min(1e-10).rsqrt()
    ratio = update.norm(dim=(-2, -1), keepdim=True) / scaled.norm(dim=(-2, -1), keepdim=True).clamp_min(1e-10)
    return scaled * ratio


def muon_update(weights: Tensor, momentum_buffer: Tensor, second_moment: Tensor | None, grads: Tensor,
                momentum: Tensor, lr: Tensor, keep: Tensor, coefficients: tuple, norm_scale: float,
                normuon_beta2: float | None):
    """One Muon step of a rank's stacked same-shape matrices (..., rows, cols), in place; compiled, a few kernels
    around the Newton-Schulz products instead of ~20 eager passes over the stack. Nesterov momentum,
    orthogonalisation, NorMuon's scaling when there is a second_moment, then weights = weights * keep - lr * update.
    momentum, lr and keep are 0-d CPU tensors, so that their change every step does not recompile."""
    momentum_buffer.lerp_(grads, 1 - momentum)
    update = orthogonalize(grads.lerp(momentum_buffer, momentum).flatten(0, -3), coefficients, norm_scale)
    update = update.view_as(grads).float()
    if second_moment is not None:
        update = normuon_scale(update, second_moment, normuon_beta2)
    weights.mul_(keep).sub_(lr * update.to(weights.dtype))


class Muon(torch.optim.Optimizer):
    """MomentUm Orthogonalized by Newton-Schulz (Keller Jordan, 2024), sharded by matrix.
    Same-shape parameters form a group, whose matrices become rows of one stack (stack_in_place); each rank updates
    its share of the rows in one call of `update` (muon_update, maybe compiled), then all ranks all-gather the rows.
    ns_coefficients names an entry of NS_COEFFICIENTS; a normuon_beta2 turns on NorMuon's scaling."""

    def __init__(self, params, lr: float, momentum: float, weight_decay: float, comm: Comm,
                 ns_coefficients: str = "jordan", normuon_beta2: float | None = None, update=muon_update):
        by_shape = {}
        for p in params:
            by_shape.setdefault(tuple(p.shape), []).append(p)
        groups = [dict(params=group) for group in by_shape.values()]
        super().__init__(groups, dict(lr=lr, momentum=momentum, weight_decay=weight_decay,
                                      normuon_beta2=normuon_beta2))
        self.comm, self.update = comm, update
        self.coefficients, self.norm_scale = NS_COEFFICIENTS[ns_coefficients]
        self.stacks = [stack_in_place(g["params"], comm.world_size) for g in self.param_groups]

    @torch.no_grad()
    def step(self):
        scattered = [self.comm.reduce_scatter_avg(self._stacked_grads(g["params"])) for g in self.param_groups]
        gathers = []
        for group, stack, (grad_shard, handle) in zip(self.param_groups, self.stacks, scattered):
            wait_all([handle])
            per_rank, params = grad_shard.size(0), group["params"]
            owned = params[self.comm.rank * per_rank:(self.comm.rank + 1) * per_rank]
            own_rows = self.comm.own(stack)  # this rank's rows of the stack, padding included
            if owned:  # a rank can own only padding, e.g. 11 attention layers over 8 ranks
                self._update_owned(group, owned, own_rows[:len(owned)], grad_shard[:len(owned)])
            gathers.append(self.comm.all_gather(stack, own_rows))  # in place: the parameters' rows
        wait_all(gathers)

    def _stacked_grads(self, params: list[Tensor]) -> Tensor:
        return padded_stack([p.grad for p in params], self.comm.world_size)

    def _update_owned(self, group, owned: list[Tensor], weights: Tensor, grads: Tensor):
        """The update call for this rank's matrices of a group, with their stacked state."""
        momentum_buffer = self._stacked_state(owned, "momentum_buffer", lambda: torch.zeros_like(grads))
        second_moment = None
        if group["normuon_beta2"] is not None:
            second_moment = self._stacked_state(owned, "second_moment", lambda: torch.zeros_like(
                neuron_mean_square(grads), dtype=torch.float32))
        rows, cols = grads.shape[-2:]
        # 0-d CPU tensors, not floats, so that the compiled update is not recompiled as they change
        scalars = [torch.tensor(value, dtype=torch.float32) for value in
                   (group["momentum"], group["lr"] * max(1.0, rows / cols) ** 0.5,
                    1 - group["lr"] * group["weight_decay"])]
        self.update(weights, momentum_buffer, second_moment, grads, *scalars, self.coefficients, self.norm_scale,
                    group["normuon_beta2"])

    def _stacked_state(self, owned: list[Tensor], key: str, initial) -> Tensor:
        """This rank's per-matrix state `key` as one stacked tensor, which the update changes in place: each matrix's
        state is a view of it, so the state dict keeps one tensor per matrix. The first step makes it by initial();
        later ones find it as the views' base, with no copy (a state loaded from a dict is stacked once)."""
        views = [self.state[p].get(key) for p in owned]
        base = None if views[0] is None else views[0]._base
        if base is not None and len(base) == len(views) and all(
                view._base is base and view.data_ptr() == row.data_ptr() for view, row in zip(views, base)):
            return base  # the stack of an earlier step, still the state's storage
        stacked = initial() if views[0] is None else torch.stack(views)
        for p, value in zip(owned, stacked):
            self.state[p][key] = value
        return stacked


def adam_update(shard: Tensor, grad: Tensor, exp_avg: Tensor, exp_avg_sq: Tensor, step_size: Tensor,
                bias2: Tensor, beta1: float, beta2: float, eps: float):
    """One Adam step of a shard, compiled into one kernel on the GPU; step_size = lr / (1 - beta1^t) and
    bias2 = 1 - beta2^t are 0-d CPU tensors, so that their change every step does not recompile."""
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.lerp_(grad.square(), 1 - beta2)
    shard.sub_(step_size * exp_avg / ((exp_avg_sq / bias2).sqrt() + eps))


class ShardedAdam(torch.optim.Optimizer):
    """Adam where each rank updates its slice (first dimension) of every parameter."""

    def __init__(self, param_groups, betas, eps: float, comm: Comm, update=adam_update):
        super().__init__(param_groups, dict(betas=betas, eps=eps))
        self.comm, self.update = comm, update

    @torch.no_grad()
    def step(self):
        params = [(group, p) for group in self.param_groups for p in group["params"]]
        scattered = [self.comm.reduce_scatter_avg(p.grad) for _, p in params]
        gathers = []
        for (group, p), (grad, handle) in zip(params, scattered):
            wait_all([handle])
            shard = self.comm.own(p)
            self._update_shard(group, p, shard, grad)
            gathers.append(self.comm.all_gather(p, shard))
        wait_all(gathers)

    def _update_shard(self, group, p: Tensor, shard: Tensor, grad: Tensor):
        state = self.state[p]
        if not state:
            state.update(step=0, exp_avg=torch.zeros_like(shard), exp_avg_sq=torch.zeros_like(shard))
        beta1, beta2 = group["betas"]
        state["step"] += 1
        step_size = torch.tensor(group["lr"] / (1 - beta1 ** state["step"]))
        bias2 = torch.tensor(1 - beta2 ** state["step"])
        self.update(shard, grad, state["exp_avg"], state["exp_avg_sq"], step_size, bias2, beta1, beta2, group["eps"])


# ----------------------------------------------------------------------------------------------
# Model

EOT_TOKEN = 50256
BLOCK_SIZE = 128  # FlexAttention block; windows and sequence lengths are counted in these
MAX_WINDOW = 2**24  # tokens: far past any sequence length, and its block count fits the masks' int32
EVAL_HEAD_TOKENS = 32 * 1024  # validation's logits a chunk at a time: all 262,144 tokens' would be 26 GB of bf16


def block_relations(docs: Tensor, window_blocks: Tensor) -> tuple[Tensor, Tensor]:
    """For each (query block, key block): may ANY query attend to any key, and may ALL of them?
    Rule: same document, causal, and key block within the last `window_blocks` blocks."""
    first, last = docs.view(-1, BLOCK_SIZE)[:, 0], docs.view(-1, BLOCK_SIZE)[:, -1]
    q_block = torch.arange(first.numel(), device=docs.device)[:, None]
    k_block = q_block.T
    in_window = (k_block <= q_block) & (q_block - k_block < window_blocks)
    any_pair = in_window & (last[None, :] >= first[:, None])
    all_pairs = in_window & (k_block < q_block) & (first[None, :] == last[:, None])
    return any_pair, all_pairs


@torch.library.custom_op("nanogpt::block_rows", mutates_args=())
def block_rows(blocks: Tensor) -> tuple[Tensor, Tensor]:
    """Block matrices (... x rows x columns) as FlexAttention's BlockMask holds them: each row's count of blocks, and
    their column indices, ascending, then the other columns (a stable descending argsort of the row). An opaque op, so
    that the argsort runs as torch's sort kernel: compiled, inductor fused the forward's argsorts into one Triton
    kernel whose build (Triton's passes over its sorting networks) took ~40% of a cold start (perf/NOTES.md)."""
    indices = torch.argsort(blocks.to(torch.int8), dim=-1, descending=True, stable=True)
    return blocks.sum(-1, dtype=torch.int32), indices.to(torch.int32).contiguous()


@block_rows.register_fake
def _(blocks):
    return blocks.new_empty(blocks.shape[:-1], dtype=torch.int32), blocks.new_empty(blocks.shape, dtype=torch.int32)


def block_masks(docs: Tensor, windows: list[Tensor], windowed_mask_mod: bool | None = None) -> list[BlockMask]:
    """A FlexAttention mask per window (in blocks) from block-level matrices. Compiled kernels evaluate mask_mod on
    the lists' partial blocks only, which hold the window, so there it may leave the window out (the term cost track 2
    1.1 ms a step on the H200); uncompiled flex_attention evaluates it on every block, so there it needs the window.
    By default (None) mask_mod leaves it out where dynamo traces the caller, as it does the compiled model.
    The rows of every mask, key side and query side (the backward's), come from one block_rows call: one sort a step
    (one call per matrix, eight, ran 1.0 ms a step slower on the H200)."""
    matrices = []
    for window_blocks in windows:
        any_pair, full = block_relations(docs, window_blocks)
        partial = any_pair & ~full
        matrices += [partial, full, partial.T, full.T]
    counts, indices = block_rows(torch.stack(matrices))
    counts, indices = counts[:, None, None], indices[:, None, None]  # BlockMask's (batch, heads) dims
    if windowed_mask_mod is None:
        windowed_mask_mod = not torch.compiler.is_compiling()
    return [mask_from_rows(docs, window_blocks if windowed_mask_mod else None, counts[4 * i:4 * i + 4],
                           indices[4 * i:4 * i + 4]) for i, window_blocks in enumerate(windows)]


def mask_from_rows(docs: Tensor, window_blocks: Tensor | None, counts: Tensor, indices: Tensor) -> BlockMask:
    """The BlockMask of one window from the counts and indices of its four row sets: partial and full blocks, key
    side, then partial and full blocks, query side; mask_mod applies window_blocks too unless it is None."""
    def document_causal(b, h, q_idx, kv_idx):
        return (docs[q_idx] == docs[kv_idx]) & (q_idx >= kv_idx)

    def windowed_document_causal(b, h, q_idx, kv_idx):
        in_window = q_idx // BLOCK_SIZE - kv_idx // BLOCK_SIZE < window_blocks
        return document_causal(b, h, q_idx, kv_idx) & in_window

    return BlockMask(seq_lengths=(docs.numel(), docs.numel()), kv_num_blocks=counts[0], kv_indices=indices[0],
                     full_kv_num_blocks=counts[1], full_kv_indices=indices[1], q_num_blocks=counts[2],
                     q_indices=indices[2], full_q_num_blocks=counts[3], full_q_indices=indices[3],
                     BLOCK_SIZE=(BLOCK_SIZE, BLOCK_SIZE),
                     mask_mod=document_causal if window_blocks is None else windowed_document_causal)


def dense_mask(docs: Tensor, window_blocks: Tensor) -> Tensor:
    """The same rule as block_masks, element by element (CPU path: FlexAttention has no CPU backward)."""
    any_pair, _ = block_relations(docs, window_blocks)
    per_token = any_pair.repeat_interleave(BLOCK_SIZE, 0).repeat_interleave(BLOCK_SIZE, 1)
    positions = torch.arange(docs.numel(), device=docs.device)
    return per_token & (docs[:, None] == docs[None, :]) & (positions[:, None] >= positions[None, :])


def attention_masks(tokens: Tensor, window_blocks: Tensor) -> dict:
    """Long (window) and short (window/2) masks of one packed sequence; documents start at EOT (document-causal
    sliding windows by FlexAttention: the 2024 records). Block masks on the GPU, whose mask_mod tests the window unless
    dynamo traces the model (block_masks)."""
    docs = (tokens == EOT_TOKEN).cumsum(0)
    windows = [window_blocks, torch.clamp_min(window_blocks // 2, 1)]
    if tokens.is_cuda:
        masks = block_masks(docs, windows)
    else:
        masks = [dense_mask(docs, window) for window in windows]
    return dict(zip("LS", masks))


def attend(q: Tensor, k: Tensor, v: Tensor, mask, scale: float) -> Tensor:
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    if isinstance(mask, BlockMask):
        y = flex_attention(q, k, v, block_mask=mask, scale=scale)
    else:
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    return y.transpose(1, 2)


class Rotary(nn.Module):
    """Rotary embedding (Su et al. 2021) on half of the head dims; the other half stays position-free (the 2024
    records' half-truncated rotary)."""

    def __init__(self, head_dim: int, max_len: int):
        super().__init__()
        freqs = (1 / 1024) ** torch.linspace(0, 1, steps=head_dim // 4)
        freqs = torch.cat([freqs, freqs.new_zeros(head_dim // 4)])
        theta = torch.outer(torch.arange(max_len, dtype=torch.float32), freqs)
        self.register_buffer("cos", theta.cos(), persistent=False)
        self.register_buffer("sin", theta.sin(), persistent=False)

    def tables(self, tokens: int) -> tuple[Tensor, Tensor]:  # tokens x head_dim / 2 each
        return self.cos[:tokens], self.sin[:tokens]


def uniform_init_bound(fan_in: int) -> float:
    return 3 ** 0.5 * 0.5 * fan_in ** -0.5


def gate_width(model_dim: int) -> int:
    """How many of a token's first dims the attention output gate and smear's gate read."""
    return max(1, model_dim // 64)


class CausalSelfAttention(nn.Module):
    """Merged QKVO weight, QK-norm, rotary, value-embedding mix and a sparse per-head output gate."""

    def __init__(self, args: Hyperparameters, rotary: Rotary):
        super().__init__()
        self.num_heads, self.head_dim = args.num_heads, args.head_dim
        self.gate_dim = gate_width(args.model_dim)
        self.scale = 0.12  # instead of 1/sqrt(head_dim), with QK-norm (Henry et al. 2020)
        self.qkvo_w = nn.Parameter(torch.empty(4, args.num_heads * args.head_dim, args.model_dim))
        with torch.no_grad():
            bound = uniform_init_bound(args.model_dim)
            self.qkvo_w[:3].uniform_(-bound, bound)
            self.qkvo_w[3].zero_()
        self.gate_w = nn.Parameter(torch.zeros(args.num_heads, self.gate_dim))
        self.rotary = rotary  # one table shared by all layers
        self.fp8_qkv = args.fp8_qkv

    def weight_casts(self) -> tuple | None:
        """qkv_weight_casts of the QKV weight as it is (None when the projection is bf16)."""
        return qkv_weight_casts(self.qkvo_w[:3].flatten(0, 1)) if self.fp8_qkv else None

    def forward(self, x: Tensor, value_embed: Tensor | None, lambdas: Tensor, mask,
                qkv_casts: tuple | None = None) -> Tensor:
        """qkv_casts: self.weight_casts(), made once for a step's micro-steps (None: cast here)."""
        B, T = x.shape[:2]
        qkv_w = self.qkvo_w[:3].flatten(0, 1)
        value_embed = None if value_embed is None else value_embed.view(B, T, self.num_heads, self.head_dim)
        if self.fp8_qkv and self.training:
            casts = qkv_casts if qkv_casts is not None else self.weight_casts()
            q, k, v = fp8_attention_inputs(x, qkv_w, *self.rotary.tables(T), lambdas, value_embed, self.head_dim,
                                           *casts)
        else:
            qkv = F.linear(x, qkv_w.type_as(x)).view(B, T, 3 * self.num_heads, self.head_dim)
            q, k, v = attention_inputs(qkv, *self.rotary.tables(T), lambdas, value_embed)
        y = attend(q, k, v, mask, self.scale)
        # a sigmoid gate per head from the input's first dims (gated attention, Qiu et al. 2025; the 2025 records),
        # copied: a view would keep all of x in bf16 for the gate's backward, where FP8 keeps only x's e4m3 copy
        gate_input = x[..., :self.gate_dim].flatten(0, 1).contiguous()
        gate = torch.sigmoid(gate_logits(gate_input, self.gate_w.type_as(x))).view(B, T, self.num_heads, 1)
        y = y * gate
        # bf16: in FP8 the gated y needs a rowwise cast (a row reduction, fused with the gate's product into a
        # kernel of its own), which cost what the FP8 GEMM saved (perf/NOTES.md, sessions 44 and 48)
        return y.flatten(2) @ self.qkvo_w[3].type_as(y)


class MLP(nn.Module):
    def __init__(self, dim: int, hidden: int, fp8: bool = False, amax_row_step: int = 1):
        super().__init__()
        self.fp8, self.amax_row_step = fp8, amax_row_step
        bound = uniform_init_bound(dim)
        # Both stored (dim, hidden) as in the record, so Muon's shape scale max(1, rows/cols)^0.5 is 1 for both.
        self.fc_w = nn.Parameter(torch.empty(dim, hidden).uniform_(-bound, bound))
        self.proj_w = nn.Parameter(torch.zeros(dim, hidden))

    def weight_casts(self) -> tuple | None:
        """mlp_weight_casts of the weights as they are (None when the MLP is bf16)."""
        return mlp_weight_casts(self.fc_w, self.proj_w) if self.fp8 else None

    def forward(self, x: Tensor, weight_casts: tuple | None = None) -> Tensor:
        """weight_casts: self.weight_casts(), made once for a step's micro-steps (None: cast here)."""
        if not (self.fp8 and self.training):
            return F.linear(F.relu(x @ self.fc_w.type_as(x)).square(), self.proj_w.type_as(x))  # relu^2 (Primer)
        casts = weight_casts if weight_casts is not None else self.weight_casts()
        return fp8_mlp(x.flatten(0, -2), self.fc_w, self.proj_w, *casts, self.amax_row_step).view_as(x)


class Block(nn.Module):
    def __init__(self, args: Hyperparameters, has_attention: bool, rotary: Rotary):
        super().__init__()
        self.attn = CausalSelfAttention(args, rotary) if has_attention else None
        self.mlp = MLP(args.model_dim, args.mlp_ratio * args.model_dim, args.fp8_mlp, args.fp8_amax_row_step)

    def weight_casts(self) -> tuple:
        """The float8 casts of this block's FP8 weights as they are (None where a projection is bf16): the MLP's and
        the QKV projection's."""
        return self.mlp.weight_casts(), None if self.attn is None else self.attn.weight_casts()

    def forward(self, x, x0, value_embed, block_lambdas, attn_lambdas, mask, casts=(None, None)):
        """casts: this step's weight_casts (None for either: cast in the forward)."""
        x = block_lambdas[0] * x + block_lambdas[1] * x0  # learned share of the embedding stream (2024 records)
        if self.attn is not None:
            x = x + self.attn(rms_norm(x), value_embed, attn_lambdas, mask, casts[1])
        return x + self.mlp(rms_norm(x), casts[0])


def value_embed_layout(num_layers: int) -> list:
    """Which value-embedding table each block mixes in: 0 1 2 ... 0 1 2 on the first and last three (value
    embeddings: the 2024 records)."""
    return [0, 1, 2] + [None] * (num_layers - 6) + [0, 1, 2]


def padded_vocab(vocab_size: int) -> int:
    return -(-vocab_size // 128) * 128


class GPT(nn.Module):
    """U-net GPT (skips from the 2024 records): the first half's block outputs are added, with learned weights, to
    the second half's inputs."""

    def __init__(self, args: Hyperparameters):
        super().__init__()
        vocab, dim, layers = padded_vocab(args.vocab_size), args.model_dim, args.num_layers
        max_len = max(args.train_seq_len, args.val_seq_len)
        self.window_pattern = args.window_pattern
        # bf16 tables (and so bf16 Adam moments), as in the record
        self.embed = nn.Embedding(vocab, dim, dtype=torch.bfloat16)
        self.value_embeds = nn.ModuleList(nn.Embedding(vocab, dim, dtype=torch.bfloat16) for _ in range(3))
        # the tables' gradients summed over a step's micro-steps (SummedLookup); not part of the model's state
        self.register_buffer("table_grad_sums", torch.zeros(4, vocab, dim), persistent=False)
        self.value_embed_layout = value_embed_layout(layers)
        rotary = Rotary(args.head_dim, max_len)  # ~134 MB of cos/sin at the default lengths: built once
        self.blocks = nn.ModuleList(Block(args, i != args.no_attention_layer, rotary) for i in range(layers))
        self.lm_head_w = nn.Parameter(torch.zeros(vocab, dim))
        self.num_skips = layers // 2
        scalars = [torch.ones(self.num_skips), torch.tensor([1.0, 0.0]).repeat(layers),
                   torch.tensor([0.5, 0.5]).repeat(layers)]
        self.smear_at = sum(s.numel() for s in scalars) if args.smear else None  # lambda 0, then a zero gate
        scalars += [torch.zeros(1 + gate_width(args.model_dim))] if args.smear else []
        self.backout_layer = args.backout_layer
        self.backout_at = sum(s.numel() for s in scalars) if args.backout_layer >= 0 else None
        scalars += [torch.tensor([0.5])] if args.backout_layer >= 0 else []
        count = sum(s.numel() for s in scalars)
        scalars.append(torch.zeros(-count % 8))  # shardable over any world size dividing 8
        self.scalars = nn.Parameter(torch.cat(scalars))
        self.fp8_scales = (normed_e4m3_scale(dim), 2 ** -9, 1 / 448)  # x_s, w_s, grad_s

    def scalar_views(self):
        """Skip weights, per-block (x, x0) lambdas, per-attention (v, value-embed) lambdas."""
        layers = len(self.blocks)
        skip = self.scalars[:self.num_skips]
        block = self.scalars[self.num_skips:self.num_skips + 2 * layers].view(layers, 2)
        attn = self.scalars[self.num_skips + 2 * layers:self.num_skips + 4 * layers].view(layers, 2)
        return skip, block, attn

    def smeared(self, embedded: Tensor) -> Tensor:
        """Smear (2025-09 record): token t adds lambda * sigmoid(gate . its first dims) times token t-1's embedding."""
        if self.smear_at is None:
            return embedded
        gate_dim = gate_width(embedded.size(-1))
        smear_lambda, gate_w = self.scalars[self.smear_at], self.scalars[self.smear_at + 1:][:gate_dim]
        gate = torch.sigmoid(embedded[1:, :gate_dim] @ gate_w.type_as(embedded))
        share = (smear_lambda * gate).type_as(embedded)[:, None]
        return torch.cat([embedded[:1], embedded[1:] + share * embedded[:-1]])

    def embedding_tables(self) -> list[nn.Embedding]:
        return [self.embed, *self.value_embeds]

    def embedded(self, inputs: Tensor) -> tuple[Tensor, list[Tensor]]:
        """The stream's start x0 (token embeddings, smeared, then normed) and the value embeddings of the tokens. In
        training the tables' gradients go to table_grad_sums (summed_lookup): take_table_grads gives them to the
        tables."""
        if self.training:
            sorted_ids, order = inputs.flatten().sort()  # once for the four tables' backward (add_rows_)
            rows = [summed_lookup(inputs, t.weight, sums, sorted_ids, order)
                    for t, sums in zip(self.embedding_tables(), self.table_grad_sums)]
        else:
            rows = [table(inputs) for table in self.embedding_tables()]
        return rms_norm(self.smeared(rows[0])[None]), [r[None] for r in rows[1:]]

    @torch.no_grad()
    def take_table_grads(self):
        """Each embedding table's .grad from its gradient summed in fp32 over the micro-steps since the last call,
        rounded to the table's bf16 once; the sums zeroed for the next step."""
        for table, sums in zip(self.embedding_tables(), self.table_grad_sums):
            table.weight.grad = sums.to(table.weight.dtype)
            sums.zero_()

    @torch.no_grad()
    def head_weight_casts(self) -> tuple[Tensor, Tensor] | None:
        """head_weight_casts of the head weight as it is, for the fused head on the GPU (None elsewhere)."""
        return head_weight_casts(self.lm_head_w, self.fp8_scales[1]) if takes_fused_head(self.lm_head_w) else None

    def head_loss(self, x: Tensor, targets: Tensor, head_casts: tuple | None = None) -> Tensor:
        """Cross entropy of the softcapped logits 30 * sigmoid(z / 7.5) of the normed stream: summed over tokens with
        the FP8 head in training (the fused kernels on the GPU), mean with the bf16 head in eval (EVAL_HEAD_TOKENS
        at a time). head_casts: self.head_weight_casts(), made once for a step's micro-steps (None: cast here)."""
        x = rms_norm(x).flatten(0, -2)
        if self.training and takes_fused_head(x):
            w_f8, w_f8_t = head_casts if head_casts is not None else self.head_weight_casts()
            return fp8_head_ce(x, self.lm_head_w, w_f8, w_f8_t, targets, *self.fp8_scales)[0]
        if self.training:
            logits = fp8_mm(x, self.lm_head_w, *self.fp8_scales)[0]
            return F.cross_entropy(softcap(logits), targets.to(torch.int64), reduction="sum")
        w = self.lm_head_w.bfloat16()
        chunks = zip(x.split(EVAL_HEAD_TOKENS), targets.to(torch.int64).split(EVAL_HEAD_TOKENS))
        return sum(F.cross_entropy(softcap(F.linear(xc, w)), tc, reduction="sum") for xc, tc in chunks) / len(targets)

    def weight_casts(self) -> tuple[list, tuple | None]:
        """Each block's weight_casts and the head's, from the weights as they are: train_step makes them once a step
        and passes them to each micro-step's forward."""
        return [block.weight_casts() for block in self.blocks], self.head_weight_casts()

    def forward(self, inputs: Tensor, targets: Tensor, window_blocks: Tensor,
                weight_casts: tuple | None = None) -> Tensor:
        """Cross-entropy of one packed sequence: summed over tokens in training, mean in eval. weight_casts: this
        step's GPT.weight_casts (None: each FP8 projection casts its weights itself)."""
        block_casts, head_casts = weight_casts if weight_casts is not None else (None, None)
        masks = attention_masks(inputs, window_blocks)
        x0, value_embeds = self.embedded(inputs)
        x = x0
        skip_weights, block_lambdas, attn_lambdas = self.scalar_views()
        skips, first_decoder, backout = [], len(self.blocks) - self.num_skips, None
        for i, block in enumerate(self.blocks):
            if i == self.backout_layer:
                backout = x
            if i >= first_decoder:
                x = x + skip_weights[i - first_decoder] * skips.pop()
            ve_index = self.value_embed_layout[i]
            value_embed = None if ve_index is None else value_embeds[ve_index]
            x = block(x, x0, value_embed, block_lambdas[i], attn_lambdas[i], masks[self.window_pattern[i]],
                      (None, None) if block_casts is None else block_casts[i])
            if i < self.num_skips:
                skips.append(x)
        if backout is not None:  # backout (2025-10 record): what early blocks wrote for context, not prediction
            x = x - self.scalars[self.backout_at] * backout
        return self.head_loss(x, targets, head_casts)


def matmul_params(model: GPT) -> int:
    """Parameters used in matmuls (excludes embeddings and scalars), for FLOP estimates."""
    return sum(p.numel() for name, p in model.named_parameters() if name.endswith("_w"))


# ----------------------------------------------------------------------------------------------
# Data: speedrun shards (256 x int32 header, uint16 tokens), BOS-aligned training sequences (the 2025-07 records)

SHARD_MAGIC, SHARD_VERSION, HEADER_INTS = 20240520, 1, 256
HEADER_BYTES = 4 * HEADER_INTS


def read_shard_header(path: str) -> int:
    """Validate a shard's header against its size; returns its token count."""
    try:
        size = os.path.getsize(path)
        header = np.fromfile(path, dtype="<i4", count=HEADER_INTS) if size >= HEADER_BYTES else None
    except OSError as error:  # a broken link, no permission
        raise DataError(f"{path}: cannot read it ({error.strerror}); fix the file or its pattern") from None
    if header is None:
        problem = f"truncated: {size} bytes is shorter than the {HEADER_BYTES}-byte header"
    elif header[0] != SHARD_MAGIC:
        problem = f"not a speedrun shard (magic {header[0]}, expected {SHARD_MAGIC})"
    elif header[1] != SHARD_VERSION:
        problem = f"unsupported shard version {header[1]} (expected {SHARD_VERSION})"
    elif (num_tokens := int(header[2])) < 0:
        problem = f"corrupt: the header's token count is negative ({num_tokens})"
    elif size != (expected := HEADER_BYTES + 2 * num_tokens):
        problem = (f"{'truncated' if size < expected else 'corrupt'}: header promises {num_tokens} tokens "
                   f"({expected} bytes) but the file has {size} bytes")
    else:
        return num_tokens
    raise DataError(f"{path}: {problem}; re-download or re-tokenize it")


def read_shard(path: str, limit: int | None = None) -> Tensor:
    """The shard's tokens, or its first limit tokens."""
    num_tokens = read_shard_header(path)
    count = num_tokens if limit is None else min(num_tokens, limit)
    return torch.from_numpy(np.fromfile(path, dtype=np.uint16, count=count, offset=HEADER_BYTES))


def find_shards(setting: str, pattern: str) -> list[str]:
    """The shard files of --train_files or --val_files (setting), sorted."""
    files, split = sorted(glob.glob(pattern)), setting.removesuffix("_files")
    if not files:
        where = "" if os.path.isabs(pattern) else f" (a relative pattern, read from {os.getcwd()})"
        folder = os.path.dirname(pattern) or "."
        if os.path.isdir(folder) and not os.access(folder, os.R_OK | os.X_OK):  # glob reads such a folder as empty
            raise DataError(f"--{setting}={pattern} matches no files{where}: this user cannot read the folder "
                            f"{folder}; make it readable (chmod a+rx {folder}) or copy the shards where it can")
        missing_download = "fineweb" in pattern and not glob.glob(os.path.join(folder, "*.bin"))
        fix = ("download FineWeb with: python data/cached_fineweb10B.py 9" if missing_download else
               f"check the pattern (a glob of shard files, e.g. 'data/<name>/<name>_{split}_*.bin')")
        raise DataError(f"--{setting}={pattern} matches no files{where}; {fix}")
    for path in files:
        if os.path.isdir(path):
            raise DataError(f"--{setting}={pattern} matches a folder, {path}; the pattern names shard files, e.g. "
                            f"'{os.path.join(path, f'*_{split}_*.bin')}'")
    return files


def sequence_windows(files: list[str], seq_len: int):
    """Consecutive windows of seq_len + 1 tokens, each starting at a document start, shard by shard."""
    for path in files:
        tokens = read_shard(path)
        starts = np.flatnonzero(tokens.numpy() == EOT_TOKEN)
        position = 0
        while True:
            i = np.searchsorted(starts, position)
            if i == len(starts) or starts[i] + seq_len + 1 > len(tokens):
                break
            yield tokens, int(starts[i])
            position = int(starts[i]) + seq_len


def survey_windows(files: list[str], seq_len: int, limit: int) -> tuple[int, int]:
    """How many windows the files hold, counted up to limit, and the largest token id of the shards they come from
    (those the run reads)."""
    count, largest, shard = 0, 0, None
    for tokens, _ in itertools.islice(sequence_windows(files, seq_len), limit):
        count += 1
        if tokens is not shard:
            shard, largest = tokens, max(largest, int(tokens.numpy().max()))
    return count, largest


def train_batches(files: list[str], seq_len: int, rank: int, world_size: int, device: torch.device):
    """(inputs, targets) of this rank for each micro-step: the global stream of sequences is dealt
    to ranks in turn, so N ranks see what one rank sees in N consecutive micro-steps."""
    shard, staged = None, None
    windows = sequence_windows(files, seq_len)
    while True:
        for owner in range(world_size):
            tokens, start = next(windows)
            if owner != rank:
                continue
            if tokens is not shard:  # page-locked, so that the copies below are asynchronous
                shard, staged = tokens, tokens.pin_memory() if device.type == "cuda" else tokens
            window = staged[start:start + seq_len + 1].to(device=device, dtype=torch.int32, non_blocking=True)
            yield window[:-1], window[1:]


def load_val_tokens(files: list[str], count: int, device: torch.device) -> Tensor:
    """The first count + 1 tokens of the files (validation's inputs and targets), read no further."""
    parts, missing = [], count + 1
    for path in files:
        if missing == 0:
            break
        parts.append(read_shard(path, missing))
        missing -= len(parts[-1])
    return torch.cat(parts).to(device).to(torch.int32)


# ----------------------------------------------------------------------------------------------
# Setup: checks before the slow compile, device and distributed init, Triton and cuBLASLt settings, logging, crash and
# signal reports, the compile cache, optimizers, kernel builds ahead


def launch_number(name: str, default: int) -> int:
    """A count or rank that torchrun sets (WORLD_SIZE, LOCAL_WORLD_SIZE, RANK, LOCAL_RANK); default when unset. A
    rank is an integer from 0; a count's range is check_machine's."""
    raw, kind = os.environ.get(name, str(default)), "process count" if name.endswith("WORLD_SIZE") else "process rank"
    if not re.fullmatch(r"-?\d+" if kind == "process count" else r"\d+", raw.strip()):
        raise LaunchError(f"{name}={raw} is not a {kind}; launch with torchrun or ./run.sh")
    return int(raw)


def launch_ranks() -> tuple[int, int, int]:
    """World size, rank and local rank as torchrun sets them (1, 0, 0 for a plain python run), checked against each
    other: a RANK left in a shell's environment would hide every error (rank 0 prints them), then wait for
    sequences that no rank deals it. A MASTER_PORT that is set must be a port."""
    world_size, rank = launch_number("WORLD_SIZE", 1), launch_number("RANK", 0)
    local_rank = launch_number("LOCAL_RANK", 0)
    if world_size >= 1 and rank >= world_size:  # a world size below 1 is check_machine's error
        raise LaunchError(f"RANK={rank} is not below the world size, {world_size} (WORLD_SIZE); unset RANK (left in "
                          "the environment?), or launch with ./run.sh or torchrun")
    if local_rank > rank:
        raise LaunchError(f"LOCAL_RANK={local_rank} is above RANK={rank}; unset LOCAL_RANK (left in the "
                          "environment?), or launch with ./run.sh or torchrun")
    port = os.environ.get("MASTER_PORT", "")  # torchrun's; unset in ./run.sh's check, which starts no group
    if port and not (re.fullmatch(r"\d+", port.strip()) and 1 <= int(port) <= 65535):
        raise LaunchError(f"MASTER_PORT={port} is not a port (1 to 65535); give a free port, or launch with ./run.sh "
                          "or torchrun --standalone")
    return world_size, rank, local_rank


def check_numbers(args: Hyperparameters):
    """Every number in its range (a nonsense value would fail only after the compile, or train silently)."""
    positive = ["num_iterations", "train_seq_len", "val_seq_len", "val_tokens", "num_layers", "model_dim",
                "num_heads", "head_dim", "mlp_ratio", "window_end", "fp8_amax_row_step"]
    for name in positive + ["val_loss_every", "warmup_steps", "profile_steps", "grad_accum_steps",
                            "muon_momentum_warmup_steps", "window_start"]:
        if getattr(args, name) < (1 if name in positive else 0):
            raise SetupError(f"--{name}={getattr(args, name)} must be {'positive' if name in positive else '>= 0'}")
    for name in ["muon_momentum", "muon_momentum_start", "normuon_beta2", "adam_beta1", "adam_beta2"]:
        if not 0 <= getattr(args, name) < 1:
            raise SetupError(f"--{name}={getattr(args, name)} must be in [0, 1)")
    for f in dataclasses.fields(args):
        value = getattr(args, f.name)
        if isinstance(value, float) and not (math.isfinite(value) and value >= 0):
            raise SetupError(f"--{f.name}={value} must be a finite number >= 0")
        if type(value) is int and f.name != "seed" and value >= 2**31:  # would overflow the tensors and loops it sizes
            raise SetupError(f"--{f.name}={value} must be below 2^31")
    for name in ["adam_eps", "peak_tflops"]:
        if getattr(args, name) == 0:
            raise SetupError(f"--{name}=0 must be above 0")
    for name in ["cooldown_frac", "final_lr_frac"]:
        if getattr(args, name) > 1:
            raise SetupError(f"--{name}={getattr(args, name)} must be in [0, 1]")
    decay = args.muon_lr * args.muon_weight_decay
    if decay >= 1:
        raise SetupError(f"Muon's weight decay takes a matrix's weights to zero or past it each step (lr x weight "
                         f"decay = {decay:g} >= 1); lower --muon_weight_decay")
    if not 0 <= args.seed < 2**63:
        raise SetupError(f"--seed={args.seed} must be in [0, 2^63)")


def check_shapes(args: Hyperparameters):
    """The model's and the schedule's settings fit together, and the optimizer's named choices exist."""
    for name in ["train_seq_len", "val_seq_len"]:
        if getattr(args, name) % BLOCK_SIZE != 0:
            raise SetupError(f"--{name}={getattr(args, name)} is not a multiple of {BLOCK_SIZE} "
                             "(the attention block size); round it to one")
    if args.window_end > MAX_WINDOW:
        raise SetupError(f"--window_end={args.window_end} is above {MAX_WINDOW} tokens; a window past the sequence "
                         "length changes nothing")
    if args.window_start > args.window_end:
        raise SetupError(f"--window_start={args.window_start} is above --window_end={args.window_end}; the window "
                         "grows during the run")
    if args.profile_steps and args.profile_steps >= args.warmup_steps:
        raise SetupError(f"--profile_steps={args.profile_steps} must be below --warmup_steps={args.warmup_steps} "
                         "(the first warmup step compiles)")
    if args.vocab_size <= EOT_TOKEN:
        raise SetupError(f"--vocab_size={args.vocab_size} must be above the GPT-2 token ids of the shards (up to "
                         f"{EOT_TOKEN}, end of text): at least {EOT_TOKEN + 1}")
    if args.head_dim % 4 != 0:
        raise SetupError(f"--head_dim={args.head_dim} must be a multiple of 4 (half-truncated rotary)")
    if args.num_heads * args.head_dim != args.model_dim:
        raise SetupError(f"--num_heads={args.num_heads} x --head_dim={args.head_dim} must equal "
                         f"--model_dim={args.model_dim} (value embeddings are added to the values)")
    if args.num_layers < 6:
        raise SetupError(f"--num_layers={args.num_layers}: at least 6 blocks (value embeddings on the first "
                         "and last three)")
    if args.no_attention_layer != -1 and not 0 <= args.no_attention_layer < args.num_layers:
        raise SetupError(f"--no_attention_layer={args.no_attention_layer}: use -1 (none) or a block index from 0 to "
                         f"{args.num_layers - 1}")
    if len(args.window_pattern) != args.num_layers or set(args.window_pattern) - {"L", "S"}:
        raise SetupError(f"--window_pattern={args.window_pattern} needs one L or S per block "
                         f"({args.num_layers} letters)")
    for name, allowed in [("ns_coefficients", list(NS_COEFFICIENTS)), ("muon_variant", ["muon", "normuon"])]:
        if getattr(args, name) not in allowed:
            raise SetupError(f"--{name}={getattr(args, name)}: use {' or '.join(allowed)}")
    if args.backout_layer != -1 and not 1 <= args.backout_layer < args.num_layers:
        raise SetupError(f"--backout_layer={args.backout_layer}: use -1 (off) or a block count from 1 to "
                         f"{args.num_layers - 1}")


def why_unwritable(folder: str) -> str | None:
    """Why files cannot be made in folder (with the folders above it that are missing), or None when they can. A
    path below a folder without search permission counts as missing (os.path.exists: False, where Path.exists
    raises)."""
    nearest = Path(folder).absolute()
    while not os.path.exists(nearest):
        nearest = nearest.parent
    if nearest.is_dir() and os.access(nearest, os.W_OK | os.X_OK):
        return None
    return f"{nearest} is {'not writable' if nearest.is_dir() else 'a file'}"


def check_files(args: Hyperparameters):
    """The log folder can be written (or made), the log is new (a run never writes over an earlier run's log), and
    the compile cache is a readable file in a folder the warmup's end can write it to."""
    if not args.logs_dir:  # as a path, "" is the working folder
        raise SetupError("--logs_dir is empty (an unset shell variable?); give the folder of the run logs, e.g. "
                         "--logs_dir=logs")
    if (reason := why_unwritable(args.logs_dir)) is not None:
        raise SetupError(f"--logs_dir={args.logs_dir} cannot be written ({reason}); give a writable folder")
    if args.run_id and (os.path.basename(args.run_id) != args.run_id or args.run_id in (".", "..")
                        or len(f"{args.run_id}.txt".encode()) > 255):
        raise SetupError(f"--run_id={args.run_id} is not a file name (no '/', at most 251 bytes); the log is "
                         "<--logs_dir>/<run_id>.txt, so put folders in --logs_dir")
    if args.run_id and os.path.exists(log := os.path.join(args.logs_dir, f"{args.run_id}.txt")):
        raise SetupError(f"{log} exists (an earlier run's log); pass another --run_id, or move that file")
    cache = args.compile_cache
    if cache and os.path.exists(cache) and not (os.path.isfile(cache) and os.access(cache, os.R_OK)):
        raise SetupError(f"--compile_cache={cache} is not a readable file; give a file path (written after the "
                         "warmup when missing)")
    if cache and (reason := why_unwritable(os.path.dirname(os.path.abspath(cache)))) is not None:
        raise SetupError(f"--compile_cache={cache} cannot be written after the warmup ({reason}); give a path in a "
                         "writable folder (copy a read-only cache there)")


def rowwise_fp8_matmul_runs() -> bool:
    """Whether torch multiplies e4m3 matrices with a scale per row on this GPU (torch 2.11 on the H200 does, through
    cuBLAS; not every GPU and build does), tried on 16 x 16 ones on the process's own GPU (on GPU 0, every rank
    would open a context there)."""
    device = torch.device("cuda", launch_number("LOCAL_RANK", 0))
    ones, scales = torch.ones(16, 16, device=device).to(torch.float8_e4m3fn), torch.ones(16, 1, device=device)
    try:
        rowwise_scaled_mm(ones, scales, ones, scales)
    except RuntimeError:
        return False
    return True


def check_machine(args: Hyperparameters, world_size: int):
    """The process counts, the validation split over the processes, and the device (on the GPU: check_gpu)."""
    if world_size < 1 or 8 % world_size != 0:
        raise SetupError(f"world size {world_size} does not divide 8; launch 1, 2, 4 or 8 processes "
                         "(./run.sh picks the GPU count)")
    if args.val_tokens % (world_size * args.val_seq_len) != 0:
        raise SetupError(f"--val_tokens={args.val_tokens} is not a multiple of world_size x val_seq_len = "
                         f"{world_size * args.val_seq_len}; change --val_tokens or --val_seq_len")
    if args.device not in ("cuda", "cpu"):
        raise SetupError(f"--device={args.device}: use cuda or cpu")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SetupError("CUDA is not available; run on a GPU machine, or pass --device=cpu for a tiny CPU run")
    local_processes, local_gpu = launch_number("LOCAL_WORLD_SIZE", 1), launch_number("LOCAL_RANK", 0)
    if not 1 <= local_processes <= world_size:
        raise LaunchError(f"LOCAL_WORLD_SIZE={local_processes} is not a process count from 1 to the world size, "
                          f"{world_size}; unset LOCAL_WORLD_SIZE (left in the environment?), or launch with ./run.sh "
                          "or torchrun")
    if "LOCAL_WORLD_SIZE" in os.environ and local_gpu >= local_processes:  # unset: a hand launch named no count
        raise LaunchError(f"LOCAL_RANK={local_gpu} is not below the processes per node, {local_processes} "
                          "(LOCAL_WORLD_SIZE); unset LOCAL_RANK (left in the environment?), or launch with ./run.sh "
                          "or torchrun")
    if args.device == "cuda":
        check_gpu(args, local_processes, local_gpu)


def check_gpu(args: Hyperparameters, local_processes: int, local_gpu: int):
    """A GPU for each of the node's processes, and on this process's one the FP8 matmuls and sizes the model needs."""
    if torch.cuda.device_count() < local_processes:
        raise SetupError(f"{local_processes} processes per node, more than the GPUs on it "
                         f"({torch.cuda.device_count()}); launch one process per GPU")
    if local_gpu >= torch.cuda.device_count():
        raise LaunchError(f"LOCAL_RANK={os.environ['LOCAL_RANK']}, but this machine shows {torch.cuda.device_count()} "
                          f"GPU(s) (CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}); launch "
                          "one process per GPU")
    if torch.cuda.get_device_capability(local_gpu) < (8, 9):
        major, minor = torch.cuda.get_device_capability(local_gpu)
        raise SetupError(f"the FP8 head and MLP need FP8 tensor cores, on sm_89 or newer (this GPU is "
                         f"sm_{major}{minor}); run on an H100, H200, L4 or newer, or track 2 (train_gpt_medium.py), "
                         "which is bf16 (sm_80 or newer)")
    if args.fp8_qkv and not rowwise_fp8_matmul_runs():
        raise SetupError("this GPU and torch build have no rowwise-scaled FP8 matmul, which the QKV projection "
                         "uses; pass --fp8_qkv=false")
    if args.model_dim % 16 != 0:
        raise SetupError(f"--model_dim={args.model_dim} must be a multiple of 16 on the GPU (the FP8 tensor cores' "
                         "matrix sizes); change --num_heads or --head_dim")


def check_settings(args: Hyperparameters, world_size: int):
    check_numbers(args)
    check_shapes(args)
    check_files(args)
    check_machine(args, world_size)


def shards_wanted(pattern: str, shards: int, available: int, needed: int) -> str:
    """How many shards like the ones found would hold the run, with FineWeb's download command for its shards."""
    if not available:
        return ""
    wanted = math.ceil(shards * needed / available)
    if "fineweb" in pattern:
        return f" (~{wanted} in all: python data/cached_fineweb10B.py {wanted})"
    return f" (~{wanted} like these in all)"


def check_data(args: Hyperparameters, world_size: int, grad_accum_steps: int):
    """Every shard's header, enough tokens for the whole run, and token ids inside the vocabulary, before anything is
    compiled."""
    train_files, val_files = find_shards("train_files", args.train_files), find_shards("val_files", args.val_files)
    if in_both := sorted(set(map(os.path.realpath, train_files)) & set(map(os.path.realpath, val_files))):
        raise DataError(f"{in_both[0]} matches both --train_files={args.train_files} and --val_files={args.val_files}; "
                        "narrow the patterns (a model trained on its validation data has a meaningless val loss)")
    longest_shard = max(read_shard_header(path) for path in train_files)
    val_available = sum(read_shard_header(path) for path in val_files)
    if val_available < args.val_tokens + 1:
        raise DataError(f"val files {args.val_files} hold {val_available} tokens but --val_tokens={args.val_tokens} "
                        f"needs {args.val_tokens + 1}; lower --val_tokens or add validation data")
    # the warmup reads the stream from its start too, and then the training steps do
    steps = max(args.num_iterations, args.warmup_steps)
    needed = steps * world_size * grad_accum_steps
    available, largest = survey_windows(train_files, args.train_seq_len, needed)
    if available < needed:
        if longest_shard < args.train_seq_len + 1:
            fix = "no shard is that long (a sequence stays in its shard); lower --train_seq_len"
        elif available == 0:
            fix = "check the shards' end-of-text tokens with python data/check_shards.py, or lower --train_seq_len"
        else:  # the longer of the two sets the need; where they are equal, both must come down
            lower = ("--num_iterations and --warmup_steps" if args.warmup_steps == args.num_iterations else
                     "--warmup_steps" if args.warmup_steps > args.num_iterations else "--num_iterations")
            fix = (f"add train shards{shards_wanted(args.train_files, len(train_files), available, needed)} "
                   f"or lower {lower}")
        raise DataError(f"train files {args.train_files} hold {available} sequences of {args.train_seq_len + 1} "
                        f"tokens starting at a document start, the run needs {needed} ({steps} steps x "
                        f"{world_size} process(es) x {grad_accum_steps} micro-step(s)); {fix}")
    largest_val = int(load_val_tokens(val_files, args.val_tokens, torch.device("cpu")).max())  # the tokens it reads
    for pattern, token in [(args.train_files, largest), (args.val_files, largest_val)]:
        if token >= args.vocab_size:
            raise DataError(f"{pattern} hold token id {token}, outside --vocab_size={args.vocab_size}; check them "
                            "with python data/check_shards.py (GPT-2 tokens are below 50257)")
    return train_files, val_files


def reuse_freed_cpu_memory():
    """CPU runs: glibc's malloc keeps freed memory for the next allocation instead of handing every block over 32 MB
    back to the kernel, which zeroes its pages again when they are next touched: the tiny CPU run's head tensors are
    such blocks, and their zeroing was most of its step time (steps ~2x faster, peak memory higher: perf/NOTES.md,
    session 43). Off glibc, nothing to do."""
    libc = ctypes.CDLL(None)
    if hasattr(libc, "mallopt"):
        libc.mallopt(-4, 0)  # M_MMAP_MAX: no block of its own mapping
        libc.mallopt(-1, 2**31 - 1)  # M_TRIM_THRESHOLD: keep the heap's free top


def first_line(error: BaseException) -> str:
    """The first line of an error's message ("" for an empty one): torch's go on for lines of C++ frames and hints."""
    return next(iter(str(error).strip().splitlines()), "")


def set_up_device(args: Hyperparameters, local_rank: int) -> torch.device:
    """This process's device: its GPU, made current, or the CPU, with glibc's allocator set to reuse freed memory."""
    if args.device != "cuda":
        reuse_freed_cpu_memory()
        return torch.device("cpu")
    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)
    return device


def join_processes(device: torch.device, rank: int, world_size: int) -> Comm:
    """With several processes, their group (NCCL on GPUs, gloo on the CPU), once torchrun's meeting variables are
    there; this rank's Comm."""
    if world_size > 1:
        if missing := [name for name in ("RANK", "MASTER_ADDR", "MASTER_PORT") if not os.environ.get(name)]:
            raise LaunchError(f"WORLD_SIZE={world_size} without {' or '.join(missing)}, which torchrun sets for the "
                              "processes to meet; launch with ./run.sh or torchrun, or unset WORLD_SIZE for one "
                              "process")
        try:
            dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo",
                                    **(dict(device_id=device) if device.type == "cuda" else {}))
        except dist.DistError as error:  # a rank never started, or WORLD_SIZE set by hand: torch's timeout traceback
            meeting = f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
            raise LaunchError(f"the {world_size} processes of WORLD_SIZE did not all meet at {meeting} "
                              f"({first_line(error)}); start every rank together with ./run.sh or "
                              "torchrun, or unset WORLD_SIZE for one process") from None
    return Comm(rank, world_size)


def configure_triton_builds(ptxas: Path = Path(torch.__file__).parent / "bin" / "ptxas"):
    """Triton builds our kernels as in the runs measured here, where the environment does not say otherwise: with
    torch's ptxas (CUDA 13), as inductor builds its own (Triton 3.6's bundled ptxas miscompiled one of ours on the
    H200: perf/NOTES.md, sessions 14-15), and with FMA contraction, Triton 3.6's default, which Triton 3.9 warns that
    3.10 turns off (inductor sets it per kernel)."""
    if "TRITON_PTXAS_PATH" not in os.environ and ptxas.is_file() and os.access(ptxas, os.X_OK):
        os.environ["TRITON_PTXAS_PATH"] = str(ptxas)
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")


# cuBLASLt without a workspace of its own: with torch's 32 MiB (shared with cuBLAS) its FP8 GEMM kernels scheduled
# their tiles through counters that a memset zeroed before each call (90 a micro-step); without, the same tiles run on
# a static schedule (nvjet's "ssched") and the full batch ran 1.2-2.2 ms a step faster (H100, perf/NOTES.md, session
# 71). A torch may read them once, at its first cuBLASLt GEMM, so main sets them before check_gpu's probe (on torch
# 2.11 they took effect when set after it too: perf/NOTES.md, sessions 72 and 82).
CUBLASLT_SETTINGS = {"CUBLASLT_WORKSPACE_SIZE": "0", "TORCH_CUBLASLT_UNIFIED_WORKSPACE": "0"}  # KiB; off


def configure_cublaslt():
    """CUBLASLT_SETTINGS where the environment does not say otherwise: before the process's first GEMM, which is
    check_gpu's 16 x 16 rowwise FP8 probe (rowwise_fp8_matmul_runs), since torch may read them only once."""
    for name, value in CUBLASLT_SETTINGS.items():
        os.environ.setdefault(name, value)


def ptxas_in_use() -> str:
    """The ptxas that builds this process's GPU kernels (ours and inductor's), as Triton picks it: below sm_100,
    Triton 3.6-3.8 take TRITON_PTXAS_PATH's (else their own); Triton 3.9 builds sm_90 and newer with its own
    ptxas-blackwell (or TRITON_PTXAS_BLACKWELL_PATH's)."""
    if not torch.cuda.is_available() or torch.version.hip:
        return "none (no NVIDIA GPU)"
    major, minor = torch.cuda.get_device_capability()
    try:  # Triton's own function, not its API: the log's header line must not stop the run where it moved or failed
        from triton.backends.nvidia.compiler import get_ptxas
        tool = get_ptxas(10 * major + minor)
    except Exception as error:
        return f"unknown ({type(error).__name__}: {first_line(error)})"
    return f"{tool.path} (CUDA {tool.version})"


def environment() -> dict:
    has_cuda = torch.cuda.is_available()
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if has_cuda else []
    return dict(python=platform.python_version(), torch=torch.__version__,
                cuda=torch.version.cuda or "none", triton=triton.__version__,
                gpu=f"{gpus[0]} x{len(gpus)}" if gpus else "none",
                ptxas=ptxas_in_use(),
                cublaslt=" ".join(f"{name}={os.environ.get(name, 'unset')}" for name in CUBLASLT_SETTINGS))


def nvidia_smi_lines(timeout_s: float = 30) -> list[str]:
    """nvidia-smi's table for the log, or one line saying why there is none: a hung or broken nvidia-smi costs the
    log its table, not the run."""
    try:
        return subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=timeout_s).stdout.splitlines()
    except (OSError, subprocess.TimeoutExpired) as error:
        return [f"not read: {first_line(error)}"]


def launch_command(world_size: int) -> str:
    argv = shlex.join(sys.argv)
    if "TORCHELASTIC_RUN_ID" in os.environ:
        return f"torchrun --standalone --nproc_per_node={world_size} {argv}"
    return f"python {argv}"


class RunLog:
    """logs/<run_id>.txt: the exact source, one separator line, the run's header, then step lines."""

    def __init__(self, path: str, source: bytes, script_name: str):
        self.path = path
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        separator = "=" * 20 + f" end of source: {script_name}, {len(source)} bytes " + "=" * 20 + "\n"
        with open(path, "wb") as f:
            f.write(source + (b"" if source.endswith(b"\n") else b"\n") + separator.encode())

    def write(self, text: str, console: bool = True):
        if console:
            print(text, flush=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(text + "\n")

    def header(self, args: Hyperparameters, run_id: str, world_size: int):
        lines = [f"run_id: {run_id}", f"date: {datetime.now(timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')}",
                 f"command: {launch_command(world_size)}", f"argv: {json.dumps(sys.argv)}",
                 f"world_size: {world_size}"]
        lines += [f"{key}: {value}" for key, value in environment().items()]
        lines.append("hyperparameters:")
        lines += [f"  {name}: {format_value(value)}" for name, value in dataclasses.asdict(args).items()]
        if shutil.which("nvidia-smi"):
            lines += ["nvidia-smi:"] + [f"  {line}" for line in nvidia_smi_lines()]
        self.write("\n".join(lines), console=False)


OLDEST_TORCH = "2.11"  # the device's release, and requirements.txt's floor


def setup_notes(args: Hyperparameters, world_size: int) -> list[str]:
    """Log lines for a setup unlike the record's, which runs but may not reproduce it."""
    notes = []
    if world_size * args.grad_accum_steps != 8:
        notes.append(f"note: a global batch of {world_size} process(es) x {args.grad_accum_steps} micro-step(s), not "
                     "the 8-GPU record's 8: its losses do not compare with the record's")
    if torch.__version__ < OLDEST_TORCH:
        notes.append(f"note: torch {torch.__version__} is older than {OLDEST_TORCH}, the oldest this script was tested "
                     "on; if it fails, pip install -r requirements.txt")
    return notes


class NullLog:
    """What ranks other than 0 log: nothing."""

    def write(self, text: str, console: bool = True):
        pass


ERROR_LOG = NullLog()  # rank 0's log once open: an error or a signal after it opened ends it (end_log_with_errors)


def open_log(args: Hyperparameters, rank: int, world_size: int):
    """Rank 0 writes logs/<run_id>.txt: this file's source, then the header, and the error's one line at the end of
    a run that stops on one; other ranks log nothing."""
    if rank != 0:
        return NullLog()
    run_id = args.run_id or str(uuid.uuid4())
    with open(__file__, "rb") as f:
        source = f.read()
    try:
        log = RunLog(os.path.join(args.logs_dir, f"{run_id}.txt"), source, os.path.basename(__file__))
    except OSError as error:  # what the start-up check cannot foresee, e.g. a read-only file system
        raise SetupError(f"cannot write the log in --logs_dir={args.logs_dir} ({error.strerror}); give a writable "
                         "folder") from None
    end_log_with_errors(log)
    print(f"log: {log.path}", flush=True)
    log.header(args, run_id, world_size)
    return log


def end_log_with_errors(log: RunLog):
    """A setting or data error found from here on (a shard changed during the run), the GPU out of memory, a signal
    (exit_when_stopped) or a crash (report_crashes) ends the log with the error's one line."""
    global ERROR_LOG
    ERROR_LOG = log


def tell_launcher(line: str, shown: bool):
    """torchrun's summary of a failed run gives each rank's error file as the failure's cause ("To enable traceback
    see ..." where a rank wrote none): this process's last line goes to the file torchrun names for it, with whether
    its console shows the error (run.sh names a rank whose console does)."""
    if path := os.environ.get("TORCHELASTIC_ERROR_FILE"):
        try:
            Path(path).write_text(json.dumps({"message": line, "timestamp": int(time.time()), "shown": shown}))
        except OSError:  # the line is on the console and in the log already
            pass


def report_crashes():
    """A crash (a lost rank, a bug): its type and first line end rank 0's log once it is open and go to torchrun's
    summary, so that both say why the run stopped short; every rank's console gets the whole traceback."""
    console_hook = sys.excepthook

    def hook(kind, error, trace):
        line = f"error: {kind.__name__}: {first_line(error)}"
        ERROR_LOG.write(line, console=False)
        tell_launcher(line, shown=True)
        console_hook(kind, error, trace)

    sys.excepthook = hook


SIGNALS_THAT_STOP = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # Ctrl-C; a timeout or scheduler; a closed terminal


class Stopped(BaseException):
    """A signal of SIGNALS_THAT_STOP during the run (torchrun passes them on). A BaseException, as KeyboardInterrupt
    is, so that no `except Exception` on its way (torch's compiler has many) swallows it or wraps it in its own."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


def stop_on_signals() -> dict:
    """SIGNALS_THAT_STOP raise Stopped in the main thread, so that each ends a run with one line: SIGTERM used to end
    it with none, and Ctrl-C with a traceback from every rank. A signal ignored at start stays ignored (a background
    job's SIGINT, as Python does). Returns the handlers it replaced."""
    def stop(signum, frame):
        raise Stopped(signum)

    handlers = {signum: signal.getsignal(signum) for signum in SIGNALS_THAT_STOP}
    for signum, handler in handlers.items():
        if handler is not signal.SIG_IGN:
            signal.signal(signum, stop)
    return handlers


def restore_signals(handlers: dict):
    """The handlers stop_on_signals replaced (None: one set outside Python, taken as the default)."""
    for signum, handler in handlers.items():
        signal.signal(signum, signal.SIG_DFL if handler is None else handler)


def load_compile_cache(path: str) -> str | None:
    """Fill torch.compile's local caches from an artifact file (torch.compiler's portable "mega-cache"),
    so that the compile of a fresh machine is mostly cache hits. Returns a log note, None without a file."""
    if not path or not os.path.exists(path):
        return None
    torch_log = logging.getLogger("torch.compiler._cache")  # it logs a traceback, then returns None
    level = torch_log.level
    torch_log.setLevel(logging.CRITICAL)
    start = time.perf_counter()
    try:
        with open(path, "rb") as f:
            info = torch.compiler.load_cache_artifacts(f.read())
    except Exception:  # other torch versions may raise instead: the same bad file, the same fix
        info = None
    finally:
        torch_log.setLevel(level)
    if info is None:
        raise SetupError(f"--compile_cache={path} could not be loaded (corrupt, or not torch.compile artifacts); "
                         "delete it to compile from scratch and write a new one")
    return (f"compile cache: {sum(len(keys) for keys in info.artifacts.values())} artifacts loaded from {path} "
            f"in {time.perf_counter() - start:.1f}s")


def save_compile_cache(path: str) -> str | None:
    """Write the artifacts of this process's compiles (after warmup) for the next start; a log note with the
    seconds it took, which the start-up time includes."""
    start = time.perf_counter()
    artifacts = torch.compiler.save_cache_artifacts() if path else None
    if artifacts is None:
        return None
    partial = f"{path}.{os.getpid()}.tmp"  # runs sharing one file (side by side on a machine) each write their own
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(partial, "wb") as f:
            f.write(artifacts[0])
        os.replace(partial, path)
    except OSError as error:  # what the start-up check cannot foresee (a full disk): the run goes on without it
        if os.path.exists(partial):
            os.remove(partial)
        return f"compile cache: not written to {path} ({error.strerror}); the next start compiles again"
    return f"compile cache: {len(artifacts[0]) / 2**20:.1f} MiB written to {path} in {time.perf_counter() - start:.1f}s"


def trace_autograd_functions_as_one_call():
    """Before torch.compile: fp8_mlp, fp8_attention_inputs and summed_lookup become one call each in dynamo's graph,
    and AOTAutograd traces their autograd.Functions into the compiled graphs as before (the same ops), where dynamo
    would trace each autograd.Function's forward and backward at every call, at every start, warm ones too (the MLP
    was half of the model's tracing: perf/trace_time.py measures it). AOTAutograd's cache skips graphs that call a
    Python function unless it is marked cacheable (each start would re-trace and re-partition the model); each mark's
    key is the source of what the function runs, so that an edited FP8MLP or FP8AttentionInputs misses instead of
    reusing old graphs."""
    for function, parts in [(fp8_mlp, (FP8MLP, normed_e4m3_scale, to_float8_scaled, float8_scale, to_float8, scaled_mm,
                                       relu_square_grad, sampled_relu_square_scale)),
                            (fp8_attention_inputs, (FP8AttentionInputs, rowwise_float8, rowwise_scaled_mm, to_float8)),
                            (summed_lookup, (SummedLookup,))]:
        torch._dynamo.allow_in_graph(function)
        source = "".join(inspect.getsource(part) for part in (function, *parts))
        name = f"{function.__module__}.{function.__name__}"
        torch._inductor.config.unsafe_marked_cacheable_functions[name] = hashlib.sha256(source.encode()).hexdigest()


def build_optimizers(model: GPT, args: Hyperparameters, comm: Comm):
    hidden = [p for p in model.blocks.parameters() if p.ndim >= 2]
    adam_groups = [dict(params=[model.embed.weight], lr=args.adam_lr * args.embed_lr_mult),
                   dict(params=[e.weight for e in model.value_embeds], lr=args.adam_lr * args.value_embed_lr_mult),
                   dict(params=[model.scalars], lr=args.adam_lr * args.scalar_lr_mult),
                   dict(params=[model.lm_head_w], lr=args.adam_lr * args.head_lr_mult)]
    adam_update_fn, muon_update_fn = adam_update, muon_update
    if args.compile:
        adam_update_fn, muon_update_fn = (torch.compile(update, dynamic=False) for update in (adam_update, muon_update))
    optimizers = [ShardedAdam(adam_groups, (args.adam_beta1, args.adam_beta2), args.adam_eps, comm, adam_update_fn),
                  Muon(hidden, args.muon_lr, args.muon_momentum, args.muon_weight_decay, comm, args.ns_coefficients,
                       args.normuon_beta2 if args.muon_variant == "normuon" else None, muon_update_fn)]
    for opt in optimizers:
        for group in opt.param_groups:
            group["initial_lr"] = group["lr"]
    return optimizers


def tiny_kernel_launches(args: Hyperparameters, device: torch.device) -> list:
    """A launch for each build of the script's own Triton kernels that the custom ops start from compiled code (and the
    MLP backward kernel's start-up check), on 16-row tensors with training's dtypes, widths and pointer alignments:
    what Triton specialises a build on, so that training finds these builds (a miss costs only that build, in warmup
    step 1)."""
    rows, dim, vocab, heads, head_dim = 16, args.model_dim, padded_vocab(args.vocab_size), args.num_heads, args.head_dim
    bf16, e4m3 = dict(device=device, dtype=torch.bfloat16), dict(device=device, dtype=torch.float8_e4m3fn)
    x, w = torch.zeros(rows, dim, **bf16), torch.zeros(rows, dim, device=device)  # w: the fp32 head weight's dtype
    x_f8 = torch.zeros(rows, dim, **e4m3)  # the MLP's and the QKV projection's e4m3 x
    logits = torch.zeros(rows, vocab, **bf16)
    grad = torch.zeros(rows, vocab, device=device, dtype=torch.float8_e5m2)
    targets = torch.zeros(rows + 1, device=device, dtype=torch.int32)[1:]  # as train_batches' window[1:]
    sorted_ids, order = torch.zeros(rows, device=device, dtype=torch.int32).sort()  # the sorted window[:-1]
    table_sums = torch.zeros(vocab, dim, device=device)  # an embedding table's gradient sums, its bf16 rows' gradient
    gate_input, gate_w = torch.zeros(rows, gate_width(dim), **bf16), torch.zeros(heads, gate_width(dim), **bf16)
    launches = [functools.partial(float8_both_ways, x, 1.0), functools.partial(float8_both_ways, w, 1.0),
                functools.partial(softcap_ce_rows, logits, targets, 1.0, grad), functools.partial(transposed, grad),
                functools.partial(add_rows_triton, table_sums, sorted_ids, order, x),
                functools.partial(gate_logits_triton, gate_input, gate_w),
                functools.partial(gate_logits_backward_triton, torch.zeros(rows, heads, **bf16), gate_input, gate_w)]
    if args.fp8_mlp or args.fp8_qkv:  # the MLP's float8_transposed of x and fp8_qkv_weight_grad's of its gradient:
        launches.append(functools.partial(transposed, x_f8))  # e4m3 both, one build (grad_y's e5m2 is grad's)
    if args.fp8_mlp:
        launches.append(functools.partial(one_pass_relu_square_is_exact, device))
    if args.fp8_mlp and not lacks_tma(device):
        fc_f8_t, scale = torch.zeros(args.mlp_ratio * dim, dim, **e4m3), torch.ones((), device=device)
        launches.append(functools.partial(relu_square_up_triton, x_f8, fc_f8_t, scale, scale, scale))
    if attention_kernel_fits(head_dim):
        qkv, heads_shape = torch.zeros(1, rows, 3 * heads, head_dim, **bf16), (1, rows, heads, head_dim)
        cos = sin = torch.zeros(rows, head_dim // 2, device=device)
        lambdas, value_embed = torch.zeros(2, device=device), torch.zeros(heads_shape, **bf16)
        grads = tuple(torch.zeros(heads_shape, **bf16) for _ in range(3))
        for ve in (None, value_embed):
            launches += [functools.partial(attention_inputs_triton, qkv, cos, sin, lambdas, ve),
                         functools.partial(attention_inputs_backward_triton, grads, qkv, cos, sin, lambdas, ve,
                                           rowwise_fp8=args.fp8_qkv)]
        if args.fp8_qkv:  # fp8_qkv_weight_grad's total scale and scaled copy of x's e4m3 copy
            scales, total = torch.zeros(rows, 1, device=device), torch.ones((), device=device)
            launches += [functools.partial(largest_product, scales, scales, WEIGHT_GRAD_X_SCALE_FLOOR),
                         functools.partial(row_scaled_transposed, x_f8, scales, scales, total)]
    return launches


def newton_schulz_builds(muon: Muon, device: torch.device):
    """sym_matmul's builds for the shapes of Muon's matrices, launched as orthogonalize calls it, one after another
    (shapes that Triton specialises alike build once): X X^T of the wide layout and, for a tall matrix, of the first
    iteration's transposed view, then a I + b A + c A A. Submitted to the builds once Muon exists."""
    bf16 = dict(device=device, dtype=torch.bfloat16)
    for rows, cols in sorted({tuple(p.shape[-2:]) for group in muon.param_groups for p in group["params"]}):
        short_side, long_side = min(rows, cols), max(rows, cols)
        sym_matmul_triton(torch.zeros(1, short_side, long_side, **bf16))
        if rows > cols:
            sym_matmul_triton(torch.zeros(1, long_side, short_side, **bf16).mT)
        product = torch.zeros(1, short_side, short_side, **bf16)
        sym_matmul_triton(product, product, 1.0, 0.0, 1.0)


def launchers_one_at_a_time(driver):
    """Threads take turns creating Triton launchers. Triton (3.6) loads each kernel signature's launcher as a C module
    named __triton_launcher; loading one this process loaded before returns the module in sys.modules, whose launch()
    the next such load replaces, so two threads creating launchers at once can each get the other's. A warm start with
    inductor's combo kernels died so in warmup step 1: "function takes exactly 22 arguments (23 given)"
    (perf/NOTES.md, session 55). A turn is a cache hit's milliseconds, or a new launcher's C build; Triton 3.7 and
    newer launch every kernel through one shared launcher, where a turn is the lock alone."""
    shared = driver.launcher_cls
    if getattr(shared, "one_at_a_time", False):
        return
    turn = threading.Lock()

    class OneAtATime(shared):
        one_at_a_time = True

        def __init__(self, *args, **kwargs):
            with turn:
                super().__init__(*args, **kwargs)

    driver.launcher_cls = OneAtATime


BUILDS_SWITCH_INTERVAL = 0.0005  # seconds


class KernelBuilds:
    """tiny_kernel_launches, then newton_schulz_builds, on worker threads, which build the kernels while the main
    thread builds and compiles the model (Triton lets go of the GIL in LLVM and ptxas;
    records/track_1_short/2026-12-02_KernelBuildsAhead); all threads take turns creating launchers. Until finish()
    the interpreter offers the GIL every 0.5 ms instead of 5, so that a thread back from I/O or a C call does not wait
    on the other's Python (records/track_1_short/2026-12-04_BuildsSwitchInterval)."""

    def __init__(self, launches: list, device: torch.device):
        self.started = time.perf_counter()
        if device.type == "cuda":
            launchers_one_at_a_time(triton.runtime.driver.active)
        self.switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(BUILDS_SWITCH_INTERVAL)
        on_gpu = dict(initializer=torch.cuda.set_device, initargs=(device,)) if device.type == "cuda" else {}
        self.pool = ThreadPoolExecutor(len(launches), **on_gpu)  # a thread's CUDA device is its own
        first, *others = launches
        self.submitted = []  # submit()'s
        self.first = self.pool.submit(self.first_then_others, first, others)

    def first_then_others(self, first, others: list) -> tuple[float, list]:
        """The first launch alone, then the others queued (their futures returned): a process's first Triton build
        computes Triton's cache key (a hash of libtriton.so, kept for the process), which every thread computed at
        once otherwise (records/track_1_short/2026-12-04_FirstBuildAlone)."""
        return self.finished_at(first), [self.pool.submit(self.finished_at, launch) for launch in others]

    def submit(self, launch):
        """One more launch, queued for the first free thread."""
        self.submitted.append(self.pool.submit(self.finished_at, launch))

    @staticmethod
    def finished_at(launch) -> float:
        launch()
        return time.perf_counter()

    def finish(self) -> str:
        """Waits for the builds (a failed one raises its error here) and says how long they took."""
        try:
            first_finished, others = self.first.result()
            futures = others + self.submitted
            done = max([first_finished] + [future.result() for future in futures])
        finally:
            self.pool.shutdown()
            sys.setswitchinterval(self.switch_interval)
        return f"startup: {1 + len(futures)} kernel launches built on worker threads in {done - self.started:.1f}s"


# ----------------------------------------------------------------------------------------------
# Warmup: compile timers, the warmup's laps, the analysis of its profiled steps, and the warmup itself (undone)


def compile_phase_seconds() -> dict[str, float]:
    """The compiler's own seconds per phase so far (torch._dynamo's timers, one total per phase; nested phases
    overlap)."""
    names, seconds = torch._dynamo.utils.compile_times(repr="csv", aggregate=True)
    return dict(zip(names, map(float, seconds)))


def compile_phases(count: int = 30) -> str:
    """compile_phase_seconds, longest first: where a cold start's compile goes."""
    longest = sorted(compile_phase_seconds().items(), key=lambda item: -item[1])[:count]
    return ", ".join(f"{name} {value:.1f}" for name, value in longest)


def compiling_seconds() -> float:
    """Seconds the compiler has spent so far (the phase around each frame it compiles)."""
    return compile_phase_seconds().get("_compile.compile_inner", 0.0)


def sync(device: torch.device):
    if device.type == "cuda":
        torch.cuda.synchronize()


class WarmupLaps:
    """How long each part of the warmup took, read on the host after the device's queued work, with the compiler's
    share: the rest of a cold first step is the compiled code's first run (inductor timing the launch
    configurations of its kernels, the script's own Triton kernels built in this process)."""

    def __init__(self, device: torch.device):
        self.device, self.laps = device, []
        self.last, self.last_compiling = time.perf_counter(), compiling_seconds()

    def lap(self, name: str):
        sync(self.device)
        now, compiling = time.perf_counter(), compiling_seconds()
        self.laps.append(f"{name} {now - self.last:.1f}s (compiling {compiling - self.last_compiling:.1f}s)")
        self.last, self.last_compiling = now, compiling

    def __str__(self) -> str:
        return ", ".join(self.laps)


def compile_cache_lookups() -> str:
    """torch.compile's cache lookups so far (AOTAutograd's and inductor's FX graph cache: hits, misses, bypasses):
    a warm start whose compile still takes long shows which cache did not serve it."""
    counters = torch._dynamo.utils.counters
    lookups = {name: count for group in ("aot_autograd", "inductor") for name, count in counters[group].items()
               if "_cache_" in name}
    return ", ".join(f"{name} {count}" for name, count in sorted(lookups.items())) or "none"


def profile_table(run, device: torch.device) -> str:
    """torch.profiler's table of the ops with the most self time while run() runs (--profile_steps), then the GPU's
    idle time and where it falls, with NCCL the communication overlap, and the longest kernels by full name."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as profiler:
        run()
        sync(device)
    sort_by = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    table = profiler.key_averages().table(sort_by=sort_by, row_limit=25, max_name_column_width=60)
    events = profiler.events()
    notes = [line for line in (gpu_idle(events), idle_gaps(events), communication_overlap(events)) if line]
    return "\n".join([table, *notes, *longest_kernels(events)])


def merged(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of intervals as sorted, disjoint intervals."""
    union = []
    for start, end in sorted(intervals):
        if union and start <= union[-1][1]:
            union[-1] = (union[-1][0], max(union[-1][1], end))
        else:
            union.append((start, end))
    return union


def overlap_length(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Total length of the intersection of two sorted, disjoint interval lists."""
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        total += max(0.0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        i, j = (i + 1, j) if a[i][1] < b[j][1] else (i, j + 1)
    return total


def is_kernel(event) -> bool:
    """A kernel in a profile's events: run on the GPU, not the GPU-side span of an annotation such as an optimizer
    step, and not a CPU op."""
    return event.device_type == torch.autograd.DeviceType.CUDA and not event.is_user_annotation


def gpu_idle(events) -> str | None:
    """How long the GPU ran no kernel between the profile's first and last kernel, and inside each optimizer's step
    spans: idle time there means the host queued work slower than the GPU ran it. None without GPU kernels."""
    on_gpu = [event for event in events if event.device_type == torch.autograd.DeviceType.CUDA]
    kernels = merged([(e.time_range.start, e.time_range.end) for e in events if is_kernel(e)])
    if not kernels:
        return None
    span, busy = kernels[-1][1] - kernels[0][0], sum(end - start for start, end in kernels)
    parts = [f"GPU idle {(span - busy) / 1000:.1f} ms of {span / 1000:.1f} ms ({100 * (span - busy) / span:.0f}%)"]
    for name in sorted({e.name for e in on_gpu if e.is_user_annotation and e.name.startswith("Optimizer.step#")}):
        steps = merged([(e.time_range.start, e.time_range.end) for e in on_gpu
                        if e.is_user_annotation and e.name == name])
        total = sum(end - start for start, end in steps)
        parts.append(f"{name.split('#')[1]} idle {(total - overlap_length(steps, kernels)) / 1000:.1f} ms "
                     f"of {total / 1000:.1f} ms")
    return "; ".join(parts)


SHORT_GAP_US = 10  # the longest hand-over from one queued kernel to the next; a longer gap means the host fell behind


def idle_gaps(events, count: int = 3) -> str | None:
    """Where gpu_idle's time falls: in gaps of at most SHORT_GAP_US between kernels (hand-overs on a queued stream,
    which only fewer kernels or CUDA graphs shorten) or in longer ones (the host behind the GPU), and the count
    longest gaps with the kernels on either side. None without a gap."""
    gaps, busy_until, last = [], None, None
    for start, end, name in sorted((e.time_range.start, e.time_range.end, e.name) for e in events if is_kernel(e)):
        if busy_until is not None and start > busy_until:
            gaps.append((start - busy_until, last, name))
        if busy_until is None or end > busy_until:
            busy_until, last = end, name
    if not gaps:
        return None
    short = [length for length, _, _ in gaps if length <= SHORT_GAP_US]
    short_total = sum(short)
    long_total = sum(length for length, _, _ in gaps) - short_total
    longest = ", ".join(f"{length:.0f} us after {before[:40]} before {after[:40]}"
                        for length, before, after in sorted(gaps, reverse=True)[:count])
    return (f"idle gaps: {len(short)} of at most {SHORT_GAP_US} us, {short_total / 1000:.1f} ms; "
            f"{len(gaps) - len(short)} longer, {long_total / 1000:.1f} ms; longest: {longest}")


def longest_kernels(events, count: int = 30) -> list[str]:
    """The GPU kernels with the most total time, one line each with the full name, which the table cuts at 60
    characters (inductor's names list the ops each kernel fuses), and the CPU ops that launched most of it."""
    totals = {}
    for event in events:
        if is_kernel(event):
            total, calls = totals.get(event.name, (0, 0))
            totals[event.name] = (total + event.time_range.end - event.time_range.start, calls + 1)
    longest = sorted(totals.items(), key=lambda item: -item[1][0])[:count]
    launchers, lines = kernel_launchers(events), []
    for name, (total, calls) in longest:
        launcher = f" [from {launchers[name]}]" if launchers.get(name) else ""
        lines.append(f"kernel {total / 1000:.1f} ms in {calls} calls: {name}{launcher}")
    return lines


def kernel_launchers(events, depth: int = 4) -> dict[str, str]:
    """Each GPU kernel's launching CPU op (the profiler links it to the op's kernels) and that op's callers, innermost
    first, for the chain that launched most of its time: names where an untraced copy comes from. Inductor's
    kernels are launched under their own names, which the chain leaves out."""
    time_by_chain = {}
    for event in events:
        for kernel in getattr(event, "kernels", []):
            chain, op = [], event
            while op is not None and len(chain) < depth:
                if op.name != kernel.name:
                    chain.append(op.name)
                op = op.cpu_parent
            key = (kernel.name, " < ".join(chain))
            time_by_chain[key] = time_by_chain.get(key, 0) + kernel.duration
    launchers = {}
    for (name, chain), _ in sorted(time_by_chain.items(), key=lambda item: item[1]):
        launchers[name] = chain  # the longest chain's comes last
    return launchers


def communication_overlap(events) -> str | None:
    """GPU time of the NCCL kernels in a profile and how much of it ran while other kernels ran; None without NCCL."""
    kernels = [(event.time_range.start, event.time_range.end, "nccl" in event.name.lower()) for event in events
               if is_kernel(event)]
    communication = merged([(start, end) for start, end, is_nccl in kernels if is_nccl])
    if not communication:
        return None
    compute = merged([(start, end) for start, end, is_nccl in kernels if not is_nccl])
    total, hidden = sum(end - start for start, end in communication), overlap_length(communication, compute)
    return (f"communication: NCCL kernels {total / 1000:.1f} ms, {hidden / 1000:.1f} ms of it "
            f"({100 * hidden / total:.0f}%) overlapped by compute kernels")


def warmup(model, raw_model: GPT, optimizers, weight_casts, val_tokens: Tensor, windows: dict,
           train_files: list[str], args: Hyperparameters, rank: int, world_size: int,
           device: torch.device) -> tuple[str | None, WarmupLaps]:
    """Compile and run the training and validation paths, then restore the initial state. The last
    profile_steps warmup steps run under torch.profiler. Returns its table (None when there are none) and the
    time each part took."""
    laps = WarmupLaps(device)
    initial_state = copy.deepcopy(dict(model=raw_model.state_dict(), opts=[o.state_dict() for o in optimizers]))
    batches = train_batches(train_files, args.train_seq_len, rank, world_size, device)

    def run_steps(steps):
        for step in steps:
            train_step(model, optimizers, batches, step, args, windows, weight_casts)

    unprofiled = args.warmup_steps - args.profile_steps
    if unprofiled:
        run_steps(range(1))
        laps.lap("step 1")
    if unprofiled > 1:
        run_steps(range(1, unprofiled))
        laps.lap(f"steps 2-{unprofiled}")
    table = None
    if args.profile_steps:
        table = profile_table(lambda: run_steps(range(unprofiled, args.warmup_steps)), device)
        laps.lap(f"steps {unprofiled + 1}-{args.warmup_steps} profiled")
    if args.warmup_steps:
        evaluate(model, val_tokens, args, rank, world_size, windows[1], max_steps=1)
        laps.lap("validation")
    raw_model.load_state_dict(initial_state["model"])
    for opt, state in zip(optimizers, initial_state["opts"]):
        opt.load_state_dict(state)
    laps.lap("state restored")
    return table, laps


def finish_startup(log, builds: KernelBuilds | None, table: str | None, laps: WarmupLaps, args: Hyperparameters,
                   rank: int, device: torch.device, warmup_start: float) -> float:
    """After the warmup: the kernel builds waited for, the compile cache written (rank 0), and what the start-up found
    logged. Returns the start-up's seconds, from the process's start to training's."""
    if builds is not None:
        log.write(builds.finish())
    if device.type == "cuda" and args.fp8_mlp:  # answered by the builds above
        log.write("FP8 MLP backward: one pass (start-up check exact)" if one_pass_relu_square_is_exact(device) else
                  "FP8 MLP backward: two passes (the one-pass kernel failed its start-up check: ptxas "
                  f"{ptxas_in_use()})")
    if table is not None:
        log.write(f"profile of warmup steps {args.warmup_steps - args.profile_steps + 1}-{args.warmup_steps}:"
                  f"\n{table}", console=False)
    if rank == 0 and (note := save_compile_cache(args.compile_cache)) is not None:
        log.write(note)
    if args.compile:
        log.write(f"compile phases (s): {compile_phases()}; cache lookups: {compile_cache_lookups()}", console=False)
    log.write(f"warmup parts: {laps}", console=False)
    startup_s = time.perf_counter() - PROCESS_START
    log.write(f"warmup: {args.warmup_steps} steps in {time.perf_counter() - warmup_start:.1f}s "
              f"(compile included, state restored); training starts at {startup_s:.1f}s")
    return startup_s


# ----------------------------------------------------------------------------------------------
# Training: the step, its schedules, validation, the clock, and the timed loop


def lr_multiplier(step: int, args: Hyperparameters) -> float:
    """1 until the cooldown, then linear down to final_lr_frac at num_iterations, held there for any warmup steps
    past the schedule (more warmup steps than training steps is allowed); 1 throughout with no cooldown."""
    progress = min(step / args.num_iterations, 1.0)
    if args.cooldown_frac == 0 or progress < 1 - args.cooldown_frac:
        return 1.0
    w = (1 - progress) / args.cooldown_frac
    return w + (1 - w) * args.final_lr_frac


def muon_momentum(step: int, args: Hyperparameters) -> float:
    frac = min(step / args.muon_momentum_warmup_steps, 1.0) if args.muon_momentum_warmup_steps else 1.0
    return (1 - frac) * args.muon_momentum_start + frac * args.muon_momentum


def window_blocks_at(step: int, args: Hyperparameters) -> int:
    """Attention window in blocks: linear from window_start to window_end tokens, rounded up, at least one
    (the record's 128 -> 1792 warmup: 1728 * progress rounded up to the next multiple of 128)."""
    progress = min(step / args.num_iterations, 1.0)
    return max(1, math.ceil((args.window_start + (args.window_end - args.window_start) * progress) / BLOCK_SIZE))


def window_tensors(args: Hyperparameters, device: torch.device) -> dict[int, Tensor]:
    """The windows (in blocks) that the warmup steps, the schedule and the warmup's validation use, each a device
    tensor: no host-to-device copy per step, and none made for windows no step uses."""
    steps = range(max(args.num_iterations, args.warmup_steps) + 1)
    used = {1} | {window_blocks_at(step, args) for step in steps}
    return {w: torch.tensor(w, dtype=torch.int32, device=device) for w in sorted(used)}


def flops_per_step(model: GPT, args: Hyperparameters, tokens_per_step: int) -> float:
    """6 x matmul params x tokens, plus attention's two matmuls (12 x width x keys per query, forward and
    backward) with the run's mean window as keys (half of it in S layers)."""
    mean_window = BLOCK_SIZE * sum(window_blocks_at(s, args) for s in range(args.num_iterations)) / args.num_iterations
    keys = sum(min(mean_window / (1 if kind == "L" else 2), args.train_seq_len)
               for kind, block in zip(args.window_pattern, model.blocks) if block.attn is not None)
    width = args.num_heads * args.head_dim
    return 6 * matmul_params(model) * tokens_per_step + 12 * width * keys * tokens_per_step


def set_schedules(optimizers, step: int, args: Hyperparameters):
    for opt in optimizers:
        for group in opt.param_groups:
            group["lr"] = group["initial_lr"] * lr_multiplier(step, args)
            if "momentum" in group:
                group["momentum"] = muon_momentum(step, args)


def train_step(model, optimizers, batches, step: int, args, windows: dict, weight_casts) -> Tensor:
    """One optimizer step over grad_accum_steps micro-batches; returns the mean loss per token (async). weight_casts:
    GPT.weight_casts (compiled or not), called once, before the micro-steps: the weights' float8 casts cost ~6 ms a
    full step when each micro-step made them (perf/NOTES.md, session 62)."""
    window = windows[window_blocks_at(step, args)]
    total = torch.zeros((), device=window.device)
    casts = weight_casts()
    for _ in range(args.grad_accum_steps):
        inputs, targets = next(batches)
        loss = model(inputs, targets, window, casts)
        (loss / args.grad_accum_steps).backward()
        total += loss.detach()
    model.take_table_grads()
    set_schedules(optimizers, step, args)
    for opt in optimizers:
        opt.step()
    model.zero_grad(set_to_none=True)
    return total / (args.grad_accum_steps * args.train_seq_len)


@torch.no_grad()
def evaluate(model, val_tokens: Tensor, args: Hyperparameters, rank: int, world_size: int, window: Tensor,
             max_steps: int | None = None) -> float:
    """The validation loss per token, averaged over the ranks. val_tokens (load_val_tokens: inputs and targets, one
    token longer) is cut into val_seq_len sequences, dealt to the ranks in turn; max_steps (the warmup's 1) caps the
    sequences a rank takes. window: the attention window in blocks, a 0-d tensor (window_tensors). The model runs in
    eval mode, which returns a sequence's mean loss, and is back in train mode after."""
    model.eval()
    steps = args.val_tokens // (world_size * args.val_seq_len)
    steps = min(steps, max_steps or steps)
    total = torch.zeros((), device=val_tokens.device)
    for s in range(steps):
        start = (s * world_size + rank) * args.val_seq_len
        chunk = val_tokens[start:start + args.val_seq_len + 1]
        total += model(chunk[:-1], chunk[1:], window)
    model.train()
    loss = total / steps
    if world_size > 1:
        dist.all_reduce(loss, op=dist.ReduceOp.AVG)
    return loss.item()


def global_batch_tokens(args: Hyperparameters, world_size: int) -> int:
    """Training tokens per optimizer step, all ranks and micro-steps together."""
    return world_size * args.grad_accum_steps * args.train_seq_len


def mark(device: torch.device):
    """A point on the device's timeline (a CUDA event: the host does not wait for queued work)."""
    if device.type != "cuda":
        return time.perf_counter()
    event = torch.cuda.Event(enable_timing=True)
    event.record()
    return event


def to_host_at_mark(value: Tensor, device: torch.device) -> tuple[Tensor, object]:
    """A host copy of value and a mark placed after the copy: once the mark is reached the copy holds value, and
    waiting for the mark does not wait for work queued after it (as a .item() on the device tensor would)."""
    if device.type == "cuda":
        value = torch.empty_like(value, device="cpu", pin_memory=True).copy_(value, non_blocking=True)
    return value, mark(device)


def wait_for(end_mark):
    if isinstance(end_mark, torch.cuda.Event):
        end_mark.synchronize()


def ms_between(start, end) -> float:
    """Milliseconds between two marks; both must have been reached (after a sync or wait_for)."""
    return start.elapsed_time(end) if isinstance(start, torch.cuda.Event) else 1000 * (end - start)


class TrainingClock:
    """The speedrun clock: it runs during training steps and stops for validation. The time it spends
    stopped is kept as validation_s, for the run's closing time line."""

    def __init__(self, device: torch.device):
        self.device, self.total_ms, self.validation_s, self.stopped = device, 0.0, 0.0, None

    def start(self):
        sync(self.device)
        self.started, self.started_mark = time.perf_counter(), mark(self.device)
        if self.stopped is not None:
            self.validation_s += self.started - self.stopped

    def stop(self):
        sync(self.device)
        self.stopped = time.perf_counter()
        self.total_ms += 1000 * (self.stopped - self.started)

    def ms_at(self, end_mark) -> float:
        return self.total_ms + ms_between(self.started_mark, end_mark)


def log_train_loss(log, pending: tuple, clock: TrainingClock, args: Hyperparameters) -> str | None:
    """Log a step's loss, read one step late from its host copy: the host waits for that step only, so the next
    step, queued meanwhile, keeps the device busy. The step's time comes from the mark placed when it ended. Returns
    why the run stops where the loss is not finite, else None."""
    step, host_loss, end_mark = pending
    wait_for(end_mark)
    value = host_loss.item()
    elapsed = clock.ms_at(end_mark)
    log.write(f"step:{step}/{args.num_iterations} train_loss:{value:.4f} "
              f"train_time:{elapsed:.0f}ms step_avg:{elapsed / step:.2f}ms")
    return None if math.isfinite(value) else f"non-finite train loss at step {step}"


def validation_line(step: int, val_loss: float, training_ms: float, args: Hyperparameters,
                    tokens_per_step: int, flops: float, world_size: int) -> str:
    line = f"step:{step}/{args.num_iterations} val_loss:{val_loss:.4f} train_time:{training_ms:.0f}ms"
    if step:
        step_avg = training_ms / step
        mfu = flops / (step_avg / 1000) / (args.peak_tflops * 1e12 * world_size)
        line += (f" step_avg:{step_avg:.2f}ms tokens/s:{tokens_per_step / step_avg * 1000:.0f}"
                 f" mfu:{100 * mfu:.1f}%")
    return line


def train(model, optimizers, weight_casts, batches, val_tokens: Tensor, windows: dict, log, clock: TrainingClock,
          args: Hyperparameters, rank: int, world_size: int, device: torch.device, flops: float) -> str | None:
    """Training steps with validation every val_loss_every steps and at the end, timed by clock.
    Returns which loss was not finite at which step (the run stops there), else None."""
    tokens_per_step = global_batch_tokens(args, world_size)
    pending = None
    clock.start()
    for step in range(args.num_iterations + 1):
        last_step = step == args.num_iterations
        if last_step or (args.val_loss_every and step % args.val_loss_every == 0):
            if pending is not None and (stop := log_train_loss(log, pending, clock, args)):
                return stop
            pending = None
            clock.stop()
            val_loss = evaluate(model, val_tokens, args, rank, world_size, windows[window_blocks_at(step, args)])
            log.write(validation_line(step, val_loss, clock.total_ms, args, tokens_per_step, flops, world_size))
            clock.start()
            if not math.isfinite(val_loss):  # the same on every rank (averaged)
                return f"non-finite validation loss at step {step}"
        if last_step:
            return None
        if step == 0:  # the benchmark's start-up time: process start to the first timed step
            log.write(f"startup: first timed step at {time.perf_counter() - PROCESS_START:.1f}s")
        loss = train_step(model, optimizers, batches, step, args, windows, weight_casts)
        if world_size > 1:
            dist.all_reduce(loss, op=dist.ReduceOp.AVG)
        if pending is not None and (stop := log_train_loss(log, pending, clock, args)):
            return stop
        pending = (step + 1, *to_host_at_mark(loss, device))


# ----------------------------------------------------------------------------------------------
# Main: checks, setup, warmup, training; a setting, data or memory error, or a signal, ends a run in one line


def main():
    args = parse_args(sys.argv[1:])
    world_size, rank, local_rank = launch_ranks()
    configure_cublaslt()  # before check_settings: its GPU check runs a GEMM
    check_settings(args, world_size)
    args.grad_accum_steps = args.grad_accum_steps or 8 // world_size
    train_files, val_files = check_data(args, world_size, args.grad_accum_steps)
    if args.check_only:
        if rank == 0:
            print(f"ok: settings, data and device checked for world size {world_size}")
        return

    configure_triton_builds()  # before any of our kernels is built
    device = set_up_device(args, local_rank)
    comm = join_processes(device, rank, world_size)
    builds = KernelBuilds(tiny_kernel_launches(args, device), device) if device.type == "cuda" else None
    cache_note = load_compile_cache(args.compile_cache)
    log = open_log(args, rank, world_size)
    log.write(f"startup: settings and data checked{', compile cache loaded' if cache_note else ''}, log opened at "
              f"{time.perf_counter() - PROCESS_START:.1f}s")
    for note in setup_notes(args, world_size):
        log.write(note)
    if cache_note is not None:
        log.write(cache_note)
    torch.manual_seed(args.seed)
    with torch.device(device):  # built in place: initialising on the CPU took 5.4 s of the start on the H200 machine
        raw_model = GPT(args)
    model, weight_casts = raw_model, raw_model.weight_casts
    if args.compile:
        trace_autograd_functions_as_one_call()
        model, weight_casts = torch.compile(raw_model, dynamic=False), torch.compile(weight_casts, dynamic=False)
    optimizers = build_optimizers(raw_model, args, comm)
    if builds is not None:
        builds.submit(functools.partial(newton_schulz_builds, optimizers[-1], device))
    val_tokens = load_val_tokens(val_files, args.val_tokens, device)
    windows = window_tensors(args, device)
    flops = flops_per_step(raw_model, args, global_batch_tokens(args, world_size))
    log.write(f"startup: model and optimizers built at {time.perf_counter() - PROCESS_START:.1f}s; "
              f"{matmul_params(raw_model):,} matmul params, {flops:.3e} FLOPs per step")

    warmup_start = time.perf_counter()
    table, laps = warmup(model, raw_model, optimizers, weight_casts, val_tokens, windows, train_files, args, rank,
                         world_size, device)
    startup_s = finish_startup(log, builds, table, laps, args, rank, device, warmup_start)

    batches = train_batches(train_files, args.train_seq_len, rank, world_size, device)
    clock = TrainingClock(device)
    stop = train(model, optimizers, weight_casts, batches, val_tokens, windows, log, clock, args, rank, world_size,
                 device, flops)
    end_run(log, stop, clock, startup_s, rank, world_size, device)


def end_run(log, stop: str | None, clock: TrainingClock, startup_s: float, rank: int, world_size: int,
            device: torch.device):
    """The run's closing lines (why it stopped short, where it did; its times; the GPU's peak memory), then its exit:
    the process group left, and status 1 where it stopped short."""
    if stop is not None:
        clock.stop()  # train returned with it running: its last steps count in the time line
        line = f"stopped: {stop}; lower the learning rates or check the data"
        log.write(line)
        tell_launcher(line, shown=rank == 0)
    log.write(f"time: startup {startup_s:.1f}s, training {clock.total_ms / 1000:.1f}s, "
              f"validation {clock.validation_s:.1f}s, total {time.perf_counter() - PROCESS_START:.1f}s")
    if device.type == "cuda":
        log.write(f"peak memory allocated: {torch.cuda.max_memory_allocated() // 2**20} MiB "
                  f"reserved: {torch.cuda.max_memory_reserved() // 2**20} MiB")
    exit_code = 0 if stop is None else 1
    if world_size > 1:
        dist.destroy_process_group()
        if device.type == "cpu":  # gloo's threads can abort a process in interpreter teardown (torch 2.13)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(exit_code)
    if exit_code:
        sys.exit(exit_code)


def report_error(line: str, console: bool):
    """An error's one line: the log's last line once it is open, the console's where console, torchrun's summary's."""
    ERROR_LOG.write(line, console=False)
    if console:
        print(line, file=sys.stderr)
    tell_launcher(line, shown=console)


def exit_with_setup_error(error: SetupError):
    """A setting or data error: one line on rank 0's console (every rank's, for a launch error: prints_errors), and
    the log's last line once it is open; exit code 2."""
    report_error(f"error: {error}", prints_errors(error))
    sys.exit(2)


def exit_when_stopped(stopped: Stopped):
    """A signal: one line on the console (rank 0's) and as the log's last line; exit status 128 + the signal, as a
    shell gives a process the signal ends, without the interpreter's teardown (gloo's threads can abort it, and
    kernel builds in flight would hold it up)."""
    for signum in SIGNALS_THAT_STOP:  # torchrun sends SIGTERM after a Ctrl-C the ranks got too: one line still
        signal.signal(signum, signal.SIG_IGN)
    report_error(f"error: {stopped}", prints_errors(stopped))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(128 + stopped.signum)


def prints_errors(error: BaseException) -> bool:
    """Whether this process prints error's line: rank 0 (every rank finds the same), and any process whose launch
    variables are themselves the error."""
    if isinstance(error, LaunchError):
        return True
    try:
        return launch_ranks()[1] == 0
    except LaunchError:
        return True


def out_of_memory_phase(error: RuntimeError) -> tuple[str, str]:
    """Where the run ran out of memory, by the functions its traceback passes through, and the settings to lower
    there: building the model and optimizers (their sizes), validation (its sequence length) or training (its)."""
    codes = {frame.f_code for frame, _ in traceback.walk_tb(error.__traceback__)}
    if codes & {GPT.__init__.__code__, build_optimizers.__code__}:
        return "building the model", ("lower --model_dim, --num_layers, --mlp_ratio or --vocab_size (the model's "
                                      "size: they change the method)")
    if inspect.unwrap(evaluate).__code__ in codes:  # not no_grad's wrapper, which the optimizers' steps share
        return "in validation", "lower --val_seq_len (a multiple of 128 that divides --val_tokens / world size)"
    return "in training", ("lower --train_seq_len (a multiple of 128; a shorter sequence changes the batch and so the "
                           "result)")


def exit_with_out_of_memory(error: RuntimeError):
    """A GPU (or, in a CPU run, the machine) too small for the settings: one line naming the settings to lower
    (out_of_memory_phase), on the console of each rank that ran out and as the log's last line; exit code 2."""
    where, fix = out_of_memory_phase(error)
    gpu, message = isinstance(error, torch.OutOfMemoryError), first_line(error)
    message = message if gpu else message.split("DefaultCPUAllocator: ")[-1]  # after its source position
    torch_says = ". ".join(message.split(". ")[:3]).rstrip(".")
    world_size, rank, _ = launch_ranks()  # valid: main checked them before anything could run out of memory
    who = f"rank {rank}: " if world_size > 1 else ""
    line = (f"error: {who}out of {'GPU' if gpu else 'CPU'} memory {where} ({torch_says}); {fix}, or stop the "
            f"{'GPU' if gpu else 'machine'}'s other processes")
    report_error(line, console=True)
    sys.exit(2)


if __name__ == "__main__":
    report_crashes()
    handlers = stop_on_signals()
    try:
        main()
    except SetupError as error:
        exit_with_setup_error(error)
    except torch.OutOfMemoryError as error:
        exit_with_out_of_memory(error)
    except RuntimeError as error:
        if "DefaultCPUAllocator" not in str(error):  # out of memory in a CPU run
            raise
        exit_with_out_of_memory(error)
    except Stopped as stopped:
        exit_when_stopped(stopped)
    finally:  # the run is over: a signal in the interpreter's teardown ends it as Python's own handlers would
        restore_signals(handlers)
