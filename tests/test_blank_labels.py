"""The levers that show SATNet the training boards' blank-cell labels as inputs. The rules epochs
(train.rules_epochs): no given's label or image read, only known cells shown, 4x4 Sudoku's rules
learnt. The hints (train.hints): only labelled blank cells hinted, a share falling to 0, none in
eval mode, the loss blind to hinted cells."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from satground.boards.data import Boards
from satground.boards.sudoku import generate_puzzles
from satground.solver.models import SymbolicSolver
from satground.solver.training import (HintedSolver, RulesLearner, evaluate_outputs, hinted_loss, known_cells,
                                       learn_rules, make_batch)


def ungrounded(n: int, seed: int) -> Boards:
    """4x4 boards in the ungrounded view: labels at blank cells only, a pool of dummy images."""
    puzzles, solutions = generate_puzzles(n, 2, seed=seed)
    is_input = torch.from_numpy(puzzles.reshape(n, -1) > 0)
    labels = torch.from_numpy(solutions.reshape(n, -1).astype(np.uint8)) * ~is_input
    cell_image = torch.where(is_input, torch.arange(16).repeat(n, 1), -1)
    return Boards(2, torch.zeros(16, 28, 28, dtype=torch.uint8), cell_image, is_input, labels)


def test_known_cells_keep_every_blank_label_and_no_image():
    boards = ungrounded(20, seed=0)
    view = known_cells(boards)
    assert torch.equal(view.is_input, boards.labels > 0)
    assert torch.equal(view.labels, boards.labels)
    assert (view.cell_image == -1).all() and len(view.images) == 1
    dev = known_cells(boards, 0.5, torch.Generator().manual_seed(0))
    assert not (dev.is_input & ~view.is_input).any()  # shown cells are known cells
    hidden = view.is_input & ~dev.is_input
    assert 0 < hidden.sum() < view.is_input.sum()


def test_known_cells_refuse_boards_that_hold_a_givens_label():
    boards = ungrounded(5, seed=0)
    leaky = Boards(2, boards.images, boards.cell_image, boards.is_input,
                   boards.labels + boards.is_input.to(torch.uint8))  # a label at every given
    with pytest.raises(ValueError, match="ungrounded view"):
        known_cells(leaky)


class Spy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = []

    def forward(self, symbols, shown):
        self.calls.append((symbols.clone(), shown.clone()))
        return torch.full_like(symbols, 0.5)


def test_the_learner_shows_a_fresh_share_of_known_cells_and_nothing_of_a_given():
    boards = known_cells(ungrounded(200, seed=1))
    spy = Spy()
    learner = RulesLearner(spy, 0.6, torch.Generator().manual_seed(0))
    batch = make_batch(boards, torch.arange(200), torch.device("cpu"))
    learner(batch.symbols, batch.is_input)
    learner(batch.symbols, batch.is_input)
    (first_symbols, first), (_, second) = spy.calls
    assert not (first & ~boards.is_input).any()          # only known cells are shown
    assert not torch.equal(first, second)                 # drawn afresh each batch
    share = first.sum() / boards.is_input.sum()
    assert 0.55 < share < 0.65
    givens = (boards.labels == 0).repeat_interleave(4, dim=1)
    assert (first_symbols[givens] == 0).all()             # a given cell carries nothing
    learner.eval()
    learner(batch.symbols, batch.is_input)
    assert torch.equal(spy.calls[-1][1], batch.is_input)  # eval: exactly the inputs given


def test_satnet_learns_the_4x4_rules_from_blank_cells_alone():
    torch.manual_seed(0)
    train, dev = ungrounded(300, seed=2), ungrounded(100, seed=3)
    solver = SymbolicSolver(2, m=80, aux=8, max_iter=30)
    generator = torch.Generator().manual_seed(0)
    dev_view = known_cells(dev, 0.6, torch.Generator().manual_seed(5))
    before = evaluate_outputs(RulesLearner(solver, 0.6, generator), dev_view, 50, torch.device("cpu"))
    last = learn_rules(solver, train, dev, 6, 0.6, 0.1, 20, torch.device("cpu"), generator)
    assert before["blank_cells"] < 0.4                           # chance is 1/4
    assert last["dev_blank_cells"] > 0.55 and last["dev_valid_grids"] > 0.1, last


class Reader(torch.nn.Module):
    """A classifier that reads every image as uniform (K = 4 digits)."""
    def forward(self, images):
        return torch.zeros(len(images), 4)


def test_hints_show_labelled_blank_cells_at_a_falling_share_and_none_in_eval():
    from satground.solver.models import VisualSolver
    boards = ungrounded(200, seed=4)
    spy = Spy()
    spy.n_digits = 4
    hinted = HintedSolver(VisualSolver(Reader(), spy), 0.6, batches=4, generator=torch.Generator().manual_seed(0))
    batch = make_batch(boards, torch.arange(200), torch.device("cpu"))
    blank = (boards.labels > 0) & ~boards.is_input
    shares = []
    for _ in range(5):
        hinted(batch)
        symbols, shown = spy.calls[-1]
        hint = shown & ~boards.is_input
        assert torch.equal(hint, hinted.hint) and not (hint & ~blank).any()
        onehot = symbols.reshape(200, 16, 4)
        assert torch.equal(onehot[hint].argmax(1) + 1, boards.labels[hint].long())   # the label, one-hot
        assert torch.allclose(onehot[boards.is_input], torch.full((int(boards.is_input.sum()), 4), 0.25))
        shares.append(hint.sum().item() / blank.sum().item())
    assert 0.5 < shares[0] < 0.7 and 0.25 < shares[2] < 0.35 and shares[4] == 0   # 0.6, 0.3, then 0
    assert hinted.done.item() == 5 and "done" in hinted.state_dict()
    hinted.eval()
    hinted(batch)
    assert torch.equal(spy.calls[-1][1], boards.is_input)      # eval: the givens alone, as at test time


def test_the_hinted_loss_leaves_out_the_hinted_cells():
    boards = ungrounded(50, seed=5)
    batch = make_batch(boards, torch.arange(50), torch.device("cpu"))
    from satground.solver.models import VisualSolver
    hinted = HintedSolver(VisualSolver(Reader(), Spy()), 0.5, batches=1, generator=torch.Generator())
    blank = (boards.labels > 0) & ~boards.is_input
    hinted.hint = blank & (torch.rand(blank.shape, generator=torch.Generator().manual_seed(0)) < 0.5)
    pred = batch.target.clone().clamp(0.01, 0.99)
    wrong = hinted.hint.repeat_interleave(4, dim=1)
    pred[wrong] = 1 - pred[wrong]          # every hinted cell predicted wrong: the loss must not see it
    assert hinted_loss(hinted)(pred, batch).item() < 0.02
