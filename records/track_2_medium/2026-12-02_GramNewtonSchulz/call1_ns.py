"""Compiled orthogonalize of each track's Muon stacks (one GPU's full set), for the scripts in the folder argv[1];
microseconds a call (CUDA events over 20 calls after 3), and the error against the plain iterations in fp64 on
stacks with a spectrum falling as i^-1."""
import sys
import time
import torch
sys.path.insert(0, sys.argv[1])
import train_gpt as short  # noqa: E402
import train_gpt_medium as medium  # noqa: E402

STACKS = {"short": [(44, 768, 768), (24, 768, 3072), (11, 6, 12)],
          "medium": [(60, 1024, 1024), (16, 4096, 1024), (16, 1024, 4096)]}
COEFFICIENTS = {"short": short.JORDAN_COEFFICIENTS, "medium": medium.NS_COEFFICIENTS}


def plain(g, coefficients):
    x = g.double()
    x = x.mT if x.size(-2) > x.size(-1) else x
    x = x / (x.norm(dim=(-2, -1), keepdim=True) + 1e-7)
    for a, b, c in coefficients:
        gram = x @ x.mT
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x


for track, script in [("short", short), ("medium", medium)]:
    f = torch.compile(script.orthogonalize, dynamic=False)
    for shape in STACKS[track]:
        g = torch.randn(shape, device="cuda")
        for _ in range(3):
            f(g)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(20):
            f(g)
        end.record()
        torch.cuda.synchronize()
        us = start.elapsed_time(end) * 1000 / 20
        rows, cols = min(shape[1:]), max(shape[1:])
        u = torch.linalg.qr(torch.randn(4, rows, rows, device="cuda", dtype=torch.float64))[0]
        v = torch.linalg.qr(torch.randn(4, cols, rows, device="cuda", dtype=torch.float64))[0]
        spread = (u * torch.arange(1, rows + 1, device="cuda", dtype=torch.float64) ** -1.0) @ v.mT
        spread = spread.mT if shape[1] > shape[2] else spread
        out = f(spread.float()).double()
        out = out.mT if shape[1] > shape[2] else out
        error = ((out - plain(spread, COEFFICIENTS[track])).norm() / plain(spread, COEFFICIENTS[track]).norm()).item()
        print(f"{sys.argv[1]} {track} {'x'.join(map(str, shape))}: {us:.1f} us, error vs fp64 {error:.4f}", flush=True)
