"""Clusterers: unsupervised models that split digit images into K clusters.

`cluster.method` in params.yaml names one of CLUSTERERS. A clusterer checkpoint file holds
{"method", "config", "state_dict", ...extra}: everything needed to rebuild it, so later stages
(distillation, the ablation over checkpoints) only call `load_clusterer(path).assign(images)`
and never depend on which method produced the file. To add a method, write a class with the
same members (from_checkpoint, checkpoint, assign, parameter_counts, n_clusters) and register
it here.
"""
from __future__ import annotations

import torch

from .infogan import InfoGAN, assign_clusters, parameter_counts
from .io import PipelineError, load_torch, save_torch
from .manifold import PeersClusterer, SpectralClusterer, UMAPClusterer


class InfoGANClusterer:
    method = "infogan"

    def __init__(self, model: InfoGAN):
        self.model = model
        self.n_clusters = model.n_classes

    @classmethod
    def from_checkpoint(cls, ckpt: dict) -> "InfoGANClusterer":
        model = InfoGAN(**ckpt["config"])
        model.load_state_dict(ckpt["state_dict"])
        return cls(model)

    def checkpoint(self) -> dict:
        state = {name: t.detach().cpu().clone() for name, t in self.model.state_dict().items()}
        return {"method": self.method, "config": self.model.config(), "state_dict": state}

    def assign(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 images (N, 28, 28) -> cluster index (N,) in 0..K-1."""
        return assign_clusters(self.model, images)

    def parameter_counts(self) -> dict[str, int]:
        return parameter_counts(self.model)


CLUSTERERS = {"infogan": InfoGANClusterer, "umap": UMAPClusterer, "spectral": SpectralClusterer,
              "peers": PeersClusterer}


def save_clusterer(clusterer, path, **extra) -> None:
    """Write the clusterer's checkpoint (plus extra entries, e.g. epoch) atomically."""
    save_torch({**clusterer.checkpoint(), **extra}, path)


def load_clusterer(path):
    """Rebuild a clusterer from a checkpoint written by save_clusterer."""
    ckpt = load_torch(path, "clusterer checkpoint")
    if not isinstance(ckpt, dict) or not {"method", "config", "state_dict"} <= ckpt.keys():
        raise PipelineError(f"{path}: not a clusterer checkpoint (expected keys method, config, "
                            "state_dict)")
    if ckpt["method"] not in CLUSTERERS:
        raise PipelineError(f"{path}: unknown clustering method {ckpt['method']!r} "
                            f"(known: {sorted(CLUSTERERS)})")
    try:
        return CLUSTERERS[ckpt["method"]].from_checkpoint(ckpt)
    except (RuntimeError, TypeError, KeyError) as exc:
        raise PipelineError(f"{path}: cannot rebuild the {ckpt['method']} clusterer "
                            f"({str(exc).splitlines()[0]})") from None


# ---------------------------------------------------------------------------------------------
# data: given-cell images, and their true digits for reporting only


def load_given_images(root, split: str, n_digits: int | None = None):
    """The distinct images shown in given cells of a split's boards (ungrounded view).

    Returns (images uint8 (M, 28, 28), pool indices (M,), the boards). Reads `{split}.pt` only;
    that file carries no input-cell labels, which is asserted here so a grounded file cannot slip
    in. n_digits: the K another split's boards have (train and test must agree).
    """
    from .data import given_image_indices, load_boards

    boards = load_boards(root, split)
    if n_digits is not None and boards.n_digits != n_digits:
        raise PipelineError(f"{root}/{split}.pt: boards of {boards.n_digits} digits, but the other "
                            f"split's boards have {n_digits} (rerun prepare)")
    if bool((boards.labels[boards.is_input] != 0).any()):
        raise PipelineError(f"{root}/{split}.pt: holds labels at input cells; clustering must "
                            "read the ungrounded view only")
    indices = given_image_indices(boards)
    return boards.images[indices], indices, boards


def peer_cannot_links(boards, indices: torch.Tensor):
    """scipy sparse (M, M) 0/1 over the pool images `indices`: 1 where two of them are shown in
    peer cells (same row, column or box) of some board, so they show different digits. Read from
    the positions of the given cells alone: no label."""
    import numpy as np
    from scipy.sparse import coo_matrix

    from .sudoku import peers

    pairs = np.argwhere(np.triu(peers(boards.board_size).numpy(), 1))  # (a, b) peer cells
    cell_image, is_input = boards.cell_image.numpy(), boards.is_input.numpy()
    both = is_input[:, pairs[:, 0]] & is_input[:, pairs[:, 1]]
    first, second = cell_image[:, pairs[:, 0]][both], cell_image[:, pairs[:, 1]][both]
    position = np.full(len(boards.images), -1)
    position[indices.numpy()] = np.arange(len(indices))
    M = len(indices)
    links = coo_matrix((np.ones(len(first)), (position[first], position[second])), shape=(M, M)).tocsr()
    return ((links + links.T) > 0).astype(np.float64)


def peer_conflict_rate(clusters: torch.Tensor, cannot_link) -> float:
    """Share of the cannot-link pairs (images shown in peer given cells, so different digits)
    whose images share a cluster: 0 for clusters that are the digits, about 1/K for random ones.
    Label-free: the restarts' selection criterion."""
    from scipy.sparse import triu

    pairs = triu(cannot_link, 1).tocoo()
    if pairs.nnz == 0:
        return 0.0
    clusters = clusters.numpy()
    return float((clusters[pairs.row] == clusters[pairs.col]).mean())


def load_image_labels(root, split: str, indices: torch.Tensor):
    """True digits (0-based, long (M,)) of the given pool images, for *reporting* accuracy only.

    Returns None when `{split}_truth.pt` is absent (reporting is then disabled). Only the
    "image_labels" entry is read; "input_labels" is never touched.
    """
    from pathlib import Path

    from .data import load_truth

    if not (Path(root) / f"{split}_truth.pt").is_file():
        return None
    image_labels = load_truth(root, split)["image_labels"]
    return image_labels[indices].long() - 1


def mislabel(clusters: torch.Tensor, fraction: float, n_clusters: int, seed: int) -> torch.Tensor:
    """A copy of `clusters` with round(fraction * n) entries, drawn at random, moved to a random
    other cluster: a controlled clustering error for the ablation (paper Figure 5)."""
    g = torch.Generator().manual_seed(seed)
    out = clusters.clone()
    chosen = torch.randperm(len(out), generator=g)[:round(fraction * len(out))]
    shift = torch.randint(1, n_clusters, (len(chosen),), generator=g)  # never 0: always wrong
    out[chosen] = (out[chosen] + shift) % n_clusters
    return out


def shift_boundaries(images: torch.Tensor, clusters: torch.Tensor, fraction: float,
                     n_clusters: int) -> torch.Tensor:
    """A copy of `clusters` with round(fraction * n) images moved to their nearest other cluster
    (pixel distance to the cluster means), taking the images nearest to one: the errors of a
    clusterer whose boundaries sit in the wrong place. Unlike `mislabel`'s random moves, which a
    classifier averages away, these are consistent in image space, so a classifier distilled from
    them repeats them on new images: the ablation's points between chance and the clusterer."""
    x = images.reshape(len(images), -1).float()
    centroids = torch.stack([x[clusters == c].mean(dim=0) if (clusters == c).any()
                             else torch.full_like(x[0], float("inf")) for c in range(n_clusters)])
    distance = torch.cdist(x, centroids)
    own = distance.gather(1, clusters[:, None]).squeeze(1)
    distance.scatter_(1, clusters[:, None], float("inf"))
    nearest, other = distance.min(dim=1)
    chosen = torch.argsort(nearest - own, stable=True)[:round(fraction * len(clusters))]
    out = clusters.clone()
    out[chosen] = other[chosen]
    return out


def cluster_report(clusters: torch.Tensor, labels, n_clusters: int) -> dict[str, float]:
    """Clustering accuracy (Hungarian; None without labels) and the largest cluster's share."""
    from .metrics import clustering_accuracy

    sizes = torch.bincount(clusters, minlength=n_clusters)
    report = {"largest_cluster_fraction": float(sizes.max()) / max(len(clusters), 1)}
    report["accuracy"] = (None if labels is None
                          else clustering_accuracy(clusters.numpy(), labels.numpy(), n_clusters))
    return report


# ---------------------------------------------------------------------------------------------
# plots


def format_accuracy(value) -> str:
    """An accuracy for a log line; None where no truth file was there to measure it."""
    return "n/a (no truth file)" if value is None else f"{value:.3f}"


def cluster_members(clusters: torch.Tensor, images: torch.Tensor, K: int, n: int = 10):
    """grid (K, n, 28, 28) in [0, 1] of the first n real images of each cluster (blank if fewer)."""
    grid = torch.zeros(K, n, 28, 28)
    for k in range(K):
        members = images[clusters == k][:n]
        grid[k, :len(members)] = members.float() / 255.0
    return grid


def plot_samples(grid: torch.Tensor, title: str = "InfoGAN samples: rows share a code, columns share noise"):
    """Figure of digits: grid (K, n, 28, 28), one row per categorical code value (cluster)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    K, n = grid.shape[:2]
    tiled = grid.permute(0, 2, 1, 3).reshape(K * 28, n * 28).numpy()
    fig, ax = plt.subplots(figsize=(n * 0.45 + 0.6, K * 0.45 + 0.4))
    ax.imshow(tiled, cmap="gray_r", vmin=0, vmax=1)
    ax.set_yticks([k * 28 + 14 for k in range(K)], [str(k) for k in range(K)])
    ax.set_xticks([])
    ax.set_ylabel("categorical code (cluster)")
    ax.set_title(title, fontsize=9)
    return fig


def plot_confusion(clusters: torch.Tensor, labels, n_clusters: int, title: str):
    """Clusters (rows, ordered by their matched digit) against true digits (columns).

    Without labels (no truth file) the figure shows the cluster sizes instead.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from .metrics import best_matching, clustering_accuracy, confusion_matrix

    if labels is None:
        fig, ax = plt.subplots(figsize=(5, 3))
        ax.bar(range(n_clusters), torch.bincount(clusters, minlength=n_clusters).numpy())
        ax.set_xlabel("cluster")
        ax.set_ylabel("images")
        ax.set_title(f"{title}: cluster sizes (no truth file, accuracy not reported)", fontsize=9)
        return fig
    counts = confusion_matrix(clusters.numpy(), labels.numpy(), n_clusters, n_clusters)
    mapping = best_matching(clusters.numpy(), labels.numpy(), n_clusters, n_clusters)
    order = np.argsort(mapping)  # row k: the cluster matched to digit k+1
    counts = counts[order]
    accuracy = clustering_accuracy(clusters.numpy(), labels.numpy(), n_clusters)
    fig, ax = plt.subplots(figsize=(0.5 * n_clusters + 1.5, 0.5 * n_clusters + 1))
    ax.imshow(counts, cmap="Blues")
    for (r, c), v in np.ndenumerate(counts):
        if v:
            ax.text(c, r, str(v), ha="center", va="center", fontsize=6,
                    color="white" if v > counts.max() / 2 else "black")
    ax.set_xticks(range(n_clusters), [str(d + 1) for d in range(n_clusters)])
    ax.set_yticks(range(n_clusters), [str(c) for c in order])
    ax.set_xlabel("true digit")
    ax.set_ylabel("cluster (ordered by matched digit)")
    ax.set_title(f"{title}: clustering accuracy {accuracy:.3f}", fontsize=9)
    return fig
