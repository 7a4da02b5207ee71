"""Board scores (satground.boards.metrics) and the run record written from them (scripts/keep_results.py)."""
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from satground.harness.io import PipelineError
from satground.harness.records import read_record
from satground.boards.metrics import board_metrics

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("keep_results", ROOT / "scripts" / "keep_results.py")
keep_results = importlib.util.module_from_spec(spec)
spec.loader.exec_module(keep_results)


def test_blank_board_accuracy_ignores_the_givens_reading():
    solution = torch.tensor([[1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4]])
    is_input = torch.tensor([[1, 0, 0, 0]] * 3, dtype=torch.bool)
    pred = torch.tensor([[1, 2, 3, 4],     # all right
                         [4, 2, 3, 4],     # a given misread, every blank right
                         [1, 2, 3, 1]])    # a blank wrong
    scores = board_metrics(pred, solution, is_input, torch.ones(3, dtype=torch.bool))
    assert scores["board_accuracy"] == pytest.approx(1 / 3)
    assert scores["blank_board_accuracy"] == pytest.approx(2 / 3)
    assert scores["visual_accuracy"] == pytest.approx(2 / 3)


def project_copy(tmp_path: Path) -> Path:
    """A folder holding a finished run: this checkout's pipeline files and a fixed run record
    (tests/data/run_record: the stage records keep_results reads, and two small figures), so
    the test reads the same inputs before or after any `dvc repro` in this checkout."""
    root = tmp_path / "project"
    shutil.copytree(ROOT / "tests" / "data" / "run_record", root)
    for name in ("params.yaml", "dvc.yaml", "dvc.lock"):
        shutil.copy(ROOT / name, root / name)
    # round numbers must keep their decimal in the tables
    table = pd.read_csv(root / "metrics" / "results.csv")
    fixed = {("Ours", "no"): 89.0, ("Ours", "yes"): 100.0, ("Original SATNet", "no"): 0.0}
    for (model, proofreader), value in fixed.items():
        table.loc[(table.model == model) & (table.proofreader == proofreader)
                  & (table.data != "grounded"), "board_accuracy_pct"] = value
    table.to_csv(root / "metrics" / "results.csv", index=False)
    return root


def test_keep_results_writes_the_run_and_its_tables(tmp_path):
    root = project_copy(tmp_path)
    log = tmp_path / "time.log"
    log.write_text("\tElapsed (wall clock) time (h:mm:ss or m:ss): 1:02:03.5\n"
                   "\tMaximum resident set size (kbytes): 2097152\n")
    out = keep_results.main(["demo/levers/hints", "--time-log", str(log), "--root", str(root), "--plot", "boards.png"])
    assert out == root / "results" / "demo" / "levers" / "hints"
    run = json.loads((out / "run.json").read_text())
    assert run["record"] == "demo/levers/hints" and run["profile"] == "demo"  # a run of profile demo
    assert run["wall_seconds"] == 3723.5 and run["peak_rss_mb"] == 2048.0
    from importlib.metadata import version
    assert f"torch=={version('torch')}" in run["packages"]  # the environment that ran it, pinned
    # a record a clone can carry: no dvc.lock, no metrics/ folder, one metrics.json, the figures asked for
    assert sorted(p.name for p in out.iterdir()) == ["metrics.json", "params.yaml", "plots", "run.json", "summary.md"]
    assert [p.name for p in (out / "plots").iterdir()] == ["boards.png"]
    record = read_record(out)
    stage = root / "metrics" / "evaluate"
    assert record.metrics["evaluate"] == json.loads((stage / "metrics.json").read_text())
    assert record.info["evaluate"] == json.loads((stage / "info.json").read_text())
    assert record.info["prepare"] == json.loads((root / "metrics" / "prepare" / "info.json").read_text())
    assert [row["model"] for row in record.table("results.csv")] == list(pd.read_csv(root / "metrics" / "results.csv").model)
    assert record.table("error_injection.md") == (root / "metrics" / "error_injection.md").read_text()
    with pytest.raises(PipelineError, match="--plot ablation.png: not a figure"):  # a sweep's figure, not this run's
        keep_results.main(["demo", "--root", str(root), "--plot", "ablation.png"])
    summary = (out / "summary.md").read_text()
    assert summary.startswith("# Run record `demo/levers/hints`: profile `demo`")
    assert "wall time 62 min 4 s, peak RSS 2.00 GB" in summary
    # the table comes from the run's results.csv, every number with one decimal
    assert "| Ours                | ungrounded | no            | 89.0 " in summary
    assert "| Ours                | ungrounded | yes           | 100.0 " in summary
    assert "| Original SATNet     | ungrounded | no            | 0.0 " in summary
    assert "permutation | right" in summary
    assert "reground" not in summary


