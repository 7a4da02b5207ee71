"""Which reader after end-to-end training (issue 25; the `reread` stage)? One finished run.

    python studies/readers.py --run-dir /path/to/finished/run --out results/readers/runs.jsonl
    python studies/readers.py --table results/readers/runs.jsonl

Reads a finished `dvc repro` workspace (data/prepared, models/solver.pt, params.yaml's `reread`
section) and trains readers on the training boards' given images with three sources of labels:

    own      the trained classifier's own arg max (self-training)
    reread   SATNet's votes on released givens plus that reading (satground.solver.reread, the stage's)
    truth    the true digits: a supervised ceiling, read for this report only

and two readers (satground.solver.reread.train_reader: `lenet`, a fresh LeNet; `cnn`, the DigitCNN
ensemble), plus the classifier as trained, and `cnn+trained`: the `cnn` reader with the
classifier as trained kept in it, their probabilities averaged (`reread.keep_classifier`). Per
row: label accuracy on the training images, reader accuracy on the dev boards' given images, and
the dev boards with that reader in front of the run's SATNet (exact, every blank right); CPU
seconds of the reader's training. Rows written before the dev-only rule scored the test images
and boards ("test_accuracy", no "split"; the figures of docs/studies/readers.md): --table shows
them with the split named.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from common import WORKSPACE, append_rows, markdown, read_rows, run_arguments, scored_split
from satground.boards.data import given_image_indices, load_boards, load_image_labels
from satground.harness.io import seed_everything
from satground.readers.lenet import predict as classify
from satground.solver.models import VisualSolver, load_solver
from satground.harness.params import load_params
from satground.solver.reread import pseudo_labels, satnet_votes, train_reader
from satground.solver.training import solution_scores


def run(run_dir: Path, out: Path, only: list[str] | None = None) -> None:
    torch.set_num_threads(1)
    cfg = load_params(run_dir / "params.yaml").reread
    prepared = run_dir / WORKSPACE["prepared"]
    train, dev = load_boards(prepared, "train"), load_boards(prepared, "dev", like=train)
    solution = load_boards(prepared, "dev", view="grounded").labels
    model = load_solver(run_dir / "models" / "solver.pt", boards=train, kind="visual")
    pool, dev_pool = given_image_indices(train), given_image_indices(dev)
    truth = load_image_labels(prepared, "train", pool)
    dev_truth = load_image_labels(prepared, "dev", dev_pool)

    votes, _, reading = satnet_votes(model, train, cfg.release, cfg.passes, cfg.batch_size,
                                     seed_everything(cfg.seed))
    labels = {"own": reading[pool].argmax(1), "reread": pseudo_labels(votes, reading)[pool], "truth": truth}
    candidates = [("as trained", "-", lambda: model.classifier)]
    candidates += [(source, kind, lambda s=source, k=kind: train_reader(
        k, train.images[pool], labels[s], train.n_digits, cfg.epochs, cfg.nets, cfg.seed,
        **cfg.reader_training(k)))
        for source in labels for kind in ("lenet", "cnn")]
    candidates += [(source, "cnn+trained", lambda s=source: train_reader(
        "cnn", train.images[pool], labels[s], train.n_digits, cfg.epochs, cfg.nets, cfg.seed,
        keep=model.classifier, **cfg.reader_training("cnn"))) for source in ("own", "reread")]
    for source, kind, make in candidates:
        if only and f"{source}:{kind}" not in only:
            continue
        start = time.process_time()
        reader = make()
        seconds = time.process_time() - start
        seed_everything(0)  # SATNet's start vectors, as evaluate seeds them
        scores = solution_scores(VisualSolver(reader, model.solver), dev, solution, 100,
                                 torch.device("cpu"))
        row = {"run": str(run_dir), "split": "dev", "labels": source, "reader": kind,
               "label_accuracy": None if source == "as trained" else
               (labels[source] == truth).float().mean().item(),
               "dev_accuracy": (classify(reader, dev.images[dev_pool]) == dev_truth).float().mean().item(),
               "boards": scores["board_accuracy"], "blank_boards": scores["blank_board_accuracy"],
               "cpu_seconds": round(seconds, 1)}
        print(json.dumps(row), flush=True)
        append_rows(out, [row])


def table(path: Path) -> str:
    """The rows as a markdown table; "boards scored": each row's split (common.scored_split)."""
    def held_out(row):  # the dev images; "test_accuracy" in rows before the dev-only rule
        return row["dev_accuracy"] if "dev_accuracy" in row else row["test_accuracy"]

    return markdown(
        ["boards scored", "labels", "reader", "training labels right %",
         "dev images read right % (test in rows before the dev-only rule)", "boards exact %",
         "every blank right %", "CPU s"],
        ([scored_split(r), r["labels"], r["reader"],
          "n/a" if r["label_accuracy"] is None else f"{100 * r['label_accuracy']:.2f}",
          f"{100 * held_out(r):.2f}", f"{100 * r['boards']:.1f}", f"{100 * r['blank_boards']:.1f}",
          r["cpu_seconds"]] for r in read_rows(path)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="LABELS:READER",
                        help="these rows only, e.g. reread:cnn (the stage's) or 'as trained:-'")
    args = run_arguments(parser, table, argv)
    if args is not None:
        run(args.run_dir, args.out, args.only)


if __name__ == "__main__":
    main()
