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


def prepare_satnet_stage(params) -> tuple[torch.device, torch.Generator]:
    """(device, generator seeded with `seed`), after the kernel's compiler and settings are
    checked: what a stage that runs a trained SATNet does before any work."""
    device = stage_device()
    check_setup(device, params.satnet.precision, params.satnet.gemm)
    return device, seed_everything(params.seed)


def prepare_satnet_training(params) -> tuple[torch.device, torch.Generator]:
    """prepare_satnet_stage, after checking that S and its optimiser state fit in memory: what a
    stage that trains SATNet's S does before any work."""
    check_satnet_memory(params)
    return prepare_satnet_stage(params)
