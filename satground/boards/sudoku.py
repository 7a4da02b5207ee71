"""Sudoku puzzles: generation with a unique solution, exact solving, grid checks.

The published dataset's and CSV files are read by files.py.

A board of box size n (`board_size`, 3 for 9x9, 2 for 4x4) has K = n*n digits and C = K*K
cells, stored row-major as a uint8 vector of length C: 1..K for a digit, 0 for a blank cell.

The solver is a bitmask depth-first search that always branches on the empty cell with the
fewest candidates, compiled with numba in search.py. Generation takes a random full grid (the
same search with random candidate order) and removes cells in random order, by one of two rules
(GENERATORS):

    unique          a cell goes while the puzzle keeps exactly one solution, until a target
                    number of givens drawn per puzzle is reached;
    hidden_singles  a cell goes when its digit is still forced by a hidden single (no other
                    empty cell of its row, column or box could hold it), in one pass over the
                    cells, whatever the count: the rule of the generator behind the published
                    SATNet dataset (Kyubyong Park's sudoku repository), so every blank cell can
                    be filled by hidden singles alone (prepare's metrics report the mean givens).
"""
from __future__ import annotations

import numpy as np
import torch

from ..harness.io import PipelineError

# Number of givens in the published SATNet dataset (Wang et al. 2019): 36.2 of 81 on average.
# Other board sizes keep the same fraction of given cells.
PUBLISHED_GIVENS_FRACTION = 36.2 / 81


def n_digits(board_size: int) -> int:
    return board_size * board_size


def n_cells(board_size: int) -> int:
    return board_size ** 4


