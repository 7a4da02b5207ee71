"""The Sudoku solvers: SATNet on symbols, the visual solver, the proofreader.

A board is C cells of K digits; the SATNet variables are the C*K per-cell digit indicators,
cell-major (variable c*K + d is "cell c holds digit d+1").

    SymbolicSolver:  probabilities at given cells -> [Proofreader] -> SATNet -> full board
    VisualSolver:    given-cell images -> digit classifier (softmax) -> SymbolicSolver

The ungrounded model (ours, Appendix B) zeroes SATNet's outputs at input cells and returns the
classifier's (or proofreader's) probabilities there instead; the values are the same, only the
gradients differ. The original SATNet (grounded / leaky) returns SATNet's pass-through.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..boards.data import var_mask
from ..readers.classifier import build_classifier, reader_config
from ..harness.io import PipelineError, check_finite_weights, load_torch
from ..readers.lenet import image_batch
from .grounding import checked_map
from ..satnet import SATNet


def cell_softmax(x: torch.Tensor, n_digits: int) -> torch.Tensor:
    """Softmax over each cell's K entries of a (B, C*K) tensor."""
    B = x.shape[0]
    return torch.softmax(x.reshape(B, -1, n_digits), dim=2).reshape(B, -1)


class Proofreader(nn.Module):
    """Linear(C*K, C*K) + per-cell softmax, started as a (numerically) identity map.

    The authors' initialisation: weight scale * I and bias -scale/2, plus noise of 1e-4. A
    one-hot cell then gets logits (+scale/2, -scale/2, ...) and comes out one-hot up to
    exp(-scale) ~ 5e-5 per entry; a uniform cell stays uniform.
    """

    def __init__(self, n_cells: int, n_digits: int, scale: float = 10.0, noise: float = 1e-4):
        super().__init__()
        self.n_digits = n_digits
        n = n_cells * n_digits
        self.linear = nn.Linear(n, n)
        with torch.no_grad():
            self.linear.weight.copy_(scale * torch.eye(n) + noise * torch.randn(n, n))
            self.linear.bias.copy_(-scale / 2 + noise * torch.randn(n))

    def forward(self, probs: torch.Tensor) -> torch.Tensor:
        return cell_softmax(self.linear(probs), self.n_digits)


class SymbolicSolver(nn.Module):
    """SATNet over a board's C*K digit indicators, with an optional proofreader in front.

    zero_input_outputs=True is the ungrounded model (ours); False the original SATNet.
    output_softmax applies a per-cell softmax to SATNet's outputs (the authors do this in the
    self-grounded phase). `values`: a cell's variables, the K digits unless the self-grounded
    phase speaks K' > K clusters (surjective grounding, ours); `n_digits` is that count.
    """

    def __init__(self, board_size: int, m: int, aux: int, max_iter: int = 40,
                 zero_input_outputs: bool = True, output_softmax: bool = False,
                 proofreader: bool = False, backend: str = "auto", eps: float = 1e-4,
                 backward_sweeps: int | None = None, k: int = 32, values: int | None = None):
        super().__init__()
        self.board_size = board_size
        self.n_digits = board_size ** 2 if values is None else values
        self.n_cells = board_size ** 4
        self.output_softmax = output_softmax
        self.satnet = SATNet(self.n_cells * self.n_digits, m, aux, max_iter=max_iter, eps=eps,
                             zero_input_outputs=zero_input_outputs, backend=backend,
                             backward_sweeps=backward_sweeps, k=k)
        self.proofreader = Proofreader(self.n_cells, self.n_digits) if proofreader else None

    def add_proofreader(self) -> Proofreader:
        device = self.satnet.S.device
        self.proofreader = Proofreader(self.n_cells, self.n_digits).to(device)
        return self.proofreader

    def forward(self, z_in: torch.Tensor, is_input: torch.Tensor) -> torch.Tensor:
        """z_in (B, C*K) probabilities (read at given cells only), is_input (B, C) -> (B, C*K)."""
        var_input = var_mask(is_input, self.n_digits)
        z = z_in * var_input
        if self.proofreader is not None:
            z = self.proofreader(z) * var_input
        out = self.satnet(z.contiguous(), var_input)
        if self.output_softmax:
            out = cell_softmax(out, self.n_digits)
        if self.satnet.zero_input_outputs or self.output_softmax:
            # Appendix B: input-cell predictions are the classifier's, not SATNet's
            out = torch.where(var_input, z, out)
        return out


