"""The development split: the test boards and the truth files are read by `evaluate` alone.

Every per-epoch curve, early stop and choice of our method is scored on the dev boards; the
baselines (the paper's, not ours) may score the test boards once, at their end, and
error_injection is the non-visual baseline's test-set study. No stage reads the truth of the
training images. The spies in test_stages_training.py, test_clustering.py and
test_lenet_distill.py check what each stage really opens; this checks what dvc.yaml declares.
"""
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
STAGES = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
FINAL_TEST_SCORES = {"evaluate", "baseline_grounded", "baseline_ungrounded", "baseline_nonvisual", "error_injection"}


def data_deps(name):
    return {Path(dep).name for dep in STAGES[name]["deps"] if dep.startswith("data/prepared/")}


def test_only_evaluate_and_the_baselines_depend_on_the_test_boards():
    readers = {name for name in STAGES if any(dep.startswith("test") for dep in data_deps(name))}
    assert readers == FINAL_TEST_SCORES


def test_only_evaluate_depends_on_the_test_truth_and_none_on_the_training_truth():
    assert {name for name in STAGES if "test_truth.pt" in data_deps(name)} == {"evaluate"}
    assert not {name for name in STAGES if "train_truth.pt" in data_deps(name)}


def test_our_method_scores_its_curves_on_the_dev_boards():
    for name in ("cluster", "distill", "train", "reread", "proofread"):
        assert "dev.pt" in data_deps(name), name
        assert not any(dep.startswith("test") for dep in data_deps(name)), name
    plots = yaml.safe_load((REPO / "dvc.yaml").read_text())["plots"]
    specs = [spec for plot in plots if isinstance(plot, dict) for spec in plot.values()]
    curves = [path for spec in specs if isinstance(spec, dict) for path in spec.get("y", {})]
    assert curves and not [path for path in curves if "/test_" in path]