def peers(board_size: int):
    """bool torch tensor (C, C): cells sharing a row, column or box (a cell is not its own peer)."""
    K = board_size ** 2
    row, col = torch.arange(K * K) // K, torch.arange(K * K) % K
    box = (row // board_size) * board_size + col // board_size
    same = (row[:, None] == row) | (col[:, None] == col) | (box[:, None] == box)
    return same & ~torch.eye(K * K, dtype=torch.bool)


# ---------------------------------------------------------------------------------------------
# public API


def _as_board(board, board_size: int) -> np.ndarray:
    board = np.asarray(board)
    C = n_cells(board_size)
    if board.size != C:
        raise ValueError(f"a board of board_size {board_size} has {C} cells, got shape {board.shape}")
    board = board.reshape(C)
    if board.min() < 0 or board.max() > n_digits(board_size):
        raise ValueError(f"board values must be 0..{n_digits(board_size)}")
    return board.astype(np.uint8)


def count_solutions(puzzle, board_size: int, limit: int = 2) -> int:
    """Number of solutions of `puzzle` (0 = blank), counted up to `limit`."""
    from .search import search
    scratch = np.empty(n_cells(board_size), np.uint8)
    return int(search(_as_board(puzzle, board_size), board_size, limit, scratch, -1, -1, False))


def solve(puzzle, board_size: int) -> np.ndarray | None:
    """A solution of `puzzle` as uint8 (C,), or None when it has none."""
    from .search import search
    solution = np.empty(n_cells(board_size), np.uint8)
    found = search(_as_board(puzzle, board_size), board_size, 1, solution, -1, -1, False)
    return solution if found else None


def count_solutions_many(puzzles: np.ndarray, board_size: int, limit: int = 2) -> np.ndarray:
    """count_solutions for every row of `puzzles` (N, C)."""
    from .search import count_many
    puzzles = np.ascontiguousarray(puzzles, dtype=np.uint8)
    counts = np.zeros(len(puzzles), np.int64)
    count_many(puzzles, board_size, limit, counts, np.empty_like(puzzles))
    return counts


def _units(grids: np.ndarray, board_size: int) -> tuple[np.ndarray, ...]:
    """(rows, columns, boxes) of grids (N, C), each (N, K, K): unit u's K cells in axis 2."""
    K, n = n_digits(board_size), board_size
    grids = np.asarray(grids).reshape(-1, K, K).astype(np.int64)
    boxes = grids.reshape(-1, n, n, n, n).transpose(0, 1, 3, 2, 4).reshape(-1, K, K)
    return grids, grids.transpose(0, 2, 1), boxes


def valid_grids(grids: np.ndarray, board_size: int) -> np.ndarray:
    """Bool (N,): each row of grids (N, C) is complete and every row, column and box holds 1..K."""
    K = n_digits(board_size)
    rows, columns, boxes = _units(grids, board_size)
    ok = (rows >= 1).all(axis=(1, 2)) & (rows <= K).all(axis=(1, 2))
    digits = np.arange(1, K + 1)
    for groups in (rows, columns, boxes):
        ok &= (np.sort(groups, axis=2) == digits).all(axis=(1, 2))
    return ok


def conflicting_boards(grids: np.ndarray, board_size: int) -> np.ndarray:
    """Bool (N,): a digit appears twice in some row, column or box among the filled cells of
    each row of grids (N, C) (0 = empty, ignored)."""
    K = n_digits(board_size)
    units = _units(grids, board_size)
    bad = np.zeros(len(units[0]), dtype=bool)
    for groups in units:
        counts = np.stack([(groups == d).sum(axis=2) for d in range(1, K + 1)], axis=2)
        bad |= (counts > 1).any(axis=(1, 2))
    return bad


def is_valid_grid(grid, board_size: int) -> bool:
    """True when `grid` is complete and every row, column and box is a permutation of 1..K."""
    grid = np.asarray(grid)
    if grid.size != n_cells(board_size):
        return False
    return bool(valid_grids(grid.reshape(1, -1), board_size)[0])


def givens_targets(n_puzzles: int, board_size: int, mean: float, std: float,
                   rng: np.random.Generator) -> np.ndarray:
    """Per-puzzle number of givens: a normal draw rounded and clipped to 1..C-1."""
    C = n_cells(board_size)
    targets = np.rint(rng.normal(mean, std, size=n_puzzles)) if std > 0 else np.full(n_puzzles, round(mean))
    return np.clip(targets, 1, C - 1).astype(np.int64)  # at least one given and one blank cell


GENERATORS = ("unique", "hidden_singles")


def generate_puzzles(n_puzzles: int, board_size: int, seed: int, givens_mean: float | None = None,
                     givens_std: float | None = None, max_tries: int = 20, progress=None,
                     generator: str = "unique"):
    """Distinct puzzles with exactly one solution: (puzzles uint8 (N, C), solutions uint8 (N, C)).

    generator: one of GENERATORS (module docstring); "hidden_singles" ignores the givens targets.
    With "unique", givens per puzzle follow round(Normal(givens_mean, givens_std)); the defaults keep the
    published dataset's fraction of givens (36.2 of 81, std 3 of 81). A target below what a
    random grid allows (minimal puzzles have about 22-26 givens on 9x9) is approached over
    `max_tries` fresh grids and the sparsest one kept. The same seed gives the same puzzles
    whatever the number of threads. `progress` (a tqdm-like object) is advanced per puzzle.
    """
    if board_size not in (2, 3):
        raise ValueError(f"board_size must be 2 or 3, got {board_size}")
    if generator not in GENERATORS:
        raise ValueError(f"generator must be one of {GENERATORS}, got {generator!r}")
    from .search import generate_many
    C = n_cells(board_size)
    givens_mean = PUBLISHED_GIVENS_FRACTION * C if givens_mean is None else givens_mean
    givens_std = 3.0 / 81 * C if givens_std is None else givens_std
    rng = np.random.default_rng(seed)
    puzzles = np.zeros((0, C), np.uint8)
    solutions = np.zeros((0, C), np.uint8)
    chunk, stalled = 500, 0
    while len(puzzles) < n_puzzles:
        if stalled == 10:  # e.g. 300 complete 4x4 grids asked for: only 288 exist
            raise PipelineError(f"found only {len(puzzles)} distinct {n_digits(board_size)}x{n_digits(board_size)} "
                                f"puzzles with about {givens_mean:.1f} givens; ask for fewer boards or other givens")
        before = len(puzzles)
        n_new = min(chunk, max(n_puzzles - len(puzzles), 100))  # a few spare for repeats
        targets = givens_targets(n_new, board_size, givens_mean, givens_std, rng)
        seeds = rng.integers(0, 2**31 - 1, size=n_new)
        new_puzzles = np.zeros((n_new, C), np.uint8)
        new_solutions = np.zeros((n_new, C), np.uint8)
        generate_many(board_size, generator == "hidden_singles", targets, seeds, max_tries,
                       new_puzzles, new_solutions)
        puzzles = np.concatenate([puzzles, new_puzzles])
        solutions = np.concatenate([solutions, new_solutions])
        # drop repeats (likely among 4x4 boards) so no test puzzle is also a train puzzle
        _, first = np.unique(puzzles, axis=0, return_index=True)
        keep = np.sort(first)[:n_puzzles]
        puzzles, solutions = puzzles[keep], solutions[keep]
        stalled = stalled + 1 if len(puzzles) == before else 0
        if progress is not None:
            progress.update(len(keep) - progress.n)
    return puzzles, solutions


def check_boards(puzzles: np.ndarray, solutions: np.ndarray, board_size: int, where: str,
                 names=None) -> None:
    """Raise PipelineError (naming `where` and the first bad board) unless every solution is a
    valid grid and agrees with its puzzle's givens. names(i) labels board i in messages (e.g. its
    CSV line); default "board i"."""
    names = names or (lambda i: f"board {i}")
    C, K = n_cells(board_size), n_digits(board_size)
    for name, boards in (("puzzles", puzzles), ("solutions", solutions)):
        if boards.ndim != 2 or boards.shape[1] != C:
            raise PipelineError(f"{where}: {name} must have shape (N, {C}), got {tuple(boards.shape)}")
        if boards.size and (boards.min() < 0 or boards.max() > K):
            raise PipelineError(f"{where}: {name} hold values outside 0..{K}")
    if len(puzzles) != len(solutions):
        raise PipelineError(f"{where}: {len(puzzles)} puzzles but {len(solutions)} solutions")
    bad = np.flatnonzero(~valid_grids(solutions, board_size))
    if len(bad):
        raise PipelineError(f"{where}: {names(bad[0])}: the solution is not a valid Sudoku grid "
                            f"({len(bad)} such boards)")
    clash = (puzzles != 0) & (puzzles != solutions)
    bad = np.flatnonzero(clash.any(axis=1))
    if len(bad):
        cell = int(np.flatnonzero(clash[bad[0]])[0])
        raise PipelineError(f"{where}: {names(bad[0])}: given {puzzles[bad[0], cell]} at row {cell // K + 1}, "
                            f"column {cell % K + 1} disagrees with the solution ({len(bad)} such boards)")


def check_puzzles(puzzles: np.ndarray, solutions: np.ndarray, board_size: int, where: str,
                  names=None) -> None:
    """check_boards, and every puzzle has a given cell, a blank cell and exactly one solution
    (exact-match scoring is meaningless otherwise)."""
    names = names or (lambda i: f"board {i}")
    check_boards(puzzles, solutions, board_size, where, names)
    givens = (puzzles != 0).sum(axis=1)
    for bad, problem in ((givens == 0, "the puzzle has no given cell"),
                         (givens == n_cells(board_size), "the puzzle has no blank cell")):
        if bad.any():
            raise PipelineError(f"{where}: {names(np.flatnonzero(bad)[0])}: {problem} "
                                f"({int(bad.sum())} such boards)")
    bad = np.flatnonzero(count_solutions_many(puzzles, board_size) != 1)
    if len(bad):
        raise PipelineError(f"{where}: {names(bad[0])}: the puzzle has more than one solution "
                            f"({len(bad)} such boards); exact-match scoring needs exactly one")
