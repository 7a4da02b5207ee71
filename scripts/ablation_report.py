"""Sweeps of DVC experiments: the clustering-accuracy ablation as the paper's Figure 5, and the
spread over seeds (mean +- std).

    dvc exp run --queue -S 'distill.mislabel=0,0.05,0.1,...' && dvc queue start -j 1
    python scripts/ablation_report.py --sweep mislabel      # after the queue has finished

    for s in 1 2 3 4; do dvc exp run --queue -n seed$s -S seed=$s; done; dvc queue start -j 1
    python scripts/ablation_report.py --sweep seeds --csv metrics/seeds.csv --table metrics/seeds.md
    python scripts/ablation_report.py --sweep seeds --records results/cpu9 results/cpu9/seeds/seed*/

Two sweeps make points: `checkpoint` (InfoGAN checkpoints, distill.checkpoint an epoch) and
`mislabel` (the final clusterer with a share of its training assignments moved to wrong
clusters, distill.mislabel). The report keeps the finished experiments of the chosen sweep that
differ from the workspace in the sweep's params only (a smoke run, another profile or another
experiment never mixes in), read with dvc.api.exp_show, and takes their headline metrics: the
distilled classifier's dev clustering accuracy (classifier_dev_accuracy, the accuracy the
grounding phase starts from; truth used for reporting only), the clusterer's
(cluster_dev_accuracy), the grounding phase's blank-cell accuracy (ground_val_blank_cells),
whether the permutation is right (perm_right) and
the board accuracy (boards, boards_pr). Writes metrics/ablation.csv and plots/ablation.png.
The workspace is a point only while `dvc status` finds it current. The `boundary_shift` sweep
may also vary `reread.rounds`: the final model is then plotted once per rounds value. --merge
adds the rows of an earlier report's CSV (another clone's sweep) to this one's.
The `seeds` sweep (every seed changed together; the workspace is one of them) writes each run's
board metrics and a markdown table of their mean +- std instead of the plot.

With --records, the runs are kept records (scripts/keep_results.py: params.yaml and metrics.json)
instead of this repository's experiments, so runs made in other clones, sessions or machines
combine; the first record is the reference the others may differ from in the sweep's params only.
"""
import argparse
import sys
from pathlib import Path

import dvc.api
import matplotlib
import pandas as pd

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from satground.boards.metrics import percent_places  # noqa: E402
from satground.harness.io import PipelineError, atomic_write, save_figure  # noqa: E402
from satground.harness.params import defaults_of_a_record, flat_keys, known_keys, overlay  # noqa: E402
from satground.harness.records import read_record  # noqa: E402


def column(row: dict, name: str):
    """A metric or param of an exp_show row: under its name, or 'file:name' where two files
    share the name."""
    if name in row:
        return row[name]
    return next((value for key, value in row.items() if key.endswith(f":{name}")), None)


# the params each sweep varies (prefixes); its experiments agree with the workspace elsewhere
SWEEPS = {"checkpoint": ("distill.checkpoint", "cluster.", "rule_aware"), "mislabel": ("distill.mislabel",),
          "boundary_shift": ("distill.boundary_shift", "reread.rounds"),
          "seeds": ("seed", "data.seed", "cluster.seed", "distill.seed", "reread.seed")}

# the seeds table: evaluate's board metrics (metrics/evaluate/metrics.json) -> what they measure
BOARD_METRICS = {"boards": "exact, as trained", "blank_boards": "every blank right, as trained",
                 "boards_views": "exact, as trained, test-time views",
                 "blank_boards_views": "every blank right, as trained, test-time views",
                 "boards_reread": "exact, re-read", "blank_boards_reread": "every blank right, re-read",
                 "boards_pr": "exact, final reader + proofreader",
                 "blank_boards_pr": "every blank right, final reader + proofreader",
                 "boards_checked": "exact, final reader + SATNet's check",
                 "blank_boards_checked": "every blank right, final reader + SATNet's check",
                 "boards_pr_checked": "exact, + proofreader + SATNet's check",
                 "blank_boards_pr_checked": "every blank right, + proofreader + SATNet's check",
                 "visual_checked": "givens read right, SATNet's check"}


def in_sweep(params: dict, workspace: dict, sweep: str) -> bool:
    """Whether a run differs from the workspace only in the sweep's params (a run that also
    changed the data, the profile or a training setting is another experiment)."""
    if sweep == "checkpoint" and params.get("distill.checkpoint", "final") == "final":
        return False
    varied = SWEEPS[sweep]
    keys = (set(params) | set(workspace))
    return all(params.get(k) == workspace.get(k) for k in keys if not k.startswith(varied))


