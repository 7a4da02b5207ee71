"""Evaluation on the test boards: our model as trained, re-read (unless `reread.reader` is none)
and with proofreader (unless `proofread.epochs` is 0), the final model again with SATNet
checking the givens' readings (unless `evaluate.check_folds` is 0), the self-grounded phase, and
the results table (paper Tables 1 and 3) with the baselines' rows. With `evaluate.views` > 1 our
model's readers read each image in that many views (satground/readers/views.py) in every row of ours,
and the model as trained is also scored reading each image once (the paper's row).

The only stage of our method that reads the test solution and the evaluation truth: board
accuracy is exact match with the true solution; the valid-grid rate is the authors' count
(the predicted grid is a valid Sudoku); per-cell accuracy is over all cells; visual accuracy
over input cells. The cluster -> digit map folded into the trained model (train's: the ground
stage's learned permutation, or with `train.reground` the one read off the rules-taught SATNet)
is checked against the best one-to-one matching of the classifier's clusters to the true digits
of the test images, and so is the ground stage's. Every board figure of ours gets a
95 % interval from a bootstrap over the test images and boards (satground/boards/intervals.py),
in info.json's "intervals", keyed as the metrics file's figures.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from satground.boards.data import given_image_indices, load_boards, load_truth
from satground.boards.intervals import board_outcomes, image_bootstrap
from satground.solver.grounding import hard_permutation, load_permutation
from satground.harness.io import atomic_outputs
from satground.readers.lenet import predict as classify
from satground.boards.metrics import best_matching, clustering_accuracy, markdown_table, solution_metrics
from satground.solver.models import VisualSolver, folded_permutation, load_solver
from satground.harness.params import load_params
from satground.solver.check import Checked
from satground.harness.satnet_stage import prepare_satnet_stage
from satground.harness.stage import run_stage, stage_arguments
from satground.harness.tracking import StageReport, load_scores, save_scores
from satground.solver.training import solution_digits, solution_scores
from satground.readers.views import ReaderViews

# (model, data, proofreader) -> the paper's (board, per-cell, visual) accuracies in %
PAPER = {
    ("Original SATNet", "grounded", "no"): (66.5, 98.8, 99.0),
    ("Original SATNet", "grounded", "yes"): (67.6, 98.6, 99.0),
    ("Original SATNet", "ungrounded", "no"): (0.0, 11.2, 11.6),
    ("Ours", "ungrounded", "no"): (62.8, 98.6, 98.9),
    ("Ours", "ungrounded", "yes"): (64.8, 98.4, 98.9),
    ("Original non-visual", "symbols", "no"): (96.6, 99.9, None),
    ("Original non-visual", "symbols", "yes"): (97.1, 99.9, None),
}


# metrics.json key -> (row of ours, its score): "plain" is the model as trained read in one look
# (the paper's), "views" the same read in `evaluate.views` views; a row that did not run is left
# out. The board figures among them carry their intervals in info.json under the same key.
HEADLINE = {
    "boards": ("plain", "board_accuracy"), "blank_boards": ("plain", "blank_board_accuracy"),
    "valid_grids": ("plain", "valid_grid_rate"), "cells": ("plain", "cell_accuracy"),
    "visual": ("plain", "visual_accuracy"),
    "boards_views": ("views", "board_accuracy"), "blank_boards_views": ("views", "blank_board_accuracy"),
    "visual_views": ("views", "visual_accuracy"),
    "boards_reread": ("reread", "board_accuracy"), "blank_boards_reread": ("reread", "blank_board_accuracy"),
    "visual_reread": ("reread", "visual_accuracy"),
    "boards_pr": ("proofreader", "board_accuracy"), "blank_boards_pr": ("proofreader", "blank_board_accuracy"),
    "boards_checked": ("checked", "board_accuracy"), "blank_boards_checked": ("checked", "blank_board_accuracy"),
    "visual_checked": ("checked", "visual_accuracy"),
    "boards_pr_checked": ("proofreader_checked", "board_accuracy"),
    "blank_boards_pr_checked": ("proofreader_checked", "blank_board_accuracy"),
}


def results_table(rows: dict, labels: dict | None = None) -> pd.DataFrame:
    """rows: (model, data, proofreader) -> metrics dict of fractions; labels: model ->
    (configuration, end-to-end epochs), so every row says what it is."""
    def pct(x):
        return None if x is None else round(100 * x, 1)

    def interval(scores, figure):  # rows of ours carry their bootstrap intervals
        bounds = scores.get("intervals", {}).get(figure)
        return None if bounds is None else f"{100 * bounds['low']:.1f}-{100 * bounds['high']:.1f}"

    records = []
    for (model, data, proofreader), scores in rows.items():
        paper = PAPER.get((model, data, proofreader), (None, None, None))
        configuration, epochs = (labels or {}).get(model.split(" + ")[0], (None, None))
        records.append({
            "model": model, "configuration": configuration, "epochs": epochs, "data": data,
            "proofreader": proofreader,
            "board_accuracy_pct": pct(scores["board_accuracy"]),
            "board_interval_pct": interval(scores, "board_accuracy"),
            "blank_board_accuracy_pct": pct(scores.get("blank_board_accuracy")),
            "blank_board_interval_pct": interval(scores, "blank_board_accuracy"),
            "valid_grid_pct": pct(scores["valid_grid_rate"]),
            "valid_grid_interval_pct": interval(scores, "valid_grid_rate"),
            "cell_accuracy_pct": pct(scores["cell_accuracy"]),
            "visual_accuracy_pct": None if data == "symbols" else pct(scores["visual_accuracy"]),
            "paper_board_pct": paper[0], "paper_cell_pct": paper[1], "paper_visual_pct": paper[2],
        })
    return pd.DataFrame(records)


# the variants of our model scored, in this order: one_view only with evaluate.views > 1,
# reread unless reread.reader is none, proofreader unless proofread.epochs is 0, the checked ones
# with evaluate.check_folds
OUR_VARIANTS = ("one_view", "no_proofreader", "reread", "proofreader", "checked", "proofreader_checked")


def load_solvers(args, params, test) -> dict:
    """Our model as trained, re-read, with proofreader, and the self-grounded phase's, by name."""
    return {name: load_solver(path, boards=test, kind="visual", solve_sweeps=params.satnet.solve_sweeps)
            for name, path in (("no_proofreader", args.solver), ("reread", args.solver_reread),
                               ("proofreader", args.solver_proofread), ("ground", args.ground))}


