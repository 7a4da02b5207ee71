"""95 % intervals on test-board figures, from a bootstrap over the test *images* and the boards.

The test boards are not independent draws: about 900 pool images fill about 36,000 given cells
of 1,000 boards, so one misread image sinks the forty-odd boards that show it. Resampling boards
alone ignores that and gives intervals too narrow. Each replicate here redraws both sources of
chance the test set was built from:

- the image pool: each digit's pool images are drawn again with replacement, and every given
  cell that showed image i shows its replacement i* (so boards that shared an image still share
  one). i* is drawn in proportion to the cells it fills in the run: how hard an image is does not
  depend on how often it was shown, and so drawn a stand-in's rate (below) is estimated from as
  many cells as a run cell's image's; drawn uniformly, images shown once, whose rate is their
  digit's, stood in for more cells than they fill and moved the interval off its figure;
- the boards: drawn again with replacement.

A board's figures in a replicate follow from its givens' new images, without a new solve and
without drawing any cell's outcome on its own: a check that goes wrong on a board goes wrong on
several of its givens at once, so cells drawn independently at their images' rates would put too
few boards on the all-right side and bias every figure low. Instead each board carries a risk:
the sum, over its given cells, of the share of the cells elsewhere showing the same image that
were misread (the image's digit's share where it is shown nowhere else). A board's own
misreadings stay out of its risk, or a board that failed would look riskier than the boards that
can stand in for it; and an image that stands in for another takes the rate of one of its own
cells, at random, computed the same way, so that a replicate's risks are as noisy as the run's.
A board whose new images leave its risk as it was keeps its own outcomes (every board does where
no image is ever misread: the board bootstrap); any other takes the outcomes of a random one of
the NEIGHBOURS run boards nearest its new risk (or of every run board with exactly that risk).
So the bootstrap needs the run's per-board outcomes and per-cell readings only; it assumes a
board's outcomes depend on its images through that risk alone.

    figures = board_outcomes(digits, solution, boards)      # per board, from the run's outputs
    intervals = image_bootstrap(figures, boards, image_digits, draws=2000, seed=0)
    intervals["board_accuracy"]  # {"low": 0.64, "high": 0.71, "se": 0.017, "effective_boards": 780}
"""
from __future__ import annotations

from statistics import NormalDist

import numpy as np
import torch

from .data import Boards
from .sudoku import valid_grids

LEVEL = 0.95
# metric name (as board_metrics names it) -> the per-board outcome it is the mean of
BOARD_FIGURES = ("board_accuracy", "blank_board_accuracy", "valid_grid_rate")
# how many run boards nearest in risk a stand-in is drawn from, where fewer share the risk exactly
NEIGHBOURS = 10


def board_outcomes(digits: torch.Tensor, solution: torch.Tensor, boards: Boards) -> dict[str, np.ndarray]:
    """Per board: exact (board_accuracy), every blank right (blank_board_accuracy), a valid grid
    (valid_grid_rate), each bool (N,); and givens_right, bool (N, C), True at given cells whose
    output digit is right (False at blanks). Their means are board_metrics' figures."""
    correct = (digits == solution.long()).numpy()
    is_input = boards.is_input.numpy()
    return {"board_accuracy": correct.all(axis=1),
            "blank_board_accuracy": (correct | is_input).all(axis=1),
            "valid_grid_rate": valid_grids(digits.numpy().astype(np.uint8), boards.board_size),
            "givens_right": correct & is_input}


