"""The pipeline's figures (each stage saves them with io.save_figure): boards, clusters, the
soft permutation. The per-epoch curves are drawn by satground.harness.tracking from its own files.
"""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from .data import Boards  # noqa: E402
from .metrics import best_matching, clustering_accuracy, confusion_matrix  # noqa: E402


def plot_samples(grid: torch.Tensor, title: str = "InfoGAN samples: rows share a code, columns share noise"):
    """Figure of digits: grid (K, n, 28, 28), one row per categorical code value (cluster)."""
    K, n = grid.shape[:2]
    tiled = grid.permute(0, 2, 1, 3).reshape(K * 28, n * 28).numpy()
    fig, ax = plt.subplots(figsize=(n * 0.45 + 0.6, K * 0.45 + 0.4))
    ax.imshow(tiled, cmap="gray_r", vmin=0, vmax=1)
    ax.set_yticks([k * 28 + 14 for k in range(K)], [str(k) for k in range(K)])
    ax.set_xticks([])
    ax.set_ylabel("categorical code (cluster)")
    ax.set_title(title, fontsize=9)
    return fig


def plot_confusion(clusters: torch.Tensor, labels, n_clusters: int, title: str,
                   n_classes: int | None = None):
    """Clusters (rows, ordered by their matched digit) against true digits (columns); with more
    clusters than the n_classes digits, matched by the best onto map.

    Without labels (no truth file) the figure shows the cluster sizes instead.
    """
    n_classes = n_clusters if n_classes is None else n_classes
    if labels is None:
        fig, ax = plt.subplots(figsize=(5, 3))
        ax.bar(range(n_clusters), torch.bincount(clusters, minlength=n_clusters).numpy())
        ax.set_xlabel("cluster")
        ax.set_ylabel("images")
        ax.set_title(f"{title}: cluster sizes (no truth file, accuracy not reported)", fontsize=9)
        return fig
    counts = confusion_matrix(clusters.numpy(), labels.numpy(), n_clusters, n_classes)
    mapping = best_matching(clusters.numpy(), labels.numpy(), n_clusters, n_classes)
    order = np.argsort(mapping, kind="stable")  # rows by matched digit
    counts = counts[order]
    accuracy = clustering_accuracy(clusters.numpy(), labels.numpy(), n_clusters, n_classes)
    fig, ax = plt.subplots(figsize=(0.5 * n_classes + 1.5, 0.5 * n_clusters + 1))
    ax.imshow(counts, cmap="Blues")
    for (r, c), v in np.ndenumerate(counts):
        if v:
            ax.text(c, r, str(v), ha="center", va="center", fontsize=6,
                    color="white" if v > counts.max() / 2 else "black")
    ax.set_xticks(range(n_classes), [str(d + 1) for d in range(n_classes)])
    ax.set_yticks(range(n_clusters), [str(c) for c in order])
    ax.set_xlabel("true digit")
    ax.set_ylabel("cluster (ordered by matched digit)")
    ax.set_title(f"{title}: clustering accuracy {accuracy:.3f}", fontsize=9)
    return fig


def plot_boards(boards: Boards, n_boards: int = 4):
    """Figure of the first boards: given cells show their image, blank cells the solution digit
    faintly (boards must be the grounded view)."""
    K, n = boards.n_digits, boards.board_size
    n_boards = min(n_boards, len(boards))
    cols = min(n_boards, 2)
    rows = (n_boards + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 3.2 * rows), squeeze=False)
    for b, ax in enumerate(axes.flat):
        ax.axis("off")
        if b >= n_boards:
            continue
        canvas = np.zeros((K * 28, K * 28), np.uint8)
        for c in range(K * K):
            r, q = divmod(c, K)
            if boards.is_input[b, c]:
                canvas[r * 28:(r + 1) * 28, q * 28:(q + 1) * 28] = boards.images[boards.cell_image[b, c]].numpy()
            else:
                ax.text(q * 28 + 14, r * 28 + 14, str(int(boards.labels[b, c])), color="0.55",
                        ha="center", va="center", fontsize=7 if K == 9 else 14)
        ax.imshow(255 - canvas, cmap="gray", vmin=0, vmax=255)
        for i in range(K + 1):
            width = 1.6 if i % n == 0 else 0.4
            ax.axhline(i * 28 - 0.5, color="k", lw=width)
            ax.axvline(i * 28 - 0.5, color="k", lw=width)
        ax.set_title(f"board {b}: {int(boards.is_input[b].sum())} givens", fontsize=9)
    fig.suptitle("Training boards: given cells show MNIST images; grey digits are the hidden solution",
                 fontsize=9)
    return fig

def plot_permutation(P: torch.Tensor, perm: torch.Tensor):
    """P_hat (K' clusters x K digits; K' > K with surjective grounding) and the map read off it."""
    n_clusters, K = P.shape
    fig, ax = plt.subplots(figsize=(1.2 + 0.45 * K, 1.0 + 0.45 * n_clusters))
    # scaled to the data: P_hat's entries sit close together (a flat square from a 0 floor)
    low, high = float(P.min()), float(P.max())
    image = ax.imshow(P.numpy(), cmap="viridis", vmin=low, vmax=max(high, low + 1e-6))
    ax.scatter(perm.numpy(), range(n_clusters), marker="x", color="red", s=30, label="hard permutation")
    ax.set_xticks(range(K), [str(d + 1) for d in range(K)])
    ax.set_yticks(range(n_clusters), [str(c) for c in range(n_clusters)])
    ax.set_xlabel("digit (label encoding)")
    ax.set_ylabel("cluster (pre-trained encoding)")
    ax.set_title("Soft permutation P_hat (epoch mean)", fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.046)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), fontsize=7, frameon=False)
    return fig