def rows(show: list, sweep: str, keys: list, workspace_point: bool = True) -> list:
    """The finished experiments of `sweep` in dvc.api.exp_show's rows (and the workspace, the
    sweep's reference point when it is one, unless `workspace_point` is false), one dict each;
    `keys` are the params' names."""
    if not show:
        return []
    workspace = {key: column(show[0], key) for key in keys}
    out = []
    for run in show:
        if run is not show[0] and not str(run.get("typ", "")).startswith("branch"):
            continue  # a commit's row: its results are the workspace's or another run's
        if run is show[0] and not workspace_point:
            continue
        # a queued or running experiment's folder still holds its baseline's metrics files:
        # reading them would pair one checkpoint with another run's results
        if run.get("State") not in (None, "Success"):
            continue
        params = {key: column(run, key) for key in keys}
        if not in_sweep(params, workspace, sweep):
            continue
        row = {
            "experiment": run.get("Experiment") or run.get("rev"),
            "checkpoint": params.get("distill.checkpoint", "final"),
            "mislabel": params.get("distill.mislabel", 0.0),
            "boundary_shift": params.get("distill.boundary_shift", 0.0),
            "rounds": params.get("reread.rounds") or 1,
            "clustering_accuracy": column(run, "classifier_dev_accuracy"),
            "teacher_accuracy": column(run, "cluster_dev_accuracy"),
            "grounding_cell_accuracy": column(run, "ground_val_blank_cells"),
            "permutation_correct": column(run, "perm_right"),
            "board_accuracy": column(run, "boards"),
            "board_accuracy_proofread": column(run, "boards_pr"),
            "seed": params.get("seed"),
            **{name: column(run, name) for name in BOARD_METRICS},
            "wall_seconds": column(run, "wall_seconds"), "machine": column(run, "machine"),
            **{key: value for key, value in run.items() if key.startswith("seconds:")},
        }
        if row["clustering_accuracy"] is not None and row["board_accuracy"] is not None:
            out.append(row)
    return out


def record_row(folder: Path) -> dict:
    """A kept record as one exp_show-shaped row: its params by 'section.key' and every stage's
    metrics.json merged (metric names are unique across stages). A key added to the schema after the
    record was kept takes its first default: an addition defaults to the behaviour before it, so a
    record without `reread.round_satnet` ran what `fresh` names, and one without `reread.width` ran
    32 (params.FIRST_DEFAULTS), whatever the default is now."""
    record = read_record(folder)
    params = overlay(defaults_of_a_record(), record.params)
    row = {"Experiment": folder.name, "typ": "branch_commit", "State": "Success"}
    for key in flat_keys(params):
        value = params
        for part in key.split("."):
            value = value[part]
        row[key] = value
    for metrics in record.metrics.values():
        row.update(metrics)
    if record.run is not None:  # the run's wall time and machine, where it was timed
        row.update({key: record.run.get(key) for key in ("wall_seconds", "machine")})
    row.update({f"seconds:{stage}": seconds for stage, seconds in record.seconds.items()})
    return row


def workspace_is_current() -> bool:
    """Whether the workspace's metrics are its params' (`dvc status` finds no stage changed): a
    workspace whose params.yaml was edited after its last run would pair them with older results."""
    from dvc.repo import Repo
    with Repo() as repo:
        return not repo.status()