class VisualSolver(nn.Module):
    """Digit classifier on the given-cell images feeding a SymbolicSolver.

    forward(images, is_input): images, uint8 (M, 28, 28) or float (M, 1, 28, 28) in [0, 1], are
    the given cells of the batch in row-major order of is_input (B, C); blanks have no image.
    """

    def __init__(self, classifier: nn.Module, solver: SymbolicSolver):
        super().__init__()
        self.classifier = classifier
        self.solver = solver

    def input_probs(self, images: torch.Tensor, is_input: torch.Tensor) -> torch.Tensor:
        """(B, C*K): classifier probabilities at given cells, 0 elsewhere."""
        B, C = is_input.shape
        K = self.solver.n_digits
        probs = F.softmax(self.classifier(image_batch(images)), dim=1)
        if probs.shape != (int(is_input.sum()), K):
            raise ValueError(f"classifier gave {tuple(probs.shape)} for {int(is_input.sum())} "
                             f"given cells of {K} digits")
        board = probs.new_zeros(B, C, K)
        board[is_input.bool()] = probs
        return board.reshape(B, C * K)

    def forward(self, images: torch.Tensor, is_input: torch.Tensor) -> torch.Tensor:
        return self.solver(self.input_probs(images, is_input), is_input)


def add_trainable_proofreader(model: nn.Module) -> Proofreader:
    """Freeze `model` (visual or symbolic) and give its solver a fresh proofreader to train."""
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    solver = model.solver if isinstance(model, VisualSolver) else model
    return solver.add_proofreader()


def solver_config(solver: SymbolicSolver) -> dict:
    sat = solver.satnet
    config = {"board_size": solver.board_size, "m": sat.m, "aux": sat.aux, "k": sat.k,
              "max_iter": sat.max_iter, "eps": sat.eps,
              "zero_input_outputs": sat.zero_input_outputs, "output_softmax": solver.output_softmax,
              "proofreader": solver.proofreader is not None}
    if solver.n_digits != solver.board_size ** 2:  # a cluster-valued SATNet (surjective grounding)
        config["values"] = solver.n_digits
    return config


def checkpoint(model: nn.Module, folded: torch.Tensor | None = None) -> dict:
    """What a solver artifact holds: enough to rebuild the model without params.yaml. With
    `folded` (long (K',)), the cluster -> digit map folded into a visual solver's classifier:
    train's, which evaluate checks against the test truth (folded_permutation)."""
    if isinstance(model, VisualSolver):
        saved = {"kind": "visual", "config": solver_config(model.solver),
                 "solver": model.solver.state_dict(), "classifier": model.classifier.state_dict(),
                 "n_classes": model.classifier.n_classes}
        if reader_config(model.classifier) is not None:  # a CNN ensemble; LeNet otherwise
            saved["reader"] = reader_config(model.classifier)
        if folded is not None:
            saved["folded_permutation"] = folded.tolist()
        return saved
    return {"kind": "symbolic", "config": solver_config(model), "solver": model.state_dict()}


def solver_from_params(board_size: int, sat, **options) -> SymbolicSolver:
    """A fresh SymbolicSolver sized and run as the `satnet` params section says (m, aux, k,
    max_iter, eps, backward_sweeps); `options`: zero_input_outputs, output_softmax, values."""
    return SymbolicSolver(board_size, sat.m, sat.aux, sat.max_iter, eps=sat.eps,
                          backward_sweeps=sat.backward_sweeps, k=sat.k, **options)


