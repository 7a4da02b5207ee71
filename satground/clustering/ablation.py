"""Controlled clustering errors for the clustering-accuracy ablation (paper Figure 5): the
distill stage moves a share of the clusterer's assignments before LeNet learns them
(`distill.mislabel`, `distill.boundary_shift`), so the pipeline's outcome can be read against
the clustering accuracy it started from.
"""
from __future__ import annotations

import torch


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
