"""Run records under results/: the format scripts/keep_results.py writes and the tables read.

A record is a folder holding one finished `dvc repro`:

    params.yaml, dvc.lock      what ran
    run.json                   commit, machine, wall seconds, peak RSS (scripts/keep_results.py)
    metrics/<stage>/           each stage's metrics.json, timing.json, info.json and curves
    metrics/results.csv, ...   evaluate's tables; plots/, permutation.json and summary.md beside

A profile's seeds are results/<profile>/ (seed 0) and results/<profile>/seeds/seed*/.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .io import PipelineError, load_json
from .params import read_yaml

FILES = {"params.yaml", "dvc.lock", "permutation.json", "metrics", "plots", "run.json", "summary.md"}


@dataclass(frozen=True)
class Record:
    folder: Path
    params: dict                # params.yaml, by section
    run: dict | None            # run.json, where the run was kept with one
    metrics: dict[str, dict]    # stage -> its metrics.json
    seconds: dict[str, float]   # stage -> its wall seconds (timing.json)


def read_record(folder) -> Record:
    """A kept record; one-line errors name the file."""
    folder = Path(folder)
    path = folder / "params.yaml"
    if not path.is_file():
        raise PipelineError(f"{path}: not found (is {folder} a record of scripts/keep_results.py?)")
    run = load_json(folder / "run.json", "run record") if (folder / "run.json").is_file() else None
    stages = folder / "metrics"
    return Record(folder, read_yaml(path), run,
                  {p.parent.name: load_json(p, "stage metrics") for p in sorted(stages.glob("*/metrics.json"))},
                  {p.parent.name: load_json(p, "stage timing")["seconds"]
                   for p in sorted(stages.glob("*/timing.json"))})


def seed_folders(results: Path, profile: str) -> list[Path]:
    """The profile's kept seed records: results/<profile>/ and results/<profile>/seeds/seed*/."""
    base = Path(results) / profile
    found = [base] if (base / "run.json").is_file() else []
    return found + sorted(p for p in (base / "seeds").glob("seed*") if (p / "run.json").is_file())
