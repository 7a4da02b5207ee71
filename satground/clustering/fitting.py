"""A clusterer fitted as the cluster stage fits it: on the training given-cell images (or a
seeded draw of them, `cluster.fit_images`), `cluster.restarts` times, the kept run chosen by
`cluster.restart_choice`, a criterion that reads no label.

    pools = Pools(train_images[fit_sample(len(train_images), cfg.fit_images, cfg.seed)],
                  dev_images, dev_labels, cfg.n_clusters(K), K, cannot_link)
    clusterer, history, runs, kept = fit_restarts(cfg, pools, out, report, where)

`dev_labels` (or None) report the clustering accuracy and are never trained on.
"""
from __future__ import annotations

import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..boards.metrics import cluster_report, format_accuracy, peer_conflict_rate, restart_agreement
from ..harness.io import PipelineError
from ..harness.stage import stage_device
from ..harness.tracking import StageReport
from . import CLUSTERERS, save_clusterer


LOG_LOCK = threading.Lock()


@dataclass
class Pools:
    """The given-cell images of the train and dev boards; dev labels (or None) to report accuracy."""
    train_images: torch.Tensor
    dev_images: torch.Tensor
    dev_labels: torch.Tensor | None
    n_clusters: int  # K': the digits, or more (cluster.clusters: surjective grounding)
    n_digits: int
    cannot_link: object  # scipy sparse (M, M): peer given cells of the training boards, or None

    def report(self, clusterer) -> tuple[dict, dict]:
        """(train, dev) cluster reports: the train one without labels (cluster sizes, and the
        peer conflicts where the peer structure is read), the dev one with the accuracy."""
        clusters = clusterer.assign(self.train_images)
        train = cluster_report(clusters, None, self.n_clusters)
        train["peer_conflicts"] = (None if self.cannot_link is None
                                   else peer_conflict_rate(clusters, self.cannot_link))
        return train, cluster_report(clusterer.assign(self.dev_images), self.dev_labels, self.n_clusters,
                                     self.n_digits)


def fit_sample(n_images: int, fit_images: int, seed: int) -> torch.Tensor:
    """Indices (sorted) of the training images the clusterer fits on: all of them, or where
    `cluster.fit_images` is smaller, a draw of that many seeded by the clusterer's seed."""
    if not 0 < fit_images < n_images:
        return torch.arange(n_images)
    return torch.from_numpy(np.sort(np.random.default_rng(seed).choice(n_images, fit_images, replace=False)))


def fit_one(cfg, seed: int, pools: Pools, folder: Path, report: StageReport, prefix: str, where: str):
    """One run of the method; a trained one logs its curves and keeps its epoch checkpoints."""
    history = []

    def on_epoch(epoch: int, clusterer, losses: dict, seconds: float | None) -> dict:
        train, dev = pools.report(clusterer)
        row = {**losses, "train_largest_cluster": train["largest_cluster_fraction"],
               "peer_conflicts": train["peer_conflicts"], "dev_accuracy": dev["accuracy"]}
        with LOG_LOCK:  # restarts on threads share the report
            report.log_epoch(epoch, row, prefix)
        history.append({"epoch": epoch, **row, "seconds": seconds})
        if epoch % cfg.checkpoint_every == 0 or epoch == cfg.epochs:
            save_clusterer(clusterer, folder / f"epoch_{epoch:03d}.pt", epoch=epoch)
        return row

    try:
        clusterer = CLUSTERERS[cfg.method].from_settings(
            pools.train_images, pools.n_clusters, seed, cfg, pools.cannot_link, stage_device(), on_epoch)
    except ValueError as exc:
        raise PipelineError(f"{where}: {exc}") from None
    save_clusterer(clusterer, folder / "final.pt", epoch=history[-1]["epoch"] if history else 0)
    return clusterer, history


def restart_scores(cfg, pools: Pools, runs: list[dict], clusterers: list) -> list[float]:
    """The criterion that picks the kept restart, one value a run, higher is better."""
    if cfg.restart_choice == "peers":
        return [-run["peer_conflicts"] for run in runs]
    if cfg.restart_choice == "information":
        return [run["code_information"] for run in runs]
    return restart_agreement([c.assign(pools.train_images) for c in clusterers])


def fit_restarts(cfg, pools: Pools, out: Path, report: StageReport, where: str):
    """Each restart's run in out/restart_<r>/ (out itself for one restart); the run that
    `cluster.restart_choice` prefers is kept, its files moved to out (ties: the earlier run).
    Returns the kept clusterer, its per-epoch history, the table of all runs and the kept run's row."""
    def restart(r: int):
        folder = out if cfg.restarts == 1 else out / f"restart_{r}"
        folder.mkdir(exist_ok=True)
        start = time.perf_counter()
        prefix = "" if cfg.restarts == 1 else f"restart_{r}/"
        clusterer, history = fit_one(cfg, cfg.seed + r, pools, folder, report, prefix, where)
        train, dev = pools.report(clusterer)
        information = getattr(clusterer, "code_information", None)
        run = {"restart": r, "seed": cfg.seed + r, "peer_conflicts": train["peer_conflicts"],
               "code_information": information(pools.train_images) if information else None,
               "dev_accuracy": dev["accuracy"], "train_largest_cluster": train["largest_cluster_fraction"],
               "seconds": round(time.perf_counter() - start, 2)}
        conflicts = "n/a" if run["peer_conflicts"] is None else f"{run['peer_conflicts']:.4f}"
        print(f"cluster: {cfg.method} seed {run['seed']}: peer conflicts {conflicts}, clustering "
              f"accuracy (dev images) {format_accuracy(dev['accuracy'])} ({run['seconds']:.0f} s)")
        return run, clusterer, history, folder

    # A method that trains on torch alone runs its restarts side by side, one per core, each on
    # one thread: small batches use a second thread poorly.
    threads = torch.get_num_threads()
    workers = min(threads, cfg.restarts) if CLUSTERERS[cfg.method].parallel_restarts else 1
    torch.set_num_threads(1 if workers > 1 else threads)
    try:
        with ThreadPoolExecutor(workers) as pool:
            results = list(pool.map(restart, range(cfg.restarts)))
    finally:
        torch.set_num_threads(threads)
    runs, clusterers, histories, folders = map(list, zip(*results))
    scores = restart_scores(cfg, pools, runs, clusterers) if len(runs) > 1 else [None]
    for run, score in zip(runs, scores):
        run["criterion"] = score
    best = 0 if len(runs) == 1 else max(range(len(runs)), key=lambda i: (scores[i], -i))
    for folder in folders:  # InfoGAN checkpoints are large: keep the preferred run's only
        if folder not in (out, folders[best]):
            shutil.rmtree(folder)
    if folders[best] != out:
        for file in folders[best].iterdir():
            file.rename(out / file.name)
        folders[best].rmdir()
        for row in histories[best]:  # the kept run's curves under the plain names, as with one restart
            report.log_epoch(row["epoch"], {k: v for k, v in row.items() if k not in ("epoch", "seconds")})
    return clusterers[best], histories[best], runs, runs[best]
