"""Stage `cluster`: unsupervised clustering of the training boards' given-cell images.

`cluster.method` names a clusterer of satground.clustering: selflabel (images only, the
default), peers, umap or spectral (training-free embeddings of the images' neighbourhood graph +
k-means, satground/clustering/manifold.py), or infogan (the paper's; trained, checkpointed). `peers` and
restarts > 1 read the Sudoku rules, so they need `rule_aware: true`.

`cluster.restarts` runs the method that many times (cluster seeds seed, seed+1, ...): InfoGAN's
outcome depends on its seed (the paper reports 4 failures in 10). `cluster.restart_choice` keeps
one, reading no label: `peers`, the fewest peer conflicts (the share of image pairs shown in peer
given cells, same row, column or box of a training board, that it puts in one cluster: reads the
Sudoku rules); `agreement`, the run whose clusters of the training images agree most with the
other runs' (mean adjusted Rand index); `information`, InfoGAN's code information on the training
images. The peer structure is built only where it is used (the peers method, or the peers
choice): an image-only method (selflabel, umap, spectral, infogan) otherwise never reads the boards.

Trains only on the images shown in given cells of data/prepared/train.pt, never on labels;
`cluster.fit_images` fits on a seeded draw of them (every image is assigned all the same); the
training-side figures (the largest cluster's share, peer conflicts, and so a `peers` restart
choice) are then those of the drawn images.
The clustering accuracy is reported on the dev boards' given-cell images (dev_truth.pt,
"image_labels"); without that file training runs identically, unreported. No truth of the
training or test images is read. Writes
models/cluster/final.pt, and for a trained method models/cluster/epoch_{e:03d}.pt every
`checkpoint_every` epochs (epoch 0 = the untrained init, for the ablation), all of the kept run;
the dev clustering accuracy as its metric (per-epoch curves for a trained method, each
restart's under restart_<r>/ when there are several) and plots/cluster_{samples,confusion}.png.
"""
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from satground.clustering import CLUSTERERS, save_clusterer
from satground.boards.data import load_given_images, load_image_labels, peer_cannot_links
from satground.harness.io import PipelineError, atomic_directory, save_figure
from satground.boards.metrics import cluster_report, format_accuracy, peer_conflict_rate, restart_agreement
from satground.harness.params import load_params
from satground.boards.plots import plot_confusion, plot_samples
from satground.harness.stage import run_stage, stage_arguments, stage_device
from satground.harness.tracking import StageReport


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


def main(argv=None):
    args = stage_arguments(__doc__, ["prepared", "model-out", "samples-plot-out", "confusion-plot-out",
                                     "metrics-out"], argv)

    params = load_params(args.params)
    cfg = params.cluster
    train_images, train_idx, train_boards = load_given_images(args.prepared, "train")
    K = train_boards.n_digits
    dev_images, dev_idx, _ = load_given_images(args.prepared, "dev", K)
    reads_peers = CLUSTERERS[cfg.method].reads_peers or (cfg.restarts > 1 and cfg.restart_choice == "peers")
    fitted = fit_sample(len(train_images), cfg.fit_images, cfg.seed)
    pools = Pools(train_images[fitted], dev_images,
                  load_image_labels(args.prepared, "dev", dev_idx),  # reporting only: None when absent
                  cfg.n_clusters(K), K, peer_cannot_links(train_boards, train_idx[fitted]) if reads_peers else None)

    # a fresh folder that replaces models/cluster/ whole: no file of an earlier run survives
    report = StageReport(args.metrics_out)
    start = time.perf_counter()
    with atomic_directory(args.model_out) as out:
        clusterer, history, runs, kept = fit_restarts(cfg, pools, out, report, params.source)
    seconds = time.perf_counter() - start

    save_figure(plot_samples(*clusterer.sample_grid(train_images)), args.samples_plot_out)
    save_figure(plot_confusion(clusterer.assign(dev_images), pools.dev_labels, pools.n_clusters,
                               "dev images", K), args.confusion_plot_out)

    trained = [row for row in history if row["epoch"] > 0]
    timed = [row["seconds"] for row in trained]
    counts = clusterer.parameter_counts()
    info = {
        "method": cfg.method, "seed": kept["seed"], "epochs": trained[-1]["epoch"] if trained else 0,
        "n_clusters": pools.n_clusters, "n_train_images": len(train_images),
        "n_fit_images": len(pools.train_images), "n_dev_images": len(dev_images),
        "dev_accuracy": kept["dev_accuracy"],
        "train_largest_cluster": kept["train_largest_cluster"], "peer_conflicts": kept["peer_conflicts"],
        "code_information": kept["code_information"], "restart_choice": cfg.restart_choice,
        **{name: trained[-1].get(name) for name in ("loss_d", "loss_g", "loss_q_cat", "loss_q_cont") if trained},
        "parameters": counts["total"], "parameters_classifier_path": counts["classifier_path"],
        "device": str(stage_device()) if history else "cpu",
        "restarts": runs,
    }
    report.finish({"cluster_dev_accuracy": kept["dev_accuracy"]}, info, fit_seconds=round(seconds, 2),
                  seconds_per_epoch=round(sum(timed) / len(timed), 2) if timed else None)

    chosen = (f", kept seed {kept['seed']} of {cfg.restarts} (restart_choice: {cfg.restart_choice})"
              if cfg.restarts > 1 else "")
    print(f"cluster: {cfg.method} K={pools.n_clusters} fit on {len(pools.train_images)} of {len(train_images)} given-cell images{chosen}, clustering accuracy (dev images) "
          f"{format_accuracy(kept['dev_accuracy'])} "
          f"-> {Path(args.model_out) / 'final.pt'} ({seconds:.1f} s)")


if __name__ == "__main__":
    run_stage(main)
