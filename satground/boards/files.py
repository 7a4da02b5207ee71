"""Sudoku files a user points `data.puzzles.path` at: the published SATNet dataset and CSV.

Both readers return boards in sudoku.py's layout (uint8 rows, 0 = blank) and check them with its
checks (a solution for every puzzle, unique where asked); a wrong file stops in one line naming it.
"""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import torch

from ..harness.io import PipelineError, load_torch
from .sudoku import check_boards, check_puzzles, n_cells, n_digits


def _load_tensor(path: Path, mmap: bool = False):
    if not path.is_file():
        raise PipelineError(f"{path}: file not found")
    # features_img.pt is 2.5 GB of float32: mapped instead of read whole
    return load_torch(path, "tensor file", mmap=mmap)


def _onehot_digits(tensor, path: Path, board_size: int, allow_blank: bool) -> np.ndarray:
    """(N, K, K, K) one-hot -> uint8 (N, C) digits, 0 where the one-hot block is all zero."""
    K = n_digits(board_size)
    if not hasattr(tensor, "shape") or tensor.ndim != 4 or tuple(tensor.shape[1:]) != (K, K, K):
        shape = tuple(tensor.shape) if hasattr(tensor, "shape") else type(tensor).__name__
        raise PipelineError(f"{path}: expected a one-hot tensor of shape (N, {K}, {K}, {K}) "
                            f"for board_size {board_size}, got {shape}")
    x = tensor.reshape(len(tensor), K * K, K).numpy()
    if not np.isin(x, (0, 1)).all():
        raise PipelineError(f"{path}: one-hot entries must be 0 or 1")
    ones = x.sum(axis=2)
    bad = (ones > 1) if allow_blank else (ones != 1)
    if bad.any():
        what = "at most one" if allow_blank else "exactly one"
        board = int(np.flatnonzero(bad.any(axis=1))[0])
        raise PipelineError(f"{path}: board {board}: every cell must have {what} digit set")
    return np.where(ones > 0, x.argmax(axis=2) + 1, 0).astype(np.uint8)