def load_baselines(args) -> dict:
    """The baselines' test scores by view (grounded, ungrounded, symbols); none with --skip-baselines."""
    if args.skip_baselines:
        return {}
    return {name: load_scores(path) for name, path in
            (("grounded", args.baseline_grounded), ("ungrounded", args.baseline_ungrounded),
             ("symbols", args.baseline_nonvisual))}


def our_variants(solvers: dict, params) -> dict:
    """OUR_VARIANTS that run, by name: each reader reading in `evaluate.views` views (the model
    as trained also kept in one view, the paper's), and the final model and its proofreader
    checked by SATNet. The proofreader sits on the final reader: re-read, or as trained."""
    reread, views = params.reread.reader != "none", params.evaluate.views
    folds, starts, rounds = params.evaluate.check_folds, params.evaluate.starts, params.evaluate.check_rounds
    context = params.evaluate.check_context
    verify = (params.evaluate.verify_doubtful, params.evaluate.verify_weight, params.evaluate.verify_rounds,
              params.evaluate.verify_readings, params.evaluate.verify_patience)
    proofread = solvers["proofreader"].solver.proofreader is not None  # proofread.epochs 0: no rows
    variants = {name: solvers[name] for name in ["no_proofreader"] + ["reread"] * reread
                + ["proofreader"] * proofread}
    if views > 1:
        variants["one_view"] = variants["no_proofreader"]
        for name, model in list(variants.items()):
            if name != "one_view":
                variants[name] = VisualSolver(ReaderViews(model.classifier, views, params.evaluate.mirror),
                                              model.solver)
    if folds:
        variants["checked"] = Checked(variants["reread" if reread else "no_proofreader"], folds, starts,
                                      rounds=rounds, context=context, verify=verify)
        if proofread:
            variants["proofreader_checked"] = Checked(variants["proofreader"], folds, starts, rounds=rounds,
                                                      context=context, verify=verify)
    return {name: variants[name] for name in OUR_VARIANTS if name in variants}


