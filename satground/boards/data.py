"""Visual Sudoku boards: building, saving and loading the `prepare` stage's artifacts.

Files under the prepared root (K = board_size**2 digits, C = board_size**4 cells):

Splits: train (the boards the method learns from), dev (the development split: every per-epoch
curve, early stopping, threshold and design choice is scored on it) and test (read by `evaluate`
alone, and by the baselines once at their end; of the repository's scripts and studies only
scripts/keep_results.py may ask for it). Each split draws its digit images from its own
pool, disjoint from the others'.

    {split}.pt            the ungrounded view, the only board file training code reads:
                          board_size, images uint8 (P, 28, 28) (the split's shuffled image pool),
                          cell_image int64 (N, C) (pool index at given cells, -1 at blanks),
                          is_input bool (N, C), labels uint8 (N, C) (solution digit at non-input
                          cells, 0 at input cells: the input labels are not in this file at all)
    {split}_grounded.pt   {"labels": uint8 (N, C)}: the full solution
    {split}_truth.pt      {"input_labels": uint8 (N, C), "image_labels": uint8 (P,)}: the true
                          digit of every input cell and pool image, for evaluation only
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..harness.io import PipelineError, load_torch, save_all
from .sudoku import conflicting_boards, peers, valid_grids

SPLITS = ("train", "dev", "test")

# The test split is read to keep a record: by the stages (dvc.yaml gives it to evaluate and the
# baselines' final scoring alone, tests/test_dev_split.py) and by scripts/keep_results.py. A
# study, a one-off script or a dev tool scores the dev split, or reads a kept record.
RECORD_KEEPERS = ("keep_results",)


def _refuse_test_outside_records(split: str, path: Path) -> None:
    """Stop a studies/ or scripts/ file of a checkout (other than RECORD_KEEPERS) that asks, at
    any depth of the call stack, for the test split's boards or truth."""
    if split != "test":
        return
    frame = sys._getframe(1)
    while frame is not None:
        source = Path(frame.f_code.co_filename)
        if (source.parent.name in ("studies", "scripts") and (source.parent.parent / "satground").is_dir()
                and source.stem not in RECORD_KEEPERS):
            raise PipelineError(f"{path}: {source.parent.name}/{source.name} may not read the test split "
                                "(evaluate and scripts/keep_results.py keep its records); score the dev split")
        frame = frame.f_back


@dataclass
class Boards:
    board_size: int
    images: torch.Tensor      # uint8 (P, 28, 28)
    cell_image: torch.Tensor  # int64 (N, C), -1 at blank cells
    is_input: torch.Tensor    # bool (N, C)
    labels: torch.Tensor      # uint8 (N, C); 0 at input cells in the ungrounded view

    @property
    def n_digits(self) -> int:
        return self.board_size ** 2

    @property
    def n_cells(self) -> int:
        return self.board_size ** 4

    def __len__(self) -> int:
        return len(self.cell_image)


# ---------------------------------------------------------------------------------------------
# building


