"""Why the verify leaves wrong givens: a report on a finished run's dev boards.

    python studies/verify_misses.py [--settings 16,4,2 32,4,2 16,4,3] [--out FILE.csv]

After the check (evaluate's folds, rounds and context), it counts the givens read wrong and where
each one's true digit stands among its readings (second, third, further), how many of them lie
among the D least sure givens, and how many a board carries. Then, for each verify setting
(doubtful D, rounds R, readings T: `evaluate.verify_doubtful`, `verify_rounds`,
`verify_readings`), it counts the givens the verify fixed and broke, and the wrong givens it left
although they were within its reach: among the D least sure after the check, with the true digit
among their T likeliest readings (later rounds re-rank the givens, so this is the first round's
reach). With --weighed, it then weighs single tries as the verify's first round would: each
wrong given within reach tried at its true digit, and each right given among the D least sure tried
at its second reading. For each kind: the readings' log odds against the first reading, SATNet's
gain in surety from the try (`solve_surety`), and the share a weight W would let win (log odds +
W x gain > 0), beside the noise of the surety itself: the spread of one board's surety over two
solves from different random starts. And each board's two least sure of each kind tried alone and
together: whether a pair wins where neither of its tries does. It reads the dev givens' true
digits, so it reports and never decides a setting.
"""
import argparse

import torch

from common import final_model_on_dev, show_rows, workspace_arguments
from satground.harness.io import seed_everything
from satground.harness.params import load_params
from satground.solver.check import checked_readings, solve_surety, verified_readings


@torch.no_grad()
def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    workspace_arguments(parser)
    parser.add_argument("--settings", nargs="+", default=["16,4,2", "32,4,2", "16,4,3"],
                        help="verify settings, each doubtful,rounds,readings")
    parser.add_argument("--out", help="CSV of the verify rows (printed as a table either way)")
    parser.add_argument("--weighed", metavar="D,T", help="weigh single tries within the D least sure givens "
                        "and T likeliest readings (e.g. 16,4)")
    args = parser.parse_args(argv)

    params = load_params(args.params)
    dev, solution, model, readings, _ = final_model_on_dev(params, args.prepared, args.models)
    B, C, K, given = len(dev), dev.n_cells, dev.n_digits, dev.is_input
    truth, e = solution - 1, params.evaluate
    seed_everything(params.seed)
    checked = checked_readings(model.solver, readings.reshape(B, -1), given, e.check_folds, 1.0, e.check_rounds,
                               e.check_context).reshape(B, C, K)
    wrong = given & (checked.argmax(2) != truth)
    place = (checked.argsort(2, descending=True) == truth[..., None]).long().argmax(2)  # 0 = the first reading
    sureness = torch.where(given, checked.max(2).values, 2.0).argsort(1).argsort(1)  # 0 = least sure
    per_board = wrong.sum(1)
    show_rows([{"givens": int(given.sum()), "wrong after the check": int(wrong.sum()),
                "boards with a wrong given": int(per_board.gt(0).sum()),
                "truth second / third / further": " / ".join(str(int(n)) for n in (
                    (wrong & (place == 1)).sum(), (wrong & (place == 2)).sum(), (wrong & (place > 2)).sum())),
                "among the 8 / 16 / 32 least sure": " / ".join(str(int((wrong & (sureness < d)).sum())) for d in (8, 16, 32)),
                "boards by wrong givens 0 / 1 / 2 / 3 / 4 / more": " / ".join(
                    [str(int((per_board == n).sum())) for n in range(5)] + [str(int((per_board > 4).sum()))])}],
              f"{B} dev boards, after the check ({e.check_folds} folds, {e.check_rounds} rounds)", None)
    rows = []
    for setting in args.settings:
        doubtful, rounds, tried = (int(x) for x in setting.split(","))
        seed_everything(params.seed)
        verified = verified_readings(model.solver, checked.reshape(B, -1), given, doubtful, e.verify_weight, rounds,
                                     tried).reshape(B, C, K)
        left = given & (verified.argmax(2) != truth)
        reachable = wrong & (place < tried) & (sureness < doubtful)
        rows.append({"doubtful": doubtful, "rounds": rounds, "readings": tried, "fixed": int((wrong & ~left).sum()),
                     "broken": int((~wrong & left).sum()), "wrong after": int(left.sum()),
                     "boards with a wrong given after": int(left.any(1).sum()),
                     "left wrong though within reach": int((left & reachable).sum()),
                     "boards with more wrong givens than rounds": int((per_board > rounds).sum())})
    show_rows(rows, "the verify, each setting from the checked readings", args.out)
    if args.weighed:
        doubtful, tried = (int(x) for x in args.weighed.split(","))
        seed_everything(params.seed)
        weighed(model.solver, checked, given, truth, wrong & (place < tried) & (sureness < doubtful),
                ~wrong & given & (sureness < doubtful))


