"""The ground / train / proofread / evaluate / baseline / error-injection stages on tiny 4x4 data.

The key check: the stages of our (ungrounded) method run to the end on a prepared folder that
holds no *_grounded.pt or *_truth.pt file at all, and a spy on every file they open confirms
they never try; evaluate is the stage that needs them.
"""
import builtins
import importlib
import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from satground.boards.data import build_visual_boards, given_image_indices, load_boards, save_prepared, split_files
from satground.harness.io import PipelineError
from satground.readers.classifier import load_classifier, save_classifier
from satground.readers.digitcnn import DigitReader
from satground.readers.lenet import LeNet, distill_epoch
from satground.readers.lenet import predict as classify
from satground.boards.metrics import best_matching
from satground.harness.params import compose
from satground.solver.models import folded_permutation
from script_import import script
from stage_commands import declared, four_by_four

REPO = Path(__file__).resolve().parents[1]
K = 4
PLANTED = torch.tensor([2, 0, 3, 1])  # digit d (0-based) is cluster PLANTED[d]

torch.set_num_threads(1)


def stage(name):
    """Import stages/<name>.py under a private module name (stage names are generic)."""
    spec = importlib.util.spec_from_file_location(f"stage_{name}", REPO / "stages" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read(path):
    return json.loads(Path(path).read_text())


def square_images(digits, rng):
    """Easy 'digits': digit d is a bright square in quadrant d-1 over noise."""
    images = rng.integers(0, 40, size=(len(digits), 28, 28)).astype(np.uint8)
    for i, d in enumerate(digits):
        r, c = 2 + 14 * ((d - 1) // 2), 2 + 14 * ((d - 1) % 2)
        images[i, r:r + 10, c:c + 10] = rng.integers(180, 256, size=(10, 10))
    return images


def make_prepared(root: Path, n_train=48, n_test=16, n_dev=16):
    """Prepared 4x4 boards in the data contract (unique-solution puzzles) + a distilled LeNet
    whose clusters are the digits relabelled by PLANTED."""
    from satground.boards.sudoku import generate_puzzles

    rng = np.random.default_rng(0)
    puzzles, solutions = generate_puzzles(n_train + n_dev + n_test, 2, seed=0)
    files = {}
    for split, rows in (("train", slice(0, n_train)), ("dev", slice(n_train, n_train + n_dev)),
                        ("test", slice(n_train + n_dev, None))):
        digits = np.repeat(np.arange(1, K + 1), 12).astype(np.uint8)
        rng.shuffle(digits)
        images = square_images(digits, rng)
        boards = build_visual_boards(puzzles[rows], solutions[rows], images, digits, 2, seed=1)
        files.update(split_files(split, boards, digits))
        if split == "train":
            train_images, train_digits = torch.from_numpy(images), torch.from_numpy(digits).long()
    save_prepared(root / "data" / "prepared", files)
    torch.manual_seed(0)
    net = LeNet(K)
    optimizer = torch.optim.Adam(net.parameters(), lr=2e-3)
    for _ in range(4):
        distill_epoch(net, optimizer, train_images, PLANTED[train_digits - 1], 16,
                    torch.Generator().manual_seed(0))
    save_classifier(net, root / "models" / "classifier.pt")


PARAMS = four_by_four({
    "seed": 0,
    "rule_aware": True,  # ground.align_inputs below reads the Sudoku rules
    "satnet": {"m": 40, "aux": 8, "max_iter": 10, "lr": 2e-3},
    "ground": {"epochs": 3, "patience": 1, "batch_size": 16, "loss": "paper", "approxmax": "l2",
               "temperature": 0.1, "output_softmax": True, "val_fraction": 0.25,
               "assignment": "hungarian", "align_inputs": True},
    "train": {"epochs": 1, "batch_size": 16, "classifier_lr": 1e-5,
              "init_from_ground": True},
    "reread": {"reader": "cnn", "release": 0.3, "passes": 1, "epochs": 2, "nets": 2, "batch_size": 16},
    "proofread": {"epochs": 1, "batch_size": 16, "lr": 2e-3},
    "evaluate": {"batch_size": 16},
    "baseline_visual": {"epochs": 1, "batch_size": 16, "classifier_lr": 1e-5,
                        "proofread_epochs": 1},
    "baseline_nonvisual": {"epochs": 1, "batch_size": 16, "proofread_epochs": 1},
    "error_injection": {"max_errors": 2, "batch_size": 16},
})


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A work folder with the full prepared data, run from inside it (dvclive looks for a
    DVC/Git repo from the working directory: there is none here)."""
    root = tmp_path_factory.mktemp("pipeline")
    make_prepared(root)
    (root / "params.yaml").write_text(yaml.safe_dump(PARAMS))
    old = os.getcwd()
    os.chdir(root)
    yield root
    os.chdir(old)


@pytest.fixture(scope="module")
def ungrounded_run(workdir):
    """Run ground, train, reread and proofread on a copy of the prepared folder holding only the
    ungrounded training and dev boards (no test boards, no grounded or truth file), recording
    every file opened."""
    blind = workdir / "blind"
    blind.mkdir()
    for name in ("train.pt", "dev.pt"):
        shutil.copy(workdir / "data" / "prepared" / name, blind / name)
    opened = []
    real_open, real_load = builtins.open, torch.load

    def spy_open(file, *args, **kwargs):
        opened.append(str(file))
        return real_open(file, *args, **kwargs)

    def spy_load(f, *args, **kwargs):
        opened.append(str(f))
        return real_load(f, *args, **kwargs)

    mp = pytest.MonkeyPatch()
    mp.setattr(builtins, "open", spy_open)
    mp.setattr(torch, "load", spy_load)
    try:
        stage("ground").main(declared("ground", prepared=blind))
        stage("train").main(declared("train", prepared=blind))
        stage("reread").main(declared("reread", prepared=blind))
        stage("proofread").main(declared("proofread", prepared=blind))
    finally:
        mp.undo()
    return {"blind": blind, "opened": opened}


def test_ungrounded_path_never_reads_input_labels_or_test_boards(workdir, ungrounded_run):
    """Our method's stages read the ungrounded training boards and score the dev boards: no
    grounded or truth file, and no test file (the test boards are evaluate's alone)."""
    opened = ungrounded_run["opened"]
    assert any(path.endswith("train.pt") for path in opened)  # the spy saw the data
    assert any(path.endswith("dev.pt") for path in opened)
    assert not [p for p in opened if "_grounded" in p or "_truth" in p or Path(p).name.startswith("test")]
    # the ungrounded files themselves carry no input-cell label
    for split in ("train", "dev"):
        boards = load_boards(ungrounded_run["blind"], split)
        assert (boards.labels[boards.is_input] == 0).all()
    for path in ("models/ground.pt", "models/permutation.json", "plots/permutation.png",
                 "metrics/ground/metrics.json", "models/solver.pt", "metrics/train/metrics.json",
                 "models/solver_reread.pt", "metrics/reread/info.json",
                 "models/solver_proofread.pt", "metrics/proofread/metrics.json"):
        assert (workdir / path).is_file(), path
    # evaluation is the stage that needs the truth: without it, a one-line error naming the file
    with pytest.raises(PipelineError, match="test.pt"):
        stage("evaluate").main(declared("evaluate", prepared=ungrounded_run["blind"]) + ["--skip-baselines"])


def test_ground_outputs_a_permutation_with_its_soft_matrix(workdir, ungrounded_run):
    saved = json.loads((workdir / "models/permutation.json").read_text())
    perm = saved["permutation"]
    assert sorted(perm) == list(range(K))
    assert np.array(saved["soft_permutation"]).shape == (K, K)
    assert saved["assignment"] == "hungarian" and sorted(saved["hungarian"]) == list(range(K))
    assert saved["cluster_to_digit"] == {str(c): d + 1 for c, d in enumerate(perm)}
    info = read(workdir / "metrics/ground/info.json")
    assert 1 <= info["best_epoch"] <= info["epochs_run"] <= PARAMS["ground"]["epochs"]
    # the reading after every epoch run; the kept epoch's is the saved one
    assert len(info["epoch_permutations"]) == info["epochs_run"]
    assert info["epoch_permutations"][info["best_epoch"] - 1] == saved["from_loss"]
    assert 1 <= info["permutation_settled_epoch"] <= info["best_epoch"]
    assert read(workdir / "metrics/ground/metrics.json") == {"ground_val_blank_cells": round(info["val_blank_cells"], 4)}
    # curves on an epoch axis from 1, one row per epoch run; the reported score is the kept
    # (best) epoch's, not the last one's
    curve = (workdir / "metrics/ground/plots/metrics/val_blank_cells.tsv").read_text().splitlines()
    assert [row.split("\t")[0] for row in curve] == ["step"] + [str(e) for e in range(1, info["epochs_run"] + 1)]
    kept = float(curve[info["best_epoch"]].split("\t")[1])
    assert kept == pytest.approx(info["val_blank_cells"])
    train = read(workdir / "metrics/train/info.json")
    assert {"loss", "sweeps", "dev_blank_cells", "dev_blank_boards", "dev_valid_grids"} <= set(train)
    assert 1 <= train["sweeps"] <= PARAMS["satnet"]["max_iter"]  # the mean sweeps a board took
    assert set(read(workdir / "metrics/train/metrics.json")) == {"train_loss", "train_dev_blank_cells"}
    assert "seconds" in read(workdir / "metrics/train/timing.json")


def test_ground_takes_the_permutation_from_peer_labels_when_asked(workdir, ungrounded_run, tmp_path):
    params = {**PARAMS, "ground": {**PARAMS["ground"], "permutation": "peers", "epochs": 1}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    stage("ground").main(declared("ground", params=tmp_path / "params.yaml",
                                  prepared=ungrounded_run["blind"],  # no input-cell label in it
                                  model_out=tmp_path / "ground.pt",
                                  permutation_out=tmp_path / "permutation.json",
                                  plot_out=tmp_path / "permutation.png", metrics_out=tmp_path / "ground"))
    saved = json.loads((tmp_path / "permutation.json").read_text())
    assert saved["source"] == "peers"
    assert saved["permutation"] == saved["from_peers"] == torch.argsort(PLANTED).tolist()
    assert np.array(saved["peer_label_cooccurrence"]).shape == (K, K)
    metrics = read(tmp_path / "ground" / "info.json")
    assert metrics["loss_agrees_with_peers"] == (saved["from_loss"] == saved["from_peers"])


@pytest.fixture(scope="module")
def grounding_boards(tmp_path_factory):
    """400 training boards: enough for the grounding phase to learn at this size in seconds."""
    root = tmp_path_factory.mktemp("grounding")
    make_prepared(root, n_train=400, n_test=16)
    return root


def ground_with(root: Path, tmp_path: Path, **ground) -> tuple[dict, dict]:
    params = {**PARAMS, "ground": {**PARAMS["ground"], "epochs": 4, "patience": 3, "val_fraction": 0.1,
                                   "output_softmax": False, "align_inputs": False, **ground}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    out = tmp_path / ground["loss"]
    stage("ground").main(declared("ground", params=tmp_path / "params.yaml", prepared=root / "data" / "prepared",
                                  classifier=root / "models" / "classifier.pt", model_out=out / "ground.pt", permutation_out=out / "permutation.json",
                                  plot_out=out / "permutation.png", metrics_out=out / "metrics",
                                  resume_dir=out / "resume"))
    return json.loads((out / "permutation.json").read_text()), read(out / "metrics" / "info.json")


def test_ground_settle_stops_the_phase_once_its_permutation_stays_put(grounding_boards, tmp_path):
    """ground.settle 1: the phase ends at the first epoch whose reading repeats the one before,
    however much patience is left; off (0), the same boards run every epoch (patience 3 of 4)."""
    (tmp_path / "on").mkdir(), (tmp_path / "off").mkdir()
    _, settled = ground_with(grounding_boards, tmp_path / "on", loss="matched", warmup_epochs=1, settle=1)
    _, full = ground_with(grounding_boards, tmp_path / "off", loss="matched", warmup_epochs=1, settle=0)
    readings = full["epoch_permutations"]
    first_repeat = next(e for e in range(2, 5) if readings[e - 1] == readings[e - 2])
    assert settled["epochs_run"] == first_repeat < full["epochs_run"] == 4
    assert settled["epoch_permutations"] == readings[:first_repeat]  # the same run, cut short


def test_ground_boards_trains_the_phase_on_a_draw_of_the_training_boards(grounding_boards, tmp_path):
    """ground.boards N: the phase learns from N of the boards the validation split leaves (a
    seeded draw), validated on the same held-out boards; 0: from all of them."""
    (tmp_path / "all").mkdir(), (tmp_path / "some").mkdir()
    _, every = ground_with(grounding_boards, tmp_path / "all", loss="matched", epochs=1, boards=0)
    _, some = ground_with(grounding_boards, tmp_path / "some", loss="matched", epochs=1, boards=120)
    assert every["train_boards"] == 360 and some["train_boards"] == 120
    assert every["val_blank_cells"] != some["val_blank_cells"]


def test_ground_with_the_matched_loss_finds_the_planted_permutation_by_itself(grounding_boards, tmp_path):
    """The matched Symbol Grounding Loss, no input alignment, no peer labels: its own arg max is
    the classifier's planted relabelling, and SATNet reads blank cells far better than with the
    paper's form on the same boards and settings."""
    saved, info = ground_with(grounding_boards, tmp_path, loss="matched", warmup_epochs=1)
    assert saved["source"] == "loss" and not saved["aligned_to_inputs"]
    # the truth: the classifier's clusters matched to the training images' true digits
    prepared = grounding_boards / "data" / "prepared"
    boards = load_boards(prepared, "train")
    clusters = classify(load_classifier(grounding_boards / "models" / "classifier.pt"), boards.images)
    digits = torch.load(prepared / "train_truth.pt")["image_labels"].long() - 1
    truth = best_matching(clusters.numpy(), digits.numpy(), K, K).tolist()
    assert saved["permutation"] == saved["argmax"] == truth
    _, paper = ground_with(grounding_boards, tmp_path, loss="paper")
    assert info["val_blank_cells"] > 0.6 and info["val_blank_cells"] > paper["val_blank_cells"] + 0.2


# every function that reads the Sudoku rules (peer cells, the rows, columns and boxes)
PEER_CODE = {"satground.boards.sudoku": ("peers", "valid_grids", "conflicting_boards"),
             "satground.solver.grounding": ("peer_cooccurrence", "peer_label_cooccurrence",
                                            "peer_label_permutation", "align_to_inputs"),
             "satground.boards.data": ("peer_cannot_links",),
             "satground.boards.metrics": ("peer_conflict_rate", "given_conflict_rate")}
# the callers whose use of them is not a reading of the rules by the method: (file, function)
TOLERATED = {("satground/boards/data.py", "load_boards"):
             "checks a boards file (a blank-cell label repeated among peers): a broken file stops "
             "the run, a sound one passes unchanged, so nothing is learnt from the rules",
             ("satground/boards/metrics.py", "output_metrics"):
             "the valid-grid and given-conflict scores, logged as curves beside the labelled blank "
             "cells' accuracy; no early stop, restart or permutation is chosen on them"}
# the settings that decide whether a run reads the rules
RULE_KEYS = {"cluster": ("method", "restarts"),
             "ground": ("loss", "warmup_epochs", "output_softmax", "align_inputs", "permutation"),
             "train": ("init_from_ground",)}


def tolerated_caller() -> tuple[str, str] | None:
    """The TOLERATED caller somewhere up the stack, or None."""
    frame = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        for (file, function) in TOLERATED:
            if code.co_name == function and Path(code.co_filename).as_posix().endswith(file):
                return file, function
        frame = frame.f_back
    return None


class SpyCalls(list):
    """The failed calls (names); `tolerated`: the (name, caller) of the tolerated ones."""
    tolerated: list


@pytest.fixture
def peer_spy(monkeypatch):
    """Replace each PEER_CODE function, in its module and in every satground module that bound
    it by name (`from .sudoku import peers`), by one that fails, recording the call. A call from
    a TOLERATED caller runs the real function and is recorded apart (spy.tolerated). The stages
    are imported afresh by `stage()`, so they bind the replacements."""
    calls, tolerated = SpyCalls(), []
    calls.tolerated = tolerated
    spies = {}
    for module_name, names in PEER_CODE.items():
        module = importlib.import_module(module_name)
        for name in names:
            real = getattr(module, name)

            def spy(*args, _name=name, _real=real, **kwargs):
                caller = tolerated_caller()
                if caller is not None:
                    tolerated.append((_name, caller[1]))
                    return _real(*args, **kwargs)
                calls.append(_name)
                raise AssertionError(f"{_name} called: the run reads the Sudoku structure")
            spies[id(real)] = spy
    for module_name, module in list(sys.modules.items()):
        if module_name == "satground" or module_name.startswith("satground."):
            for attr, value in list(vars(module).items()):
                if callable(value) and id(value) in spies:
                    monkeypatch.setattr(module, attr, spies[id(value)])
    return calls


def profile_settings(profile: str) -> dict:
    """PARAMS (tiny sizes) with the profile's rule switch and rule-deciding settings."""
    composed = compose(profile)
    params = {**PARAMS, "rule_aware": composed["rule_aware"], "cluster": {**PARAMS["cluster"], "n_neighbors": 5}}
    for section, keys in RULE_KEYS.items():
        params[section] = {**params.get(section, {}), **{k: composed[section][k] for k in keys}}
    return params


def test_the_rule_free_profile_never_calls_the_peer_structure_code(workdir, tmp_path, peer_spy):
    """cluster, distill, ground and train with cpu9's settings (the rule-free headline profile,
    from its file) run to the end with every function that reads the Sudoku rules failing when
    called; cpu9_rules' settings call them (the spy's control).

    Two callers are tolerated, and only they (TOLERATED): load_boards, which checks every boards
    file it reads against the rules (a label repeated among peers stops the run; a sound file
    passes unchanged: a check of the data, nothing learnt), and output_metrics, whose valid-grid
    and given-conflict scores are logged as curves, never chosen on (the grounding phase stops
    early on the labelled blank cells' accuracy). Every other call fails, the clusterer's, the
    restart selection's, the permutation's and the alignment's included."""
    params = profile_settings("cpu9")
    assert not params["rule_aware"]
    assert params["cluster"]["method"] == "selflabel" and params["ground"]["permutation"] == "loss"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    prepared, out = workdir / "data" / "prepared", tmp_path
    stage("cluster").main(declared("cluster", params=out / "params.yaml", prepared=prepared,
                                   model_out=out / "cluster", samples_plot_out=out / "samples.png",
                                   confusion_plot_out=out / "confusion.png", metrics_out=out / "m_cluster"))
    stage("distill").main(declared("distill", params=out / "params.yaml", prepared=prepared,
                                   clusterer=out / "cluster", model_out=out / "classifier.pt",
                                   metrics_out=out / "m_distill"))
    stage("ground").main(declared("ground", params=out / "params.yaml", prepared=prepared,
                                  classifier=out / "classifier.pt", model_out=out / "ground.pt",
                                  permutation_out=out / "permutation.json", plot_out=out / "perm.png",
                                  metrics_out=out / "m_ground", resume_dir=out / "r_ground"))
    stage("train").main(declared("train", params=out / "params.yaml", prepared=prepared,
                                 classifier=out / "classifier.pt", ground=out / "ground.pt", permutation=out / "permutation.json",
                                 model_out=out / "solver.pt", metrics_out=out / "m_train",
                                 resume_dir=out / "r_train"))
    assert peer_spy == [] and (out / "solver.pt").is_file()
    # the spy is in place (it saw the boards files checked), and let through those callers only
    callers = {caller for _, caller in peer_spy.tolerated}
    assert "load_boards" in callers and callers <= {function for _, function in TOLERATED}
    saved = json.loads((out / "permutation.json").read_text())
    assert saved["source"] == "loss" and saved["from_peers"] is None and not saved["aligned_to_inputs"]

    aware = profile_settings("cpu9_rules")
    assert aware["rule_aware"] and aware["cluster"]["method"] == "peers"
    (tmp_path / "aware.yaml").write_text(yaml.safe_dump(aware))
    with pytest.raises(AssertionError, match="peer_cannot_links called"):
        stage("cluster").main(declared("cluster", params=out / "aware.yaml", prepared=prepared,
                                       model_out=out / "c2", samples_plot_out=out / "s2.png",
                                       confusion_plot_out=out / "c2.png", metrics_out=out / "m_c2"))
    with pytest.raises(AssertionError, match="reads the Sudoku structure"):
        stage("ground").main(declared("ground", params=out / "aware.yaml", prepared=prepared,
                                      classifier=out / "classifier.pt", model_out=out / "g2.pt",
                                      permutation_out=out / "p2.json", plot_out=out / "p2.png",
                                      metrics_out=out / "m_g2", resume_dir=out / "r_g2"))
    assert peer_spy


def test_reread_replaces_the_reader_and_none_keeps_the_trained_solver(workdir, ungrounded_run, tmp_path):
    """The stage's reader is a DigitReader in front of train's SATNet, unchanged; reread.reader:
    none (the paper) writes train's solver as it is."""
    from satground.readers.digitcnn import DigitReader
    from satground.solver.models import load_solver
    trained = load_solver(workdir / "models/solver.pt")
    reread = load_solver(workdir / "models/solver_reread.pt")
    assert isinstance(reread.classifier, DigitReader) and len(reread.classifier.nets) == 2
    for name, value in trained.solver.state_dict().items():
        assert torch.equal(value, reread.solver.state_dict()[name]), name
    (tmp_path / "none.yaml").write_text(yaml.safe_dump({**PARAMS, "reread": {"reader": "none"}}))
    stage("reread").main(declared("reread", params=tmp_path / "none.yaml", model_out=tmp_path / "kept.pt",
                                  metrics_out=tmp_path / "m"))
    kept = load_solver(tmp_path / "kept.pt")
    assert isinstance(kept.classifier, LeNet)
    for before, after in ((trained.classifier, kept.classifier), (trained.solver, kept.solver)):
        for name, value in before.state_dict().items():
            assert torch.equal(value, after.state_dict()[name]), name


def test_the_reader_ceiling_study_scores_the_stages_pseudo_labels_and_an_oracle_reader(workdir, ungrounded_run,
                                                                                        tmp_path):
    """studies/reader_ceiling.py (report only) remakes round 1's pseudo-labels as the stage draws
    them, trains the stage's reader on the training images' true digits instead, and puts it in
    front of the run's final SATNet, unchanged, for dev_choices to score."""
    module = script("studies", "reader_ceiling")
    # enough epochs for 48 training images: the stage's fixture reader takes two optimiser steps
    (tmp_path / "p.yaml").write_text(yaml.safe_dump({**PARAMS, "reread": {**PARAMS["reread"], "epochs": 40}}))
    module.main(["--params", str(tmp_path / "p.yaml"), "--prepared", "data/prepared", "--models", "models",
                 "--out-models", str(tmp_path)])
    report = read(tmp_path / "ceiling.json")
    from satground.boards.data import given_image_indices, load_boards, load_image_labels
    from satground.readers.lenet import predict
    from satground.solver.models import load_solver
    dev = load_boards("data/prepared", "dev")
    pool = given_image_indices(dev)
    read_right = (predict(load_solver(workdir / "models/solver_reread.pt").classifier, dev.images[pool])
                  == load_image_labels("data/prepared", "dev", pool)).float().mean().item()
    assert report["run_reader_dev_read_right"] == pytest.approx(read_right)  # the run's own reader
    assert 0.0 <= report["pseudo_labels_right"] <= 1.0 and len(report["pseudo_labels_right_by_digit"]) == K
    # the squares are easy: the stage's SATNet-voted labels and the true digits train readers alike
    assert report["oracle_reader_dev_read_right"] > 0.9
    final, oracle = load_solver(workdir / "models/solver_reread.pt"), load_solver(tmp_path / "solver_reread.pt")
    for name, value in final.solver.state_dict().items():
        assert torch.equal(value, oracle.solver.state_dict()[name]), name


def test_reread_rounds_train_a_fresh_satnet_behind_the_last_reader_then_reread(workdir, ungrounded_run,
                                                                               tmp_path, monkeypatch):
    """reread.rounds 2: the second round trains a fresh SATNet behind the first round's reader
    (frozen), and the stage writes that SATNet with the reader it re-read; each round's figures in
    info.json, the second round's curves under round2_."""
    from satground.readers.digitcnn import DigitReader
    from satground.solver.models import load_solver
    module = stage("reread")
    behind = []
    real = module.train_behind

    def spy(reader, *args, **kwargs):
        behind.append(reader)
        model = real(reader, *args, **kwargs)
        behind.append(model)
        return model

    monkeypatch.setattr(module, "train_behind", spy)
    (tmp_path / "rounds.yaml").write_text(yaml.safe_dump({**PARAMS, "reread": {**PARAMS["reread"], "rounds": 2}}))
    module.main(declared("reread", params=tmp_path / "rounds.yaml", model_out=tmp_path / "rounds.pt",
                         metrics_out=tmp_path / "m"))
    assert len(behind) == 2 and isinstance(behind[0], DigitReader)  # round 1's reader, not train's LeNet
    assert not any(p.requires_grad for p in behind[0].parameters())  # frozen behind SATNet
    trained, out = load_solver(workdir / "models/solver.pt"), load_solver(tmp_path / "rounds.pt")
    assert not torch.equal(trained.solver.satnet.S, out.solver.satnet.S)
    assert torch.equal(out.solver.satnet.S, behind[1].solver.satnet.S)
    assert isinstance(out.classifier, DigitReader)
    info = json.loads((tmp_path / "m" / "info.json").read_text())
    assert len(info["rounds"]) == 2 and info["votes_per_image"] == info["rounds"][0]["votes_per_image"]
    assert list((tmp_path / "m").rglob("round2_dev_blank_cells.tsv"))
    for bad, match in (({"rounds": 2, "reader": "none"}, "needs a reader"),
                       ({"rounds": 2, "keep_classifier": True}, "needs 'reread.rounds: 1'")):
        (tmp_path / "bad.yaml").write_text(yaml.safe_dump({**PARAMS, "reread": {**PARAMS["reread"], **bad}}))
        with pytest.raises(PipelineError, match=match):
            module.main(declared("reread", params=tmp_path / "bad.yaml", model_out=tmp_path / "bad.pt",
                                 metrics_out=tmp_path / "m_bad"))
        assert not (tmp_path / "bad.pt").exists()


@pytest.mark.parametrize("round_satnet", ["keep", "continue"])
def test_reread_rounds_keep_or_continue_the_last_rounds_satnet(workdir, ungrounded_run, tmp_path,
                                                              monkeypatch, round_satnet):
    """reread.round_satnet keep: round 2 re-reads with train's SATNet unchanged (no SATNet is
    trained); continue: round 2 trains train's SATNet on, from its own weights, for round_epochs."""
    from satground.solver.models import load_solver
    module = stage("reread")
    started = []
    real = module.train_behind

    def spy(reader, train, dev, sat, epochs, *args, solver=None, **kwargs):
        started.append((epochs, None if solver is None else solver.satnet.S.detach().clone()))
        return real(reader, train, dev, sat, epochs, *args, solver=solver, **kwargs)

    monkeypatch.setattr(module, "train_behind", spy)
    reread = {**PARAMS["reread"], "rounds": 2, "round_satnet": round_satnet, "round_epochs": 1}
    train = {**PARAMS["train"], "decay_epochs": 0}
    (tmp_path / "rounds.yaml").write_text(yaml.safe_dump({**PARAMS, "train": train, "reread": reread}))
    module.main(declared("reread", params=tmp_path / "rounds.yaml", model_out=tmp_path / "rounds.pt",
                         metrics_out=tmp_path / "m"))
    trained, out = load_solver(workdir / "models/solver.pt"), load_solver(tmp_path / "rounds.pt")
    info = json.loads((tmp_path / "m" / "info.json").read_text())
    assert len(info["rounds"]) == 2
    if round_satnet == "keep":
        assert started == [] and torch.equal(trained.solver.satnet.S, out.solver.satnet.S)
    else:
        assert len(started) == 1 and started[0][0] == 1
        assert torch.equal(started[0][1], trained.solver.satnet.S)  # from train's weights, not fresh
        assert not torch.equal(trained.solver.satnet.S, out.solver.satnet.S)


def test_a_round_with_the_last_rounds_pseudo_labels_keeps_its_reader(workdir, ungrounded_run, tmp_path,
                                                                     monkeypatch):
    """The reader is a function of its labels (its own seed): trained twice on the same labels it
    has the same weights, so a round whose pseudo-labels are the last round's keeps that reader
    instead of training it again; one whose labels moved trains a new one."""
    from satground.harness.params import load_params
    module = stage("reread")
    boards = load_boards(ungrounded_run["blind"], "train")
    pool = given_image_indices(boards)
    trained, made = [], []
    real_reader, real_labels = module.train_reader, module.pseudo_labels
    monkeypatch.setattr(module, "train_reader", lambda *a, **k: trained.append(real_reader(*a, **k)) or trained[-1])

    def first_labels_then_moved(*args):  # rounds 1 and 2 the same labels, round 3 one moved
        made.append(made[0].clone() if made else real_labels(*args))
        if len(made) == 3:
            made[-1][pool[0]] = (made[-1][pool[0]] + 1) % boards.n_digits
        return made[-1]

    monkeypatch.setattr(module, "pseudo_labels", first_labels_then_moved)
    (tmp_path / "same.yaml").write_text(yaml.safe_dump({**PARAMS, "reread": {**PARAMS["reread"], "rounds": 3,
                                                                             "round_satnet": "keep"}}))
    module.main(declared("reread", params=tmp_path / "same.yaml", model_out=tmp_path / "same.pt",
                         metrics_out=tmp_path / "m"))
    info = json.loads((tmp_path / "m" / "info.json").read_text())
    assert [r["reader_retrained"] for r in info["rounds"]] == [True, False, True] and len(trained) == 2
    cfg = load_params(tmp_path / "same.yaml").reread
    again = real_reader(cfg.reader, boards.images[pool], made[0][pool], boards.n_digits, cfg.epochs, cfg.nets,
                        cfg.seed, **cfg.reader_training())
    for name, value in trained[0].state_dict().items():  # what keeping round 1's reader stands for
        assert torch.equal(value, again.state_dict()[name]), name


def test_reread_round_inputs_labels_trains_the_rounds_satnet_on_the_last_rounds_pseudo_labels(
        workdir, ungrounded_run, tmp_path, monkeypatch):
    """reread.round_inputs labels: round 2's SATNet reads round 1's pseudo-labels, one-hot, for
    the training givens' images; every dev image as the reader reads it."""
    from satground.solver import training
    module = stage("reread")
    made, fitted = [], []
    real_labels, real_fit = module.pseudo_labels, training.fit
    monkeypatch.setattr(module, "pseudo_labels", lambda *a: made.append(real_labels(*a)) or made[-1])
    monkeypatch.setattr(training, "fit", lambda model, train, dev, *a, **k: fitted.append((train, dev))
                        or real_fit(model, train, dev, *a, **k))
    reread = {**PARAMS["reread"], "rounds": 2, "round_epochs": 1, "round_inputs": "labels"}
    (tmp_path / "labels.yaml").write_text(yaml.safe_dump({**PARAMS, "train": {**PARAMS["train"], "decay_epochs": 0},
                                                          "reread": reread}))
    module.main(declared("reread", params=tmp_path / "labels.yaml", model_out=tmp_path / "labels.pt",
                         metrics_out=tmp_path / "m"))
    assert len(fitted) == 1 and len(made) == 2
    train_in, dev_in = fitted[0]
    boards = load_boards(ungrounded_run["blind"], "train")
    pool = given_image_indices(boards)
    read = train_in.images[pool]
    assert torch.equal(read.argmax(1), made[0][pool])  # round 1's labels, not the reader's reading
    assert torch.allclose(read.exp().max(1).values, torch.ones(len(pool)), atol=1e-4)
    assert (dev_in.images.exp().max(1).values < 1 - 1e-4).any()


def test_a_zero_classifier_rate_keeps_the_classifier_and_reads_each_image_once(workdir, ungrounded_run,
                                                                              tmp_path, monkeypatch):
    """train.classifier_lr 0: the classifier leaves train exactly as it came in (the distilled
    LeNet with the permutation folded in), and it reads each pool image once, not once a batch."""
    from satground.solver.grounding import fold_into_classifier, load_permutation
    from satground.solver.models import load_solver
    params = {**PARAMS, "train": {**PARAMS["train"], "classifier_lr": 0.0}}
    (tmp_path / "frozen.yaml").write_text(yaml.safe_dump(params))
    calls = []
    real_forward = LeNet.forward
    monkeypatch.setattr(LeNet, "forward", lambda self, images: calls.append(len(images)) or real_forward(self, images))
    stage("train").main(declared("train", params=tmp_path / "frozen.yaml", prepared=ungrounded_run["blind"],
                                 model_out=tmp_path / "frozen.pt", metrics_out=tmp_path / "m"))
    pool = sum(len(load_boards(ungrounded_run["blind"], split).images) for split in ("train", "dev"))
    assert sum(calls) == pool  # once per image of the two pools, whatever the epochs and batches
    expected = load_classifier(workdir / "models/classifier.pt")
    fold_into_classifier(expected, load_permutation(workdir / "models/permutation.json", K)["permutation"])
    trained = load_solver(tmp_path / "frozen.pt").classifier
    for name, value in expected.state_dict().items():
        assert torch.equal(value, trained.state_dict()[name]), name


def trained_without_and_with_a_tune_epoch(ungrounded_run, tmp_path, tune_lr, **paths) -> dict:
    """The train stage with the classifier frozen, run with 0 and 1 tune epochs: {0: model, 1: model};
    metrics in tmp_path/m0, m1; `paths` replace the command's (classifier=...)."""
    from satground.solver.models import load_solver
    models = {}
    for tune in (0, 1):
        params = {**PARAMS, "train": {**PARAMS["train"], "classifier_lr": 0.0, "tune_epochs": tune,
                                      "tune_lr": tune_lr}}
        (tmp_path / f"tune{tune}.yaml").write_text(yaml.safe_dump(params))
        stage("train").main(declared("train", params=tmp_path / f"tune{tune}.yaml",
                                     prepared=ungrounded_run["blind"], model_out=tmp_path / f"tune{tune}.pt",
                                     metrics_out=tmp_path / f"m{tune}", **paths))
        models[tune] = load_solver(tmp_path / f"tune{tune}.pt")
    return models


def test_the_tune_epochs_move_the_classifier_alone(workdir, ungrounded_run, tmp_path):
    """train.tune_epochs: after the end-to-end epochs (here with the classifier frozen), the
    classifier learns through SATNet and SATNet stays as those epochs left it: the same S as a
    run without tune epochs, another classifier, and tune_ curves on the dev boards."""
    models = trained_without_and_with_a_tune_epoch(ungrounded_run, tmp_path, 1e-3)
    assert torch.equal(models[0].solver.satnet.S, models[1].solver.satnet.S)
    assert not torch.equal(models[0].classifier.conv1.weight, models[1].classifier.conv1.weight)
    assert read(tmp_path / "m1" / "info.json")["tune"]["dev_blank_cells"] >= 0
    assert (tmp_path / "m1" / "plots" / "metrics" / "tune_dev_blank_cells.tsv").is_file()
    assert not (tmp_path / "m0" / "plots" / "metrics" / "tune_loss.tsv").exists()


def test_the_tune_epochs_move_a_cnn_ensembles_heads_alone(workdir, ungrounded_run, tmp_path):
    """distill.classifier clusterer: the classifier is a CNN ensemble; the tune epochs move its
    nets' output layers, read through features once, and nothing else (bodies, SATNet)."""
    torch.manual_seed(0)
    save_classifier(DigitReader(K, n_nets=2, width=8, feature_dim=16), tmp_path / "reader.pt")
    models = trained_without_and_with_a_tune_epoch(ungrounded_run, tmp_path, 1e-2,
                                                   classifier=tmp_path / "reader.pt")
    assert isinstance(models[1].classifier, DigitReader)
    assert torch.equal(models[0].solver.satnet.S, models[1].solver.satnet.S)
    before, after = models[0].classifier.state_dict(), models[1].classifier.state_dict()
    moved = {name for name in before if not torch.equal(before[name], after[name])}
    assert moved and all(".head." in name for name in moved), moved


def test_the_rules_epochs_and_the_hints_train_from_blank_labels(workdir, ungrounded_run, tmp_path,
                                                                 monkeypatch):
    """train.rules_epochs: SATNet first learns from the training boards' blank-cell labels (their
    rules_ curves and info logged), reading no image and no given; then the end-to-end epochs,
    here with hints (train.hints), after which the solver saved is the plain visual one."""
    from satground.solver.models import VisualSolver, load_solver
    from satground.solver import training
    seen = []
    real = training.known_cells
    monkeypatch.setattr(training, "known_cells", lambda boards, *a: seen.append(boards) or real(boards, *a))
    params = {**PARAMS, "train": {**PARAMS["train"], "rules_epochs": 1, "rules_shown": 0.7, "hints": 0.5,
                                  "hint_epochs": 1}}
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(params))
    stage("train").main(declared("train", params=tmp_path / "rules.yaml", prepared=ungrounded_run["blind"],
                                 model_out=tmp_path / "rules.pt", metrics_out=tmp_path / "m"))
    assert len(seen) == 2 and all((b.labels[b.is_input] == 0).all() for b in seen)  # ungrounded views
    info = read(tmp_path / "m" / "info.json")
    assert 0 <= info["rules"]["dev_blank_cells"] <= 1 and "dev_blank_cells" in info
    assert (tmp_path / "m" / "plots" / "metrics" / "rules_dev_blank_cells.tsv").is_file()
    assert type(load_solver(tmp_path / "rules.pt")) is VisualSolver


def test_no_end_to_end_epochs_keep_the_satnet_the_rules_epochs_left(workdir, ungrounded_run,
                                                                     tmp_path, monkeypatch):
    """train.epochs 0 after rules epochs: SATNet trains in the rules epochs alone, the tune epoch
    moves the classifier only, so the saved SATNet is the one the rules epochs returned; the
    stage's dev figure is scored through the classifier. Both counts 0 is refused."""
    from satground.harness.io import PipelineError
    from satground.solver.models import load_solver
    from satground.solver import training
    after_rules = {}
    real = training.learn_rules

    def spy(solver, *args, **kwargs):
        row = real(solver, *args, **kwargs)
        after_rules.update({k: v.clone() for k, v in solver.state_dict().items()})
        return row
    monkeypatch.setattr(training, "learn_rules", spy)
    params = {**PARAMS, "train": {**PARAMS["train"], "rules_epochs": 1, "epochs": 0, "decay_epochs": 0,
                                  "tune_epochs": 1}}
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(params))
    stage("train").main(declared("train", params=tmp_path / "p.yaml", prepared=ungrounded_run["blind"],
                                 model_out=tmp_path / "s.pt", metrics_out=tmp_path / "m"))
    saved = load_solver(tmp_path / "s.pt").solver.state_dict()
    assert after_rules and all(torch.equal(saved[k], v) for k, v in after_rules.items())
    info = read(tmp_path / "m" / "info.json")
    assert "rules" in info and 0 <= info["tune"]["dev_blank_cells"] <= 1
    assert not (tmp_path / "m" / "plots" / "metrics" / "loss.tsv").exists()  # no end-to-end epoch ran
    params["train"]["rules_epochs"] = 0
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(params))
    with pytest.raises(PipelineError, match="SATNet would learn nothing"):
        stage("train").main(declared("train", params=tmp_path / "p.yaml", prepared=ungrounded_run["blind"],
                                     model_out=tmp_path / "t.pt", metrics_out=tmp_path / "n"))
    assert not (tmp_path / "t.pt").exists()


def test_reground_folds_the_map_the_rules_taught_satnet_names(workdir, ungrounded_run, tmp_path,
                                                               monkeypatch):
    """train.reground: after the rules epochs the stage asks reread.reground for the map, from the
    ground stage's, and folds the map it returns into the classifier (here a swap of two digits
    laid over the real answer); its report is kept in the info."""
    from satground.solver.grounding import fold_into_classifier, load_permutation
    from satground.solver.models import load_solver
    module, asked = stage("train"), []

    def swapped(classifier, solver, train, perm, batch_size):
        new, report = real(classifier, solver, train, perm, batch_size)
        asked.append(perm.clone())
        return new[[1, 0, 2, 3]], report
    real = module.reground
    monkeypatch.setattr(module, "reground", swapped)
    params = {**PARAMS, "train": {**PARAMS["train"], "rules_epochs": 1, "epochs": 0, "decay_epochs": 0,
                                  "tune_epochs": 0, "reground": True}}
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(params))
    module.main(declared("train", params=tmp_path / "p.yaml", prepared=ungrounded_run["blind"],
                         model_out=tmp_path / "s.pt", metrics_out=tmp_path / "m"))
    ground = load_permutation("models/permutation.json", K)["permutation"]
    assert len(asked) == 1 and torch.equal(asked[0], ground)
    report = read(tmp_path / "m" / "info.json")["reground"]
    new = torch.tensor(report["permutation"])[[1, 0, 2, 3]]
    expected = load_classifier("models/classifier.pt", K)
    fold_into_classifier(expected, new)
    images = load_boards(ungrounded_run["blind"], "train").images[:40]
    assert torch.equal(classify(load_solver(tmp_path / "s.pt").classifier, images), classify(expected, images))
    assert report["images_voted"] > 0 and report["ground_permutation"] == ground.tolist()
    assert torch.equal(folded_permutation(tmp_path / "s.pt", K, K), new)  # the map evaluate checks


def test_evaluate_checks_the_map_train_folded_beside_the_ground_stages(workdir, ungrounded_run, tmp_path):
    """perm_right is the map folded into the trained model, which models/solver.pt records (the
    ground stage's unless train.reground); the ground stage's own stays beside it. A file that
    records a malformed map is a one-line error naming it."""
    from satground.boards.data import load_truth
    from satground.solver.grounding import load_permutation
    from satground.solver.models import load_solver
    module, prepared = stage("evaluate"), workdir / "data/prepared"
    test = load_boards(prepared, "test")
    solution, truth = load_boards(prepared, "test", view="grounded").labels, load_truth(prepared, "test", test)
    saved = load_permutation("models/permutation.json", K)
    ground = load_solver("models/ground.pt", boards=test, kind="visual")
    folded = folded_permutation("models/solver.pt", K, K)
    assert torch.equal(folded, saved["permutation"])  # train folded the ground stage's map

    def scores(mapping):  # the maps' figures (the phase's scores draw SATNet's random starts)
        got = module.grounding_scores(ground, test, solution, truth, saved, 40, torch.device("cpu"), mapping)
        return {key: value for key, value in got.items() if not key.startswith("phase_")}
    plain, true = scores(folded), torch.tensor(scores(None)["true_permutation"])
    assert plain == scores(None) and not plain["reground"]
    assert plain["permutation_correct"] == plain["ground_permutation_correct"] == torch.equal(folded, true)
    wrong, right = scores(true[[1, 0, 2, 3]]), scores(true)
    assert wrong["reground"] and not wrong["permutation_correct"] and right["permutation_correct"]
    assert wrong["ground_permutation_correct"] == right["ground_permutation_correct"] == plain["permutation_correct"]
    assert right["map_images_right"] > wrong["map_images_right"]
    bad = torch.load("models/solver.pt", weights_only=False)
    bad["folded_permutation"] = [0, 1, 2, 9]
    torch.save(bad, tmp_path / "bad.pt")
    with pytest.raises(PipelineError, match=r"bad.pt: 'folded_permutation' must be a permutation of 0..3, got \[0, 1, 2, 9\]"):
        folded_permutation(tmp_path / "bad.pt", K, K)


def test_baselines_evaluation_and_results_table(workdir, ungrounded_run):
    stage("baseline_visual").main(declared("baseline_grounded"))
    stage("baseline_visual").main(declared("baseline_ungrounded"))
    stage("baseline_nonvisual").main(declared("baseline_nonvisual"))
    stage("error_injection").main(declared("error_injection"))
    stage("evaluate").main(declared("evaluate"))

    headline = read(workdir / "metrics/evaluate/metrics.json")
    assert set(headline) == {"boards", "blank_boards", "valid_grids", "cells", "visual", "boards_pr",
                             "boards_reread", "blank_boards_reread", "visual_reread", "perm_right",
                             "boards_checked", "blank_boards_checked", "visual_checked", "boards_pr_checked",
                             "blank_boards_pr", "blank_boards_pr_checked"}
    ours = read(workdir / "metrics/evaluate/scores.json")
    assert headline["boards"] == round(ours["no_proofreader"]["board_accuracy"], 4)
    for variant in ("no_proofreader", "reread", "proofreader", "checked", "proofreader_checked"):
        scores = ours[variant]
        assert {"board_accuracy", "valid_grid_rate", "cell_accuracy", "visual_accuracy"} <= set(scores)
        assert scores["board_accuracy"] <= scores["valid_grid_rate"] + 1e-9  # exact match is stricter
    info = read(workdir / "metrics/evaluate/info.json")
    # every board figure of ours has its bootstrap interval around it; the baselines' have none
    figures = {key for key in headline if key.startswith(("boards", "blank_boards", "valid_grids"))}
    assert set(info["intervals"]) == figures
    for key in figures:
        bounds = info["intervals"][key]
        assert bounds["low"] - 1e-4 <= headline[key] <= bounds["high"] + 1e-4, key
    frame = pd.read_csv(workdir / "metrics/results.csv")
    assert frame["board_interval_pct"].notna().tolist() == frame["model"].str.startswith("Ours").tolist()
    ground = info["grounding"]
    assert headline["perm_right"] == ground["permutation_correct"]
    # the distilled LeNet learned the planted clusters, so the truth matching is PLANTED inverted
    assert ground["true_permutation"] == torch.argsort(PLANTED).tolist()
    assert ground["permutation_correct"] == (
        json.loads((workdir / "models/permutation.json").read_text())["permutation"]
        == ground["true_permutation"])

    table = (workdir / "metrics/results.csv").read_text().splitlines()
    assert len(table) == 1 + 11  # header + 2 grounded + 2 ungrounded baselines + 5 ours + 2 non-visual
    # every row names its configuration and its end-to-end epochs (PARAMS: rule-aware, 1 epoch each)
    for row in ("Ours + re-read,rule-aware,1,ungrounded,yes", "Ours + re-read + check,rule-aware,1,ungrounded,no",
                "Ours + re-read + check,rule-aware,1,ungrounded,yes", "Original SATNet,paper's baseline,1,grounded,no",
                "Original non-visual,paper's baseline,1,symbols,no"):
        assert row in (workdir / "metrics/results.csv").read_text()
    assert (workdir / "metrics/results.md").read_text().startswith("| model")

    assert set(read(workdir / "metrics/baseline_nonvisual/metrics.json")) == {"nonvisual_boards"}
    assert set(read(workdir / "metrics/baseline_ungrounded/metrics.json")) == {"ungrounded_boards"}
    injection = read(workdir / "metrics/error_injection/info.json")
    n_test = len(load_boards(workdir / "data/prepared", "test"))
    for model in ("no_proofreader", "proofreader"):
        assert set(injection[model]) == {"0", "1", "2"}
        for groups in injection[model].values():
            assert groups["solvable"]["n_boards"] + groups["unsolvable"]["n_boards"] == n_test
        assert injection[model]["0"]["unsolvable"]["n_boards"] == 0


def test_views_read_every_row_of_ours_and_keep_the_papers_single_look(workdir, ungrounded_run, tmp_path):
    """evaluate.views 5: our rows read each image in five views; the model as trained is also
    scored reading each image once, and those scores are the ones evaluate gives with views 1."""
    scored = {}
    for views in (1, 5):
        params = {**PARAMS, "evaluate": {**PARAMS["evaluate"], "views": views}}
        (tmp_path / f"p{views}.yaml").write_text(yaml.safe_dump(params))
        stage("evaluate").main(declared("evaluate", params=tmp_path / f"p{views}.yaml",
                                        table_out=tmp_path / f"r{views}.md", csv_out=tmp_path / f"r{views}.csv",
                                        metrics_out=tmp_path / f"m{views}") + ["--skip-baselines"])
        scored[views] = read(tmp_path / f"m{views}" / "scores.json"), read(tmp_path / f"m{views}" / "metrics.json")
    (one, one_headline), (five, five_headline) = scored[1], scored[5]
    assert "one_view" not in one and not {"boards_views", "visual_views"} & set(one_headline)
    assert five["one_view"] == one["no_proofreader"]
    assert five_headline["boards"] == one_headline["boards"]
    assert five_headline["boards_views"] == round(five["no_proofreader"]["board_accuracy"], 4)
    models = [row.split(",")[0] for row in (tmp_path / "r5.csv").read_text().splitlines()[1:]]
    assert models[:3] == ["Ours", "Ours + 5 views", "Ours + re-read + 5 views"]
    assert "Ours + re-read + 5 views + check" in models


def test_zero_proofreader_epochs_train_no_proofreader(workdir, ungrounded_run, tmp_path):
    """baseline_nonvisual.proofread_epochs 0 means none, as for the visual baselines: no
    proofreader is trained, saved or scored, and error_injection has no proofreader rows."""
    params = {**PARAMS, "baseline_nonvisual": {**PARAMS["baseline_nonvisual"], "proofread_epochs": 0}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    outs = {"params": tmp_path / "params.yaml", "model_out": tmp_path / "nv.pt",
            "proofread_model_out": tmp_path / "nv_pr.pt", "metrics_out": tmp_path / "m_nv"}
    stage("baseline_nonvisual").main(declared("baseline_nonvisual", **outs))
    assert set(read(tmp_path / "m_nv" / "scores.json")) == {"no_proofreader"}
    assert "proofread" not in read(tmp_path / "m_nv" / "info.json")["last_epoch"]
    assert torch.load(tmp_path / "nv_pr.pt", weights_only=True)["config"]["proofreader"] is False
    stage("error_injection").main(declared("error_injection", params=tmp_path / "params.yaml",
                                           model=tmp_path / "nv.pt", proofread_model=tmp_path / "nv_pr.pt",
                                           table_out=tmp_path / "e.md", csv_out=tmp_path / "e.csv",
                                           metrics_out=tmp_path / "m_e"))
    assert set(read(tmp_path / "m_e" / "info.json")) == {"no_proofreader"}


def test_zero_epochs_mean_not_run_for_the_baselines_and_the_proofreader(workdir, ungrounded_run, tmp_path):
    """baseline_visual.epochs, baseline_nonvisual.epochs and proofread.epochs 0: nothing is
    trained or scored, error injection is skipped, and evaluate's table has only our rows
    without a proofreader (a profile that leaves the baselines to one of their own)."""
    params = {**PARAMS, "proofread": {**PARAMS["proofread"], "epochs": 0},
              "baseline_visual": {**PARAMS["baseline_visual"], "epochs": 0},
              "baseline_nonvisual": {**PARAMS["baseline_nonvisual"], "epochs": 0}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    paths = {"params": tmp_path / "params.yaml"}
    absent = tmp_path / "no_boards"  # a stage that does not run reads no boards
    for name in ("baseline_grounded", "baseline_ungrounded"):
        stage("baseline_visual").main(declared(name, **paths, prepared=absent, model_out=tmp_path / f"{name}.pt",
                                               metrics_out=tmp_path / name))
        assert read(tmp_path / name / "scores.json") == {}
        assert read(tmp_path / name / "metrics.json") == {}
    stage("baseline_nonvisual").main(declared("baseline_nonvisual", **paths, prepared=absent, model_out=tmp_path / "nv.pt",
                                              proofread_model_out=tmp_path / "nv_pr.pt",
                                              metrics_out=tmp_path / "baseline_nonvisual"))
    assert read(tmp_path / "baseline_nonvisual" / "scores.json") == {}
    stage("error_injection").main(declared("error_injection", **paths, prepared=absent, model=tmp_path / "nv.pt",
                                           proofread_model=tmp_path / "nv_pr.pt", table_out=tmp_path / "e.md",
                                           csv_out=tmp_path / "e.csv", metrics_out=tmp_path / "m_e"))
    assert "not run" in (tmp_path / "e.md").read_text()
    stage("proofread").main(declared("proofread", **paths, prepared=absent,
                                     model_out=tmp_path / "pr.pt", metrics_out=tmp_path / "m_pr"))
    assert torch.load(tmp_path / "pr.pt", weights_only=True)["config"]["proofreader"] is False
    stage("evaluate").main(declared("evaluate", **paths, solver_proofread=tmp_path / "pr.pt",
                                    baseline_grounded=tmp_path / "baseline_grounded",
                                    baseline_ungrounded=tmp_path / "baseline_ungrounded",
                                    baseline_nonvisual=tmp_path / "baseline_nonvisual",
                                    table_out=tmp_path / "r.md", csv_out=tmp_path / "r.csv",
                                    metrics_out=tmp_path / "m_ev"))
    rows = (tmp_path / "r.csv").read_text().splitlines()[1:]
    assert [row.split(",")[0] for row in rows] == ["Ours", "Ours + re-read", "Ours + re-read + check"]
    assert all(",ungrounded,no," in row for row in rows)
    assert not {"boards_pr", "boards_pr_checked"} & set(read(tmp_path / "m_ev" / "metrics.json"))
    assert set(read(tmp_path / "m_ev" / "scores.json")) == {"no_proofreader", "reread", "checked"}


def test_inject_errors_changes_exactly_n_given_digits():
    module = stage("error_injection")
    from satground.boards.data import Boards

    gen = np.random.default_rng(0)
    labels = torch.from_numpy(gen.integers(1, K + 1, size=(30, 16)).astype(np.uint8))
    is_input = torch.from_numpy(gen.random((30, 16)) < 0.4)
    is_input[:, 0] = True
    boards = Boards(2, torch.zeros(1, 28, 28, dtype=torch.uint8), torch.zeros(30, 16, dtype=torch.long),
                    is_input, labels)
    for n in (1, 2, 3):
        corrupted = module.inject_errors(boards, n, np.random.default_rng(n))
        changed = corrupted.labels != labels
        assert not changed[~is_input].any()
        assert torch.equal(changed.sum(1), torch.clamp(is_input.sum(1), max=n))
        assert ((corrupted.labels >= 1) & (corrupted.labels <= K)).all()


def test_parameter_and_input_errors_are_one_line_and_named(workdir, tmp_path):
    bad = dict(PARAMS, ground=dict(PARAMS["ground"], approxmax="mean"))
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(bad))
    with pytest.raises(PipelineError, match="ground.approxmax"):
        stage("ground").main(declared("ground", params=tmp_path / "bad.yaml"))
    save_classifier(LeNet(9), tmp_path / "lenet9.pt")
    with pytest.raises(PipelineError, match="lenet9.pt"):
        stage("ground").main(declared("ground", classifier=tmp_path / "lenet9.pt"))
    (tmp_path / "perm.json").write_text(json.dumps({"permutation": [0, 0, 1, 2]}))
    with pytest.raises(PipelineError, match="perm.json"):
        stage("train").main(declared("train", permutation=tmp_path / "perm.json"))
    with pytest.raises(PipelineError, match="nothing.pt"):
        stage("proofread").main(declared("proofread", model=tmp_path / "nothing.pt"))
    with pytest.raises(PipelineError, match="nothing.pt"):
        stage("reread").main(declared("reread", model=tmp_path / "nothing.pt",
                                      metrics_out=tmp_path / "m_reread"))
    assert not (tmp_path / "m_reread").exists()  # nothing half-written
    bad = dict(PARAMS, reread={"reader": "resnet"})
    (tmp_path / "bad_reader.yaml").write_text(yaml.safe_dump(bad))
    with pytest.raises(PipelineError, match="reread.reader"):
        stage("reread").main(declared("reread", params=tmp_path / "bad_reader.yaml"))


def test_permutation_plot_is_scaled_to_its_data_and_marks_the_hard_permutation():
    # P_hat's entries sit close together (all near 1/K): a colour scale from 0 shows one flat square
    P = torch.full((K, K), 0.55)
    P[torch.arange(K), PLANTED] = 0.58
    fig = stage("ground").plot_permutation(P, PLANTED)
    ax = fig.axes[0]
    assert ax.images[0].get_clim() == pytest.approx((0.55, 0.58))
    marks = ax.collections[0].get_offsets()
    assert [tuple(xy) for xy in marks] == [(float(PLANTED[c]), float(c)) for c in range(K)]


class Killed(Exception):
    """Stands for the machine going away mid-epoch."""


@pytest.mark.parametrize("name, decay_epochs", [("ground", 0), ("train", 0), ("train", 2)])
def test_a_killed_stage_resumes_after_its_last_finished_epoch(workdir, ungrounded_run, tmp_path,
                                                              monkeypatch, capsys, name, decay_epochs):
    """The resumed run ends with the uninterrupted run's weights and curves, the learning-rate
    decay's place included (a decay restarted from its first batch would change the weights)."""
    import satground.solver.training

    params = {**PARAMS, "ground": {**PARAMS["ground"], "epochs": 3, "patience": 3},
              "train": {**PARAMS["train"], "epochs": 3, "decay_epochs": decay_epochs}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))

    def run(folder: Path):
        outs = {"model_out": folder / "model.pt", "metrics_out": folder / "metrics"}
        if name == "ground":
            outs.update(permutation_out=folder / "permutation.json", plot_out=folder / "permutation.png")
        stage(name).main(declared(name, params=tmp_path / "params.yaml", resume_dir=tmp_path / name, **outs))

    run(tmp_path / "whole")
    assert list((tmp_path / name).iterdir()) == []  # a finished loop leaves no resume file

    real, calls = satground.solver.training.train_epoch, []

    def dies_in_epoch_3(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise Killed
        return real(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(satground.solver.training, "train_epoch", dies_in_epoch_3)
        with pytest.raises(Killed):
            run(tmp_path / "resumed")
    assert not (tmp_path / "resumed" / "model.pt").exists()
    capsys.readouterr()
    run(tmp_path / "resumed")
    assert "resuming after epoch 2" in capsys.readouterr().out

    whole, resumed = (torch.load(tmp_path / run_name / "model.pt", weights_only=False)["solver"]
                      for run_name in ("whole", "resumed"))
    assert whole.keys() == resumed.keys() and all(torch.equal(whole[k], resumed[k]) for k in whole)
    curves = tmp_path / "whole" / "metrics" / "plots" / "metrics"
    for curve in curves.glob("*.tsv"):
        again = tmp_path / "resumed" / "metrics" / "plots" / "metrics" / curve.name
        assert again.read_text() == curve.read_text(), curve.name
    assert read(tmp_path / "whole" / "metrics" / "info.json") == read(tmp_path / "resumed" / "metrics" / "info.json")


def test_sigterm_stops_a_queued_run_in_one_line_and_a_new_workspace_resumes_it_to_the_same_model(
        workdir, ungrounded_run, tmp_path, monkeypatch, capsys):
    """SIGTERM mid-epoch (a queue stopped, a laptop closed): exit 143 with one line saying how to
    resume, no output and no temporary file. DVC then deletes a queued experiment's temporary
    workspace; the rerun, in a new one, resumes after the last whole epoch from the resume folder
    outside the workspace, and ends with the weights of a run never stopped."""
    import signal

    import satground.solver.training
    from satground.harness.stage import run_stage

    monkeypatch.setenv("SATGROUND_RESUME_DIR", str(tmp_path / "cache"))
    params = {**PARAMS, "train": {**PARAMS["train"], "epochs": 3, "decay_epochs": 1}}

    def run(workspace: Path):  # as `dvc exp run --queue` does: a copy of the workspace
        workspace.mkdir(exist_ok=True)
        (workspace / "params.yaml").write_text(yaml.safe_dump(params))
        argv = declared("train", params=workspace / "params.yaml", model_out=workspace / "model.pt",
                        metrics_out=workspace / "metrics")
        assert "--resume-dir" not in argv  # dvc.yaml leaves it at its default
        run_stage(lambda: stage("train").main(argv))

    run(tmp_path / "whole")
    real, calls = satground.solver.training.train_epoch, []

    def terminated_in_epoch_2(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(satground.solver.training, "train_epoch", terminated_in_epoch_2)
        capsys.readouterr()
        with pytest.raises(SystemExit) as exc:
            run(tmp_path / "queued")
    assert exc.value.code == 128 + signal.SIGTERM
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: stopped by SIGTERM; nothing half-written was left"), err
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is put back
    assert not (tmp_path / "queued" / "model.pt").exists()
    assert [p.name for p in (tmp_path / "cache").iterdir() if p.name.startswith(".")] == []
    shutil.rmtree(tmp_path / "queued")  # DVC removes the stopped experiment's workspace
    run(tmp_path / "requeued")
    assert "resuming after epoch 1" in capsys.readouterr().out
    assert list((tmp_path / "cache").iterdir()) == []  # a finished loop deletes its file
    whole, resumed = (torch.load(tmp_path / name / "model.pt", weights_only=False)["solver"]
                      for name in ("whole", "requeued"))
    assert all(torch.equal(whole[k], resumed[k]) for k in whole)


def test_a_read_only_resume_folder_stops_the_stage_before_any_work(workdir, ungrounded_run, tmp_path,
                                                                   monkeypatch):
    from satground.harness.io import PipelineError

    (tmp_path / "params.yaml").write_text(yaml.safe_dump(PARAMS))
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    folder.chmod(0o500)
    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != folder and os.path.exists(path))
    with pytest.raises(PipelineError) as exc:
        stage("train").main(declared("train", params=tmp_path / "params.yaml", resume_dir=folder,
                                     model_out=tmp_path / "model.pt", metrics_out=tmp_path / "metrics"))
    assert str(exc.value) == f"{folder}: cannot write here ({folder} is not a writable folder)"
    assert not (tmp_path / "metrics").exists()


def test_the_learning_rates_fall_linearly_over_the_last_epochs():
    from satground.solver.training import linear_decay

    weight = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([{"params": [weight], "lr": 0.4}, {"params": [], "lr": 0.8}])
    scheduler = linear_decay(optimizer, epochs=3, decay_epochs=2, batches_per_epoch=2)
    seen = []
    for _ in range(6):  # 3 epochs of 2 batches: the lr each batch trains at
        seen.append([group["lr"] for group in optimizer.param_groups])
        optimizer.step()
        scheduler.step()
    assert np.allclose(seen, [[0.4 * f, 0.8 * f] for f in (1, 1, 1, 3 / 4, 2 / 4, 1 / 4)])
    assert [group["lr"] for group in optimizer.param_groups] == [0.0, 0.0]


def test_a_resume_file_of_another_run_is_not_used(workdir, ungrounded_run, tmp_path, monkeypatch,
                                                  capsys):
    """A run stopped after epoch 1 leaves its resume file; a run with another parameter starts
    from epoch 1 beside it (files are keyed by the run's fingerprint), and the stopped run still
    resumes from its own."""
    import satground.solver.training

    monkeypatch.setenv("SATGROUND_RESUME_DIR", str(tmp_path / "cache"))

    def run(lr, epochs=2):
        params = {**PARAMS, "train": {**PARAMS["train"], "epochs": epochs, "classifier_lr": lr}}
        (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
        stage("train").main(declared("train", params=tmp_path / "params.yaml",
                                     model_out=tmp_path / "model.pt", metrics_out=tmp_path / "metrics"))

    real, calls = satground.solver.training.train_epoch, []

    def failing_in_epoch_2(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("machine lost")
        return real(*args, **kwargs)

    with monkeypatch.context() as patch, pytest.raises(RuntimeError):
        patch.setattr(satground.solver.training, "train_epoch", failing_in_epoch_2)
        run(lr=1e-5)
    stopped = list((tmp_path / "cache").iterdir())
    assert len(stopped) == 1
    capsys.readouterr()
    run(lr=2e-5)
    assert "resuming" not in capsys.readouterr().out
    curve = (tmp_path / "metrics" / "plots" / "metrics" / "loss.tsv").read_text().splitlines()
    assert len(curve) == 1 + 2
    assert list((tmp_path / "cache").iterdir()) == stopped
    run(lr=1e-5)
    assert "resuming after epoch 1" in capsys.readouterr().out


