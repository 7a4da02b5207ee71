"""The Figure 5 report reads the right numbers out of `dvc exp show --json`, and only the
sweep's own experiments."""
import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("ablation_report", REPO / "scripts" / "ablation_report.py")
report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(report)

DATA = {"board_size": 2, "n_train": 2000}


def run(name, clustering, board, grounding=0.25, checkpoint="final", mislabel=0.0,
        method="umap", data=DATA, epochs=8):
    metrics = {
        "metrics/distill.json": {"data": {"test_accuracy": clustering, "teacher_test_accuracy": 0.97}},
        "metrics/evaluate.json": {"data": {
            "ground": {"phase_output_cell_accuracy": grounding, "permutation_correct": board > 0},
            "ours": {"no_proofreader": {"board_accuracy": board},
                     "proofreader": {"board_accuracy": board}}}},
    }
    params = {"data": data, "cluster": {"method": method, "seed": 0},
              "distill": {"checkpoint": checkpoint, "mislabel": mislabel}, "train": {"epochs": epochs}}
    return {"rev": name[:7], "name": name,
            "data": {"params": {"params.yaml": {"data": params}}, "metrics": metrics}}


def names(rows):
    return [r["experiment"] for r in rows]


def test_mislabel_sweep_keeps_its_finished_experiments_and_the_workspace():
    show = [dict(run("workspace", 0.97, 0.85), experiments=[
        {"revs": [run("mis-10", 0.88, 0.60, mislabel=0.1)]},
        {"revs": [run("mis-20", 0.79, 0.0, mislabel=0.2)]},
        {"revs": [{"rev": "queued", "name": "mis-30", "data": {"params": {}, "metrics": {}}}]},
        # running: its folder still holds the baseline's metrics, which must not be read
        {"executor": {"state": "running"}, "revs": [run("mis-40", 0.70, 0.85, mislabel=0.4)]},
        # other experiments: another profile's data, another training setting, another sweep
        {"revs": [run("smoke", 0.92, 0.0, data={"board_size": 2, "n_train": 200})]},
        {"revs": [run("longer", 0.97, 0.90, epochs=40)]},
        {"revs": [run("ckpt-4", 0.50, 0.0, checkpoint=4, method="infogan")]},
    ])]
    rows = report.rows(show, "mislabel")
    assert names(rows) == ["workspace", "mis-10", "mis-20"]
    assert rows[1]["clustering_accuracy"] == 0.88 and rows[1]["board_accuracy"] == 0.60
    assert rows[1]["mislabel"] == 0.1 and rows[1]["teacher_accuracy"] == 0.97
    assert rows[2]["grounding_cell_accuracy"] == 0.25 and rows[2]["permutation_correct"] is False


def test_checkpoint_sweep_keeps_only_checkpoint_runs_on_the_same_data():
    show = [dict(run("workspace", 0.97, 0.85), experiments=[
        {"revs": [run("ckpt-0", 0.30, 0.0, checkpoint=0, method="infogan")]},
        {"revs": [run("ckpt-4", 0.91, 0.80, checkpoint=4, method="infogan")]},
        {"revs": [run("mis-10", 0.88, 0.60, mislabel=0.1)]},
        {"revs": [run("smoke-ckpt", 0.5, 0.0, checkpoint=2, method="infogan",
                      data={"board_size": 2, "n_train": 200})]},
    ])]
    rows = report.rows(show, "checkpoint")
    assert names(rows) == ["ckpt-0", "ckpt-4"]
    assert [r["checkpoint"] for r in rows] == [0, 4]
