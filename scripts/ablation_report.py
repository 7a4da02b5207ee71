"""The clustering-accuracy ablation as the paper's Figure 5, from the sweep's DVC experiments.

    dvc exp run --queue -S 'distill.checkpoint=0,2,4,...' && dvc queue start -j 1
    python scripts/ablation_report.py      # after the queue has finished

For every experiment (and the workspace) that ran `evaluate`, reads the clustering accuracy of
the InfoGAN checkpoint it started from (metrics/distill.json, teacher_test_accuracy: truth used
for reporting only), the grounding phase's output-cell accuracy and the final board accuracy
(metrics/evaluate.json), and writes metrics/ablation.csv and plots/ablation.png.
"""
import argparse
import json
import subprocess
import sys

import matplotlib
import pandas as pd

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from satground.io import atomic_write, save_figure  # noqa: E402


def metric(run: dict, path: str, *keys):
    node = run.get("data", {}).get("metrics", {}).get(path, {}).get("data", {})
    for key in keys:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def rows(show: list) -> list:
    runs = []
    for baseline in show:
        runs.append(baseline)
        for experiment in baseline.get("experiments") or []:
            # a queued or running experiment's folder still holds its baseline's metrics
            # files: reading them would pair one checkpoint with another run's results
            if (experiment.get("executor") or {}).get("state", "success") != "success":
                continue
            runs.extend(experiment.get("revs") or [])
    out = []
    for run in runs:
        params = run.get("data", {}).get("params", {}).get("params.yaml", {}).get("data", {})
        row = {
            "experiment": run.get("name") or run.get("rev"),
            "checkpoint": params.get("distill", {}).get("checkpoint", "final"),
            "clustering_accuracy": metric(run, "metrics/distill.json", "teacher_test_accuracy"),
            "distilled_accuracy": metric(run, "metrics/distill.json", "test_accuracy"),
            "grounding_cell_accuracy": metric(run, "metrics/evaluate.json", "ground",
                                              "phase_output_cell_accuracy"),
            "permutation_correct": metric(run, "metrics/evaluate.json", "ground",
                                          "permutation_correct"),
            "board_accuracy": metric(run, "metrics/evaluate.json", "ours", "no_proofreader",
                                     "board_accuracy"),
            "board_accuracy_proofread": metric(run, "metrics/evaluate.json", "ours",
                                               "proofreader", "board_accuracy"),
        }
        if row["clustering_accuracy"] is not None and row["board_accuracy"] is not None:
            out.append(row)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", default="metrics/ablation.csv")
    parser.add_argument("--plot", default="plots/ablation.png")
    args = parser.parse_args()
    show = json.loads(subprocess.run(["dvc", "exp", "show", "--json"], check=True,
                                     capture_output=True, text=True).stdout)
    table = pd.DataFrame(rows(show)).drop_duplicates()
    if table.empty:
        print("error: no experiment with metrics/distill.json and metrics/evaluate.json yet",
              file=sys.stderr)
        return 1
    table = table.sort_values("clustering_accuracy")
    with atomic_write(args.csv) as tmp:
        table.to_csv(tmp, index=False)

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(100 * table.clustering_accuracy, 100 * table.board_accuracy, "o-", label="board accuracy")
    ax.plot(100 * table.clustering_accuracy, 100 * table.grounding_cell_accuracy, "s--",
            label="grounding phase, per-cell accuracy")
    ax.axvline(88, color="grey", lw=0.8, ls=":", label="paper's threshold (88 %)")
    ax.set_xlabel("test clustering accuracy of the run's clusterer (%)")
    ax.set_ylabel("accuracy (%)")
    ax.set_title("Effect of clustering accuracy (paper Fig. 5)")
    ax.legend(fontsize=8)
    save_figure(fig, args.plot)
    print(f"ablation: {len(table)} runs -> {args.csv}, {args.plot}")
    print(table.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
