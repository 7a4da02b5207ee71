"""Stage `cluster`: unsupervised clustering of the training boards' given-cell images.

`cluster.method`: infogan (the paper's; trained, checkpointed per epoch), or umap / spectral
(training-free embeddings of the images' neighbourhood graph + k-means, satground/manifold.py).

Trains only on the images shown in given cells of data/prepared/train.pt, never on labels.
The true digits of the images ({split}_truth.pt, "image_labels") are read only to report the
clustering accuracy each epoch; without that file training runs identically, unreported.
Writes models/cluster/final.pt, models/cluster/epoch_{e:03d}.pt every `checkpoint_every`
epochs (epoch 0 = the untrained init, for the ablation), the test clustering accuracy as its
metric (per-epoch curves for InfoGAN) and plots/cluster_{samples,confusion}.png.
"""
import time
from pathlib import Path

import torch
from tqdm import tqdm

from satground import infogan
from satground.clustering import (CLUSTERERS, InfoGANClusterer, cluster_members, cluster_report,
                                  format_accuracy, load_given_images, load_image_labels,
                                  peer_cannot_links, plot_confusion, plot_samples, save_clusterer)
from satground.config import (device_param, load_params, param, run_stage, seed_param, source,
                              stage_arguments)
from satground.io import PipelineError, atomic_directory, save_figure, seed_everything
from satground.tracking import StageReport


def read_params(params: dict) -> dict:
    p = {"method": param(params, "cluster.method", str, choices=tuple(CLUSTERERS), default="infogan")}
    p["epochs"] = param(params, "cluster.epochs", int, low=0)
    p["batch_size"] = param(params, "cluster.batch_size", int, low=2)
    p["lr_d"] = param(params, "cluster.lr_d", float, low=0.0)
    p["lr_g"] = param(params, "cluster.lr_g", float, low=0.0)
    p["noise_dim"] = param(params, "cluster.noise_dim", int, low=1, default=62)
    p["n_cont"] = param(params, "cluster.n_cont", int, low=0, default=2)
    p["cont_weight"] = param(params, "cluster.cont_weight", float, low=0.0, default=0.1)
    p["checkpoint_every"] = param(params, "cluster.checkpoint_every", int, low=1)
    p["seed"] = seed_param(params, "cluster.seed")
    p["n_neighbors"] = param(params, "cluster.n_neighbors", int, low=2, default=10)  # umap, spectral, peers
    p["peer_weight"] = param(params, "cluster.peer_weight", float, low=0.0, default=3.0)  # peers
    p["device"] = device_param(params)
    p["source"] = source(params)
    return p


def fit_manifold(p, args, train_images, test_images, train_labels, test_labels, K, cannot_link):
    """The training-free methods: one fit, one checkpoint (final.pt), the same reports."""
    report = StageReport(args.metrics_out)
    seed_everything(p["seed"])
    start = time.perf_counter()
    clusterer = CLUSTERERS[p["method"]].fit(train_images, K, n_neighbors=p["n_neighbors"], seed=p["seed"],
                                             cannot_link=cannot_link, peer_weight=p["peer_weight"])
    seconds = time.perf_counter() - start
    out = Path(args.model_out)
    with atomic_directory(out) as folder:  # no checkpoint of an earlier run survives beside it
        save_clusterer(clusterer, folder / "final.pt", epoch=0)

    train_clusters, test_clusters = clusterer.assign(train_images), clusterer.assign(test_images)
    train = cluster_report(train_clusters, train_labels, K)
    test = cluster_report(test_clusters, test_labels, K)
    save_figure(plot_samples(cluster_members(train_clusters, train_images, K),
                             f"{p['method']} clusters: training images, one row per cluster"),
                args.samples_plot_out)
    save_figure(plot_confusion(test_clusters, test_labels, K, "test images"), args.confusion_plot_out)
    counts = clusterer.parameter_counts()
    info = {
        "method": p["method"], "seed": p["seed"], "epochs": 0, "n_clusters": K,
        "n_train_images": len(train_images), "n_test_images": len(test_images),
        "train_accuracy": train["accuracy"], "test_accuracy": test["accuracy"],
        "train_largest_cluster": train["largest_cluster_fraction"],
        "parameters": counts["total"], "parameters_classifier_path": counts["classifier_path"],
        "device": "cpu",
    }
    report.finish({"cluster_acc": test["accuracy"]}, info, fit_seconds=round(seconds, 2))

    print(f"cluster: {p['method']} K={K} on {len(train_images)} given-cell images in {seconds:.1f} s, "
          f"clustering accuracy train {format_accuracy(train['accuracy'])} / test {format_accuracy(test['accuracy'])} "
          f"-> {out / 'final.pt'}")


