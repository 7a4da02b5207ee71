"""Baseline: non-visual Sudoku, the original SATNet given the input digits as symbols (one-hot),
trained with BCE on the output cells; then a proofreader trained on top with SATNet frozen.
Both are scored on the test boards against the full solution, and saved for error injection.
"""
from __future__ import annotations

import copy

import torch

from satground.config import (load_params, param, run_settings, run_stage, satnet_sizes,
                              stage_arguments)
from satground.data import load_boards
from satground.io import save_all, seed_everything
from satground.models import SymbolicSolver, add_trainable_proofreader, checkpoint
from satground.satnet import check_setup
from satground.tracking import StageReport, save_scores
from satground.training import bce_loss, fit, solution_scores


def main(argv=None):
    args = stage_arguments(__doc__, ["prepared", "model-out", "proofread-model-out", "metrics-out",
                                     "resume-dir"], argv)

    params = load_params(args.params)
    seed, device = run_settings(params)
    m, aux, max_iter = satnet_sizes(params)
    check_setup(device)  # the kernel's compiler and settings, before any work
    epochs = param(params, "baseline_nonvisual.epochs", int, low=1)
    batch_size = param(params, "baseline_nonvisual.batch_size", int, low=1)
    lr = param(params, "baseline_nonvisual.lr", float, low=0.0, high=1.0)
    proofread_epochs = param(params, "baseline_nonvisual.proofread_epochs", int, low=1)
    proofread_lr = param(params, "proofread.lr", float, low=0.0, high=1.0)

    generator = seed_everything(seed)
    # non-visual Sudoku gives the input digits themselves: the grounded view is the data here
    train = load_boards(args.prepared, "train", view="grounded")
    test = load_boards(args.prepared, "test", view="grounded", like=train)

    model = SymbolicSolver(train.board_size, m, aux, max_iter, zero_input_outputs=False).to(device)
    report = StageReport(args.metrics_out)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    last = {"satnet": fit(model, train, test, optimizer, bce_loss(on_inputs=False), epochs,
                          batch_size, device, generator, report, desc="non-visual SATNet",
                          resume_dir=args.resume_dir)}
    scores = {"no_proofreader": solution_scores(model, test, test.labels, batch_size, device)}
    # saved with the proofread model at the end: an interrupted run leaves neither, never one
    # model of this run beside one of an earlier run
    without_proofreader = copy.deepcopy(checkpoint(model.cpu()))

    optimizer = torch.optim.Adam(add_trainable_proofreader(model).parameters(), lr=proofread_lr)
    model.to(device)
    last["proofread"] = fit(model, train, test, optimizer, bce_loss(on_inputs=False),
                            proofread_epochs, batch_size, device, generator, report,
                            desc="non-visual proofread", prefix="proofread/",
                            resume_dir=args.resume_dir)
    scores["proofreader"] = solution_scores(model, test, test.labels, batch_size, device)

    save_all({args.model_out: without_proofreader, args.proofread_model_out: checkpoint(model.cpu())})
    save_scores(scores, args.metrics_out)
    report.finish({"nonvisual_boards": scores["no_proofreader"]["board_accuracy"]},
                  info={"last_epoch": last})
    print(f"baseline non-visual SATNet: boards {scores['no_proofreader']['board_accuracy']:.3f}, "
          f"with proofreader {scores['proofreader']['board_accuracy']:.3f}")


if __name__ == "__main__":
    run_stage(main)
