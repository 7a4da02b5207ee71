"""How often a process's first call into torch's vector math (MKL VML) comes out wrong when it
runs on two threads at once, with and without `import satground` first (which makes that first
call on one thread: satground/__init__.py). Each try is a fresh process.

    python benchmarks/vector_math_race.py [--tries 150] [--threads 2]

A try mimics the start of a SATNet stage: torch on `threads` threads, S Sᵀ at the layer's shape
(1,030 x 600, MKL's GEMM), then cos of a batch's fixed inputs (40 x 729, pi z), the layer's first
vector-math call. The first cos counts as wrong when it differs from a second cos of the same
tensor; its error is measured against cos in float64. The arms alternate try by try.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys

from common import cpu_model

TRY = """
import json, math, sys
if sys.argv[1] == "satground":
    import satground
import torch
torch.set_num_threads(int(sys.argv[2]))
torch.manual_seed(16)
S = torch.randn(1030, 600) * 0.02
C = S @ S.T
x = math.pi * torch.rand(40, 729)
first, again = torch.cos(x), torch.cos(x)
error = (first.double() - torch.cos(x.double())).abs().max().item()
print(json.dumps({"wrong": int((first != again).sum()), "error": error}))
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--tries", type=int, default=150)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    arms = {"torch first": "torch", "satground first": "satground"}
    wrong = {arm: [] for arm in arms}
    for _ in range(args.tries):
        for arm, first in arms.items():
            done = subprocess.run([sys.executable, "-c", TRY, first, str(args.threads)],
                                  capture_output=True, text=True, check=True)
            wrong[arm].append(json.loads(done.stdout))
    print(f"{cpu_model()}, torch on {args.threads} threads, "
          f"{args.tries} fresh processes an arm")
    for arm, tries in wrong.items():
        bad = [t for t in tries if t["wrong"]]
        worst = max((t["error"] for t in bad), default=max(t["error"] for t in tries))
        print(f"{arm:16s} first cos wrong in {len(bad)} of {len(tries)} processes "
              f"(largest error {worst:.2g})")


if __name__ == "__main__":
    main()
