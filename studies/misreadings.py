"""Misread givens at 9x9 (issue 25): which test-time variant lets reasoning overrule a misreading?

    python studies/misreadings.py --run-dir /path/to/finished/run --out results/cpu9_rules/epochs14/misreadings.jsonl
    python studies/misreadings.py --table results/cpu9_rules/epochs14/misreadings.jsonl

Reads a finished `dvc repro` workspace (data/prepared, models/solver.pt, models/solver_proofread.pt)
and scores the dev boards under each variant, nothing retrained:

    none          the pipeline's model as trained (the paper's)
    proofreader   the trained proofreader's model
    tta           the classifier's probabilities averaged over the image and its four one-pixel
                  shifts (test-time augmentation)
    release<T     givens the classifier reads with confidence below T become blanks: SATNet
                  infers them from their peers; one row per T of --thresholds
    tta+release<T both
    check         SATNet checks the readings (satground.solver.check.Checked, --folds folds), as the
                  evaluate stage's "+ check" rows
    proofreader+check, and where the run has models/solver_reread.pt (the reread stage):
    re-read, re-read+check   the stage's reader, without and with the check

The thresholds are a sweep on the dev boards, not a choice: on training boards the classifier
(trained on their images) reads nearly every given with confidence above 0.95, so they cannot
choose one. Per variant: exact boards, boards with every blank cell right, and, of the boards
with >= 1 misread given under the plain readings (truth read here for this report only), the
share solved exactly ("rescued": the misreading overruled) and the share with every blank cell
right; of the boards read right, the share solved exactly (what a variant breaks).

Rows carry "split": "dev"; rows written before the dev-only rule (no "split") scored the test
boards, and --table says so in its "boards scored" column (the figures of
docs/studies/misreadings.md).
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from common import WORKSPACE, append_rows, dev_boards, markdown, read_rows, run_arguments, scored_split
from satground.boards.data import Boards, load_truth
from satground.harness.io import seed_everything
from satground.readers.lenet import image_batch
from satground.boards.metrics import solution_metrics
from satground.solver.models import VisualSolver, load_solver
from satground.solver.check import Checked
from satground.solver.training import predict, predicted_digits

SHIFTS = ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1))


class ShiftAveraged(nn.Module):
    """A classifier whose logits are the log of its probabilities averaged over one-pixel shifts
    of the image (VisualSolver's softmax then gives the average)."""

    def __init__(self, classifier: nn.Module):
        super().__init__()
        self.classifier = classifier

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        probs = torch.stack([F.softmax(self.classifier(torch.roll(x, shifts=s, dims=(2, 3))), dim=1)
                             for s in SHIFTS]).mean(dim=0)
        return probs.clamp_min(1e-12).log()


def reading_confidence(model: VisualSolver, boards: Boards) -> torch.Tensor:
    """(N, C): the classifier's top probability at each given cell, 1 at blank cells."""
    model.eval()
    with torch.no_grad():
        shown = boards.images[boards.cell_image[boards.is_input]]
        probs = F.softmax(model.classifier(image_batch(shown)), dim=1)
    confidence = torch.ones(boards.is_input.shape)
    confidence[boards.is_input] = probs.max(dim=1).values
    return confidence


def release(boards: Boards, confidence: torch.Tensor, threshold: float) -> Boards:
    """The boards with every given read below `threshold` turned into a blank cell."""
    released = boards.is_input & (confidence < threshold)
    return replace(boards, is_input=boards.is_input & ~released,
                   cell_image=torch.where(released, -1, boards.cell_image))


def digits_of(model: VisualSolver, boards: Boards, threshold: float, batch_size: int) -> torch.Tensor:
    if threshold > 0:
        boards = release(boards, reading_confidence(model, boards), threshold)
    # SATNet's forward draws its random start vectors: every variant from the same seed (the
    # evaluate stage's, params seed 0), so only the variant differs between rows
    seed_everything(0)
    return predicted_digits(predict(model, boards, batch_size, torch.device("cpu")), boards.n_digits)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--thresholds", type=float, nargs="+", default=[0.5, 0.8, 0.95])
    parser.add_argument("--folds", type=int, default=8, help="the check's folds (evaluate.check_folds)")
    parser.add_argument("--only", nargs="+", help="these variants only (and none, which defines the misread boards)")
    parser.add_argument("--batch-size", type=int, default=100)
    args = run_arguments(parser, table)
    if args is None:
        return
    dev, solution = dev_boards(args.run_dir)
    truth = load_truth(args.run_dir / WORKSPACE["prepared"], "dev", dev)["input_labels"].long()
    models = {name: load_solver(args.run_dir / "models" / f"{name}.pt", boards=dev, kind="visual")
              for name in ("solver", "solver_proofread", "solver_reread")  # train's, proofread's, reread's
              if name != "solver_reread" or (args.run_dir / "models" / f"{name}.pt").is_file()}

    tta = VisualSolver(ShiftAveraged(models["solver"].classifier), models["solver"].solver)
    variants = [("none", models["solver"], 0.0), ("proofreader", models["solver_proofread"], 0.0), ("tta", tta, 0.0)]
    variants += [(f"{name}<{t}", model, t) for name, model in (("release", models["solver"]), ("tta+release", tta))
                 for t in args.thresholds]
    variants += [("check", Checked(models["solver"], args.folds), 0.0),
                 ("proofreader+check", Checked(models["solver_proofread"], args.folds), 0.0)]
    if "solver_reread" in models:
        variants += [("re-read", models["solver_reread"], 0.0),
                     ("re-read+check", Checked(models["solver_reread"], args.folds), 0.0)]
    if args.only:
        variants = [v for v in variants if v[0] == "none" or v[0] in args.only]
    scored = {}  # name -> (threshold, digits, seconds)
    for name, model, threshold in variants:
        started = time.time()
        scored[name] = threshold, digits_of(model, dev, threshold, args.batch_size), round(time.time() - started, 1)
    misread = ((scored["none"][1] != truth) & dev.is_input).any(dim=1)  # under the plain readings
    rows = []
    for name, (threshold, digits, seconds) in scored.items():
        exact = (digits == solution).all(dim=1)
        read = ((digits == truth) | ~dev.is_input).all(dim=1)
        blanks = ((digits == solution) | dev.is_input).all(dim=1)
        metrics = solution_metrics(digits, solution, dev)
        row = {"run": str(args.run_dir), "split": "dev", "variant": name, "threshold": threshold,
               "boards": metrics["board_accuracy"], "blank_boards": metrics["blank_board_accuracy"],
               "visual": metrics["visual_accuracy"],
               "misread_boards": int(misread.sum()), "rescued": float(exact[misread].float().mean()),
               "misread_blanks_right": float(blanks[misread].float().mean()),
               "read_right_solved": float(exact[~misread].float().mean()),
               "givens_all_right_after": float(read.float().mean()), "seconds": seconds}
        print(json.dumps(row), flush=True)
        rows.append(row)
    append_rows(args.out, rows)


def table(path: Path) -> str:
    """The rows as a markdown table; "boards scored": each row's split (common.scored_split)."""
    return markdown(
        ["run", "boards scored", "variant", "exact boards %", "every blank right %",
         "boards with a misread given", "of those solved exactly %",
         "of those every blank right %", "boards read right, solved %", "givens all right %"],
        ([Path(r["run"]).name, scored_split(r), r["variant"], f"{100 * r['boards']:.1f}",
          f"{100 * r['blank_boards']:.1f}", r["misread_boards"], f"{100 * r['rescued']:.1f}",
          f"{100 * r['misread_blanks_right']:.1f}", f"{100 * r['read_right_solved']:.1f}",
          f"{100 * r['givens_all_right_after']:.1f}"]
         for r in read_rows(path)))


if __name__ == "__main__":
    main()
