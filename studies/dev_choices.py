"""Score the test-time choices of a trained run on the dev boards, never the test boards.

    python studies/dev_choices.py [--folds 0 4 8 16] [--starts 1 4] [--proofreader no] [--as-trained]
        [--solve-sweeps none 40 100] [--views 1 5 7 9 11] [--mirror no yes] [--check-weights 1 2] [--check-rounds 1 2 3]
        [--check-contexts givens solved] [--verify-doubtful 0 4] [--verify-weights 1]
        [--verify-rounds 1 2] [--verify-patience 0 1 2] [--board-flags FILE.json] [--out FILE.csv]

Reads the workspace's models/ (after `dvc repro`) and data/prepared/dev*.pt, and scores the
final reader (re-read, or as trained where `reread.reader` is none), without the proofreader
(the headline's final model) or with it, for every pair of `evaluate.check_folds` and `evaluate.starts`: exact boards and
boards with every blank right, in %. --as-trained adds the model as end-to-end training left it
(models/solver.pt, before any re-read; the image-reuse study's first column); --folds 0 scores
each model unchecked, as the test's as-trained rows do. --solve-sweeps
scores each model at each `satnet.solve_sweeps` (default: params.yaml's; none = as trained); the
reader is the one re-read at params.yaml's. --views reads each image in that many views
(`evaluate.views`; default: params.yaml's), --mirror with or without their mirror images
(`evaluate.mirror`; a mirrored row's views read "7m"). --check-weights scores the checked rows at each weight of
SATNet's inference against the reader's (satground.solver.check; 1, the plain product, is
evaluate's); --check-rounds at each count of the check's rounds (`evaluate.check_rounds`;
default: params.yaml's); --check-contexts with each of what SATNet sees beside the other givens
(`evaluate.check_context`); --verify-doubtful, --verify-weights, --verify-rounds and
--verify-readings verify the checked readings by solving, at each setting
(`evaluate.verify_doubtful`, `verify_weight`, `verify_rounds`, `verify_readings`; default:
params.yaml's); --verify-patience with boards leaving the verify after that many rounds in a row
that change none of their readings (`evaluate.verify_patience`; 0: never). --board-flags writes each row's every-blank-right
outcome per dev board (a string of 0 and 1, the boards in order), for paired tests across rows.
--intervals adds each row's 95 % interval of exact and every blank right
over the dev images and boards (satground.boards.intervals, as evaluate's on the test; it reads
the dev images' digits, so it reports and never decides). A choice is made on the label-free columns, every blank right and blank cells right
(docs/studies/label-free-choices.md); exact boards read the givens' labels and are reported only.
"""
import argparse
import itertools
import json
import time
from pathlib import Path

from common import dev_percentages, show_rows, workspace_arguments
from satground.boards.data import load_boards, load_truth
from satground.boards.intervals import board_outcomes, image_bootstrap
from satground.boards.metrics import solution_metrics
from satground.harness.io import seed_everything
from satground.readers.views import VIEW_COUNTS, ReaderViews
from satground.solver.models import VisualSolver, load_solver
from satground.harness.params import load_params
from satground.solver.check import CONTEXTS, Checked
from satground.satnet import check_setup
from satground.harness.stage import stage_device
from satground.solver.training import solution_digits


