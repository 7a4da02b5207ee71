"""Evaluation on the test boards: our model as trained, re-read (unless `reread.reader` is none)
and with proofreader (unless `proofread.epochs` is 0), the final model again with SATNet
checking the givens' readings (unless `evaluate.check_folds` is 0), the self-grounded phase, and
the results table (paper Tables 1 and 3) with the baselines' rows. With `evaluate.views` > 1 our
model's readers read each image in that many views (satground/readers/views.py) in every row of ours,
and the model as trained is also scored reading each image once (the paper's row).

The only stage of our method that reads the test solution and the evaluation truth: board
accuracy is exact match with the true solution; the valid-grid rate is the authors' count
(the predicted grid is a valid Sudoku); per-cell accuracy is over all cells; visual accuracy
over input cells. The cluster -> digit map folded into the trained model (train's: the ground
stage's learned permutation, or with `train.reground` the one read off the rules-taught SATNet)
is checked against the best one-to-one matching of the classifier's clusters to the true digits
of the test images, and so is the ground stage's. Every board figure of ours gets a
95 % interval from a bootstrap over the test images and boards (satground/boards/intervals.py),
in info.json's "intervals", keyed as the metrics file's figures.
"""
from __future__ import annotations

from satground.boards.data import load_boards, load_truth
from satground.boards.metrics import markdown_table
from satground.harness.io import atomic_outputs
from satground.harness.params import load_params
from satground.harness.results_table import headline, results_table, row_labels, table_rows
from satground.harness.satnet_stage import prepare_satnet_stage
from satground.harness.stage import run_stage, stage_arguments
from satground.harness.tracking import StageReport, load_scores, save_scores
from satground.solver.evaluation import grounding_scores, our_variants, score_ours
from satground.solver.grounding import load_permutation
from satground.solver.models import folded_permutation, load_solver


def load_solvers(args, params, test) -> dict:
    """Our model as trained, re-read, with proofreader, and the self-grounded phase's, by name."""
    return {name: load_solver(path, boards=test, kind="visual", solve_sweeps=params.satnet.solve_sweeps)
            for name, path in (("no_proofreader", args.solver), ("reread", args.solver_reread),
                               ("proofreader", args.solver_proofread), ("ground", args.ground))}


def load_baselines(args) -> dict:
    """The baselines' test scores by view (grounded, ungrounded, symbols); none with --skip-baselines."""
    if args.skip_baselines:
        return {}
    return {name: load_scores(path) for name, path in
            (("grounded", args.baseline_grounded), ("ungrounded", args.baseline_ungrounded),
             ("symbols", args.baseline_nonvisual))}


def summary(n_boards: int, ours: dict, views: int, permutation_correct: bool) -> str:
    """The stage's one line: each variant's board accuracy."""
    plain, proofread = ours.get("one_view", ours["no_proofreader"]), ours.get("proofreader", {})
    in_views = ours["no_proofreader"] if views > 1 else {}
    reread, checked = ours.get("reread", {}), ours.get("checked", {})
    return (f"evaluate: {n_boards} test boards; ours {100 * plain['board_accuracy']:.1f} % boards "
            f"({100 * plain['blank_board_accuracy']:.1f} % with every blank cell right), "
            + (f"{100 * in_views['board_accuracy']:.1f} % in {views} views, " if in_views else "")
            + (f"{100 * reread['board_accuracy']:.1f} % re-read, " if reread else "")
            + (f"{100 * proofread['board_accuracy']:.1f} % with proofreader, " if proofread else "")
            + (f"{100 * checked['board_accuracy']:.1f} % checked by SATNet; " if checked else "")
            + f"permutation {'correct' if permutation_correct else 'WRONG'}")


def main(argv=None):
    args = stage_arguments(
        __doc__, ["prepared", "ground", "permutation", "solver", "solver-reread", "solver-proofread",
                  "baseline-grounded", "baseline-ungrounded", "baseline-nonvisual",  # their metrics folders
                  "table-out", "csv-out", "metrics-out"], argv,
        extra=lambda p: p.add_argument("--skip-baselines", action="store_true",
                                       help="table without the baselines' rows"))

    params = load_params(args.params)
    device, _ = prepare_satnet_stage(params)
    # every input is read and checked before anything is written
    test = load_boards(args.prepared, "test")
    solution = load_boards(args.prepared, "test", view="grounded").labels
    truth = load_truth(args.prepared, "test", test)
    solvers = load_solvers(args, params, test)
    saved_perm = load_permutation(args.permutation, test.n_digits)
    folded = folded_permutation(args.solver, len(saved_perm["permutation"]), test.n_digits)
    baselines = load_baselines(args)
    report = StageReport(args.metrics_out)

    ours, intervals = score_ours(our_variants(solvers, params), test, solution,
                                 truth["image_labels"].numpy(), params, device)
    grounding = grounding_scores(solvers["ground"], test, solution, truth, saved_perm,
                                 params.evaluate.batch_size, device, folded)

    frame = results_table(table_rows(ours, intervals, baselines, params), row_labels(params))
    with atomic_outputs([args.table_out, args.csv_out]) as (table_tmp, csv_tmp):
        table_tmp.write_text(markdown_table(frame) + "\n")
        frame.to_csv(csv_tmp, index=False)
    save_scores(ours, args.metrics_out)
    figures, figure_intervals = headline(ours, intervals, params.evaluate.views)
    report.finish({**figures, "perm_right": grounding["permutation_correct"]},
                  info={"grounding": grounding, "intervals": figure_intervals})
    print(summary(len(test), ours, params.evaluate.views, grounding["permutation_correct"]))


if __name__ == "__main__":
    run_stage(main)
