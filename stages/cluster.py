"""Stage `cluster`: unsupervised clustering of the training boards' given-cell images.

`cluster.method`: peers, umap or spectral (training-free embeddings of the images' neighbourhood
graph + k-means, satground/manifold.py), or infogan (the paper's; trained, checkpointed).

`cluster.restarts` runs the method that many times (cluster seeds seed, seed+1, ...) and keeps
the run with the fewest peer conflicts: the share of image pairs shown in peer given cells (same
row, column or box of a training board, so different digits) that it puts in one cluster. The
criterion reads the boards' given-cell positions only, no label; InfoGAN's outcome depends on its
seed (the paper reports 4 failures in 10), and restarts with this choice guard against that.

Trains only on the images shown in given cells of data/prepared/train.pt, never on labels.
The true digits of the images ({split}_truth.pt, "image_labels") are read only to report the
clustering accuracy; without that file training runs identically, unreported. Writes
models/cluster/final.pt, and for InfoGAN models/cluster/epoch_{e:03d}.pt every `checkpoint_every`
epochs (epoch 0 = the untrained init, for the ablation), all of the kept run; the test clustering
accuracy as its metric (per-epoch curves for InfoGAN, each restart's under restart_<r>/ when
there are several) and plots/cluster_{samples,confusion}.png.
"""
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from satground import infogan
from satground.clustering import (CLUSTERERS, InfoGANClusterer, cluster_members, cluster_report,
                                  format_accuracy, load_given_images, load_image_labels,
                                  peer_cannot_links, peer_conflict_rate, plot_confusion,
                                  plot_samples, save_clusterer)
from satground.config import (SEED_MAX, device_param, load_params, param, run_stage, seed_param,
                              source, stage_arguments)
from satground.io import PipelineError, atomic_directory, save_figure, seed_everything
from satground.tracking import StageReport


def read_params(params: dict) -> dict:
    p = {"method": param(params, "cluster.method", str, choices=tuple(CLUSTERERS), default="infogan")}
    p["epochs"] = param(params, "cluster.epochs", int, low=0)
    p["batch_size"] = param(params, "cluster.batch_size", int, low=2)
    p["lr_d"] = param(params, "cluster.lr_d", float, low=0.0, high=1.0)
    p["lr_g"] = param(params, "cluster.lr_g", float, low=0.0, high=1.0)
    p["noise_dim"] = param(params, "cluster.noise_dim", int, low=1, default=62)
    p["n_cont"] = param(params, "cluster.n_cont", int, low=0, default=2)
    p["cont_weight"] = param(params, "cluster.cont_weight", float, low=0.0, default=0.1)
    p["checkpoint_every"] = param(params, "cluster.checkpoint_every", int, low=1)
    p["restarts"] = param(params, "cluster.restarts", int, low=1, high=100, default=1)
    p["seed"] = seed_param(params, "cluster.seed")
    if p["seed"] + p["restarts"] - 1 > SEED_MAX:
        raise PipelineError(f"{source(params)}: 'cluster.seed' + 'cluster.restarts' - 1 exceeds "
                            f"{SEED_MAX}, the largest seed")
    p["n_neighbors"] = param(params, "cluster.n_neighbors", int, low=2, default=10)  # umap, spectral, peers
    p["peer_weight"] = param(params, "cluster.peer_weight", float, low=0.0, default=3.0)  # peers
    p["device"] = device_param()
    p["source"] = source(params)
    return p


@dataclass
class Pools:
    """The given-cell images of both splits; labels (or None) for reporting accuracy only."""
    train_images: torch.Tensor
    test_images: torch.Tensor
    train_labels: torch.Tensor | None
    test_labels: torch.Tensor | None
    n_clusters: int
    cannot_link: object  # scipy sparse (M, M): peer given cells of the training boards

    def report(self, clusterer) -> tuple[dict, dict]:
        """(train, test) cluster reports; the train one with the peer conflicts."""
        clusters = clusterer.assign(self.train_images)
        train = cluster_report(clusters, self.train_labels, self.n_clusters)
        train["peer_conflicts"] = peer_conflict_rate(clusters, self.cannot_link)
        return train, cluster_report(clusterer.assign(self.test_images), self.test_labels, self.n_clusters)