def in_views(model, views: int, mirror: bool = False):
    """The model with its reader reading each image in `views` views (and their mirror images with
    `mirror`), as evaluate does."""
    return model if views == 1 else VisualSolver(ReaderViews(model.classifier, views, mirror), model.solver)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    workspace_arguments(parser)
    parser.add_argument("--folds", type=int, nargs="+", default=[0, 4, 8, 16])
    parser.add_argument("--starts", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--proofreader", choices=("no", "yes", "both"), default="no")
    parser.add_argument("--as-trained", action="store_true", help="also score models/solver.pt, as trained")
    parser.add_argument("--solve-sweeps", nargs="+", type=lambda v: None if v == "none" else int(v),
                        help="satnet.solve_sweeps values to score (none = as trained)")
    parser.add_argument("--views", type=int, nargs="+", choices=VIEW_COUNTS,
                        help="evaluate.views values to score (default: params.yaml's)")
    parser.add_argument("--mirror", choices=("no", "yes"), nargs="+",
                        help="evaluate.mirror values to score, with views > 1 (default: params.yaml's); "
                             "a mirrored row's views read '7m'")
    parser.add_argument("--check-weights", type=float, nargs="+", default=[1.0],
                        help="weights of SATNet's inference against the reader's in the check (1 = equal)")
    parser.add_argument("--check-rounds", type=int, nargs="+",
                        help="evaluate.check_rounds values to score (default: params.yaml's)")
    parser.add_argument("--check-contexts", nargs="+", choices=CONTEXTS,
                        help="evaluate.check_context values to score (default: params.yaml's)")
    parser.add_argument("--verify-doubtful", type=int, nargs="+",
                        help="evaluate.verify_doubtful values to score (default: params.yaml's)")
    parser.add_argument("--verify-weights", type=float, nargs="+",
                        help="evaluate.verify_weight values to score (default: params.yaml's)")
    parser.add_argument("--verify-rounds", type=int, nargs="+",
                        help="evaluate.verify_rounds values to score (default: params.yaml's)")
    parser.add_argument("--verify-readings", type=int, nargs="+",
                        help="evaluate.verify_readings values to score (default: params.yaml's)")
    parser.add_argument("--verify-patience", type=int, nargs="+",
                        help="evaluate.verify_patience values to score (default: params.yaml's)")
    parser.add_argument("--intervals", action="store_true",
                        help="each row's 95 %% interval over the dev images and boards (reports only)")
    parser.add_argument("--board-flags", help="JSON: each row's every-blank-right outcome per dev board")
    parser.add_argument("--out", help="CSV of the rows (printed as a table either way)")
    args = parser.parse_args(argv)

    params = load_params(args.params)
    device, batch_size = stage_device(), params.evaluate.batch_size
    check_setup(device, params.satnet.precision, params.satnet.gemm)  # SATNet's products as the run's evaluate takes them
    dev = load_boards(args.prepared, "dev")
    solution = load_boards(args.prepared, "dev", view="grounded").labels
    models = Path(args.models)
    final = "solver_reread.pt" if params.reread.reader != "none" else "solver.pt"
    files = {("no", path.stem): path for path in [models / final] if args.proofreader in ("no", "both")}
    if args.proofreader in ("yes", "both"):
        files[("yes", "solver_proofread")] = models / "solver_proofread.pt"
    if args.as_trained and final != "solver.pt":  # else the final reader is the model as trained
        files[("no", "solver")] = models / "solver.pt"
    sweeps = args.solve_sweeps or [params.satnet.solve_sweeps]
    mirrors = [m == "yes" for m in args.mirror] if args.mirror else [params.evaluate.mirror]
    readers = {(*key, n, f"{v}m" if m else v): in_views(load_solver(path, boards=dev, kind="visual", solve_sweeps=n), v, m)
               for key, path in files.items() for n in sweeps for v in args.views or [params.evaluate.views]
               for m in mirrors if v > 1 or not m}
    check_rounds = args.check_rounds or [params.evaluate.check_rounds]
    contexts = args.check_contexts or [params.evaluate.check_context]
    weights, v_rounds = args.verify_weights or [params.evaluate.verify_weight], args.verify_rounds or [params.evaluate.verify_rounds]
    doubtfuls, v_readings = args.verify_doubtful or [params.evaluate.verify_doubtful], args.verify_readings or [
        params.evaluate.verify_readings]
    patiences = args.verify_patience or [params.evaluate.verify_patience]
    verifies = list(dict.fromkeys((d, w, r, t, p) if d else (0, weights[0], v_rounds[0], v_readings[0], patiences[0])
                                  for d, w, r, t, p in itertools.product(doubtfuls, weights, v_rounds, v_readings,
                                                                         patiences)))  # doubtful 0: one row
    image_digits = load_truth(args.prepared, "dev", dev)["image_labels"].numpy() if args.intervals else None
    rows, flags = [], {}
    for ((proofreader, name, n, views), model), folds, starts, weight, rounds, context, verify in itertools.product(
            readers.items(), args.folds, args.starts, args.check_weights, check_rounds, contexts, verifies):
        if folds == 0 and (starts != args.starts[0] or weight != args.check_weights[0]
                           or rounds != check_rounds[0] or context != contexts[0] or verify != verifies[0]):
            continue  # starts, the weight, the rounds, the context act on the checked rows only: one unchecked row
        seed_everything(params.seed)
        start = time.perf_counter()
        solver = Checked(model, folds, starts, weight, rounds, context, verify) if folds else model
        digits = solution_digits(solver.to(device), dev, batch_size, device)
        scores = solution_metrics(digits, solution, dev)
        rows.append({"model": name, "proofreader": proofreader, "solve_sweeps": n or "none", "views": views,
                     "check_folds": folds, "starts": starts if folds else 1, "check_weight": weight if folds else "",
                     "check_rounds": rounds if folds else "", "check_context": context if folds else "",
                     "verify": verify_label(verify) if folds and verify[0] else "",
                     **dev_percentages(scores),
                     "seconds": round(time.perf_counter() - start, 1)})
        if args.intervals:
            bounds = image_bootstrap(board_outcomes(digits, solution, dev), dev, image_digits, seed=params.seed)
            rows[-1].update({f"{column}_95": f"{100 * bounds[name]['low']:.1f}-{100 * bounds[name]['high']:.1f}"
                             for column, name in (("dev_exact", "board_accuracy"),
                                                  ("dev_every_blank", "blank_board_accuracy"))})
        print(rows[-1], flush=True)
        every_blank = ((digits == solution.long()) | dev.is_input).all(1)
        flags[" ".join(f"{key}={rows[-1][key]}" for key in list(rows[-1])[:10])] = "".join("01"[f] for f in every_blank.tolist())
    if args.board_flags:
        Path(args.board_flags).write_text(json.dumps(flags, indent=1) + "\n")
    show_rows(rows, f"{len(dev)} dev boards, {final}", args.out)


def verify_label(verify: tuple) -> str:
    """A verify setting's row label: "8 x1 r2" (doubtful, weight, rounds), " t3" added where it
    tries readings past the second and " pP" where boards leave after P rounds without a win (each
    the label of the rows scored before that setting existed; fashion9's rule 9 named p1 "settle")."""
    doubtful, weight, rounds, readings, patience = verify
    return f"{doubtful} x{weight:g} r{rounds}" + (f" t{readings}" if readings != 2 else "") + (
        f" p{patience}" if patience else "")


if __name__ == "__main__":
    main()
