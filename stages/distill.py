"""Stage `distill`: train LeNet on a clusterer's assignments of the training given-cell images.

The teacher (final.pt of the clusterer folder, or the epoch checkpoint `distill.checkpoint`
names, for the ablation) labels the training boards' given-cell images with its clusters; LeNet learns those cluster
indices by cross-entropy. `distill.mislabel` > 0 moves that share of the training targets to a
wrong cluster first (drawn with `distill.seed`): a controlled clustering error for the ablation;
`distill.boundary_shift` > 0 moves that share to their nearest other cluster instead, the images
nearest to one (an error a classifier learns, where random ones are averaged away). True digits ({split}_truth.pt, "image_labels") are read only to
report clustering accuracy (Hungarian). Writes models/lenet.pt ({"state_dict", "n_classes"}),
its test clustering accuracy as the metric, and per-epoch curves.
"""
import time
from pathlib import Path

import torch
from tqdm import tqdm

from satground import lenet
from satground.clustering import (cluster_report, format_accuracy, load_clusterer, load_given_images,
                                  load_image_labels, mislabel, shift_boundaries)
from satground.config import (device_param, load_params, param, run_stage, seed_param, source,
                              stage_arguments)
from satground.io import PipelineError, seed_everything
from satground.tracking import StageReport


def read_params(params: dict) -> dict:
    return {
        "epochs": param(params, "distill.epochs", int, low=1),
        "batch_size": param(params, "distill.batch_size", int, low=1),
        "lr": param(params, "distill.lr", float, low=0.0, high=1.0),
        "seed": seed_param(params, "distill.seed"),
        # "final", or an epoch of a saved clusterer checkpoint: the clustering-accuracy ablation
        # sweeps this (README, "The ablation")
        "checkpoint": param(params, "distill.checkpoint", (str, int), default="final"),
        "mislabel": param(params, "distill.mislabel", float, low=0.0, high=1.0, default=0.0),
        "boundary_shift": param(params, "distill.boundary_shift", float, low=0.0, high=1.0,
                                default=0.0),
        # random affine copies of the training images each epoch (0 = off): the classifier
        # must read unseen test images, and every given of a board must be read right
        "augmentation": {
            "shift": param(params, "distill.augment.shift", float, low=0.0, high=14.0, default=0.0),
            "rotation": param(params, "distill.augment.rotation", float, low=0.0, high=180.0,
                              default=0.0),
            "scale": param(params, "distill.augment.scale", float, low=0.0, high=0.9, default=0.0),
        },
        "device": device_param(),
        "source": source(params),
    }


def checkpoint_path(folder, checkpoint, where: str) -> Path:
    """The clusterer file of `folder` that `distill.checkpoint` names."""
    if checkpoint == "final":
        return Path(folder) / "final.pt"
    if isinstance(checkpoint, int) and not isinstance(checkpoint, bool) and checkpoint >= 0:
        return Path(folder) / f"epoch_{checkpoint:03d}.pt"
    raise PipelineError(f"{where}: 'distill.checkpoint' must be 'final' or an epoch >= 0, "
                        f"got {checkpoint!r}")


def main(argv=None):
    args = stage_arguments(__doc__, ["prepared", "clusterer", "model-out", "metrics-out"], argv)

    p = read_params(load_params(args.params))
    device = p["device"]
    teacher_path = checkpoint_path(args.clusterer, p["checkpoint"], p["source"])
    teacher = load_clusterer(teacher_path)
    train_images, train_idx, train_boards = load_given_images(args.prepared, "train")
    K = train_boards.n_digits
    test_images, test_idx, _ = load_given_images(args.prepared, "test", K)
    if teacher.n_clusters != K:
        raise PipelineError(f"{teacher_path}: clusterer has {teacher.n_clusters} clusters but the "
                            f"boards in {args.prepared} have {K} digits")
    train_labels = load_image_labels(args.prepared, "train", train_idx)  # reporting only
    test_labels = load_image_labels(args.prepared, "test", test_idx)

    teacher_train = teacher.assign(train_images)
    targets = mislabel(teacher_train, p["mislabel"], K, p["seed"]) if p["mislabel"] else teacher_train
    if p["boundary_shift"]:
        targets = shift_boundaries(train_images, targets, p["boundary_shift"], K)
    teacher_test = teacher.assign(test_images)

    rng = seed_everything(p["seed"])
    model = lenet.LeNet(K).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=p["lr"])

    report = StageReport(args.metrics_out)
    seconds = []
    for epoch in tqdm(range(1, p["epochs"] + 1), desc="distill", unit="epoch"):
        start = time.perf_counter()
        loss = lenet.train_epoch(model, optimizer, train_images, targets, p["batch_size"], rng,
                                 p["augmentation"])
        seconds.append(time.perf_counter() - start)
        test_pred = lenet.predict(model, test_images)
        report.log_epoch(epoch, {"loss": loss,
                                 "test_agreement": (test_pred == teacher_test).float().mean().item(),
                                 "test_accuracy": cluster_report(test_pred, test_labels, K)["accuracy"]})
    lenet.save_lenet(model.cpu(), args.model_out)

    train_pred = lenet.predict(model, train_images)
    test_pred = lenet.predict(model, test_images)
    teacher_counts = teacher.parameter_counts()
    info = {
        "teacher": str(teacher_path), "mislabel": p["mislabel"], "boundary_shift": p["boundary_shift"], "seed": p["seed"], "epochs": p["epochs"], "n_classes": K,
        "n_train_images": len(train_images), "n_test_images": len(test_images),
        "final_loss": loss,
        "train_agreement": (train_pred == targets).float().mean().item(),
        "test_agreement": (test_pred == teacher_test).float().mean().item(),
        "train_accuracy": cluster_report(train_pred, train_labels, K)["accuracy"],
        "test_accuracy": cluster_report(test_pred, test_labels, K)["accuracy"],
        "teacher_test_accuracy": cluster_report(teacher_test, test_labels, K)["accuracy"],
        "target_accuracy": cluster_report(targets, train_labels, K)["accuracy"],
        "lenet_parameters": lenet.count_parameters(model),
        "teacher_parameters": teacher_counts.get("total"),
        "teacher_parameters_classifier_path": teacher_counts.get("classifier_path"),
        "device": str(device),
    }
    report.finish({"lenet_acc": info["test_accuracy"]}, info,
                  seconds_per_epoch=round(sum(seconds) / len(seconds), 3))

    print(f"distill: LeNet ({info['lenet_parameters']:,} parameters) from {teacher_path}: "
          f"test clustering accuracy {format_accuracy(info['test_accuracy'])} (teacher "
          f"{format_accuracy(info['teacher_test_accuracy'])}), agreement with teacher "
          f"{info['test_agreement']:.3f} -> {args.model_out}")


if __name__ == "__main__":
    run_stage(main)
