"""Two dev-board rows compared board by board (McNemar), over several seeds' runs.

    python studies/paired_boards.py --flags seed14.json seed15.json --base "verify=" --new "verify=4 x1 r1"

Each FILE is `studies/dev_choices.py --board-flags` output: per row, whether each dev board had
every blank right (a label-free outcome). Per seed and pooled: b, the boards right under --new
and not under --base; c, the reverse; the EBR difference (new - base, points); and the exact
two-sided binomial p of b against c (McNemar's test: the boards both rows agree on carry no
evidence). A row is named by a piece of its key: the first row whose key ends with --base (or
--new) after a key=value pair, so "verify=" is the row without the verify.
"""
import argparse
import json
import sys

from scipy.stats import binomtest


def row(flags: dict, piece: str, where: str) -> str:
    found = [key for key in flags if key.endswith(piece) or f"{piece} " in key]
    if not found:
        sys.exit(f"{where}: no row named {piece!r} (rows: {list(flags)})")
    return flags[found[0]]


def mcnemar_p(b: int, c: int) -> float:
    """The exact two-sided binomial p of b against c (McNemar's test); 1 where no board differs."""
    return binomtest(b, b + c).pvalue if b + c else 1.0


def discordant(base: str, new: str) -> tuple[int, int]:
    """(b, c): boards right under new alone, and under base alone."""
    return sum(n == "1" and o == "0" for o, n in zip(base, new)), sum(n == "0" and o == "1" for o, n in zip(base, new))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flags", nargs="+", required=True, help="dev_choices --board-flags files, one a seed")
    parser.add_argument("--base", required=True)
    parser.add_argument("--new", required=True)
    args = parser.parse_args(argv)
    total_b = total_c = 0
    print("| run | boards | b (new only) | c (base only) | EBR new - base, points | exact p |\n|---|---|---|---|---|---|")
    for path in args.flags:
        try:
            flags = json.loads(open(path).read())
        except (OSError, ValueError) as error:
            sys.exit(f"{path}: {error}")
        base, new = row(flags, args.base, path), row(flags, args.new, path)
        b, c = discordant(base, new)
        total_b, total_c = total_b + b, total_c + c
        p = mcnemar_p(b, c)
        print(f"| {path} | {len(base)} | {b} | {c} | {100 * (b - c) / len(base):+.1f} | {p:.2g} |")
    p = mcnemar_p(total_b, total_c)
    print(f"| pooled | | {total_b} | {total_c} | | {p:.2g} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
