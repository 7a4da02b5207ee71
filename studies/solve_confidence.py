"""Does SATNet's solve tell a board with a wrong given from the same board with every given
right? A report on the dev boards, toward a check that compares whole readings.

    python studies/solve_confidence.py [--out FILE.csv]

The check (satground.solver.check) asks SATNet to infer a hidden given from the other givens, and
SATNet does that far worse than it solves a board (docs/studies/fashion9.md, "the check is the
cap"). A check could instead solve the board once per candidate reading of a doubtful given and
keep the reading whose solve SATNet is surest of. This measures whether that signal exists.
Per dev board: every given shown as its TRUE digit, and the same board with its first given
shown as the reader's likeliest wrong digit (the misreading it would make). Each is solved; a
score of the solve is computed over the blank cells; the row gives how often the true board
scores higher, beside how often the check's own opinions of that given (SATNet inferring it from
the other true givens; that times the reader's reading) prefer the true digit to that wrong one.
It reads the dev givens' true digits, so it reports and never decides a setting.
"""
import argparse
import time
from dataclasses import replace

import torch

from common import final_model_on_dev, show_rows, workspace_arguments
from satground.harness.io import seed_everything
from satground.harness.params import load_params
from satground.solver.check import checked_readings, solve_surety, verified_readings
from satground.solver.training import predict


def pct(flags: torch.Tensor) -> float:
    return round(100 * flags.float().mean().item(), 1)


@torch.no_grad()
def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    workspace_arguments(parser)
    parser.add_argument("--doubtful", type=int, default=4, help="givens a board tried at their second reading")
    parser.add_argument("--weights", type=float, nargs="+", default=[0.25, 0.5, 1.0, 2.0, 4.0],
                        help="the solve's gain in surety against the readings' log odds (evaluate.verify_weight)")
    parser.add_argument("--out", help="CSV of the rows (printed as a table either way)")
    args = parser.parse_args(argv)

    params = load_params(args.params)
    batch_size = params.evaluate.batch_size
    dev, solution, model, readings, device = final_model_on_dev(params, args.prepared, args.models)
    B, C, K, given = len(dev), dev.n_cells, dev.n_digits, dev.is_input

    def solve(shown: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """SATNet's outputs (B, C, K), renormalised per cell, the `shown` cells given as `labels`."""
        out = predict(model.solver, replace(dev, is_input=shown, labels=labels), batch_size, device)
        out = out.reshape(B, C, K).clamp_min(0)
        return out / out.sum(2, keepdim=True).clamp_min(1e-12)

    rows_ = torch.arange(B)
    first = given.long().argmax(1)  # each board's first given
    truth = solution[rows_, first] - 1
    wrong_probs = readings[rows_, first].clone()
    wrong_probs[rows_, truth] = -1
    wrong = wrong_probs.argmax(1)  # the reader's likeliest wrong digit there
    misread = solution.clone()
    misread[rows_, first] = wrong + 1

    seed_everything(params.seed)
    start = time.perf_counter()
    right_score = solve_surety(model.solver, solution - 1, given, K)
    wrong_score = solve_surety(model.solver, misread - 1, given, K)
    hidden = given.clone()
    hidden[rows_, first] = False
    inferred = solve(hidden, solution)[rows_, first]
    rows = [{"opinion": "the solve's surety (satground.solver.check.solve_surety)", "true preferred %": pct(right_score > wrong_score)}]
    for name, p in (("SATNet inferring the given from the other true givens", inferred),
                    ("the reader's reading", readings[rows_, first]),
                    ("the check's product of both", inferred.clamp_min(1e-4) * readings[rows_, first].clamp_min(1e-4))):
        rows.append({"opinion": name, "true preferred %": pct(p[rows_, truth] > p[rows_, wrong])})
    show_rows(rows, f"{B} dev boards, every other given true: the first given true or misread "
              f"({time.perf_counter() - start:.1f} s)", None)

    # the realistic case: every given as read, verified by solving as evaluate would
    # (satground.solver.check.verified_readings, one round), from the reader's readings or the check's
    digits = solution - 1
    rows = []
    for prior_name in ("reader", "check"):
        start = time.perf_counter()
        prior = readings if prior_name == "reader" else checked_readings(
            model.solver, readings.reshape(B, -1), given, params.evaluate.check_folds, 1.0,
            params.evaluate.check_rounds, params.evaluate.check_context).reshape(B, C, K)
        wrong_before = given & (prior.argmax(2) != digits)
        for weight in args.weights:
            verified = verified_readings(model.solver, prior.reshape(B, -1), given, args.doubtful, weight)
            wrong_after = given & (verified.reshape(B, C, K).argmax(2) != digits)
            rows.append({"prior": prior_name, "solve weight": weight, "givens wrong before": int(wrong_before.sum()),
                         "fixed": int((wrong_before & ~wrong_after).sum()), "broken": int((~wrong_before & wrong_after).sum()),
                         "givens wrong after": int(wrong_after.sum()),
                         "boards with a wrong given before / after": f"{int(wrong_before.any(1).sum())} / {int(wrong_after.any(1).sum())}",
                         "seconds": round(time.perf_counter() - start, 1)})
    show_rows(rows, f"{B} dev boards, givens as read ({given.sum().item()} givens)", args.out)


if __name__ == "__main__":
    main()
