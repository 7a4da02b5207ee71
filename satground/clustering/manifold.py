"""Training-free clusterers for CPU profiles: embed the images' neighbourhood graph, then k-means.

All share the pipeline pixels -> PCA (50 components) -> embedding -> k-means with K clusters
(best of several restarts); new images take the majority cluster of their nearest training
images in PCA space (peers: a support-vector classifier). PCA, k-means and the neighbour search
are scikit-learn's. No labels anywhere. They need no training, where InfoGAN needs minutes of
it on a CPU (their accuracies: docs/studies/clustering.md).

- spectral: k-nearest-neighbour graph with self-tuning Gaussian weights (sigma_i = distance to
  the 7th neighbour, Zelnik-Manor & Perona 2004), the 2K leading eigenvectors of the normalised
  affinity D^-1/2 W D^-1/2, row-normalised. With only K eigenvectors, digits written in two
  styles can take two clusters and two similar digits share one; 2K gives the k-means room to
  separate them.
- umap: UMAP (McInnes et al. 2018, the umap-learn package) to 10 dimensions, min_dist 0 (tight
  clusters, as recommended for clustering).
- peers: the Sudoku rules as label-free evidence. Two given cells of one row, column or box hold
  different digits, so the images they show cannot share a cluster (a cannot-link). The
  embedding is the K leading eigenvectors of the signed graph A - peer_weight * L, where A is the
  spectral method's normalised image affinity and L the normalised cannot-link graph of the
  training boards: k-means then groups images that look alike and are never peers.
"""
from __future__ import annotations

import functools

import numpy as np
import torch
from scipy.sparse import coo_matrix
from scipy.sparse.linalg import eigsh

from ..harness.io import seed_everything


def _features(images: torch.Tensor, mean: torch.Tensor, components: torch.Tensor) -> torch.Tensor:
    """PCA features of uint8 images (the checkpoint keeps the PCA as tensors: mean, components)."""
    x = images.reshape(len(images), -1).float() / 255.0
    return (x - mean) @ components.T


# UMAP computes every pairwise distance below this many points (its small-data path), above it
# an approximate neighbour search
UMAP_EXACT_BELOW = 4096


@functools.cache
def _pair_distances():
    """A compiled (N, D) float32 -> (N, N) float32 loop filling every pair's distance with
    umap's own `euclidean`, as its exact path gets them from scikit-learn (one Python call a
    pair, the diagonal 0): the same numbers, bit for bit, in a fraction of the time."""
    import numba
    from umap.distances import euclidean

    @numba.njit
    def distances(x):
        n = x.shape[0]
        out = np.zeros((n, n), dtype=np.float32)
        for i in range(n):
            for j in range(i + 1, n):
                out[i, j] = euclidean(x[i], x[j])
        return out + out.T
    return distances


def umap_embedding(feats: np.ndarray, n_neighbors: int, n_components: int, seed: int) -> np.ndarray:
    """UMAP (min_dist 0) of feats (N, D) to (N, n_components), as `umap.UMAP(...).fit_transform`
    gives it. For fewer than 4,096 points UMAP finds the exact neighbours from all pairwise
    distances, which it takes one Python call a pair (seconds for a few thousand images); here
    they are computed in one compiled loop and handed to UMAP as its precomputed neighbours,
    from which it builds the same graph and the same embedding (tests/test_manifold.py)."""
    import warnings

    import umap  # imported here: it compiles its numba kernels on import (seconds)
    from umap.utils import fast_knn_indices

    x = np.ascontiguousarray(feats, dtype=np.float32)  # what UMAP computes its distances on
    settings = {"n_neighbors": n_neighbors, "n_components": n_components, "min_dist": 0.0,
                "random_state": seed}
    if n_neighbors < len(x) < UMAP_EXACT_BELOW:
        distances = _pair_distances()(x)
        knn = fast_knn_indices(distances, n_neighbors)
        # "approximation": only the path that takes precomputed neighbours; these are exact
        settings.update(precomputed_knn=(knn, distances[np.arange(len(x))[:, None], knn]),
                        force_approximation_algorithm=True)
    with warnings.catch_warnings():  # "n_jobs overridden by random_state": wanted (repeatable)
        warnings.simplefilter("ignore", UserWarning)
        return umap.UMAP(**settings).fit_transform(x)


