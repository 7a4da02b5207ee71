"""Run records under results/: the format scripts/keep_results.py writes and the tables read.

A record is a folder holding one finished `dvc repro`, small enough for a clone to carry:

    params.yaml     what ran (the run's params.yaml)
    run.json        commit, machine, wall seconds, peak RSS, packages (scripts/keep_results.py)
    metrics.json    the run's figures, one file (below)
    summary.md      the tables the README quotes, written from the same files (a profile's
                    seeds/seed* folders have none: seeds/seeds.md tabulates them)
    plots/*.png     only the figures README.md or docs/ quote (the rest are regenerable)

metrics.json bundles the workspace's metrics/ folder and models/permutation.json:

    {"stages": {<stage>: {"metrics": <metrics/<stage>/metrics.json>,
                          "info":    <metrics/<stage>/info.json>             (where written),
                          "seconds": <metrics/<stage>/timing.json's seconds> (where this run's),
                          "scores":  <metrics/<stage>/scores.json>           (where written),
                          "curves":  {<curve>: [[step, value], ...]}}},
     "tables": {<file under metrics/>: a .csv as a list of row dicts (empty cells null),
                                       a .md as its text},
     "permutation": <models/permutation.json>  (where written)}

A curve is named by its dvclive .tsv path under metrics/<stage>/plots/metrics/ without the
suffix ("loss", "proofread/loss", "restart_0/dev_accuracy"). No dvc.lock is kept: the commit
in run.json and params.yaml say what ran, and the stages' outputs live in DVC.

A profile's seeds are results/<profile>/ (seed 0) and results/<profile>/seeds/seed*/.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from .io import PipelineError, load_json
from .params import read_yaml

BUNDLE = "metrics.json"
# what keep_results replaces in a record folder (the old format's names among them, so none survives)
FILES = {"params.yaml", BUNDLE, "plots", "run.json", "summary.md", "dvc.lock", "permutation.json", "metrics"}


@dataclass(frozen=True)
class Record:
    folder: Path
    params: dict                            # params.yaml, by section
    run: dict | None                        # run.json, where the run was kept with one
    metrics: dict[str, dict]                # stage -> its metrics.json
    seconds: dict[str, float]               # stage -> its wall seconds (timing.json), where kept
    info: dict[str, dict]                   # stage -> its info.json, where written
    scores: dict[str, dict]                 # stage -> its scores.json, where written
    curves: dict[str, dict[str, dict]]      # stage -> curve -> {step: value}
    tables: dict[str, list[dict] | str]     # "results.csv" -> rows, "error_injection.md" -> text, ...
    permutation: dict | None                # models/permutation.json, where the run wrote one

    def stage_info(self, stage: str) -> dict:
        """A stage's info.json; a one-line error naming the bundle where the record has none."""
        if stage not in self.info:
            raise PipelineError(f"{self.folder / BUNDLE}: no info of stage {stage!r}")
        return self.info[stage]

    def table(self, name: str):
        """One of evaluate's tables ("results.csv": its rows); one-line error where absent."""
        if name not in self.tables:
            raise PipelineError(f"{self.folder / BUNDLE}: no table {name!r}")
        return self.tables[name]


def read_record(folder) -> Record:
    """A kept record; one-line errors name the file."""
    folder = Path(folder)
    path = folder / "params.yaml"
    if not path.is_file():
        raise PipelineError(f"{path}: not found (is {folder} a record of scripts/keep_results.py?)")
    run = load_json(folder / "run.json", "run record") if (folder / "run.json").is_file() else None
    bundle = folder / BUNDLE
    if not bundle.is_file():
        raise PipelineError(f"{bundle}: record metrics not found (is {folder} a record of scripts/keep_results.py?)")
    data = load_json(bundle, "record metrics")
    stages = data.get("stages", {})
    pick = lambda key: {s: v[key] for s, v in stages.items() if v.get(key) is not None}  # noqa: E731
    return Record(folder, read_yaml(path), run, pick("metrics"), pick("seconds"), pick("info"), pick("scores"),
                  {s: {name: {int(step): value for step, value in points}
                       for name, points in v.get("curves", {}).items()} for s, v in stages.items()},
                  data.get("tables", {}), data.get("permutation"))


def seed_folders(results: Path, profile: str) -> list[Path]:
    """The profile's kept seed records: results/<profile>/ and results/<profile>/seeds/seed*/."""
    base = Path(results) / profile
    found = [base] if (base / "run.json").is_file() else []
    return found + sorted(p for p in (base / "seeds").glob("seed*") if (p / "run.json").is_file())


# writing: a workspace's metrics/ folder -> the bundle

def _number(text: str):
    value = float(text)
    return int(value) if text.strip().lstrip("-").isdigit() else value


def _curve(path: Path) -> list[list]:
    """A dvclive .tsv (a `step` column and the value last) as [[step, value], ...]."""
    lines = path.read_text().splitlines()
    head = lines[0].split("\t")
    step = head.index("step")
    return [[int(row[step]), _number(row[-1])] for row in (line.split("\t") for line in lines[1:] if line)]


def _csv_rows(path: Path) -> list[dict]:
    import pandas as pd

    frame = pd.read_csv(path)
    return [{key: (None if isinstance(value, float) and math.isnan(value) else value) for key, value in row.items()}
            for row in frame.to_dict(orient="records")]


def bundle(metrics: Path, permutation: Path | None = None, seconds_kept=lambda stage_dir: True) -> dict:
    """The metrics.json of a record from a workspace's metrics/ folder (and its
    models/permutation.json); `seconds_kept(stage folder)` says whether its timing.json is this run's."""
    metrics = Path(metrics)
    stages = {}
    for folder in sorted(p for p in metrics.iterdir() if p.is_dir()):
        entry = {}
        for key in ("metrics", "info", "scores"):
            if (folder / f"{key}.json").is_file():
                entry[key] = load_json(folder / f"{key}.json", f"{folder.name} {key}")
        if (folder / "timing.json").is_file() and seconds_kept(folder):
            entry["seconds"] = load_json(folder / "timing.json", f"{folder.name} timing")["seconds"]
        plots = folder / "plots" / "metrics"
        entry["curves"] = {p.relative_to(plots).with_suffix("").as_posix(): _curve(p)
                           for p in sorted(plots.rglob("*.tsv"))}
        stages[folder.name] = entry
    tables = {}
    for path in sorted(p for p in metrics.iterdir() if p.is_file()):
        if path.suffix == ".csv":
            tables[path.name] = _csv_rows(path)
        elif path.suffix == ".md":
            tables[path.name] = path.read_text()
    out = {"stages": stages, "tables": tables}
    if permutation is not None and Path(permutation).is_file():
        out["permutation"] = load_json(permutation, "permutation")
    return out


def bundle_text(data: dict) -> str:
    return json.dumps(data, indent=1) + "\n"