def merged(table: pd.DataFrame, paths: list) -> pd.DataFrame:
    """`table` with the rows of earlier reports of the same sweep (their CSVs), e.g. another
    clone's; a CSV written before the `rounds` column was re-read once (reread.rounds 1)."""
    earlier = []
    for path in paths:
        try:
            earlier.append(pd.read_csv(path))
        except (OSError, pd.errors.ParserError) as exc:
            raise PipelineError(f"--merge {path}: not a readable report CSV ({exc})") from exc
    if not earlier:
        return table
    out = pd.concat([table, *earlier], ignore_index=True)
    out["rounds"] = out.get("rounds", pd.Series(index=out.index, dtype=float)).fillna(1).astype(int)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", choices=list(SWEEPS), default="mislabel")
    parser.add_argument("--csv", default="metrics/ablation.csv")
    parser.add_argument("--plot", default="plots/ablation.png")
    parser.add_argument("--table", default="metrics/seeds.md", help="seeds: the mean +- std table")
    parser.add_argument("--records", nargs="+", type=Path, metavar="FOLDER",
                        help="kept records (results/<name>/) instead of this repository's experiments")
    parser.add_argument("--merge", nargs="+", default=[], metavar="CSV",
                        help="earlier reports of the same sweep (their --csv) whose rows join these")
    args = parser.parse_args()
    keys = known_keys()
    try:
        show = [record_row(folder) for folder in args.records] if args.records else dvc.api.exp_show()
        current = bool(args.records) or workspace_is_current()
        if not current:
            print("note: the workspace is not a point: dvc status finds stages changed since its last run")
        table = merged(pd.DataFrame(rows(show, args.sweep, keys, current)), args.merge).drop_duplicates()
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if table.empty:
        print(f"error: no finished experiment of the {args.sweep} sweep beside the workspace "
              f"(with the classifier_dev_accuracy and boards metrics) yet", file=sys.stderr)
        return 1
    if args.sweep == "seeds":
        return seeds_report(table.sort_values("seed"), args.csv, args.table)
    table = table.sort_values("clustering_accuracy")
    with atomic_write(args.csv) as tmp:
        table.to_csv(tmp, index=False)

    fig, ax = plt.subplots(figsize=(6, 4))
    # points only: a line would claim values between runs, across gaps where no run landed
    rounds = table["rounds"]  # every row has one: rows() reads it, merged() fills older CSVs'
    # the model as trained and the grounding phase come before the re-read: one point per run of
    # the fewest re-read rounds (the same training again at more rounds)
    once = rounds == rounds.min()
    x = 100 * table.clustering_accuracy
    ax.plot(x[once], 100 * table.board_accuracy[once], "o", label="exact boards, as trained")
    for count, marker in zip(sorted(rounds.unique()), "^v*Dp"):
        final = table.boards_checked.notna() & (rounds == count)  # re-read reader + SATNet's check
        if final.any():
            ax.plot(x[final], 100 * table.boards_checked[final].astype(float), marker,
                    label="exact boards, final (re-read + check)" + (f", reread.rounds {count}" if count > 1 else ""))
    ax.plot(x[once], 100 * table.grounding_cell_accuracy[once], "s", mfc="none",
            label="grounding phase, per-cell accuracy")
    ax.axvline(88, color="grey", lw=0.8, ls=":", label="paper's threshold (88 %)")
    ax.set_xlabel("clustering accuracy of the classifier in front of SATNet, dev images (%)")
    ax.set_ylabel("accuracy (%)")
    what = {"checkpoint": "InfoGAN checkpoints", "mislabel": "share of images mislabelled",
            "boundary_shift": "cluster boundaries shifted"}
    ax.set_title(f"Effect of clustering accuracy (paper Fig. 5; {what[args.sweep]})")
    ax.legend(fontsize=8)
    save_figure(fig, args.plot)
    print(f"ablation: {len(table)} runs -> {args.csv}, {args.plot}")
    print(table.to_string(index=False))
    return 0


def table_row(what: str, values: pd.Series, summary: str | None = None) -> str:
    """One row of the seeds table: `what`, the mean +- sample std (or `summary`), each run's value
    (n/a where a run has none; the mean is then over the others, and says how many)."""
    known = values.dropna()
    places = percent_places(known)
    if summary is None:
        summary = (f"{known.mean():.{places}f} +- {known.std():.{places}f}" if len(known) > 1
                   else f"{known.mean():.{places}f} +- n/a")
        if len(known) < len(values):
            summary += f" ({len(known)} of {len(values)} runs)"
    return f"| {what} | {summary} | {', '.join('n/a' if pd.isna(v) else f'{v:.{places}f}' for v in values)} |"


def seeds_table(table: pd.DataFrame) -> str:
    """Markdown: each board metric's mean +- sample std in % over the runs, and the runs' values."""
    lines = [f"| test boards, % | mean +- std over {len(table)} seeds | per seed ({', '.join(str(int(seed)) for seed in table.seed)}) |",
             "|---|---|---|"]
    for name, meaning in BOARD_METRICS.items():
        values = 100 * table[name].dropna().astype(float)
        if len(values) == len(table):
            lines.append(table_row(f"{meaning} (`{name}`)", values))
    lines += time_rows(table)
    return "\n".join(lines) + "\n"


def time_rows(table: pd.DataFrame) -> list[str]:
    """The whole run's wall time in minutes (records' run.json), where every run was timed, and
    each stage's seconds (a record's timing.json, in its metrics.json); a mean over different machines says
    nothing, so then only the runs' times stand, without the stages."""
    if "wall_seconds" not in table or table.wall_seconds.isna().any():
        return []
    minutes = table.wall_seconds.astype(float) / 60
    machines = table.machine.fillna("machine not recorded").unique()
    if len(machines) > 1:
        return [table_row(f"whole run, minutes (`run.json`: {len(machines)} different machines)", minutes, "n/a")]
    # a stage's seconds are missing where the run restored it from the run cache (scripts/keep_results.py)
    stages = [key for key in table.columns if key.startswith("seconds:") and table[key].notna().sum() > 1]
    return [table_row(f"whole run, minutes (`run.json`: {machines[0]})", minutes)] + [
        table_row(f"stage `{key.split(':', 1)[1]}`, seconds", table[key].astype(float))  # longest first
        for key in sorted(stages, key=lambda key: -table[key].astype(float).mean())]


def seeds_report(table: pd.DataFrame, csv_path, table_path) -> int:
    columns = ["experiment", "seed", "clustering_accuracy", "permutation_correct", *BOARD_METRICS]
    text = seeds_table(table)
    with atomic_write(csv_path) as tmp:
        table[columns].to_csv(tmp, index=False)
    with atomic_write(table_path) as tmp:
        tmp.write_text(text)
    print(f"seeds: {len(table)} runs -> {csv_path}, {table_path}")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
