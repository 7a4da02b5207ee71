"""Self-grounded training: learn which cluster is which digit through SATNet (paper sec. 3.2).

The distilled classifier is frozen; SATNet is trained on the ungrounded training boards with
the Symbol Grounding Loss over output cells (`ground.loss`, satground.solver.losses): the paper's form,
or `matched` (ours), which rewards the entries of the running P_hat's Hungarian matching after a
warm-up epoch of the paper's form and, unlike it, is minimised at a permutation at nine digits
too. After each epoch the loss's estimate of P_hat (the epoch's mean for the paper's form, the
running P_hat for matched) gives the current hard permutation, and the per-cell accuracy of
held-out training boards (output cells, read through that permutation) decides early stopping.
Input-cell labels are never read. The info keeps the permutation read after every epoch and the
epoch from which it no longer changed; ground.settle (ours) stops the phase once it has stayed
put that many epochs (the stage's budget, docs/studies/stage-budget.md).

With ground.permutation: peers (ours, label free) the permutation folded into the classifier
comes instead from the rule the boards obey: a given cell of cluster c never has a row, column
or box peer whose output label is its digit (satground.solver.grounding.peer_label_permutation). The
loss's permutation is still found and reported beside it. With permutation: loss and no
align_inputs (the rule-free configuration) the stage never reads the peer structure.

With cluster.clusters K' above the K digits (surjective grounding, ours) SATNet speaks the K'
clusters, P_hat is K' x K and its Hungarian reading the best map of the clusters onto the digits.

P_hat maps SATNet's output encoding to digits. With ground.align_inputs (our addition, label
free) the permutation is then moved to the classifier's encoding by the relabelling that
SATNet's outputs show against their peer givens (satground.solver.grounding.align_to_inputs); it is
the identity, changing nothing, when SATNet numbers outputs like inputs.
"""
from __future__ import annotations

import torch

from satground.readers.classifier import load_classifier
from satground.boards.data import load_boards
from satground.solver.grounding import (PermutationHistory, choose_permutation, hard_permutation,
                                        is_permutation, peer_cooccurrence, peer_label_cooccurrence)
from satground.harness.io import PipelineError, save_all, save_figure
from satground.readers.lenet import predict as classify
from satground.solver.losses import GroundingLoss
from satground.solver.models import VisualSolver, checkpoint, solver_from_params
from satground.harness.params import load_params
from satground.harness.resume import ResumeOptions
from satground.boards.plots import plot_permutation
from satground.harness.satnet_stage import prepare_satnet_training
from satground.harness.stage import run_stage, stage_arguments
from satground.harness.tracking import StageReport
from satground.solver.training import (EarlyStopping, fit, freeze, grounding_epoch_metrics, predict,
                                       predicted_digits, readings_once, split_boards, subset)


def peer_evidence(cfg, model: VisualSolver, boards, val, device) -> tuple:
    """(SATNet's val outputs against their peer givens, the training givens' clusters against
    their peers' output labels), each read only where a setting asks for it: without
    align_inputs and with permutation: loss (the rule-free configuration) both are None and
    nothing here reads the Sudoku rules."""
    output_cooccurrence = label_cooccurrence = None
    if cfg.align_inputs:  # P_hat speaks SATNet's output encoding: how it relabels the classifier's
        probs = predict(model, val, cfg.batch_size, device, desc="align")
        val_clusters = predicted_digits(probs, val.n_digits) - 1
        output_cooccurrence = peer_cooccurrence(val_clusters, val.is_input, val.board_size)
    if cfg.permutation == "peers":  # the rule every board obeys: given clusters against output labels
        given_clusters = classify(model.classifier, boards.images)[boards.cell_image.clamp_min(0)]
        label_cooccurrence = peer_label_cooccurrence(given_clusters, boards.labels, boards.is_input,
                                                     boards.board_size)
    return output_cooccurrence, label_cooccurrence