def fit_manifold(p, seed: int, pools: Pools, folder: Path, report, prefix: str):
    """The training-free methods: one fit, one checkpoint (final.pt)."""
    seed_everything(seed)
    clusterer = CLUSTERERS[p["method"]].fit(
        pools.train_images, pools.n_clusters, n_neighbors=p["n_neighbors"], seed=seed,
        cannot_link=pools.cannot_link if p["method"] == "peers" else None, peer_weight=p["peer_weight"])
    save_clusterer(clusterer, folder / "final.pt", epoch=0)
    return clusterer, []


def fit_infogan(p, seed: int, pools: Pools, folder: Path, report, prefix: str):
    """InfoGAN trained for cluster.epochs, checkpointed; returns it and its per-epoch rows."""
    rng = seed_everything(seed)
    model = infogan.InfoGAN(pools.n_clusters, p["noise_dim"], p["n_cont"]).to(p["device"])
    opt_d, opt_g = infogan.make_optimizers(model, p["lr_d"], p["lr_g"])
    clusterer = InfoGANClusterer(model)
    history = []

    def end_of_epoch(epoch: int, losses: dict, seconds: float | None) -> dict:
        # clusters of real images use batch-norm statistics of real images (see the function)
        infogan.calibrate_batch_norm(model, pools.train_images)
        train, test = pools.report(clusterer)
        row = {**losses, "train_largest_cluster": train["largest_cluster_fraction"],
               "peer_conflicts": train["peer_conflicts"], "train_accuracy": train["accuracy"],
               "test_accuracy": test["accuracy"]}
        report.log_epoch(epoch, row, prefix)
        history.append({"epoch": epoch, **row, "seconds": seconds})
        if epoch % p["checkpoint_every"] == 0 or epoch == p["epochs"]:
            save_clusterer(clusterer, folder / f"epoch_{epoch:03d}.pt", epoch=epoch)
        return row

    end_of_epoch(0, {}, None)
    steps_per_epoch = len(pools.train_images) // p["batch_size"]
    with tqdm(total=p["epochs"] * steps_per_epoch, desc=f"infogan seed {seed}", unit="step") as bar:
        for epoch in range(1, p["epochs"] + 1):
            start = time.perf_counter()
            losses = infogan.train_epoch(model, opt_d, opt_g, pools.train_images, p["batch_size"],
                                         rng, p["cont_weight"], progress=bar)
            row = end_of_epoch(epoch, losses, time.perf_counter() - start)
            bar.set_postfix({k: f"{v:.3f}" for k, v in row.items()
                             if k.endswith("accuracy") and v is not None})
    save_clusterer(clusterer, folder / "final.pt", epoch=p["epochs"])
    return clusterer, history


def fit_restarts(p, pools: Pools, out: Path, report: StageReport):
    """Each restart's run in out/restart_<r>/ (out itself for one restart); the run with the
    fewest peer conflicts is kept, its files moved to out. Returns the kept clusterer, its
    per-epoch history, the table of all runs and the kept run's row."""
    fit = fit_infogan if p["method"] == "infogan" else fit_manifold
    runs, kept = [], None
    for r in range(p["restarts"]):
        folder = out if p["restarts"] == 1 else out / f"restart_{r}"
        folder.mkdir(exist_ok=True)
        seed = p["seed"] + r
        start = time.perf_counter()
        clusterer, history = fit(p, seed, pools, folder, report, "" if p["restarts"] == 1 else f"restart_{r}/")
        train, test = pools.report(clusterer)
        run = {"restart": r, "seed": seed, "peer_conflicts": train["peer_conflicts"],
               "train_accuracy": train["accuracy"], "test_accuracy": test["accuracy"],
               "train_largest_cluster": train["largest_cluster_fraction"]}
        runs.append(run)
        print(f"cluster: {p['method']} seed {seed}: peer conflicts {run['peer_conflicts']:.4f}, clustering "
              f"accuracy train {format_accuracy(train['accuracy'])} / test {format_accuracy(test['accuracy'])}"
              f" ({time.perf_counter() - start:.0f} s)")
        if kept is None or run["peer_conflicts"] < kept[0]["peer_conflicts"]:  # ties: the earlier run
            if kept is not None:
                shutil.rmtree(kept[3])
            kept = (run, clusterer, history, folder)
        elif folder != out:
            shutil.rmtree(folder)  # InfoGAN checkpoints are large: keep the preferred run's only
    run, clusterer, history, folder = kept
    if folder != out:
        for file in folder.iterdir():
            file.rename(out / file.name)
        folder.rmdir()
        for row in history:  # the kept run's curves under the plain names, as with one restart
            report.log_epoch(row["epoch"], {k: v for k, v in row.items() if k not in ("epoch", "seconds")})
    return clusterer, history, runs, run


