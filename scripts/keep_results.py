"""Keep a finished `dvc repro` as a record under results/<name>/: what ran, and its results.

    /usr/bin/time -v dvc repro 2> repro.time      # the run, its wall time and peak memory
    python scripts/keep_results.py cpu9 --time-log repro.time

Writes results/<name>/ in the format satground/harness/records.py documents: params.yaml,
run.json (commit, machine, wall time, peak RSS, the installed packages as name==version), one
metrics.json bundling the workspace's metrics/ (each stage's metrics, bookkeeping, scores and
per-epoch curves, and evaluate's tables) with models/permutation.json, and summary.md, the
tables the README quotes, written from the same files (not for a profile's further seeds,
<profile>/seeds/seed*: the profile's seeds table, seeds/seeds.md, is their summary). No dvc.lock and no PNG is kept, but the
figures named by --plot (those README.md or docs/ quote; the rest are regenerable from the data).
Those files are replaced together, so a record never mixes two runs; whatever else the folder
holds (records of other runs nested in it, such as results/cpu9/seeds/seed1, and benchmark
outputs) is kept. A stage's seconds (metrics/<stage>/timing.json) are kept only where they are
this run's: a stage restored from the run cache, or left by an applied experiment, has an older
run's file.
"""
import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import yaml

from satground.harness.io import PipelineError, atomic_directory, json_text, load_json
from satground.boards.metrics import markdown_table
from satground.harness.records import BUNDLE, FILES as RECORD, bundle, bundle_text
from satground.harness.tracking import timing_is_current

ROOT = Path(__file__).resolve().parent.parent

PERMUTATION = "models/permutation.json"
SEED = re.compile(r".+/seeds/seed\d+")  # a profile's further seed: seeds/seeds.md holds its tables
RESULT_COLUMNS = {  # results.csv column -> summary heading
    "model": "model", "configuration": "configuration", "epochs": "epochs", "data": "data",
    "proofreader": "proofreader",
    "board_accuracy_pct": "board, exact %", "board_interval_pct": "exact, 95 % interval",
    "blank_board_accuracy_pct": "board, blank cells %", "blank_board_interval_pct": "blank cells, 95 % interval",
    "valid_grid_pct": "valid grid %", "valid_grid_interval_pct": "valid grid, 95 % interval", "cell_accuracy_pct": "per cell %",
    "visual_accuracy_pct": "visual %", "paper_board_pct": "paper board %",
}

# distill.classifier -> what the summary calls the classifier before SATNet
CLASSIFIERS = {"lenet": "distilled LeNet", "clusterer": "classifier: the clusterer's own CNNs"}


def time_figures(log: Path) -> dict:
    """Wall seconds and peak RSS (MB) from the stderr of `/usr/bin/time -v`."""
    text = log.read_text()
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", text)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    if not wall or not rss:
        raise PipelineError(f"{log}: no '/usr/bin/time -v' figures in it")
    seconds = 0.0
    for part in wall.group(1).split(":"):
        seconds = 60 * seconds + float(part)
    return {"wall_seconds": round(seconds, 1), "peak_rss_mb": round(int(rss.group(1)) / 1024, 1)}


def installed() -> list[str]:
    """Every installed distribution as name==version (a `pip freeze` of the run's environment)."""
    from importlib.metadata import distributions

    return sorted({f"{d.metadata['Name']}=={d.version}" for d in distributions() if d.metadata["Name"]},
                  key=str.lower)


def machine() -> str:
    """Cores, CPU model and, from lscpu, its family/model numbers and vector units: a name such
    as "AMD EPYC" covers CPUs of different generations and speeds."""
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        model = re.search(r"Model name:\s*(.+)", lscpu).group(1).strip()
    except (OSError, subprocess.CalledProcessError, AttributeError):
        return f"{os.cpu_count()} cores, {platform.processor() or 'unknown CPU'}"
    field = {k: re.search(rf"^{k}:\s*(.+)$", lscpu, re.M) for k in ("CPU family", "Model", "Flags")}
    if field["CPU family"] and field["Model"]:
        model += f" (family {field['CPU family'].group(1).strip()}, model {field['Model'].group(1).strip()})"
    if field["Flags"]:
        flags = field["Flags"].group(1).split()
        units = [name for name, flag in (("AVX2", "avx2"), ("AVX-512", "avx512f"), ("AMX", "amx_tile"))
                 if flag in flags]
        if units:
            model += ", " + " ".join(units)
    return f"{os.cpu_count()} cores, {model}"


