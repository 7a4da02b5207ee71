"""Why the verify leaves wrong givens: a report on a finished run's dev boards.

    python studies/verify_misses.py [--settings 16,4,2 32,4,2 16,4,3] [--out FILE.csv]

After the check (evaluate's folds, rounds and context), it counts the givens read wrong and where
each one's true digit stands among its readings (second, third, further), how many of them lie
among the D least sure givens, and how many a board carries. Then, for each verify setting
(doubtful D, rounds R, readings T: `evaluate.verify_doubtful`, `verify_rounds`,
`verify_readings`), it counts the givens the verify fixed and broke, and the wrong givens it left
although they were within its reach: among the D least sure after the check, with the true digit
among their T likeliest readings (later rounds re-rank the givens, so this is the first round's
reach). It reads the dev givens' true
digits, so it reports and never decides a setting.
"""
import argparse

import torch

from common import final_model_on_dev, show_rows, workspace_arguments
from satground.harness.io import seed_everything
from satground.harness.params import load_params
from satground.solver.check import checked_readings, verified_readings


@torch.no_grad()
def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    workspace_arguments(parser)
    parser.add_argument("--settings", nargs="+", default=["16,4,2", "32,4,2", "16,4,3"],
                        help="verify settings, each doubtful,rounds,readings")
    parser.add_argument("--out", help="CSV of the verify rows (printed as a table either way)")
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


if __name__ == "__main__":
    main()
