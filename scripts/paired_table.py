"""One option off and on over several seeds, each pair from the same trained model: mean +- std
of every row of our results table (`metrics/results.md`), and the per-seed gains.

    python scripts/paired_table.py --off seed*_default_results.md --on seed*_keep_results.md

Files pair up in the order given (the shell sorts both globs alike). Rows are the table's
(model, proofreader) pairs; the baselines' rows, where a table has them, are left out (an option
of our stages does not touch them).
"""
import argparse
import statistics
from pathlib import Path

import pandas as pd

from satground.harness.io import PipelineError

COLUMNS = {"board_accuracy_pct": "exact", "blank_board_accuracy_pct": "every blank right"}


def read_table(path: Path) -> dict:
    """(model + proofreader, column) -> value of our rows of a results.md."""
    try:
        lines = [line for line in path.read_text().splitlines() if line.startswith("|")]
        rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]
        frame = pd.DataFrame(rows[2:], columns=rows[0])
        ours = frame[frame["model"].str.startswith("Ours")]
        return {(f"{model}, proofreader {pr}", col): float(value)
                for model, pr, *values in ours[["model", "proofreader", *COLUMNS]].itertuples(index=False)
                for col, value in zip(COLUMNS, values)}
    except (OSError, KeyError, ValueError, IndexError) as exc:
        raise PipelineError(f"{path}: not a results table of this project ({exc})") from exc


def spread(values: list[float]) -> str:
    return f"{statistics.mean(values):.1f} +- {statistics.stdev(values):.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--off", nargs="+", type=Path, required=True)
    parser.add_argument("--on", nargs="+", type=Path, required=True)
    args = parser.parse_args()
    if len(args.off) != len(args.on) or len(args.off) < 2:
        raise SystemExit(f"paired_table: --off and --on need the same number of tables, at least 2 "
                         f"(got {len(args.off)} and {len(args.on)})")
    try:
        off, on = [read_table(p) for p in args.off], [read_table(p) for p in args.on]
    except PipelineError as exc:
        raise SystemExit(f"paired_table: {exc}")
    print(f"| test boards, % ({len(off)} seeds) | off | on | on - off, per seed |")
    print("|---|---|---|---|")
    for key in off[0]:
        if not all(key in table for table in off + on):
            raise SystemExit(f"paired_table: row {key[0]!r} is not in every table")
        a, b = [t[key] for t in off], [t[key] for t in on]
        gains = ", ".join(f"{y - x:+.1f}" for x, y in zip(a, b))
        print(f"| {COLUMNS[key[1]]}, {key[0]} | {spread(a)} | {spread(b)} | {gains} |")


if __name__ == "__main__":
    main()