def main(argv=None):
    args = stage_arguments(__doc__, ["prepared", "model-out", "samples-plot-out", "confusion-plot-out",
                                     "metrics-out"], argv)

    p = read_params(load_params(args.params))
    train_images, train_idx, train_boards = load_given_images(args.prepared, "train")
    K = train_boards.n_digits
    test_images, test_idx, _ = load_given_images(args.prepared, "test", K)
    if p["method"] == "infogan" and len(train_images) < p["batch_size"]:
        raise PipelineError(f"{p['source']}: 'cluster.batch_size' = {p['batch_size']} exceeds the "
                            f"{len(train_images)} training images")
    pools = Pools(train_images, test_images,
                  # reporting only: None when the truth file is absent
                  load_image_labels(args.prepared, "train", train_idx),
                  load_image_labels(args.prepared, "test", test_idx),
                  K, peer_cannot_links(train_boards, train_idx))

    # a fresh folder that replaces models/cluster/ whole: no file of an earlier run survives
    report = StageReport(args.metrics_out)
    start = time.perf_counter()
    with atomic_directory(args.model_out) as out:
        clusterer, history, runs, kept = fit_restarts(p, pools, out, report)
    seconds = time.perf_counter() - start

    test_clusters = clusterer.assign(test_images)
    if p["method"] == "infogan":
        samples = plot_samples(infogan.sample_grid(clusterer.model, 10, torch.Generator().manual_seed(0)))
    else:
        samples = plot_samples(cluster_members(clusterer.assign(train_images), train_images, K),
                               f"{p['method']} clusters: training images, one row per cluster")
    save_figure(samples, args.samples_plot_out)
    save_figure(plot_confusion(test_clusters, pools.test_labels, K, "test images"), args.confusion_plot_out)

    last = history[-1] if history else {}
    timed = [row["seconds"] for row in history if row["seconds"] is not None]
    counts = clusterer.parameter_counts()
    info = {
        "method": p["method"], "seed": kept["seed"], "epochs": p["epochs"] if history else 0,
        "n_clusters": K, "n_train_images": len(train_images), "n_test_images": len(test_images),
        "train_accuracy": kept["train_accuracy"], "test_accuracy": kept["test_accuracy"],
        "train_largest_cluster": kept["train_largest_cluster"], "peer_conflicts": kept["peer_conflicts"],
        **{name: last.get(name) for name in ("loss_d", "loss_g", "loss_q_cat", "loss_q_cont") if history},
        "parameters": counts["total"], "parameters_classifier_path": counts["classifier_path"],
        "device": str(p["device"]) if history else "cpu",
        "restarts": runs,
    }
    report.finish({"cluster_acc": kept["test_accuracy"]}, info, fit_seconds=round(seconds, 2),
                  seconds_per_epoch=round(sum(timed) / len(timed), 2) if timed else None)

    print(f"cluster: {p['method']} K={K} on {len(train_images)} given-cell images, kept seed {kept['seed']} "
          f"of {p['restarts']} (fewest peer conflicts), clustering accuracy train "
          f"{format_accuracy(kept['train_accuracy'])} / test {format_accuracy(kept['test_accuracy'])} "
          f"-> {Path(args.model_out) / 'final.pt'} ({seconds:.1f} s)")


if __name__ == "__main__":
    run_stage(main)