def load_solver(path, backend: str = "auto", boards=None, kind: str | None = None,
                solve_sweeps: int | None = None, backward_sweeps: int | None = None) -> nn.Module:
    """Rebuild a VisualSolver or SymbolicSolver saved with `checkpoint`; checked against the
    `boards` it will be used with (same board size) and the `kind` a stage needs. With
    `solve_sweeps` (satnet.solve_sweeps) its SATNet runs exactly that many sweeps a solve in eval
    mode; its checkpoint keeps the training's stopping rule. `backward_sweeps`
    (satnet.backward_sweeps): the most sweeps of a backward through it, for a stage that trains."""
    saved = load_torch(path, "solver model")
    if not isinstance(saved, dict) or saved.get("kind") not in ("visual", "symbolic"):
        raise PipelineError(f"{path}: not a solver model file (expected kind visual/symbolic)")
    if kind is not None and saved["kind"] != kind:
        raise PipelineError(f"{path}: a {saved['kind']} solver, but this stage needs a {kind} one")
    size = saved.get("config", {}).get("board_size") if isinstance(saved.get("config"), dict) else None
    if boards is not None and size != boards.board_size:
        have = f"{size ** 2}x{size ** 2}" if isinstance(size, int) else repr(size)
        raise PipelineError(f"{path}: a solver of {have} boards, but the boards are "
                            f"{boards.n_digits}x{boards.n_digits}")
    _check_config(saved, path)
    try:
        solver = SymbolicSolver(**saved["config"], backend=backend)
        solver.load_state_dict(saved["solver"])
        check_finite_weights(solver, path, "solver model")
        solver.satnet.solve_sweeps = solve_sweeps
        solver.satnet.backward_sweeps = backward_sweeps
        if saved["kind"] == "symbolic":
            return solver
        classifier = build_classifier(saved["n_classes"], saved.get("reader"))
        classifier.load_state_dict(saved["classifier"])
        check_finite_weights(classifier, path, "solver model's classifier")
    except (KeyError, TypeError, RuntimeError) as exc:
        raise PipelineError(f"{path}: solver model does not load ({str(exc).splitlines()[0]})") from None
    return VisualSolver(classifier, solver)


def folded_permutation(path, n_clusters: int, n_digits: int) -> torch.Tensor | None:
    """The cluster -> digit map (long (n_clusters,)) that `checkpoint` recorded as folded into the
    solver file's classifier, or None where it records none (a re-read reader, or a file written
    before train recorded it); a malformed entry is a one-line error naming the file."""
    saved = load_torch(path, "solver model")
    folded = saved.get("folded_permutation") if isinstance(saved, dict) else None
    if folded is None:
        return None
    return checked_map(path, "folded_permutation", folded, n_clusters, n_digits)  # as the ground stage's file


# a solver checkpoint's config entries: (type, test of the value, what it must be)
_CONFIG = {"board_size": (int, lambda v: v in (2, 3), "2 or 3"), "m": (int, lambda v: v >= 1, ">= 1"),
           "aux": (int, lambda v: v >= 0, ">= 0"), "k": (int, lambda v: v >= 2, ">= 2"),
           "max_iter": (int, lambda v: v >= 1, ">= 1"),
           "eps": (float, lambda v: 0 <= v <= 0.5, "in [0, 0.5]"),  # satnet.eps's bounds
           "zero_input_outputs": (bool, None, ""), "output_softmax": (bool, None, ""),
           "proofreader": (bool, None, ""), "values": (int, lambda v: 2 <= v <= 100, "in [2, 100]")}


def _check_config(saved: dict, path) -> None:
    """The checkpoint's config (and a visual one's n_classes) of the right types and ranges."""
    config = saved.get("config")
    if not isinstance(config, dict) or set(config) - set(_CONFIG) or not {"board_size", "m", "aux"} <= set(config):
        raise PipelineError(f"{path}: solver config must hold board_size, m, aux (and only "
                            f"{', '.join(_CONFIG)}), got {config!r}")
    for key, value in config.items():
        kind, ok, what = _CONFIG[key]
        if type(value) is not kind or (ok is not None and not ok(value)):
            raise PipelineError(f"{path}: solver config '{key}' must be {kind.__name__}"
                                f"{' ' + what if what else ''}, got {value!r}")
    values = config.get("values", config["board_size"] ** 2)
    if values < config["board_size"] ** 2:
        raise PipelineError(f"{path}: solver config 'values' must be at least the "
                            f"{config['board_size'] ** 2} digits, got {values}")
    if saved["kind"] == "visual" and saved.get("n_classes") != values:
        raise PipelineError(f"{path}: 'n_classes' must be {values} for "
                            f"{config['board_size'] ** 2}x{config['board_size'] ** 2} boards"
                            f"{'' if 'values' not in config else ' of that many values a cell'}, got "
                            f"{saved.get('n_classes')!r}")
