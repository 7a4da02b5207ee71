"""Sudoku puzzles: generation with a unique solution, exact solving, grid checks.

The published dataset's and CSV files are read by files.py.

A board of box size n (`board_size`, 3 for 9x9, 2 for 4x4) has K = n*n digits and C = K*K
cells, stored row-major as a uint8 vector of length C: 1..K for a digit, 0 for a blank cell.

The solver is a bitmask depth-first search that always branches on the empty cell with the
fewest candidates, compiled with numba. Generation takes a random full grid (the same search
with random candidate order) and removes cells in random order, by one of two rules
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
from numba import njit, prange

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
# compiled search


@njit(cache=True)
def _popcount_table(n_digit):
    table = np.zeros(1 << n_digit, np.int32)
    for mask in range(1, 1 << n_digit):
        table[mask] = table[mask >> 1] + (mask & 1)
    return table


@njit(cache=True)
def _search(grid, box, limit, solution, banned_cell, banned_digit, randomize):
    """Count the solutions of `grid` (0 = blank) up to `limit`; copy the first into `solution`.

    banned_cell/banned_digit (-1 for none) forbid one digit in one cell: asking whether a
    puzzle with that cell removed has a solution other than the known one is far cheaper than
    counting to two. randomize picks candidates in random order (numba's seeded generator).
    Returns 0 for givens that contradict each other.
    """
    K = box * box
    C = K * K
    full = (1 << K) - 1
    popcount = _popcount_table(K)
    rows = np.zeros(K, np.int32)
    cols = np.zeros(K, np.int32)
    boxes = np.zeros(K, np.int32)
    cell_row = np.empty(C, np.int32)
    cell_col = np.empty(C, np.int32)
    cell_box = np.empty(C, np.int32)
    g = grid.copy()
    for c in range(C):
        r = c // K
        q = c % K
        cell_row[c] = r
        cell_col[c] = q
        cell_box[c] = (r // box) * box + q // box
        if g[c] != 0:
            bit = 1 << (g[c] - 1)
            if (rows[r] | cols[q] | boxes[cell_box[c]]) & bit:
                return 0  # two equal givens in a row, column or box
            rows[r] |= bit
            cols[q] |= bit
            boxes[cell_box[c]] |= bit

    stack_cell = np.empty(C, np.int32)
    stack_cand = np.empty(C, np.int32)
    depth = 0
    count = 0
    pick = True
    while True:
        if pick:
            # branch on the empty cell with the fewest candidates
            best = -1
            best_count = K + 1
            best_mask = 0
            for c in range(C):
                if g[c] == 0:
                    mask = full & ~(rows[cell_row[c]] | cols[cell_col[c]] | boxes[cell_box[c]])
                    if c == banned_cell:
                        mask &= ~(1 << (banned_digit - 1))
                    pc = popcount[mask]
                    if pc < best_count:
                        best, best_count, best_mask = c, pc, mask
                        if pc == 0:
                            break
            if best == -1:  # no empty cell left: a solution
                count += 1
                if count == 1:
                    solution[:] = g
                if count >= limit:
                    return count
            elif best_mask != 0:
                stack_cell[depth] = best
                stack_cand[depth] = best_mask
                depth += 1
            pick = False
        # advance the deepest frame to its next candidate, backtracking when it has none
        if depth == 0:
            return count
        top = depth - 1
        c = stack_cell[top]
        if g[c] != 0:
            bit = 1 << (g[c] - 1)
            rows[cell_row[c]] &= ~bit
            cols[cell_col[c]] &= ~bit
            boxes[cell_box[c]] &= ~bit
            g[c] = 0
        cand = stack_cand[top]
        if cand == 0:
            depth -= 1
            continue
        if randomize:
            rest = cand
            for _ in range(np.random.randint(popcount[cand])):
                rest &= rest - 1  # clear the lowest set bit
            bit = rest & -rest
        else:
            bit = cand & -cand
        stack_cand[top] = cand & ~bit
        digit = 1
        while (1 << (digit - 1)) != bit:
            digit += 1
        g[c] = digit
        rows[cell_row[c]] |= bit
        cols[cell_col[c]] |= bit
        boxes[cell_box[c]] |= bit
        pick = True


@njit(cache=True)
def _generate_one(box, target, seed, max_tries, puzzle_out, solution_out):
    """One puzzle with a unique solution and `target` givens (or as few as reached)."""
    np.random.seed(seed)
    C = box ** 4
    empty = np.zeros(C, np.uint8)
    grid = np.empty(C, np.uint8)
    scratch = np.empty(C, np.uint8)
    best = C + 1
    # typed values, not literals: numba would compile _search once per literal combination
    one, none, yes, no = np.int64(1), np.int64(-1), np.bool_(True), np.bool_(False)
    for _ in range(max_tries):
        _search(empty, box, one, grid, none, none, yes)
        puzzle = grid.copy()
        givens = C
        for c in np.random.permutation(C):
            if givens <= target:
                break
            digit = puzzle[c]
            puzzle[c] = 0
            # the solution stays unique iff no solution puts another digit in cell c
            if _search(puzzle, box, one, scratch, c, np.int64(digit), no) > 0:
                puzzle[c] = digit
            else:
                givens -= 1
        if givens < best:
            best = givens
            puzzle_out[:] = puzzle
            solution_out[:] = grid
        if givens <= target:
            break


@njit(cache=True)
def _could_hold(puzzle, box, other, cell, digit):
    """Whether the empty cell `other` could hold `digit`: no given among its peers (other than
    `cell`, the one being removed) shows it."""
    K = box * box
    r, q = other // K, other % K
    b0 = (r // box) * box * K + (q // box) * box
    for m in range(K):
        for peer in (r * K + m, m * K + q, b0 + (m // box) * K + m % box):
            if peer != cell and puzzle[peer] == digit:
                return False
    return True


@njit(cache=True)
def _hidden_single(puzzle, box, cell):
    """Whether the digit of `cell` is forced by a hidden single: in its row, column or box no
    other cell could hold it."""
    K = box * box
    r, q = cell // K, cell % K
    b0 = (r // box) * box * K + (q // box) * box
    digit = puzzle[cell]
    for group in range(3):
        decisive = True
        for m in range(K):
            other = r * K + m if group == 0 else m * K + q if group == 1 else b0 + (m // box) * K + m % box
            if other != cell and puzzle[other] == 0 and _could_hold(puzzle, box, other, cell, digit):
                decisive = False
                break
        if decisive:
            return True
    return False


@njit(cache=True)
def _generate_hidden_singles(box, seed, puzzle_out, solution_out):
    """One puzzle: a random grid, then one pass over the cells in random order removing each cell
    whose digit a hidden single still forces."""
    np.random.seed(seed)
    C = box ** 4
    _search(np.zeros(C, np.uint8), box, np.int64(1), solution_out, np.int64(-1), np.int64(-1),
            np.bool_(True))
    puzzle_out[:] = solution_out
    for c in np.random.permutation(C):
        if _hidden_single(puzzle_out, box, c):
            puzzle_out[c] = 0


@njit(cache=True, parallel=True)
def _generate_many(box, hidden_singles, targets, seeds, max_tries, puzzles, solutions):
    # one seed per puzzle, so the result does not depend on the number of threads
    for i in prange(len(seeds)):
        if hidden_singles:
            _generate_hidden_singles(box, seeds[i], puzzles[i], solutions[i])
        else:
            _generate_one(box, targets[i], seeds[i], max_tries, puzzles[i], solutions[i])


@njit(cache=True)
def _count_many(puzzles, box, limit, counts, solutions):
    none, no = np.int64(-1), np.bool_(False)  # typed, not literal (see _generate_one)
    for i in range(puzzles.shape[0]):
        counts[i] = _search(puzzles[i], box, limit, solutions[i], none, none, no)


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
    scratch = np.empty(n_cells(board_size), np.uint8)
    return int(_search(_as_board(puzzle, board_size), board_size, limit, scratch, -1, -1, False))


def solve(puzzle, board_size: int) -> np.ndarray | None:
    """A solution of `puzzle` as uint8 (C,), or None when it has none."""
    solution = np.empty(n_cells(board_size), np.uint8)
    found = _search(_as_board(puzzle, board_size), board_size, 1, solution, -1, -1, False)
    return solution if found else None


def count_solutions_many(puzzles: np.ndarray, board_size: int, limit: int = 2) -> np.ndarray:
    """count_solutions for every row of `puzzles` (N, C)."""
    puzzles = np.ascontiguousarray(puzzles, dtype=np.uint8)
    counts = np.zeros(len(puzzles), np.int64)
    _count_many(puzzles, board_size, limit, counts, np.empty_like(puzzles))
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
        _generate_many(board_size, generator == "hidden_singles", targets, seeds, max_tries,
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
