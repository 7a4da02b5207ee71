"""SATNet's check of a test board's readings (ours, beyond the paper), used by `evaluate`.

The classifier reads each given; the trained SATNet, seeing the board's other givens, infers it
too. Where the two opinions disagree and SATNet is confident, SATNet's wins: a misread given no
longer breaks the board. A misread given also misleads SATNet's inference of the others, so the
check may run in rounds, each round's SATNet seeing the last round's checked readings. SATNet may
also see the board's blanks as it solves them (`context`): beside a whole row, column and box a
hidden given is one digit, where the other givens alone often leave two or three. With several
random starts the final solve averages SATNet's outputs.
Nothing here reads a label or the Sudoku rules: the rules come from the trained SATNet.
"""
from __future__ import annotations

import torch

from .models import VisualSolver

# what SATNet sees beside the other givens when it infers a fold: nothing more (the check as
# first built), or the blanks as it solves the board from the round's readings, each blank its
# most likely digit ("solved") or SATNet's outputs renormalised per cell ("solved_soft")
CONTEXTS = ("givens", "solved", "solved_soft")


def log_inference(probs: torch.Tensor) -> torch.Tensor:
    """SATNet's per-digit outputs of a cell (..., K) as a log-distribution over the digits:
    floored at 1e-4 (one confident wrong output must not veto a digit), renormalised."""
    probs = probs.clamp(1e-4, 1.0)
    return (probs / probs.sum(-1, keepdim=True)).log()


@torch.no_grad()
def checked_readings(solver, z: torch.Tensor, is_input: torch.Tensor, folds: int,
                     weight: float = 1.0, rounds: int = 1, context: str = "givens") -> torch.Tensor:
    """SATNet's check of a board's readings: the givens are dealt into `folds` interleaved folds;
    per fold, SATNet sees the other givens and infers the fold's cells. A given's checked reading
    is the product of the classifier's probabilities and SATNet's inference raised to `weight`,
    renormalised (two opinions of one digit; weight 1: equal ones; above 1, SATNet's outweighs a
    confident misreading, which both floors would otherwise tie); blanks stay 0. With `rounds` R > 1
    the check runs R times; in each later round SATNet sees the other givens' checked readings of
    the round before, and its inference again multiplies the classifier's own reading (never the
    last round's product, so the classifier's opinion counts once). With `context` "solved" or
    "solved_soft" (CONTEXTS) each round first solves the board from its readings, one SATNet pass,
    and SATNet then infers each fold from the other givens and every blank as solved.

    solver: a SymbolicSolver; z (B, C*K) readings at given cells; is_input bool (B, C)."""
    if context not in CONTEXTS:
        raise ValueError(f"context must be one of {CONTEXTS}, got {context!r}")
    B, C = is_input.shape
    K = z.shape[1] // C
    readings = z.reshape(B, C, K)
    fold = (is_input.long().cumsum(1) - 1) % folds  # rank among the board's givens, interleaved
    shown = ~is_input if context != "givens" else torch.zeros_like(is_input)  # blanks SATNet sees
    checked = readings
    for _ in range(rounds):
        board = checked
        if context != "givens":
            solved = solver(checked.reshape(B, -1), is_input).reshape(B, C, K).clamp_min(0)
            solved = (torch.nn.functional.one_hot(solved.argmax(2), K).to(solved.dtype) if context == "solved"
                      else solved / solved.sum(2, keepdim=True).clamp_min(1e-12))
            board = torch.where(is_input.unsqueeze(2), checked, solved)
        log_votes = torch.zeros_like(readings)
        for f in range(folds):
            out = is_input & (fold == f)
            seen = (is_input & ~out) | shown
            probs = solver((board * seen.unsqueeze(2)).reshape(B, -1), seen).reshape(B, C, K)
            log_votes += torch.where(out.unsqueeze(2), log_inference(probs), 0.0)
        logits = readings.clamp_min(1e-4).log() + weight * log_votes
        checked = torch.softmax(logits, dim=2) * is_input.unsqueeze(2)
    return checked.reshape(B, C * K)


class Checked(VisualSolver):
    """A visual solver whose readings SATNet checks (`checked_readings`) before it solves the
    board: test time only, one SATNet pass per fold more. With `starts` > 1 the final solve is
    the mean of SATNet's outputs from that many random starts of its vectors: the mixing method
    ends in a different local optimum from each start, and their mean errs less than one.
    `weight`: SATNet's inference against the reader's reading; `rounds`: the check's rounds
    (`checked_readings`); `context`: what SATNet sees beside the other givens (CONTEXTS)."""

    def __init__(self, model: VisualSolver, folds: int, starts: int = 1, weight: float = 1.0,
                 rounds: int = 1, context: str = "givens"):
        super().__init__(model.classifier, model.solver)
        self.folds, self.starts, self.weight, self.rounds, self.context = folds, starts, weight, rounds, context

    def input_probs(self, images: torch.Tensor, is_input: torch.Tensor) -> torch.Tensor:
        return checked_readings(self.solver, super().input_probs(images, is_input), is_input, self.folds,
                                self.weight, self.rounds, self.context)

    def forward(self, images: torch.Tensor, is_input: torch.Tensor) -> torch.Tensor:
        z = self.input_probs(images, is_input)
        return sum(self.solver(z, is_input) for _ in range(self.starts)) / self.starts