def read_published(folder, board_size: int = 3, n_first: int | None = None, n_last: int = 0):
    """Read the published SATNet Sudoku files (Wang et al. 2019, github.com/locuslab/SATNet).

    Layout, as the authors' exps/sudoku.py reads them:
      features.pt      float (N, 9, 9, 9): one-hot digit of each given cell, all zero when blank
      labels.pt        float (N, 9, 9, 9): one-hot digit of every cell of the solution
      features_img.pt  float (N, 9, 9, 28, 28): an MNIST image per cell (only given cells matter)
      perm.pt          (729,) a permutation of the 729 one-hot variables, used only by their
                       "permuted Sudoku" experiment; checked when present, otherwise unused.
    Keeps the first n_first boards (default all) and the last n_last: the authors trained on the
    first 90 % and tested on the rest. Returns (puzzles uint8 (R, C), solutions uint8 (R, C),
    given-cell images uint8 (G, 28, 28), their (board, cell) positions int64 (G, 2)). Images are
    rescaled linearly so that the given cells span 0..255: the files' float scaling (0..1,
    0..255 or mean/std normalised) is not documented.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise PipelineError(f"{folder}: published dataset folder not found")
    K, C = n_digits(board_size), n_cells(board_size)
    puzzles = _onehot_digits(_load_tensor(folder / "features.pt"), folder / "features.pt", board_size, True)
    solutions = _onehot_digits(_load_tensor(folder / "labels.pt"), folder / "labels.pt", board_size, False)
    N = len(puzzles)
    if len(solutions) != N:
        raise PipelineError(f"{folder / 'labels.pt'}: {len(solutions)} boards but features.pt has {N}")
    check_boards(puzzles, solutions, board_size, str(folder))

    perm_path = folder / "perm.pt"
    if perm_path.exists():
        perm = _load_tensor(perm_path)
        if (not hasattr(perm, "shape") or tuple(perm.shape) != (C * K,)
                or not torch.equal(torch.sort(perm.long()).values, torch.arange(C * K))):
            raise PipelineError(f"{perm_path}: expected a permutation of 0..{C * K - 1}")

    img_path = folder / "features_img.pt"
    images = _load_tensor(img_path, mmap=True)
    if not hasattr(images, "shape") or tuple(images.shape) not in [(N, K, K, 28, 28), (N, C, 28, 28), (N, C, 1, 28, 28)]:
        shape = tuple(images.shape) if hasattr(images, "shape") else type(images).__name__
        raise PipelineError(f"{img_path}: expected shape ({N}, {K}, {K}, 28, 28), got {shape}")
    images = images.reshape(N, C, 28, 28)

    n_first = N if n_first is None else n_first
    if n_first + n_last > N:
        raise PipelineError(f"{folder}: holds {N} boards, fewer than the {n_first + n_last} asked for")
    rows = np.r_[0:n_first, N - n_last:N]
    puzzles, solutions = puzzles[rows], solutions[rows]
    positions = np.argwhere(puzzles != 0)  # (board within rows, cell)
    chunks = [positions[i:i + 50_000] for i in range(0, len(positions), 50_000)]

    def gather(pos):  # chunk by chunk: the file may be memory-mapped and is large
        return images[torch.from_numpy(rows[pos[:, 0]]), torch.from_numpy(pos[:, 1])].float()

    low, high = float("inf"), float("-inf")
    for pos in chunks:
        chunk = gather(pos)
        if not torch.isfinite(chunk).all():
            raise PipelineError(f"{img_path}: images contain NaN or infinite values")
        low, high = min(low, chunk.min().item()), max(high, chunk.max().item())
    if chunks and high <= low:
        raise PipelineError(f"{img_path}: the images of the given cells are all constant")
    given = np.empty((len(positions), 28, 28), np.uint8)
    for i, pos in zip(range(0, len(positions), 50_000), chunks):
        given[i:i + len(pos)] = ((gather(pos) - low) / (high - low) * 255).round().to(torch.uint8).numpy()
    return puzzles, solutions, given, positions.astype(np.int64)


def read_csv(path, board_size: int, limit: int | None = None):
    """Read rows 'puzzle,solution' of digit strings (0 or '.' = blank); a header row is skipped.

    Returns (puzzles uint8 (N, C), solutions uint8 (N, C), the CSV line of each board (N,));
    reads at most `limit` boards. Every puzzle must have givens, blanks and one solution.
    """
    path = Path(path)
    if not path.is_file():
        raise PipelineError(f"{path}: CSV file not found")
    C, K = n_cells(board_size), n_digits(board_size)
    digits = {str(d): d for d in range(1, K + 1)}
    puzzles, solutions, lines = [], [], []
    with path.open(newline="") as f:
        for line_no, row in enumerate(csv.reader(f), start=1):
            if not row or (line_no == 1 and not any(ch.isdigit() for ch in "".join(row))):
                continue  # blank line or header
            if limit is not None and len(puzzles) >= limit:
                break
            if len(row) != 2:
                raise PipelineError(f"{path}:{line_no}: expected 2 fields (puzzle,solution), got {len(row)}")
            boards = []
            for what, text in zip(("puzzle", "solution"), row):
                text = text.strip()
                if len(text) != C:
                    raise PipelineError(f"{path}:{line_no}: {what} has {len(text)} characters, "
                                        f"expected {C} for board_size {board_size}")
                blank = "0." if what == "puzzle" else ""
                bad = [ch for ch in text if ch not in digits and ch not in blank]
                if bad:
                    raise PipelineError(f"{path}:{line_no}: {what} contains {bad[0]!r}; expected digits "
                                        f"1-{K}" + (" or 0/. for blanks" if blank else ""))
                boards.append([digits.get(ch, 0) for ch in text])
            puzzles.append(boards[0])
            solutions.append(boards[1])
            lines.append(line_no)
    if not puzzles:
        raise PipelineError(f"{path}: no boards found")
    puzzles = np.array(puzzles, np.uint8)
    solutions = np.array(solutions, np.uint8)
    lines = np.array(lines, np.int64)
    check_puzzles(puzzles, solutions, board_size, str(path), lambda i: f"line {lines[i]}")
    return puzzles, solutions, lines