def commit(root: Path) -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def stage_figures(root: Path) -> list[str]:
    """The PNG files the pipeline's stages write (dvc.yaml outs: figures of this run, not the
    ablation's or a benchmark's, which live in plots/ too)."""
    stages = yaml.safe_load((root / "dvc.yaml").read_text())["stages"]
    declared = [next(iter(entry)) if isinstance(entry, dict) else entry
                for stage in stages.values() for entry in stage.get("outs", [])]
    return [path for path in declared if path.endswith(".png") and (root / path).is_file()]


def pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}"


def summary(root: Path, run: dict) -> str:
    """The tables of one run, read from its metrics/ files (the ones kept beside them)."""
    metrics = root / "metrics"
    table = pd.read_csv(metrics / "results.csv")
    table = table[[c for c in RESULT_COLUMNS if c in table]].rename(columns=RESULT_COLUMNS)
    def info(stage):
        return load_json(metrics / stage / "info.json", f"{stage} record")

    cluster, distill, ground, prepare = info("cluster"), info("distill"), info("ground"), info("prepare")
    phase = info("evaluate")["grounding"]
    K, clusters = prepare["board_size"] ** 2, cluster["n_clusters"]
    wall = run.get("wall_seconds")
    lines = [
        f"# Run record `{run['record']}`: profile `{run['profile']}`",
        "",
        f"Commit {run['commit']}, {run['machine']}; "
        + (f"`dvc repro` wall time {int(wall // 60)} min {wall % 60:.0f} s, peak RSS "
           f"{run['peak_rss_mb'] / 1024:.2f} GB." if wall is not None else "wall time not recorded."),
        f"{prepare['n_train']} training / {prepare.get('n_dev', 0)} dev / {prepare['n_test']} test boards, {K} digits "
        + (f"in {clusters} clusters (surjective grounding) " if clusters != K else "")
        + f"({prepare['image_source']} images). Written by `python scripts/keep_results.py`.",
        *([f"SATNet's kernel in `train`: {kernel}."] if (kernel := train_kernel(metrics)) else []),
        "",
        "## Test boards",
        "",
        "Intervals: a bootstrap over the test images and boards (satground/boards/intervals.py), for the "
        "rows of ours.",
        "",
        markdown_table(table),
        "",
        "## Steps before SATNet",
        "",
        "| step | figure |",
        "|---|---|",
        f"| clustering (`{cluster['method']}`), no labels | {pct(cluster['dev_accuracy'])} % dev images |",
        f"| {CLASSIFIERS[distill.get('classifier', 'lenet')]} | {pct(distill['dev_accuracy'])} % dev images |",
        f"| grounding phase, blank cells (chance {100 / K:.1f} %) | {pct(ground['val_blank_cells'])} % "
        f"validation (best epoch {ground['best_epoch']} of {ground['epochs_run']}), "
        f"{pct(phase['phase_output_cell_accuracy'])} % test |",
        f"| cluster -> digit {'permutation' if clusters == K else 'map'} "
        f"| {'right' if phase['permutation_correct'] else 'WRONG'} "
        + (f"(train.reground's, folded; the ground stage's {'right' if phase['ground_permutation_correct'] else 'WRONG'}) "
           if phase.get("reground") else "")
        + f"(Hungarian {'right' if phase['hungarian_correct'] else 'wrong'}, authors' arg max "
        f"{'right' if phase['argmax_correct'] else 'wrong'}) |",
        "",
    ]
    if (metrics / "reread" / "info.json").is_file():  # runs before the re-read stage have none
        reread = info("reread")
        lines += ["## Re-reading after training", "", "| step | figure |", "|---|---|",
                  f"| classifier after end-to-end training | {pct(reread['classifier_dev_accuracy'])} % "
                  "dev images |"]
        if reread["reader"] != "none":
            lines += [f"| SATNet's votes on released training givens | {pct(reread['pseudo_labels_changed'])} % "
                      f"of the classifier's readings overruled ({reread['votes_per_image']:.1f} votes an image) |",
                      f"| new reader (`{reread['reader']}`) | {pct(reread['reader_dev_accuracy'])} % "
                      "dev images |"]
        lines.append("")
    injection = metrics / "error_injection.md"
    if injection.exists():
        lines += ["## Error injection (non-visual test boards)", "", injection.read_text().strip(), ""]
    return "\n".join(lines)


