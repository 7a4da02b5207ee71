"""The bootstrap over test images and boards (satground/boards/intervals.py): its standard error
matches the spread of the figure over independently drawn test sets, where resampling boards
alone is too narrow; it reduces to the board bootstrap when no image is ever misread; and it stays
centred on its figure when a board's misread givens come together, as the check's do."""
import numpy as np
import pytest
import torch

from satground.boards.data import Boards
from satground.boards.intervals import board_outcomes, image_bootstrap, mean_interval

K, C, GIVENS = 9, 81, 36


def drawn_test_set(rng, n_boards=300, per_digit=30, hard=0.03, solved=0.8):
    """Boards as prepare builds them (each given cell shows a random pool image of its digit),
    and a reader that misreads exactly the pool's hard images; the solver gets a board's blanks
    right with chance `solved` when its givens are read right, never otherwise."""
    digits = np.repeat(np.arange(1, K + 1), per_digit)
    misread = rng.random(len(digits)) < hard
    solution = np.tile(np.arange(1, K + 1), (n_boards, C // K))  # the digits the cells hold
    is_input = np.zeros((n_boards, C), bool)
    for b in range(n_boards):
        is_input[b, rng.choice(C, GIVENS, replace=False)] = True
    cell_image = np.where(is_input, (solution - 1) * per_digit + rng.integers(0, per_digit, (n_boards, C)), -1)
    boards = Boards(3, torch.zeros(len(digits), 28, 28, dtype=torch.uint8), torch.from_numpy(cell_image),
                    torch.from_numpy(is_input), torch.from_numpy(solution.astype(np.uint8)))
    read_right = np.where(is_input, ~misread[np.maximum(cell_image, 0)], True)
    blanks_right = (rng.random(n_boards) < solved) & read_right.all(axis=1)
    right = np.where(is_input, read_right, blanks_right[:, None])
    predicted = np.where(right, solution, solution % K + 1)
    return boards, digits, torch.from_numpy(predicted), torch.from_numpy(solution)


def test_the_image_bootstrap_matches_the_spread_over_fresh_test_sets():
    rng = np.random.default_rng(0)
    exact = []
    for _ in range(200):
        boards, digits, predicted, solution = drawn_test_set(rng)
        exact.append(board_outcomes(predicted, solution, boards)["board_accuracy"].mean())
    truth = np.std(exact, ddof=1)
    ses, naive = [], []
    for seed in range(8):
        boards, digits, predicted, solution = drawn_test_set(rng)
        figures = board_outcomes(predicted, solution, boards)
        ses.append(image_bootstrap(figures, boards, digits, draws=400, seed=seed)["board_accuracy"]["se"])
        p = figures["board_accuracy"].mean()
        naive.append(np.sqrt(p * (1 - p) / len(boards)))
    assert 0.7 * truth < np.mean(ses) < 1.4 * truth, (np.mean(ses), truth)
    assert np.mean(naive) < 0.6 * truth  # boards alone: far too narrow here


def test_without_misreadings_it_is_the_board_bootstrap():
    rng = np.random.default_rng(1)
    boards, digits, predicted, solution = drawn_test_set(rng, hard=0.0)
    figures = board_outcomes(predicted, solution, boards)
    got = image_bootstrap(figures, boards, digits, draws=1000, seed=0)["board_accuracy"]
    p = figures["board_accuracy"].mean()
    assert abs(got["se"] / np.sqrt(p * (1 - p) / len(boards)) - 1) < 0.15
    assert got["low"] < p < got["high"]
    assert abs(got["effective_boards"] / len(boards) - 1) < 0.3


def checked_test_set(rng, n_boards=600, fail=0.3, misread=8, per_digit=30):
    """drawn_test_set's boards read by a check that goes wrong on whole boards: a board it fails
    (chance `fail`) has `misread` of its givens and all its blanks wrong, any other none. No image
    is harder than another, so every image is misread on some boards, and only there."""
    boards, digits, _, solution = drawn_test_set(rng, n_boards=n_boards, per_digit=per_digit, hard=0.0)
    failed = rng.random(n_boards) < fail
    wrong = ~boards.is_input.numpy()
    for b in np.flatnonzero(failed):
        wrong[b, rng.choice(np.flatnonzero(boards.is_input[b].numpy()), misread, replace=False)] = True
    wrong &= failed[:, None]
    predicted = torch.where(torch.from_numpy(wrong), solution % K + 1, solution)
    return boards, digits, predicted, solution


@pytest.mark.parametrize("per_digit", [30, 300])  # each image on about 80 boards, or 8 (Fashion's test: 3)
def test_the_interval_holds_its_figure_when_a_boards_misreadings_come_together(per_digit):
    rng = np.random.default_rng(2)
    boards, digits, predicted, solution = checked_test_set(rng, per_digit=per_digit)
    figures = board_outcomes(predicted, solution, boards)
    cells, given = boards.cell_image.numpy(), boards.is_input.numpy()
    rate = np.bincount(cells[given], figures["givens_right"][given]) / np.bincount(cells[given])
    assert ((rate > 0) & (rate < 1)).mean() > 0.3  # images read right on some boards only
    got = image_bootstrap(figures, boards, digits, draws=1000, seed=0)
    for name in ("board_accuracy", "blank_board_accuracy"):
        p = figures[name].mean()
        low, high = got[name]["low"], got[name]["high"]
        assert low < p < high, (name, low, p, high)
        assert abs((low + high) / 2 - p) < 0.25 * (high - low), (name, low, p, high)
        # nothing here depends on the images: the board bootstrap's width
        assert abs(got[name]["se"] / np.sqrt(p * (1 - p) / len(boards)) - 1) < 0.25


def test_the_interval_holds_its_figure_when_images_are_shown_on_few_boards():
    """Fashion's test after the verify: each image on about 3 boards, a failed board with one
    misread given. Stand-ins drawn uniformly from the pool put the interval above its figure here
    (images shown once carry their digit's rate, where images shown more and never misread carry 0)."""
    rng = np.random.default_rng(2)
    boards, digits, predicted, solution = checked_test_set(rng, n_boards=1000, fail=0.21, misread=1,
                                                           per_digit=1300)
    figures = board_outcomes(predicted, solution, boards)
    got = image_bootstrap(figures, boards, digits, draws=1000, seed=0)["board_accuracy"]
    p = figures["board_accuracy"].mean()
    assert got["low"] < p < got["high"]
    assert abs((got["low"] + got["high"]) / 2 - p) < 0.25 * (got["high"] - got["low"]), (got, p)


def test_the_mean_over_seeds_combines_their_standard_errors():
    combined = mean_interval([{"se": 0.03}, {"se": 0.04}], [0.6, 0.7])
    assert abs(combined["se"] - 0.025) < 1e-12
    assert abs((combined["low"] + combined["high"]) / 2 - 0.65) < 1e-12
