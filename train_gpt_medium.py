"""NanoGPT speedrun, track 2: GPT-2 medium's width (16 blocks, ~249M matmul weights) to 2.92 val loss on FineWeb
with 8 GPUs.

Launch: ./run.sh medium  (or: torchrun --standalone --nproc_per_node=8 train_gpt_medium.py [--name=value ...])
Every setting is a field of Hyperparameters below; --help lists them with their defaults.
The log (logs/<run_id>.txt) starts with this file's exact source, so any run can be re-run.
"Record 7" below is the public track-2 record this script started from (25.29 min on 8xH100, 6450 steps).
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
from torch.nn.attention.flex_attention import BlockMask, flex_attention
from triton.tools.tensor_descriptor import TensorDescriptor

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
    train_seq_len: int = setting(64 * 1024, "tokens per rank per micro-step (multiple of 128)")
    val_seq_len: int = setting(4 * 64 * 1024, "tokens per rank per validation step (multiple of 128)")
    grad_accum_steps: int = setting(0, "micro-steps per step; 0 = 8 // world_size (same global batch)")
    # schedule
    num_iterations: int = setting(6450, "optimizer steps")
    cooldown_frac: float = setting(0.6, "fraction of steps at the end with linearly decaying lr")
    final_lr_frac: float = setting(0.0, "lr multiplier reached at the last step")
    val_loss_every: int = setting(125, "validate every N steps (0 = only at the end)")
    window_start: int = setting(0, "attention window (tokens) at step 0, rounded up to 128-token blocks (min 1)")
    window_end: int = setting(1728, "attention window (tokens) at the last step, rounded up: 1728 -> 1792")
    # model
    vocab_size: int = setting(50257, "GPT-2 vocabulary (padded to a multiple of 128 inside)")
    num_layers: int = setting(16, "transformer blocks (at least 6)")
    model_dim: int = setting(1024, "residual stream width")
    num_heads: int = setting(8, "attention heads (num_heads x head_dim = model_dim)")
    head_dim: int = setting(128, "width of each head (multiple of 4)")
    mlp_ratio: int = setting(4, "MLP hidden width = mlp_ratio * model_dim")
    mlp_epilogue: bool = setting(True, "MLP GEMMs in Triton with relu-square in their epilogues (the up projection "
                                 "writes only a = relu(h)^2, the backward's grad_y @ proj_w writes 2 sqrt(a) times "
                                 "it); needs sm_90 on a GPU")
    no_attention_layer: int = setting(7, "index of the block without attention (-1 = none)")
    window_pattern: str = setting("LSSSLSSSSSSLSSSL", "per block: L = long window, S = short (half)")
    skip_connections: str = setting("6>9,4>10,2>11", "a>b: block a's output, times a learned weight, joins "
                                    "block b's input (pairs past num_layers are unused)")
    # optimizers
    muon_lr: float = setting(0.025, "Muon learning rate (hidden matrices)")
    muon_momentum: float = setting(0.95, "Muon momentum after warmup")
    muon_momentum_start: float = setting(0.85, "Muon momentum at step 0")
    muon_momentum_warmup_steps: int = setting(300, "steps of linear momentum warmup")
    muon_weight_decay: float = setting(0.01, "Muon weight decay: p *= 1 - lr * weight_decay")
    mlp_weight_decay_mult: float = setting(2.0, "weight decay multiplier of the MLP matrices")
    embed_lr: float = setting(0.3, "Adam lr of the token and value embeddings")
    scalar_lr: float = setting(0.015, "Adam lr of the scalar weights")
    head_lr: float = setting(1 / 320, "Adam lr of the lm_head")
    adam_beta1: float = setting(0.8, "Adam beta1")
    adam_beta2: float = setting(0.95, "Adam beta2")
    adam_eps: float = setting(1e-10, "Adam epsilon")
    # run
    warmup_steps: int = setting(10, "compile-warmup steps before the clock, undone afterwards")
    profile_steps: int = setting(0, "profile the last N warmup steps; the op table goes to the log")
    seed: int = setting(0, "seed of the parameter initialisation")
    device: str = setting("cuda", "cuda, or cpu for tiny test runs")
    compile: bool = setting(True, "torch.compile the model and both optimizers' updates")
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
    lines = ["usage: torchrun --standalone --nproc_per_node=N train_gpt_medium.py [--name=value ...]", ""]
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


def skip_pairs(args: Hyperparameters) -> list[tuple[int, int]]:
    """The (source, target) blocks of --skip_connections that this model has; a malformed value raises SetupError
    (check_shapes calls it for that alone)."""
    pairs = []
    for item in filter(None, args.skip_connections.split(",")):
        match = re.fullmatch(r"(\d+)>(\d+)", item.strip())
        if match is None or int(match[1]) >= int(match[2]):
            # no '>' at all: most likely typed unquoted, the shell's redirect took the rest of the value
            shell = "" if ">" in args.skip_connections else (
                "; in a shell, quote the setting ('--skip_connections=6>9,4>10'): an unquoted > sends the output to "
                "a file")
            raise SetupError(f"--skip_connections={args.skip_connections}: write pairs a>b with a < b, "
                             f"comma-separated, e.g. 6>9,4>10{shell}")
        if int(match[2]) < args.num_layers:
            pairs.append((int(match[1]), int(match[2])))
    return pairs


# ----------------------------------------------------------------------------------------------
# Fused head: the training loss is the graph's end, so the head computes its own gradients in the forward; a Triton
# kernel takes each row of logits to its loss and overwrites it with the loss's gradient (one read for the
# logsumexp, one read and one write for the gradient), and no tokens x vocabulary tensor outlives the op


def softcap(logits: Tensor) -> Tensor:
    """ISRU logit cap to (-15, 15): 15 z / sqrt(z^2 + 225); replaced 30 sigmoid(z / 7.5) in record 7."""
    return 15 * logits * torch.rsqrt(logits.square() + 225)


ISRU_LOG2 = tl.constexpr(15 * math.log2(math.e))  # exp(softcap(z)) = 2^(ISRU_LOG2 * z / sqrt(z^2 + 225))
LN2 = tl.constexpr(math.log(2))


@triton.jit
def capped_log2(z):
    """softcap(z) in base 2: log2(exp(15 z / sqrt(z^2 + 225)))."""
    return z * tl.rsqrt(z * z + 225.0) * ISRU_LOG2


@triton.jit
def exp2_of(x, ON_GPU: tl.constexpr):
    """2^x in fp32: one ex2.approx.ftz on the GPU, where tl.exp2's ex2.approx adds a compare and two predicated
    multiplies for subnormal results, which no entry here needs; tl.exp2 under Triton's interpreter (no inline asm)."""
    if ON_GPU:
        return tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True,
                                         pack=1)
    return tl.exp2(x)


@triton.jit
def exp2_on_fma(x):
    """2^x in fp32 for |x| < 126 without the special-function unit (FlashAttention-4's trick): x = n + f, n the
    nearest integer (rounded by adding 1.5 * 2^23), 2^f for f in [-1/2, 1/2] by a cubic (relative error 7.5e-5),
    and n added to its exponent bits. 8 FMA-unit and integer instructions."""
    shifted = x + 12582912.0
    f = x - (shifted - 12582912.0)
    power = ((0.055171669 * f + 0.24261115) * f + 0.69326097) * f + 0.99992806
    return (power.to(tl.int32, bitcast=True) + (shifted.to(tl.int32, bitcast=True) << 23)).to(tl.float32,
                                                                                                bitcast=True)


