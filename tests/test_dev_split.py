"""The development split: the test boards and the truth files are read by `evaluate` alone.

Every per-epoch curve, early stop and choice of our method is scored on the dev boards; the
baselines (the paper's, not ours) may score the test boards once, at their end, and
error_injection is the non-visual baseline's test-set study. No stage reads the truth of the
training images. The spies in test_stages_training.py, test_clustering.py and
test_lenet_distill.py check what each stage really opens; this checks what dvc.yaml declares,
that no study (studies/*.py) or script (scripts/*.py) but scripts/keep_results.py names the test
split's files or a record's evaluate metrics in its source, and that satground.boards.data
refuses, at run time, a studies/ or scripts/ file of a checkout (scripts/keep_results.py aside)
that asks for the test split's boards or truth.
"""
import ast
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from satground.boards import sudoku
from satground.boards.data import build_visual_boards, load_boards, save_prepared, split_files, split_image_pools
from satground.harness.io import PipelineError

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


# ---------------------------------------------------------------------------------------------
# studies and scripts: the dev split, or a kept record read through satground.harness.records

RECORD_KEEPER = "scripts/keep_results.py"
TEST_SPLIT_NAMES = ("test.pt", "test_truth", "test_grounded", "metrics/evaluate")


def mentions_of_the_test_split(path: Path, shown: str) -> list[str]:
    """`shown`:line of every string constant in the file `path` that names the test split ("test") or its
    files, or builds a path into a record's evaluate metrics (read those with
    satground.harness.records.read_record: record.metrics["evaluate"])."""
    found = sorted((node.lineno, node.value) for node in ast.walk(ast.parse(path.read_text(), str(path)))
                   if isinstance(node, ast.Constant) and isinstance(node.value, str)
                   and (node.value == "test" or any(name in node.value for name in TEST_SPLIT_NAMES)))
    return [f"{shown}:{line}: {value[:60]!r}" for line, value in found]


def test_no_study_or_script_but_keep_results_names_the_test_split():
    sources = sorted([*REPO.glob("studies/*.py"), *REPO.glob("scripts/*.py")])
    assert REPO / RECORD_KEEPER in sources and len(sources) > 10
    found = [hit for path in sources if path != REPO / RECORD_KEEPER
             for hit in mentions_of_the_test_split(path, path.relative_to(REPO).as_posix())]
    assert not found, ("studies and scripts score the dev split (a final figure: a kept record through "
                       "satground.harness.records):\n" + "\n".join(found))


def test_the_scan_finds_what_it_looks_for(tmp_path):
    (tmp_path / "study.py").write_text('"""Scores the dev boards."""\n'
                                'boards = load_boards(root, "test")\n'
                                'truth = root / "test_truth.pt"\n'
                                'final = folder / "metrics/evaluate/metrics.json"\n'
                                'fine = load_boards(root, "dev"), row["test_accuracy"]\n')
    assert [hit.split(": ")[0] for hit in mentions_of_the_test_split(tmp_path / "study.py", "study.py")] == [
        "study.py:2", "study.py:3", "study.py:4"]


# the guard in satground.boards.data, at run time

SPY = """from satground.boards.data import load_boards, load_image_labels, load_truth


def read(root, split):
    boards = load_boards(root, split)
    load_boards(root, split, view="grounded")
    load_truth(root, split, boards)
    return boards


def read_through_a_helper(root, split, indices):
    return load_image_labels(root, split, indices)  # load_truth, a frame further down
"""


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    """A tiny prepared folder (4x4, dev and test splits) written by satground.boards.data."""
    root = tmp_path_factory.mktemp("prepared")
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(1, 5), 9).astype(np.uint8)
    images = rng.integers(0, 256, (len(labels), 28, 28), dtype=np.uint8)
    pools = split_image_pools(images, labels, 2, 0.34, seed=0, dev_fraction=0.34)
    puzzles, solutions = sudoku.generate_puzzles(8, 2, 0)
    files = {}
    for split, rows in (("dev", slice(0, 4)), ("test", slice(4, 8))):
        boards = build_visual_boards(puzzles[rows], solutions[rows], *pools[split], 2, seed=0)
        files.update(split_files(split, boards, pools[split][1]))
    save_prepared(root, files)
    return root


def spy(checkout: Path, relative: str) -> dict:
    """The SPY functions, compiled as the file `relative` of a checkout (a folder with
    satground/ in it): their frames carry that file name."""
    (checkout / "satground").mkdir(parents=True, exist_ok=True)
    path = checkout / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(SPY)
    namespace = {"__name__": path.stem}
    exec(compile(SPY, str(path), "exec"), namespace)
    return namespace


@pytest.mark.parametrize("relative", ["studies/spy_study.py", "scripts/spy_tool.py"])
def test_a_study_or_script_may_not_read_the_test_split(prepared, tmp_path, relative):
    functions = spy(tmp_path, relative)
    with pytest.raises(PipelineError, match=f"{relative} may not read the test split"):
        functions["read"](prepared, "test")
    with pytest.raises(PipelineError, match=f"{relative} may not read the test split"):
        functions["read_through_a_helper"](prepared, "test", torch.tensor([0]))


@pytest.mark.parametrize("relative", ["studies/spy_study.py", "scripts/spy_tool.py", RECORD_KEEPER])
def test_the_dev_split_is_read(prepared, tmp_path, relative):
    functions = spy(tmp_path, relative)
    boards = functions["read"](prepared, "dev")
    assert len(boards) == 4 and boards.n_digits == 4
    digits = functions["read_through_a_helper"](prepared, "dev", torch.tensor([0, 1]))
    assert digits.shape == (2,) and bool(((digits >= 0) & (digits < 4)).all())


def test_keep_results_reads_the_test_split(prepared, tmp_path):
    functions = spy(tmp_path, RECORD_KEEPER)
    boards = functions["read"](prepared, "test")
    assert len(boards) == 4 and torch.equal(boards.cell_image, load_boards(prepared, "test").cell_image)
    assert functions["read_through_a_helper"](prepared, "test", torch.tensor([0])).shape == (1,)
