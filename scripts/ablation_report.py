"""The clustering-accuracy ablation as the paper's Figure 5, from the sweep's DVC experiments.

    dvc exp run --queue -S 'distill.mislabel=0,0.05,0.1,...' && dvc queue start -j 1
    python scripts/ablation_report.py --sweep mislabel      # after the queue has finished

Two sweeps make points: `checkpoint` (InfoGAN checkpoints, distill.checkpoint an epoch) and
`mislabel` (the final clusterer with a share of its training assignments moved to wrong
clusters, distill.mislabel). The report keeps the finished experiments of the chosen sweep that
ran on the workspace's data (same `data` params: a smoke or 9x9 run never mixes in), and reads
the distilled classifier's test clustering accuracy, the accuracy the grounding phase starts
from (metrics/distill.json: truth used for reporting only), the grounding phase's output-cell
accuracy and the final board accuracy (metrics/evaluate.json). Writes metrics/ablation.csv and
plots/ablation.png.
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


# the params each sweep varies (prefixes); its experiments agree with the workspace elsewhere
SWEEPS = {"checkpoint": ("distill.checkpoint", "cluster."), "mislabel": ("distill.mislabel",)}


def flat_params(run: dict) -> dict:
    """params.yaml of a run as {"section.key": value}."""
    out = {}

    def walk(node, prefix):
        for key, value in node.items():
            if isinstance(value, dict):
                walk(value, f"{prefix}{key}.")
            else:
                out[prefix + key] = value

    walk(run.get("data", {}).get("params", {}).get("params.yaml", {}).get("data", {}), "")
    return out


def in_sweep(params: dict, workspace: dict, sweep: str) -> bool:
    """Whether a run differs from the workspace only in the sweep's params (a run that also
    changed the data, the profile or a training setting is another experiment)."""
    if sweep == "checkpoint" and params.get("distill.checkpoint", "final") == "final":
        return False
    varied = SWEEPS[sweep]
    keys = (set(params) | set(workspace))
    return all(params.get(k) == workspace.get(k) for k in keys if not k.startswith(varied))


def rows(show: list, sweep: str) -> list:
    """The finished experiments of `sweep` (and the workspace, the sweep's reference point when
    it is one), one dict each."""
    workspace = flat_params(show[0]) if show else {}
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
        params = flat_params(run)
        if not in_sweep(params, workspace, sweep):
            continue
        row = {
            "experiment": run.get("name") or run.get("rev"),
            "checkpoint": params.get("distill.checkpoint", "final"),
            "mislabel": params.get("distill.mislabel", 0.0),
            "clustering_accuracy": metric(run, "metrics/distill.json", "test_accuracy"),
            "teacher_accuracy": metric(run, "metrics/distill.json", "teacher_test_accuracy"),
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
    parser.add_argument("--sweep", choices=list(SWEEPS), default="mislabel")
    parser.add_argument("--csv", default="metrics/ablation.csv")
    parser.add_argument("--plot", default="plots/ablation.png")
    args = parser.parse_args()
    show = json.loads(subprocess.run(["dvc", "exp", "show", "--json"], check=True,
                                     capture_output=True, text=True).stdout)
    table = pd.DataFrame(rows(show, args.sweep)).drop_duplicates()
    if table.empty:
        print(f"error: no finished experiment of the {args.sweep} sweep on the workspace's data "
              f"(with metrics/distill.json and metrics/evaluate.json) yet", file=sys.stderr)
        return 1
    table = table.sort_values("clustering_accuracy")
    with atomic_write(args.csv) as tmp:
        table.to_csv(tmp, index=False)

    fig, ax = plt.subplots(figsize=(6, 4))
    # points only: a line would claim values between runs, across gaps where no run landed
    x = 100 * table.clustering_accuracy
    ax.plot(x, 100 * table.board_accuracy, "o", label="board accuracy")
    ax.plot(x, 100 * table.grounding_cell_accuracy, "s", mfc="none",
            label="grounding phase, per-cell accuracy")
    ax.axvline(88, color="grey", lw=0.8, ls=":", label="paper's threshold (88 %)")
    ax.set_xlabel("test clustering accuracy of the distilled classifier (%)")
    ax.set_ylabel("accuracy (%)")
    what = {"checkpoint": "InfoGAN checkpoints", "mislabel": "share of images mislabelled"}
    ax.set_title(f"Effect of clustering accuracy (paper Fig. 5; {what[args.sweep]})")
    ax.legend(fontsize=8)
    save_figure(fig, args.plot)
    print(f"ablation: {len(table)} runs -> {args.csv}, {args.plot}")
    print(table.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
