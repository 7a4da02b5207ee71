"""Stage `distill`: the classifier in front of SATNet, from the clusterer.

The paper's (`distill.classifier: lenet`): LeNet learns the clusterer's assignments of the training
given-cell images. Ours (`clusterer`): the clusterer's own CNN ensemble is the classifier, nothing
distilled (a self-labelled clusterer already reads any image; LeNet distilled from it read about
two points fewer dev images right, docs/studies/clusterer-classifier.md).

The teacher (final.pt of the clusterer folder, or the epoch checkpoint `distill.checkpoint`
names, for the ablation) labels the training boards' given-cell images with its clusters; LeNet learns those cluster
indices by cross-entropy. `distill.mislabel` > 0 moves that share of the training targets to a
wrong cluster first (drawn with `distill.seed`): a controlled clustering error for the ablation;
`distill.boundary_shift` > 0 moves that share to their nearest other cluster instead, the images
nearest to one (an error a classifier learns, where random ones are averaged away). The true
digits of the dev boards' images (dev_truth.pt, "image_labels") are read only to report the
clustering accuracy (Hungarian); no truth of the training or test images is read. Writes
models/classifier.pt (satground.readers.classifier), its dev clustering accuracy as the metric, and
LeNet's per-epoch curves.
"""
import time
from dataclasses import asdict
from pathlib import Path

import torch
from tqdm import tqdm

from satground.readers import lenet
from satground.readers.classifier import save_classifier
from satground.clustering.ablation import mislabel, shift_boundaries
from satground.clustering import load_clusterer
from satground.boards.data import load_given_images, load_image_labels
from satground.harness.io import PipelineError, seed_everything
from satground.boards.metrics import cluster_report, format_accuracy
from satground.harness.params import load_params
from satground.harness.stage import run_stage, stage_arguments, stage_device
from satground.harness.tracking import StageReport


def checkpoint_path(folder, checkpoint) -> Path:
    """The clusterer file of `folder` that `distill.checkpoint` names ("final" or an epoch)."""
    return Path(folder) / ("final.pt" if checkpoint == "final" else f"epoch_{checkpoint:03d}.pt")


def main(argv=None):
    args = stage_arguments(__doc__, ["prepared", "clusterer", "model-out", "metrics-out"], argv)

    params = load_params(args.params)
    cfg = params.distill
    device = stage_device()
    teacher_path = checkpoint_path(args.clusterer, cfg.checkpoint)
    teacher = load_clusterer(teacher_path)
    train_images, train_idx, train_boards = load_given_images(args.prepared, "train")
    K = train_boards.n_digits
    dev_images, dev_idx, _ = load_given_images(args.prepared, "dev", K)
    clusters = params.cluster.n_clusters(K)  # K' > K: surjective grounding
    if teacher.n_clusters != clusters:
        expected = (f"the boards in {args.prepared} have {K} digits" if clusters == K
                    else f"'cluster.clusters' is {clusters}")
        raise PipelineError(f"{teacher_path}: clusterer has {teacher.n_clusters} clusters but {expected}")
    dev_labels = load_image_labels(args.prepared, "dev", dev_idx)  # reporting only

    teacher_train = teacher.assign(train_images)
    targets = mislabel(teacher_train, cfg.mislabel, clusters, cfg.seed) if cfg.mislabel else teacher_train
    if cfg.boundary_shift:
        targets = shift_boundaries(train_images, targets, cfg.boundary_shift, clusters)
    teacher_dev = teacher.assign(dev_images)

    report = StageReport(args.metrics_out)
    seconds = []  # LeNet's epochs
    if cfg.classifier == "clusterer":  # ours: the clusterer's own nets read the digits
        model, loss = teacher.as_reader(), None
    else:  # the paper: LeNet learns the clusters
        rng = seed_everything(cfg.seed)
        model = lenet.LeNet(clusters).to(device)
        optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
        for epoch in tqdm(range(1, cfg.epochs + 1), desc="distill", unit="epoch"):
            start = time.perf_counter()
            loss = lenet.distill_epoch(model, optimizer, train_images, targets, cfg.batch_size, rng,
                                       asdict(cfg.augment))
            seconds.append(time.perf_counter() - start)
            dev_pred = lenet.predict(model, dev_images)
            report.log_epoch(epoch, {"loss": loss,
                                     "dev_agreement": (dev_pred == teacher_dev).float().mean().item(),
                                     "dev_accuracy": cluster_report(dev_pred, dev_labels, clusters, K)["accuracy"]})
    save_classifier(model.cpu(), args.model_out)

    train_pred = lenet.predict(model, train_images)
    dev_pred = lenet.predict(model, dev_images)
    teacher_counts = teacher.parameter_counts()
    info = {
        "teacher": str(teacher_path), "mislabel": cfg.mislabel, "boundary_shift": cfg.boundary_shift,
        "classifier": cfg.classifier, "seed": cfg.seed,
        "epochs": cfg.epochs if cfg.classifier == "lenet" else 0, "n_classes": clusters,
        "n_train_images": len(train_images), "n_dev_images": len(dev_images),
        "final_loss": loss,
        "train_agreement": (train_pred == targets).float().mean().item(),
        "dev_agreement": (dev_pred == teacher_dev).float().mean().item(),
        "dev_accuracy": cluster_report(dev_pred, dev_labels, clusters, K)["accuracy"],
        "teacher_dev_accuracy": cluster_report(teacher_dev, dev_labels, clusters, K)["accuracy"],
        "targets_moved": (targets != teacher_train).float().mean().item(),  # the ablation's corruption
        "classifier_parameters": lenet.count_parameters(model),
        "teacher_parameters": teacher_counts.get("total"),
        "teacher_parameters_classifier_path": teacher_counts.get("classifier_path"),
        "device": str(device),
    }
    report.finish({"classifier_dev_accuracy": info["dev_accuracy"]}, info,
                  seconds_per_epoch=round(sum(seconds) / len(seconds), 3) if seconds else 0.0)

    what = "LeNet" if cfg.classifier == "lenet" else "the clusterer's CNNs"
    print(f"distill: {what} ({info['classifier_parameters']:,} parameters) from {teacher_path}: "
          f"dev clustering accuracy {format_accuracy(info['dev_accuracy'])} (teacher "
          f"{format_accuracy(info['teacher_dev_accuracy'])}), agreement with teacher "
          f"{info['dev_agreement']:.3f} -> {args.model_out}")


if __name__ == "__main__":
    run_stage(main)
