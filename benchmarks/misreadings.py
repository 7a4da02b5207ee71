"""Misread givens at 9x9 (issue 25): which test-time variant lets reasoning overrule a misreading?

    python benchmarks/misreadings.py --run-dir /path/to/finished/run --out results/cpu9/misreadings.jsonl
    python benchmarks/misreadings.py --table results/cpu9/misreadings.jsonl

Reads a finished `dvc repro` workspace (data/prepared, models/solver.pt, models/solver_proofread.pt)
and scores the test boards under each variant, nothing retrained:

    none          the pipeline's model as trained (the paper's)
    proofreader   the trained proofreader's model
    tta           the classifier's probabilities averaged over the image and its four one-pixel
                  shifts (test-time augmentation)
    release       givens the classifier reads with confidence below a threshold become blanks:
                  SATNet infers them from their peers. The threshold is chosen on training boards
                  by the share with every blank cell right (blank-cell labels only: no given's
                  label is read), from --thresholds
    tta+release   both

Per variant: exact boards, boards with every blank cell right, and the boards with >= 1 misread
given under the plain readings (truth read here for this report only) with the share of them
each variant solves exactly ("rescued"), and the share of the boards read right that it breaks.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from satground.data import Boards, load_boards, load_truth  # noqa: E402
from satground.io import seed_everything  # noqa: E402
from satground.lenet import image_batch  # noqa: E402
from satground.metrics import solution_metrics  # noqa: E402
from satground.models import VisualSolver, load_solver  # noqa: E402
from satground.training import predict, predicted_digits, subset  # noqa: E402

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


def blank_boards(digits: torch.Tensor, boards: Boards) -> float:
    """Share of boards with every blank cell right (blank-cell labels only)."""
    blank = ~boards.is_input
    return float(((digits == boards.labels.long()) | ~blank).all(dim=1).float().mean())


def choose_threshold(model: VisualSolver, train: Boards, thresholds: list[float], batch_size: int) -> tuple:
    scores = {t: blank_boards(digits_of(model, train, t, batch_size), train) for t in [0.0, *thresholds]}
    return max(scores, key=scores.get), scores


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", type=Path)
    parser.add_argument("--thresholds", type=float, nargs="+", default=[0.5, 0.7, 0.9, 0.97, 0.99])
    parser.add_argument("--select-boards", type=int, default=2000, help="training boards the threshold is chosen on")
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--table", type=Path, help="print the table of a results file and stop")
    args = parser.parse_args()
    if args.table:
        print(table(args.table))
        return
    if args.run_dir is None or args.out is None:
        parser.error("--run-dir and --out are required to run")
    prepared = args.run_dir / "data" / "prepared"
    test = load_boards(prepared, "test")
    solution = load_boards(prepared, "test", view="grounded").labels.long()
    truth = load_truth(prepared, "test", test)["input_labels"].long()
    train = load_boards(prepared, "train")
    train = subset(train, torch.arange(min(args.select_boards, len(train))))
    models = {name: load_solver(args.run_dir / "models" / f"{name}.pt", boards=test, kind="visual")
              for name in ("solver", "solver_proofread")}

    plain = digits_of(models["solver"], test, 0.0, args.batch_size)
    misread = ((plain != truth) & test.is_input).any(dim=1)
    tta = VisualSolver(ShiftAveraged(models["solver"].classifier), models["solver"].solver)
    rows = []
    for name, model, releasing in (("none", models["solver"], False), ("proofreader", models["solver_proofread"], False),
                                   ("tta", tta, False), ("release", models["solver"], True),
                                   ("tta+release", tta, True)):
        started = time.time()
        threshold, scores = choose_threshold(model, train, args.thresholds, args.batch_size) if releasing else (0.0, {})
        digits = digits_of(model, test, threshold, args.batch_size)
        exact = (digits == solution).all(dim=1)
        read = ((digits == truth) | ~test.is_input).all(dim=1)
        metrics = solution_metrics(digits, solution, test)
        row = {"run": str(args.run_dir), "variant": name, "threshold": threshold,
               "train_blank_boards_by_threshold": scores, "boards": metrics["board_accuracy"],
               "blank_boards": metrics["blank_board_accuracy"], "visual": metrics["visual_accuracy"],
               "misread_boards": int(misread.sum()), "rescued": float(exact[misread].float().mean()),
               "read_right_solved": float(exact[~misread].float().mean()),
               "givens_all_right_after": float(read.float().mean()), "seconds": round(time.time() - started, 1)}
        print(json.dumps(row), flush=True)
        rows.append(row)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("a") as out:
        out.writelines(json.dumps(row) + "\n" for row in rows)


def table(path: Path) -> str:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    out = ["| variant | release threshold (chosen on training boards) | exact boards % | every blank right % | "
           "boards with a misread given | of those solved % | boards read right, solved % |", "|---" * 7 + "|"]
    for r in rows:
        out.append(f"| {r['variant']} | {r['threshold'] or '-'} | {100 * r['boards']:.1f} | "
                   f"{100 * r['blank_boards']:.1f} | {r['misread_boards']} | {100 * r['rescued']:.1f} | "
                   f"{100 * r['read_right_solved']:.1f} |")
    return "\n".join(out)


if __name__ == "__main__":
    main()
