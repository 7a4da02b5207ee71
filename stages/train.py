"""Full training (paper sec. 3.2, second step): fold the learned permutation into the classifier,
then train SATNet and the classifier with BCE on the output cells of the ungrounded boards.

The classifier then speaks digits instead of clusters. SATNet continues from the self-grounded
phase (its variables relabelled by the same permutation) unless train.init_from_ground is false
or that SATNet numbered its outputs unlike its inputs (see satground.grounding).
Test scores per epoch use output cells only; exact-match board accuracy is the evaluate stage's.
"""
from __future__ import annotations

import torch

from satground.config import (load_params, param, run_settings, run_stage, satnet_sizes,
                              stage_arguments)
from satground.data import load_boards
from satground.grounding import fold_into_classifier, fold_into_satnet, load_permutation
from satground.io import PipelineError, save_all, seed_everything
from satground.lenet import load_lenet
from satground.models import SymbolicSolver, VisualSolver, checkpoint, load_solver
from satground.satnet import check_setup
from satground.tracking import StageReport
from satground.training import bce_loss, fit


def main(argv=None):
    args = stage_arguments(__doc__, ["prepared", "classifier", "ground", "permutation",
                                     "model-out", "metrics-out", "resume-dir"], argv)

    params = load_params(args.params)
    seed, device = run_settings(params)
    m, aux, max_iter = satnet_sizes(params)
    check_setup(device)  # the kernel's compiler and settings, before any work
    epochs = param(params, "train.epochs", int, low=1)
    batch_size = param(params, "train.batch_size", int, low=1)
    satnet_lr = param(params, "train.satnet_lr", float, low=0.0, high=1.0)
    classifier_lr = param(params, "train.classifier_lr", float, low=0.0, high=1.0)
    init_from_ground = param(params, "train.init_from_ground", bool)

    generator = seed_everything(seed)
    train = load_boards(args.prepared, "train")  # ungrounded views only
    test = load_boards(args.prepared, "test", like=train)
    K = train.n_digits
    saved = load_permutation(args.permutation, K)
    perm, output_perm = saved["permutation"], saved["output_permutation"]

    classifier = load_lenet(args.classifier)
    if classifier.n_classes != K:
        raise PipelineError(f"{args.classifier}: classifier has {classifier.n_classes} classes, "
                            f"boards have {K} digits")
    fold_into_classifier(classifier, perm)
    solver = SymbolicSolver(train.board_size, m, aux, max_iter, zero_input_outputs=True)
    # A self-grounded SATNet that numbers its outputs unlike its inputs (the ground stage's
    # alignment moved the permutation) has no single relabelling of its variables that keeps
    # it working: train a fresh one instead.
    from_ground = init_from_ground and torch.equal(perm, output_perm)
    if init_from_ground and not from_ground:
        print("train: the self-grounded SATNet numbers outputs unlike inputs; starting SATNet afresh")
    if from_ground:
        grounded = load_solver(args.ground, boards=train, kind="visual").solver
        if (grounded.satnet.S.shape != solver.satnet.S.shape
                or grounded.board_size != train.board_size):
            raise PipelineError(f"{args.ground}: SATNet of shape {tuple(grounded.satnet.S.shape)} "
                                f"does not match satnet.m/aux ({tuple(solver.satnet.S.shape)})")
        solver.satnet.load_state_dict(grounded.satnet.state_dict())
        fold_into_satnet(solver.satnet, perm, K)
    model = VisualSolver(classifier, solver).to(device)
    optimizer = torch.optim.Adam([
        {"params": solver.parameters(), "lr": satnet_lr},
        {"params": classifier.parameters(), "lr": classifier_lr},
    ])

    report = StageReport(args.metrics_out)
    last = fit(model, train, test, optimizer, bce_loss(on_inputs=False), epochs, batch_size,
               device, generator, report, desc="train", resume_dir=args.resume_dir)
    save_all({args.model_out: checkpoint(model.cpu())})
    report.finish({"train_loss": last["loss"]}, info={"satnet_from_ground": from_ground, **last})
    print(f"train: {epochs} epochs, loss {last['loss']:.4f}, test blank cells "
          f"{last['test_blank_cells']:.3f}, valid grids {last['test_valid_grids']:.3f}")


if __name__ == "__main__":
    run_stage(main)
