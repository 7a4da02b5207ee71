"""SATNet's random starts at test time (issue 25): one start against the mean of several.

    python studies/random_starts.py --run-dir /path/to/finished/run --out results/cpu9_rules/epochs14/random_starts.jsonl
    python studies/random_starts.py --table results/cpu9_rules/epochs14/random_starts.jsonl

SATNet's forward pass draws random unit vectors to start the mixing method from, so two passes
on one board can end in different local optima of the relaxation. This scores the `evaluate`
stage's "+ check" rows (satground.solver.check.Checked, --folds folds) on the dev boards of a finished
`dvc repro` workspace, for the re-read solver and the proofread one, nothing retrained: the check
is run once (seeded 0), then --starts solves of the checked boards, each from its own start. One
row per solver and per n in 1, 2, 4, ...: the mean of n starts' outputs (evaluate.starts = n),
scored on every disjoint group of n starts (mean, and std across groups where there are several).
--table prints those rows, then each solver and n across the runs (seeds): mean +- std. Rows carry
"split": "dev"; rows written before the dev-only rule (no "split") scored the test boards (the
figures of docs/studies/random-starts.md): the table names each row's boards and never averages
the two splits together.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from common import append_rows, dev_boards, markdown, read_rows, run_arguments, scored_split
from satground.harness.io import seed_everything
from satground.boards.metrics import solution_metrics
from satground.solver.models import VisualSolver, load_solver
from satground.solver.check import Checked
from satground.solver.training import predict, predicted_digits


class CheckedReadings(VisualSolver):
    """The check alone: a board's checked readings (B, C*K), not yet solved."""

    def __init__(self, checked: Checked):
        super().__init__(checked.classifier, checked.solver)
        self.checked = checked

    def forward(self, images, is_input):
        return self.checked.input_probs(images, is_input)


def mean_std(values) -> tuple[float, float | None]:
    """The mean of a list of figures and their sample std (None for a single figure)."""
    x = torch.tensor(values, dtype=torch.float64)
    return float(x.mean()), (float(x.std()) if len(x) > 1 else None)


def scores(model: VisualSolver, boards, solution, folds: int, starts: int, batch_size: int):
    """{n: [(exact, every blank right) per disjoint group of n starts]} for n = 1, 2, 4, ..."""
    cpu = torch.device("cpu")
    seed_everything(0)
    readings = predict(CheckedReadings(Checked(model, folds)), boards, batch_size, cpu)
    outputs = []
    with torch.no_grad():
        solver = model.solver.eval()
        for _ in range(starts):
            outputs.append(torch.cat([solver(readings[i:i + batch_size], boards.is_input[i:i + batch_size])
                                      for i in range(0, len(boards), batch_size)]))
    out = {}
    n = 1
    while n <= starts:
        groups = []
        for first in range(0, starts - n + 1, n):
            digits = predicted_digits(torch.stack(outputs[first:first + n]).mean(0), boards.n_digits)
            m = solution_metrics(digits, solution, boards)
            groups.append((m["board_accuracy"], m["blank_board_accuracy"]))
        out[n] = groups
        n *= 2
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folds", type=int, default=8, help="the check's folds (evaluate.check_folds)")
    parser.add_argument("--starts", type=int, default=8, help="solves per board, each from its own start")
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--name", help="the run's name in the table (default: the folder's)")
    args = run_arguments(parser, table)
    if args is None:
        return
    dev, solution = dev_boards(args.run_dir)
    rows = []
    for name in ("solver_reread", "solver_proofread"):
        started = time.time()
        model = load_solver(args.run_dir / "models" / f"{name}.pt", boards=dev, kind="visual")
        for n, groups in scores(model, dev, solution, args.folds, args.starts, args.batch_size).items():
            (boards, boards_std), (blank, blank_std) = (mean_std([g[i] for g in groups]) for i in (0, 1))
            rows.append({"run": args.name or args.run_dir.resolve().name, "split": "dev", "solver": name,
                         "starts": n, "groups": len(groups),
                         "boards": boards, "boards_std": boards_std, "blank_boards": blank, "blank_boards_std": blank_std,
                         "seconds": round(time.time() - started, 1)})
            print(json.dumps(rows[-1]), flush=True)
    append_rows(args.out, rows)


def table(path: Path) -> str:
    """Each run's rows, then each solver and n across runs: mean +- std of the runs' means, the
    rows of each split (common.scored_split) apart."""
    rows = read_rows(path)

    def pct(mean, std):
        return f"{100 * mean:.1f}" + (f" +- {100 * std:.1f}" if std is not None else "")
    runs = markdown(["run", "boards scored", "solver", "starts averaged", "groups of starts",
                     "exact boards %", "every blank right %"],
                    ([r["run"], scored_split(r), r["solver"], r["starts"], r["groups"],
                      pct(r["boards"], r["boards_std"]), pct(r["blank_boards"], r["blank_boards_std"])]
                     for r in rows))
    across = []
    for split, solver, n in dict.fromkeys((scored_split(r), r["solver"], r["starts"]) for r in rows):
        same = [r for r in rows if (scored_split(r), r["solver"], r["starts"]) == (split, solver, n)]
        exact, blank = (mean_std([r[key] for r in same]) for key in ("boards", "blank_boards"))
        across.append([split, solver, n, len(same), pct(*exact), pct(*blank)])
    return "\n".join([runs, "", markdown(["boards scored", "solver", "starts averaged", "runs",
                                          "exact boards %, mean +- std over runs", "every blank right %"],
                                         across)])


if __name__ == "__main__":
    main()
