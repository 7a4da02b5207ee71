"""The Figure 5 report reads the right numbers out of `dvc exp show --json`."""
import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("ablation_report", REPO / "scripts" / "ablation_report.py")
report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(report)


def run(name, checkpoint, clustering, board, grounding=0.25):
    metrics = {
        "metrics/distill.json": {"data": {"teacher_test_accuracy": clustering, "test_accuracy": 0.9}},
        "metrics/evaluate.json": {"data": {
            "ground": {"phase_output_cell_accuracy": grounding, "permutation_correct": board > 0},
            "ours": {"no_proofreader": {"board_accuracy": board},
                     "proofreader": {"board_accuracy": board}}}},
    }
    return {"rev": name[:7], "name": name, "data": {
        "params": {"params.yaml": {"data": {"distill": {"checkpoint": checkpoint}}}},
        "metrics": metrics}}


def test_rows_collect_every_finished_experiment():
    show = [dict(run("workspace", "final", 0.95, 0.85), experiments=[
        {"revs": [run("exp-a", 0, 0.30, 0.0)]},
        {"revs": [run("exp-b", 4, 0.91, 0.80)]},
        {"revs": [{"rev": "queued", "name": "exp-c", "data": {"params": {}, "metrics": {}}}]},
        # running: its folder still holds the baseline's metrics, which must not be read
        {"executor": {"state": "running"}, "revs": [run("exp-d", 8, 0.70, 0.85)]},
        {"executor": {"state": "success"}, "revs": [run("exp-e", 12, 0.75, 0.0)]},
    ])]
    rows = report.rows(show)
    assert [(r["experiment"], r["checkpoint"]) for r in rows] == [
        ("workspace", "final"), ("exp-a", 0), ("exp-b", 4), ("exp-e", 12)]  # unfinished: skipped
    assert rows[2]["clustering_accuracy"] == 0.91 and rows[2]["board_accuracy"] == 0.80
    assert rows[1]["grounding_cell_accuracy"] == 0.25 and rows[1]["permutation_correct"] is False
