"""An image-only digit clusterer: deskew, UMAP consensus, then a self-labelled CNN ensemble.

It reads only the digit images (no board, no cell position, no label) and runs on a few CPU
minutes:

1. Deskew. Moment-based shear correction (the image's second moments give the slant; an
   affine shear removes it, and the image is re-centred on its centre of mass). Much of the
   within-digit variation of handwriting is slant and position; removing it brings same-digit
   images closer together in pixel space than any other single step we tried.
2. Cluster the training images: PCA (50 components) of the deskewed pixels, then UMAP
   (McInnes et al. 2018; min_dist 0, 10 dimensions) and a Gaussian mixture with K components
   in the embedding. UMAP's optimisation is random, so `umap_runs` runs with different seeds
   are aligned to the first (Hungarian matching of their cluster labels) and vote; images on
   which too few runs agree are left out of step 3.
3. Self-labelling. `n_nets` small CNNs are trained, each from its own initialisation, to
   predict the step-2 clusters of the agreed images under random affine augmentation
   (rotation, scale, shift). A CNN that must give all slightly moved or rotated versions of an
   image one class cannot follow the manifold embedding's individual mistakes, so it corrects
   many of them; averaging the ensemble's probabilities removes the run-to-run variance of a
   single net (one net sometimes drifts on a confusable pair such as 4 / 9).
4. Assignment of any image (training or new): deskew, average the nets' softmax, argmax. The
   checkpoint is the nets' weights and the settings; no training image is kept.

The same seed gives the same clusters: torch, numpy and `random` are seeded inside `fit`,
UMAP and the mixture get fixed random states, and torch runs on one thread.
"""
from __future__ import annotations

import math
import random

import numpy as np
import torch

from ..readers.digitcnn import DigitCNN, DigitReader, deskew, mean_softmax, train_digit_cnns
from .manifold import cluster_members, umap_embedding
from ..boards.metrics import best_matching


def manifold_clusters(pixels: np.ndarray, n_clusters: int, seed: int, n_components: int = 50,
                      n_neighbors: int = 10, umap_dim: int = 10, mixture_restarts: int = 5):
    """PCA -> UMAP -> Gaussian mixture of flattened images (N, D); returns (N,) clusters."""
    from sklearn.decomposition import PCA
    from sklearn.mixture import GaussianMixture

    threads = torch.get_num_threads()
    feats = PCA(n_components=min(n_components, *pixels.shape), svd_solver="full").fit_transform(pixels)
    emb = umap_embedding(feats, n_neighbors, umap_dim, seed)
    mixture = GaussianMixture(n_clusters, n_init=mixture_restarts, random_state=seed).fit(emb)
    torch.set_num_threads(threads)  # numba's OpenMP start resets torch's: keep the CNNs repeatable
    return mixture.predict(emb)