def image_bootstrap(outcomes: dict[str, np.ndarray], boards: Boards, image_digits: np.ndarray,
                    draws: int = 2000, seed: int = 0, chunk: int = 25) -> dict[str, dict]:
    """Percentile intervals (LEVEL) of each board figure in `outcomes` (board_outcomes' dict).

    image_digits: (P,) the true digit of every pool image (the strata the pool is redrawn in).
    Returns {figure: {"low", "high", "se", "effective_boards"}} as fractions; effective_boards is
    the number of independent boards that would give the same standard error, p(1 - p) / se^2.
    """
    rng = np.random.default_rng(seed)
    cell_image, is_input = boards.cell_image.numpy(), boards.is_input.numpy()
    N, P = len(cell_image), len(boards.images)
    images = np.where(is_input, cell_image, 0)
    wrong_cell = (is_input & ~outcomes["givens_right"]).astype(float)
    counts = np.bincount(images[is_input], minlength=P)
    wrongs = np.bincount(images[is_input], weights=wrong_cell[is_input], minlength=P)
    # the rate a board's own image has on the other boards (its digit's where it has none): a
    # board's risk must not hold its own misreadings, or a failed board looks riskier than the
    # boards that will stand in for it
    strata = [np.flatnonzero((image_digits == d) & (counts > 0)) for d in np.unique(image_digits[counts > 0])]
    share, prior = np.zeros(P), np.zeros(P)  # per digit: each image's share of its cells, its misread rate
    for members in strata:
        share[members] = counts[members] / counts[members].sum()
        prior[members] = wrongs[members].sum() / counts[members].sum()
    others = counts[images] - 1
    rate_elsewhere = np.where(others > 0, (wrongs[images] - wrong_cell) / np.maximum(others, 1), prior[images])
    risk = np.where(is_input, rate_elsewhere, 0).sum(axis=1)
    # an image that stands in for another takes the place of one of its own given cells, at random,
    # and that cell's rate elsewhere: a rate from as many cells as a run board's images have
    by_image = np.argsort(images[is_input], kind="stable")
    elsewhere_by_image = rate_elsewhere[is_input][by_image]
    first_cell = np.concatenate([[0], np.cumsum(counts)[:-1]])
    by_risk = np.argsort(risk, kind="stable")
    sorted_risk = risk[by_risk]
    figures = [name for name in BOARD_FIGURES if name in outcomes]
    values = {name: np.empty(draws) for name in figures}
    for start in range(0, draws, chunk):
        R = min(chunk, draws - start)
        replace = np.arange(P)[None].repeat(R, 0)  # replace[r, i]: the image that stands in for i
        for members in strata:  # in proportion to the cells each fills, as a run cell's image is
            replace[:, members] = members[rng.choice(len(members), (R, len(members)), p=share[members])]
        rows = rng.integers(0, N, (R, N))
        stand_ins = np.take_along_axis(replace, images[rows].reshape(R, -1), 1).reshape(R, N, -1)
        kept = stand_ins == images[rows]
        cell = first_cell[stand_ins] + (rng.random(stand_ins.shape) * counts[stand_ins]).astype(np.int64)
        new_rate = np.where(kept, rate_elsewhere[rows], elsewhere_by_image[np.minimum(cell, len(by_image) - 1)])
        new_risk = np.where(is_input[rows], new_rate, 0).sum(axis=2)
        # a board whose images changed its risk takes the outcomes of a run board of that risk
        like = by_risk[_near(sorted_risk, new_risk, rng)]
        source = np.where(np.isclose(new_risk, risk[rows], rtol=0, atol=1e-9), rows, like)
        for name in figures:
            values[name][start:start + R] = outcomes[name][source].mean(axis=1)
    tail = 100 * (1 - LEVEL) / 2
    result = {}
    for name in figures:
        p, se = float(outcomes[name].mean()), float(values[name].std(ddof=1))
        low, high = np.percentile(values[name], [tail, 100 - tail])
        result[name] = {"low": float(low), "high": float(high), "se": se,
                        "effective_boards": None if se == 0 else round(p * (1 - p) / se ** 2)}
    return result


def _near(sorted_risk: np.ndarray, risk: np.ndarray, rng) -> np.ndarray:
    """For each of `risk`, a random position in `sorted_risk` among the run boards of exactly that
    risk, or where fewer than NEIGHBOURS have it, among the NEIGHBOURS nearest it."""
    n = len(sorted_risk)
    k = min(NEIGHBOURS, n)
    low = np.searchsorted(sorted_risk, risk - 1e-9, side="left")
    high = np.searchsorted(sorted_risk, risk + 1e-9, side="right")
    few = high - low < k
    # grow [low, high) one board at a time on the nearer side
    for _ in range(k):
        short = few & (high - low < k)
        below = np.where(low > 0, risk - sorted_risk[np.maximum(low - 1, 0)], np.inf)
        above = np.where(high < n, sorted_risk[np.minimum(high, n - 1)] - risk, np.inf)
        down = short & (below <= above)
        low, high = low - down, high + (short & ~down)
    return low + (rng.random(risk.shape) * (high - low)).astype(np.int64)


def mean_interval(intervals: list[dict], means: list[float]) -> dict:
    """The interval of a mean over seeds, each seed with its own test set: the seeds' bootstrap
    standard errors combined (independent test sets), normal approximation."""
    se = float(np.sqrt(sum(i["se"] ** 2 for i in intervals)) / len(intervals))
    mean = float(np.mean(means))
    z = NormalDist().inv_cdf((1 + LEVEL) / 2)
    return {"low": mean - z * se, "high": mean + z * se, "se": se}
