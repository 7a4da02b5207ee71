"""Atomic artifact writes, safe loading, seeding and device choice.

Every artifact goes through `atomic_write` (or `atomic_outputs` for a stage's outputs as a set):
it is written to a hidden temporary file beside its destination and renamed into place only once
complete, so a failing stage never leaves a half-written file behind, nor a mix of two runs'
files. Every artifact is read with `torch.load(weights_only=True)`: a file holding pickled code is
refused, never run.
"""
from __future__ import annotations

import contextlib
import json
import os
import pickle
import random
import shutil
import zipfile
from pathlib import Path

import numpy as np
import torch


class PipelineError(Exception):
    """A user-facing error: bad input or parameters. Its message is one line naming the culprit.
    (Stages print any exception marked `user_facing` as one line: config.run_stage.)"""

    user_facing = True


TMP_MARK = ".tmp-"  # temporary files are ".{name}.tmp-{pid}"; .dvcignore skips them


def _temporary(path: Path) -> Path:
    """A fresh temporary path beside `path`; removes the files and folders that killed earlier
    writers left (atomic_directory's temporary and replaced folders included)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for pattern in (f".{path.name}{TMP_MARK}*", f".{path.name}.old{TMP_MARK}*"):
        for stale in path.parent.glob(pattern):
            if stale.is_dir() and not stale.is_symlink():
                shutil.rmtree(stale, ignore_errors=True)
            else:
                stale.unlink(missing_ok=True)
    return path.with_name(f".{path.name}{TMP_MARK}{os.getpid()}")


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike):
    """Yield a temporary path; rename it to `path` if the block succeeds, delete it if not."""
    with atomic_outputs([path]) as (tmp,):
        yield tmp


@contextlib.contextmanager
def atomic_outputs(paths):
    """Yield temporary paths for several outputs; rename them all into place only if the block
    succeeds (a stage's outputs land together), delete them all if not."""
    paths = [Path(p) for p in paths]
    tmps = [_temporary(p) for p in paths]
    try:
        yield tmps
        for tmp, path in zip(tmps, paths):
            os.replace(tmp, path)
    except (OSError, RuntimeError) as exc:
        # a refused write (a full disk, a file-size limit) surfaces as an OSError without a file
        # name, or inside torch.save's RuntimeError: name the outputs it was writing
        cause = exc if isinstance(exc, OSError) else exc.__context__
        if not isinstance(cause, OSError) or cause.errno is None:
            raise
        names = str(paths[0]) if len(paths) == 1 else f"{len(paths)} files in {paths[0].parent}"
        raise OSError(cause.errno, os.strerror(cause.errno), names) from exc
    finally:
        for tmp in tmps:
            tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike):
    """Yield a fresh temporary folder; it replaces the folder `path` whole if the block succeeds
    (no file of an earlier run survives in it), and is deleted if not."""
    path = Path(path)
    tmp = _temporary(path)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    old = path.with_name(f".{path.name}.old{TMP_MARK}{os.getpid()}")
    try:
        yield tmp
        if path.exists():
            os.replace(path, old)
        os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)


def save_all(objects: dict) -> None:
    """{path: object}: a stage's outputs, renamed into place together (or none of them).
    A .json path gets the object as JSON (json_text), any other path torch.save's bytes."""
    with atomic_outputs(list(objects)) as tmps:
        for tmp, (path, obj) in zip(tmps, objects.items()):
            if Path(path).suffix == ".json":
                tmp.write_text(json_text(obj))
            else:
                # through a file object: torch then names the archive's inner folder "archive"
                # rather than after the temporary file, so equal objects give equal bytes
                with open(tmp, "wb") as f:
                    torch.save(obj, f)


def save_torch(obj, path) -> None:
    save_all({path: obj})


def json_text(obj) -> str:
    """The project's JSON layout (sorted keys: equal objects give equal files)."""
    return json.dumps(obj, indent=2, sort_keys=True) + "\n"


def save_json(obj, path) -> None:
    with atomic_write(path) as tmp:
        tmp.write_text(json_text(obj))


def save_figure(fig, path) -> None:
    """Save a matplotlib figure as PNG atomically and close it."""
    import matplotlib.pyplot as plt

    with atomic_write(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)


def load_json(path, what: str = "file") -> dict:
    """A JSON artifact; a missing or corrupt file is a one-line error naming it."""
    path = Path(path)
    if not path.is_file():
        raise PipelineError(f"{path}: {what} not found (run the stage that produces it)")
    try:
        return json.loads(path.read_text())
    except ValueError as exc:
        raise PipelineError(f"{path}: {what} is not valid JSON ({exc})") from None


