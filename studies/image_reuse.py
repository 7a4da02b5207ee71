"""How much the re-read and the check owe to image reuse (docs/studies/image-reuse.md).

    python studies/image_reuse.py results/cpu9_fast/reuse/pool900 results/cpu9_fast/reuse/pool1800 \
        results/cpu9_fast/reuse/pool_all

Each folder is a kept record (scripts/keep_results.py) of one run with its training image pool
capped (`data.train_images`) or fewer training boards (`data.n_train`), holding dev_choices.csv as
`python studies/dev_choices.py --folds 0 16 --starts 1 4 --as-trained` wrote it. Prints one row
per run: the training boards and images used, how many given cells each fills on average, the clusterer's and the
distilled classifier's dev accuracy, and exact dev boards as trained, re-read, and re-read +
check (the profile's folds and starts); the test boards' figures as `evaluate` wrote them beside.
"""
import argparse
import csv
from pathlib import Path

from common import markdown
from satground.harness.records import read_record


def dev_exact(rows: list[dict], model: str, folds: int, starts: int) -> str:
    for row in rows:
        if (row["model"], int(row["check_folds"]), int(row["starts"])) == (model, folds, starts):
            return row["dev_exact_pct"]
    raise SystemExit(f"dev_choices.csv: no row for {model}, {folds} folds, {starts} starts")


def row(folder: Path) -> list:
    record = read_record(folder)
    params, test = record.params, record.metrics["evaluate"]
    info = record.stage_info("prepare")
    cluster = record.metrics["cluster"]["cluster_dev_accuracy"]
    lenet = record.metrics["distill"]["classifier_dev_accuracy"]
    with open(folder / "dev_choices.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    images = info["given_images_used"]["train"]
    uses = params["data"]["n_train"] * info["givens"]["train"]["mean"] / images
    folds, starts = params["evaluate"]["check_folds"], params["evaluate"]["starts"]
    pct = lambda x: f"{100 * x:.1f}"  # noqa: E731
    return [params["data"]["n_train"], images, f"{uses:.0f}", pct(cluster), pct(lenet),
            dev_exact(rows, "solver", 0, 1), dev_exact(rows, "solver_reread", 0, 1),
            dev_exact(rows, "solver_reread", folds, starts),
            pct(test["boards"]), pct(test["boards_reread"]), pct(test["boards_checked"])]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=Path, nargs="+")
    args = parser.parse_args(argv)
    header = ["training boards", "training images", "given cells per image", "clusterer dev %", "LeNet dev %",
              "dev exact, as trained", "dev exact, re-read", "dev exact, re-read + check",
              "test exact, as trained", "test exact, re-read", "test exact, re-read + check"]
    rows = sorted((row(folder) for folder in args.records), key=lambda r: (r[0], r[1]))
    print(markdown(header, rows))


if __name__ == "__main__":
    main()
