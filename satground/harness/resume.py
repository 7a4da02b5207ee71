"""Resumable training loops: a stage killed mid-training (a lost machine, a time limit, a queued
experiment stopped) continues after its last finished epoch when rerun, instead of starting again
from its first.

After each epoch a loop saves its state (model and optimizer, every random generator, the curves
so far and whatever else it keeps between epochs) atomically to `<resume folder>/<name>-<key>.pt`.
The key is a fingerprint, taken before the first epoch, of the model's initial weights, the
optimizer's settings, the shuffling generator, the loop's data and settings, and the project's
code: a changed parameter, input or line of code never resumes old state, and runs of different
experiments never share a file. The stages keep the folder outside the workspace
(satground.harness.stage.resume_folder), where neither DVC's deletion of a stage's outputs before a rerun
nor its deletion of a stopped queued experiment's workspace reaches it. The file is deleted when
the loop finishes.
"""
from __future__ import annotations

import hashlib
import random
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .io import PipelineError, load_torch, save_torch

PACKAGE = Path(__file__).resolve().parent.parent


def _digest(h, obj) -> None:
    """Feed obj (tensors, containers, dataclasses, plain values) into the hash h."""
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        h.update(f"{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(obj, dict):
        for key in sorted(obj, key=str):
            h.update(str(key).encode())
            _digest(h, obj[key])
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            _digest(h, item)
    elif hasattr(obj, "__dataclass_fields__"):
        _digest(h, {name: getattr(obj, name) for name in obj.__dataclass_fields__})
    else:
        h.update(repr(obj).encode())


def _code() -> list[bytes]:
    """The package's sources and the running script's: a code change never resumes old state."""
    files = sorted(PACKAGE.rglob("*.py"))
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    if main:
        files.append(Path(main))
    return [f.read_bytes() for f in files]


def _all_finite(obj) -> bool:
    """No floating tensor anywhere in obj (nested dicts, lists) holds NaN or inf."""
    if isinstance(obj, torch.Tensor):
        return not obj.is_floating_point() or bool(torch.isfinite(obj).all())
    if isinstance(obj, dict):
        return all(_all_finite(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return all(_all_finite(v) for v in obj)
    return True


def _random_states() -> dict:
    numpy_state = np.random.get_state()
    states = {"torch": torch.get_rng_state(), "python": random.getstate(),
              "numpy": (numpy_state[0], torch.from_numpy(numpy_state[1].astype(np.int64)),
                        *numpy_state[2:])}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def _set_random_states(states: dict) -> None:
    torch.set_rng_state(states["torch"])
    python = states["python"]
    random.setstate((python[0], tuple(python[1]), python[2]))
    name, keys, *rest = states["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), *rest))
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


@dataclass(frozen=True)
class ResumeOptions:
    """How a training loop resumes: its resume `folder` (None: never), the settings beyond the
    loop's own that its fingerprint covers (`identity`), and objects with a state_dict saved and
    restored with the model (`carry`: a loss with a running estimate)."""
    folder: Path | None = None
    identity: tuple = ()
    carry: tuple = ()


class Resumable:
    """One training loop's resume file. Build it before the first epoch (the fingerprint reads
    the initial state); `restore()` once, `save(epoch, state)` after each epoch, `finish()`.

    folder None: nothing is saved or restored (tests, callers without a resume folder)."""

    def __init__(self, folder, name: str, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                 generator: torch.Generator, *identity):
        self.name, self.model, self.optimizer, self.generator = name, model, optimizer, generator
        h = hashlib.sha256()
        _digest(h, [name, model.state_dict(), optimizer.state_dict()["param_groups"],
                    generator.get_state(), list(identity), _code()])
        self.fingerprint = h.hexdigest()
        self.path = None if folder is None else Path(folder) / f"{name}-{self.fingerprint[:20]}.pt"

    def restore(self) -> tuple[int, dict | None]:
        """(last epoch saved, the state saved with it) when the file is this run's, else (0, None)."""
        if self.path is None or not self.path.is_file():
            return 0, None
        try:
            saved = load_torch(self.path, "resume file")
        except PipelineError as exc:
            print(f"{self.name}: not resuming, {exc}; starting from epoch 1")
            return 0, None
        if not isinstance(saved, dict) or saved.get("fingerprint") != self.fingerprint:
            print(f"{self.name}: {self.path} is from another run (parameters, data or code differ); "
                  "starting from epoch 1")
            return 0, None
        if not _all_finite([saved.get("model"), saved.get("optimizer")]):
            print(f"{self.name}: {self.path} holds non-finite weights or optimizer state "
                  "(NaN/inf); starting from epoch 1")
            return 0, None
        self.model.load_state_dict(saved["model"])
        self.optimizer.load_state_dict(saved["optimizer"])
        self.generator.set_state(saved["generator"])
        _set_random_states(saved["random"])
        print(f"{self.name}: resuming after epoch {saved['epoch']} from {self.path}")
        return saved["epoch"], saved["state"]

    def save(self, epoch: int, state: dict) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        save_torch({"fingerprint": self.fingerprint, "epoch": epoch, "state": state,
                    "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                    "generator": self.generator.get_state(), "random": _random_states()}, self.path)

    def finish(self) -> None:
        if self.path is not None:
            self.path.unlink(missing_ok=True)
