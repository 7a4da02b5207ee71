"""Baseline: the original visual SATNet (Wang et al. 2019), LeNet + SATNet trained end to end
from scratch, on grounded boards (input labels leak to LeNet through SATNet) or on ungrounded
ones (expected to fail, Chang et al. 2020). Optionally a proofreader is trained on top, on the
ungrounded boards as the paper does. With `baseline_visual.epochs` 0 it is not run: no scores,
its model file the untrained initialisation. Per-epoch curves on the dev boards; scored once,
at the end, on the test boards against the full solution.
"""
from __future__ import annotations

import torch

from satground.boards.data import load_boards
from satground.harness.io import save_all, seed_everything
from satground.readers.lenet import LeNet
from satground.solver.models import VisualSolver, add_trainable_proofreader, checkpoint, solver_from_params
from satground.harness.params import load_params
from satground.harness.resume import ResumeOptions
from satground.harness.satnet_stage import prepare_satnet_training
from satground.harness.stage import run_stage, stage_arguments
from satground.harness.tracking import StageReport, save_scores
from satground.solver.training import bce_loss, fit, solution_scores


def test_boards(root, train):
    """The test boards and their full solutions, read once the training is over: final scores only."""
    test = load_boards(root, "test", like=train)
    return test, load_boards(root, "test", view="grounded", like=train).labels


def main(argv=None):
    args = stage_arguments(__doc__, ["prepared", "model-out", "metrics-out", "resume-dir"], argv,
                           extra=lambda p:
                           p.add_argument("--view", choices=("grounded", "ungrounded"), required=True,
                                                    help="the boards it learns from: with the given digits' labels or without"))

    params = load_params(args.params)
    cfg, sat = params.baseline_visual, params.satnet
    report = StageReport(args.metrics_out)
    if cfg.epochs == 0:  # not run: the profile leaves the baselines to one of their own
        seed_everything(params.seed)  # the untrained weights a run would start from
        size = params.data.board_size
        solver = solver_from_params(size, sat, zero_input_outputs=args.view == "ungrounded")
        model = VisualSolver(LeNet(size ** 2), solver)
        save_all({args.model_out: checkpoint(model)})  # untrained: nothing reads it
        save_scores({}, args.metrics_out)
        report.finish({}, info={"not_run": "baseline_visual.epochs is 0"})
        print(f"baseline {args.view} visual SATNet: not run (baseline_visual.epochs 0)")
        return
    device, generator = prepare_satnet_training(params)
    train = load_boards(args.prepared, "train", view=args.view)
    dev = load_boards(args.prepared, "dev", like=train)  # ungrounded: per-epoch scores on output cells

    # The original model returns SATNet's pass-through at input cells; on grounded boards the
    # loss covers them too, which is exactly the label leakage.
    solver = solver_from_params(train.board_size, sat, zero_input_outputs=args.view == "ungrounded")
    model = VisualSolver(LeNet(train.n_digits), solver).to(device)
    optimizer = torch.optim.Adam([
        {"params": solver.parameters(), "lr": sat.lr},
        {"params": model.classifier.parameters(), "lr": cfg.classifier_lr},
    ])
    last = {"satnet": fit(model, train, dev, optimizer, bce_loss(on_inputs=True), cfg.epochs,
                          cfg.batch_size, device, generator, report, desc=f"{args.view} SATNet",
                          resume=ResumeOptions(args.resume_dir))}
    test, solution = test_boards(args.prepared, train)
    scores = {"no_proofreader": solution_scores(model, test, solution, cfg.batch_size, device)}

    if cfg.proofread_epochs > 0:
        ungrounded = load_boards(args.prepared, "train")
        optimizer = torch.optim.Adam(add_trainable_proofreader(model).parameters(), lr=params.proofread.lr)
        model.to(device)
        last["proofread"] = fit(model, ungrounded, dev, optimizer, bce_loss(on_inputs=False),
                                cfg.proofread_epochs, cfg.batch_size, device, generator, report,
                                desc=f"{args.view} proofread", prefix="proofread/",
                                resume=ResumeOptions(args.resume_dir))
        scores["proofreader"] = solution_scores(model, test, solution, cfg.batch_size, device)

    save_all({args.model_out: checkpoint(model.cpu())})
    save_scores(scores, args.metrics_out)
    report.finish({f"{args.view}_boards": scores["no_proofreader"]["board_accuracy"]},
                  info={"last_epoch": last})
    summary = ", ".join(f"{name}: boards {values['board_accuracy']:.3f} cells "
                        f"{values['cell_accuracy']:.3f}" for name, values in scores.items())
    print(f"baseline {args.view} visual SATNet: {summary}")


if __name__ == "__main__":
    run_stage(main)