def train_kernel(metrics: Path) -> str | None:
    """The kernel `train` ran SATNet on (tile and products), where its info.json says."""
    path = metrics / "train" / "info.json"
    return load_json(path, "train record").get("satnet_kernel") if path.is_file() else None


def main(argv=None):
    """Returns the folder written."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", help="results/<name>/ is written; its first folder names the profile the run "
                                     "used (cpu9/seeds/seed2: a seed of cpu9)")
    parser.add_argument("--time-log", type=Path, help="stderr of `/usr/bin/time -v dvc repro`")
    parser.add_argument("--root", type=Path, default=ROOT, help="project folder that ran it")
    parser.add_argument("--plot", action="append", default=[], metavar="NAME",
                        help="a stage figure to keep in plots/ (boards.png, permutation.png, ...): only those the "
                             "README or docs quote; repeat for more")
    args = parser.parse_args(argv)
    root = args.root
    if not re.fullmatch(r"[A-Za-z0-9_-]+(/[A-Za-z0-9_-]+)*", args.name):
        raise PipelineError(f"name {args.name!r}: letters, digits, '-' and '_', folders split by '/'")

    run = {"record": args.name, "profile": args.name.split("/")[0], "commit": commit(root), "machine": machine(),
           **(time_figures(args.time_log) if args.time_log else {}), "packages": installed()}
    for name in ("params.yaml", "dvc.yaml", "dvc.lock", "metrics/results.csv"):
        if not (root / name).is_file():
            raise PipelineError(f"{root / name}: missing (has `dvc repro` finished?)")
    tables = summary(root, run)  # read before anything is written: errors name the run's files
    seed = SEED.fullmatch(args.name)  # a profile's further seed keeps no summary.md
    figures = {Path(png).name: root / png for png in stage_figures(root)}
    unknown = [name for name in args.plot if name not in figures]
    if unknown:
        raise PipelineError(f"--plot {', '.join(unknown)}: not a figure this run's stages wrote "
                            f"({', '.join(sorted(figures)) or 'none'})")
    stale = [t.parent.name for t in sorted((root / "metrics").glob("*/timing.json")) if not timing_is_current(t.parent)]
    metrics = bundle(root / "metrics", root / PERMUTATION, seconds_kept=timing_is_current)
    folder = root / "results" / args.name
    folder.parent.mkdir(parents=True, exist_ok=True)
    with atomic_directory(folder) as tmp:
        for kept in folder.iterdir() if folder.is_dir() else ():
            if kept.name not in RECORD:
                (shutil.copytree if kept.is_dir() else shutil.copy2)(kept, tmp / kept.name)
        shutil.copy(root / "params.yaml", tmp / "params.yaml")
        (tmp / BUNDLE).write_text(bundle_text(metrics))
        if stale:  # restored from the run cache, or an applied experiment's: not this run's time
            print(f"stage seconds not kept (another run's timing.json): {', '.join(stale)}")
        if args.plot:
            (tmp / "plots").mkdir()
        for name in args.plot:
            shutil.copy(figures[name], tmp / "plots" / name)
        (tmp / "run.json").write_text(json_text(run))
        if not seed:
            (tmp / "summary.md").write_text(tables)
    print(f"results/{args.name}/ <- this run ({run['commit']})"
          + ("" if seed else f"; tables in results/{args.name}/summary.md"))
    return root / "results" / args.name


if __name__ == "__main__":
    try:
        main()
    except (PipelineError, OSError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        sys.exit(1)
