"""Would a backward that stops on its own residual be accurate? Gradient error against sweeps.

    python benchmarks/backward_sweeps.py                       # the layer's initial S
    python benchmarks/backward_sweeps.py --weights results/learning_speed/aux300_m600_cpu.pt

The backward's Gauss-Seidel solve runs as many sweeps as each sample's forward did (as the
published code). This runs one 9x9 batch (n=729, m=600, aux=300, batch 40, 36 random givens, the
layer's defaults) on the cpu backend, then the backward again with its sweeps capped, and prints
the relative error of S.grad and z.grad against the uncapped backward and against a backward of
--converged sweeps (the solve's limit). A state dict with `satnet.S` (a trained 9x9 SATNet, e.g.
studies/learning_speed.py's --resume file) replaces the initial S.
"""
from __future__ import annotations

import argparse

import torch

from common import sudoku_batch
from satground.satnet import SATNet, cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", help="a state dict holding satnet.S (9x9, m=600, aux=300)")
    parser.add_argument("--caps", type=int, nargs="+", default=[2, 4, 8, 12, 16, 20, 25, 30])
    parser.add_argument("--converged", type=int, default=200)
    args = parser.parse_args()

    torch.manual_seed(0)
    layer = SATNet(729, 600, 300, backend="cpu")
    if args.weights:
        layer.S.data.copy_(torch.load(args.weights, weights_only=True)["model"]["satnet.S"])
    z, is_input = sudoku_batch(40, 36, torch.Generator().manual_seed(0))
    w = torch.randn(40, 729, generator=torch.Generator().manual_seed(1))
    full_backward, forward_sweeps = cpu.mix_backward, []

    def gradients(sweeps):
        """S.grad and z.grad with the backward's sweeps: None = the forward's, n > 0 = at most
        n, n < 0 = exactly -n."""
        def capped(C, V, gnrm, free, order, iters, prox_lam, a):
            forward_sweeps.append(iters)
            if sweeps is not None:
                iters = iters.clamp(max=sweeps) if sweeps > 0 else torch.full_like(iters, -sweeps)
            return full_backward(C, V, gnrm, free, order, iters, prox_lam, a)
        cpu.mix_backward = capped  # this process only: the layer looks its backend up by name
        layer.zero_grad()
        zz = z.clone().requires_grad_()
        out = layer(zz, is_input, generator=torch.Generator().manual_seed(5))
        (out * w).sum().backward()
        return layer.S.grad.clone(), zz.grad.clone()

    def error(a, b):
        return ((a - b).norm() / b.norm()).item()

    as_forward, limit = gradients(None), gradients(-args.converged)
    iters = forward_sweeps[0].float()
    print(f"S: {args.weights or 'initial'}; forward sweeps per sample {iters.mean():.1f} "
          f"({int(iters.min())}-{int(iters.max())})")
    print(f"backward at the forward's count vs {args.converged} sweeps: S.grad "
          f"{error(as_forward[0], limit[0]):.2e}, z.grad {error(as_forward[1], limit[1]):.2e}")
    print(f"{'backward sweeps':>15} {'S.grad vs fwd count':>20} {'z.grad vs fwd count':>20} "
          f"{'S.grad vs limit':>16} {'z.grad vs limit':>16}")
    for cap in args.caps:
        dS, dz = gradients(cap)
        print(f"{cap:>15} {error(dS, as_forward[0]):20.2e} {error(dz, as_forward[1]):20.2e} "
              f"{error(dS, limit[0]):16.2e} {error(dz, limit[1]):16.2e}")


if __name__ == "__main__":
    main()
