"""A verify setting chosen over several seeds' dev rows, by the rule docs/studies/fashion9.md writes.

    python studies/seed_rule.py --runs seed0_dev.csv:seed0_flags.json seed1_dev.csv:seed1_flags.json \
        --base "" [--cost tries|passes|seconds] [--near 0.5]

Each RUN is one seed's `studies/dev_choices.py --out` CSV and its `--board-flags` JSON, joined by
":" (several of one workspace: "a.csv,b.csv:a.json,b.json"). Its rows are named by their `verify` column ("" = the verify off). A candidate is a verify
setting every run scored. The criterion is every blank right (EBR) on the dev boards: it reads no
given's label.
- The winner: the highest mean EBR over the runs; among the candidates within --near points of
  it, the one with the lowest cost. `tries`: D x R (doubtful givens a round, rounds); `passes`:
  SATNet passes, R x (D x (T - 1) + 1) with T the readings tried (2 where the label names none);
  `seconds`: the rows' measured seconds, mean over the runs (a settling verify's passes are not
  known before it runs).
- It is taken over --base only if both hold: its mean gain over the base is more than two
  standard errors of the per-run gains above 0, and the pooled McNemar test over every run's
  boards (`paired_boards.py`) gives p < 0.01.
Prints the table of candidates and the decision; exits 0 whether or not the winner is taken.
"""
import argparse
import csv
import json
import re
import sys
from pathlib import Path

from paired_boards import discordant, mcnemar_p, row, verdict


def cost(label: str, kind: str, seconds: dict | None = None) -> float:
    """The cost of a verify row's label, "D xW rR" with " tT" where T is not 2 and " pP" where
    boards leave after P rounds without a win (rule 9's " settle": P 1); 0 for the verify off.
    `seconds` ({label: mean seconds}) for kind "seconds"."""
    if kind == "seconds":
        return seconds[label]
    if not label:
        return 0
    found = re.fullmatch(r"(\d+) x[\d.]+ r(\d+)(?: t(\d+))?( settle| p\d+)?", label)
    if not found or found[4]:
        sys.exit(f"verify label {label!r} is not 'D xW rR [tT]' (a settling verify's cost: --cost seconds)")
    doubtful, rounds, readings = int(found[1]), int(found[2]), int(found[3] or 2)
    return doubtful * rounds if kind == "tries" else rounds * (doubtful * (readings - 1) + 1)


def read_run(spec: str) -> tuple[str, dict, dict, dict]:
    """(name, {verify label: EBR}, board flags, {verify label: seconds}) of one run
    "rows.csv:flags.json", where either side may list several files of one workspace, split by
    commas."""
    rows_paths, _, flags_paths = spec.partition(":")
    rows, flags, seconds = {}, {}, {}
    try:
        for path in rows_paths.split(","):
            with open(path) as handle:
                for line in csv.DictReader(handle):
                    rows[line["verify"]] = float(line["dev_every_blank_pct"])
                    seconds[line["verify"]] = float(line.get("seconds") or "nan")
        for path in filter(None, flags_paths.split(",")):
            flags.update(json.loads(open(path).read()))
    except (OSError, ValueError, KeyError) as error:
        sys.exit(f"{spec}: {error}")
    return Path(rows_paths.split(",")[0]).stem, rows, flags, seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs="+", required=True, help="rows.csv:flags.json, one a seed")
    parser.add_argument("--base", required=True, help='the verify label kept unless the winner is taken ("" = off)')
    parser.add_argument("--cost", choices=("tries", "passes", "seconds"), default="tries")
    parser.add_argument("--near", type=float, default=0.5, help="EBR points within which the cheapest wins")
    args = parser.parse_args(argv)
    runs = [read_run(spec) for spec in args.runs]
    labels = [label for label in runs[0][1] if all(label in rows for _, rows, _, _ in runs)]
    if args.base not in labels:
        sys.exit(f"--base {args.base!r} is not a row every run scored (shared rows: {labels})")
    mean = {label: sum(rows[label] for _, rows, _, _ in runs) / len(runs) for label in labels}
    seconds = {label: sum(secs[label] for _, _, _, secs in runs) / len(runs) for label in labels}
    print("| verify | " + " | ".join(name for name, _, _, _ in runs) + f" | mean EBR | {args.cost} |")
    print("|---" * (len(runs) + 3) + "|")
    for label in labels:
        print(f"| {label or 'off'} | " + " | ".join(f"{rows[label]:.1f}" for _, rows, _, _ in runs)
              + f" | {mean[label]:.2f} | {cost(label, args.cost, seconds):.{1 if args.cost == 'seconds' else 0}f} |")
    best = max(mean[label] for label in labels if label != args.base)
    winner = min((label for label in labels if label != args.base and mean[label] >= best - args.near),
                 key=lambda label: (cost(label, args.cost, seconds), -mean[label]))
    gains = [rows[winner] - rows[args.base] for _, rows, _, _ in runs]
    b = c = 0
    for name, _, flags, _ in runs:
        if not flags:
            sys.exit(f"{name}: no board flags given (rows.csv:flags.json): the McNemar test needs them")
        db, dc = discordant(row(flags, f"verify={args.base}", name), row(flags, f"verify={winner}", name))
        b, c = b + db, c + dc
    p = mcnemar_p(b, c)
    gain, two_se, taken = verdict(gains, p)
    print(f"\nwinner {winner or 'off'!r}: mean EBR {mean[winner]:.2f}; gain over {args.base or 'off'!r} "
          f"{gain:+.2f} points (per run {', '.join(f'{g:+.1f}' for g in gains)}), 2 SE {two_se:.2f}; "
          f"pooled McNemar b {b}, c {c}, p {p:.2g}: {'TAKEN' if taken else 'not taken'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