def test_the_record_names_a_map_train_regrounded_beside_the_ground_stages(tmp_path):
    """With train.reground the summary's permutation row is the folded map's, and names the
    ground stage's beside it."""
    root = project_copy(tmp_path)
    info_file = root / "metrics" / "evaluate" / "info.json"
    info = json.loads(info_file.read_text())
    info["grounding"].update(permutation_correct=True, ground_permutation_correct=False, reground=True)
    info_file.write_text(json.dumps(info))
    summary = (keep_results.main(["demo", "--root", str(root)]) / "summary.md").read_text()
    assert "permutation | right (train.reground's, folded; the ground stage's WRONG) (Hungarian" in summary


def test_the_record_names_the_cpu_generation_and_its_vector_units(monkeypatch):
    """lscpu names two EPYC generations of different speeds "AMD EPYC": the record tells them apart."""
    lscpu = ("Model name:        AMD EPYC\nCPU family:        26\nModel:             2\n"
             "Flags:             fpu avx2 fma avx512f avx512bw\n")
    monkeypatch.setattr(keep_results.subprocess, "run",
                        lambda *a, **k: subprocess.CompletedProcess(a, 0, stdout=lscpu))
    assert keep_results.machine().endswith("cores, AMD EPYC (family 26, model 2), AVX2 AVX-512")


def test_keep_results_refuses_an_unfinished_run_and_keeps_the_old_record(tmp_path):
    root = project_copy(tmp_path)
    script = [sys.executable, str(ROOT / "scripts" / "keep_results.py"), "demo", "--root", str(root)]
    assert subprocess.run(script, capture_output=True).returncode == 0
    (root / "metrics" / "evaluate" / "info.json").unlink()
    result = subprocess.run(script, capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [f"Error: {root}/metrics/evaluate/info.json: evaluate "
                                                  f"record not found (run the stage that produces it)"]
    assert "evaluate" in read_record(root / "results" / "demo").info  # old record intact
    assert [p.name for p in (root / "results").iterdir()] == ["demo"]          # no temp folder left


def test_keep_results_replaces_its_own_files_and_keeps_nested_records(tmp_path):
    root = project_copy(tmp_path)
    assert keep_results.main(["demo/seed1", "--root", str(root)]) == root / "results" / "demo" / "seed1"
    stale = root / "results" / "demo" / "dvc.lock"  # the old format's file
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_text("{}")
    (root / "results" / "demo" / "benchmark.jsonl").write_text("kept\n")
    out = keep_results.main(["demo", "--root", str(root)])
    assert not stale.exists()  # the record's own files are replaced whole
    assert (out / "benchmark.jsonl").read_text() == "kept\n"
    assert (out / "seed1" / "summary.md").exists() and (out / "summary.md").exists()
    seed = keep_results.main(["demo/seeds/seed2", "--root", str(root)])  # seeds.md tabulates it
    assert sorted(p.name for p in seed.iterdir()) == ["metrics.json", "params.yaml", "run.json"]
    with pytest.raises(PipelineError, match="name '../x'"):
        keep_results.main(["../x", "--root", str(root)])


def test_a_record_keeps_only_this_runs_stage_seconds(tmp_path):
    """timing.json is not a DVC output: a stage restored from the run cache (or an applied
    experiment) leaves an older run's seconds beside its metrics. The record keeps only the
    stages whose timing names the metrics.json beside it."""
    from satground.harness.tracking import StageReport, timing_is_current
    root = project_copy(tmp_path)
    for stage, loss in (("ran", 0.5), ("restored", 0.25)):
        report = StageReport(root / "metrics" / stage)
        report.finish({"loss": loss})
        assert timing_is_current(root / "metrics" / stage)
    # the run cache restores 'restored's metrics of another run, and not its timing.json
    (root / "metrics" / "restored" / "metrics.json").write_text('{"loss": 0.75}')
    assert not timing_is_current(root / "metrics" / "restored")
    out = keep_results.main(["demo", "--root", str(root)])
    record = read_record(out)
    assert "ran" in record.seconds
    assert "restored" not in record.seconds
    assert record.metrics["restored"] == {"loss": 0.75}


def test_keep_results_reads_only_time_v_logs(tmp_path):
    log = tmp_path / "time.log"
    log.write_text("real 1m2s\n")
    with pytest.raises(PipelineError, match="time.log: no '/usr/bin/time -v' figures"):
        keep_results.time_figures(log)
