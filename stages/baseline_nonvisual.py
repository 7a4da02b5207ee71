"""Baseline: non-visual Sudoku, the original SATNet given the input digits as symbols (one-hot),
trained with BCE on the output cells; then a proofreader trained on top with SATNet frozen.
Per-epoch curves on the dev boards; both are scored once, after training, on the test boards
against the full solution, and saved for error injection. With `baseline_nonvisual.epochs` 0
it is not run: no scores, its model files the untrained initialisation.
"""
from __future__ import annotations

import copy

import torch

from satground.boards.data import load_boards
from satground.harness.io import save_all, seed_everything
from satground.solver.models import add_trainable_proofreader, checkpoint, solver_from_params
from satground.harness.params import load_params
from satground.harness.resume import ResumeOptions
from satground.harness.satnet_stage import prepare_satnet_training
from satground.harness.stage import run_stage, stage_arguments
from satground.harness.tracking import StageReport, save_scores
from satground.solver.training import bce_loss, fit, solution_scores


def main(argv=None):
    args = stage_arguments(__doc__, ["prepared", "model-out", "proofread-model-out", "metrics-out",
                                     "resume-dir"], argv)

    params = load_params(args.params)
    cfg, sat = params.baseline_nonvisual, params.satnet
    report = StageReport(args.metrics_out)
    if cfg.epochs == 0:  # not run: the profile leaves the baselines to one of their own
        seed_everything(params.seed)  # the untrained weights a run would start from
        model = solver_from_params(params.data.board_size, sat, zero_input_outputs=False)
        untrained = checkpoint(model)  # nothing reads it: error_injection is off too
        save_all({args.model_out: untrained, args.proofread_model_out: untrained})
        save_scores({}, args.metrics_out)
        report.finish({}, info={"not_run": "baseline_nonvisual.epochs is 0"})
        print("baseline non-visual SATNet: not run (baseline_nonvisual.epochs 0)")
        return
    device, generator = prepare_satnet_training(params)
    # non-visual Sudoku gives the input digits themselves: the grounded view is the data here
    train = load_boards(args.prepared, "train", view="grounded")
    dev = load_boards(args.prepared, "dev", view="grounded", like=train)
    model = solver_from_params(train.board_size, sat, zero_input_outputs=False).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=sat.lr)
    last = {"satnet": fit(model, train, dev, optimizer, bce_loss(on_inputs=False), cfg.epochs,
                          cfg.batch_size, device, generator, report, desc="non-visual SATNet",
                          resume=ResumeOptions(args.resume_dir))}
    test = load_boards(args.prepared, "test", view="grounded", like=train)  # final scores only
    scores = {"no_proofreader": solution_scores(model, test, test.labels, cfg.batch_size, device)}
    # saved with the proofread model at the end: an interrupted run leaves neither, never one
    # model of this run beside one of an earlier run
    without_proofreader = copy.deepcopy(checkpoint(model.cpu()))

    if cfg.proofread_epochs > 0:  # 0: no proofreader; its file is then the model without one
        optimizer = torch.optim.Adam(add_trainable_proofreader(model).parameters(), lr=params.proofread.lr)
        model.to(device)
        last["proofread"] = fit(model, train, dev, optimizer, bce_loss(on_inputs=False),
                                cfg.proofread_epochs, cfg.batch_size, device, generator, report,
                                desc="non-visual proofread", prefix="proofread/",
                                resume=ResumeOptions(args.resume_dir))
        scores["proofreader"] = solution_scores(model, test, test.labels, cfg.batch_size, device)

    save_all({args.model_out: without_proofreader, args.proofread_model_out: checkpoint(model.cpu())})
    save_scores(scores, args.metrics_out)
    report.finish({"nonvisual_boards": scores["no_proofreader"]["board_accuracy"]},
                  info={"last_epoch": last})
    with_proofreader = (f", with proofreader {scores['proofreader']['board_accuracy']:.3f}"
                        if "proofreader" in scores else "")
    print(f"baseline non-visual SATNet: boards {scores['no_proofreader']['board_accuracy']:.3f}"
          f"{with_proofreader}")


if __name__ == "__main__":
    run_stage(main)
