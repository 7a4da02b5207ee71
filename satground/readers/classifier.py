"""The digit classifier's file, models/classifier.pt, and its one owner.

The classifier in front of SATNet is either LeNet (the paper's: distilled from the clusters) or a
DigitReader, an ensemble of small CNNs: the image clusterer's own nets (`distill.classifier:
clusterer`, ours) or the re-read stage's reader. The file holds {"state_dict", "n_classes"} and,
for a DigitReader, "reader" (its config); a solver checkpoint (satground.solver.models) keeps the same
three entries for its classifier.
"""
from __future__ import annotations

from torch import nn

from .digitcnn import DigitReader
from ..harness.io import PipelineError, check_finite_weights, load_torch, save_torch
from .lenet import LeNet


def build_classifier(n_classes: int, reader: dict | None = None) -> nn.Module:
    """An untrained classifier of that kind: a DigitReader with config `reader`, else LeNet."""
    return DigitReader(n_classes, **reader) if reader else LeNet(n_classes)


def reader_config(model: nn.Module) -> dict | None:
    """The config a DigitReader is rebuilt from; None for LeNet."""
    return dict(model.config) if isinstance(model, DigitReader) else None


def save_classifier(model: nn.Module, path) -> None:
    record = {"state_dict": model.state_dict(), "n_classes": model.n_classes}
    if reader_config(model) is not None:
        record["reader"] = reader_config(model)
    save_torch(record, path)


def load_classifier(path, n_classes: int | None = None) -> nn.Module:
    """Rebuild a classifier saved by save_classifier; one-line PipelineError when the file is
    not one, or, given `n_classes` (the boards' digits, or cluster.clusters), when it has not
    that many classes."""
    ckpt = load_torch(path, "classifier model")
    if not isinstance(ckpt, dict) or "state_dict" not in ckpt or "n_classes" not in ckpt:
        raise PipelineError(f"{path}: not a classifier model file (expected keys state_dict, n_classes)")
    if type(ckpt["n_classes"]) is not int or not 2 <= ckpt["n_classes"] <= 100:
        raise PipelineError(f"{path}: 'n_classes' must be an integer in [2, 100], got {ckpt['n_classes']!r}")
    reader = ckpt.get("reader")
    try:
        if reader is not None and not isinstance(reader, dict):
            raise TypeError(f"'reader' must be a mapping, got {type(reader).__name__}")
        model = build_classifier(ckpt["n_classes"], reader)
        model.load_state_dict(ckpt["state_dict"])
    except (RuntimeError, TypeError, ValueError) as exc:
        raise PipelineError(f"{path}: classifier weights do not fit ({str(exc).splitlines()[0]})") from None
    check_finite_weights(model, path, "classifier model")
    if n_classes is not None and model.n_classes != n_classes:
        raise PipelineError(f"{path}: classifier has {model.n_classes} classes, the pipeline expects "
                            f"{n_classes} (the boards' digits, or cluster.clusters)")
    return model