@triton.jit(do_not_specialize_on_alignment=["targets_ptr"])  # targets: the window one token in
def softcap_ce_kernel(logits_ptr, targets_ptr, loss_ptr, vocab, row_stride, BLOCK: tl.constexpr,
                      ON_GPU: tl.constexpr):
    """Each entry costs one rsqrt and one exp2 a pass (the special-function unit bounds the kernel; the first pass
    moves half of its exp2s to the FMA units), the constants folded: the sums in base 2, the loss back in base e."""
    row = tl.program_id(0).to(tl.int64)
    row_logits = logits_ptr + row * row_stride
    # capped logits lie in (-15, 15): 2^(...) cannot overflow, no max needed. Half of each block's exps go to the
    # FMA units, which the first pass leaves idle: it would otherwise wait on two special-function ops an entry
    total = tl.zeros([BLOCK // 2], tl.float32)
    for start in range(0, vocab, BLOCK):
        cols = start + tl.arange(0, BLOCK // 2)
        z = tl.load(row_logits + cols, mask=cols < vocab, other=0.0).to(tl.float32)
        total += tl.where(cols < vocab, exp2_of(capped_log2(z), ON_GPU), 0.0)
        cols += BLOCK // 2
        z = tl.load(row_logits + cols, mask=cols < vocab, other=0.0).to(tl.float32)
        total += tl.where(cols < vocab, exp2_on_fma(capped_log2(z)), 0.0)
    log2_sum = tl.log2(tl.sum(total, axis=0))
    target = tl.load(targets_ptr + row)
    z_target = tl.load(row_logits + target).to(tl.float32)
    tl.store(loss_ptr + row, (log2_sum - capped_log2(z_target)) * LN2)
    for start in range(0, vocab, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        z = tl.load(row_logits + cols, mask=cols < vocab, other=0.0).to(tl.float32)
        inv = tl.rsqrt(z * z + 225.0)
        softmax = exp2_of(z * inv * ISRU_LOG2 - log2_sum, ON_GPU)
        grad = (softmax - tl.where(cols == target, 1.0, 0.0)) * (3375.0 * inv * inv * inv)  # d cap / dz = 15^3 inv^3
        tl.store(row_logits + cols, grad.to(logits_ptr.dtype.element_ty), mask=cols < vocab)


CE_BLOCK = 2048  # a row's entries per loop pass: 8 a thread at 8 warps, 16-byte bf16 loads and stores (the first
# pass loads it in two halves)


def softcap_ce_in_place(logits: Tensor, targets: Tensor) -> Tensor:
    """Each row's cross entropy of softcap(logits); logits (tokens x vocabulary, contiguous) becomes its gradient."""
    rows, vocab = logits.shape
    loss = logits.new_empty(rows, dtype=torch.float32)
    softcap_ce_kernel[(rows,)](logits, targets, loss, vocab, logits.stride(0), BLOCK=CE_BLOCK, ON_GPU=logits.is_cuda,
                               num_warps=8)
    return loss


@torch.library.custom_op("nanogpt_medium::head_ce", mutates_args=())
def head_ce(x: Tensor, w: Tensor, targets: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Summed cross entropy of softcap(x @ w.T) (x: tokens x dim, w: vocabulary x dim, both bf16) and its gradients
    for x and w. CUDA, or Triton's interpreter on CPU tensors."""
    grad_logits = x @ w.T
    loss = softcap_ce_in_place(grad_logits, targets).sum()
    return loss, grad_logits @ w, grad_logits.T @ x


@head_ce.register_fake
def _(x, w, targets):
    return x.new_empty((), dtype=torch.float32), torch.empty_like(x), torch.empty_like(w)


def _head_ce_setup_context(ctx, inputs, output):
    ctx.save_for_backward(*output[1:])


def _head_ce_grad(ctx, grad_loss, *_):
    grad_x, grad_w = ctx.saved_tensors
    return grad_x * grad_loss, grad_w * grad_loss, None


head_ce.register_autograd(_head_ce_grad, setup_context=_head_ce_setup_context)


# ----------------------------------------------------------------------------------------------
# Attention inputs: q and k RMS-normed and rotated, v normed and mixed with the value embedding, one Triton kernel each
# way; the backward writes the whole qkv gradient (inductor's two kernels for this moved ~2 TB/s, half a copy's rate;
# track 1's op, with normed values)

RMS_EPS = torch.finfo(torch.float32).eps  # F.rms_norm's default for bf16 inputs (its computation dtype's)


def rms_norm(x: Tensor) -> Tensor:
    return F.rms_norm(x, (x.size(-1),))


def reciprocal_rms(x: Tensor) -> Tensor:
    """Each row's 1 / RMS in float32, with F.rms_norm's eps: rms_norm(x) = reciprocal_rms(x)[:, None] * x."""
    return torch.rsqrt(x.float().square().mean(-1) + RMS_EPS)


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
def norm_rotate_rows_backward(qkv_ptr, grad_ptr, grad_qkv_ptr, src, grad_at, mask, cos, sin, eps,
                              HALF: tl.constexpr):
    """norm_rotate_rows' gradient: rotated back, then through the norm, into qkv's rows."""
    y1, y2, scale = normed_halves(qkv_ptr, src, mask, eps, HALF)
    g1, g2 = load_halves(grad_ptr, grad_at, mask, HALF)
    g1, g2 = norm_backward(y1, y2, scale, g1 * cos - g2 * sin, g1 * sin + g2 * cos, HALF)
    store_halves(grad_qkv_ptr, src, mask, g1, g2, HALF)


@triton.jit
def row_addresses(rows, heads, BLOCK_ROWS: tl.constexpr, HALF: tl.constexpr):
    """A block of (token, head) rows: q's offsets in qkv (tokens x 3 heads x head_dim; k's are heads rows later, v's
    twice that), the offsets in a tokens x heads x head_dim tensor, in the tokens x head_dim / 2 tables, the mask."""
    r = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    c = tl.arange(0, HALF)[None, :]
    token, head = r // heads, r % heads
    src = (token * 3 * heads + head).to(tl.int64)[:, None] * (2 * HALF) + c
    dst = r.to(tl.int64)[:, None] * (2 * HALF) + c
    return src, dst, token.to(tl.int64)[:, None] * HALF + c, (r < rows)[:, None]


# lambdas: a block's two scalars, at an offset into their parameter that differs by block: not specialised on their
# alignment, so that each kernel has one build per value-embedding variant instead of two
@triton.jit(do_not_specialize_on_alignment=["lambdas_ptr"])
def attention_inputs_kernel(qkv_ptr, cos_ptr, sin_ptr, lambdas_ptr, ve_ptr, q_ptr, k_ptr, v_ptr, rows, heads, eps,
                            HALF: tl.constexpr, BLOCK_ROWS: tl.constexpr, HAS_VE: tl.constexpr):
    src, dst, table, mask = row_addresses(rows, heads, BLOCK_ROWS, HALF)
    cos, sin = tl.load(cos_ptr + table, mask=mask, other=0.0), tl.load(sin_ptr + table, mask=mask, other=0.0)
    norm_rotate_rows(qkv_ptr, q_ptr, src, dst, mask, cos, sin, eps, HALF)
    norm_rotate_rows(qkv_ptr, k_ptr, src + heads * 2 * HALF, dst, mask, cos, sin, eps, HALF)
    v1, v2, _ = normed_halves(qkv_ptr, src + heads * 4 * HALF, mask, eps, HALF)
    v1, v2 = v1 * tl.load(lambdas_ptr), v2 * tl.load(lambdas_ptr)
    if HAS_VE:
        e1, e2 = load_halves(ve_ptr, dst, mask, HALF)
        v1, v2 = v1 + e1 * tl.load(lambdas_ptr + 1), v2 + e2 * tl.load(lambdas_ptr + 1)
    store_halves(v_ptr, dst, mask, v1, v2, HALF)


@triton.jit(do_not_specialize_on_alignment=["lambdas_ptr"])
def attention_inputs_backward_kernel(qkv_ptr, cos_ptr, sin_ptr, lambdas_ptr, ve_ptr, grad_q_ptr, grad_k_ptr,
                                     grad_v_ptr, grad_qkv_ptr, grad_ve_ptr, lambda_sums_ptr, rows, heads, eps,
                                     grad_token_stride, grad_head_stride, HALF: tl.constexpr, BLOCK_ROWS: tl.constexpr,
                                     HAS_VE: tl.constexpr):
    """The gradients of qkv (all of it) and of the value embedding, and this block's sums for the two lambdas'. The
    incoming gradients may have any token and head strides (FlexAttention's backward picks their layout)."""
    src, dst, table, mask = row_addresses(rows, heads, BLOCK_ROWS, HALF)
    r = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    at = (r // heads).to(tl.int64) * grad_token_stride + (r % heads).to(tl.int64) * grad_head_stride
    grad_at = at[:, None] + tl.arange(0, HALF)[None, :]
    cos, sin = tl.load(cos_ptr + table, mask=mask, other=0.0), tl.load(sin_ptr + table, mask=mask, other=0.0)
    norm_rotate_rows_backward(qkv_ptr, grad_q_ptr, grad_qkv_ptr, src, grad_at, mask, cos, sin, eps, HALF)
    norm_rotate_rows_backward(qkv_ptr, grad_k_ptr, grad_qkv_ptr, src + heads * 2 * HALF, grad_at, mask, cos, sin,
                              eps, HALF)
    g1, g2 = load_halves(grad_v_ptr, grad_at, mask, HALF)
    v1, v2, scale = normed_halves(qkv_ptr, src + heads * 4 * HALF, mask, eps, HALF)
    n1, n2 = norm_backward(v1, v2, scale, g1 * tl.load(lambdas_ptr), g2 * tl.load(lambdas_ptr), HALF)
    store_halves(grad_qkv_ptr, src + heads * 4 * HALF, mask, n1, n2, HALF)
    tl.store(lambda_sums_ptr + 2 * tl.program_id(0), tl.sum(tl.sum(g1 * v1 + g2 * v2, 1), 0))
    if HAS_VE:
        e1, e2 = load_halves(ve_ptr, dst, mask, HALF)
        store_halves(grad_ve_ptr, dst, mask, g1 * tl.load(lambdas_ptr + 1), g2 * tl.load(lambdas_ptr + 1), HALF)
        tl.store(lambda_sums_ptr + 2 * tl.program_id(0) + 1, tl.sum(tl.sum(g1 * e1 + g2 * e2, 1), 0))
    else:
        tl.store(lambda_sums_ptr + 2 * tl.program_id(0) + 1, 0.0)


ATTENTION_INPUTS_LAUNCH = (16, 4)  # BLOCK_ROWS, num_warps


def attention_inputs_torch(qkv: Tensor, cos: Tensor, sin: Tensor, lambdas: Tensor,
                           ve: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    """The op in torch ops (the CPU's path, and the kernels' reference): qkv is batch x tokens x 3 heads x head_dim,
    cos and sin tokens x head_dim / 2, ve batch x tokens x heads x head_dim."""
    q, k, v = qkv.chunk(3, dim=-2)
    q, k = (rotated(rms_norm(x), cos, sin) for x in (q, k))
    v = rms_norm(v)
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
                                     lambdas: Tensor, ve: Tensor | None, launch: tuple = ATTENTION_INPUTS_LAUNCH):
    """The gradients of qkv, of the two lambdas and of the value embedding (None without one)."""
    grad_q, grad_k, grad_v = (g.reshape(-1, *g.shape[-2:]) for g in grads)  # tokens x heads x head_dim views
    if len({g.stride() for g in (grad_q, grad_k, grad_v)}) > 1 or grad_q.stride(-1) != 1:
        grad_q, grad_k, grad_v = (g.contiguous() for g in (grad_q, grad_k, grad_v))
    qkv, ve = qkv.contiguous(), ve.contiguous() if ve is not None else None
    heads, head_dim = qkv.size(-2) // 3, qkv.size(-1)
    rows, (block_rows, num_warps) = qkv.numel() // (3 * head_dim), launch
    blocks = triton.cdiv(rows, block_rows)
    grad_qkv, lambda_sums = torch.empty_like(qkv), qkv.new_empty(blocks, 2, dtype=torch.float32)
    grad_ve = torch.empty_like(ve) if ve is not None else None
    attention_inputs_backward_kernel[(blocks,)](
        qkv, cos, sin, lambdas, ve if ve is not None else qkv, grad_q, grad_k, grad_v, grad_qkv,
        grad_ve if ve is not None else grad_qkv, lambda_sums, rows, heads, RMS_EPS, grad_q.stride(0),
        grad_q.stride(1), HALF=head_dim // 2, BLOCK_ROWS=block_rows, HAS_VE=ve is not None, num_warps=num_warps)
    return grad_qkv, lambda_sums.sum(0).to(lambdas.dtype), grad_ve


def norm_grad(x: Tensor, grad: Tensor) -> Tensor:
    """The gradient of x (fp32) for rms_norm(x), given the output's."""
    scale = reciprocal_rms(x)[..., None]
    y = x * scale
    return scale * (grad - y * (grad * y).mean(-1, keepdim=True))


def norm_rotary_grad(x: Tensor, grad: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """The gradient of x (fp32) for rotated(rms_norm(x)), given the output's."""
    g1, g2 = grad.chunk(2, dim=-1)
    return norm_grad(x, torch.cat((g1 * cos - g2 * sin, g1 * sin + g2 * cos), dim=-1))


def attention_inputs_backward_torch(grads: tuple[Tensor, Tensor, Tensor], qkv: Tensor, cos: Tensor, sin: Tensor,
                                    lambdas: Tensor, ve: Tensor | None):
    """attention_inputs_backward_triton's formulas in torch ops, in fp32 (a custom op's own code runs without
    autograd, so this path, taken on the CPU and for head sizes the kernel does not fit, cannot ask autograd for
    them)."""
    grad_q, grad_k, grad_v = (g.float() for g in grads)
    q, k, v = qkv.float().chunk(3, dim=-2)
    cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    grad_qkv = torch.cat((norm_rotary_grad(q, grad_q, cos, sin), norm_rotary_grad(k, grad_k, cos, sin),
                          norm_grad(v, lambdas[0] * grad_v)), dim=-2)
    ve_sum = (grad_v * ve.float()).sum() if ve is not None else grad_v.new_zeros(())
    grad_lambdas = torch.stack([(grad_v * rms_norm(v)).sum(), ve_sum]).to(lambdas.dtype)
    grad_ve = (lambdas[1] * grad_v).to(ve.dtype) if ve is not None else None
    return grad_qkv.to(qkv.dtype), grad_lambdas, grad_ve


def attention_kernel_fits(head_dim: int) -> bool:
    """The kernels take heads whose head_dim / 2 is a power of two (a Triton block's width)."""
    half = head_dim // 2
    return half & (half - 1) == 0


def takes_attention_kernel(qkv: Tensor) -> bool:
    """On the GPU, for one sequence (the model's batch of 1): the kernels take a row's rotary angles at its token's
    index among all batch x tokens rows, past the tables for a second sequence's rows."""
    return qkv.is_cuda and qkv.size(0) == 1 and attention_kernel_fits(qkv.size(-1))


@torch.library.custom_op("nanogpt_medium::attention_inputs", mutates_args=())
def attention_inputs(qkv: Tensor, cos: Tensor, sin: Tensor, lambdas: Tensor,
                     ve: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    """q and k RMS-normed and rotated, rms_norm(v) * lambdas[0] (+ ve * lambdas[1]): the kernel on the GPU, torch
    elsewhere (and where head_dim / 2 is not a power of two, or for a batch of several sequences)."""
    if not takes_attention_kernel(qkv):
        return tuple(t.contiguous() for t in attention_inputs_torch(qkv, cos, sin, lambdas, ve))
    return attention_inputs_triton(qkv, cos, sin, lambdas, ve)


@attention_inputs.register_fake
def _(qkv, cos, sin, lambdas, ve):
    batch, tokens, heads3, head_dim = qkv.shape
    return tuple(qkv.new_empty(batch, tokens, heads3 // 3, head_dim) for _ in range(3))


@torch.library.custom_op("nanogpt_medium::attention_inputs_backward", mutates_args=())
def attention_inputs_backward(grad_q: Tensor, grad_k: Tensor, grad_v: Tensor, qkv: Tensor, cos: Tensor, sin: Tensor,
                              lambdas: Tensor, ve: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    """The gradients of qkv, lambdas and ve (empty without one): the kernel on the GPU, torch elsewhere."""
    backward = attention_inputs_backward_triton if takes_attention_kernel(qkv) else attention_inputs_backward_torch
    grad_qkv, grad_lambdas, grad_ve = backward((grad_q, grad_k, grad_v), qkv, cos, sin, lambdas, ve)
    return grad_qkv, grad_lambdas, grad_ve if grad_ve is not None else qkv.new_empty(0)


@attention_inputs_backward.register_fake
def _(grad_q, grad_k, grad_v, qkv, cos, sin, lambdas, ve):
    grad_ve = torch.empty_like(ve) if ve is not None else qkv.new_empty(0)
    return torch.empty_like(qkv), torch.empty_like(lambdas), grad_ve


def _attention_inputs_setup_context(ctx, inputs, output):
    qkv, cos, sin, lambdas, ve = inputs
    ctx.save_for_backward(qkv, cos, sin, lambdas, ve)


def _attention_inputs_grad(ctx, grad_q, grad_k, grad_v):
    qkv, cos, sin, lambdas, ve = ctx.saved_tensors
    grad_qkv, grad_lambdas, grad_ve = attention_inputs_backward(grad_q, grad_k, grad_v, qkv, cos, sin, lambdas, ve)
    return grad_qkv, None, None, grad_lambdas, grad_ve if ve is not None else None


attention_inputs.register_autograd(_attention_inputs_grad, setup_context=_attention_inputs_setup_context)


# ----------------------------------------------------------------------------------------------
# Symmetric matmul kernel: out = alpha * X @ Y^T + beta * C + diagonal * I for a product known to be symmetric
# (Y = X by default), computing only the upper triangle
# (track 1's kernel, copied, plus the second operand Y that Gram Newton-Schulz needs: a record is one file)


@triton.jit
def sym_matmul_kernel(x_ptr, y_ptr, c_ptr, out_ptr, M, K, alpha, beta, diagonal,
                      stride_xb, stride_xm, stride_xk, stride_yb, stride_ym, stride_yk, stride_ob, stride_om, stride_on,
                      HAS_C: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    num_blocks = tl.cdiv(M, BLOCK_M)
    block_i = tl.program_id(0) // num_blocks
    block_j = tl.program_id(0) % num_blocks
    if block_j < block_i:  # the lower triangle is the mirror of the upper one
        return
    batch = tl.program_id(1)
    rows = block_i * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = block_j * BLOCK_M + tl.arange(0, BLOCK_M)
    x_batch, y_batch = x_ptr + batch * stride_xb, y_ptr + batch * stride_yb
    acc = tl.zeros((BLOCK_M, BLOCK_M), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(x_batch + rows[:, None] * stride_xm + ks[None, :] * stride_xk,
                    mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = tl.load(y_batch + cols[None, :] * stride_ym + ks[:, None] * stride_yk,
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
                      diagonal: float = 0.0, y: Tensor | None = None) -> Tensor:
    """Batched alpha * x @ y.mT + beta * c + diagonal * I for x and y (default x) of shape (B, M, K) whose product is
    symmetric; c (B, M, M) symmetric, same strides as out."""
    batch, m, k = x.shape
    y = x if y is None else y
    out = x.new_empty(batch, m, m)
    block_m, block_k = 128, 64
    grid = (triton.cdiv(m, block_m) ** 2, batch)
    sym_matmul_kernel[grid](x, y, out if c is None else c, out, m, k, alpha, beta, diagonal,
                            *x.stride(), *y.stride(), *out.stride(), HAS_C=c is not None,
                            BLOCK_M=block_m, BLOCK_K=block_k, num_warps=8, num_stages=3)
    return out


@torch.library.custom_op("nanogpt_medium::sym_matmul", mutates_args=())
def sym_matmul(x: Tensor, c: Tensor | None = None, alpha: float = 1.0, beta: float = 0.0,
               diagonal: float = 0.0, y: Tensor | None = None) -> Tensor:
    """sym_matmul_triton on CUDA tensors, torch's matmuls on others. An op opaque to torch.compile: traced into Muon's
    compiled update, the kernel was launched through inductor's path for user Triton kernels, which types the float
    arguments fp64 (Triton: fp32; pytorch/pytorch#190340), so the epilogue ran in fp64, 1.3-1.8x slower (perf/NOTES.md,
    session 33). The op keeps x's strides, so that newton_schulz_builds can build at start-up what training launches.
    Off the GPU the upper triangle is mirrored too, as the kernel does."""
    if x.is_cuda:
        return sym_matmul_triton(x, c, alpha, beta, diagonal, y)
    product = alpha * (x @ (x if y is None else y).mT)
    product = product if c is None else product + beta * c
    product = product + diagonal * torch.eye(x.size(-2), dtype=x.dtype, device=x.device) if diagonal else product
    return product.triu() + product.triu(1).mT


@sym_matmul.register_fake
def _(x, c=None, alpha=1.0, beta=0.0, diagonal=0.0, y=None):
    return x.new_empty(x.size(0), x.size(1), x.size(1))


# ----------------------------------------------------------------------------------------------
# MLP GEMMs with relu-square in their epilogues (--mlp_epilogue): each saves a pass over the 64K x 4,096 activations,
# and the MLP's RMSNorm is a row scale in the same epilogues, so the normed input is never written. The backward
# takes relu(h) as sqrt(a) from a = relu(h)^2, so h is never written either (as torch's relu keeps its output, not its
# input, for its backward): bf16's a = h^2 (1 + e) with |e| <= 2^-8, so sqrt(a) is relu(h) to half a bf16 rounding


@triton.jit
def tile_origin(tile, rows, cols, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """First row and column of output tile number `tile`: tiles go GROUP_M block-rows at a time down each
    block-column, so a group's rows of x stay in L2."""
    blocks_m, blocks_n = tl.cdiv(rows, BLOCK_M), tl.cdiv(cols, BLOCK_N)
    group, in_group = tile // (GROUP_M * blocks_n), tile % (GROUP_M * blocks_n)
    group_rows = min(blocks_m - group * GROUP_M, GROUP_M)
    return (group * GROUP_M + in_group % group_rows) * BLOCK_M, (in_group // group_rows) * BLOCK_N


@triton.jit
def relu_square_epilogue(acc, row_scale, a_desc, out_desc, row, col, BACKWARD: tl.constexpr):
    """Stores one block of the float32 product at (row, col), its rows scaled by row_scale (BLOCK_M x 1): forward,
    relu(h)^2 of h = row_scale * product; backward, the product rounded to bf16 as a GEMM's output would be, times
    2 relu(h) = 2 sqrt(a) with a read from a_desc, times row_scale."""
    if BACKWARD:
        product = acc.to(out_desc.dtype).to(tl.float32)
        relu = tl.sqrt(a_desc.load([row, col]).to(tl.float32))
        out_desc.store([row, col], (2.0 * relu * product * row_scale).to(out_desc.dtype))
    else:
        relu = tl.maximum(acc * row_scale, 0.0)
        out_desc.store([row, col], (relu * relu).to(out_desc.dtype))


@triton.jit
def relu_square_gemm_kernel(x_desc, w_desc, out_desc, a_desc, row_scale_ptr, rows, cols, K: tl.constexpr,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                            PROGRAMS: tl.constexpr, BACKWARD: tl.constexpr, SPLIT_EPILOGUE: tl.constexpr):
    """x (rows x K) times w, with relu_square_epilogue and a float32 scale per row of x. Forward: w is cols x K, the
    product times the row scale is h, and a_desc is None. Backward: w is K x cols and the product is grad_a. Each of
    PROGRAMS programs (one or two an SM) walks tiles through TMA descriptors; flatten pipelines the next tile's loads
    under this tile's epilogue. A second program on the SM, where both fit, could run its MMAs under the first one's
    epilogue; with the 128 x 128 tiles that two programs need to fit, it ran slower than one 128 x 256 program
    (perf/medium_mlp_bench.py, session 26). SPLIT_EPILOGUE stores each tile as two halves of BLOCK_N / 2 columns, so
    the epilogue stages half a tile in shared memory (Triton's persistent-matmul tutorial), which leaves room for more
    pipeline stages."""
    tiles = tl.cdiv(rows, BLOCK_M) * tl.cdiv(cols, BLOCK_N)
    for tile in tl.range(tl.program_id(0), tiles, PROGRAMS, flatten=True):
        first_row, first_col = tile_origin(tile, rows, cols, BLOCK_M, BLOCK_N, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            x = x_desc.load([first_row, k0])
            w = w_desc.load([k0, first_col]) if BACKWARD else w_desc.load([first_col, k0]).T
            acc = tl.dot(x, w, acc)
        tile_rows = first_row + tl.arange(0, BLOCK_M)
        row_scale = tl.load(row_scale_ptr + tile_rows, mask=tile_rows < rows, other=0.0)[:, None]
        if SPLIT_EPILOGUE:
            left, right = acc.reshape(BLOCK_M, 2, BLOCK_N // 2).permute(0, 2, 1).split()
            relu_square_epilogue(left, row_scale, a_desc, out_desc, first_row, first_col, BACKWARD)
            relu_square_epilogue(right, row_scale, a_desc, out_desc, first_row, first_col + BLOCK_N // 2, BACKWARD)
        else:
            relu_square_epilogue(acc, row_scale, a_desc, out_desc, first_row, first_col, BACKWARD)


# BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages, split epilogue, programs an SM: perf/medium_mlp_bench.py
# times others (perf/kernel_report.py says which fit twice in an SM's shared memory)
MLP_LAUNCH = {"forward": (128, 256, 64, 8, 8, 3, True, 1), "backward": (128, 256, 64, 8, 8, 3, True, 1)}


def multiprocessors(device: torch.device) -> int:
    """The GPU's SM count, which sets relu_square_gemm_kernel's program count (4 elsewhere: Triton's interpreter)."""
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4


def relu_square_gemm(x: Tensor, w: Tensor, row_scale: Tensor, a: Tensor | None = None,
                     launch: tuple | None = None) -> Tensor:
    """relu_square_gemm_kernel, r = row_scale (float32, one per row of x): forward (w: cols x K, no a) returns
    a = relu(h)^2 of h = r (x @ w^T); backward (w: K x cols, a of the forward) returns 2 sqrt(a) (x @ w) r. TMA needs
    16-byte rows: K and cols multiples of 8 in bf16 (any float dtype runs, for tests under Triton's interpreter)."""
    backward = a is not None
    launch = launch or MLP_LAUNCH["backward" if backward else "forward"]
    block_m, block_n, block_k, group_m, num_warps, num_stages, split_epilogue, programs_per_sm = launch
    x, w = x.contiguous(), w.contiguous()  # TMA descriptors need unit last strides (autograd's grad_y may be a view)
    rows, k = x.shape
    cols = w.size(1) if backward else w.size(0)
    tiles = triton.cdiv(rows, block_m) * triton.cdiv(cols, block_n)
    programs = min(tiles, multiprocessors(x.device) * programs_per_sm)
    out = x.new_empty(rows, cols)
    epilogue_cols = block_n // 2 if split_epilogue else block_n
    descriptors = [TensorDescriptor.from_tensor(x, [block_m, block_k]),
                   TensorDescriptor.from_tensor(w, [block_k, block_n] if backward else [block_n, block_k]),
                   TensorDescriptor.from_tensor(out, [block_m, epilogue_cols]),
                   TensorDescriptor.from_tensor(a, [block_m, epilogue_cols]) if backward else None]
    relu_square_gemm_kernel[(programs,)](*descriptors, row_scale.contiguous(), rows, cols, K=k, BLOCK_M=block_m,
                                         BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=group_m, PROGRAMS=programs,
                                         BACKWARD=backward, SPLIT_EPILOGUE=split_epilogue, num_warps=num_warps,
                                         num_stages=num_stages)
    return out


@torch.library.custom_op("nanogpt_medium::mlp_up", mutates_args=())
def mlp_up(x: Tensor, fc_w: Tensor, row_scale: Tensor) -> Tensor:
    """a = relu(h)^2 of h = row_scale * (x @ fc_w^T) in float32, from one GEMM on the GPU."""
    if x.is_cuda:
        return relu_square_gemm(x, fc_w, row_scale)
    return F.relu(row_scale[:, None] * (x.float() @ fc_w.float().T)).square().to(x.dtype)


@mlp_up.register_fake
def _(x, fc_w, row_scale):
    return x.new_empty(x.size(0), fc_w.size(0))


@torch.library.custom_op("nanogpt_medium::mlp_grad_h", mutates_args=())
def mlp_grad_h(grad_y: Tensor, proj_w: Tensor, a: Tensor, row_scale: Tensor) -> Tensor:
    """The gradient at h times row_scale, 2 sqrt(a) * (grad_y @ proj_w) * row_scale with relu(h) = sqrt(a), from one
    GEMM on the GPU."""
    if grad_y.is_cuda:
        return relu_square_gemm(grad_y, proj_w, row_scale, a)
    return (2 * a.float().sqrt() * (grad_y @ proj_w).float() * row_scale[:, None]).to(a.dtype)


@mlp_grad_h.register_fake
def _(grad_y, proj_w, a, row_scale):
    return torch.empty_like(a)


class NormedReluSquareMLP(torch.autograd.Function):
    """relu(norm(x) @ fc_w^T)^2 @ proj_w^T (x: tokens x dim), norm(x) = r x with r each row's reciprocal RMS, as
    F.rms_norm. The relu-square, its gradient and r sit in GEMM epilogues (mlp_up, mlp_grad_h), so norm(x) is never
    written: norm(x) @ fc_w^T = r (x @ fc_w^T), and fc_w's gradient is (r grad_h)^T @ x. The other four GEMMs are
    torch's. Keeps x, r and a for the backward, not h: relu(h) = sqrt(a)."""

    @staticmethod
    def forward(ctx, x: Tensor, fc_w: Tensor, proj_w: Tensor) -> Tensor:
        row_scale = reciprocal_rms(x)
        a = mlp_up(x, fc_w, row_scale)
        ctx.save_for_backward(x, row_scale, fc_w, proj_w, a)
        return a @ proj_w.T

    @staticmethod
    def backward(ctx, grad_y: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        x, row_scale, fc_w, proj_w, a = ctx.saved_tensors
        scaled_grad_h = mlp_grad_h(grad_y, proj_w, a, row_scale)
        # RMSNorm's backward, r grad_n - r^3 x mean(grad_n x), with u = r grad_n = (r grad_h) @ fc_w
        u, x32, r = (scaled_grad_h @ fc_w).float(), x.float(), row_scale[:, None]
        grad_x = u - r * r * x32 * (u * x32).mean(-1, keepdim=True)
        return grad_x.to(x.dtype), scaled_grad_h.T @ x, grad_y.T @ a


def normed_relu_square_mlp(x: Tensor, fc_w: Tensor, proj_w: Tensor) -> Tensor:
    return NormedReluSquareMLP.apply(x, fc_w, proj_w)


# ----------------------------------------------------------------------------------------------
# Optimizers: sharded mixed-precision Muon for hidden matrices, sharded Adam for the rest


def join_fp32(high: Tensor, low: Tensor) -> Tensor:
    """The fp32 number whose upper half is `high` (a bf16's bits) and lower half `low`, both uint16: exact fp32
    master weights kept as a bf16 parameter plus its 16 low bits (record 7)."""
    return ((high.to(torch.int32) << 16) | low.to(torch.int32)).view(torch.float32)


def split_fp32(x: Tensor) -> tuple[Tensor, Tensor]:
    """Inverse of join_fp32: the upper half is x truncated to bf16, the lower half the bits it drops."""
    bits = x.view(torch.int32)
    return ((bits >> 16) & 0xFFFF).to(torch.uint16), (bits & 0xFFFF).to(torch.uint16)


# Per-iteration Newton-Schulz coefficients (You Jiacheng, 2025-03; track 2's records since).
NS_COEFFICIENTS = [(4.0848, -6.8946, 2.9270), (3.9505, -6.3029, 2.6377), (3.7418, -5.5913, 2.3037),
                   (2.8769, -3.1427, 1.2046), (2.8366, -3.0525, 1.2012)]


def gram_newton_schulz(gram: Tensor, steps: list) -> Tensor:
    """The matrix that quintic Newton-Schulz steps x -> (a I + b R + c R R) x, R = x x^T, multiply x by, one step per
    (a, b, c) in steps, from the Gram matrix R of the first x alone: each step's polynomial P maps R to P R P. All of
    these are polynomials in the first R, so every product is symmetric: each is one sym_matmul."""
    product = None
    for step, (a, b, c) in enumerate(steps):
        # poly = a * I + b * R + c * R @ R: the kernel adds a on the diagonal, so that the step's a x + (b R + c R R) x
        # is poly x, and a restart's steps are one plain bmm of x by their polys' product
        # (cuBLAS's baddbmm ran 1.4-1.6x slower than bmm at these shapes: perf/muon_bench.py, session 25)
        poly = sym_matmul(gram, gram, alpha=c, beta=b, diagonal=a)
        product = poly if product is None else sym_matmul(poly, y=product)
        if step + 1 < len(steps):
            gram = sym_matmul(sym_matmul(poly, y=gram), y=poly)
    return product


def restarts(coefficients: list, wide: bool) -> list:
    """The steps between two computations of x itself: for a wide x (rows < cols), Gram Newton-Schulz (Zhang, Amsel,
    Chen, Dao 2026) iterates on the Gram matrix, a third fewer FLOPs here (cols = 4 rows); round-off in R grows into
    spurious eigenvalues over more than three steps, so x is rebuilt and R recomputed after the first two. A square x
    gains nothing from it: x itself every step."""
    return [coefficients[:2], coefficients[2:]] if wide else [[step] for step in coefficients]


def orthogonalize(g: Tensor) -> Tensor:
    """Approximate U @ V^T of each matrix's SVD by quintic Newton-Schulz iterations (Keller Jordan's Muon, 2024). In
    fp16: the tensor cores' bf16 rate with 3 more mantissa bits, and x so normalised cannot overflow it.
    g: (..., rows, cols)."""
    x = g.reshape(-1, *g.shape[-2:])  # one batch of matrices for sym_matmul's kernel
    tall = x.size(-2) > x.size(-1)
    if tall:
        x = x.mT
    x = (x / (x.norm(dim=(-2, -1), keepdim=True) + 1e-7)).half()  # normed first: a norm past 65,504 is inf in fp16
    for steps in restarts(NS_COEFFICIENTS, x.size(-2) < x.size(-1)):
        x = torch.bmm(gram_newton_schulz(sym_matmul(x), steps), x)
    return (x.mT if tall else x).view(g.shape)


def muon_update(high: Tensor, low: Tensor, momentum_buffer: Tensor, grad: Tensor,
                momentum: Tensor, lr: Tensor, keep: Tensor):
    """One Muon step of a rank's stacked same-shape matrices on their exact fp32 master weights join_fp32(high, low):
    Nesterov momentum, orthogonalisation, decay p *= keep, then p -= lr * update; written back split (record 7)."""
    grad = grad.float()
    momentum_buffer.copy_(momentum * momentum_buffer + (1 - momentum) * grad)
    update = orthogonalize(momentum * momentum_buffer + (1 - momentum) * grad)
    new_high, new_low = split_fp32(join_fp32(high, low) * keep - update.float() * lr)
    high.copy_(new_high)
    low.copy_(new_low)


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


class Muon(torch.optim.Optimizer):
    """MomentUm Orthogonalized by Newton-Schulz (Keller Jordan, 2024), sharded by matrix, mixed precision.
    Each group holds same-shape bf16 matrices, rows of one stack (stack_in_place); each rank updates its share of the
    rows in one call of `update` (muon_update, maybe compiled), keeping their low bits, then all ranks all-gather the
    rows."""

    def __init__(self, param_groups, lr: float, momentum: float, comm: Comm, update):
        super().__init__(param_groups, dict(lr=lr, momentum=momentum, weight_decay=0.0))
        self.comm, self.update = comm, update
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
            if owned:  # a rank can own only padding
                self._update_owned(group, owned, own_rows[:len(owned)], grad_shard[:len(owned)])
            gathers.append(self.comm.all_gather(stack, own_rows))  # in place: the parameters' rows
        wait_all(gathers)

    def _stacked_grads(self, params: list[Tensor]) -> Tensor:
        return padded_stack([p.grad for p in params], self.comm.world_size)

    def _update_owned(self, group, owned: list[Tensor], weights: Tensor, grads: Tensor):
        """The update call for this rank's matrices of a group, with their stacked state: the bf16 weights' bits are
        the master weights' upper halves, their low bits the lower halves."""
        high = weights.view(torch.uint16)
        low_bits = self._stacked_state(owned, "low_bits", lambda: torch.zeros_like(high))  # fresh: zero
        momentum_buffer = self._stacked_state(owned, "momentum_buffer",
                                              lambda: torch.zeros_like(high, dtype=torch.float32))
        rows, cols = grads.shape[-2:]
        # 0-d CPU tensors, not floats, so that the compiled update is not recompiled as they change
        scalars = [torch.tensor(value, dtype=torch.float32) for value in
                   (group["momentum"], group["lr"] * max(1.0, rows / cols) ** 0.5,
                    1 - group["lr"] * group["weight_decay"])]
        self.update(high, low_bits, momentum_buffer, grads, *scalars)

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
    bias2 = 1 - beta2^t are 0-d CPU tensors, so that their change every step does not recompile. A bf16 gradient is
    read as such and widened in the kernel (an eager cast of the four embedding tables' took 0.67 ms a step)."""
    grad = grad.float()
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.lerp_(grad.square(), 1 - beta2)
    shard.sub_(step_size * exp_avg / ((exp_avg_sq / bias2).sqrt() + eps))


class ShardedAdam(torch.optim.Optimizer):
    """Adam where each rank updates its slice (first dimension) of every parameter; fp32 moments."""

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
            state.update(step=0, exp_avg=torch.zeros_like(grad, dtype=torch.float32),
                         exp_avg_sq=torch.zeros_like(grad, dtype=torch.float32))
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
HEAD_CHUNKS = 4  # validation computes the lm_head in this many chunks to cap memory (record 7)


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


@torch.library.custom_op("nanogpt_medium::block_rows", mutates_args=())
def block_rows(blocks: Tensor) -> tuple[Tensor, Tensor]:
    """Block matrices (... x rows x columns) as FlexAttention's BlockMask holds them: each row's count of blocks, and
    their column indices, ascending, then the other columns (a stable descending argsort of the row). An opaque op, so
    that the argsort runs as torch's sort kernel: compiled, inductor fused the forward's argsorts into one slowly
    built Triton kernel (the op took ~40% off the H200's cold start: perf/NOTES.md, session 17)."""
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
    (one call per matrix, eight, ran track 1 1.0 ms a step slower on the H200)."""
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
    """Long (window) and short (window/2) masks of one packed sequence; documents start at EOT. Block masks on the
    GPU, whose mask_mod tests the window unless dynamo traces the model (block_masks)."""
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


def uniform_bf16(shape, fan_in: int) -> Tensor:
    bound = 3 ** 0.5 * 0.5 * fan_in ** -0.5
    return torch.empty(shape).uniform_(-bound, bound).bfloat16()


class CausalSelfAttention(nn.Module):
    """One bf16 QKVO weight (record 7), QK-norm, rotary, normed values mixed with a value embedding."""

    def __init__(self, args: Hyperparameters, rotary: Rotary):
        super().__init__()
        self.num_heads, self.head_dim = args.num_heads, args.head_dim
        self.scale = 0.12  # instead of 1/sqrt(head_dim), with QK-norm (Henry et al. 2020)
        self.qkvo_w = nn.Parameter(uniform_bf16((4, args.num_heads * args.head_dim, args.model_dim),
                                                args.model_dim))
        with torch.no_grad():
            self.qkvo_w[3].zero_()
        self.rotary = rotary  # one table shared by all layers

    def forward(self, x: Tensor, value_embed: Tensor | None, lambdas: Tensor, mask) -> Tensor:
        B, T = x.shape[:2]
        qkv = F.linear(x, self.qkvo_w[:3].flatten(0, 1)).view(B, T, 3 * self.num_heads, self.head_dim)
        value_embed = None if value_embed is None else value_embed.view(B, T, self.num_heads, self.head_dim)
        q, k, v = attention_inputs(qkv, *self.rotary.tables(T), lambdas, value_embed)
        return attend(q, k, v, mask, self.scale).flatten(2) @ self.qkvo_w[3]


class MLP(nn.Module):
    def __init__(self, dim: int, hidden: int, epilogue: bool = False):
        super().__init__()
        self.fc_w = nn.Parameter(uniform_bf16((hidden, dim), dim))
        self.proj_w = nn.Parameter(torch.zeros(dim, hidden, dtype=torch.bfloat16))
        self.epilogue = epilogue

    def forward(self, x: Tensor) -> Tensor:
        """The MLP of rms_norm(x)."""
        if self.epilogue:
            return normed_relu_square_mlp(x.flatten(0, -2), self.fc_w, self.proj_w).view_as(x)
        return F.linear(F.relu(F.linear(rms_norm(x), self.fc_w)).square(), self.proj_w)  # relu^2 (Primer)


class Block(nn.Module):
    def __init__(self, args: Hyperparameters, has_attention: bool, rotary: Rotary):
        super().__init__()
        self.attn = CausalSelfAttention(args, rotary) if has_attention else None
        self.mlp = MLP(args.model_dim, args.mlp_ratio * args.model_dim, args.mlp_epilogue)

    def forward(self, x, x0, value_embed, block_lambdas, attn_lambdas, mask):
        x = block_lambdas[0] * x + block_lambdas[1] * x0  # learned share of the embedding stream (2024 records)
        if self.attn is not None:  # record 7 feeds attention the un-normed stream (its values are normed)
            x = x + self.attn(x, value_embed, attn_lambdas, mask)
        return x + self.mlp(x)  # the MLP norms its input


def value_embed_layout(num_layers: int) -> list:
    """Which value-embedding table each block mixes in: 0 1 2 ... 0 1 2 on the first and last three (value
    embeddings: the 2024 records)."""
    return [0, 1, 2] + [None] * (num_layers - 6) + [0, 1, 2]


def padded_vocab(vocab_size: int) -> int:
    return -(-vocab_size // 128) * 128


class GPT(nn.Module):
    """GPT with value embeddings and a few long skips (record 7's, after the 2024 records' U-net): block a's output,
    weighted, joins block b's input."""

    def __init__(self, args: Hyperparameters):
        super().__init__()
        vocab, dim, layers = padded_vocab(args.vocab_size), args.model_dim, args.num_layers
        max_len = max(args.train_seq_len, args.val_seq_len)
        self.window_pattern = args.window_pattern
        self.skip_pairs = skip_pairs(args)
        self.embed = nn.Embedding(vocab, dim, dtype=torch.bfloat16)
        self.value_embeds = nn.ModuleList(nn.Embedding(vocab, dim, dtype=torch.bfloat16) for _ in range(3))
        self.value_embed_layout = value_embed_layout(layers)
        rotary = Rotary(args.head_dim, max_len)  # ~134 MB of cos/sin at the default lengths: built once
        self.blocks = nn.ModuleList(Block(args, i != args.no_attention_layer, rotary) for i in range(layers))
        self.lm_head_w = nn.Parameter(torch.zeros(vocab, dim))
        scalars = [torch.ones(len(self.skip_pairs)), torch.tensor([1.0, 0.0]).repeat(layers),
                   torch.tensor([0.5, 0.5]).repeat(layers)]
        count = sum(s.numel() for s in scalars)
        scalars.append(torch.zeros(-count % 8))  # shardable over any world size dividing 8
        self.scalars = nn.Parameter(torch.cat(scalars))  # one tensor: one Adam update (record 7)

    def scalar_views(self):
        """Skip weights, per-block (x, x0) lambdas, per-attention (v, value-embed) lambdas."""
        layers, skips = len(self.blocks), len(self.skip_pairs)
        block = self.scalars[skips:skips + 2 * layers].view(layers, 2)
        attn = self.scalars[skips + 2 * layers:skips + 4 * layers].view(layers, 2)
        return self.scalars[:skips], block, attn

    def head_loss(self, x: Tensor, targets: Tensor) -> Tensor:
        """Summed cross-entropy of the softcapped logits (in training on the GPU: the fused head)."""
        w = self.lm_head_w.bfloat16()
        if self.training and x.is_cuda:
            return head_ce(x, w, targets)[0]
        logits = F.linear(x, w).float()
        return F.cross_entropy(softcap(logits), targets.to(torch.int64), reduction="sum")

    def forward(self, inputs: Tensor, targets: Tensor, window_blocks: Tensor) -> Tensor:
        """Cross-entropy of one packed sequence: summed over tokens in training, mean in eval."""
        masks = attention_masks(inputs, window_blocks)
        value_embeds = [embed(inputs)[None] for embed in self.value_embeds]
        x = x0 = rms_norm(self.embed(inputs)[None])
        skip_weights, block_lambdas, attn_lambdas = self.scalar_views()
        outputs = []
        for i, block in enumerate(self.blocks):
            for j, (source, target) in enumerate(self.skip_pairs):
                if target == i:
                    x = x + skip_weights[j] * outputs[source]
            ve_index = self.value_embed_layout[i]
            value_embed = None if ve_index is None else value_embeds[ve_index]
            x = block(x, x0, value_embed, block_lambdas[i], attn_lambdas[i], masks[self.window_pattern[i]])
            outputs.append(x)
        x = rms_norm(x).flatten(0, 1)
        if self.training:
            return self.head_loss(x, targets)
        chunks = zip(x.chunk(HEAD_CHUNKS), targets.chunk(HEAD_CHUNKS))
        return sum(self.head_loss(x_part, t_part) for x_part, t_part in chunks) / targets.numel()


def matmul_params(model: GPT) -> int:
    """Parameters used in matmuls (excludes embeddings and scalars), for FLOP estimates."""
    return sum(p.numel() for name, p in model.named_parameters() if name.endswith("_w"))


# ----------------------------------------------------------------------------------------------
# Data: speedrun shards (256 x int32 header, uint16 tokens), BOS-aligned training sequences

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
        fix = ("download FineWeb with: python data/cached_fineweb10B.py 35" if missing_download else
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
# Setup: checks before the slow compile, distributed init, logging, the compile cache, optimizers, kernel builds ahead


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
    sequences that no rank deals it."""
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
                "num_heads", "head_dim", "mlp_ratio", "window_end"]
    for name in positive + ["val_loss_every", "warmup_steps", "profile_steps", "grad_accum_steps",
                            "muon_momentum_warmup_steps", "window_start"]:
        if getattr(args, name) < (1 if name in positive else 0):
            raise SetupError(f"--{name}={getattr(args, name)} must be {'positive' if name in positive else '>= 0'}")
    for name in ["muon_momentum", "muon_momentum_start", "adam_beta1", "adam_beta2"]:
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
    mlp_larger = args.mlp_weight_decay_mult > 1  # the MLP matrices' decay, else the attention's, is the largest
    decay = args.muon_lr * args.muon_weight_decay * (args.mlp_weight_decay_mult if mlp_larger else 1.0)
    if decay >= 1:
        product, fix = ("lr x weight decay x --mlp_weight_decay_mult", "--muon_weight_decay or --mlp_weight_decay_mult"
                        ) if mlp_larger else ("lr x weight decay", "--muon_weight_decay")
        raise SetupError(f"Muon's weight decay takes a matrix's weights to zero or past it each step ({product} = "
                         f"{decay:g} >= 1); lower {fix}")
    if not 0 <= args.seed < 2**63:
        raise SetupError(f"--seed={args.seed} must be in [0, 2^63)")


def check_shapes(args: Hyperparameters):
    """The model's and the schedule's settings fit together."""
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
    skip_pairs(args)


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
    """A GPU for each of the node's processes, and on this process's one the bf16 tensor cores that every kernel
    needs (ptxas builds no bf16 code before sm_80) and what --mlp_epilogue's TMA kernels need."""
    if torch.cuda.device_count() < local_processes:
        raise SetupError(f"{local_processes} processes per node, more than the GPUs on it "
                         f"({torch.cuda.device_count()}); launch one process per GPU")
    if local_gpu >= torch.cuda.device_count():
        raise LaunchError(f"LOCAL_RANK={os.environ['LOCAL_RANK']}, but this machine shows {torch.cuda.device_count()} "
                          f"GPU(s) (CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}); launch "
                          "one process per GPU")
    major, minor = torch.cuda.get_device_capability(local_gpu)
    if (major, minor) < (8, 0):
        raise SetupError(f"the bf16 model and its Triton kernels need bf16 tensor cores, on sm_80 or newer (this GPU "
                         f"is sm_{major}{minor}); run on an A100, H100, L4 or newer")
    if args.mlp_epilogue and (major, minor) < (9, 0):
        raise SetupError(f"--mlp_epilogue needs TMA, on sm_90 or newer (this GPU is sm_{major}{minor}); pass "
                         "--mlp_epilogue=false")
    if args.mlp_epilogue and args.model_dim % 8 != 0:
        raise SetupError(f"--model_dim={args.model_dim} must be a multiple of 8 for --mlp_epilogue (TMA needs rows "
                         "of 16 bytes); change --num_heads or --head_dim, or pass --mlp_epilogue=false")


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
    torch's ptxas (CUDA 13), as inductor builds its own (Triton 3.6's bundled ptxas miscompiled one of track 1's
    kernels on the H200: perf/NOTES.md, sessions 14-15), and with FMA contraction, Triton 3.6's default, which
    Triton 3.9 warns that 3.10 turns off (inductor sets it per kernel)."""
    if "TRITON_PTXAS_PATH" not in os.environ and ptxas.is_file() and os.access(ptxas, os.X_OK):
        os.environ["TRITON_PTXAS_PATH"] = str(ptxas)
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")


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
                ptxas=ptxas_in_use())


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


ERROR_LOG = NullLog()  # rank 0's log once open: a setting, data or out-of-memory error found after it opened ends it


def open_log(args: Hyperparameters, rank: int, world_size: int):
    """Rank 0 writes logs/<run_id>.txt: this file's source, then the header, and a crash's first line at the end;
    other ranks log nothing."""
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
    """A setting or data error found from here on (a shard changed during the run), the GPU out of memory, or a crash
    (report_crashes) ends the log with the error's one line."""
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
    """Before torch.compile: normed_relu_square_mlp becomes one call in dynamo's graph (as track 1's fp8_mlp), and
    AOTAutograd traces NormedReluSquareMLP into the compiled graphs as before (the same ops), where dynamo would trace
    the autograd.Function's forward and backward at every call, at every start. AOTAutograd's cache skips graphs that
    call a Python function unless it is marked cacheable; the mark's key is the source of what the function runs, so
    that an edited MLP misses instead of reusing old graphs."""
    torch._dynamo.allow_in_graph(normed_relu_square_mlp)
    source = "".join(inspect.getsource(part) for part in (normed_relu_square_mlp, NormedReluSquareMLP, reciprocal_rms))
    name = f"{normed_relu_square_mlp.__module__}.{normed_relu_square_mlp.__name__}"
    torch._inductor.config.unsafe_marked_cacheable_functions[name] = hashlib.sha256(source.encode()).hexdigest()


def build_optimizers(model: GPT, args: Hyperparameters, comm: Comm):
    blocks = list(model.blocks)
    mlp_decay = args.muon_weight_decay * args.mlp_weight_decay_mult
    muon_groups = [dict(params=[b.attn.qkvo_w for b in blocks if b.attn is not None],
                        weight_decay=args.muon_weight_decay),
                   dict(params=[b.mlp.fc_w for b in blocks], weight_decay=mlp_decay),
                   dict(params=[b.mlp.proj_w for b in blocks], weight_decay=mlp_decay)]
    adam_groups = [dict(params=[model.embed.weight] + [e.weight for e in model.value_embeds], lr=args.embed_lr),
                   dict(params=[model.scalars], lr=args.scalar_lr),
                   dict(params=[model.lm_head_w], lr=args.head_lr)]
    adam_update_fn, muon_update_fn = adam_update, muon_update
    if args.compile:
        adam_update_fn, muon_update_fn = (torch.compile(update, dynamic=False) for update in (adam_update, muon_update))
    optimizers = [ShardedAdam(adam_groups, (args.adam_beta1, args.adam_beta2), args.adam_eps, comm, adam_update_fn),
                  Muon(muon_groups, args.muon_lr, args.muon_momentum, comm, muon_update_fn)]
    for opt in optimizers:
        for group in opt.param_groups:
            group["initial_lr"] = group["lr"]
    return optimizers


def tiny_kernel_launches(args: Hyperparameters, device: torch.device) -> list:
    """A launch for each build of the script's own Triton kernels that the custom ops start from compiled code, on small
    tensors with training's dtypes, widths and pointer alignments and, for the MLP's GEMM, as many programs: what
    Triton specialises a build on, so that training finds these builds (a miss costs only that build, in warmup
    step 1)."""
    rows, dim, vocab, heads, head_dim = 16, args.model_dim, padded_vocab(args.vocab_size), args.num_heads, args.head_dim
    bf16 = dict(device=device, dtype=torch.bfloat16)
    targets = torch.zeros(rows + 1, device=device, dtype=torch.int32)[1:]  # as train_batches' window[1:]
    launches = [functools.partial(softcap_ce_in_place, torch.zeros(rows, vocab, **bf16), targets)]
    if args.mlp_epilogue:
        # a tile for every program, as many programs as training's
        mlp_rows = multiprocessors(device) * max(launch[0] * launch[7] for launch in MLP_LAUNCH.values())
        hidden = args.mlp_ratio * dim
        x, a, row_scale = (torch.zeros(mlp_rows, dim, **bf16), torch.zeros(mlp_rows, hidden, **bf16),
                           torch.zeros(mlp_rows, device=device))
        launches += [functools.partial(relu_square_gemm, x, torch.zeros(hidden, dim, **bf16), row_scale),
                     functools.partial(relu_square_gemm, x, torch.zeros(dim, hidden, **bf16), row_scale, a)]
    if attention_kernel_fits(head_dim):
        qkv, heads_shape = torch.zeros(1, rows, 3 * heads, head_dim, **bf16), (1, rows, heads, head_dim)
        cos = sin = torch.zeros(rows, head_dim // 2, device=device)
        lambdas, value_embed = torch.zeros(2, device=device), torch.zeros(heads_shape, **bf16)
        grads = tuple(torch.zeros(heads_shape, **bf16) for _ in range(3))
        for ve in (None, value_embed):
            launches += [functools.partial(attention_inputs_triton, qkv, cos, sin, lambdas, ve),
                         functools.partial(attention_inputs_backward_triton, grads, qkv, cos, sin, lambdas, ve)]
    return launches


def newton_schulz_builds(muon: Muon, device: torch.device):
    """sym_matmul's builds for the shapes of Muon's matrices, launched as orthogonalize calls it, one after another
    (shapes that Triton specialises alike build once): X X^T of the wide layout and, for a tall matrix, of the first
    restart's transposed view, then a I + b R + c R R, and Gram Newton-Schulz's products of two symmetric matrices.
    Submitted to the builds once Muon exists."""
    fp16 = dict(device=device, dtype=torch.float16)
    for rows, cols in sorted({tuple(p.shape[-2:]) for group in muon.param_groups for p in group["params"]}):
        short_side, long_side = min(rows, cols), max(rows, cols)
        sym_matmul_triton(torch.zeros(1, short_side, long_side, **fp16))
        if rows > cols:
            sym_matmul_triton(torch.zeros(1, long_side, short_side, **fp16).mT)
        product = torch.zeros(1, short_side, short_side, **fp16)
        sym_matmul_triton(product, product, 1.0, 0.0, 1.0)
        if rows != cols:
            sym_matmul_triton(product, y=product)


def launchers_one_at_a_time(driver):
    """Threads take turns creating Triton launchers. Triton (3.6) loads each kernel signature's launcher as a C module
    named __triton_launcher; loading one this process loaded before returns the module in sys.modules, whose launch()
    the next such load replaces, so two threads creating launchers at once can each get the other's. Track 1's warm
    start with inductor's combo kernels died so in warmup step 1: "function takes exactly 22 arguments (23 given)"
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


class KernelBuilds:
    """tiny_kernel_launches, then newton_schulz_builds, on worker threads, which build the kernels while the main
    thread builds and compiles the model (Triton lets go of the GIL in LLVM and ptxas;
    records/track_1_short/2026-12-02_KernelBuildsAhead); all threads take turns creating launchers. Track 1's short
    GIL switch interval while they run is not taken here (records/track_2_medium/2026-12-04_NoBuildsSwitchInterval)."""

    def __init__(self, launches: list, device: torch.device):
        self.started = time.perf_counter()
        if device.type == "cuda":
            launchers_one_at_a_time(triton.runtime.driver.active)
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


def warmup(model, raw_model: GPT, optimizers, val_tokens: Tensor, windows: dict, train_files: list[str],
           args: Hyperparameters, rank: int, world_size: int,
           device: torch.device) -> tuple[str | None, WarmupLaps]:
    """Compile and run the training and validation paths, then restore the initial state. The last
    profile_steps warmup steps run under torch.profiler. Returns its table (None when there are none) and the
    time each part took."""
    laps = WarmupLaps(device)
    initial_state = copy.deepcopy(dict(model=raw_model.state_dict(), opts=[o.state_dict() for o in optimizers]))
    batches = train_batches(train_files, args.train_seq_len, rank, world_size, device)

    def run_steps(steps):
        for step in steps:
            train_step(model, optimizers, batches, step, args, windows)

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
                   rank: int, warmup_start: float) -> float:
    """After the warmup: the kernel builds waited for, the compile cache written (rank 0), and what the start-up found
    logged. Returns the start-up's seconds, from the process's start to training's."""
    if builds is not None:
        log.write(builds.finish())
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
    (record 7's 128 -> 1792 warmup: 1728 * progress rounded up to the next multiple of 128)."""
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


def train_step(model, optimizers, batches, step: int, args, windows: dict) -> Tensor:
    """One optimizer step over grad_accum_steps micro-batches; returns the mean loss per token (async)."""
    window = windows[window_blocks_at(step, args)]
    total = torch.zeros((), device=window.device)
    for _ in range(args.grad_accum_steps):
        inputs, targets = next(batches)
        loss = model(inputs, targets, window)
        (loss / args.grad_accum_steps).backward()
        total += loss.detach()
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


def train(model, optimizers, batches, val_tokens: Tensor, windows: dict, log, clock: TrainingClock,
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
        loss = train_step(model, optimizers, batches, step, args, windows)
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
    with torch.device(device):  # built in place: track 1's smaller model took 5.4 s of its start on the CPU
        raw_model = GPT(args)
    model = raw_model
    if args.compile:
        trace_autograd_functions_as_one_call()
        model = torch.compile(raw_model, dynamic=False)
    optimizers = build_optimizers(raw_model, args, comm)
    if builds is not None:
        builds.submit(functools.partial(newton_schulz_builds, optimizers[-1], device))
    val_tokens = load_val_tokens(val_files, args.val_tokens, device)
    windows = window_tensors(args, device)
    flops = flops_per_step(raw_model, args, global_batch_tokens(args, world_size))
    log.write(f"startup: model and optimizers built at {time.perf_counter() - PROCESS_START:.1f}s; "
              f"{matmul_params(raw_model):,} matmul params, {flops:.3e} FLOPs per step")

    warmup_start = time.perf_counter()
    table, laps = warmup(model, raw_model, optimizers, val_tokens, windows, train_files, args, rank, world_size,
                         device)
    startup_s = finish_startup(log, builds, table, laps, args, rank, warmup_start)

    batches = train_batches(train_files, args.train_seq_len, rank, world_size, device)
    clock = TrainingClock(device)
    stop = train(model, optimizers, batches, val_tokens, windows, log, clock, args, rank, world_size, device, flops)
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
    """A setting or data error: one line on rank 0's console, and the log's last line once it is open; exit code 2."""
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
