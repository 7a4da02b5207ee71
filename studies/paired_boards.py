"""Two dev-board rows compared board by board (McNemar), over several seeds' runs.

    python studies/paired_boards.py --flags seed14.json seed15.json --base "verify=" --new "verify=4 x1 r1"
    python studies/paired_boards.py --flags seed0_base.json --new-flags seed0_candidate.json --base X --new X

Each FILE is `studies/dev_choices.py --board-flags` output: per row, whether each dev board had
every blank right (a label-free outcome). Per seed and pooled: b, the boards right under --new
and not under --base; c, the reverse; the EBR difference (new - base, points); and the exact
two-sided binomial p of b against c (McNemar's test: the boards both rows agree on carry no
evidence). A row is named by a piece of its key: the first row whose key ends with --base (or
--new) after a key=value pair, so "verify=" is the row without the verify. With --new-flags the
--new row comes from those files, one beside each --flags file: the same dev boards scored in
another workspace (another run of the pipeline). Last line: the mean gain over the runs, two
standard errors of the per-run gains, and the rule docs/studies/fashion9.md writes: taken where
the gain clears two standard errors and the pooled p < 0.01.
"""
import argparse
import json
import statistics
import sys

from scipy.stats import binomtest


def row(flags: dict, piece: str, where: str) -> str:
    found = ([key for key in flags if key.endswith(piece)]  # the exact row before one that extends its name
             or [key for key in flags if f"{piece} " in key])
    if not found:
        sys.exit(f"{where}: no row named {piece!r} (rows: {list(flags)})")
    return flags[found[0]]


def mcnemar_p(b: int, c: int) -> float:
    """The exact two-sided binomial p of b against c (McNemar's test); 1 where no board differs."""
    return binomtest(b, b + c).pvalue if b + c else 1.0


def verdict(gains: list[float], p: float) -> tuple[float, float, bool]:
    """(mean gain, two standard errors of the per-run gains, taken): a change is taken where its
    mean gain clears two standard errors and the pooled McNemar p < 0.01."""
    gain = statistics.mean(gains)
    two_se = 2 * statistics.stdev(gains) / len(gains) ** 0.5 if len(gains) > 1 else float("inf")
    return gain, two_se, gain > two_se and p < 0.01


def discordant(base: str, new: str) -> tuple[int, int]:
    """(b, c): boards right under new alone, and under base alone."""
    return sum(n == "1" and o == "0" for o, n in zip(base, new)), sum(n == "0" and o == "1" for o, n in zip(base, new))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flags", nargs="+", required=True, help="dev_choices --board-flags files, one a seed")
    parser.add_argument("--base", required=True)
    parser.add_argument("--new", required=True)
    parser.add_argument("--new-flags", nargs="+", help="the --new row's files, one beside each --flags file "
                        "(the same boards, another workspace); default: the --flags files")
    args = parser.parse_args(argv)
    new_paths = args.new_flags or args.flags
    if len(new_paths) != len(args.flags):
        sys.exit(f"--new-flags: {len(new_paths)} files for {len(args.flags)} --flags files")
    total_b = total_c = 0
    gains = []
    print("| run | boards | b (new only) | c (base only) | EBR new - base, points | exact p |\n|---|---|---|---|---|---|")
    for path, new_path in zip(args.flags, new_paths):
        base, new = row(read(path), args.base, path), row(read(new_path), args.new, new_path)
        if len(base) != len(new):
            sys.exit(f"{new_path}: {len(new)} boards, against {len(base)} in {path}")
        b, c = discordant(base, new)
        total_b, total_c = total_b + b, total_c + c
        gains.append(100 * (b - c) / len(base))
        print(f"| {path} | {len(base)} | {b} | {c} | {gains[-1]:+.1f} | {mcnemar_p(b, c):.2g} |")
    p = mcnemar_p(total_b, total_c)
    print(f"| pooled | | {total_b} | {total_c} | | {p:.2g} |")
    gain, two_se, taken = verdict(gains, p)
    print(f"\nmean gain {gain:+.2f} points, 2 SE {two_se:.2f}, pooled p {p:.2g}: {'TAKEN' if taken else 'not taken'}")
    return 0


def read(path: str) -> dict:
    try:
        return json.loads(open(path).read())
    except (OSError, ValueError) as error:
        sys.exit(f"{path}: {error}")


if __name__ == "__main__":
    sys.exit(main())