def score_ours(variants: dict, test, solution, image_digits, params, device) -> tuple[dict, dict]:
    """(scores, intervals) by variant: the board metrics of its digits against the true
    solutions, and their bootstrap intervals over the test images and boards."""
    digits = {name: solution_digits(model.to(device), test, params.evaluate.batch_size, device)
              for name, model in variants.items()}
    scores = {name: solution_metrics(d, solution, test) for name, d in digits.items()}
    intervals = {name: image_bootstrap(board_outcomes(d, solution, test), test, image_digits,
                                       seed=params.seed) for name, d in digits.items()}
    return scores, intervals


def grounding_scores(ground_model, test, solution, truth: dict, saved_perm: dict, batch_size: int,
                     device, folded: torch.Tensor | None = None) -> dict:
    """The self-grounded phase's test scores, its model (speaking clusters) read through the
    learned permutation, and the maps checked against the true cluster -> digit matching of the
    frozen distilled classifier (in ground.pt) on the test images: truth used to report only.
    `folded`: the map train folded into the model (models.folded_permutation; None: the learned
    permutation, as train folded before it recorded its map). "permutation_correct" is the folded
    map's, "ground_permutation_correct" the ground stage's."""
    perm, output_perm = saved_perm["permutation"], saved_perm["output_permutation"]
    folded = perm if folded is None else folded
    ground_model = ground_model.to(device)
    phase = solution_scores(ground_model, test, solution, batch_size, device, perm, output_perm)
    K, pool = test.n_digits, given_image_indices(test)
    n_clusters = len(perm)  # K' > K: a many-to-one map, checked against the best onto one
    clusters = classify(ground_model.classifier.to(device), test.images[pool]).numpy()
    digits = truth["image_labels"][pool].long().numpy() - 1
    true_perm = torch.from_numpy(best_matching(clusters, digits, n_clusters, K))
    soft = saved_perm["soft_permutation"]

    def right(mapping: torch.Tensor) -> bool:
        """The map equals the true one; with more clusters than digits, on every cluster that
        holds a test image (a cluster no image falls in carries no evidence either way)."""
        used = torch.from_numpy(np.unique(clusters)) if n_clusters > K else torch.arange(K)
        return bool(torch.equal(mapping[used], true_perm[used]))

    return {
        "clustering_accuracy": clustering_accuracy(clusters, digits, n_clusters, K),
        "map_images_right": float((folded[torch.from_numpy(clusters)].numpy() == digits).mean()),
        "permutation_correct": right(folded),
        "ground_permutation_correct": right(perm),
        "reground": not torch.equal(folded, perm),  # train folded another map than the ground stage's
        "folded_permutation": folded.tolist(),
        "output_permutation_correct": right(output_perm),
        "argmax_correct": right(hard_permutation(soft, "argmax")),
        "hungarian_correct": right(hard_permutation(soft, "hungarian")),
        "true_permutation": true_perm.tolist(),
        **{f"phase_{k}": v for k, v in phase.items()},
    }


def table_rows(ours: dict, intervals: dict, baselines: dict, params) -> dict:
    """(model, data, proofreader) -> scores of the results table: the visual baselines, ours
    (with their intervals), the non-visual baseline."""
    reread, views, folds = params.reread.reader != "none", params.evaluate.views, params.evaluate.check_folds
    rows = {}
    ours_rows = {name: {**scores, "intervals": intervals[name]} for name, scores in ours.items()}
    for view in ("grounded", "ungrounded"):
        for key, value in baselines.get(view, {}).items():
            rows[("Original SATNet", view, "yes" if key == "proofreader" else "no")] = value
    seen = f" + {views} views" if views > 1 else ""
    if views > 1:
        rows[("Ours", "ungrounded", "no")] = ours_rows["one_view"]
    rows[("Ours" + seen, "ungrounded", "no")] = ours_rows["no_proofreader"]
    name = ("Ours + re-read" if reread else "Ours") + seen
    rows[(name, "ungrounded", "no")] = ours_rows["reread" if reread else "no_proofreader"]
    if "proofreader" in ours_rows:
        rows[(name, "ungrounded", "yes")] = ours_rows["proofreader"]
    if folds:
        rows[(name + " + check", "ungrounded", "no")] = ours_rows["checked"]
        if "proofreader_checked" in ours_rows:
            rows[(name + " + check", "ungrounded", "yes")] = ours_rows["proofreader_checked"]
    for key, value in baselines.get("symbols", {}).items():
        rows[("Original non-visual", "symbols", "yes" if key == "proofreader" else "no")] = value
    return rows


