"""The layer's GEMMs outside the sweeps in fp32 against bf16 (`satnet.gemm`), in one run.

    python benchmarks/gemm_precision.py                  # 9x9 size, k = 16, bf16 products
    python benchmarks/gemm_precision.py --k 32 --sweeps 40

A training step's three GEMMs (C = S S^T; the backward's W = sum_b U_b V_b^T and (W + W^T) S)
timed alone, each GEMM by its best of --repeats, then the layer's forward+backward on one 9x9
batch (n=729, m=600, aux=300, 36 random givens) at a fixed number of sweeps, the two GEMM
precisions alternating call by call (a shared machine's drift falls on both alike), each by its
median. Prints seconds, the ratios, and the bf16 GEMMs' error against fp64 GEMMs. What the
rounding does to learning is a question for whole runs (docs/studies/stage-budget.md).
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from common import sudoku_batch
from satground.satnet import SATNet, check_setup
from satground.satnet.cpu import precision_name


def best(f, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=40)
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--sweeps", type=int, default=20, help="forward sweeps a call (no early stop)")
    parser.add_argument("--precision", default="auto", help="the kernel's products (satnet.precision)")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)

    torch.manual_seed(0)
    N, m, B, k = 1030, 600, args.batch, args.k
    S = torch.randn(N, m) * (0.5 / (N + m)) ** 0.5
    U, V = torch.randn(N, B * k), torch.randn(N, B * k)
    W = U @ V.T
    operands = {"C = S S^T": (S, S.T), "W = U V^T": (U, V.T), "(W + W^T) S": (W + W.T, S)}
    print(f"{torch.get_num_threads()} threads; N={N} m={m} batch {B} k={k}")
    print("| GEMM | fp32 s | bf16 s | speed-up | bf16 relative error (fp32's) |")
    print("|---|---|---|---|---|")
    for name, (a, b) in operands.items():
        low_a, low_b = a.bfloat16(), b.bfloat16()
        fp32 = best(lambda: a @ b, args.repeats)
        bf16 = best(lambda: low_a @ low_b, args.repeats)
        truth = a.double() @ b.double()

        def error(x):
            return ((x.double() - truth).norm() / truth.norm()).item()
        print(f"| {name} | {fp32:.4f} | {bf16:.4f} | {fp32 / bf16:.2f}x | {error(low_a @ low_b):.1e} ({error(a @ b):.1e}) |")

    layer = SATNet(729, m, 300, max_iter=args.sweeps, eps=0.0, k=k, backend="cpu")
    z, is_input = sudoku_batch(B, 36, torch.Generator().manual_seed(1))
    seconds = {"fp32": [], "bf16": []}
    for _ in range(args.repeats):
        for gemm in seconds:
            check_setup(torch.device("cpu"), args.precision, gemm)
            zz = z.clone().requires_grad_()
            start = time.perf_counter()
            layer(zz, is_input, generator=torch.Generator().manual_seed(2)).sum().backward()
            seconds[gemm].append(time.perf_counter() - start)
            layer.S.grad = None
    fp32, bf16 = (statistics.median(seconds[g]) for g in ("fp32", "bf16"))
    print(f"\nforward+backward, {args.sweeps} sweeps, kernel products {precision_name()}: "
          f"fp32 GEMMs {fp32:.3f} s, bf16 GEMMs {bf16:.3f} s ({fp32 / bf16:.2f}x; medians of {args.repeats})")


if __name__ == "__main__":
    main()
