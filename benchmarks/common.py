"""What the benchmarks share: the SATNet layer's 9x9 input batch, and the CPU's name.

A benchmark runs as a script from the repository root (`python benchmarks/NAME.py`): Python puts
the script's folder, benchmarks/, first on the module path, so `from common import ...` finds this
file; satground comes from the installed package.
"""
from __future__ import annotations

import platform

import torch


def sudoku_batch(batch: int, givens: int, generator: torch.Generator):
    """Random one-hot givens in `givens` random cells of each 9x9 board (729 variables)."""
    z = torch.zeros(batch, 81, 9)
    is_input = torch.zeros(batch, 81, 9, dtype=torch.bool)
    for b in range(batch):
        cells = torch.randperm(81, generator=generator)[:givens]
        digits = torch.randint(9, (givens,), generator=generator)
        z[b, cells, digits] = 1.0
        is_input[b, cells] = True
    return z.view(batch, 729), is_input.view(batch, 729)


def cpu_model() -> str:
    """The CPU's model name as lscpu prints it (Linux), else what platform knows."""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
