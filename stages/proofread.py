"""Proofreading (paper sec. 3.3): a near-identity Linear(C*K, C*K) + per-cell softmax inserted
before SATNet and trained alone, everything else frozen, with BCE on the output cells of the
ungrounded training boards.
"""
from __future__ import annotations

import argparse

import torch

from satground.config import load_params, param, run_settings, run_stage
from satground.data import load_boards
from satground.io import save_all, seed_everything
from satground.models import add_trainable_proofreader, checkpoint, load_solver
from satground.training import bce_loss, fit, open_live


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prepared", default="data/prepared")
    parser.add_argument("--model", default="models/solver.pt")
    parser.add_argument("--model-out", default="models/solver_proofread.pt")
    parser.add_argument("--metrics-out", default="metrics/proofread.json")
    parser.add_argument("--live-dir", default="metrics/proofread")
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args(argv)

    params = load_params(args.params)
    seed, device = run_settings(params)
    epochs = param(params, "proofread.epochs", int, low=1)
    batch_size = param(params, "proofread.batch_size", int, low=1)
    lr = param(params, "proofread.lr", float, low=0.0)

    generator = seed_everything(seed)
    train = load_boards(args.prepared, "train")  # ungrounded views only
    test = load_boards(args.prepared, "test", like=train)
    model = load_solver(args.model, boards=train, kind="visual")
    proofreader = add_trainable_proofreader(model)
    model.to(device)
    optimizer = torch.optim.Adam(proofreader.parameters(), lr=lr)

    live = open_live(args.live_dir)
    last = fit(model, train, test, optimizer, bce_loss(on_inputs=False), epochs, batch_size,
               device, generator, live, desc="proofread")
    live.end()

    save_all({args.model_out: checkpoint(model.cpu()), args.metrics_out: last})
    print(f"proofread: {epochs} epochs, loss {last['train_loss']:.4f}, test output-cell accuracy "
          f"{last['test_output_cell_accuracy']:.3f}, valid grids {last['test_valid_grid_rate']:.3f}")


if __name__ == "__main__":
    run_stage(main)
