"""The Symbol Grounding Loss (Topan, Rolnick & Si 2021, eq. 3).

Rows are output cells, columns digits. For prediction column i (pre-trained encoding: a
cluster) and label column j (label encoding: a digit),

    P_hat[i, j] = exp(-BCE(y_LE[:, j], y_hat_PTE[:, i]))
    L_SG = 1 - mean_i approxmax_j P_hat[i, j]

With approxmax = max, L_SG >= 0 with equality exactly when the predictions are a column
permutation of the labels (Proposition 3.1, for row-stochastic predictions and labels where
every digit occurs), and P_hat is then that permutation. The paper trains with the 2-norm,
which is an upper bound of the max: it is 0 at a permutation too, but it is *not* minimised
there (blurred predictions score below 0), which is why this phase needs early stopping.
"""
from __future__ import annotations

from typing import Callable

import torch

APPROXMAX = ("l2", "max", "softmax", "logsumexp")


def soft_permutation(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """P_hat (K, K): P_hat[i, j] = exp(-BCE(target[:, j], pred[:, i])), pred/target (R, K)."""
    # Like torch's binary_cross_entropy, keep log finite at 0/1 predictions (a confident wrong
    # one gives a large BCE, P_hat ~ 0); clamping before the log keeps its gradient finite too.
    tiny = torch.finfo(pred.dtype).tiny
    log_p = torch.log(pred.clamp_min(tiny))
    log_not_p = torch.log((1.0 - pred).clamp_min(tiny))
    target = target.to(pred.dtype)
    bce = -(log_p.T @ target + log_not_p.T @ (1.0 - target)) / pred.shape[0]
    return torch.exp(-bce)


def approxmax(P: torch.Tensor, kind: str = "l2", temperature: float = 0.1) -> torch.Tensor:
    """Row-wise relaxation of max over the last dimension of P (entries in [0, 1])."""
    if kind == "l2":
        return P.norm(dim=-1)
    if kind == "max":
        return P.max(dim=-1).values
    if kind == "softmax":  # softmax-weighted mean: a lower bound of the max
        return (torch.softmax(P / temperature, dim=-1) * P).sum(dim=-1)
    if kind == "logsumexp":  # smooth maximum: an upper bound of the max
        return temperature * torch.logsumexp(P / temperature, dim=-1)
    raise ValueError(f"approxmax must be one of {APPROXMAX}, got {kind!r}")


def symbol_grounding_loss(pred: torch.Tensor, target: torch.Tensor, kind: str = "l2",
                          temperature: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """L_SG and P_hat for predictions/labels (R, K) of R output cells.

    pred: probabilities in [0, 1] in the pre-trained (cluster) encoding; target: one-hot labels
    in the label encoding. Returns (loss scalar, P_hat (K, K) with rows = clusters).
    """
    if pred.dim() != 2 or pred.shape != target.shape:
        raise ValueError(f"pred and target must both be (R, K), got {tuple(pred.shape)} "
                         f"and {tuple(target.shape)}")
    P = soft_permutation(pred, target)
    return 1.0 - approxmax(P, kind, temperature).mean(), P


def grounding_loss(kind: str, temperature: float, accumulator) -> Callable:
    """The ground stage's loss_fn(pred, batch) for satground.training's loops: L_SG over the
    labelled output cells of a training.Batch; each batch's P_hat goes to `accumulator`
    (a grounding.PermutationAccumulator)."""
    def loss_fn(pred: torch.Tensor, batch) -> torch.Tensor:
        K = batch.target.shape[1] // batch.labels.shape[1]
        cells = (batch.labels > 0) & ~batch.is_input
        loss, P = symbol_grounding_loss(pred.reshape(-1, K)[cells.reshape(-1)],
                                        batch.target.reshape(-1, K)[cells.reshape(-1)],
                                        kind, temperature)
        accumulator.add(P)
        return loss
    return loss_fn