def log_odds(checked, cell, digit_of):
    """(B,) the readings' log odds of each board's given at `cell` (B,): its reading digit_of (B, C)
    against its first reading."""
    rows = torch.arange(len(checked))
    return (checked[rows, cell, digit_of[rows, cell]].clamp_min(1e-4).log()
            - checked[rows, cell].max(1).values.clamp_min(1e-4).log())


def board_tries(solver, checked, given):
    """(surety (B,), gain): how sure SATNet is of its solve of each board with its givens at their
    first reading (`solve_surety`), and gain(digit_of, *cells), its gain in surety over that when
    each board's givens at `cells` (each (B,)) show digit_of (B, C) instead, one pass a call."""
    B, C, K = checked.shape
    rows, digits = torch.arange(B), torch.where(given, checked.argmax(2), -1)
    surety = solve_surety(solver, digits, given, K)

    def gain(digit_of, *cells):
        tried = digits.clone()
        for cell in cells:
            tried[rows, cell] = digit_of[rows, cell]
        return solve_surety(solver, tried, given, K) - surety
    return surety, gain


def try_gains(solver, checked, given, chosen, digit_of):
    """Each chosen given (B, C bool) tried alone at digit_of (B, C): its readings' log odds against
    the first reading and SATNet's gain in surety over the board as read, one pass per try a board."""
    as_read, gain = board_tries(solver, checked, given)
    order = chosen.float().sort(dim=1, descending=True, stable=True).indices  # each board's chosen givens first
    odds, gains = [], []
    for cell in order.T[:int(chosen.sum(1).max())]:
        live = chosen[torch.arange(len(cell)), cell]
        odds.append(log_odds(checked, cell, digit_of)[live])
        gains.append(gain(digit_of, cell)[live])
    return torch.cat(odds or [torch.zeros(0)]), torch.cat(gains or [torch.zeros(0)]), as_read


def weighed(solver, checked, given, truth, reachable, doubtful_right):
    """Prints the tries weighed: wrong givens within reach at their truths, and right doubtful
    givens at their second readings, alone (try_gains) and in pairs (pair_scores)."""
    second = checked.argsort(2, descending=True)[..., 1]
    rows = []
    for kind, chosen, digit_of in (("wrong given, tried at its truth", reachable, truth),
                                   ("right given, tried at its second reading", doubtful_right, second)):
        odds, gains, as_read = try_gains(solver, checked, given, chosen, digit_of)
        row = {"tries": kind, "count": len(odds), "log odds, median": f"{odds.median():.2f}",
               "gain in surety, median": f"{gains.median():.2f}"}
        row.update({f"win at W {w:g} %": f"{100 * ((odds + w * gains) > 0).float().mean():.1f}" for w in (0.5, 1, 2, 4)})
        rows.append(row)
    noise = board_tries(solver, checked, given)[0] - as_read  # the same boards, other random starts
    show_rows(rows, f"single tries weighed (the surety's own spread over two solves of a board as read: "
                    f"sd {noise.std() / 2 ** 0.5:.2f}, median |difference| {noise.abs().median():.2f})", None)
    pairs = []
    for kind, chosen, digit_of in (("two wrong givens, at their truths", reachable, truth),
                                   ("two right givens, at their second readings", doubtful_right, second)):
        alone_a, alone_b, together = pair_scores(solver, checked, given, chosen, digit_of)
        alone = (alone_a > 0) | (alone_b > 0)
        pairs.append({"pairs": kind, "boards": len(together),
                      "the pair wins %": f"{100 * (together > 0).float().mean():.1f}",
                      "a try alone wins %": f"{100 * alone.float().mean():.1f}",
                      "the pair wins, neither alone %": f"{100 * ((together > 0) & ~alone).float().mean():.1f}"})
    show_rows(pairs, "each board's two least sure of a kind, tried alone and together (weight 1)", None)


def pair_scores(solver, checked, given, chosen, digit_of):
    """For each board with two chosen givens or more: the two least sure tried at digit_of alone
    and together, each scored as the verify weighs a try at weight 1 (log odds + gain in surety)."""
    _, gain = board_tries(solver, checked, given)
    a, b = torch.where(chosen, checked.max(2).values, 2.0).argsort(1)[:, :2].T
    odds_a, odds_b = log_odds(checked, a, digit_of), log_odds(checked, b, digit_of)
    scores = odds_a + gain(digit_of, a), odds_b + gain(digit_of, b), odds_a + odds_b + gain(digit_of, a, b)
    return tuple(score[chosen.sum(1) >= 2] for score in scores)


if __name__ == "__main__":
    main()
