"""The clusterer registry: unsupervised models that split digit images into K clusters.

`cluster.method` names one of CLUSTERERS. Each is a class with the same members:

    from_settings(images, n_clusters, seed, cfg, cannot_link, device, on_epoch)  fit (cls method)
    assign(images) -> clusters; sample_grid(images) -> (grid, title) for the samples figure
    checkpoint() / from_checkpoint(ckpt); parameter_counts(); n_clusters

`cfg` is the params' `cluster` section; `cannot_link` the peer given cells' pairs, given only
to a class whose `reads_peers` is True (the peers method: it reads the Sudoku structure) and
None otherwise; `on_epoch(epoch, clusterer, row, seconds)` is called by trained methods
after each epoch (and at epoch 0) for curves and checkpoints. A checkpoint file holds
{"method", "config", "state_dict", ...extra}: everything needed to rebuild it, so later stages
(distillation, the ablation over checkpoints) only call `load_clusterer(path).assign(images)`
and never depend on which method produced the file.
"""
from __future__ import annotations

from .infogan import InfoGANClusterer
from ..harness.io import PipelineError, load_torch, save_torch
from .manifold import PeersClusterer, SpectralClusterer, UMAPClusterer
from .selflabel import SelfLabelClusterer


CLUSTERERS = {"infogan": InfoGANClusterer, "umap": UMAPClusterer, "spectral": SpectralClusterer,
              "peers": PeersClusterer, "selflabel": SelfLabelClusterer}


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
