"""Symbol Grounding Loss forms at nine digits (issue 24): can the grounding phase find the
cluster -> digit permutation by itself?

Each run is the ground stage's model and loop: the frozen distilled classifier feeding
SymbolicSolver(board_size, m, aux, max_iter, zero_input_outputs=True, output_softmax) in a
VisualSolver, Adam on SATNet only, satground.solver.training.fit over shuffled training boards, with
the loss a satground.solver.losses.GroundingLoss. The held-out boards are the stage's split
(split_boards with val_fraction 0.1 and the run's seed); --n-train keeps only the first N of
the remaining training boards (screening). Per epoch, one JSON line:

    train_loss            mean loss over the epoch's batches (the form the epoch trained with)
    blank_cells           held-out blank-cell accuracy read through the loss's own permutation
                          (Hungarian of the running P_hat; no input alignment, no peers)
    blank_cells_true_perm the same through the true permutation (reference only)
    all_cells_authors     the authors' per-cell figure over all C cells: givens read through the
                          row arg max of the epoch-mean P_hat (SATNet returns the classifier's
                          probabilities there), blanks through the same arg max
    margin_top2           mean over rows of the epoch-mean P_hat's top minus second entry
    margin_matched        mean of the matched entries P[i, perm(i)] minus the mean of the others
                          (perm: the loss's permutation)
    argmax_is_permutation, argmax_right, loss_perm_right: the epoch-mean P_hat's row arg max is a
                          permutation / is the truth; the loss's permutation is the truth.

Truth (for reporting only, never given to the loss): common.true_permutation (studies/common.py),
the Hungarian matching of the classifier's clusters to the true digits of the training images.

A data folder holds prepared/ (the prepare stage's output) and classifier.pt (the distilled
classifier); --profile (cpu9, or 4x4) gives the sizes (satnet m/aux/max_iter/lr,
ground batch_size).

Commands (2 torch threads, one run at a time; CPU: 2 cores of an AMD EPYC, Zen 4):

    # seed 0: the finished run's data (the profile then named cpu9, now cpu9_rules: `peers` clusters)
    mkdir -p /tmp/sgl/cpu9_seed0 && cp -r /tmp/cpu9run/data/prepared /tmp/sgl/cpu9_seed0/ \
        && cp /tmp/cpu9run/models/classifier.pt /tmp/sgl/cpu9_seed0/
    # screening on seed 0, 3,000 training boards
    python studies/grounding_losses.py --data /tmp/sgl/cpu9_seed0 \
        --seed 0 --n-train 3000 --epochs 3 --loss matched --warmup-epochs 1 --tag screen
    # full runs (9,000 boards: 8,100 training, 900 held out), seeds 0-4
    python studies/grounding_losses.py --data /tmp/sgl/cpu9_seedS \
        --seed S --epochs 2 --loss matched --warmup-epochs 1 --no-output-softmax --tag full
    python studies/grounding_losses.py --table [--only-tag full]
    python studies/grounding_losses.py --plot [--only-tag screen]

Data for seeds 1-4 (prepare, cluster, distill with data/cluster/distill seeds = S on the cpu9
profile of the time, now cpu9_rules) come from the stages exactly as studies/grounding_seeds.py runs them; 4x4: the same
with the 4x4 profile (then named default).
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch

from common import REPO, append_rows, markdown, read_rows, true_permutation
from satground.readers.classifier import load_classifier
from satground.boards.data import load_boards, load_truth
from satground.solver.grounding import hard_permutation, is_permutation
from satground.harness.io import seed_everything
from satground.solver.losses import APPROXMAX, LOSSES, GroundingLoss
from satground.boards.metrics import output_metrics, solution_metrics
from satground.solver.models import SymbolicSolver, VisualSolver
from satground.harness.params import compose
from satground.solver.training import fit, freeze, predict, predicted_digits, subset

RESULTS = REPO / "results" / "grounding_losses"


def margins(P: torch.Tensor, perm: torch.Tensor) -> tuple[float, float]:
    top2 = P.topk(2, dim=1).values
    mask = torch.zeros_like(P, dtype=torch.bool)
    mask[torch.arange(len(perm)), perm] = True
    return float((top2[:, 0] - top2[:, 1]).mean()), float(P[mask].mean() - P[~mask].mean())


def run(args) -> None:
    torch.set_num_threads(args.threads)
    params = compose(args.profile)
    m, aux, max_iter = (params["satnet"][k] for k in ("m", "aux", "max_iter"))
    lr = params["satnet"]["lr"] if args.lr is None else args.lr
    batch_size = params["ground"]["batch_size"]
    device = torch.device("cpu")

    truth_perm = torch.tensor(true_permutation(args.data / "prepared", args.data / "classifier.pt"))
    generator = seed_everything(args.seed)
    boards = load_boards(args.data / "prepared", "train")
    K = boards.n_digits
    solution = load_truth(args.data / "prepared", "train", boards)["input_labels"].long()
    solution = torch.where(boards.is_input, solution, boards.labels.long())  # full grids
    # the stage's split (training.split_boards), with the indices kept for the truth
    n_val = int(round(args.val_fraction * len(boards)))
    order = torch.randperm(len(boards), generator=generator)
    train_idx, val_idx = order[n_val:], order[:n_val]
    if args.n_train is not None:
        train_idx = train_idx[:args.n_train]
    train, val = subset(boards, train_idx), subset(boards, val_idx)
    val_solution = solution[val_idx]

    classifier = load_classifier(args.data / "classifier.pt")
    freeze(classifier)
    solver = SymbolicSolver(boards.board_size, m, aux, max_iter, zero_input_outputs=True,
                            output_softmax=args.output_softmax)
    model = VisualSolver(classifier, solver).to(device)
    optimizer = torch.optim.Adam(solver.parameters(), lr=lr)
    loss_fn = GroundingLoss(K, args.loss, args.approxmax, args.temperature, args.warmup_epochs, args.decay)

    config = {"tag": args.tag, "loss": args.loss, "seed": args.seed, "board_size": boards.board_size,
              "n_train": len(train), "n_val": len(val), "output_softmax": args.output_softmax,
              "warmup_epochs": args.warmup_epochs, "decay": args.decay, "temperature": args.temperature,
              "approxmax": args.approxmax, "lr": lr, "m": m, "aux": aux, "max_iter": max_iter,
              "batch_size": batch_size, "true_permutation": truth_perm.tolist()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    clock = {"start": time.time()}

    def evaluate() -> dict:
        """The epoch just trained, scored on the held-out boards (fit's evaluate hook)."""
        train_seconds = time.time() - clock["start"]
        form = loss_fn.form  # the form the finished epoch trained with
        P = loss_fn.end_epoch()
        argmax = hard_permutation(P, "argmax")
        perm = loss_fn.permutation()
        probs = predict(model, val, batch_size, device)
        blank = output_metrics(predicted_digits(probs, K, perm), val)
        blank_true = output_metrics(predicted_digits(probs, K, truth_perm), val)
        authors = solution_metrics(predicted_digits(probs, K, argmax), val_solution, val)
        top2, matched = margins(P, perm)
        return {"form": form, "blank_cells": blank["blank_cells"], "blank_boards": blank["blank_boards"],
                "blank_cells_true_perm": blank_true["blank_cells"],
                "all_cells_authors": authors["cell_accuracy"],
                "authors_blank_cells": authors["output_cell_accuracy"],
                "margin_top2": top2, "margin_matched": matched,
                "argmax_is_permutation": is_permutation(argmax),
                "argmax_right": bool(torch.equal(argmax, truth_perm)),
                "loss_perm_right": bool(torch.equal(perm, truth_perm)),
                "epoch_hungarian_right": bool(torch.equal(hard_permutation(P, "hungarian"), truth_perm)),
                "argmax": argmax.tolist(), "loss_perm": perm.tolist(),
                "p_hat_min": float(P.min()), "p_hat_max": float(P.max()),
                "train_seconds": round(train_seconds, 1)}

    class Record:
        """fit's report: one JSON line per epoch, the epoch's training loss included."""

        @staticmethod
        def log_epoch(epoch: int, scores: dict, prefix: str = "") -> None:
            row = {**config, "epoch": epoch, "train_loss": scores["loss"],
                   **{k: v for k, v in scores.items() if k != "loss"},
                   "seconds": round(time.time() - clock["start"], 1)}
            print(json.dumps({k: v for k, v in row.items() if k not in config or k in ("loss", "seed")}),
                  flush=True)
            append_rows(args.out, [row])
            clock["start"] = time.time()

    fit(model, train, val, optimizer, loss_fn, args.epochs, batch_size, device, generator,
        report=Record(), desc=args.loss, evaluate=evaluate)


def load_rows(path: Path, tag: str | None) -> list[dict]:
    return [r for r in read_rows(path) if tag is None or r["tag"] == tag]


def label(r: dict) -> str:
    text = r["loss"]
    if r["loss"] != "paper":
        text += f", warm-up {r['warmup_epochs']}"
        if r["loss"] == "sinkhorn":
            text += f", T {r['temperature']}"
    text += ", softmax" if r["output_softmax"] else ", no softmax"
    return text


def table(rows: list[dict]) -> str:
    def yes(x):
        return "yes" if x else "no"

    return markdown(
        ["tag", "K", "loss form", "seed", "boards", "epoch (form)", "train loss", "blank cells % (loss's perm)",
         "blank cells % (true perm)", "all cells % (authors)", "top-2 margin", "matched margin",
         "arg max a perm", "arg max right", "loss perm right", "train s"],
        ([r["tag"], r["board_size"] ** 2, label(r), r["seed"], r["n_train"], f"{r['epoch']} ({r['form']})",
          f"{r['train_loss']:.4f}", f"{100 * r['blank_cells']:.1f}", f"{100 * r['blank_cells_true_perm']:.1f}",
          f"{100 * r['all_cells_authors']:.1f}", f"{r['margin_top2']:.4f}", f"{r['margin_matched']:.4f}",
          yes(r["argmax_is_permutation"]), yes(r["argmax_right"]), yes(r["loss_perm_right"]),
          f"{r['train_seconds']:.0f}"] for r in rows))


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    runs: dict[tuple, list[dict]] = {}
    for r in rows:
        runs.setdefault((r["tag"], r["board_size"], label(r), r["seed"]), []).append(r)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    labels = sorted({key[:3] for key in runs})
    colors = {key: f"C{i}" for i, key in enumerate(labels)}
    for key, rs in runs.items():
        rs = sorted(rs, key=lambda r: r["epoch"])
        epochs = [r["epoch"] for r in rs]
        first = key[3] == min(k[3] for k in runs if k[:3] == key[:3])
        name = f"{key[0]} {key[1] ** 2}x{key[1] ** 2}: {key[2]}" if first else None
        axes[0].plot(epochs, [100 * r["blank_cells"] for r in rs], "o-", color=colors[key[:3]], label=name, alpha=0.8)
        axes[1].plot(epochs, [r["margin_matched"] for r in rs], "o-", color=colors[key[:3]], alpha=0.8)
    chance = {2: 25.0, 3: 100 / 9}
    for size in sorted({key[1] for key in runs}):
        axes[0].axhline(chance[size], color="grey", ls=":", lw=1)
    axes[0].set(xlabel="epoch", ylabel="held-out blank cells % (loss's permutation)",
                title="Blank-cell accuracy (dotted: chance)")
    axes[1].set(xlabel="epoch", ylabel="matched minus off-diagonal mean of P_hat", yscale="symlog",
                title="P_hat margin")
    axes[1].set_yscale("symlog", linthresh=1e-3)
    for ax in axes:
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))  # whole epochs
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, help="folder with prepared/ and classifier.pt")
    parser.add_argument("--profile", default="cpu9", help="SATNet sizes, lr and batch of this profile "
                        "(the one DATA was prepared with)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--loss", choices=LOSSES, default="matched")
    parser.add_argument("--approxmax", choices=APPROXMAX, default="l2", help="the paper form's (and warm-up's)")
    parser.add_argument("--temperature", type=float, default=0.1)
    parser.add_argument("--warmup-epochs", type=int, default=1)
    parser.add_argument("--decay", type=float, default=0.99)
    parser.add_argument("--output-softmax", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--lr", type=float, default=None, help="default: the profile's satnet.lr")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--n-train", type=int, default=None, help="training boards kept (default: all)")
    parser.add_argument("--val-fraction", type=float, default=0.1)
    parser.add_argument("--threads", type=int, default=int(os.environ.get("SGL_THREADS", 2)))
    parser.add_argument("--tag", default="run")
    parser.add_argument("--out", type=Path, default=RESULTS / "runs.jsonl")
    parser.add_argument("--table", action="store_true", help="print the results as markdown and stop")
    parser.add_argument("--plot", action="store_true", help="write curves.png and stop")
    parser.add_argument("--only-tag", default=None, help="--table/--plot: rows of this tag only")
    args = parser.parse_args()
    if args.table or args.plot:
        rows = load_rows(args.out, args.only_tag)
        if args.table:
            print(table(rows))
        if args.plot:
            plot(rows, args.out.parent / "curves.png")
        return
    if args.data is None:
        parser.error("--data is required to run")
    run(args)


if __name__ == "__main__":
    main()
