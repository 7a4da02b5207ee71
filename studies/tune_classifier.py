"""The classifier tuned through the frozen SATNet (`train.tune_epochs`): the model as trained on
the dev boards, by the tune epochs' rate and count.

    python studies/tune_classifier.py --model MODEL [--runs 1e-4:1 3e-4:1] [--out FILE.csv]

MODEL is a models/solver.pt that `train` wrote with train.tune_epochs 0 (the end-to-end epochs
alone; e.g. `dvc exp run -S train.tune_epochs=0`). Each run RATE:EPOCHS starts from it afresh and
tunes its classifier with satground.solver.training.tune_classifier, the stage's own function, on the
training boards (params.yaml's seed, batch size and SATNet settings). A first row scores MODEL
untouched. Per row: the dev boards exact and with every blank right, and the dev givens read
right, with each solve at params.yaml's `satnet.solve_sweeps`, as evaluate's "as trained" row
scores the test boards; and the tune epochs' seconds. Dev boards only, never the test boards.
"""
import argparse
import time

from common import dev_percentages, show_rows, workspace_arguments
from satground.boards.data import load_boards
from satground.harness.io import seed_everything
from satground.solver.models import load_solver
from satground.harness.params import load_params
from satground.satnet import check_setup
from satground.harness.stage import stage_device
from satground.solver.training import solution_scores, tune_classifier


def run(value: str) -> tuple[float, int]:
    rate, epochs = value.split(":")
    return float(rate), int(epochs)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    workspace_arguments(parser, models=False)
    parser.add_argument("--model", required=True, help="solver.pt of a run with train.tune_epochs 0")
    parser.add_argument("--runs", type=run, nargs="+", default=[(1e-4, 1)], metavar="RATE:EPOCHS")
    parser.add_argument("--out", help="CSV of the rows (printed as a table either way)")
    args = parser.parse_args(argv)

    params = load_params(args.params)
    device = stage_device()
    check_setup(device, params.satnet.precision, params.satnet.gemm)
    train = load_boards(args.prepared, "train")
    dev = load_boards(args.prepared, "dev", like=train)
    solution = load_boards(args.prepared, "dev", view="grounded").labels
    batch_size = params.train.batch_size

    def score(model) -> dict:
        scores = solution_scores(model.to(device), dev, solution, params.evaluate.batch_size, device)
        return {**dev_percentages(scores), "dev_givens_read_pct": round(100 * scores["visual_accuracy"], 2)}

    def model():
        return load_solver(args.model, boards=train, kind="visual", solve_sweeps=params.satnet.solve_sweeps)

    rows = [{"tune_lr": "-", "tune_epochs": 0, **score(model()), "seconds": 0.0}]
    print(rows[-1], flush=True)
    for rate, epochs in args.runs:
        tuned = model()
        generator = seed_everything(params.seed)
        start = time.perf_counter()
        tune_classifier(tuned, train, dev, epochs, rate, batch_size, device, generator)
        rows.append({"tune_lr": rate, "tune_epochs": epochs, **score(tuned),
                     "seconds": round(time.perf_counter() - start, 1)})
        print(rows[-1], flush=True)
    show_rows(rows, f"{len(dev)} dev boards, {args.model} tuned", args.out)


if __name__ == "__main__":
    main()
