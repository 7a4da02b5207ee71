"""How far each float32 precision of the CPU kernel is from the reference, sweep by sweep.

    python benchmarks/precision_error.py                 # 9x9 size, the layer's initial S
    python benchmarks/precision_error.py --target cooperlake   # bf16 on the vdpbf16ps tile

For SATGROUND_CPU_PRECISION fp32, bf16x3 (AMX CPUs) and bf16 (AMX or AVX512_BF16), runs one 9x9
batch (n=729, m=600, aux=300, 36 random givens) forward and backward with a fixed number of
sweeps (no early stop) on the cpu backend and on the float32 reference from the same start, and
prints the largest difference of the outputs, dz and dS, each relative to the reference's
largest value. Rounding that a sweep makes is carried into the next ones, so the error grows
with the sweeps; what learning tolerates is a question for a whole run (docs/satnet-layer.md).
"""
from __future__ import annotations

import argparse
import os

import torch

from common import sudoku_batch


def values_and_grads(layer, z, is_input, seed: int = 0):
    torch.manual_seed(seed)  # the forward's random start, alike for both layers
    z = z.clone().requires_grad_()
    out = layer(z, is_input)
    (out * torch.linspace(-1, 1, out.shape[1])).sum().backward()
    grads = (out.detach(), z.grad.clone(), layer.S.grad.clone())
    layer.S.grad = None
    return grads


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, nargs="+", default=[1, 3, 10, 30])
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--target", default=os.environ.get("SATGROUND_CPU_TARGET", "native"))
    args = parser.parse_args()
    os.environ["SATGROUND_CPU_TARGET"] = args.target
    from satground.satnet import SATNet, cpu
    from satnet_speed import cpu_model  # benchmarks/ is the script's folder, first on the path
    available = {"fp32": True, "bf16x3": cpu.bf16x3_available(), "bf16": cpu.bf16_available()}
    print(f"CPU: {cpu_model()}; --target {args.target}: tile {cpu.tile_shape()}, "
          f"{'AMX' if cpu.bf16x3_available() else 'no AMX'}; precisions here: "
          f"{', '.join(p for p, ok in available.items() if ok)}")
    z, is_input = sudoku_batch(args.batch, 36, torch.Generator().manual_seed(0))
    print(f"{'precision':<9} {'sweeps':>6} {'output':>9} {'dz':>9} {'dS':>9}  (max |diff| / max |reference|)")
    for precision in (p for p, ok in available.items() if ok):
        os.environ["SATGROUND_CPU_PRECISION"] = precision
        for sweeps in args.sweeps:
            torch.manual_seed(0)
            ref = SATNet(729, 600, 300, max_iter=sweeps, eps=0.0, backend="reference")
            layer = SATNet(729, 600, 300, max_iter=sweeps, eps=0.0, backend="cpu")
            layer.S.data.copy_(ref.S.data)
            expected, got = values_and_grads(ref, z, is_input), values_and_grads(layer, z, is_input)
            errors = [((a - b).abs().max() / a.abs().max().clamp_min(1e-30)).item()
                      for a, b in zip(expected, got)]
            print(f"{precision:<9} {sweeps:>6} " + " ".join(f"{e:9.1e}" for e in errors), flush=True)


if __name__ == "__main__":
    main()
