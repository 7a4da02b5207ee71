"""Proofreading (paper sec. 3.3): a near-identity Linear(C*K, C*K) + per-cell softmax inserted
before SATNet and trained alone, everything else frozen, with BCE on the output cells of the
ungrounded training boards. `proofread.epochs` 0: none, the model passes on unchanged and
evaluate has no proofreader rows.
"""
from __future__ import annotations

import torch

from satground.boards.data import load_boards
from satground.harness.io import save_all
from satground.solver.models import add_trainable_proofreader, checkpoint, load_solver
from satground.harness.params import load_params
from satground.harness.resume import ResumeOptions
from satground.harness.satnet_stage import prepare_satnet_stage
from satground.harness.stage import run_stage, stage_arguments
from satground.harness.tracking import StageReport
from satground.solver.training import bce_loss, fit, readings_once


def main(argv=None):
    args = stage_arguments(__doc__, ["prepared", "model", "model-out", "metrics-out", "resume-dir"], argv)

    params = load_params(args.params)
    cfg = params.proofread
    report = StageReport(args.metrics_out)
    if cfg.epochs == 0:  # none: the final reader passes on unchanged, without a proofreader
        save_all({args.model_out: checkpoint(load_solver(args.model, kind="visual"))})
        report.finish({}, info={"not_run": "proofread.epochs is 0"})
        print("proofread: none (proofread.epochs 0)")
        return
    device, generator = prepare_satnet_stage(params)
    train = load_boards(args.prepared, "train")  # ungrounded views only
    dev = load_boards(args.prepared, "dev", like=train)
    model = load_solver(args.model, boards=train, kind="visual",
                        backward_sweeps=params.satnet.backward_sweeps)
    proofreader = add_trainable_proofreader(model)
    model.to(device)
    optimizer = torch.optim.Adam(proofreader.parameters(), lr=cfg.lr)

    with readings_once(model, train, dev) as (train_read, dev_read):  # the classifier is frozen
        last = fit(model, train_read, dev_read, optimizer, bce_loss(on_inputs=False), cfg.epochs,
                   cfg.batch_size, device, generator, report, desc="proofread",
                   resume=ResumeOptions(args.resume_dir))
    save_all({args.model_out: checkpoint(model.cpu())})
    report.finish({"proofread_loss": last["loss"]}, info=last)
    print(f"proofread: {cfg.epochs} epochs, loss {last['loss']:.4f}, dev blank cells "
          f"{last['dev_blank_cells']:.3f}, valid grids {last['dev_valid_grids']:.3f}")


if __name__ == "__main__":
    run_stage(main)
