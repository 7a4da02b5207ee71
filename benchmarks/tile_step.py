"""One step of the CPU kernel's fp32 tile at k = 16 and 32, timed on one thread.

    python benchmarks/tile_step.py

Builds benchmarks/tile_step.c (which includes satground/satnet/mixing.c) with the kernel's own
flags for this CPU and runs it: tile() at k = 16, tile16 where built (AVX-512) with b0dcd0a's
tile16 beside it, tile() at k = 32. A step is one free variable's row of the panel against its
vector; products are 12 rows x k.
"""
import subprocess
import tempfile
from pathlib import Path

import torch

from satground.satnet import cpu

SOURCE = Path(__file__).with_name("tile_step.c")


def main():
    cc = cpu.compiler()
    flags = [f for f in cpu.compile_flags(torch.float32, "native") if f not in ("-shared", "-fPIC")]
    with tempfile.TemporaryDirectory() as folder:
        exe = Path(folder) / "tile_step"
        subprocess.run([*cc, *flags, "-o", str(exe), str(SOURCE), "-lm"], check=True)
        print(subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout, end="")


if __name__ == "__main__":
    main()