class SelfLabelClusterer:
    """Deskew -> consensus of UMAP + GMM runs -> CNN ensemble trained on those clusters."""

    method = "selflabel"
    reads_peers = False
    parallel_restarts = False  # its CNNs already train side by side

    def __init__(self, config: dict, nets: list[DigitCNN]):
        self.config, self.nets = config, nets
        for net in self.nets:
            net.eval()

    @classmethod
    def fit(cls, images: torch.Tensor, n_clusters: int, seed: int = 0, cfg=None) -> "SelfLabelClusterer":
        """images: uint8 (N, 28, 28); no labels. `cfg` is the params' cluster section
        (satground.harness.params.Cluster, the default run's values when None): the schema owns
        every setting, its meaning and its bounds; the steps are the module docstring's."""
        if cfg is None:
            from ..harness.params import Cluster
            cfg = Cluster()
        if min(cfg.umap_runs, cfg.n_nets, cfg.rounds, cfg.cnn_epochs) < 1:
            raise ValueError("umap_runs, n_nets, rounds and cnn_epochs must each be at least 1")
        workers = torch.get_num_threads()  # the CNNs train side by side, each on one thread
        torch.set_num_threads(1)
        try:
            random.seed(seed)
            np.random.seed(seed)
            torch.manual_seed(seed)
            x = deskew(images)
            pixels = x.reshape(len(x), -1).numpy()

            # Step 2: several embeddings vote; the first run's cluster numbers are the reference.
            runs = []
            for r in range(cfg.umap_runs):
                labels = manifold_clusters(pixels, n_clusters, seed * 1000 + r, cfg.pca_components,
                                           cfg.n_neighbors, cfg.umap_dim)
                # relabel each later run to its best match with the first
                runs.append(labels if not runs else best_matching(labels, runs[0], n_clusters, n_clusters)[labels])
            votes = np.stack([(np.stack(runs) == k).sum(0) for k in range(n_clusters)], 1)
            target = torch.from_numpy(votes.argmax(1).astype(np.int64))
            agreed = torch.from_numpy(votes.max(1) >= math.ceil(cfg.min_agreement * cfg.umap_runs - 1e-9))
            train_idx = torch.nonzero(agreed).squeeze(1)

            # Step 3: each net starts from its own seed and sees its own augmentation draws. Later
            # rounds retrain on the previous ensemble's argmax where its mean probability is at least
            # `confidence`: the ensemble's labels are cleaner than the embedding's.
            for rnd in range(cfg.rounds):
                if rnd > 0:
                    probs = mean_softmax(nets, x, n_clusters)
                    conf, target = probs.max(dim=1)
                    train_idx = torch.nonzero(conf >= cfg.confidence).squeeze(1)
                    if len(train_idx) < 2 * n_clusters:  # threshold above nearly every image: keep all
                        train_idx = torch.arange(len(x))
                nets = train_digit_cnns(x, target, train_idx, n_clusters,
                                        [seed * 1000 + 100 * (rnd + 1) + m for m in range(cfg.n_nets)],
                                        cfg.cnn_epochs, workers, batch_size=cfg.cnn_batch_size, lr=cfg.cnn_lr,
                                        rotation=cfg.augment.rotation, scale=cfg.augment.scale,
                                        shift=cfg.augment.shift, flip=cfg.augment.flip, width=cfg.cnn_width,
                                        feature_dim=cfg.cnn_features)
            config = {"n_clusters": n_clusters, "seed": seed, "umap_runs": cfg.umap_runs,
                      "min_agreement": cfg.min_agreement, "n_components": cfg.pca_components,
                      "n_neighbors": cfg.n_neighbors, "umap_dim": cfg.umap_dim, "n_nets": cfg.n_nets,
                      "epochs": cfg.cnn_epochs, "batch_size": cfg.cnn_batch_size, "lr": cfg.cnn_lr,
                      "rotation": cfg.augment.rotation, "scale": cfg.augment.scale,
                      "shift": cfg.augment.shift, "width": cfg.cnn_width, "feature_dim": cfg.cnn_features,
                      "rounds": cfg.rounds, "confidence": cfg.confidence,
                      **({"flip": True} if cfg.augment.flip else {})}  # a run without it saves as before
        finally:  # the caller's thread count back: a later fit in the process trains its nets side by side too
            torch.set_num_threads(workers)
        return cls(config, nets)

    @classmethod
    def from_settings(cls, images: torch.Tensor, n_clusters: int, seed: int, cfg, cannot_link=None,
                      device=None, on_epoch=None) -> "SelfLabelClusterer":
        """The registry's fit (satground.clustering): `fit` with the params' cluster section; the
        cannot-links are not read: the method sees images only."""
        return cls.fit(images, n_clusters, seed, cfg)

    def sample_grid(self, images: torch.Tensor):
        """Training images of each cluster, one row per cluster."""
        return (cluster_members(self.assign(images), images, self.n_clusters),
                "selflabel clusters: training images, one row per cluster")

    @property
    def n_clusters(self) -> int:
        return self.config["n_clusters"]

    def probabilities(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 images (N, 28, 28) -> (N, K) mean softmax of the nets."""
        return mean_softmax(self.nets, deskew(images), self.config["n_clusters"])

    def assign(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 images (N, 28, 28) -> cluster (N,) int64."""
        return self.probabilities(images).argmax(dim=1).to(torch.int64)

    def as_reader(self) -> DigitReader:
        """The ensemble as a classifier of any image (distill.classifier: clusterer): a
        DigitReader holding copies of the nets, the same probabilities as `probabilities`."""
        reader = DigitReader(self.n_clusters, len(self.nets), self.config["width"],
                             self.config["feature_dim"])
        for mine, net in zip(reader.nets, self.nets):
            mine.load_state_dict(net.state_dict())
        return reader.eval()

    def checkpoint(self) -> dict:
        state = {f"net{m}.{name}": t.detach().clone()
                 for m, net in enumerate(self.nets) for name, t in net.state_dict().items()}
        return {"method": self.method, "config": dict(self.config), "state_dict": state}

    @classmethod
    def from_checkpoint(cls, ckpt: dict):
        config = dict(ckpt["config"])
        nets = []
        for m in range(config["n_nets"]):
            net = DigitCNN(config["n_clusters"], config["width"], config["feature_dim"])
            prefix = f"net{m}."
            net.load_state_dict({k[len(prefix):]: v for k, v in ckpt["state_dict"].items()
                                 if k.startswith(prefix)})
            nets.append(net)
        return cls(config, nets)

    def parameter_counts(self) -> dict[str, int]:
        total = sum(p.numel() for net in self.nets for p in net.parameters())
        return {"total": total, "classifier_path": total}  # every net votes on every image
