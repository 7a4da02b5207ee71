"""Clustering accuracy, InfoGAN, the clusterer registry and the `cluster` stage."""
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from satground.boards import sudoku
from satground.clustering import infogan
from satground.clustering import load_clusterer, save_clusterer
from satground.clustering.infogan import InfoGANClusterer
from satground.harness.io import PipelineError
from satground.boards.metrics import clustering_accuracy, peer_conflict_rate, restart_agreement

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "stages"))

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def outside_the_repo(tmp_path, monkeypatch):
    # dvclive looks for a DVC/Git repo from the working directory (and runs `dvc init` in a Git
    # repo without one): run the stages where there is neither.
    monkeypatch.chdir(tmp_path)


# ---------------------------------------------------------------------------------------------
# tiny prepared data in the contract's format (4x4 boards, K = 4 digits)


def digit_images(digits: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Easy 'digits': digit d is a bright 10x10 square in quadrant d-1, jittered, with noise."""
    images = rng.integers(0, 40, size=(len(digits), 28, 28)).astype(np.uint8)
    for i, d in enumerate(digits):
        r0, c0 = 2 + 12 * ((d - 1) // 2) + rng.integers(-2, 3), 2 + 12 * ((d - 1) % 2) + rng.integers(-2, 3)
        images[i, r0:r0 + 10, c0:c0 + 10] = rng.integers(180, 256, size=(10, 10))
    return images


def write_split(root: Path, split: str, n_boards: int, n_images: int, rng) -> None:
    """Valid 4x4 solutions; each given cell shows an image of its digit, every pool image
    in some given cell where the boards allow it."""
    K, C = 4, 16
    image_labels = np.tile(np.arange(1, K + 1), n_images // K + 1)[:n_images]
    rng.shuffle(image_labels)
    images = digit_images(image_labels, rng)
    _, solution = sudoku.generate_puzzles(n_boards, 2, seed=int(rng.integers(2**31)))
    solution = solution.astype(np.uint8)
    is_input = np.zeros((n_boards, C), bool)
    cell_image = np.full((n_boards, C), -1, np.int64)
    unused = {d: [i for i in range(n_images) if image_labels[i] == d] for d in range(1, K + 1)}
    for b in range(n_boards):
        for c in rng.choice(C, size=6, replace=False):
            is_input[b, c] = True
            digit = int(solution[b, c])
            pool = unused[digit] or list(np.flatnonzero(image_labels == digit))
            img = pool.pop() if unused[digit] else int(rng.choice(pool))
            cell_image[b, c] = img
    labels = np.where(is_input, 0, solution).astype(np.uint8)
    torch.save({"board_size": 2, "images": torch.from_numpy(images),
                "cell_image": torch.from_numpy(cell_image), "is_input": torch.from_numpy(is_input),
                "labels": torch.from_numpy(labels)}, root / f"{split}.pt")
    torch.save({"labels": torch.from_numpy(solution)}, root / f"{split}_grounded.pt")
    torch.save({"input_labels": torch.from_numpy(np.where(is_input, solution, 0).astype(np.uint8)),
                "image_labels": torch.from_numpy(image_labels.astype(np.uint8))},
               root / f"{split}_truth.pt")


def make_prepared(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    write_split(root, "train", n_boards=16, n_images=32, rng=rng)
    write_split(root, "dev", n_boards=6, n_images=24, rng=rng)
    write_split(root, "test", n_boards=6, n_images=24, rng=rng)
    return root


def write_params(path: Path, rule_aware: bool = False, **sections) -> Path:
    import yaml

    from stage_commands import four_by_four

    params = {"rule_aware": rule_aware,
              "cluster": {"method": "infogan", "epochs": 2, "batch_size": 16, "lr_d": 2e-4, "lr_g": 1e-3,
                          "noise_dim": 62, "n_cont": 2, "cont_weight": 0.1, "checkpoint_every": 1,
                          "seed": 0},
              "distill": {"epochs": 3, "batch_size": 16, "lr": 1e-3, "seed": 0}}
    for name, values in sections.items():
        params[name].update(values)
    path.write_text(yaml.safe_dump(four_by_four(params)))
    return path


def run_cluster(tmp_path: Path, data: Path, name: str = "run", rule_aware: bool = False, **overrides) -> Path:
    import cluster

    out = tmp_path / name
    params = write_params(tmp_path / f"{name}.yaml", rule_aware, cluster=overrides)
    cluster.main(["--params", str(params), "--prepared", str(data), "--model-out", str(out / "models"),
                  "--samples-plot-out", str(out / "plots" / "cluster_samples.png"),
                  "--confusion-plot-out", str(out / "plots" / "cluster_confusion.png"),
                  "--metrics-out", str(out / "live")])
    return out


# ---------------------------------------------------------------------------------------------
# Hungarian clustering accuracy


def test_accuracy_of_a_permuted_labelling_is_one():
    labels = np.random.default_rng(0).integers(0, 9, size=500)
    perm = np.array([3, 7, 0, 8, 1, 5, 2, 6, 4])
    assert clustering_accuracy(perm[labels], labels, 9) == 1.0


def test_accuracy_of_a_known_confusion():
    # counts[c, d]: cluster c, digit d. Best one-to-one: c0->d0 (5), c1->d2 (3), c2->d1 (4).
    counts = np.array([[5, 1, 0], [2, 0, 3], [0, 4, 0]])
    clusters = np.repeat(np.repeat(np.arange(3), 3), counts.ravel())
    labels = np.repeat(np.tile(np.arange(3), 3), counts.ravel())
    assert clustering_accuracy(clusters, labels, 3) == pytest.approx(12 / 15)
    # greedy matching would give both clusters digit 0; the one-to-one optimum is c0->d1, c1->d0
    clusters = np.array([0, 0, 0, 0, 0, 1, 1, 1])
    labels = np.array([0, 0, 0, 1, 1, 0, 0, 0])
    assert clustering_accuracy(clusters, labels, 2) == pytest.approx(5 / 8)


# ---------------------------------------------------------------------------------------------
# InfoGAN


def test_infogan_parameter_counts():
    counts = infogan.parameter_counts(infogan.InfoGAN(9))
    assert counts == {"generator": 6_631_808, "trunk": 6_556_992, "d_head": 1_025, "q_head": 133_005,
                      "classifier_path": 6_689_997, "total": 13_322_830}
    # the paper's "7,307,997" = trunk + Q head at K=9 + SATNet's S ((729 + 1 + 300) x 600)
    assert counts["classifier_path"] + 1030 * 600 == 7_307_997


def test_infogan_learns_its_codes_on_a_tiny_set():
    rng = np.random.default_rng(1)
    images = torch.from_numpy(digit_images(np.tile(np.arange(1, 5), 8), rng))
    torch.manual_seed(0)
    model = infogan.InfoGAN(4, noise_dim=16)
    opt_d, opt_g = infogan.make_optimizers(model, 2e-4, 1e-3)
    gen = torch.Generator().manual_seed(0)
    history = [infogan.adversarial_epoch(model, opt_d, opt_g, images, 16, gen) for _ in range(4)]
    assert set(history[0]) == {"loss_d", "loss_g", "loss_q_cat", "loss_q_cont"}
    assert all(np.isfinite(v) for h in history for v in h.values())
    # Q recovers the categorical code from G's images: its loss falls from ~log(4)
    assert history[-1]["loss_q_cat"] < history[0]["loss_q_cat"] - 0.2
    clusters = InfoGANClusterer(model).assign(images)
    assert clusters.dtype == torch.long and clusters.shape == (32,)
    assert int(clusters.min()) >= 0 and int(clusters.max()) < 4
    assert infogan.sample_grid(model, 5, gen).shape == (4, 5, 28, 28)


def test_batch_norm_calibration_uses_real_image_statistics():
    torch.manual_seed(0)
    model = infogan.InfoGAN(4, noise_dim=8)
    images = torch.from_numpy(digit_images(np.tile(np.arange(1, 5), 10), np.random.default_rng(3)))
    infogan.calibrate_batch_norm(model, images, batch_size=64)
    conv2 = model.trunk.conv[:3]  # conv 64 -> LeakyReLU -> conv 128, the input of the first BN
    with torch.no_grad():
        features = conv2(images.float().div(255).unsqueeze(1))
    bn = model.trunk.conv[3]
    assert torch.allclose(bn.running_mean, features.mean(dim=(0, 2, 3)), atol=1e-5)
    assert torch.allclose(bn.running_var, features.var(dim=(0, 2, 3)), rtol=1e-3)
    assert bn.momentum == 0.1 and model.training
    # eval-mode clusters do not depend on which other images share the batch
    clusterer = InfoGANClusterer(model)
    assert torch.equal(clusterer.assign(images)[:5], clusterer.assign(images[:5]))


def test_clusterer_checkpoint_round_trip(tmp_path):
    torch.manual_seed(0)
    clusterer = InfoGANClusterer(infogan.InfoGAN(4, noise_dim=8, n_cont=1))
    images = torch.from_numpy(digit_images(np.arange(1, 5).repeat(5), np.random.default_rng(2)))
    save_clusterer(clusterer, tmp_path / "c.pt", epoch=3)
    loaded = load_clusterer(tmp_path / "c.pt")
    assert loaded.model.config() == {"n_classes": 4, "noise_dim": 8, "n_cont": 1}
    assert torch.equal(loaded.assign(images), clusterer.assign(images))
    assert torch.load(tmp_path / "c.pt", weights_only=False)["epoch"] == 3


def test_load_clusterer_errors_name_the_file(tmp_path):
    with pytest.raises(PipelineError, match="missing.pt"):
        load_clusterer(tmp_path / "missing.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a torch file")
    with pytest.raises(PipelineError, match="junk.pt"):
        load_clusterer(tmp_path / "junk.pt")
    torch.save({"method": "kmeans", "config": {}, "state_dict": {}}, tmp_path / "other.pt")
    with pytest.raises(PipelineError, match="unknown clustering method 'kmeans'"):
        load_clusterer(tmp_path / "other.pt")


# ---------------------------------------------------------------------------------------------
# the stage


CLUSTER_KEYS = {"method", "seed", "epochs", "n_clusters", "n_train_images", "n_fit_images", "n_dev_images",
                "dev_accuracy", "train_largest_cluster", "loss_d", "loss_g", "loss_q_cat",
                "loss_q_cont", "parameters", "parameters_classifier_path", "device", "peer_conflicts",
                "restarts", "code_information", "restart_choice"}


class RecordingDict(dict):
    """A dict that remembers which keys were read."""

    def __init__(self, *args, log):
        super().__init__(*args)
        self.log = log

    def __getitem__(self, key):
        self.log.append(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self.log.append(key)
        return super().get(key, default)

    def _all(self):
        self.log.append("*")  # iterating the truth dict would expose input_labels too

    def items(self):
        self._all()
        return super().items()

    def values(self):
        self._all()
        return super().values()


def record_loads(monkeypatch):
    """Record every file torch.load opens and every key read from a truth file."""
    import satground.boards.data

    opened, truth_keys = [], []
    real_load, real_truth = torch.load, satground.boards.data.load_truth

    def load(f, *args, **kwargs):
        opened.append(Path(f).name)
        return real_load(f, *args, **kwargs)

    def load_truth(root, split):
        return RecordingDict(real_truth(root, split), log=truth_keys)

    monkeypatch.setattr(torch, "load", load)
    monkeypatch.setattr(satground.boards.data, "load_truth", load_truth)
    return opened, truth_keys


@pytest.fixture(scope="module")
def stage_runs(tmp_path_factory):
    """The stage run twice on the same boards (InfoGAN is slow: shared by the tests below):
    with the truth files, recording what it loads, and without them."""
    tmp = tmp_path_factory.mktemp("cluster_stage")
    data = make_prepared(tmp / "prepared")
    blind = tmp / "blind"
    blind.mkdir()
    for split in ("train", "dev"):
        shutil.copy(data / f"{split}.pt", blind / f"{split}.pt")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp)
        opened, truth_keys = record_loads(mp)
        with_truth = run_cluster(tmp, data, "with", epochs=3, checkpoint_every=2)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp)
        without = run_cluster(tmp, blind, "without", epochs=3, checkpoint_every=2)
    return {"with": with_truth, "without": without, "opened": opened, "truth_keys": truth_keys}


def test_cluster_stage_writes_its_artifacts(stage_runs):
    out = stage_runs["with"]
    metrics = json.loads((out / "live" / "info.json").read_text())
    assert set(metrics) == CLUSTER_KEYS
    assert metrics["n_train_images"] == metrics["n_fit_images"] == 32 and metrics["n_dev_images"] == 24
    assert metrics["n_clusters"] == 4
    assert 0.25 <= metrics["dev_accuracy"] <= 1
    # epoch 0 (untrained init), every 2nd epoch, and the last one
    assert sorted(p.name for p in (out / "models").iterdir()) == [
        "epoch_000.pt", "epoch_002.pt", "epoch_003.pt", "final.pt"]
    assert load_clusterer(out / "models" / "epoch_000.pt").n_clusters == 4
    assert (out / "plots" / "cluster_samples.png").stat().st_size > 0
    assert (out / "plots" / "cluster_confusion.png").stat().st_size > 0
    tsv = (out / "live" / "plots" / "metrics" / "dev_accuracy.tsv").read_text().splitlines()
    assert tsv[0].split("\t") == ["step", "dev_accuracy"] and len(tsv) == 1 + 4  # epochs 0..3
    assert (out / "live" / "plots" / "metrics" / "loss_q_cat.tsv").is_file()
    # the metrics file holds the headline value only (no curve's last point, no step)
    assert json.loads((out / "live" / "metrics.json").read_text()) == {
        "cluster_dev_accuracy": round(metrics["dev_accuracy"], 4)}
    assert json.loads((out / "live" / "timing.json").read_text())["seconds_per_epoch"] > 0


def test_cluster_stage_never_reads_input_labels_nor_test_boards(stage_runs):
    """The training boards' images, the dev boards' images and their digits (to report): no
    test file, no truth of the training images."""
    assert set(stage_runs["opened"]) == {"train.pt", "dev.pt", "dev_truth.pt"}
    assert set(stage_runs["truth_keys"]) == {"image_labels"}


def test_cluster_stage_trains_identically_without_truth(stage_runs):
    with_truth, without = stage_runs["with"], stage_runs["without"]
    for name in ("epoch_000.pt", "final.pt"):
        a = torch.load(with_truth / "models" / name, weights_only=False)["state_dict"]
        b = torch.load(without / "models" / name, weights_only=False)["state_dict"]
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    metrics = json.loads((without / "live" / "info.json").read_text())
    assert set(metrics) == CLUSTER_KEYS
    assert metrics["dev_accuracy"] is None
    assert not (without / "live" / "plots" / "metrics" / "dev_accuracy.tsv").exists()
    assert json.loads((without / "live" / "metrics.json").read_text()) == {}
    assert (without / "plots" / "cluster_confusion.png").is_file()


def test_cluster_stage_rejects_bad_params(tmp_path):
    data = make_prepared(tmp_path / "prepared")
    with pytest.raises(PipelineError, match="cluster.method"):
        run_cluster(tmp_path, data, method="kmeans")
    with pytest.raises(PipelineError, match="batch_size"):
        run_cluster(tmp_path, data, batch_size=1000)
    with pytest.raises(PipelineError, match="cluster.restarts"):
        run_cluster(tmp_path, data, restarts=0)
    # `-S cluster.restarts=2` on a rule-free profile: the selection reads the Sudoku rules
    with pytest.raises(PipelineError, match=r"'cluster.restarts: 2' reads the Sudoku rules .*'rule_aware' is false"):
        run_cluster(tmp_path, data, restarts=2)


# ---------------------------------------------------------------------------------------------
# restarts: several seeds, the run with the fewest peer conflicts kept


def test_peer_conflict_rate_counts_peers_put_in_one_cluster():
    from scipy.sparse import csr_matrix

    # cannot-links (0, 1), (0, 2), (1, 3), symmetric as peer_cannot_links gives them
    links = csr_matrix(np.array([[0, 1, 1, 0], [1, 0, 0, 1], [1, 0, 0, 0], [0, 1, 0, 0]], float))
    assert peer_conflict_rate(torch.tensor([0, 1, 2, 0]), links) == 0
    assert peer_conflict_rate(torch.tensor([0, 0, 1, 0]), links) == pytest.approx(2 / 3)
    assert peer_conflict_rate(torch.zeros(4, dtype=torch.long), links) == 1


def state(path: Path) -> dict:
    return torch.load(path, weights_only=False)["state_dict"]


def test_restarts_keep_the_run_with_the_fewest_peer_conflicts(tmp_path):
    data = make_prepared(tmp_path / "prepared")
    torch.set_num_threads(2)  # InfoGAN's restarts then train side by side, each on one thread
    try:
        out = run_cluster(tmp_path, data, "restarts", rule_aware=True, epochs=1, checkpoint_every=1,
                          restarts=3, seed=5)
    finally:
        torch.set_num_threads(1)
    info = json.loads((out / "live" / "info.json").read_text())
    runs = info["restarts"]
    assert [run["seed"] for run in runs] == [5, 6, 7]
    conflicts = [run["peer_conflicts"] for run in runs]
    assert len(set(conflicts)) == 3  # the runs differ, so the choice is a real one
    kept = runs[conflicts.index(min(conflicts))]
    assert (info["seed"], info["peer_conflicts"], info["dev_accuracy"]) == (
        kept["seed"], kept["peer_conflicts"], kept["dev_accuracy"])
    assert sorted(p.name for p in (out / "models").iterdir()) == ["epoch_000.pt", "epoch_001.pt", "final.pt"]
    # the files kept are that run's: the same as one run with its seed, alone on one thread
    single = run_cluster(tmp_path, data, "single", epochs=1, checkpoint_every=1, seed=kept["seed"])
    for name in ("epoch_000.pt", "final.pt"):
        a, b = state(out / "models" / name), state(single / "models" / name)
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    # each restart's curves under restart_<r>/, the kept run's under the plain names
    curves = out / "live" / "plots" / "metrics"
    assert all((curves / f"restart_{r}" / "peer_conflicts.tsv").is_file() for r in range(3))
    kept_curve = (curves / f"restart_{kept['restart']}" / "dev_accuracy.tsv").read_text().splitlines()
    assert (curves / "dev_accuracy.tsv").read_text().splitlines()[1:] == kept_curve[1:]


def test_restarts_of_a_training_free_method(tmp_path):
    data = make_prepared(tmp_path / "prepared")
    out = run_cluster(tmp_path, data, method="spectral", restarts=2, rule_aware=True)
    info = json.loads((out / "live" / "info.json").read_text())
    assert [run["seed"] for run in info["restarts"]] == [0, 1]
    assert info["peer_conflicts"] == min(run["peer_conflicts"] for run in info["restarts"])
    assert [p.name for p in (out / "models").iterdir()] == ["final.pt"]


def test_fit_sample_is_a_seeded_draw_or_every_image():
    from satground.clustering.fitting import fit_sample

    draw = fit_sample(100, 30, seed=4)
    assert len(draw) == 30 and len(set(draw.tolist())) == 30 and torch.equal(draw, draw.sort().values)
    assert torch.equal(draw, fit_sample(100, 30, seed=4))
    assert not torch.equal(draw, fit_sample(100, 30, seed=5))
    for every in (0, 100, 500):
        assert torch.equal(fit_sample(100, every, seed=4), torch.arange(100))


def test_cluster_fit_images_fits_on_a_draw_and_assigns_every_image(tmp_path):
    """The peers method reads the cannot-links of the drawn images only; the kept clusterer
    still assigns every training image (the samples plot), and the draw changes the fit."""
    data = make_prepared(tmp_path / "prepared")
    runs = {n: run_cluster(tmp_path, data, f"fit{n}", rule_aware=True, method="peers", fit_images=n)
            for n in (0, 16)}
    info = {n: json.loads((out / "live" / "info.json").read_text()) for n, out in runs.items()}
    assert (info[0]["n_fit_images"], info[16]["n_fit_images"]) == (32, 16)
    assert info[0]["n_train_images"] == info[16]["n_train_images"] == 32
    models = {n: torch.load(out / "models" / "final.pt", weights_only=False) for n, out in runs.items()}
    first = {n: next(iter(m["state_dict"].values())) for n, m in models.items()}
    assert first[0].shape != first[16].shape or not torch.equal(first[0], first[16])
    assert (runs[16] / "plots" / "cluster_samples.png").stat().st_size > 0


# ---------------------------------------------------------------------------------------------
# label- and rule-free restart choices; InfoGAN's augmentation


def test_restart_agreement_prefers_the_runs_that_agree():
    truth = torch.arange(40) % 4
    relabelled = (truth + 1) % 4  # the same partition under other cluster numbers
    noise = torch.from_numpy(np.random.default_rng(0).integers(0, 4, 40))
    scores = restart_agreement([truth, relabelled, noise])
    assert scores[0] == pytest.approx(scores[1]) and scores[0] > 0.4 > scores[2]
    assert restart_agreement([truth]) == [None]


def test_code_information_is_one_for_sure_even_codes_and_zero_for_one_answer():
    even = torch.eye(4).repeat(5, 1)
    assert infogan.code_information(even) == pytest.approx(1.0)
    assert infogan.code_information(torch.full((20, 4), 0.25)) == pytest.approx(0.0, abs=1e-6)
    assert infogan.code_information(torch.eye(4)[torch.zeros(20, dtype=torch.long)]) == pytest.approx(0.0, abs=1e-6)


def test_translate_moves_each_image_and_passes_gradients():
    images = torch.zeros(64, 1, 8, 8)
    images[:, 0, 4, 4] = 1.0
    images.requires_grad_(True)
    moved = infogan.translate(images, 2, torch.Generator().manual_seed(0))
    where = moved.detach().flatten(1).argmax(1)
    rows, cols = where // 8 - 4, where % 8 - 4
    assert moved.detach().sum(dim=(1, 2, 3)).eq(1).all()  # nothing lost: the offset stays inside
    assert rows.abs().max() == 2 and cols.abs().max() == 2 and len(set(zip(rows.tolist(), cols.tolist()))) > 10
    moved.sum().backward()  # a pixel is moved, not copied: gradient 1 if it lands inside, else 0
    assert torch.equal(images.grad[:, 0, 4, 4], torch.ones(64))
    assert torch.equal(images.grad.sum(dim=(1, 2, 3)), ((8 - rows.abs()) * (8 - cols.abs())).float())
    far = infogan.translate(images.detach(), 5, torch.Generator().manual_seed(1))
    assert (far.sum(dim=(1, 2, 3)) == 0).any()  # a dot moved past the edge is gone, not wrapped
    assert infogan.translate(images, 0, torch.Generator()) is images


def test_agreement_restarts_read_no_rule_and_keep_the_most_agreed_run(tmp_path):
    data = make_prepared(tmp_path / "prepared")
    out = run_cluster(tmp_path, data, "agree", epochs=1, checkpoint_every=1, restarts=3,
                      restart_choice="agreement")  # rule_aware false: allowed
    info = json.loads((out / "live" / "info.json").read_text())
    runs = info["restarts"]
    assert all(run["peer_conflicts"] is None for run in runs)  # the peer structure was never built
    scores = [run["criterion"] for run in runs]
    assert info["seed"] == runs[scores.index(max(scores))]["seed"]
    assert info["restart_choice"] == "agreement"
    assert sorted(p.name for p in (out / "models").iterdir()) == ["epoch_000.pt", "epoch_001.pt", "final.pt"]


def test_information_restarts_keep_the_most_informative_run_and_need_infogan(tmp_path):
    data = make_prepared(tmp_path / "prepared")
    out = run_cluster(tmp_path, data, "info", epochs=1, checkpoint_every=1, restarts=2,
                      restart_choice="information", shift=2)
    info = json.loads((out / "live" / "info.json").read_text())
    values = [run["code_information"] for run in info["restarts"]]
    assert info["code_information"] == max(values) and 0 <= max(values) <= 1
    with pytest.raises(PipelineError, match="restart_choice: information.*infogan"):
        run_cluster(tmp_path, data, "bad", method="spectral", restarts=2, restart_choice="information")
