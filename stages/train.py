"""Full training (paper sec. 3.2, second step): fold the learned permutation into the classifier,
then train SATNet and the classifier with BCE on the output cells of the ungrounded boards.

The classifier then speaks digits instead of clusters. SATNet continues from the self-grounded
phase (its variables relabelled by the same permutation) unless train.init_from_ground is false
or that SATNet numbered its outputs unlike its inputs (see satground.solver.grounding).
With train.rules_epochs, SATNet first learns the rules from the blank cells' labels alone (ours),
and with train.epochs 0 it then trains no further (the classifier may still tune through it);
with train.reground, the permutation folded is then read off that SATNet's inferences of the
training givens instead of the ground stage's (ours, satground.solver.reread.reground);
with train.hints, the end-to-end epochs also show it a falling share of those labels (ours).
With train.classifier_lr 0 the classifier is frozen and each image read once (ours, faster).
Then, with train.tune_epochs, the classifier alone learns through the frozen SATNet (ours).
Dev scores per epoch use output cells only; exact-match board accuracy is the evaluate stage's.
"""
from __future__ import annotations

import math
from contextlib import nullcontext

import torch

from satground.readers.classifier import load_classifier
from satground.boards.data import load_boards
from satground.solver.grounding import (fold_into_classifier, fold_into_satnet, is_permutation,
                                        load_permutation, narrow_satnet)
from satground.harness.io import PipelineError, save_all
from satground.solver.models import VisualSolver, checkpoint, load_solver, solver_from_params
from satground.solver.reread import reground
from satground.harness.params import load_params
from satground.harness.resume import ResumeOptions
from satground.satnet import kernel_description
from satground.harness.satnet_stage import prepare_satnet_training
from satground.harness.stage import run_stage, stage_arguments
from satground.harness.tracking import StageReport
from satground.solver.training import (HintedSolver, bce_loss, dev_scores, fit, freeze,
                                       hinted_loss, learn_rules, readings_once, tune_classifier)


def main(argv=None):
    args = stage_arguments(__doc__, ["prepared", "classifier", "ground", "permutation",
                                     "model-out", "metrics-out", "resume-dir"], argv)

    params = load_params(args.params)
    cfg, sat = params.train, params.satnet
    device, generator = prepare_satnet_training(params)
    train = load_boards(args.prepared, "train")  # ungrounded views only
    dev = load_boards(args.prepared, "dev", like=train)
    K = train.n_digits
    saved = load_permutation(args.permutation, K)
    perm, output_perm = saved["permutation"], saved["output_permutation"]

    classifier = load_classifier(args.classifier, len(perm))  # speaks clusters until folded below
    solver = solver_from_params(train.board_size, sat, zero_input_outputs=True)
    # A self-grounded SATNet that numbers its outputs unlike its inputs (the ground stage's
    # alignment moved the permutation) has no single relabelling of its variables that keeps
    # it working: train a fresh one instead. One that speaks more clusters than digits gives
    # each digit its representative cluster's variables (narrow_satnet).
    from_ground = cfg.init_from_ground and torch.equal(perm, output_perm)
    if cfg.init_from_ground and not from_ground:
        print("train: the self-grounded SATNet numbers outputs unlike inputs; starting SATNet afresh")
    if from_ground:
        grounded = load_solver(args.ground, boards=train, kind="visual").solver
        if ((grounded.satnet.m, grounded.satnet.aux) != (solver.satnet.m, solver.satnet.aux)
                or grounded.n_digits != len(perm)):
            raise PipelineError(f"{args.ground}: SATNet of shape {tuple(grounded.satnet.S.shape)} "
                                f"does not match satnet.m/aux ({tuple(solver.satnet.S.shape)})")
        if is_permutation(perm):
            solver.satnet.load_state_dict(grounded.satnet.state_dict())
            fold_into_satnet(solver.satnet, perm, K)
        else:
            narrow_satnet(grounded.satnet, solver.satnet, perm, saved["soft_permutation"])
    model = VisualSolver(classifier, solver).to(device)
    optimizer = torch.optim.Adam([
        {"params": solver.parameters(), "lr": sat.lr},
        {"params": classifier.parameters(), "lr": cfg.classifier_lr},
    ])

    report, resume = StageReport(args.metrics_out), ResumeOptions(args.resume_dir)
    rules, regrounded = {}, None
    if cfg.rules_epochs:
        rules = learn_rules(solver, train, dev, cfg.rules_epochs, cfg.rules_shown, sat.lr,
                            cfg.batch_size, device, generator, report, resume)
    if cfg.reground:
        perm, regrounded = reground(classifier, solver, train, perm, cfg.batch_size)
        print(f"train: reground through the rules-taught SATNet: {regrounded['permutation']} "
              f"(ground's {regrounded['ground_permutation']})")
    fold_into_classifier(classifier, perm)  # more clusters than digits: merged into the digits
    frozen = cfg.classifier_lr == 0  # then each image is read once, not once per batch
    if frozen:
        freeze(classifier)
    with readings_once(model, train, dev) if frozen else nullcontext((train, dev)) as (train_in, dev_in):
        trained, loss = model, bce_loss(on_inputs=False)
        if cfg.hints:
            batches = cfg.hint_epochs * math.ceil(len(train) / cfg.batch_size)
            trained = HintedSolver(model, cfg.hints, batches, generator)
            loss = hinted_loss(trained)
        if cfg.epochs:
            last = fit(trained, train_in, dev_in, optimizer, loss, cfg.epochs, cfg.batch_size,
                       device, generator, report, desc="train", resume=resume,
                       decay_epochs=cfg.decay_epochs)
        else:  # SATNet as the rules epochs left it (its loss theirs), scored through the classifier
            last = {"loss": rules["loss"], **dev_scores(model, dev_in, cfg.batch_size, device)}
    info = {"satnet_from_ground": from_ground, "satnet_kernel": kernel_description(device, sat.k),
            **last}
    if rules:
        info["rules"] = rules
    if regrounded:
        info["reground"] = regrounded
    if cfg.tune_epochs:
        info["tune"] = last = tune_classifier(model, train, dev, cfg.tune_epochs, cfg.tune_lr,
                                              cfg.batch_size, device, generator, report,
                                              resume=resume)
    save_all({args.model_out: checkpoint(model.cpu(), folded=perm)})  # evaluate checks this map
    report.finish({"train_loss": info["loss"], "train_dev_blank_cells": last["dev_blank_cells"]},
                  info=info)
    print(f"train: {cfg.epochs} + {cfg.tune_epochs} tune epochs, dev blank cells "
          f"{last['dev_blank_cells']:.3f}, valid grids {last['dev_valid_grids']:.3f}")


if __name__ == "__main__":
    run_stage(main)