def cluster_members(clusters: torch.Tensor, images: torch.Tensor, K: int, n: int = 10):
    """grid (K, n, 28, 28) in [0, 1] of the first n images of each cluster (blank if fewer)."""
    grid = torch.zeros(K, n, 28, 28)
    for k in range(K):
        members = images[clusters == k][:n]
        grid[k, :len(members)] = members.float() / 255.0
    return grid


class ManifoldClusterer:
    """PCA features, an embedding (`embed`, per subclass), k-means; kNN vote for new images."""

    method = ""
    reads_peers = False  # whether it needs the peer given cells' cannot-links (clustering.py)
    parallel_restarts = False  # whether restarts may train side by side on threads (numba, UMAP: no)

    def __init__(self, n_clusters: int, n_neighbors: int, mean, components, train_features,
                 train_clusters):
        self.n_clusters, self.n_neighbors = n_clusters, n_neighbors
        self.mean, self.components = mean, components
        self.train_features, self.train_clusters = train_features, train_clusters

    @staticmethod
    def embed(feats: torch.Tensor, n_clusters: int, n_neighbors: int, seed: int,
              cannot_link=None, peer_weight: float = 0.0) -> np.ndarray:
        raise NotImplementedError

    @classmethod
    def fit(cls, images: torch.Tensor, n_clusters: int, n_components: int = 50,
            n_neighbors: int = 10, seed: int = 0, restarts: int = 10, cannot_link=None,
            peer_weight: float = 0.0):
        """cannot_link: scipy sparse (N, N), 1 where two images may not share a cluster (the
        peers method's evidence; the others ignore it), weighted by peer_weight. k-means keeps the
        lowest-inertia of `restarts` k-means++ starts."""
        from sklearn.cluster import KMeans
        from sklearn.decomposition import PCA

        x = images.reshape(len(images), -1).float().numpy() / 255.0
        pca = PCA(n_components=min(n_components, *x.shape), svd_solver="full").fit(x)
        mean = torch.from_numpy(pca.mean_).float()
        components = torch.from_numpy(pca.components_).float().contiguous()
        feats = _features(images, mean, components)
        emb = cls.embed(feats, n_clusters, n_neighbors, seed, cannot_link, peer_weight)
        labels = KMeans(n_clusters, n_init=restarts, random_state=seed).fit_predict(emb)
        return cls(n_clusters, n_neighbors, mean, components, feats,
                   torch.from_numpy(labels.astype(np.int64)))

    @classmethod
    def from_settings(cls, images: torch.Tensor, n_clusters: int, seed: int, cfg, cannot_link=None,
                      device=None, on_epoch=None):
        """The registry's fit (satground.clustering): cfg is the params' cluster section.
        Training-free: on the CPU, no epochs."""
        seed_everything(seed)
        return cls.fit(images, n_clusters, n_neighbors=cfg.n_neighbors, seed=seed,
                       cannot_link=cannot_link, peer_weight=cfg.peer_weight)

    @classmethod
    def from_checkpoint(cls, ckpt: dict):
        state = ckpt["state_dict"]
        return cls(ckpt["config"]["n_clusters"], ckpt["config"]["n_neighbors"], state["mean"],
                   state["components"], state["train_features"], state["train_clusters"])

    def checkpoint(self) -> dict:
        return {"method": self.method,
                "config": {"n_clusters": self.n_clusters, "n_neighbors": self.n_neighbors},
                "state_dict": {"mean": self.mean, "components": self.components,
                               "train_features": self.train_features,
                               "train_clusters": self.train_clusters}}

    def classifier(self):
        """Assigns new images' PCA features to a cluster: the majority of their nearest training
        images. Fitted when first needed (the checkpoint keeps tensors only)."""
        from sklearn.neighbors import KNeighborsClassifier

        return KNeighborsClassifier(self.n_neighbors).fit(self.train_features.numpy(),
                                                          self.train_clusters.numpy())

    def assign(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 images (N, 28, 28) -> cluster (N,)."""
        if not hasattr(self, "_classifier"):
            self._classifier = self.classifier()
        feats = _features(images, self.mean, self.components).numpy()
        return torch.from_numpy(self._classifier.predict(feats).astype(np.int64))

    def sample_grid(self, images: torch.Tensor):
        """Training images of each cluster, one row per cluster."""
        return (cluster_members(self.assign(images), images, self.n_clusters),
                f"{self.method} clusters: training images, one row per cluster")

    def parameter_counts(self) -> dict[str, int]:
        total = sum(t.numel() for t in (self.mean, self.components, self.train_features))
        return {"total": total, "classifier_path": total}


def _normalised(W):
    """D^-1/2 W D^-1/2 of a symmetric sparse matrix (isolated rows stay zero)."""
    d = np.asarray(W.sum(axis=1)).ravel()
    inv_sqrt = 1.0 / np.sqrt(np.maximum(d, 1e-12))
    return W.multiply(inv_sqrt[:, None]).multiply(inv_sqrt[None, :]).tocsr()


def _affinity(feats: torch.Tensor, n_neighbors: int):
    """Normalised self-tuning kNN affinity of the rows of feats (scipy sparse)."""
    from sklearn.neighbors import NearestNeighbors

    dist, nbr = NearestNeighbors(n_neighbors=n_neighbors).fit(feats.numpy()).kneighbors()  # self excluded
    dist, nbr = torch.from_numpy(dist), torch.from_numpy(nbr)
    sigma = dist[:, min(6, n_neighbors - 1)].clamp_min(1e-8)
    rows = torch.arange(len(feats)).repeat_interleave(n_neighbors)
    cols = nbr.reshape(-1)
    w = torch.exp(-dist.reshape(-1) ** 2 / (sigma[rows] * sigma[cols]))
    W = coo_matrix((w.double().numpy(), (rows.numpy(), cols.numpy())),
                   shape=(len(feats), len(feats))).tocsr()
    return _normalised(W.maximum(W.T))  # symmetric: i ~ j when either is among the other's neighbours


def _leading_eigenvectors(M, k: int, seed: int) -> np.ndarray:
    """The k eigenvectors of the largest eigenvalues of symmetric M, rows normalised."""
    rng = np.random.default_rng(seed)
    _, vecs = eigsh(M, k=min(k, M.shape[0] - 1), which="LA", v0=rng.standard_normal(M.shape[0]))
    return vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)


class SpectralClusterer(ManifoldClusterer):
    method = "spectral"

    @staticmethod
    def embed(feats, n_clusters, n_neighbors, seed, cannot_link=None, peer_weight=0.0):
        return _leading_eigenvectors(_affinity(feats, n_neighbors), 2 * n_clusters, seed)


class PeersClusterer(ManifoldClusterer):
    """New images go to the cluster an RBF support-vector classifier on the PCA features picks,
    fitted to the training images' clusters when first needed (the checkpoint keeps tensors
    only); on nine digits it places test images better than the kNN vote."""

    method = "peers"
    reads_peers = True

    def classifier(self):
        from sklearn.svm import SVC

        return SVC(C=10.0, gamma="scale").fit(self.train_features.numpy(), self.train_clusters.numpy())

    @staticmethod
    def embed(feats, n_clusters, n_neighbors, seed, cannot_link=None, peer_weight=0.0):
        if cannot_link is None or cannot_link.shape != (len(feats), len(feats)):
            raise ValueError("the peers clusterer needs the boards' cannot-link graph of the images")
        signed = _affinity(feats, n_neighbors) - peer_weight * _normalised(cannot_link.astype(np.float64))
        return _leading_eigenvectors(signed, n_clusters, seed)


class UMAPClusterer(ManifoldClusterer):
    method = "umap"

    @staticmethod
    def embed(feats, n_clusters, n_neighbors, seed, cannot_link=None, peer_weight=0.0):
        return umap_embedding(feats.numpy(), max(n_neighbors, 2), 10, seed)
