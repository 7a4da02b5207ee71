"""What every SATNet stage does before its work: pick the device, check that the SATNet sizes fit
in memory and that the kernel builds with its settings, and seed every generator."""
from __future__ import annotations

import torch

from ..satnet import check_setup
from .io import seed_everything
from .stage import check_memory, stage_device


def check_satnet_memory(params) -> None:
    """S and its Adam state (4 N x m) and the Gram matrix (N x N) must fit in memory, N = n + 1 +
    aux with n = 729, the 9x9 board's cells x digits (the largest board)."""
    N = 729 + 1 + params.satnet.aux
    check_memory(params.source, "'satnet.m' and 'satnet.aux'", 4 * (4 * N * params.satnet.m + 2 * N * N))


def prepare_satnet_stage(params, trains_satnet: bool = True) -> tuple[torch.device, torch.Generator]:
    """(device, generator seeded with `seed`), after the checks that fail before any work: the
    memory check for a stage that trains SATNet's S, then the kernel's compiler and settings."""
    device = stage_device()
    if trains_satnet:
        check_satnet_memory(params)
    check_setup(device, params.satnet.precision)
    return device, seed_everything(params.seed)
