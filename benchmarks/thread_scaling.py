"""How the CPU backend scales with threads: a 9x9 batch (n=729 m=600 aux=300) per thread count.

    python benchmarks/thread_scaling.py                      # batches 40 and 160, 1..all cores
    python benchmarks/thread_scaling.py --threads 1 2 4 --batches 40
    python benchmarks/thread_scaling.py --k 16 --precision bf16  # the default's layer (satnet.k, precision)

Each point is `satnet_speed.py --one cpu` in a fresh process with torch's thread count set
(the backend runs one whole sample per thread), so every row is the same measurement as that
benchmark's cpu row. Prints forward+backward seconds per batch (median of --repeats), the
speed-up over the first thread count (one, by default) and the parallel efficiency. A batch of B samples
over t threads has ceil(B / t) samples on the busiest thread, so at 16 threads a batch of 40
(3 rounds, the last half full) cannot reach 16x; 160 (10 rounds) can come closer.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

SPEED = Path(__file__).with_name("satnet_speed.py")


def one_point(threads: int, batch: int, args) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    if args.precision:
        env["SATGROUND_CPU_PRECISION"] = args.precision
    cmd = [sys.executable, str(SPEED), "--one", "cpu", f"--batch={batch}", f"--k={args.k}",
           f"--repeats={args.repeats}", f"--max-iter={args.max_iter}", f"--eps={args.eps}"]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    cores = os.cpu_count() or 1
    default_threads = [t for t in (1, 2, 4, 8, 16, 32, 64) if t <= cores]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=default_threads)
    parser.add_argument("--batches", type=int, nargs="+", default=[40, 160])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-iter", type=int, default=40)
    parser.add_argument("--eps", type=float, default=1e-4)
    parser.add_argument("--k", type=int, default=32, help="the SDP rank (satnet.k)")
    parser.add_argument("--precision", choices=["fp32", "bf16x3", "bf16"],
                        help="the kernel's products (satnet.precision); unset: the kernel's default")
    args = parser.parse_args()
    from satnet_speed import cpu_model  # benchmarks/ is the script's folder, first on the path
    print(f"CPU: {cpu_model()}, {cores} cores visible; max_iter={args.max_iter} eps={args.eps} "
          f"k={args.k} precision={args.precision or 'default'}")
    print(f"{'batch':>5} {'threads':>7} {'fwd+bwd s':>10} {'speed-up':>9} {'efficiency':>10}")
    for batch in args.batches:
        first = None  # speed-up and efficiency are relative to the first thread count listed
        for threads in args.threads:
            seconds = one_point(threads, batch, args)["forward_backward_s"]
            first = first or seconds
            speedup = first / seconds
            efficiency = speedup * args.threads[0] / threads
            print(f"{batch:>5} {threads:>7} {seconds:10.3f} {speedup:8.2f}x "
                  f"{100 * efficiency:9.0f} %", flush=True)


if __name__ == "__main__":
    main()
