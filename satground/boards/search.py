"""The compiled half of sudoku.py: a bitmask depth-first search that branches on the empty cell
with the fewest candidates, and the two generators built on it (sudoku.py's docstring), compiled
with numba. A module of its own so that only the stages that search or generate puzzles pay
numba's import: sudoku.py imports it inside the functions that call it.
"""
import numpy as np
from numba import njit, prange


@njit(cache=True)
def _popcount_table(n_digit):
    table = np.zeros(1 << n_digit, np.int32)
    for mask in range(1, 1 << n_digit):
        table[mask] = table[mask >> 1] + (mask & 1)
    return table


@njit(cache=True)
def search(grid, box, limit, solution, banned_cell, banned_digit, randomize):
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
    # typed values, not literals: numba would compile search once per literal combination
    one, none, yes, no = np.int64(1), np.int64(-1), np.bool_(True), np.bool_(False)
    for _ in range(max_tries):
        search(empty, box, one, grid, none, none, yes)
        puzzle = grid.copy()
        givens = C
        for c in np.random.permutation(C):
            if givens <= target:
                break
            digit = puzzle[c]
            puzzle[c] = 0
            # the solution stays unique iff no solution puts another digit in cell c
            if search(puzzle, box, one, scratch, c, np.int64(digit), no) > 0:
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
    search(np.zeros(C, np.uint8), box, np.int64(1), solution_out, np.int64(-1), np.int64(-1),
           np.bool_(True))
    puzzle_out[:] = solution_out
    for c in np.random.permutation(C):
        if _hidden_single(puzzle_out, box, c):
            puzzle_out[c] = 0


@njit(cache=True, parallel=True)
def generate_many(box, hidden_singles, targets, seeds, max_tries, puzzles, solutions):
    # one seed per puzzle, so the result does not depend on the number of threads
    for i in prange(len(seeds)):
        if hidden_singles:
            _generate_hidden_singles(box, seeds[i], puzzles[i], solutions[i])
        else:
            _generate_one(box, targets[i], seeds[i], max_tries, puzzles[i], solutions[i])


@njit(cache=True)
def count_many(puzzles, box, limit, counts, solutions):
    none, no = np.int64(-1), np.bool_(False)  # typed, not literal (see _generate_one)
    for i in range(puzzles.shape[0]):
        counts[i] = search(puzzles[i], box, limit, solutions[i], none, none, no)
