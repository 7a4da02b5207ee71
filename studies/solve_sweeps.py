"""How many sweeps a trained SATNet's solve needs: dev boards against the forward's stopping rule.

    python studies/solve_sweeps.py [--eps 1e-4 1e-3 1e-2] [--fixed 40 60 100] [--out FILE.csv]

Reads the workspace's models/ (after `dvc repro`) and data/prepared/dev*.pt, and solves the dev
boards with the model as trained (models/solver.pt) and the final reader (models/solver_reread.pt,
re-read at params.yaml's `satnet.solve_sweeps`), without the check: once at each forward tolerance
`--eps` (the checkpoint's max_iter sweeps at most, the published early stop) and once at each
fixed sweep count `--fixed` (no early stop: the layer's `solve_sweeps`, as `reread` and `evaluate`
run it). Prints the mean sweeps a board took, exact
dev boards and boards with every blank right, in %, and the seconds. The check's rows at a fixed
count: `studies/dev_choices.py --solve-sweeps`. docs/studies/fast-9x9.md says what was chosen.
"""
import argparse
import time
from pathlib import Path

from common import dev_percentages, show_rows, workspace_arguments
from satground.boards.data import load_boards
from satground.harness.io import seed_everything
from satground.solver.models import load_solver
from satground.harness.params import load_params
from satground.satnet import check_setup
from satground.harness.stage import stage_device
from satground.solver.training import solution_scores


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    workspace_arguments(parser)
    parser.add_argument("--eps", type=float, nargs="+", default=[1e-4, 1e-3, 1e-2])
    parser.add_argument("--fixed", type=int, nargs="+", default=[40, 60, 100])
    parser.add_argument("--out", help="CSV of the rows (printed as a table either way)")
    args = parser.parse_args(argv)

    params = load_params(args.params)
    device = stage_device()
    check_setup(device, params.satnet.precision, params.satnet.gemm)
    dev = load_boards(args.prepared, "dev")
    solution = load_boards(args.prepared, "dev", view="grounded").labels
    rules = [("eps", eps) for eps in args.eps] + [("fixed", n) for n in args.fixed]
    rows = []
    for name in ("solver", "solver_reread"):
        model = load_solver(Path(args.models) / f"{name}.pt", boards=dev, kind="visual")
        satnet = model.solver.satnet
        for rule, value in rules:
            if rule == "eps":
                satnet.eps, satnet.solve_sweeps = value, None
            else:
                satnet.solve_sweeps = value
            satnet.sweep_count.reset()
            seed_everything(params.seed)
            start = time.perf_counter()
            scores = solution_scores(model.to(device), dev, solution, params.evaluate.batch_size, device)
            rows.append({"model": name, "rule": rule, "value": f"{value:g}",
                         "sweeps": round(satnet.sweep_count.mean(), 1), **dev_percentages(scores),
                         "seconds": round(time.perf_counter() - start, 1)})
            print(rows[-1], flush=True)
    show_rows(rows, f"{len(dev)} dev boards, no check", args.out)


if __name__ == "__main__":
    main()
