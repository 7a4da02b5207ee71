"""The Symbol Grounding Loss of the `ground` stage (Topan, Rolnick & Si 2021, eq. 3), with a
matched form that keeps the paper's Proposition at nine digits. (The BCE of the other SATNet
stages is satground.solver.training's, so editing this file reruns `ground` alone.)

Rows are output cells, columns digits. For prediction column i (pre-trained encoding: a
cluster) and label column j (label encoding: a digit),

    P_hat[i, j] = exp(-BCE(y_LE[:, j], y_hat_PTE[:, i]))
    L_SG = 1 - mean_i approxmax_j P_hat[i, j]

With approxmax = max, L_SG >= 0 with equality exactly when the predictions are a column
permutation of the labels (Proposition 3.1, for row-stochastic predictions and labels where
every digit occurs), and P_hat is then that permutation. The paper trains with the 2-norm,
which is an upper bound of the max: it is 0 at a permutation too, but it is *not* minimised
there (blurred predictions score below 0), which is why this phase needs early stopping.
At nine digits it prefers uniform outputs to any permutation; `matched` (below) does not.
"""
from __future__ import annotations

import torch

from .grounding import PermutationAccumulator, hard_permutation


APPROXMAX = ("l2", "max", "softmax", "logsumexp")


def soft_permutation(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """P_hat (K', K): P_hat[i, j] = exp(-BCE(target[:, j], pred[:, i])), pred (R, K'), target
    (R, K); K' = K but for surjective grounding (more clusters than digits)."""
    if pred.dim() != 2 or target.dim() != 2 or pred.shape[0] != target.shape[0] \
            or pred.shape[1] < target.shape[1]:
        raise ValueError(f"pred and target must be (R, K') and (R, K), K' >= K, got "
                         f"{tuple(pred.shape)} and {tuple(target.shape)}")
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
    P = soft_permutation(pred, target)
    return 1.0 - approxmax(P, kind, temperature).mean(), P


# ---------------------------------------------------------------------------------------------
# Losses that keep the Proposition at nine digits. The 2-norm form above scores
# uniform outputs (P_hat ~ 0.7055 everywhere at K = 9) at 1 - 3 * 0.7055 = -1.12, below a
# permutation's 0, so SATNet is driven to uniform outputs. The forms below reward only the
# entries of one matching of P_hat, chosen from a running P_hat carried across batches and
# epochs (the epoch-mean P_hat of the paper's loss is faint but its Hungarian matching is right).

LOSSES = ("paper", "matched", "sinkhorn")


def matched_loss(P: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
    """1 - mean_i P[i, perm[i]]: the Symbol Grounding Loss of one fixed matching `perm`.

    For any perm it is >= 1 - max_sigma mean_i P[i, sigma(i)] >= 1 - mean_i max_j P[i, j] (the
    max form, Proposition 3.1) >= 0, and 0 exactly when the predictions are the column
    permutation perm of the labels: a blurred or uniform output lowers the matched entries
    (uniform, K = 9: 1 - 0.7055 = 0.29). Near uniform outputs it is, up to the factor
    P[i, perm[i]] ~ 0.7, the BCE of the labels relabelled by perm, a full-strength label signal.
    """
    perm = torch.as_tensor(perm, dtype=torch.long, device=P.device)
    return 1.0 - P[torch.arange(P.shape[0], device=P.device), perm].mean()


def sinkhorn(logits: torch.Tensor, iterations: int = 200) -> torch.Tensor:
    """Doubly stochastic matrix exp(logits) normalised by alternate row/column scaling (log domain)."""
    log_q = logits.double()
    for _ in range(iterations):
        log_q = log_q - torch.logsumexp(log_q, dim=1, keepdim=True)
        log_q = log_q - torch.logsumexp(log_q, dim=0, keepdim=True)
    return log_q.exp().to(logits.dtype)


def soft_matching(P: torch.Tensor, temperature: float = 0.5) -> torch.Tensor:
    """Sinkhorn soft matching of P standardised over its entries: Q = sinkhorn(z(P) / temperature).

    The standardisation makes the temperature relative to P's spread, so a faint P_hat (entries
    within 0.002 of each other) gives as sharp a Q as a clear one. temperature -> 0: the Hungarian
    matching; large: uniform 1/K.
    """
    P = P.detach().double()
    z = (P - P.mean()) / P.std().clamp_min(1e-12)
    return sinkhorn(z / temperature)


def sinkhorn_loss(P: torch.Tensor, Q: torch.Tensor) -> torch.Tensor:
    """1 - sum_ij Q[i, j] P[i, j] / K for a fixed (detached) doubly stochastic Q.

    With a hard Q (a permutation matrix) this is matched_loss. With a soft Q it is NOT minimised
    at a permutation: an off-diagonal entry grows like eps^(1/K) when a prediction column is
    blurred by eps, faster than the matched entry falls (the 2-norm's failure, in milder form).
    """
    return 1.0 - (Q.to(P) * P).sum() / P.shape[0]


class GroundingLoss:
    """The ground stage's loss_fn(pred, batch): L_SG over a batch's labelled output cells, with
    the state the matched forms carry from batch to batch and epoch to epoch.

    form: "paper" (1 - mean_i approxmax_j P_hat[i, j], the published form), "matched"
    (matched_loss with perm = the Hungarian matching of the running P_hat) or "sinkhorn"
    (sinkhorn_loss with Q = soft_matching(running P_hat, temperature); fails the Proposition,
    kept for the study, docs/grounding-loss.md). The first `warmup_epochs` epochs train with the
    paper form whatever the form; the running P_hat is the plain mean of every batch until the
    warm-up ends, then an exponential moving average with per-batch `decay` (a warm-up of 0
    epochs starts it at the first batch). It includes the current batch, detached.

    `end_epoch()` after each epoch returns that epoch's mean P_hat (the paper's estimate) and
    starts the next; `estimate()` is the matrix the permutation is read from (the running P_hat
    for the matched forms, the last epoch's mean for the paper's). state_dict() /
    load_state_dict() carry it between epochs for resuming.
    """

    def __init__(self, n_digits: int, form: str = "paper", approxmax: str = "l2",
                 temperature: float = 0.1, warmup_epochs: int = 1, decay: float = 0.99,
                 n_clusters: int | None = None):
        if form not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {form!r}")
        if approxmax not in APPROXMAX:
            raise ValueError(f"approxmax must be one of {APPROXMAX}, got {approxmax!r}")
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        if int(warmup_epochs) != warmup_epochs or warmup_epochs < 0:
            raise ValueError(f"warmup_epochs must be an integer >= 0, got {warmup_epochs}")
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"decay must be in [0, 1), got {decay}")
        self.n_digits, self.loss, self.approxmax = n_digits, form, approxmax
        self.n_clusters = n_digits if n_clusters is None else n_clusters
        self.temperature, self.warmup_epochs, self.decay = temperature, int(warmup_epochs), decay
        self.epoch = 1  # the epoch being trained, from 1
        self.running: torch.Tensor | None = None  # float64 (K, K)
        self.batches = 0  # batches in the running mean (warm-up) or since the EMA started
        self.accumulator = PermutationAccumulator(self.n_clusters, n_digits)
        self.last_epoch_mean: torch.Tensor | None = None

    @property
    def form(self) -> str:
        """The form the current epoch trains with."""
        return "paper" if self.loss == "paper" or self.epoch <= self.warmup_epochs else self.loss

    def end_epoch(self) -> torch.Tensor:
        """The finished epoch's mean P_hat; the next batch starts the next epoch."""
        self.last_epoch_mean = self.accumulator.mean()
        self.accumulator = PermutationAccumulator(self.n_clusters, self.n_digits)
        self.epoch += 1
        return self.last_epoch_mean

    def estimate(self) -> torch.Tensor:
        """The soft permutation the cluster -> digit map is read from (float32 (K, K))."""
        if self.loss == "paper":
            return self.last_epoch_mean
        return self.running.float()

    def update(self, P: torch.Tensor) -> None:
        P = P.detach().to("cpu", torch.float64)
        self.batches += 1
        if self.running is None:  # the first batch (a warm-up of 0 epochs: the EMA's start)
            self.running = P.clone()
        elif self.form == "paper":  # warm-up: plain mean of every batch so far
            self.running += (P - self.running) / self.batches
        else:
            self.running = self.decay * self.running + (1.0 - self.decay) * P

    def permutation(self) -> torch.Tensor:
        """perm (K',) long: the Hungarian matching of the running P_hat (K' > K: its best onto map)."""
        if self.running is None:
            raise ValueError("GroundingLoss: no batch seen yet")
        return hard_permutation(self.running, "hungarian")

    def compute(self, pred: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(loss, P_hat) for predictions/labels (R, K); updates the running P_hat and the epoch's
        mean."""
        P = soft_permutation(pred, target)
        self.update(P)
        if self.form == "paper":
            loss = 1.0 - approxmax(P, self.approxmax, self.temperature).mean()
        elif self.form == "matched":
            loss = matched_loss(P, self.permutation().to(P.device))
        else:
            loss = sinkhorn_loss(P, soft_matching(self.running, self.temperature).to(P.device))
        self.accumulator.add(P)
        return loss, P

    def __call__(self, pred: torch.Tensor, batch) -> torch.Tensor:
        cells = ((batch.labels > 0) & ~batch.is_input).reshape(-1)
        loss, _ = self.compute(pred.reshape(-1, self.n_clusters)[cells],
                               batch.target.reshape(-1, self.n_digits)[cells])
        return loss

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "running": self.running, "batches": self.batches,
                "last_epoch_mean": self.last_epoch_mean}

    def load_state_dict(self, state: dict) -> None:
        self.epoch, self.running, self.batches = state["epoch"], state["running"], state["batches"]
        self.last_epoch_mean = state["last_epoch_mean"]
