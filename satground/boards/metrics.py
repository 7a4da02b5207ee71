"""Clustering accuracy (Hungarian matching) and board/cell accuracies.

True labels enter these functions only to *report* numbers; no training path calls them
with input-cell truth.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from .data import Boards
from .sudoku import peers, valid_grids

# scipy, pandas and sklearn are imported inside the functions that use them: most stages never
# call those, and every import at the top lengthens each stage's start-up.


def confusion_matrix(clusters, labels, n_clusters: int, n_classes: int) -> np.ndarray:
    """counts[c, d] = how many items in cluster c have true class d (both 0-based)."""
    clusters = np.asarray(clusters, dtype=np.int64).ravel()
    labels = np.asarray(labels, dtype=np.int64).ravel()
    counts = np.zeros((n_clusters, n_classes), dtype=np.int64)
    np.add.at(counts, (clusters, labels), 1)
    return counts


def onto_assignment(scores) -> np.ndarray:
    """mapping (R,) int64 of the rows of scores (R, K), R >= K, onto the K columns: the map of
    largest total score sum_r scores[r, mapping[r]] under which every column is some row's. With
    R = K it is the Hungarian matching; with R > K (more clusters than classes: surjective
    grounding) the best K distinct rows cover the columns one each and every other row takes its
    best column. One linear assignment finds it: the K columns, plus R - K free slots in which
    row r scores its row maximum."""
    scores = np.asarray(scores, dtype=np.float64)
    n_rows, n_cols = scores.shape
    if n_rows < n_cols:
        raise ValueError(f"an onto map needs at least as many rows as columns, got {n_rows} x {n_cols}")
    if n_rows > n_cols:
        free = np.repeat(scores.max(axis=1, keepdims=True), n_rows - n_cols, axis=1)
        scores = np.concatenate([scores, free], axis=1)
    from scipy.optimize import linear_sum_assignment
    rows, cols = linear_sum_assignment(scores, maximize=True)
    mapping = np.empty(n_rows, dtype=np.int64)
    mapping[rows] = cols
    spare = mapping >= n_cols  # a free slot: the row's best column
    mapping[spare] = scores[spare, :n_cols].argmax(axis=1)
    return mapping


def best_matching(clusters, labels, n_clusters: int, n_classes: int) -> np.ndarray:
    """mapping[c] = class matched to cluster c by the best one-to-one assignment (-1: a cluster
    left unmatched, with fewer classes than clusters never); with more clusters than classes,
    the best onto one (onto_assignment)."""
    return _matching(confusion_matrix(clusters, labels, n_clusters, n_classes))


def _matching(counts: np.ndarray) -> np.ndarray:
    if counts.shape[0] > counts.shape[1]:
        return onto_assignment(counts)
    from scipy.optimize import linear_sum_assignment
    rows, cols = linear_sum_assignment(counts, maximize=True)
    mapping = np.full(counts.shape[0], -1, dtype=np.int64)
    mapping[rows] = cols
    return mapping


def clustering_accuracy(clusters, labels, n_clusters: int, n_classes: int | None = None) -> float:
    """Fraction of items whose cluster maps to their class under the best one-to-one matching
    (with more clusters than classes, the best onto map: best_matching)."""
    counts = confusion_matrix(clusters, labels, n_clusters, n_clusters if n_classes is None else n_classes)
    mapping = _matching(counts)
    matched = np.flatnonzero(mapping >= 0)
    return float(counts[matched, mapping[matched]].sum() / max(counts.sum(), 1))


def board_metrics(pred: torch.Tensor, solution: torch.Tensor, is_input: torch.Tensor,
                  valid: torch.Tensor) -> dict[str, float]:
    """Accuracies of predicted digit grids.

    pred, solution: (B, cells) digits; is_input: (B, cells) bool; valid: (B,) bool, whether
    each predicted grid is a valid completed Sudoku agreeing with its givens' *predicted* digits
    (the authors' count). Returns board accuracy (exact match), valid-grid rate, per-cell
    accuracy over all cells, accuracy over non-input cells, and visual accuracy (input cells).
    blank_board_accuracy counts a board right when every non-input cell is (the givens' reading
    ignored), the board metric of later work such as the Recurrent Transformer (ICLR 2023).
    """
    correct = pred == solution
    is_input = is_input.bool()
    return {
        "board_accuracy": correct.all(dim=1).float().mean().item(),
        "blank_board_accuracy": (correct | is_input).all(dim=1).float().mean().item(),
        "valid_grid_rate": valid.float().mean().item(),
        "cell_accuracy": correct.float().mean().item(),
        "output_cell_accuracy": correct[~is_input].float().mean().item(),
        "visual_accuracy": correct[is_input].float().mean().item(),
    }


def given_conflict_rate(digits: torch.Tensor, is_input: torch.Tensor, board_size: int) -> float:
    """Fraction of output cells predicting the same digit as a given cell among their peers.

    Label-free and blind to how digits are numbered, as long as given and output cells use
    the same numbering: a solver whose outputs speak a relabelled encoding of its inputs
    (which L_SG cannot see) conflicts often even when its outputs are a perfect permutation
    of the labels.
    """
    same = digits[:, :, None] == digits[:, None, :]
    conflict = (same & peers(board_size) & is_input[:, None, :]).any(dim=2)
    return conflict[~is_input].float().mean().item()


def output_metrics(digits: torch.Tensor, boards: Boards) -> dict[str, float]:
    """Scores that need no input-cell label: accuracy on the labelled blank (output) cells, boards
    with every blank cell right, the valid-grid rate (the authors' board count), and how often a
    blank cell repeats a given digit of its row, column or box."""
    cells = (boards.labels > 0) & ~boards.is_input
    correct = (digits == boards.labels.long()) | ~cells
    valid = valid_grids(digits.numpy().astype(np.uint8), boards.board_size)
    return {
        "blank_cells": (digits == boards.labels.long())[cells].float().mean().item(),
        "blank_boards": correct.all(dim=1).float().mean().item(),
        "valid_grids": float(valid.mean()),
        "given_conflicts": given_conflict_rate(digits, boards.is_input, boards.board_size),
    }


def solution_metrics(digits: torch.Tensor, solution: torch.Tensor, boards: Boards) -> dict:
    """Scores against the true full solution (grounded labels): evaluation only."""
    valid = torch.from_numpy(valid_grids(digits.numpy().astype(np.uint8), boards.board_size))
    return board_metrics(digits, solution.long(), boards.is_input, valid)


def percent_places(values) -> int:
    """Decimals a row of percentages is shown with: one, but two where one would round a value
    under 100 up to 100.0 (99.97 % of the givens read right is not all of them)."""
    return 2 if any(99.95 <= v < 100 for v in values) else 1


def markdown_table(frame: "pandas.DataFrame") -> str:
    """A results table as Markdown: every number with one decimal (89.0, never 89; two where one
    would show 100.0 for less, `percent_places`), a missing value as n/a, text as it is."""
    def cell(x):
        if x is None or (isinstance(x, float) and math.isnan(x)):
            return "n/a"
        return f"{x:.{percent_places([x])}f}" if isinstance(x, (float, np.floating)) else str(x)
    return frame.astype(object).map(cell).to_markdown(index=False, disable_numparse=True)


def cluster_report(clusters: torch.Tensor, labels, n_clusters: int,
                   n_classes: int | None = None) -> dict[str, float]:
    """Clustering accuracy (Hungarian, or onto with more clusters than the n_classes classes;
    None without labels) and the largest cluster's share."""
    sizes = torch.bincount(clusters, minlength=n_clusters)
    report = {"largest_cluster_fraction": float(sizes.max()) / max(len(clusters), 1)}
    report["accuracy"] = (None if labels is None
                          else clustering_accuracy(clusters.numpy(), labels.numpy(), n_clusters, n_classes))
    return report


def peer_conflict_rate(clusters: torch.Tensor, cannot_link) -> float:
    """Share of the cannot-link pairs (images shown in peer given cells, so different digits)
    whose images share a cluster: 0 for clusters that are the digits, about 1/K for random ones.
    Label-free: the restarts' selection criterion."""
    from scipy.sparse import triu
    pairs = triu(cannot_link, 1).tocoo()
    if pairs.nnz == 0:
        return 0.0
    clusters = clusters.numpy()
    return float((clusters[pairs.row] == clusters[pairs.col]).mean())


def restart_agreement(runs: list[torch.Tensor]) -> list[float]:
    """Each run's mean adjusted Rand index with the other runs' clusters of the same images
    (None for a single run). Label- and rule-free: runs that found the digits agree with one
    another, failed runs each fail their own way."""
    if len(runs) < 2:
        return [None] * len(runs)
    from sklearn.metrics import adjusted_rand_score

    return [float(np.mean([adjusted_rand_score(run.numpy(), other.numpy())
                           for j, other in enumerate(runs) if j != i])) for i, run in enumerate(runs)]


def format_accuracy(value) -> str:
    """An accuracy for a log line; None where no truth file was there to measure it."""
    return "n/a (no truth file)" if value is None else f"{value:.3f}"
