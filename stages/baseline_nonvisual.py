"""Baseline: non-visual Sudoku, the original SATNet given the input digits as symbols (one-hot),
trained with BCE on the output cells; then a proofreader trained on top with SATNet frozen.
Both are scored on the test boards against the full solution, and saved for error injection.
"""
from __future__ import annotations

import argparse
import copy

import torch

from satground.config import load_params, param, run_settings, run_stage, satnet_sizes
from satground.data import load_boards
from satground.io import save_all, seed_everything
from satground.models import SymbolicSolver, add_trainable_proofreader, checkpoint
from satground.training import bce_loss, fit, open_live, predict, predicted_digits, solution_metrics


def test_scores(model, test, batch_size, device) -> dict:
    digits = predicted_digits(predict(model, test, batch_size, device), test.n_digits)
    return solution_metrics(digits, test.labels, test)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prepared", default="data/prepared")
    parser.add_argument("--model-out", default="models/nonvisual.pt")
    parser.add_argument("--proofread-model-out", default="models/nonvisual_proofread.pt")
    parser.add_argument("--metrics-out", default="metrics/baseline_nonvisual.json")
    parser.add_argument("--live-dir", default="metrics/baseline_nonvisual")
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args(argv)

    params = load_params(args.params)
    seed, device = run_settings(params)
    m, aux, max_iter = satnet_sizes(params)
    epochs = param(params, "baseline_nonvisual.epochs", int, low=1)
    batch_size = param(params, "baseline_nonvisual.batch_size", int, low=1)
    lr = param(params, "baseline_nonvisual.lr", float, low=0.0)
    proofread_epochs = param(params, "baseline_nonvisual.proofread_epochs", int, low=1)
    proofread_lr = param(params, "proofread.lr", float, low=0.0)

    generator = seed_everything(seed)
    # non-visual Sudoku gives the input digits themselves: the grounded view is the data here
    train = load_boards(args.prepared, "train", view="grounded")
    test = load_boards(args.prepared, "test", view="grounded", like=train)

    model = SymbolicSolver(train.board_size, m, aux, max_iter, zero_input_outputs=False).to(device)
    live = open_live(args.live_dir)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    fit(model, train, test, optimizer, bce_loss(on_inputs=False), epochs, batch_size, device,
        generator, live, desc="non-visual SATNet")
    metrics = {"no_proofreader": test_scores(model, test, batch_size, device)}
    # saved with the proofread model at the end: an interrupted run leaves neither, never one
    # model of this run beside one of an earlier run
    without_proofreader = copy.deepcopy(checkpoint(model.cpu()))

    optimizer = torch.optim.Adam(add_trainable_proofreader(model).parameters(), lr=proofread_lr)
    model.to(device)
    fit(model, train, test, optimizer, bce_loss(on_inputs=False), proofread_epochs, batch_size,
        device, generator, live, desc="non-visual proofread", prefix="proofread/")
    metrics["proofreader"] = test_scores(model, test, batch_size, device)
    live.end()

    save_all({args.model_out: without_proofreader, args.proofread_model_out: checkpoint(model.cpu()),
              args.metrics_out: metrics})
    print(f"baseline non-visual SATNet: boards {metrics['no_proofreader']['board_accuracy']:.3f}, "
          f"with proofreader {metrics['proofreader']['board_accuracy']:.3f}")


if __name__ == "__main__":
    run_stage(main)
