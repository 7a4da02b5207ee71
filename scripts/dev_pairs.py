"""Two values of one setting over the same seeds, scored on the dev boards by label-free criteria
alone: the paired gains in every blank right (each record's dev_choices.csv) and in the dev given
conflicts (SATNet's dev blanks that repeat a peer given's reading, from the train stage).

    python scripts/dev_pairs.py --off results/A results/A/seeds/seed{1,2,3,4} \\
        --on results/B results/B/seeds/seed{1,2,3,4}

Records pair up in the order given, so give both sides' seeds in one order. A folder may also be a
run's own, holding dev_choices.csv alone (a run stopped after `train`): criteria missing from any
folder are named under the table, not paired. No test figure and no
given's label is read: dev_choices.csv scores dev blanks, and of the record's metrics only the train
stage's dev given conflicts are read.
"""
import argparse
import math
import statistics
from pathlib import Path

import pandas as pd

from satground.harness.io import PipelineError
from satground.harness.params import defaults_of_a_record, overlay, read_yaml, schema_defaults
from satground.harness.records import BUNDLE, read_record

FINAL = "EBR, final (re-read, views, check)"
AS_TRAINED = "EBR, as trained (1 view, no check)"
CONFLICTS = "dev given conflicts after tune, % (lower is better)"


def scored_rows(record: Path) -> dict[tuple[str, int, int], str]:
    """(model, views, check folds) -> criterion. The final row is the model as the record's own
    `evaluate` scored it (its params.yaml's views and check folds; today's defaults for a run folder
    without one), so records of two check settings pair up. The as-trained row is the model as the
    test's as-trained row scores it, without SATNet's check: the check repairs misread givens and
    hides the classifier."""
    path = record / "params.yaml"
    params = overlay(defaults_of_a_record(), read_yaml(path)) if path.is_file() else schema_defaults()
    evaluate = params["evaluate"]
    return {("solver_reread", evaluate["views"], evaluate["check_folds"]): FINAL, ("solver", 1, 0): AS_TRAINED}


def record_scores(record: Path) -> dict[str, float]:
    """criterion -> value for one run folder: the rows of its dev_choices.csv, and where the folder
    is a kept record (metrics.json), the train stage's dev given conflicts. A run stopped after
    `train` (`reread.reader: none`) has the as-trained row alone."""
    path = record / "dev_choices.csv"
    try:
        frame = pd.read_csv(path)
        scores = {}
        for (model, views, folds), name in scored_rows(record).items():
            rows = frame[(frame["model"] == model) & (frame["views"] == views) & (frame["check_folds"] == folds)]
            if len(rows):
                scores[name] = float(rows["dev_every_blank_pct"].iloc[-1])
        if not scores:
            raise ValueError("neither the final nor the as-trained row")
    except (OSError, KeyError, ValueError) as exc:
        raise PipelineError(f"{path}: no dev score of the final and as-trained models "
                            f"({type(exc).__name__}: {exc}); run studies/dev_choices.py --folds 0 F --as-trained "
                            f"--views 1 7 on the record's run, F its check folds") from exc
    if (record / BUNDLE).is_file():
        scores[CONFLICTS] = 100 * float(read_record(record).stage_info("train")["tune"]["dev_given_conflicts"])
    return scores


def table(off: list[Path], on: list[Path]) -> str:
    if len(off) != len(on) or len(off) < 2:
        raise PipelineError(f"--off and --on need the same seeds, two or more: got {len(off)} and {len(on)}")
    offs, ons = [record_scores(r) for r in off], [record_scores(r) for r in on]
    lines = ["| dev criterion | off, mean | on, mean | gain on - off, mean +- se | per seed | seeds on higher |",
             "|---|---|---|---|---|---|"]
    names = [name for name in (FINAL, AS_TRAINED, CONFLICTS) if all(name in s for s in offs + ons)]
    for name in names:
        a, b = [s[name] for s in offs], [s[name] for s in ons]
        gains = [y - x for x, y in zip(a, b)]
        se = statistics.stdev(gains) / math.sqrt(len(gains))
        lines.append(f"| {name} | {statistics.mean(a):.2f} | {statistics.mean(b):.2f} | "
                     f"{statistics.mean(gains):+.2f} +- {se:.2f} | {', '.join(f'{g:+.2f}' for g in gains)} | "
                     f"{sum(g > 0 for g in gains)} of {len(gains)} |")
    unpaired = sorted({name for s in offs + ons for name in s} - set(names))
    if unpaired:
        lines.append(f"\nNot in every folder, so not paired: {'; '.join(unpaired)}.")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--off", type=Path, nargs="+", required=True, help="records of one value, one a seed")
    parser.add_argument("--on", type=Path, nargs="+", required=True, help="records of the other, same seeds")
    args = parser.parse_args(argv)
    try:
        print(table(args.off, args.on))
    except PipelineError as exc:
        raise SystemExit(f"error: {exc}")


if __name__ == "__main__":
    main()
