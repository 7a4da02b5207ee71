"""From the soft permutation P_hat to a cluster -> digit mapping, and folding it into models.

The self-grounded phase yields, per batch, P_hat[c, d] ~ "cluster c is digit d". The authors
average it over an epoch and take the row-wise arg max as the hard permutation. Arg max can map
two clusters to one digit, so the Hungarian assignment (the best one-to-one matching of the
same matrix) is offered beside it; both are reported.

A mapping is stored as `perm` (K',) int64: perm[c] = 0-based digit index of cluster c. With as
many clusters as digits (K' = K, the paper) it is a permutation; with more (surjective grounding,
ours: `cluster.clusters`) it maps the K' clusters onto the K digits, every digit some cluster's,
and P_hat is K' x K. Its Hungarian reading is then the best onto map (metrics.onto_assignment).

P_hat only sees output cells, so it maps SATNet's *output* encoding to digits. Nothing in L_SG
makes SATNet number its outputs as the classifier numbers its inputs: it can learn
"output a excludes given rho(a)" as easily as "output a excludes given a". `align_to_inputs`
reads that relabelling rho off the predictions alone (which given clusters each output value
avoids among its peers) and moves the permutation to the classifier's encoding.

The same rule gives the permutation without SATNet (`peer_label_permutation`): a given of
cluster c never shares a row, column or box with an output cell labelled perm[c]. It reads
the given cells' clusters and the output cells' labels of the ungrounded boards, never an
input-cell label.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..harness.io import PipelineError
from ..boards.metrics import onto_assignment
from ..boards.sudoku import peers

ASSIGNMENTS = ("argmax", "hungarian")
# where the cluster -> digit permutation comes from: the Symbol Grounding Loss's P_hat (the
# paper), or the given cells' clusters against their peers' output labels (ours, label free)
PERMUTATION_SOURCES = ("loss", "peers")


class PermutationAccumulator:
    """Running mean of the per-batch P_hat matrices (K', K) over one epoch."""

    def __init__(self, n_clusters: int, n_digits: int | None = None):
        self.total = torch.zeros(n_clusters, n_clusters if n_digits is None else n_digits,
                                 dtype=torch.float64)
        self.count = 0

    def add(self, P: torch.Tensor) -> None:
        self.total += P.detach().to("cpu", torch.float64)
        self.count += 1

    def mean(self) -> torch.Tensor:
        if self.count == 0:
            raise ValueError("PermutationAccumulator: no batch was added")
        return (self.total / self.count).float()


def hard_permutation(P: torch.Tensor, method: str = "argmax") -> torch.Tensor:
    """perm (K',) int64 from a soft matrix P (K', K): row-wise arg max, or the Hungarian matching
    (K' = K; with K' > K the best onto map)."""
    if method == "argmax":
        return P.argmax(dim=1).long()
    if method == "hungarian" and P.shape[0] > P.shape[1]:
        return torch.from_numpy(onto_assignment(P.detach().cpu().double().numpy()))
    if method == "hungarian":
        from scipy.optimize import linear_sum_assignment  # here: spares every stage's start-up
        rows, cols = linear_sum_assignment(P.detach().cpu().double().numpy(), maximize=True)
        perm = np.empty(len(rows), dtype=np.int64)
        perm[rows] = cols
        return torch.from_numpy(perm)
    raise ValueError(f"assignment must be one of {ASSIGNMENTS}, got {method!r}")


def is_permutation(perm: torch.Tensor) -> bool:
    perm = torch.as_tensor(perm)
    return bool(torch.equal(torch.sort(perm).values, torch.arange(len(perm))))


def is_onto(perm: torch.Tensor, n_digits: int) -> bool:
    """Whether perm (K',) maps 0..K'-1 onto 0..n_digits-1: a permutation when K' = n_digits."""
    perm = torch.as_tensor(perm)
    return bool(torch.equal(torch.unique(perm), torch.arange(n_digits)))


def permutation_matrix(perm: torch.Tensor, n_digits: int | None = None) -> torch.Tensor:
    """0/1 matrix M (K', K) with M[c, perm[c]] = 1, so that probs_cluster @ M = probs_digit."""
    perm = torch.as_tensor(perm, dtype=torch.long)
    M = torch.zeros(len(perm), len(perm) if n_digits is None else n_digits)
    M[torch.arange(len(perm)), perm] = 1.0
    return M


def relabel(probs: torch.Tensor, perm: torch.Tensor, n_digits: int, summed: bool = False) -> torch.Tensor:
    """Per-cell blocks (B, C*K') from cluster encoding to digit encoding (B, C*K): each digit
    the mean of its clusters' entries (SATNet's output columns of one digit's clusters each
    estimate that digit), or with `summed` their sum (a classifier's probabilities); a
    permutation just reorders."""
    B = probs.shape[0]
    M = permutation_matrix(perm, n_digits).to(probs)
    if not summed:
        M = M / M.sum(dim=0).clamp_min(1.0)
    return (probs.reshape(B, -1, len(perm)) @ M).reshape(B, -1)


def peer_cooccurrence(clusters: torch.Tensor, is_input: torch.Tensor, board_size: int,
                      counted: torch.Tensor | None = None) -> torch.Tensor:
    """M (K, K): M[a, b] = how often an output cell predicted a has a peer given predicted b.

    clusters: (N, C) 0-based values (givens from the classifier, outputs from SATNet or labels);
    counted: (N, C) bool, the output cells to count (default: all), whose values elsewhere are
    never read.
    """
    K = board_size ** 2
    onehot = F.one_hot(clusters.long().clamp(0, K - 1), K).double()
    outputs = ~is_input if counted is None else counted & ~is_input
    return torch.einsum("nca,cd,ndb->ab", onehot * outputs.double()[..., None], peers(board_size).double(),
                        onehot * is_input.double()[..., None]).float()


def peer_label_cooccurrence(given_clusters: torch.Tensor, labels: torch.Tensor, is_input: torch.Tensor,
                            board_size: int) -> torch.Tensor:
    """M (K, K): M[c, d] = how often a given cell of cluster c has a peer output cell labelled d.

    given_clusters: (N, C) 0-based clusters the classifier reads at given cells (any value
    elsewhere); labels: (N, C) 1..K at labelled output cells, 0 elsewhere (the ungrounded view:
    no input-cell label is read). A Sudoku never repeats a digit among peers, so cluster c's
    digit d = perm[c] is the one it (almost) never meets: M[c, perm[c]] counts only clustering
    errors.
    """
    values = torch.where(is_input, given_clusters.long(), labels.long() - 1)
    return peer_cooccurrence(values, is_input, board_size, counted=labels > 0).T


def peer_label_permutation(cooccurrence: torch.Tensor) -> torch.Tensor:
    """perm (K,): the one-to-one cluster -> digit matching of least peer co-occurrence."""
    return hard_permutation(-cooccurrence, "hungarian")


def align_to_inputs(output_perm: torch.Tensor, cooccurrence: torch.Tensor, max_ratio: float = 0.5):
    """(input_perm, rho): rho[a] = the given cluster that output value a avoids (the one-to-one
    matching of least co-occurrence), input_perm[rho[a]] = output_perm[a].

    Only decisive evidence moves the permutation: rho is used when its co-occurrence is at most
    `max_ratio` times that of the identity; a SATNet barely above chance, whose co-occurrences
    are all alike, keeps its numbering as it is.
    """
    from scipy.optimize import linear_sum_assignment
    _, rho = linear_sum_assignment(cooccurrence.detach().cpu().double().numpy())
    rho = torch.from_numpy(rho).long()
    identity = torch.arange(len(rho))
    if cooccurrence[identity, rho].sum() > max_ratio * cooccurrence.diagonal().sum():
        rho = identity
    input_perm = torch.empty_like(output_perm)
    input_perm[rho] = output_perm
    return input_perm, rho


@dataclass
class PermutationHistory:
    """The permutation read off P_hat at each epoch's end (lists, epoch 1 first), kept across a
    resumed run (state_dict / load_state_dict, as a training loop's carry). It answers how early
    the grounding phase's reading stops changing: the stage's budget (docs/studies/stage-budget.md)."""
    epochs: list

    def add(self, perm: torch.Tensor) -> None:
        self.epochs.append(perm.tolist())

    def settled_epoch(self, epoch: int) -> int:
        """The first epoch from which every reading up to `epoch` equals `epoch`'s."""
        first = epoch
        while first > 1 and self.epochs[first - 2] == self.epochs[epoch - 1]:
            first -= 1
        return first

    def settled_for(self, epochs: int) -> bool:
        """The last `epochs` + 1 readings are the same (never, for `epochs` 0)."""
        last = len(self.epochs)
        return 0 < epochs < last and self.settled_epoch(last) <= last - epochs

    def state_dict(self) -> dict:
        return {"epochs": list(self.epochs)}

    def load_state_dict(self, state: dict) -> None:
        self.epochs = list(state["epochs"])


@dataclass
class PermutationChoice:
    """The cluster -> digit permutation the ground stage folds into the classifier (`chosen`), and
    the readings of P_hat it was chosen among."""
    P: torch.Tensor
    source: str                      # PERMUTATION_SOURCES: where `chosen` comes from
    chosen: torch.Tensor
    output: torch.Tensor             # SATNet's output encoding -> digit, one-to-one
    assignment: str                  # how `output` was read off P_hat
    argmax: torch.Tensor
    hungarian: torch.Tensor
    from_loss: torch.Tensor          # `output` in the classifier's encoding (with the alignment)
    rho: torch.Tensor | None         # output value -> the given cluster it avoids (the alignment)
    output_cooccurrence: torch.Tensor | None
    from_peers: torch.Tensor | None
    label_cooccurrence: torch.Tensor | None

    def record(self, best_epoch: int) -> dict:
        """The permutation file's content (permutation_record)."""
        def listed(x):
            return None if x is None else x.tolist()

        return permutation_record(
            self.chosen, self.output, self.P, source=self.source, from_loss=self.from_loss.tolist(),
            from_peers=listed(self.from_peers), peer_label_cooccurrence=listed(self.label_cooccurrence),
            assignment=self.assignment, argmax=self.argmax.tolist(), hungarian=self.hungarian.tolist(),
            argmax_is_permutation=is_onto(self.argmax, self.P.shape[1]), output_to_input=listed(self.rho),
            aligned_to_inputs=self.output_cooccurrence is not None,
            peer_cooccurrence=listed(self.output_cooccurrence), best_epoch=best_epoch)

    def agreements(self) -> dict:
        """Whether the readings agree (None where one was not made)."""
        def same(a, b):
            return None if a is None else bool(torch.equal(a, b))

        return {"argmax_is_permutation": is_onto(self.argmax, self.P.shape[1]),
                "argmax_equals_hungarian": same(self.argmax, self.hungarian),
                "outputs_numbered_like_inputs": same(self.rho, torch.arange(len(self.chosen))),
                "loss_agrees_with_peers": same(self.from_peers, self.from_loss)}


def choose_permutation(P: torch.Tensor, assignment: str, source: str,
                       output_cooccurrence: torch.Tensor | None = None,
                       label_cooccurrence: torch.Tensor | None = None) -> PermutationChoice:
    """The permutation from P_hat read by `assignment`, falling back to the Hungarian matching
    where arg max leaves a digit without a cluster (folding needs an onto map). Given SATNet's
    `output_cooccurrence` with its peer givens (peer_cooccurrence), it is moved to the
    classifier's encoding (align_to_inputs). With source peers the permutation is instead the one
    of least `label_cooccurrence` (peer_label_permutation)."""
    argmax, hungarian = hard_permutation(P, "argmax"), hard_permutation(P, "hungarian")
    used = "argmax" if assignment == "argmax" and is_onto(argmax, P.shape[1]) else "hungarian"
    output = argmax if used == "argmax" else hungarian
    from_loss, rho = output, None
    if output_cooccurrence is not None:
        from_loss, rho = align_to_inputs(output, output_cooccurrence)
    from_peers = None
    if source == "peers":
        if label_cooccurrence is None:
            raise ValueError("the peers permutation needs the givens' label co-occurrence")
        from_peers = peer_label_permutation(label_cooccurrence)
    return PermutationChoice(P, source, from_peers if source == "peers" else from_loss, output, used,
                             argmax, hungarian, from_loss, rho, output_cooccurrence, from_peers,
                             label_cooccurrence)


def last_linear(classifier: nn.Module) -> nn.Linear:
    """The classifier's output layer: its last registered nn.Linear."""
    linears = [module for module in classifier.modules() if isinstance(module, nn.Linear)]
    if not linears:
        raise ValueError(f"{type(classifier).__name__} has no nn.Linear output layer to fold into")
    return linears[-1]


@torch.no_grad()
def fold_into_classifier(classifier: nn.Module, perm: torch.Tensor) -> None:
    """Permute the output units so that logit perm[c] of the new model is logit c of the old.

    The classifier then predicts digits (label encoding) instead of clusters; its predictions
    are unchanged up to that relabelling. A map of more clusters onto fewer digits (surjective
    grounding) is kept by a CNN ensemble instead (DigitReader.merge_classes): a digit's
    probability is then the sum of its clusters'.
    """
    perm = torch.as_tensor(perm, dtype=torch.long)
    if hasattr(classifier, "merge_classes") and not is_permutation(perm):
        classifier.merge_classes(perm)
        return
    if not is_permutation(perm):
        raise ValueError(f"cannot fold a mapping that is not a permutation into "
                         f"{type(classifier).__name__}: {perm.tolist()}")
    # a CNN ensemble (DigitReader) has an output layer per net; LeNet its last nn.Linear
    layers = classifier.output_layers() if hasattr(classifier, "output_layers") else [last_linear(classifier)]
    for layer in layers:
        if layer.out_features != len(perm):
            raise ValueError(f"output layer has {layer.out_features} units, permutation has {len(perm)}")
        perm = perm.to(layer.weight.device)
        weight, bias = layer.weight.clone(), None if layer.bias is None else layer.bias.clone()
        layer.weight[perm] = weight
        if bias is not None:
            layer.bias[perm] = bias


@torch.no_grad()
def fold_into_satnet(satnet: nn.Module, perm: torch.Tensor, n_digits: int) -> None:
    """Relabel SATNet's variables the same way: variable (cell, c) becomes (cell, perm[c]).

    SATNet's clauses do not care how the digits are numbered, so a layer trained on cluster
    encoding keeps solving the same boards in digit encoding once its rows of S are permuted.
    S has rows [truth, cell 0 digit 0..K-1, cell 1 ..., aux...].
    """
    perm = torch.as_tensor(perm, dtype=torch.long)
    if not is_permutation(perm) or len(perm) != n_digits:
        raise ValueError(f"cannot fold a mapping that is not a permutation: {perm.tolist()}")
    S = satnet.S
    n = satnet.n
    cells = n // n_digits
    rows = S[1:n + 1].clone().reshape(cells, n_digits, -1)
    S[1:n + 1] = rows[:, torch.argsort(perm).to(S.device)].reshape(n, -1)


@torch.no_grad()
def narrow_satnet(source: nn.Module, target: nn.Module, perm: torch.Tensor, soft: torch.Tensor) -> None:
    """Start a digit-valued SATNet `target` (K values a cell) from the self-grounded `source`
    that speaks K' > K clusters (surjective grounding): digit d's rows of S are those of its
    representative cluster, the cluster c mapped to d (perm[c] = d) of largest P_hat[c, d]; the
    truth row and the auxiliary rows are carried as they are. A digit's other clusters carry the
    same rules (their output columns estimate the same digit), so nothing the rules need is lost.
    """
    perm = torch.as_tensor(perm, dtype=torch.long)
    n_clusters, n_digits = soft.shape
    if len(perm) != n_clusters or not is_onto(perm, n_digits):
        raise ValueError(f"cannot narrow SATNet by a map that is not onto the digits: {perm.tolist()}")
    if source.m != target.m or source.aux != target.aux or source.n // n_clusters != target.n // n_digits:
        raise ValueError(f"SATNet of n={source.n}, m={source.m}, aux={source.aux} does not narrow to "
                         f"n={target.n}, m={target.m}, aux={target.aux}")
    score = torch.where(perm[:, None] == torch.arange(n_digits), soft.float(), torch.tensor(-1.0))
    representative = score.argmax(dim=0)  # (K,): each digit's cluster
    cells = target.n // n_digits
    rows = (torch.arange(cells)[:, None] * n_clusters + representative).reshape(-1) + 1
    keep = torch.cat([torch.zeros(1, dtype=torch.long), rows,
                      torch.arange(source.n + 1, source.n + 1 + source.aux)])
    target.S.copy_(source.S[keep.to(source.S.device)])


# ---------------------------------------------------------------------------------------------
# the permutation file (models/permutation.json): written by `ground`, read by `train`, `evaluate`


def permutation_record(permutation: torch.Tensor, output_permutation: torch.Tensor, soft: torch.Tensor,
                       **details) -> dict:
    """The file's content (saved as JSON by io.save_all): permutation: cluster -> digit folded into
    the classifier; output_permutation: SATNet's output encoding -> digit; soft: the epoch-mean
    P_hat; details: reported as they are."""
    return {"permutation": permutation.tolist(), "output_permutation": output_permutation.tolist(),
            "cluster_to_digit": {str(c): int(d) + 1 for c, d in enumerate(permutation.tolist())},
            "soft_permutation": [[round(float(x), 6) for x in row] for row in soft], **details}


def checked_map(path, key: str, entries, n_clusters: int, n_digits: int) -> torch.Tensor:
    """A file's `key` as saved (`entries`) as a long (n_clusters,) map of the clusters onto
    0..n_digits-1, or a one-line PipelineError naming the file and key."""
    listed = entries if isinstance(entries, list) else [entries]
    if not all(type(x) is int for x in listed):  # torch.tensor would truncate 1.7 to 1
        raise PipelineError(f"{path}: '{key}' must hold integers, got {entries}")
    perm = torch.tensor(entries, dtype=torch.long)
    if perm.shape != (n_clusters,) or not is_onto(perm, n_digits):
        what = (f"a permutation of 0..{n_digits - 1}" if n_clusters == n_digits else
                f"a map of {n_clusters} clusters onto 0..{n_digits - 1} (cluster.clusters)")
        raise PipelineError(f"{path}: '{key}' must be {what}, got {perm.tolist()}")
    return perm


def load_permutation(path, n_digits: int) -> dict:
    """The record permutation_record wrote, with "permutation", "output_permutation" as long (K',)
    and "soft_permutation" as float (K', K), each checked: two maps of 0..K'-1 onto 0..K-1
    (permutations when K' = K, the default; K' >= K is the file's) and a finite K' x K matrix;
    one-line errors name the file. The other entries as saved."""
    path = Path(path)
    if not path.is_file():
        raise PipelineError(f"{path}: permutation not found (run the ground stage)")
    try:
        saved = json.loads(path.read_text())
        loaded = {**saved, **{key: torch.tensor(saved[key], dtype=dtype) for key, dtype in
                  (("permutation", torch.long), ("output_permutation", torch.long),
                   ("soft_permutation", torch.float))}}
    except (ValueError, KeyError, TypeError, AttributeError, RuntimeError) as exc:
        raise PipelineError(f"{path}: missing or unreadable permutation entry ({type(exc).__name__}: "
                            f"{str(exc).splitlines()[0] if str(exc) else ''})") from None
    n_clusters = max(n_digits, loaded["permutation"].numel())
    for key in ("permutation", "output_permutation"):
        loaded[key] = checked_map(path, key, saved[key], n_clusters, n_digits)
    soft = loaded["soft_permutation"]
    if soft.shape != (n_clusters, n_digits) or not torch.isfinite(soft).all():
        raise PipelineError(f"{path}: 'soft_permutation' must be a finite {n_clusters}x{n_digits} matrix")
    return loaded
