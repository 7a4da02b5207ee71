"""The stage budget table (scripts/stage_table.py) is the records' seconds: a column of seeds
averages them, and a column mixing CPUs is refused, since such seconds do not average."""
import importlib.util
import json
from pathlib import Path

import pytest

from satground.harness.io import PipelineError

REPO = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("stage_table", REPO / "scripts" / "stage_table.py")
stage_table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(stage_table)


def record(folder: Path, seconds: dict, machine: str = "2 cores, a CPU", commit: str = "abc1234") -> None:
    folder.mkdir(parents=True)
    (folder / "params.yaml").write_text("seed: 0\n")
    (folder / "run.json").write_text(json.dumps({"commit": commit, "machine": machine}))
    (folder / "metrics.json").write_text(json.dumps(
        {"stages": {stage: {"seconds": s} for stage, s in seconds.items()}}))


def test_a_column_of_seeds_is_their_mean_and_spread(tmp_path):
    base = tmp_path / "results" / "prof"
    record(base, {"cluster": 100.0, "train": 300.0, "evaluate": 0.0})
    record(base / "seeds" / "seed1", {"cluster": 120.0, "train": 340.0, "evaluate": 0.0}, commit="def5678")
    text = stage_table.table([base])
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines()[2:]}
    assert set(rows) == {"cluster", "train", "every stage"}  # no stage that never ran
    assert "| 110 +- 14 (26 %) |" in rows["cluster"] and "| 320 +- 28 (74 %) |" in rows["train"]
    assert "| 430 +- 42 |" in rows["every stage"]
    assert "2 records, 2 cores, a CPU, commit abc1234, def5678" in text.splitlines()[0]


def test_a_stage_the_table_does_not_name_still_counts(tmp_path):
    """A stage added to the pipeline later is a row after the known ones, in the sum too."""
    base = tmp_path / "results" / "prof"
    record(base, {"new_stage": 50.0, "train": 150.0})
    rows = [line.split(" | ")[0].strip("| ") for line in stage_table.table([base]).splitlines()[2:]]
    assert rows == ["train", "new_stage", "every stage"]
    assert "| 200 |" in stage_table.table([base]).splitlines()[-1]


def test_a_column_mixing_cpus_is_refused(tmp_path, capsys):
    base = tmp_path / "results" / "prof"
    record(base, {"train": 300.0})
    record(base / "seeds" / "seed1", {"train": 600.0}, machine="2 cores, another CPU")
    with pytest.raises(PipelineError, match="different CPUs"):
        stage_table.table([base])
    assert stage_table.main([str(base)]) == 1
    assert capsys.readouterr().err.count("\n") == 1  # one line, naming the folder
    single = stage_table.table([base / "seeds" / "seed1"])  # each record alone is a column
    assert "| 600 (100 %) |" in single
