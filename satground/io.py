"""Atomic artifact writes, seeding and device choice.

Every artifact goes through `atomic_write`: it is written to a hidden temporary file beside
its destination and renamed into place only once complete, so a failing stage never leaves
a half-written file behind.
"""
from __future__ import annotations

import contextlib
import json
import os
import random
from pathlib import Path

import numpy as np
import torch


class PipelineError(Exception):
    """A user-facing error: bad input or parameters. Its message is one line naming the culprit."""


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike):
    """Yield a temporary path; rename it to `path` if the block succeeds, delete it if not."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def save_torch(obj, path) -> None:
    # through a file object: torch then names the archive's inner folder "archive" rather than
    # after the (temporary) file name, so equal objects give byte-identical files
    with atomic_write(path) as tmp, open(tmp, "wb") as f:
        torch.save(obj, f)


def save_json(obj, path) -> None:
    with atomic_write(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")


def save_text(text: str, path) -> None:
    with atomic_write(path) as tmp:
        tmp.write_text(text)


def save_figure(fig, path) -> None:
    """Save a matplotlib figure as PNG atomically and close it."""
    import matplotlib.pyplot as plt

    with atomic_write(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)


def load_torch(path, what: str = "artifact"):
    """torch.load with a one-line error naming the file when it is missing or unreadable."""
    path = Path(path)
    if not path.is_file():
        raise PipelineError(f"{path}: {what} not found (run the stage that produces it)")
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # corrupt or truncated file; torch's messages run to many lines
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise PipelineError(f"{path}: cannot read {what} ({type(exc).__name__}: {first})") from None


def seed_everything(seed: int) -> torch.Generator:
    """Seed python, numpy and torch; ask torch for deterministic kernels where it has them."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    return torch.Generator().manual_seed(seed)


def pick_device(requested: str = "auto") -> torch.device:
    """'auto' takes CUDA when present, else CPU."""
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(requested)