def main(argv=None):
    args = stage_arguments(__doc__, ["prepared", "classifier", "model-out", "permutation-out",
                                     "plot-out", "metrics-out", "resume-dir"], argv)

    params = load_params(args.params)
    cfg, sat = params.ground, params.satnet
    device, generator = prepare_satnet_training(params)
    boards = load_boards(args.prepared, "train")  # ungrounded: no input-cell label in it
    K = boards.n_digits
    try:
        train, val = split_boards(boards, cfg.val_fraction, generator)
    except ValueError as exc:
        raise PipelineError(f"{params.source}: 'ground.val_fraction': {exc}") from None
    if cfg.boards:  # the split's order is a seeded shuffle: its first boards are a random draw
        train = subset(train, torch.arange(min(cfg.boards, len(train))))
    clusters = params.cluster.n_clusters(K)  # K' > K: SATNet speaks the clusters, mapped onto digits
    classifier = load_classifier(args.classifier, clusters)
    freeze(classifier)
    solver = solver_from_params(boards.board_size, sat, zero_input_outputs=True,
                                output_softmax=cfg.output_softmax, values=clusters)
    model = VisualSolver(classifier, solver).to(device)
    optimizer = torch.optim.Adam(solver.parameters(), lr=sat.lr)

    loss_fn = GroundingLoss(K, cfg.loss, cfg.approxmax, cfg.temperature, cfg.warmup_epochs,
                            cfg.match_decay, n_clusters=clusters)

    readings = PermutationHistory([])

    def evaluate() -> dict:
        """Validation read through the permutation of the loss's current estimate of P_hat."""
        loss_fn.end_epoch()
        P = loss_fn.estimate()
        argmax = hard_permutation(P, "argmax")
        perm = argmax if cfg.assignment == "argmax" else hard_permutation(P, "hungarian")
        readings.add(perm)
        scores = grounding_epoch_metrics(model, val_read, perm, cfg.batch_size, device)
        return {**{f"val_{k}": v for k, v in scores.items()},
                "argmax_is_permutation": is_permutation(argmax)}

    report = StageReport(args.metrics_out)
    warmup = 0 if cfg.loss == "paper" else cfg.warmup_epochs  # near chance: no patience spent
    stopping = EarlyStopping("val_blank_cells", cfg.patience, solver, keep=lambda: {"P": loss_fn.estimate()},
                             warmup=warmup, done=lambda: readings.settled_for(cfg.settle))
    with readings_once(model, train, val) as (train_read, val_read):  # the classifier is frozen
        resume = ResumeOptions(args.resume_dir, carry=(loss_fn, readings),
                               identity=(val_read, cfg.loss, cfg.warmup_epochs, cfg.match_decay,
                                         cfg.approxmax, cfg.temperature, cfg.assignment))
        fit(model, train_read, val_read, optimizer, loss_fn, cfg.epochs, cfg.batch_size, device,
            generator, report, desc="ground", resume=resume, evaluate=evaluate, stopping=stopping)
    best = stopping.restore()
    choice = choose_permutation(best["P"], cfg.assignment, cfg.permutation,
                                *peer_evidence(cfg, model, boards, val, device))
    save_figure(plot_permutation(best["P"], choice.output), args.plot_out)
    info = {
        **{k: v for k, v in best["row"].items() if k.startswith("val_")},
        "loss": best["row"]["loss"],
        "best_epoch": best["epoch"],
        "epochs_run": stopping.last_epoch,
        "train_boards": len(train),  # all but the validation boards, or ground.boards of them
        "epoch_permutations": readings.epochs,  # SATNet's outputs -> digits, read after each epoch
        "permutation_settled_epoch": readings.settled_epoch(best["epoch"]),
        **choice.agreements(),
    }
    save_all({args.model_out: checkpoint(model.cpu()), args.permutation_out: choice.record(best["epoch"])})
    report.finish({"ground_val_blank_cells": info["val_blank_cells"]}, info)
    print(f"ground: best epoch {best['epoch']}, val blank cells "
          f"{info['val_blank_cells']:.3f}, cluster->digit {choice.chosen.tolist()} from "
          f"{cfg.permutation} (loss: {choice.from_loss.tolist()} by {choice.assignment}"
          f"{', aligned to inputs' if cfg.align_inputs else ''}"
          f"{f'; peers: {choice.from_peers.tolist()}' if choice.from_peers is not None else ''})")

if __name__ == "__main__":
    run_stage(main)
