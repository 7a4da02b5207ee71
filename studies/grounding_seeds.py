"""Grounding robustness over seeds: the stages up to `ground` at 9x9, each seed changed together.

    python studies/grounding_seeds.py --profile cpu9_rules --seeds 0 1 2 3 4 \
        --out results/cpu9_rules/grounding_seeds.jsonl
    python studies/grounding_seeds.py --table results/cpu9_rules/grounding_seeds.jsonl

For each seed S it runs the real `prepare`, `cluster`, `distill` and `ground` stages on the
profile's params with data.seed = cluster.seed = distill.seed = seed = S (other boards, other
given-cell images, another clusterer, classifier and SATNet), then checks the permutation the
stage kept, and the Symbol Grounding Loss's own, against the truth: the Hungarian matching of
the classifier's clusters to the true digits of the training images (truth read here, for this
report only; the stages never read it), and scores the grounding phase's SATNet on the dev boards
(dev_blank_cells, dev_all_cells_authors). One JSON line per seed. Rows written before the
dev-only rule scored the test boards (test_blank_cells, test_all_cells_authors; the figures of
docs/grounding-loss.md): --table shows them under the dev columns, the headings say so.

    python studies/grounding_seeds.py --run-dir . --profile cpu9 --out FILE

reports the same for a finished `dvc repro` workspace (its data/, models/ and metrics/).
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch
import yaml

from common import WORKSPACE, append_rows, markdown, read_rows, stage, true_permutation
from satground.boards.data import load_boards
from satground.solver.grounding import load_permutation
from satground.harness.io import load_json
from satground.boards.metrics import output_metrics, solution_metrics
from satground.solver.models import load_solver
from satground.harness.params import compose, parse_params, read_yaml
from satground.solver.training import predict as predict_boards
from satground.solver.training import predicted_digits


def params_for(profile: str, seed: int, overrides: list[str] = ()) -> dict:
    """The profile's params, every seed set to `seed`, then `key=value` overrides (YAML values)."""
    params = compose(profile)
    params["seed"] = seed
    for section in ("data", "cluster", "distill"):
        params[section]["seed"] = seed
    for item in overrides:
        key, value = item.split("=", 1)
        *sections, leaf = key.split(".")
        node = params
        for part in sections:
            node = node[part]
        node[leaf] = yaml.safe_load(value)
    parse_params(params, "overrides")  # a misspelt key or bad value stops here
    return params


# run_seed's scratch folder (common.WORKSPACE: the same files in a `dvc repro` workspace)
SCRATCH = {"prepared": "prepared", "lenet": "classifier.pt", "ground": "ground.pt",
           "permutation": "permutation.json", "cluster": "cluster_metrics", "distill": "distill",
           "ground_metrics": "ground"}


def dev_board_scores(files: dict, saved: dict) -> dict:
    """The grounding phase's SATNet on the dev boards (truth read here, for this report only):
    blank cells read through the kept permutation, and the authors' per-cell figure over all
    cells (their code reads the givens' classifier outputs and the blanks through the row arg max
    of P_hat)."""
    dev = load_boards(files["prepared"], "dev")
    solution = load_boards(files["prepared"], "dev", view="grounded").labels
    probs = predict_boards(load_solver(files["ground"], boards=dev, kind="visual"), dev, 100,
                           torch.device("cpu"))
    blank = output_metrics(predicted_digits(probs, dev.n_digits, saved["permutation"]), dev)
    argmax = torch.tensor(saved["argmax"])
    authors = solution_metrics(predicted_digits(probs, dev.n_digits, argmax), solution, dev)
    return {"dev_blank_cells": blank["blank_cells"], "dev_all_cells_authors": authors["cell_accuracy"]}


def grounding_report(folder: Path, layout: dict) -> dict:
    """The grounding of a finished run (the stages' files in `folder`, named by `layout`)
    checked against the truth."""
    files = {name: folder / path for name, path in layout.items()}
    cluster = load_json(files["cluster"] / "info.json")
    distill = load_json(files["distill"] / "info.json")
    ground = load_json(files["ground_metrics"] / "info.json")
    saved = load_permutation(files["permutation"], cluster["n_clusters"])
    truth = true_permutation(files["prepared"], files["lenet"])
    return {"cluster_method": cluster["method"],
            "cluster_dev_accuracy": cluster["dev_accuracy"], "lenet_dev_accuracy": distill["dev_accuracy"],
            "ground_val_output_cell_accuracy": ground["val_blank_cells"],
            "ground_best_epoch": ground["best_epoch"], "permutation_source": saved["source"],
            "permutation_right": saved["permutation"].tolist() == truth,
            "loss_permutation_right": saved["from_loss"] == truth,
            # None where the run read no peer structure (ground.permutation: loss)
            "peers_permutation_right": None if saved.get("from_peers") is None else saved["from_peers"] == truth,
            "argmax_is_permutation": saved["argmax_is_permutation"], "argmax_right": saved["argmax"] == truth,
            **dev_board_scores(files, saved)}


