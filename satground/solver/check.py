"""SATNet's check of a test board's readings (ours, beyond the paper), used by `evaluate`.

The classifier reads each given; the trained SATNet, seeing the board's other givens, infers it
too. Where the two opinions disagree and SATNet is confident, SATNet's wins: a misread given no
longer breaks the board. A misread given also misleads SATNet's inference of the others, so the
check may run in rounds, each round's SATNet seeing the last round's checked readings. SATNet may
also see the board's blanks as it solves them (`context`): beside a whole row, column and box a
hidden given is one digit, where the other givens alone often leave two or three. With several
random starts the final solve averages SATNet's outputs.

A check that hides a given asks SATNet to deduce it from the others, which it does far worse than
it solves a whole board. So the checked readings may also be verified by solving
(`verified_readings`): the board is solved once as read, and once per doubtful given at its second
reading; a solve SATNet is surer of is evidence for the reading behind it.
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


def solve_surety(solver, digits: torch.Tensor, is_input: torch.Tensor, n_digits: int) -> torch.Tensor:
    """(B,) how sure SATNet is of its solve of boards whose givens show `digits` (B, C; 0-based,
    one-hot): the sum over the blank cells of the log of its top output, renormalised per cell,
    the log-probability of the solve it would answer."""
    B, C = is_input.shape
    shown = torch.nn.functional.one_hot(digits.clamp_min(0), n_digits).float() * is_input.unsqueeze(2)
    out = solver(shown.reshape(B, -1), is_input).reshape(B, C, n_digits).float().clamp_min(0)
    top = (out.max(2).values / out.sum(2).clamp_min(1e-12)).clamp_min(1e-6)
    return (top.log() * ~is_input).sum(1)


@torch.no_grad()
def verified_readings(solver, z: torch.Tensor, is_input: torch.Tensor, doubtful: int, weight: float = 1.0,
                      rounds: int = 1, readings: int = 2, patience: int = 0) -> torch.Tensor:
    """The readings verified by solving: per board, the `doubtful` givens whose likeliest reading
    is least sure are each tried at their second likeliest reading (and on, to their `readings`-th),
    one try at a time; each try's board is solved (`solve_surety`). A try wins where its readings'
    log odds (that reading against the first) plus `weight` times its solve's gain in surety over
    the board as read is above 0; a board takes its best winning try, if any, by swapping that
    given's first and tried probabilities. `rounds` repeats this from the readings so far. Costs
    (doubtful * (readings - 1) + 1) SATNet passes a round; with `doubtful` 0 the readings pass
    unchanged. With `patience` P > 0 a board leaves the verify after P rounds in a row in which no
    try of it won: a later round would try the same readings again, SATNet's random starts alone
    differing, so later rounds solve only the boards still changing (fewer passes, not the same
    draws; 0: every board every round).

    solver: a SymbolicSolver; z (B, C*K) readings at given cells; is_input bool (B, C)."""
    B, C = is_input.shape
    K = z.shape[1] // C
    probs = z.reshape(B, C, K).clone()
    doubtful, readings = min(doubtful, int(is_input.sum(1).min())), min(readings, K)
    boards = torch.arange(B, device=z.device)  # the boards a round verifies: every board, or with `patience` those still changing
    quiet = torch.zeros(B, dtype=torch.long, device=z.device)  # rounds in a row without a win
    for _ in range(rounds if doubtful else 0):
        if not len(boards):
            break
        shown, given, rows = probs[boards], is_input[boards], torch.arange(len(boards), device=z.device)
        top = shown.topk(readings, dim=2)
        digits = torch.where(given, top.indices[..., 0], -1)
        as_read = solve_surety(solver, digits, given, K)
        tried = torch.where(given, top.values[..., 0], 2.0).argsort(1)[:, :doubtful]  # least sure givens
        gains = []
        for g in tried.T:
            for j in range(1, readings):
                other = digits.clone()
                other[rows, g] = top.indices[rows, g, j]
                log_odds = top.values[rows, g, j].clamp_min(1e-4).log() - top.values[rows, g, 0].clamp_min(1e-4).log()
                gains.append(log_odds + weight * (solve_surety(solver, other, given, K) - as_read))
        gains = torch.stack(gains, 1)
        best = gains.argmax(1)
        win, g, j = gains[rows, best] > 0, tried[rows, best // (readings - 1)], best % (readings - 1) + 1
        first, other = top.indices[rows, g, 0], top.indices[rows, g, j]
        swapped = shown[rows, g].clone()
        swapped[rows, first], swapped[rows, other] = top.values[rows, g, j], top.values[rows, g, 0]
        probs[boards[win], g[win]] = swapped[win]
        if patience:
            quiet[boards] = torch.where(win, 0, quiet[boards] + 1)
            boards = boards[quiet[boards] < patience]
    return probs.reshape(B, C * K)


class Checked(VisualSolver):
    """A visual solver whose readings SATNet checks (`checked_readings`) before it solves the
    board: test time only, one SATNet pass per fold more. With `starts` > 1 the final solve is
    the mean of SATNet's outputs from that many random starts of its vectors: the mixing method
    ends in a different local optimum from each start, and their mean errs less than one.
    `weight`: SATNet's inference against the reader's reading; `rounds`: the check's rounds
    (`checked_readings`); `context`: what SATNet sees beside the other givens (CONTEXTS);
    `verify` (doubtful, weight, rounds, readings, patience): the checked readings then verified by
    solving (`verified_readings`; doubtful 0: not)."""

    def __init__(self, model: VisualSolver, folds: int, starts: int = 1, weight: float = 1.0,
                 rounds: int = 1, context: str = "givens", verify: tuple = (0, 1.0, 1, 2, 0)):
        super().__init__(model.classifier, model.solver)
        self.folds, self.starts, self.weight, self.rounds, self.context = folds, starts, weight, rounds, context
        self.verify = verify

    def input_probs(self, images: torch.Tensor, is_input: torch.Tensor) -> torch.Tensor:
        checked = checked_readings(self.solver, super().input_probs(images, is_input), is_input, self.folds,
                                   self.weight, self.rounds, self.context)
        return verified_readings(self.solver, checked, is_input, *self.verify)

    def forward(self, images: torch.Tensor, is_input: torch.Tensor) -> torch.Tensor:
        z = self.input_probs(images, is_input)
        return sum(self.solver(z, is_input) for _ in range(self.starts)) / self.starts
