"""The cores' measured multiply-add peak: the roofline the SATNet kernel is held against.

    python benchmarks/core_peak.py                       # this CPU's native build, torch's threads
    python benchmarks/core_peak.py --target x86-64-v3    # the AVX2 build's instructions

Compiles benchmarks/peak.c with the kernel's own flags for the same target (satground's
cpu.compile_flags) and times, on 1 thread and on torch's thread count (one chain set per
thread), independent chains of the instructions the kernel's tiles run: an fp32 FMA on the
build's widest vectors (one zmm with AVX-512, two ymm with AVX2) and, where the build has
AVX512_BF16, vdpbf16ps (32 bf16 products a zmm instruction). Prints products per second, the
best of --repeats. AMX tiles have no micro-benchmark here.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

SOURCE = Path(__file__).with_name("peak.c")
ROUNDS = 20_000_000  # about 0.1 s a call at a few GHz


def build(target: str) -> ctypes.CDLL:
    """peak.c compiled like the kernel for `target` (native or an -march value)."""
    from satground.satnet import cpu
    cc = cpu.compiler()
    flags = cpu.compile_flags(torch.float32, target)
    with tempfile.TemporaryDirectory() as folder:  # loaded, the library outlives its file
        out = Path(folder) / "peak.so"
        subprocess.run([*cc, *flags, "-o", str(out), str(SOURCE)], check=True)
        lib = ctypes.CDLL(str(out))
    for name in ("fma_wide", "dp_bf16"):
        getattr(lib, name).argtypes = [ctypes.c_long]
        getattr(lib, name).restype = ctypes.c_float
    return lib


def measure(target: str = "native", threads: int | None = None, repeats: int = 3) -> dict:
    """{"fp32 fma": products/s, "bf16 vdpbf16ps": products/s (where built)} on `threads`."""
    lib = build(target)
    threads = threads or torch.get_num_threads()
    kinds = {"fp32 fma": (lib.fma_wide, 0)}
    if lib.dp_bf16_built():
        kinds["bf16 vdpbf16ps"] = (lib.dp_bf16, 2)
    rates = {}
    for name, (fn, which) in kinds.items():
        best = float("inf")
        with ThreadPoolExecutor(threads) as pool:
            for _ in range(repeats):
                t0 = time.perf_counter()
                list(pool.map(fn, [ROUNDS] * threads))
                best = min(best, time.perf_counter() - t0)
        rates[name] = lib.products_per_round(which) * ROUNDS * threads / best
    return rates


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default=os.environ.get("SATGROUND_CPU_TARGET", "native"))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    for threads in sorted({1, torch.get_num_threads()}):
        for name, rate in measure(args.target, threads, args.repeats).items():
            print(f"{name:<15} {threads} thread(s): {rate / 1e9:7.1f} G products/s "
                  f"({2 * rate / 1e9:.1f} GFLOP/s)")


if __name__ == "__main__":
    main()
