"""Do the seeds whose dev boards chose the settings run better than the seeds that chose nothing?

A setting chosen on some seeds' dev boards may fit those seeds' models more than the method, and
then those seeds' records read high. This compares two groups of a profile's kept seed records on
each figure: the mean of the other group minus the choosers' mean, its 95 % Welch interval, and
an exact two-sided permutation p over every way to pick as many choosers from the seeds compared.
Figures: the test's exact boards as trained and final (each read once, by the record's
`evaluate`), the label-free dev criterion `train_dev_blank_cells`, and the clusterer's dev
accuracy (truth, for the report). Reads kept records only, never a board.

    python studies/seed_groups.py --records results/cpu9_fast_check_folds36_zen4{,/seeds/seed*} \\
        --choosers 0 1 2 3 4 --others 10-19
"""
from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np
from scipy import stats

from satground.harness.io import PipelineError
from satground.harness.records import read_record

# (stage, metric) -> what it measures
FIGURES = {("evaluate", "boards"): "test, exact as trained", ("evaluate", "boards_checked"): "test, exact final",
           ("train", "train_dev_blank_cells"): "dev blank cells as trained (label-free criterion)",
           ("cluster", "cluster_dev_accuracy"): "clusterer, dev images (report)"}


def seed_range(text: str) -> list[int]:
    """'10-19' or '7' -> the seeds."""
    low, _, high = text.partition("-")
    return list(range(int(low), int(high or low) + 1))


def permutation_p(chosen: np.ndarray, others: np.ndarray) -> float:
    """Exact two-sided p of the difference of means: the share of the ways to deal the pooled
    values into groups of these sizes whose |difference| reaches the observed one."""
    pooled = np.concatenate([chosen, others])
    observed = abs(others.mean() - chosen.mean())
    total, k, hits, count = pooled.sum(), len(chosen), 0, 0
    for pick in itertools.combinations(range(len(pooled)), k):
        a = pooled[list(pick)].sum()
        hits += abs((total - a) / (len(pooled) - k) - a / k) >= observed - 1e-12
        count += 1
    return hits / count


def welch(chosen: np.ndarray, others: np.ndarray) -> tuple[float, float]:
    """95 % Welch interval of mean(others) - mean(chosen)."""
    va, vb = chosen.var(ddof=1) / len(chosen), others.var(ddof=1) / len(others)
    df = (va + vb) ** 2 / (va ** 2 / (len(chosen) - 1) + vb ** 2 / (len(others) - 1))
    half = stats.t.ppf(0.975, df) * np.sqrt(va + vb)
    diff = others.mean() - chosen.mean()
    return diff - half, diff + half


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", nargs="+", required=True, type=Path, help="kept seed records")
    parser.add_argument("--choosers", nargs="+", required=True, type=seed_range,
                        help="seeds whose dev boards decided settings (e.g. 0-4)")
    parser.add_argument("--others", nargs="+", type=seed_range,
                        help="seeds to compare them with (default: every other record's)")
    args = parser.parse_args(argv)
    records = {}
    for folder in args.records:
        try:
            record = read_record(folder)
        except PipelineError as error:
            sys.exit(str(error))
        records[int(record.params["seed"])] = record
    choosers = sorted({s for group in args.choosers for s in group})
    others = sorted({s for group in args.others for s in group}) if args.others else sorted(set(records) - set(choosers))
    missing = [s for s in choosers + others if s not in records]
    if missing or not others or len(choosers) < 2 or len(others) < 2:
        sys.exit(f"--records: need two or more seeds a group; seeds {missing} have no record")
    print(f"choosers: seeds {choosers}; others: seeds {others}\n")
    print("| figure, % | choosers' mean | others' mean | others - choosers [95 % Welch] | permutation p |")
    print("|---|---|---|---|---|")
    for (stage, name), meaning in FIGURES.items():
        value = lambda s: 100 * float(records[s].metrics[stage][name])  # noqa: E731
        a, b = np.array([value(s) for s in choosers]), np.array([value(s) for s in others])
        low, high = welch(a, b)
        print(f"| {meaning} (`{name}`) | {a.mean():.1f} | {b.mean():.1f} | {b.mean() - a.mean():+.1f} "
              f"[{low:+.1f}, {high:+.1f}] | {permutation_p(a, b):.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