def row_labels(params) -> dict:
    """model -> (configuration, end-to-end epochs) for results_table."""
    return {"Ours": (params.configuration(), params.train.epochs),
            "Original SATNet": ("paper's baseline", params.baseline_visual.epochs),
            "Original non-visual": ("paper's baseline", params.baseline_nonvisual.epochs)}


def headline(ours: dict, intervals: dict, views: int) -> tuple[dict, dict]:
    """(metrics.json's figures of ours, info.json's intervals of them), keyed as HEADLINE."""
    rows_of = {"plain": "one_view" if views > 1 else "no_proofreader",
               "views": "no_proofreader" if views > 1 else None}
    named = {key: (rows_of.get(row, row), score) for key, (row, score) in HEADLINE.items()}
    return ({key: ours[row][score] for key, (row, score) in named.items() if row in ours},
            {key: intervals[row][score] for key, (row, score) in named.items()
             if row in intervals and score in intervals[row]})


def summary(n_boards: int, ours: dict, views: int, permutation_correct: bool) -> str:
    """The stage's one line: each variant's board accuracy."""
    plain, proofread = ours.get("one_view", ours["no_proofreader"]), ours.get("proofreader", {})
    in_views = ours["no_proofreader"] if views > 1 else {}
    reread, checked = ours.get("reread", {}), ours.get("checked", {})
    return (f"evaluate: {n_boards} test boards; ours {100 * plain['board_accuracy']:.1f} % boards "
            f"({100 * plain['blank_board_accuracy']:.1f} % with every blank cell right), "
            + (f"{100 * in_views['board_accuracy']:.1f} % in {views} views, " if in_views else "")
            + (f"{100 * reread['board_accuracy']:.1f} % re-read, " if reread else "")
            + (f"{100 * proofread['board_accuracy']:.1f} % with proofreader, " if proofread else "")
            + (f"{100 * checked['board_accuracy']:.1f} % checked by SATNet; " if checked else "")
            + f"permutation {'correct' if permutation_correct else 'WRONG'}")


def main(argv=None):
    args = stage_arguments(
        __doc__, ["prepared", "ground", "permutation", "solver", "solver-reread", "solver-proofread",
                  "baseline-grounded", "baseline-ungrounded", "baseline-nonvisual",  # their metrics folders
                  "table-out", "csv-out", "metrics-out"], argv,
        extra=lambda p: p.add_argument("--skip-baselines", action="store_true",
                                       help="table without the baselines' rows"))

    params = load_params(args.params)
    device, _ = prepare_satnet_stage(params)
    # every input is read and checked before anything is written
    test = load_boards(args.prepared, "test")
    solution = load_boards(args.prepared, "test", view="grounded").labels
    truth = load_truth(args.prepared, "test", test)
    solvers = load_solvers(args, params, test)
    saved_perm = load_permutation(args.permutation, test.n_digits)
    folded = folded_permutation(args.solver, len(saved_perm["permutation"]), test.n_digits)
    baselines = load_baselines(args)
    report = StageReport(args.metrics_out)

    ours, intervals = score_ours(our_variants(solvers, params), test, solution,
                                 truth["image_labels"].numpy(), params, device)
    grounding = grounding_scores(solvers["ground"], test, solution, truth, saved_perm,
                                 params.evaluate.batch_size, device, folded)

    frame = results_table(table_rows(ours, intervals, baselines, params), row_labels(params))
    with atomic_outputs([args.table_out, args.csv_out]) as (table_tmp, csv_tmp):
        table_tmp.write_text(markdown_table(frame) + "\n")
        frame.to_csv(csv_tmp, index=False)
    save_scores(ours, args.metrics_out)
    figures, figure_intervals = headline(ours, intervals, params.evaluate.views)
    report.finish({**figures, "perm_right": grounding["permutation_correct"]},
                  info={"grounding": grounding, "intervals": figure_intervals})
    print(summary(len(test), ours, params.evaluate.views, grounding["permutation_correct"]))


if __name__ == "__main__":
    run_stage(main)
