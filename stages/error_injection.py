"""Error injection (paper Appendix C): 1 to N wrong input digits per test board fed to the trained
non-visual SATNet (with and without proofreader), split by whether the corrupted puzzle still
has a solution (checked exactly with the Sudoku solver).

Board accuracy is the authors' count: the predicted grid, with the (corrupted) givens passed
through, is a valid Sudoku. So an unsolvable corruption can never count. We also report how
often every output cell still matches the original solution. Not run when the non-visual
baseline is not (`baseline_nonvisual.epochs` 0).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from satground.boards.data import Boards, load_boards
from satground.harness.io import atomic_outputs
from satground.solver.models import load_solver
from satground.harness.params import load_params
from satground.harness.satnet_stage import prepare_satnet_stage
from satground.harness.stage import run_stage, stage_arguments
from satground.boards.metrics import markdown_table, output_metrics
from satground.boards.sudoku import count_solutions_many
from satground.harness.tracking import StageReport
from satground.solver.training import predict, predicted_digits, subset


def inject_errors(boards: Boards, n_errors: int, rng: np.random.Generator) -> Boards:
    """A copy of `boards` (grounded view) with n_errors given cells per board set to another
    digit, drawn uniformly (boards with fewer givens get all of theirs changed)."""
    K = boards.n_digits
    labels = boards.labels.numpy().copy()
    for b in range(len(labels)):
        givens = np.flatnonzero(boards.is_input[b].numpy())
        cells = rng.choice(givens, size=min(n_errors, len(givens)), replace=False)
        shift = rng.integers(1, K, size=len(cells))  # 1..K-1: never the same digit
        labels[b, cells] = (labels[b, cells].astype(np.int64) - 1 + shift) % K + 1
    return Boards(boards.board_size, boards.images, boards.cell_image, boards.is_input,
                  torch.from_numpy(labels))


def scores_by_solvability(model, boards: Boards, batch_size: int, device) -> dict:
    puzzles = (boards.labels * boards.is_input).numpy().astype(np.uint8)
    solvable = count_solutions_many(puzzles, boards.board_size, limit=1) > 0
    digits = predicted_digits(predict(model, boards, batch_size, device), boards.n_digits)
    result = {}
    for name, group in (("solvable", solvable), ("unsolvable", ~solvable)):
        idx = torch.from_numpy(np.flatnonzero(group))
        entry = {"n_boards": int(len(idx))}
        if len(idx):
            scores = output_metrics(digits[idx], subset(boards, idx))
            entry.update(board_accuracy=scores["valid_grids"], blank_boards=scores["blank_boards"],
                         blank_cells=scores["blank_cells"])
        result[name] = entry
    return result


def table(results: dict) -> pd.DataFrame:
    rows = []
    for model_name, by_errors in results.items():
        for n_errors, groups in by_errors.items():
            row = {"model": model_name, "injected_errors": int(n_errors)}
            for group, entry in groups.items():
                accuracy = entry.get("board_accuracy")
                row[f"{group}_board_accuracy_pct"] = None if accuracy is None else round(100 * accuracy, 1)
                row[f"{group}_boards"] = entry["n_boards"]
            rows.append(row)
    return pd.DataFrame(rows)


def main(argv=None):
    args = stage_arguments(__doc__, ["prepared", "model", "proofread-model", "table-out", "csv-out",
                                     "metrics-out"], argv)

    params = load_params(args.params)
    cfg, seed = params.error_injection, params.seed
    max_errors, batch_size = cfg.max_errors, cfg.batch_size
    if params.baseline_nonvisual.epochs == 0:  # no trained model to inject errors into
        with atomic_outputs([args.table_out, args.csv_out]) as (table_tmp, csv_tmp):
            table_tmp.write_text("not run: baseline_nonvisual.epochs is 0\n")
            csv_tmp.write_text("model,injected_errors\n")  # no rows
        StageReport(args.metrics_out).finish({}, info={"not_run": "baseline_nonvisual.epochs is 0"})
        print("error injection: not run (baseline_nonvisual.epochs 0)")
        return

    device, _ = prepare_satnet_stage(params)
    test = load_boards(args.prepared, "test", view="grounded")
    models = {"no_proofreader": load_solver(args.model, boards=test, kind="symbolic").to(device),
              "proofreader": load_solver(args.proofread_model, boards=test, kind="symbolic").to(device)}
    if models["proofreader"].proofreader is None:  # baseline_nonvisual.proofread_epochs 0: none
        del models["proofreader"]
    report = StageReport(args.metrics_out)
    corrupted = {n: inject_errors(test, n, np.random.default_rng([seed, n])) if n else test
                 for n in range(max_errors + 1)}
    results = {name: {str(n): scores_by_solvability(model, boards, batch_size, device)
                      for n, boards in corrupted.items()}
               for name, model in models.items()}

    frame = table(results)
    with atomic_outputs([args.table_out, args.csv_out]) as (table_tmp, csv_tmp):
        table_tmp.write_text(markdown_table(frame) + "\n")
        frame.to_csv(csv_tmp, index=False)
    one = results["no_proofreader"]["1"]["solvable"].get("board_accuracy")
    report.finish({"one_error_solved": one}, info=results)
    print(f"error injection: {len(test)} test boards x {max_errors} error counts; one error, "
          f"solvable: {'n/a' if one is None else f'{100 * one:.1f} %'} boards solved")


if __name__ == "__main__":
    run_stage(main)
