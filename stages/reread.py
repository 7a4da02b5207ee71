"""Stage `reread` (ours): SATNet re-reads the training givens, and a new reader learns them.

See satground.solver.reread. The trained solver's SATNet infers released givens of the training boards
(from the other givens, or with `reread.context: solution` from those and the blank cells'
training labels); their votes and the classifier's reading give each training image a
pseudo-label; a new reader (`reread.reader`) trained on them replaces the classifier in front of
the unchanged SATNet.
`reread.reader: none` keeps train's solver as it is (the paper). With `reread.rounds` R > 1 (ours),
each later round first gives the last round's reader, frozen, a SATNet (`reread.round_satnet`):
a fresh one trained end to end behind it (train's batch size and decay,
satground.solver.training.train_behind), the last round's trained on, or the last round's kept;
then it re-reads with that SATNet: a reader that misread many givens trained the first SATNet
badly, and the re-read reader trains a better one; a SATNet taught the rules first
(`train.rules_epochs`) may instead keep them. With `reread.round_inputs: labels` the round's
SATNet reads the last round's pseudo-labels for the training givens instead of the reader. A
round whose pseudo-labels are the last round's keeps the last round's reader: training it again
on them gives the same weights.
The true digits of the dev boards' images (dev_truth.pt, "image_labels") are read only to
report how well the classifier and the new reader read them; no truth of the training or test
images is read.
"""
from __future__ import annotations

import torch

from satground.boards.data import given_image_indices, load_boards, load_image_labels
from satground.harness.io import save_all, seed_everything
from satground.readers.lenet import predict as classify
from satground.solver.models import VisualSolver, checkpoint, load_solver
from satground.harness.params import load_params
from satground.solver.reread import pseudo_labels, satnet_votes, train_reader
from satground.solver.training import train_behind
from satground.satnet import check_setup
from satground.harness.stage import run_stage, stage_arguments
from satground.harness.tracking import StageReport


def accuracy(pred: torch.Tensor, labels) -> float | None:
    return None if labels is None else (pred == labels).float().mean().item()


def main(argv=None):
    args = stage_arguments(__doc__, ["prepared", "model", "model-out", "metrics-out"], argv)

    params = load_params(args.params)
    cfg = params.reread
    check_setup(torch.device("cpu"), params.satnet.precision, params.satnet.gemm)  # its SATNet passes run on the CPU
    train = load_boards(args.prepared, "train")  # ungrounded views only
    dev = load_boards(args.prepared, "dev", like=train)
    model = load_solver(args.model, boards=train, kind="visual",
                        solve_sweeps=params.satnet.solve_sweeps)
    train_pool, dev_pool = given_image_indices(train), given_image_indices(dev)
    dev_truth = load_image_labels(args.prepared, "dev", dev_pool)  # reporting only
    report = StageReport(args.metrics_out)  # after every input is read: its clock starts here

    info = {"reader": cfg.reader, "context": cfg.context,
            "classifier_dev_accuracy": accuracy(classify(model.classifier, dev.images[dev_pool]), dev_truth)}
    info["reader_dev_accuracy"] = info["classifier_dev_accuracy"]  # reader none: the classifier stays
    if cfg.reader != "none":
        generator = seed_everything(cfg.seed)
        rounds = []
        for round_ in range(1, cfg.rounds + 1):
            if round_ > 1 and cfg.round_satnet != "keep":  # SATNet trained behind the last round's reader
                model = train_behind(model.classifier, train, dev, params.satnet,
                                     cfg.satnet_epochs(params.train.epochs), params.train.batch_size,
                                     params.train.decay_epochs, torch.device("cpu"), generator, report,
                                     desc=f"round {round_}", prefix=f"round{round_}_",
                                     solver=model.solver if cfg.round_satnet == "continue" else None,
                                     givens=(train_pool, labels) if cfg.round_inputs == "labels" else None)
            votes, counts, reading = satnet_votes(model, train, cfg.release, cfg.passes, cfg.batch_size,
                                                  generator, cfg.context)
            labels = pseudo_labels(votes, reading)[train_pool]
            # the same labels train the same reader (its own seed; rounds keep no classifier): keep it
            retrain = round_ == 1 or not torch.equal(labels, last_labels)
            if retrain:
                reader = train_reader(cfg.reader, train.images[train_pool], labels, train.n_digits,
                                      cfg.epochs, cfg.nets, cfg.seed,
                                      keep=model.classifier if cfg.keep_classifier else None,
                                      **cfg.reader_training())
            last_labels = labels
            rounds.append({
                "reader_retrained": retrain,
                "votes_per_image": counts[train_pool].mean().item(),
                # label free: how often SATNet's votes overrule the classifier's reading
                "pseudo_labels_changed": (labels != reading[train_pool].argmax(1)).float().mean().item(),
                "reader_dev_accuracy": accuracy(classify(reader, dev.images[dev_pool]), dev_truth)})
            model = VisualSolver(reader, model.solver)
        info.update({key: rounds[0][key] for key in ("votes_per_image", "pseudo_labels_changed")})
        info["reader_dev_accuracy"] = rounds[-1]["reader_dev_accuracy"]  # the last round's reader is kept
        if cfg.rounds > 1:
            info["rounds"] = rounds
    save_all({args.model_out: checkpoint(model)})
    report.finish({"reader_dev_accuracy": info["reader_dev_accuracy"]}, info)
    print(f"reread ({cfg.reader}): dev images read right {info['classifier_dev_accuracy']} -> "
          f"{info['reader_dev_accuracy']} -> {args.model_out}")


if __name__ == "__main__":
    run_stage(main)
