"""The results table (the paper's Tables 1 and 3, our rows beside the paper's figures) and the
headline figures of metrics/evaluate/metrics.json: the one owner of their rows and keys.

    rows = table_rows(ours, intervals, baselines, params)   # (model, data, proofreader) -> scores
    frame = results_table(rows, row_labels(params))          # one row each, with the paper's
    figures, figure_intervals = headline(ours, intervals, params.evaluate.views)
"""
from __future__ import annotations

import pandas as pd


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
