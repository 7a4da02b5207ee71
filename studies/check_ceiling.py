"""How well can the check's SATNet infer a given from the others? A report on the dev boards.

    python studies/check_ceiling.py [--folds 16 36] [--solve-sweeps 40 100] [--out FILE.csv]

Reads a finished workspace's final model (models/solver_reread.pt, or solver.pt where
`reread.reader` is none) and its dev boards, and shows SATNet every given as its TRUE digit,
one-hot: the context the check (satground.solver.check) would see if the reader misread nothing.
Rows:
- all givens shown: the blank cells right and the boards with every blank right (SATNet as a
  solver, its reader perfect);
- per `--folds` F: the givens dealt into F interleaved folds as the check deals them, the first
  fold hidden: its givens inferred right by SATNet alone, and by the check's product of that
  inference and the reader's own reading (evaluate.views); the blank cells right in the same solve.
It reads the dev givens' true digits, so it reports and never decides a setting.
"""
import argparse
import time
from dataclasses import replace

import torch

from common import final_model_on_dev, show_rows, workspace_arguments
from satground.harness.io import seed_everything
from satground.harness.params import load_params
from satground.solver.check import log_inference
from satground.solver.training import predict


def percent(right: torch.Tensor, cells: torch.Tensor) -> float:
    return round(100 * right[cells].float().mean().item(), 2)


@torch.no_grad()
def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    workspace_arguments(parser)
    parser.add_argument("--folds", type=int, nargs="+", default=[16, 36])
    parser.add_argument("--solve-sweeps", type=int, nargs="+", help="default: params.yaml's satnet.solve_sweeps")
    parser.add_argument("--out", help="CSV of the rows (printed as a table either way)")
    args = parser.parse_args(argv)

    params = load_params(args.params)
    batch_size = params.evaluate.batch_size
    dev, solution, model, readings, device = final_model_on_dev(params, args.prepared, args.models)
    final = "solver_reread.pt" if params.reread.reader != "none" else "solver.pt"
    B, C, K, given = len(dev), dev.n_cells, dev.n_digits, dev.is_input

    def solve(shown: torch.Tensor) -> torch.Tensor:
        """SATNet's outputs (B, C, K) with the `shown` cells given as their true digits."""
        return predict(model.solver, replace(dev, is_input=shown, labels=solution), batch_size,
                       device).reshape(B, C, K)

    rows = []
    for sweeps in args.solve_sweeps or [params.satnet.solve_sweeps]:
        model.solver.satnet.solve_sweeps = sweeps  # as load_solver(..., solve_sweeps=sweeps) sets it
        seed_everything(params.seed)
        start = time.perf_counter()
        right = solve(given).argmax(2) + 1 == solution
        rows.append({"model": final, "solve_sweeps": sweeps, "hidden": "none", "blank_cells": percent(right, ~given),
                     "every_blank_right": round(100 * (right | given).all(1).float().mean().item(), 1),
                     "seconds": round(time.perf_counter() - start, 1)})
        for folds in args.folds:
            start = time.perf_counter()
            hidden = given & ((given.long().cumsum(1) - 1) % folds == 0)
            inferred = solve(given & ~hidden)
            both = readings.clamp_min(1e-4).log() + log_inference(inferred)
            rows.append({"model": final, "solve_sweeps": sweeps, "hidden": f"1 fold of {folds}",
                         "blank_cells": percent(inferred.argmax(2) + 1 == solution, ~given),
                         "hidden_givens_satnet": percent(inferred.argmax(2) + 1 == solution, hidden),
                         "hidden_givens_reader": percent(readings.argmax(2) + 1 == solution, hidden),
                         "hidden_givens_product": percent(both.argmax(2) + 1 == solution, hidden),
                         "seconds": round(time.perf_counter() - start, 1)})
        for row in rows[-1 - len(args.folds):]:
            print(row, flush=True)
    show_rows(rows, f"{B} dev boards, every given shown as its true digit", args.out)


if __name__ == "__main__":
    main()