def check_tensor_archive(path: Path, what: str) -> None:
    """Before torch.load reads a file pulled from elsewhere: torch.save writes its zip entries
    uncompressed, so an entry that is compressed, or claims more bytes than the file holds, is a
    file built to expand into memory (a zip bomb): refused before anything is allocated."""
    if not zipfile.is_zipfile(path):
        return  # torch's legacy format; torch.load refuses what it cannot read
    size = path.stat().st_size
    with zipfile.ZipFile(path) as archive:
        for entry in archive.infolist():
            if entry.compress_type != zipfile.ZIP_STORED or entry.file_size > size:
                raise PipelineError(f"{path}: refused: the {what}'s entry {entry.filename} claims "
                                    f"{entry.file_size:,} bytes from {entry.compress_size:,} in the "
                                    f"file (torch.save stores entries as they are)")


def check_tensor_sizes(obj, path: Path, what: str) -> None:
    """Every tensor in obj (nested dicts, lists) has the elements its shape claims: a tensor whose
    shape overlaps its storage (a stride of 0 makes 4 bytes claim 10^12 floats) is refused before
    any use of it allocates that much."""
    if isinstance(obj, torch.Tensor):
        if obj.numel() * obj.element_size() > obj.untyped_storage().nbytes():
            raise PipelineError(f"{path}: refused: a tensor of the {what} claims shape "
                                f"{tuple(obj.shape)} over {obj.untyped_storage().nbytes():,} bytes")
    elif isinstance(obj, dict):
        for value in obj.values():
            check_tensor_sizes(value, path, what)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            check_tensor_sizes(value, path, what)


def load_torch(path, what: str = "artifact", mmap: bool = False):
    """torch.load of a file that may come from elsewhere (a pulled experiment): one-line errors
    naming the file when it is missing, unreadable, holds code (weights_only) or tensors larger
    than it can hold (check_tensor_archive, check_tensor_sizes)."""
    path = Path(path)
    if not path.is_file():
        raise PipelineError(f"{path}: {what} not found (run the stage that produces it)")
    try:
        check_tensor_archive(path, what)
        try:
            obj = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
        except RuntimeError:
            if not mmap:
                raise
            obj = torch.load(path, map_location="cpu", weights_only=True)  # legacy files cannot be mapped
    except PipelineError:
        raise
    except pickle.UnpicklingError as exc:
        if "GLOBAL" not in str(exc):  # not a pickle torch.save writes: garbage, truncated
            raise PipelineError(f"{path}: cannot read {what} (not a file torch.save wrote)") from None
        raise PipelineError(f"{path}: refused: the {what} holds pickled objects other than tensors "
                            f"and plain values (loading it could run code)") from None
    except Exception as exc:  # corrupt or truncated file; torch's messages run to many lines
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise PipelineError(f"{path}: cannot read {what} ({type(exc).__name__}: {first})") from None
    check_tensor_sizes(obj, path, what)
    return obj


def check_finite_weights(module: torch.nn.Module, path, what: str) -> None:
    """One-line error naming the file and the first weight holding NaN or inf."""
    for name, value in module.state_dict().items():
        if value.is_floating_point() and not torch.isfinite(value).all():
            raise PipelineError(f"{path}: the {what} holds non-finite weights (NaN/inf) in '{name}'")


def seed_everything(seed: int) -> torch.Generator:
    """Seed python, numpy and torch; ask torch for deterministic kernels where it has them."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    return torch.Generator().manual_seed(seed)


def pick_device(requested: str = "auto", where: str = "$SATGROUND_DEVICE") -> torch.device:
    """'auto' takes CUDA when present, else CPU; 'cpu', 'cuda' or 'cuda:N' are checked against
    the machine before any work starts."""
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(requested)
    except RuntimeError:
        device = None
    if device is None or device.type not in ("cpu", "cuda"):
        raise PipelineError(f"{where}: the device must be auto, cpu, cuda or cuda:N, got {requested!r}")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise PipelineError(f"{where}: the device is {requested!r} but this machine has no CUDA GPU "
                                f"(use auto or cpu)")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise PipelineError(f"{where}: the device is {requested!r} but this machine has "
                                f"{torch.cuda.device_count()} CUDA GPU(s)")
    return device
