"""The run's puzzles: generated (unique solutions, seeded), the published SATNet files or a CSV
of puzzle/solution strings, n_train + n_dev + n_test boards in that order (train first, test
last), and the checks that no dev or test puzzle repeats an earlier split's.

    puzzles, solutions, given, info, names = get_puzzles(params.data, seed, params.source)
    # (N, C) uint8 puzzles (0 = blank) and solutions; `given`: the published files' given-cell
    # images and positions, else None; names(i) labels board i in messages, or None
"""
from __future__ import annotations

import time

import numpy as np
from tqdm import tqdm

from . import files as sudoku_files, sudoku
from ..harness.io import PipelineError


def get_puzzles(cfg, seed: int, where: str):
    """(puzzles, solutions, given-cell images or None, info, names) for n_train + n_dev + n_test
    boards, train first, test last; names(i) labels board i in messages (its CSV line for a CSV)."""
    n_total = cfg.n_train + cfg.n_dev + cfg.n_test
    info = {}
    if cfg.puzzles.source == "generate":
        t0 = time.perf_counter()
        sudoku.generate_puzzles(1, cfg.board_size, seed, generator=cfg.puzzles.generator)  # compiles (or loads numba's cache)
        info["compile_seconds"] = round(time.perf_counter() - t0, 2)
        t0 = time.perf_counter()
        with tqdm(total=n_total, desc="puzzles", unit="puzzle") as bar:
            puzzles, solutions = sudoku.generate_puzzles(n_total, cfg.board_size, seed, cfg.givens.mean,
                                                         cfg.givens.std, progress=bar, generator=cfg.puzzles.generator)
        info["generation_seconds"] = round(time.perf_counter() - t0, 2)
        return puzzles, solutions, None, info, None

    # train: the first n_train boards, dev: the next n_dev; test: the last n_test (the published
    # 9,000/1,000 split; a CSV is read only up to n_train + n_dev + n_test rows)
    if cfg.puzzles.source == "published":
        puzzles, solutions, images, positions = sudoku_files.read_published(cfg.puzzles.path, cfg.board_size,
                                                                            cfg.n_train + cfg.n_dev, cfg.n_test)
        # the paper's own data is taken as it is: puzzles with several solutions are only counted
        info["non_unique_puzzles"] = int((sudoku.count_solutions_many(puzzles, cfg.board_size) != 1).sum())
        return puzzles, solutions, (images, positions), info, None
    puzzles, solutions, lines = sudoku_files.read_csv(cfg.puzzles.path, cfg.board_size, limit=n_total)
    if len(puzzles) < n_total:
        raise PipelineError(f"{where}: 'data.n_train' + 'data.n_dev' + 'data.n_test' = {n_total} but "
                            f"{cfg.puzzles.path} holds {len(puzzles)} boards")
    return puzzles, solutions, None, info, lambda i: f"line {lines[i]}"


def check_disjoint(puzzles: np.ndarray, split_rows: dict, where: str, names) -> None:
    """No dev or test puzzle may repeat a puzzle of an earlier split (train, then dev)."""
    seen, earlier = set(), []
    for split, (start, stop) in split_rows.items():
        repeats = [i for i in range(start, stop) if bytes(puzzles[i]) in seen]
        if repeats:
            raise PipelineError(f"{where}: {(names or (lambda i: f'board {i}'))(repeats[0])}: {split} "
                                f"puzzle repeats a {' or '.join(earlier)} puzzle ({len(repeats)} such boards)")
        seen |= {bytes(row) for row in puzzles[start:stop]}
        earlier.append(split)


def givens_summary(puzzles: np.ndarray) -> dict:
    """The mean number of givens a board and their histogram (givens -> boards)."""
    counts = (puzzles != 0).sum(axis=1)
    values, n = np.unique(counts, return_counts=True)
    return {"mean": round(float(counts.mean()), 3), "histogram": {str(v): int(k) for v, k in zip(values, n)}}