def split_image_pools(images: np.ndarray, labels: np.ndarray, board_size: int, test_fraction: float,
                      seed: int, where: str = "params.yaml", dev_fraction: float | None = None,
                      train_images: int | None = None) -> dict:
    """Split the images of digits 1..K into disjoint train, test and (given a dev_fraction) dev pools.

    Byte-identical images are kept once, so no image can land in two pools. Within each digit a
    `test_fraction` share goes to the test pool, then a `dev_fraction` share to the dev pool, the
    rest to train, capped at ceil(train_images / K) images per digit where `train_images` is given
    (the same boards then reuse each training image more often). Each pool is shuffled, so an image's index says nothing about its digit.
    Returns {split: (images uint8 (P, 28, 28), labels uint8 (P,))}.
    """
    K = board_size ** 2
    keep = (labels >= 1) & (labels <= K)
    images, labels = images[keep], labels[keep]
    _, first = np.unique(images.reshape(len(images), -1), axis=0, return_index=True)
    first = np.sort(first)
    images, labels = images[first], labels[first]

    held_out = {"test": test_fraction, **({"dev": dev_fraction} if dev_fraction is not None else {})}
    rng = np.random.default_rng(seed)
    chosen = {split: [] for split in ("train", *held_out)}
    for digit in range(1, K + 1):
        idx = rng.permutation(np.flatnonzero(labels == digit))
        if len(idx) < len(chosen):
            raise PipelineError(f"MNIST digits: {len(idx)} image(s) of digit {digit}; boards of {K} digits "
                                f"need at least {len(chosen)} of each of 1..{K} (one per split)")
        start = 0
        for split, fraction in held_out.items():
            n = int(round(fraction * len(idx)))
            if n == 0 or start + n >= len(idx):
                raise PipelineError(f"{where}: 'data.{split}_image_fraction' = {fraction} leaves digit "
                                    f"{digit} ({len(idx)} images) without {split} or train images")
            chosen[split].append(idx[start:start + n])
            start += n
        chosen["train"].append(idx[start:] if train_images is None else idx[start:start + -(-train_images // K)])
    pools = {}
    for split, parts in chosen.items():
        idx = rng.permutation(np.concatenate(parts))
        pools[split] = (images[idx], labels[idx])
    return pools


def build_visual_boards(puzzles: np.ndarray, solutions: np.ndarray, images: np.ndarray,
                        labels: np.ndarray, board_size: int, seed: int) -> Boards:
    """Boards whose given cells show a random pool image of their digit (grounded view).

    images/labels: the split's pool (from split_image_pools). Returns Boards with the pool as
    `images` and the full solution as `labels`.
    """
    K = board_size ** 2
    rng = np.random.default_rng(seed)
    is_input = puzzles != 0
    cell_image = np.full(puzzles.shape, -1, np.int64)
    for digit in range(1, K + 1):
        candidates = np.flatnonzero(labels == digit)
        cells = puzzles == digit
        if cells.any() and len(candidates) == 0:
            raise PipelineError(f"no image of digit {digit} in the image pool")
        cell_image[cells] = rng.choice(candidates, size=int(cells.sum()))
    return Boards(board_size, torch.from_numpy(np.ascontiguousarray(images, np.uint8)),
                  torch.from_numpy(cell_image), torch.from_numpy(is_input),
                  torch.from_numpy(solutions.astype(np.uint8)))


def boards_from_given_images(puzzles: np.ndarray, solutions: np.ndarray, given_images: np.ndarray,
                             positions: np.ndarray, board_size: int, seed: int):
    """Boards that come with their own images (the published dataset): the pool is the split's
    distinct given-cell images, shuffled. Returns (Boards grounded view, pool labels uint8 (P,))."""
    flat = given_images.reshape(len(given_images), -1)
    _, first, inverse = np.unique(flat, axis=0, return_index=True, return_inverse=True)
    order = np.random.default_rng(seed).permutation(len(first))
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))  # unique image u lands at pool index rank[u]
    pool = given_images[first[order]]
    pool_labels = puzzles[positions[first[order], 0], positions[first[order], 1]].astype(np.uint8)
    cell_image = np.full(puzzles.shape, -1, np.int64)
    cell_image[positions[:, 0], positions[:, 1]] = rank[inverse.reshape(-1)]
    boards = Boards(board_size, torch.from_numpy(np.ascontiguousarray(pool)), torch.from_numpy(cell_image),
                    torch.from_numpy(puzzles != 0), torch.from_numpy(solutions.astype(np.uint8)))
    return boards, pool_labels


def split_files(split: str, boards: Boards, image_labels: np.ndarray) -> dict:
    """The three files of one split: {file name: object to save}. `boards` is the grounded view."""
    is_input = boards.is_input
    full = boards.labels
    zero = torch.zeros_like(full)
    return {
        f"{split}.pt": {
            "board_size": int(boards.board_size),
            "images": boards.images.contiguous(),
            "cell_image": boards.cell_image.contiguous(),
            "is_input": is_input.contiguous(),
            # a new tensor holding only the output-cell digits: the input labels are not stored
            "labels": torch.where(is_input, zero, full).contiguous(),
        },
        f"{split}_grounded.pt": {"labels": full.clone()},
        f"{split}_truth.pt": {
            "input_labels": torch.where(is_input, full, zero).contiguous(),
            "image_labels": torch.from_numpy(np.ascontiguousarray(image_labels, np.uint8)),
        },
    }


def save_prepared(root, files: dict) -> None:
    """Write every {file name: object} under `root`: all to temporary files first, then rename
    them together, so an error leaves none of them (old or half-written) mixed in."""
    save_all({Path(root) / name: obj for name, obj in files.items()})


# ---------------------------------------------------------------------------------------------
# loading


def _check(cond: bool, path, problem: str) -> None:
    if not cond:
        raise PipelineError(f"{path}: {problem}")


def _check_tensor(obj: dict, key: str, dtype, shape, path) -> torch.Tensor:
    _check(isinstance(obj, dict) and key in obj, path, f"missing '{key}'")
    t = obj[key]
    _check(isinstance(t, torch.Tensor) and t.dtype == dtype, path, f"'{key}' must be a {dtype} tensor")
    _check(t.dim() == len(shape) and all(s is None or s == n for s, n in zip(shape, t.shape)),
           path, f"'{key}' has shape {tuple(t.shape)}, expected {tuple('*' if s is None else s for s in shape)}")
    return t


def load_boards(root, split: str, view: str = "ungrounded", like: Boards | None = None) -> Boards:
    """Load one split's boards. view 'ungrounded': labels 0 at input cells (as stored);
    'grounded': labels = the full solution, from {split}_grounded.pt, checked to be valid grids.
    like: boards of another split these must match in size (train and test of one board size)."""
    if view not in ("ungrounded", "grounded"):
        raise PipelineError(f"view must be 'ungrounded' or 'grounded', got {view!r}")
    path = Path(root) / f"{split}.pt"
    _refuse_test_outside_records(split, path)
    obj = load_torch(path, f"{split} boards")
    _check(isinstance(obj, dict) and isinstance(obj.get("board_size"), int) and obj["board_size"] in (2, 3),
           path, "'board_size' must be 2 or 3")
    board_size = obj["board_size"]
    C, K = board_size ** 4, board_size ** 2
    if like is not None and like.board_size != board_size:
        raise PipelineError(f"{path}: {K}x{K} boards, but the other split's boards are "
                            f"{like.n_digits}x{like.n_digits} (rerun prepare)")
    images = _check_tensor(obj, "images", torch.uint8, (None, 28, 28), path)
    cell_image = _check_tensor(obj, "cell_image", torch.int64, (None, C), path)
    N = len(cell_image)
    _check(N >= 1, path, "holds no board")
    is_input = _check_tensor(obj, "is_input", torch.bool, (N, C), path)
    labels = _check_tensor(obj, "labels", torch.uint8, (N, C), path)
    _check(bool(((cell_image >= 0) == is_input).all()), path, "cell_image must be -1 exactly at blank cells")
    _check(bool((cell_image < len(images)).all()), path, "cell_image points past the image pool")
    _check(bool((labels[is_input] == 0).all()), path, "labels at input cells must be 0 (ungrounded view)")
    _check(bool(((labels[~is_input] >= 1) & (labels[~is_input] <= K)).all()), path,
           f"labels at blank cells must be 1..{K}")
    clash = np.flatnonzero(conflicting_boards(labels.numpy(), board_size))
    _check(len(clash) == 0, path, f"board {clash[0] if len(clash) else 0}: blank-cell labels repeat "
                                  f"a digit in a row, column or box ({len(clash)} such boards)")
    if view == "grounded":
        gpath = Path(root) / f"{split}_grounded.pt"
        labels = _check_tensor(load_torch(gpath, f"{split} grounded labels"), "labels", torch.uint8, (N, C), gpath)
        _check(bool(((labels >= 1) & (labels <= K)).all()), gpath, f"labels must be 1..{K}")
        _check(bool((labels[~is_input] == obj["labels"][~is_input]).all()), gpath,
               f"labels disagree with {path.name} at blank cells")
        bad = np.flatnonzero(~valid_grids(labels.numpy(), board_size))
        _check(len(bad) == 0, gpath, f"board {bad[0] if len(bad) else 0}: the solution is not a valid "
                                     f"Sudoku grid ({len(bad)} such boards)")
    return Boards(board_size, images, cell_image, is_input, labels)


def load_truth(root, split: str, boards: Boards | None = None) -> dict:
    """{split}_truth.pt: {"input_labels": uint8 (N, C), "image_labels": uint8 (P,)}; evaluation only.
    Checked against the split's boards (`boards`, or read from {split}.pt): same boards and pool,
    a digit exactly at given cells, and each given cell's digit is that of the image it shows."""
    path = Path(root) / f"{split}_truth.pt"
    _refuse_test_outside_records(split, path)
    obj = load_torch(path, f"{split} evaluation truth")
    boards = load_boards(root, split) if boards is None else boards
    K = boards.n_digits
    inputs = _check_tensor(obj, "input_labels", torch.uint8, (len(boards), boards.n_cells), path)
    images = _check_tensor(obj, "image_labels", torch.uint8, (len(boards.images),), path)
    _check(bool(((images >= 1) & (images <= K)).all()), path, f"'image_labels' must be digits 1..{K}")
    _check(bool(((inputs > 0) == boards.is_input).all()), path,
           f"'input_labels' must hold a digit exactly at the given cells of {split}.pt")
    _check(bool((images[boards.cell_image[boards.is_input]] == inputs[boards.is_input]).all()), path,
           f"'input_labels' disagree with the digits of the images shown in {split}.pt")
    return obj


def given_image_indices(boards: Boards) -> torch.Tensor:
    """Sorted distinct pool indices shown in given cells (LongTensor)."""
    return torch.unique(boards.cell_image[boards.is_input])


def onehot(labels: torch.Tensor, n_digits: int) -> torch.Tensor:
    """(N, C) digits in 0..K -> float (N, C*K) one-hot per cell; label 0 gives an all-zero block."""
    labels = labels.long()
    out = torch.zeros(*labels.shape, n_digits + 1)
    out.scatter_(-1, labels.unsqueeze(-1), 1.0)
    return out[..., 1:].reshape(len(labels), -1)


def var_mask(is_input: torch.Tensor, n_digits: int) -> torch.Tensor:
    """(N, C) cell mask -> bool (N, C*K): every one-hot variable of a masked cell."""
    return is_input.bool().repeat_interleave(n_digits, dim=1)


# ---------------------------------------------------------------------------------------------
# the given-cell images: what the clusterers read, and their true digits for reporting only


def load_given_images(root, split: str, n_digits: int | None = None):
    """The distinct images shown in given cells of a split's boards (ungrounded view).

    Returns (images uint8 (M, 28, 28), pool indices (M,), the boards). Reads `{split}.pt` only;
    that file carries no input-cell labels, which is asserted here so a grounded file cannot slip
    in. n_digits: the K another split's boards have (train and test must agree).
    """
    boards = load_boards(root, split)
    if n_digits is not None and boards.n_digits != n_digits:
        raise PipelineError(f"{root}/{split}.pt: boards of {boards.n_digits} digits, but the other "
                            f"split's boards have {n_digits} (rerun prepare)")
    if bool((boards.labels[boards.is_input] != 0).any()):
        raise PipelineError(f"{root}/{split}.pt: holds labels at input cells; clustering must "
                            "read the ungrounded view only")
    indices = given_image_indices(boards)
    return boards.images[indices], indices, boards


def peer_cannot_links(boards, indices: torch.Tensor):
    """scipy sparse (M, M) 0/1 over the pool images `indices`: 1 where two of them are shown in
    peer cells (same row, column or box) of some board, so they show different digits. Read from
    the positions of the given cells alone: no label. Pairs with an image outside `indices` are
    left out."""
    from scipy.sparse import coo_matrix  # here: only the rule-aware clusterers call this
    pairs = np.argwhere(np.triu(peers(boards.board_size).numpy(), 1))  # (a, b) peer cells
    cell_image, is_input = boards.cell_image.numpy(), boards.is_input.numpy()
    both = is_input[:, pairs[:, 0]] & is_input[:, pairs[:, 1]]
    first, second = cell_image[:, pairs[:, 0]][both], cell_image[:, pairs[:, 1]][both]
    position = np.full(len(boards.images), -1)
    position[indices.numpy()] = np.arange(len(indices))
    first, second = position[first], position[second]
    kept = (first >= 0) & (second >= 0)
    M = len(indices)
    links = coo_matrix((np.ones(kept.sum()), (first[kept], second[kept])), shape=(M, M)).tocsr()
    return ((links + links.T) > 0).astype(np.float64)


def load_image_labels(root, split: str, indices: torch.Tensor):
    """True digits (0-based, long (M,)) of the given pool images, for *reporting* accuracy only.

    Returns None when `{split}_truth.pt` is absent (reporting is then disabled). Only the
    "image_labels" entry is read; "input_labels" is never touched.
    """
    if not (Path(root) / f"{split}_truth.pt").is_file():
        return None
    image_labels = load_truth(root, split)["image_labels"]
    return image_labels[indices].long() - 1
