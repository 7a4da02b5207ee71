"""Puzzle generation, exact solving and the dataset readers of satground.boards.sudoku.

Uniqueness is checked independently of our solver: a CNF encoding of Sudoku solved by
python-sat, then solved again with the found solution blocked, which must be UNSAT.
"""
import numba
import numpy as np
import pytest
from pysat.solvers import Solver

from satground.boards import sudoku
from satground.harness.io import PipelineError


def sat_solutions(puzzle: np.ndarray, board_size: int, limit: int = 2) -> list:
    """Solutions of `puzzle` found by a SAT solver, up to `limit` (blocking each one found)."""
    n, K = board_size, board_size ** 2
    var = lambda r, c, d: (r * K + c) * K + d + 1  # noqa: E731  cell (r, c) holds digit d+1
    units = [[(r, c) for c in range(K)] for r in range(K)] + [[(r, c) for r in range(K)] for c in range(K)]
    units += [[(br * n + i, bc * n + j) for i in range(n) for j in range(n)] for br in range(n) for bc in range(n)]
    with Solver(name="minisat22") as solver:
        for r in range(K):
            for c in range(K):
                solver.add_clause([var(r, c, d) for d in range(K)])
                for d in range(K):
                    for e in range(d + 1, K):
                        solver.add_clause([-var(r, c, d), -var(r, c, e)])
        for unit in units:
            for d in range(K):
                solver.add_clause([var(r, c, d) for r, c in unit])
        for cell, digit in enumerate(puzzle):
            if digit:
                solver.add_clause([var(cell // K, cell % K, int(digit) - 1)])
        found = []
        while len(found) < limit and solver.solve():
            true = [v for v in solver.get_model() if v > 0]
            found.append(np.array([(v - 1) % K + 1 for v in sorted(true)], np.uint8))
            solver.add_clause([-v for v in true])
    return found


@pytest.fixture(scope="module")
def generated():
    return {3: sudoku.generate_puzzles(60, 3, seed=11), 2: sudoku.generate_puzzles(300, 2, seed=11)}


@pytest.mark.parametrize("board_size, n_check", [(3, 25), (2, 120)])
def test_generated_puzzles_have_one_solution_by_sat(generated, board_size, n_check):
    puzzles, solutions = generated[board_size]
    for puzzle, solution in zip(puzzles[:n_check], solutions[:n_check]):
        found = sat_solutions(puzzle, board_size)
        assert len(found) == 1
        np.testing.assert_array_equal(found[0], solution)


@pytest.mark.parametrize("board_size", [3, 2])
def test_generated_solutions_valid_and_consistent(generated, board_size):
    puzzles, solutions = generated[board_size]
    C = board_size ** 4
    assert puzzles.shape == solutions.shape == (len(puzzles), C) and puzzles.dtype == np.uint8
    assert sudoku.valid_grids(solutions, board_size).all()
    assert ((puzzles == 0) | (puzzles == solutions)).all()
    assert (sudoku.count_solutions_many(puzzles, board_size) == 1).all()
    assert len(np.unique(puzzles, axis=0)) == len(puzzles)  # distinct puzzles


def test_givens_follow_the_published_mean(generated):
    givens9 = (generated[3][0] != 0).sum(axis=1)
    assert abs(givens9.mean() - 36.2) < 1.2 and givens9.std() > 1
    givens4 = (generated[2][0] != 0).sum(axis=1)
    assert abs(givens4.mean() - 36.2 / 81 * 16) < 0.3
    puzzles, _ = sudoku.generate_puzzles(40, 3, seed=3, givens_mean=30, givens_std=0)
    assert ((puzzles != 0).sum(axis=1) == 30).all()


def test_same_seed_same_puzzles_whatever_the_threads():
    a = sudoku.generate_puzzles(50, 3, seed=5)
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        b = sudoku.generate_puzzles(50, 3, seed=5)
    finally:
        numba.set_num_threads(threads)
    c = sudoku.generate_puzzles(50, 3, seed=6)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c[0])


def test_count_solve_and_validity_on_known_cases():
    assert sudoku.count_solutions(np.zeros(16, np.uint8), 2, limit=1000) == 288  # all 4x4 grids
    grid = sudoku.solve(np.zeros(81, np.uint8), 3)
    assert sudoku.is_valid_grid(grid, 3) and sudoku.is_valid_grid(grid.reshape(9, 9), 3)
    clash = np.zeros(81, np.uint8)
    clash[0] = clash[1] = 5  # two fives in the first row
    assert sudoku.count_solutions(clash, 3) == 0 and sudoku.solve(clash, 3) is None
    broken = grid.copy()
    broken[[0, 1]] = broken[[1, 0]]  # swap two cells of a row: columns break
    assert not sudoku.is_valid_grid(broken, 3)
    incomplete = grid.copy()
    incomplete[40] = 0
    assert not sudoku.is_valid_grid(incomplete, 3)
    assert not sudoku.is_valid_grid(grid[:16], 3)
    latin = (np.add.outer(np.arange(9), np.arange(9)) % 9 + 1).ravel()  # rows and columns fine, boxes not
    assert not sudoku.is_valid_grid(latin, 3)
    puzzle = grid.copy()
    puzzle[::2] = 0
    np.testing.assert_array_equal(sudoku.solve(puzzle, 3), grid)  # half-empty: still unique
    assert sudoku.count_solutions(np.zeros(81, np.uint8), 3, limit=5) == 5


def test_bad_generator_arguments():
    with pytest.raises(ValueError):
        sudoku.generate_puzzles(5, 4, seed=0)
    with pytest.raises(ValueError):
        sudoku.count_solutions(np.zeros(80, np.uint8), 3)


def test_asking_for_more_distinct_puzzles_than_exist_fails_cleanly():
    # 288 full 4x4 grids, each with 16 cells to blank: 4,608 puzzles of 15 givens exist
    with pytest.raises(PipelineError, match=r"found only (\d+) distinct 4x4 puzzles") as exc:
        sudoku.generate_puzzles(5000, 2, seed=0, givens_mean=15, givens_std=0)
    assert int(str(exc.value).split()[2]) <= 288 * 16


def test_every_generated_puzzle_keeps_a_blank_cell():
    puzzles, _ = sudoku.generate_puzzles(50, 2, seed=0, givens_mean=16, givens_std=0)
    assert ((puzzles == 0).sum(axis=1) >= 1).all()


def fill_by_hidden_singles(puzzle, box):
    """Fill blanks while some digit has exactly one possible cell in a row, column or box;
    returns the grid reached (blanks left as 0 where that rule gets stuck)."""
    K = box * box
    grid = np.array(puzzle, np.int64).reshape(K, K)
    groups = ([[(r, q) for q in range(K)] for r in range(K)] + [[(r, q) for r in range(K)] for q in range(K)]
              + [[(br * box + i // box, bq * box + i % box) for i in range(K)]
                 for br in range(box) for bq in range(box)])

    def possible(r, q, d):
        br, bq = r // box * box, q // box * box
        return (grid[r, q] == 0 and d not in grid[r] and d not in grid[:, q]
                and d not in grid[br:br + box, bq:bq + box])

    progress = True
    while progress:
        progress = False
        for cells in groups:
            for d in range(1, K + 1):
                if any(grid[r, q] == d for r, q in cells):
                    continue
                spots = [(r, q) for r, q in cells if possible(r, q, d)]
                if len(spots) == 1:
                    grid[spots[0]] = d
                    progress = True
    return grid.reshape(-1)


@pytest.mark.parametrize("box", [2, 3])
def test_hidden_singles_generator_makes_puzzles_hidden_singles_solve(box):
    puzzles, solutions = sudoku.generate_puzzles(40, box, seed=5, generator="hidden_singles")
    for puzzle, solution in zip(puzzles, solutions):
        np.testing.assert_array_equal(fill_by_hidden_singles(puzzle, box), solution)
    assert (sudoku.count_solutions_many(puzzles, box) == 1).all()
    if box == 3:  # the published set: 36.2 givens on average; this rule gives about 35-36
        assert 33 < (puzzles != 0).sum(axis=1).mean() < 38
    again, _ = sudoku.generate_puzzles(40, box, seed=5, generator="hidden_singles")
    np.testing.assert_array_equal(again, puzzles)


def test_unique_generator_puzzles_are_not_all_hidden_singles_puzzles():
    """The rules differ: random removal down to 36 givens leaves some blanks that need more than
    hidden singles (the test would pass trivially if both generators made the same puzzles)."""
    puzzles, solutions = sudoku.generate_puzzles(200, 3, seed=5)
    stuck = [not np.array_equal(fill_by_hidden_singles(p, 3), s) for p, s in zip(puzzles, solutions)]
    assert any(stuck)