def main(argv=None):
    args = stage_arguments(__doc__, ["prepared", "model-out", "samples-plot-out", "confusion-plot-out",
                                     "metrics-out"], argv)

    p = read_params(load_params(args.params))
    device = p["device"]
    train_images, train_idx, train_boards = load_given_images(args.prepared, "train")
    K = train_boards.n_digits
    test_images, test_idx, _ = load_given_images(args.prepared, "test", K)
    if len(train_images) < p["batch_size"]:
        raise PipelineError(f"{p['source']}: 'cluster.batch_size' = {p['batch_size']} exceeds the "
                            f"{len(train_images)} training images")
    # reporting only: None when the truth file is absent
    train_labels = load_image_labels(args.prepared, "train", train_idx)
    test_labels = load_image_labels(args.prepared, "test", test_idx)
    if p["method"] != "infogan":
        cannot_link = peer_cannot_links(train_boards, train_idx) if p["method"] == "peers" else None
        return fit_manifold(p, args, train_images, test_images, train_labels, test_labels, K, cannot_link)

    rng = seed_everything(p["seed"])
    model = infogan.InfoGAN(K, p["noise_dim"], p["n_cont"]).to(device)
    opt_d, opt_g = infogan.make_optimizers(model, p["lr_d"], p["lr_g"])
    clusterer = InfoGANClusterer(model)

    # checkpoints go to a fresh folder that replaces models/cluster/ whole: no file of an
    # earlier run survives beside them
    report = StageReport(args.metrics_out)
    with atomic_directory(args.model_out) as out:
        steps_per_epoch = len(train_images) // p["batch_size"]
        history = []

        def end_of_epoch(epoch: int, losses: dict, seconds: float | None) -> dict:
            # clusters of real images use batch-norm statistics of real images (see the function)
            infogan.calibrate_batch_norm(model, train_images)
            train = cluster_report(clusterer.assign(train_images), train_labels, K)
            test = cluster_report(clusterer.assign(test_images), test_labels, K)
            row = {"epoch": epoch, **losses, "train_largest_cluster": train["largest_cluster_fraction"]}
            if train["accuracy"] is not None:
                row["train_accuracy"] = train["accuracy"]
            if test["accuracy"] is not None:
                row["test_accuracy"] = test["accuracy"]
            report.log_epoch(epoch, {k: v for k, v in row.items() if k != "epoch"})
            if seconds is not None:
                row["seconds_per_epoch"] = seconds
            if epoch % p["checkpoint_every"] == 0 or epoch == p["epochs"]:
                save_clusterer(clusterer, out / f"epoch_{epoch:03d}.pt", epoch=epoch)
            history.append(row)
            return row

        end_of_epoch(0, {}, None)
        with tqdm(total=p["epochs"] * steps_per_epoch, desc="infogan", unit="step") as bar:
            for epoch in range(1, p["epochs"] + 1):
                start = time.perf_counter()
                losses = infogan.train_epoch(model, opt_d, opt_g, train_images, p["batch_size"], rng,
                                             p["cont_weight"], progress=bar)
                row = end_of_epoch(epoch, losses, time.perf_counter() - start)
                bar.set_postfix({k: f"{v:.3f}" for k, v in row.items() if k.endswith("accuracy")})
        save_clusterer(clusterer, out / "final.pt", epoch=p["epochs"])

    test_clusters = clusterer.assign(test_images)
    save_figure(plot_samples(infogan.sample_grid(model, 10, torch.Generator().manual_seed(0))),
                args.samples_plot_out)
    save_figure(plot_confusion(test_clusters, test_labels, K, "test images"), args.confusion_plot_out)

    last = history[-1]
    timed = [row["seconds_per_epoch"] for row in history if "seconds_per_epoch" in row]
    counts = clusterer.parameter_counts()
    info = {
        "method": p["method"], "seed": p["seed"], "epochs": p["epochs"], "n_clusters": K,
        "n_train_images": len(train_images), "n_test_images": len(test_images),
        "train_accuracy": last.get("train_accuracy"), "test_accuracy": last.get("test_accuracy"),
        "train_largest_cluster": last["train_largest_cluster"],
        "loss_d": last.get("loss_d"), "loss_g": last.get("loss_g"),
        "loss_q_cat": last.get("loss_q_cat"), "loss_q_cont": last.get("loss_q_cont"),
        "parameters": counts["total"], "parameters_classifier_path": counts["classifier_path"],
        "device": str(device),
    }
    report.finish({"cluster_acc": info["test_accuracy"]}, info,
                  seconds_per_epoch=round(sum(timed) / len(timed), 2) if timed else None)

    print(f"cluster: {p['method']} K={K}, {p['epochs']} epochs on {len(train_images)} given-cell images, "
          f"clustering accuracy train {format_accuracy(info['train_accuracy'])} / test {format_accuracy(info['test_accuracy'])}"
          f" -> {Path(args.model_out) / 'final.pt'}")


if __name__ == "__main__":
    run_stage(main)