def run_seed(folder: Path, profile: str, seed: int, overrides: list[str] = ()) -> dict:
    folder.mkdir()
    params = folder / "params.yaml"
    params.write_text(yaml.safe_dump(params_for(profile, seed, overrides)))
    cpu = stage("prepare.py", "--params", params, "--data-out", folder / "prepared",
                "--metrics-out", folder / "prepare", "--plot-out", folder / "boards.png")
    cpu += stage("cluster.py", "--params", params, "--prepared", folder / "prepared",
                 "--model-out", folder / "cluster", "--samples-plot-out", folder / "cluster_samples.png",
                 "--confusion-plot-out", folder / "cluster_confusion.png", "--metrics-out", folder / "cluster_metrics")
    cpu += stage("distill.py", "--params", params, "--prepared", folder / "prepared",
                 "--clusterer", folder / "cluster", "--model-out", folder / "classifier.pt",
                 "--metrics-out", folder / "distill")
    cpu += stage("ground.py", "--params", params, "--prepared", folder / "prepared",
                 "--classifier", folder / "classifier.pt", "--model-out", folder / "ground.pt",
                 "--permutation-out", folder / "permutation.json", "--plot-out", folder / "permutation.png",
                 "--metrics-out", folder / "ground", "--resume-dir", folder / "resume")
    return {"profile": profile, "overrides": list(overrides), "seed": seed,
            **grounding_report(folder, SCRATCH), "cpu_seconds": round(cpu, 1)}


def table(path: Path) -> str:
    def mark(ok):
        return "n/a" if ok is None else "right" if ok else "wrong"

    def minutes(row):
        return "n/a" if row["cpu_seconds"] is None else f"{row['cpu_seconds'] / 60:.1f}"

    def pct(row, key, older=None):  # older: the key in rows that scored the test split
        key = key if key in row or older is None else older
        return f"{100 * row[key]:.1f}" if key in row else "n/a"

    return markdown(
        ["seed", "clustering, dev %", "LeNet, dev %", "grounding, val blank cells %",
         "dev (test in rows before the dev-only rule) blank cells %",
         "dev (test in rows before the dev-only rule) all cells % (authors')", "arg max a permutation",
         "permutation kept", "the loss's own", "from peer labels", "CPU min"],
        ([r["seed"], pct(r, "cluster_dev_accuracy", "cluster_test_accuracy"),
          pct(r, "lenet_dev_accuracy", "lenet_test_accuracy"), pct(r, "ground_val_output_cell_accuracy"),
          pct(r, "dev_blank_cells", "test_blank_cells"),
          pct(r, "dev_all_cells_authors", "test_all_cells_authors"),
          "yes" if r.get("argmax_is_permutation") else "no",
          f"{mark(r['permutation_right'])} ({r['permutation_source']})", mark(r["loss_permutation_right"]),
          mark(r["peers_permutation_right"]), minutes(r)]
         for r in sorted(read_rows(path), key=lambda r: r["seed"])))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu9")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="parameter overrides on top of the profile, e.g. ground.loss=matched")
    parser.add_argument("--out", type=Path, help="results file (JSON lines, appended)")
    parser.add_argument("--table", type=Path, help="print the table of a results file and stop")
    parser.add_argument("--run-dir", type=Path, help="report the grounding of a finished `dvc repro` "
                        "workspace (its params.yaml, data/, models/, metrics/) instead of running stages")
    args = parser.parse_args()
    if args.table:
        print(table(args.table))
        return
    if args.out is None:
        parser.error("--out is required to run")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.run_dir:
        params = parse_params(read_yaml(args.run_dir / "params.yaml"), args.run_dir / "params.yaml")
        row = {"profile": args.profile, "overrides": [f"run-dir {args.run_dir}"], "seed": params.data.seed,
               **grounding_report(args.run_dir, WORKSPACE), "cpu_seconds": None}
        print(json.dumps(row))
        append_rows(args.out, [row])
        return
    with tempfile.TemporaryDirectory() as scratch:
        for seed in args.seeds:
            row = run_seed(Path(scratch) / str(seed), args.profile, seed, args.set)
            print(json.dumps(row), flush=True)
            append_rows(args.out, [row])


if __name__ == "__main__":
    main()
