"""Batches, the BCE loss and the epoch loops shared by the ground/train/proofread/baseline stages.

A model is either a VisualSolver (given-cell images in) or a SymbolicSolver (given digits in,
the non-visual baseline). Batches are cut from a `Boards` (satground.boards.data); what a loop can see
is exactly what that Boards holds: the ungrounded view has no input-cell labels at all.
"""
from __future__ import annotations

import copy
import math
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from ..boards.data import Boards, onehot, var_mask
from ..readers.digitcnn import DigitReader
from .grounding import relabel
from ..harness.io import PipelineError
from ..readers.lenet import outputs
from ..boards.metrics import output_metrics, solution_metrics
from .models import SymbolicSolver, VisualSolver, solver_from_params
from ..harness.resume import Resumable, ResumeOptions
from ..satnet.layer import SATNet, NonFiniteError


def loss_cells(batch, on_inputs: bool = False) -> torch.Tensor:
    """Cells (B, C) the loss sees: labelled output cells, plus given cells when on_inputs (the
    original SATNet on grounded data: labels leak to the classifier through them)."""
    cells = batch.labels > 0
    if not on_inputs:
        cells &= ~batch.is_input
    return cells


def cells_bce(pred: torch.Tensor, batch, cells: torch.Tensor) -> torch.Tensor:
    """BCE of `pred` against the batch's one-hot targets over every variable of `cells` (B, C)."""
    mask = var_mask(cells, pred.shape[1] // cells.shape[1])
    return F.binary_cross_entropy(pred[mask], batch.target[mask])


def bce_loss(on_inputs: bool = False) -> Callable:
    """loss_fn(pred, batch) of satground.solver.training's loop: BCE over loss_cells."""
    def loss_fn(pred: torch.Tensor, batch) -> torch.Tensor:
        return cells_bce(pred, batch, loss_cells(batch, on_inputs))
    return loss_fn


def random_share(cells: torch.Tensor, share: float, generator: torch.Generator) -> torch.Tensor:
    """A random `share` of `cells` (bool (B, C)), drawn on the CPU from `generator`."""
    return cells & (torch.rand(cells.shape, generator=generator).to(cells.device) < share)


@dataclass
class Batch:
    images: torch.Tensor     # uint8 (M, 28, 28): the given cells' images, row-major
    is_input: torch.Tensor   # bool (B, C)
    labels: torch.Tensor     # long (B, C): digit 1..K, 0 where the view has no label
    target: torch.Tensor     # float (B, C*K): one-hot labels, all-zero blocks where 0
    symbols: torch.Tensor    # float (B, C*K): one-hot labels at given cells (non-visual input)


def make_batch(boards: Boards, idx: torch.Tensor, device: torch.device) -> Batch:
    is_input = boards.is_input[idx]
    labels = boards.labels[idx].long()
    cell_image = boards.cell_image[idx]
    images = boards.images[cell_image[is_input]]
    target = onehot(labels, boards.n_digits)
    symbols = target * var_mask(is_input, boards.n_digits)
    return Batch(images.to(device), is_input.to(device), labels.to(device), target.to(device),
                 symbols.to(device))


def run_model(model: nn.Module, batch: Batch) -> torch.Tensor:
    """(B, C*K) board probabilities: images in for a visual model, given digits otherwise."""
    if isinstance(model, HintedSolver):
        return model(batch)
    if isinstance(model, VisualSolver):
        return model(batch.images, batch.is_input)
    return model(batch.symbols, batch.is_input)


def batch_indices(n: int, batch_size: int, generator: torch.Generator | None = None):
    """Index tensors covering range(n): shuffled with `generator`, in order without one."""
    order = torch.randperm(n, generator=generator) if generator is not None else torch.arange(n)
    return [order[start:start + batch_size] for start in range(0, n, batch_size)]


def train_epoch(model: nn.Module, boards: Boards, optimizer: torch.optim.Optimizer,
                loss_fn: Callable, batch_size: int, device: torch.device,
                generator: torch.Generator, desc: str = "train",
                scheduler: torch.optim.lr_scheduler.LRScheduler | None = None) -> float:
    """One pass over shuffled boards; returns the mean loss per board. A `scheduler` steps
    after every batch.

    A non-finite loss, gradient or SATNet forward stops it with a one-line PipelineError naming
    `desc` and the batch, raised before optimizer.step(): the model is never updated with NaN.
    """
    model.train()
    total, seen = 0.0, 0
    batches = batch_indices(len(boards), batch_size, generator)
    parameters = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    for i, idx in enumerate(tqdm(batches, desc=desc, leave=False, disable=len(batches) < 5)):
        where = f"at batch {i + 1} of {len(batches)}; stopping before the model is updated"
        batch = make_batch(boards, idx, device)
        try:
            loss = loss_fn(run_model(model, batch), batch)
        except NonFiniteError as exc:
            raise PipelineError(f"{desc}: {exc} {where}") from exc
        value = loss.item()
        if not np.isfinite(value):
            raise PipelineError(f"{desc}: loss is not finite ({value}) {where}")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grads = [(name, p.grad) for name, p in parameters if p.grad is not None]
        # one device sync for all parameters; names are looked up only on failure
        if grads and not torch.stack([g.isfinite().all() for _, g in grads]).all():
            name = next(name for name, g in grads if not g.isfinite().all())
            raise PipelineError(f"{desc}: gradient of {name} is not finite {where}")
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        total += value * len(idx)
        seen += len(idx)
    return total / max(seen, 1)


@torch.no_grad()
def predict(model: nn.Module, boards: Boards, batch_size: int, device: torch.device,
            desc: str = "predict") -> torch.Tensor:
    """Board probabilities (N, C*K) on the CPU, boards in order."""
    model.eval()
    out = []
    batches = batch_indices(len(boards), batch_size)
    for idx in tqdm(batches, desc=desc, leave=False, disable=len(batches) < 5):
        out.append(run_model(model, make_batch(boards, idx, device)).float().cpu())
    return torch.cat(out)


def predicted_digits(probs: torch.Tensor, n_digits: int, perm: torch.Tensor | None = None,
                     summed: bool = False):
    """(N, C) digits 1..K by per-cell arg max; `perm` first relabels clusters to digits (a digit
    scores the mean of its clusters' entries, or their sum for a classifier's probabilities)."""
    if perm is not None:
        probs = relabel(probs, perm, n_digits, summed)
    return probs.reshape(probs.shape[0], -1, n_digits).argmax(dim=2) + 1


def split_boards(boards: Boards, val_fraction: float, generator: torch.Generator):
    """(train, val) Boards sharing the image pool; val gets round(val_fraction * N) boards."""
    n = len(boards)
    n_val = int(round(val_fraction * n))
    if n_val < 1 or n_val >= n:
        raise ValueError(f"val_fraction {val_fraction} leaves no train or no val boards of {n}")
    order = torch.randperm(n, generator=generator)
    return subset(boards, order[n_val:]), subset(boards, order[:n_val])


def subset(boards: Boards, idx: torch.Tensor) -> Boards:
    return Boards(board_size=boards.board_size, images=boards.images,
                  cell_image=boards.cell_image[idx], is_input=boards.is_input[idx],
                  labels=boards.labels[idx])


def grounding_epoch_metrics(model: nn.Module, val: Boards, perm: torch.Tensor, batch_size: int,
                            device: torch.device) -> dict[str, float]:
    """Output-cell scores of the self-grounded model through a cluster -> digit mapping."""
    probs = predict(model, val, batch_size, device, desc="val")
    return output_metrics(predicted_digits(probs, val.n_digits, perm), val)


def evaluate_outputs(model: nn.Module, boards: Boards, batch_size: int, device: torch.device,
                     desc: str = "dev") -> dict[str, float]:
    """output_metrics of the model's arg max predictions on `boards`."""
    probs = predict(model, boards, batch_size, device, desc=desc)
    return output_metrics(predicted_digits(probs, boards.n_digits), boards)


def dev_scores(model: nn.Module, dev: Boards, batch_size: int, device: torch.device) -> dict[str, float]:
    """evaluate_outputs on the dev boards, named dev_<metric> as the training curves log them."""
    return {f"dev_{k}": v for k, v in evaluate_outputs(model, dev, batch_size, device, "dev").items()}


def solution_digits(model: nn.Module, boards: Boards, batch_size: int, device: torch.device,
                    perm: torch.Tensor | None = None, output_perm: torch.Tensor | None = None) -> torch.Tensor:
    """The model's digit (1..K) in every cell, long (N, C). A model that speaks clusters (the
    grounding phase's) is read through `perm` at given cells and `output_perm` at the others
    (perm everywhere when output_perm is None). A visual model's classifier reads each pool image
    once (readings_once), not each given cell that shows it."""
    visual = isinstance(model, VisualSolver)
    with readings_once(model, boards) if visual else nullcontext((boards,)) as (boards,):
        probs = predict(model, boards, batch_size, device)
    given = predicted_digits(probs, boards.n_digits, perm, summed=True)  # the classifier's probabilities
    outputs = predicted_digits(probs, boards.n_digits, perm if output_perm is None else output_perm)
    return torch.where(boards.is_input, given, outputs)


def solution_scores(model: nn.Module, boards: Boards, solution: torch.Tensor, batch_size: int,
                    device: torch.device, perm: torch.Tensor | None = None,
                    output_perm: torch.Tensor | None = None) -> dict[str, float]:
    """metrics.board_metrics of the model's predictions (solution_digits) against the true full
    solutions (N, C): for final test scores (evaluate, the baselines at their end), never for
    training."""
    return solution_metrics(solution_digits(model, boards, batch_size, device, perm, output_perm),
                            solution, boards)


class EarlyStopping:
    """The rule that ends a loop early: stop after `patience` epochs whose `metric` (higher is
    better) does not beat the best one, or once `done()` says so. Keeps the best epoch's row,
    `module`'s weights and whatever `keep()` returns then; `restore()` puts those weights back."""

    def __init__(self, metric: str, patience: int, module: nn.Module, keep: Callable[[], dict] = dict,
                 warmup: int = 0, done: Callable[[], bool] = lambda: False):
        self.metric, self.patience, self.module, self.keep, self.done = metric, patience, module, keep, done
        self.warmup = warmup  # epochs that may be the best but never count towards patience
        self.best: dict | None = None
        self.waited = self.last_epoch = 0

    def step(self, epoch: int, row: dict) -> None:
        self.last_epoch = epoch
        if self.best is None or row[self.metric] > self.best["row"][self.metric]:
            self.best = {"epoch": epoch, "row": row, "state": copy.deepcopy(self.module.state_dict()),
                         **self.keep()}
            self.waited = 0
        elif epoch > self.warmup:
            self.waited += 1

    @property
    def stopped(self) -> bool:
        return self.waited >= self.patience or self.done()

    def restore(self) -> dict:
        self.module.load_state_dict(self.best["state"])
        return self.best

    def state_dict(self) -> dict:
        return {"best": self.best, "waited": self.waited, "last_epoch": self.last_epoch}

    def load_state_dict(self, state: dict) -> None:
        self.best, self.waited, self.last_epoch = state["best"], state["waited"], state["last_epoch"]


def fit(model: nn.Module, train: Boards, dev: Boards, optimizer: torch.optim.Optimizer,
        loss_fn: Callable, epochs: int, batch_size: int, device: torch.device,
        generator: torch.Generator, report=None, desc: str = "epoch", prefix: str = "",
        resume: ResumeOptions = ResumeOptions(), evaluate: Callable[[], dict] | None = None,
        stopping: EarlyStopping | None = None, decay_epochs: int = 0) -> dict[str, float]:
    """The training loop of every SATNet stage: up to `epochs` passes over `train`, each scored
    by `evaluate()` (default: the dev boards' blank cells, so no input-cell label is read),
    ending early where `stopping` says. Logs each epoch's row as {prefix}<name> curves to `report`
    (a tracking.StageReport); returns the last row. With a `resume` folder, a run killed mid-way
    continues after its last finished epoch (satground.harness.resume; `desc` names the file).
    Over the last `decay_epochs` epochs every learning rate falls linearly to 0, batch by batch
    (`linear_decay`). Each row also holds `sweeps`: the mean forward sweeps a board took in the epoch's training (of
    satnet.max_iter; the backward runs as many)."""
    if evaluate is None:
        def evaluate():
            return dev_scores(model, dev, batch_size, device)
    scheduler, carry = None, resume.carry
    if decay_epochs:
        scheduler = linear_decay(optimizer, epochs, decay_epochs, math.ceil(len(train) / batch_size))
        carry = (*carry, scheduler)
    resumable = Resumable(resume.folder, desc, model, optimizer, generator, train, epochs, batch_size,
                          decay_epochs, *resume.identity,
                          None if stopping is None else (stopping.metric, stopping.patience))
    done, state = resumable.restore()
    history = state["history"] if state else []
    if state and stopping is not None:
        stopping.load_state_dict(state["stopping"])
    for obj, saved in zip(carry, state["carry"] if state else []):
        obj.load_state_dict(saved)
    for epoch, row in enumerate(history, start=1):  # the curves of the epochs already run
        if report is not None:
            report.log_epoch(epoch, row, prefix)
    epoch = done
    while epoch < epochs and not (stopping is not None and stopping.stopped):
        epoch += 1
        counts = [layer.sweep_count for layer in model.modules() if isinstance(layer, SATNet)]
        for count in counts:
            count.reset()
        loss = train_epoch(model, train, optimizer, loss_fn, batch_size, device, generator,
                           desc=f"{desc} epoch {epoch}", scheduler=scheduler)
        row = {"loss": loss}
        samples = sum(count.samples for count in counts)
        if samples:
            row["sweeps"] = sum(count.sweeps for count in counts) / samples
        history.append({**row, **evaluate()})
        if report is not None:
            report.log_epoch(epoch, history[-1], prefix)
        if stopping is not None:
            stopping.step(epoch, history[-1])
        resumable.save(epoch, {"history": history, "carry": [obj.state_dict() for obj in carry],
                               "stopping": None if stopping is None else stopping.state_dict()})
        shown = ", ".join(f"{k} {v:.3f}" for k, v in history[-1].items() if isinstance(v, float))
        tqdm.write(f"{desc} {epoch}/{epochs}: {shown}")
    resumable.finish()
    return history[-1] if history else {}


# ---------------------------------------------------------------------------------------------
# SATNet learning the rules before it meets an image (ours, `train.rules_epochs`)


def known_cells(boards: Boards, shown: float | None = None,
                generator: torch.Generator | None = None) -> Boards:
    """`boards` with no image: every labelled blank cell is known (an input, its label kept), the
    givens are free cells with neither image nor label. With `shown`, a fixed random share of
    the known cells stays input and the rest become the cells to infer (a dev view)."""
    known = boards.labels > 0
    if boards.is_input[known].any():
        raise ValueError("known_cells needs the ungrounded view: a given cell holds a label")
    is_input = known if shown is None else random_share(known, shown, generator)
    return Boards(board_size=boards.board_size, images=boards.images[:1],
                  cell_image=torch.full_like(boards.cell_image, -1), is_input=is_input,
                  labels=boards.labels)


class RulesLearner(nn.Module):
    """A SymbolicSolver learning the rules from the training boards' blank cells alone. In
    training, each board shows SATNet a fresh random `shown` share of its known cells
    (known_cells) and SATNet infers the others; in eval mode it sees exactly the inputs given.

    forward(symbols (B, C*K), known (B, C)) -> (B, C*K); `self.shown` (B, C): the last inputs."""

    def __init__(self, solver: nn.Module, shown: float, generator: torch.Generator):
        super().__init__()
        self.solver, self.share, self.generator = solver, shown, generator
        self.shown: torch.Tensor | None = None

    def forward(self, symbols: torch.Tensor, known: torch.Tensor) -> torch.Tensor:
        shown = random_share(known, self.share, self.generator) if self.training else known
        self.shown = shown
        return self.solver(symbols, shown)


def rules_loss(learner: RulesLearner) -> Callable:
    """BCE over the known cells the learner's last forward hid from SATNet."""
    def loss_fn(pred: torch.Tensor, batch) -> torch.Tensor:
        return cells_bce(pred, batch, batch.is_input & ~learner.shown)
    return loss_fn


def learn_rules(solver: nn.Module, train: Boards, dev: Boards, epochs: int, shown: float, lr: float,
                batch_size: int, device: torch.device, generator: torch.Generator, report=None,
                resume: ResumeOptions = ResumeOptions()) -> dict[str, float]:
    """SATNet (a SymbolicSolver) learns the rules from the training boards' blank-cell labels
    before it sees a given's image (ours, `train.rules_epochs`): each board shows a random
    `shown` share of its ~45 labelled cells, SATNet infers the rest (RulesLearner), Adam at a
    constant `lr`. Dev boards are scored the same way on one fixed draw: `dev_blank_cells` are
    their hidden labelled cells. No given's label or image is read. Curves are logged as
    rules_<name>; returns the last row. A run killed in a later loop replays these epochs."""
    dev_view = known_cells(dev, shown, generator)
    learner = RulesLearner(solver, shown, generator).to(device)
    optimizer = torch.optim.Adam(solver.parameters(), lr=lr)
    return fit(learner, known_cells(train), dev_view, optimizer, rules_loss(learner), epochs,
               batch_size, device, generator, report, desc="rules", prefix="rules_", resume=resume)


# ---------------------------------------------------------------------------------------------
# end-to-end epochs with hints from the blank cells' labels (ours, `train.hints`)


class HintedSolver(nn.Module):
    """A VisualSolver in training with hints: each board also shows SATNet a random share of
    its labelled blank cells as inputs, beside the classifier's readings of its givens, and
    SATNet learns from the blank cells left hidden (hinted_loss). The share falls linearly from
    `share` to 0 over the first `batches` training batches (a step counter kept in the state, so
    a resumed run goes on where it stopped). In eval mode there is no hint: the model as at test
    time.

    forward(batch) -> (B, C*K); `self.hint` (B, C): the last batch's hinted cells."""

    def __init__(self, model: VisualSolver, share: float, batches: int, generator: torch.Generator):
        super().__init__()
        self.model, self.share, self.batches, self.generator = model, share, max(batches, 1), generator
        self.register_buffer("done", torch.zeros((), dtype=torch.long))
        self.hint: torch.Tensor | None = None

    def current_share(self) -> float:
        return self.share * max(0.0, 1.0 - self.done.item() / self.batches)

    def forward(self, batch: Batch) -> torch.Tensor:
        hint = torch.zeros_like(batch.is_input)
        if self.training:
            hint = random_share(loss_cells(batch), self.current_share(), self.generator)
            self.done += 1
        self.hint = hint
        solver = self.model.solver
        z = self.model.input_probs(batch.images, batch.is_input)
        z = z + batch.target * var_mask(hint, solver.n_digits)
        return solver(z, batch.is_input | hint)


def hinted_loss(hinted: HintedSolver) -> Callable:
    """BCE over the labelled blank cells the last batch did not hint."""
    def loss_fn(pred: torch.Tensor, batch) -> torch.Tensor:
        return cells_bce(pred, batch, loss_cells(batch) & ~hinted.hint)
    return loss_fn


def linear_decay(optimizer: torch.optim.Optimizer, epochs: int, decay_epochs: int,
                 batches_per_epoch: int) -> torch.optim.lr_scheduler.LambdaLR:
    """Every learning rate held, then falling linearly over the last `decay_epochs` epochs: the
    k-th batch from the end trains at k / (its decay batches) of the rate."""
    total, decay = epochs * batches_per_epoch, decay_epochs * batches_per_epoch
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda done: min(1.0, (total - done) / decay))


@contextmanager
def readings_once(model: VisualSolver, *boards: Boards):
    """A frozen classifier read once per pool image instead of once per batch: yields `boards`
    with each image replaced by the classifier's log-probabilities (P, K) while `model` reads
    them through an identity; the classifier is back in place on exit."""
    classifier = model.classifier
    classifier.eval()
    read = [replace(b, images=F.log_softmax(outputs(classifier, b.images), 1)) for b in boards]
    model.classifier = nn.Identity()
    try:
        yield read
    finally:
        model.classifier = classifier


@contextmanager
def features_once(model: VisualSolver, *boards: Boards):
    """A CNN-ensemble classifier (DigitReader) whose nets' bodies stay fixed: yields `boards` with
    each image replaced by the bodies' features, read once, while `model` reads them through the
    nets' heads alone (shared with the reader); the reader is back in place on exit."""
    reader = model.classifier
    reader.eval()
    read = [replace(b, images=reader.features(b.images)) for b in boards]
    model.classifier = reader.heads()
    try:
        yield read
    finally:
        model.classifier = reader


def train_behind(reader: nn.Module, train: Boards, dev: Boards, sat, epochs: int, batch_size: int,
                 decay_epochs: int, device: torch.device, generator: torch.Generator, report=None,
                 desc: str = "train", prefix: str = "", solver: SymbolicSolver | None = None,
                 givens: tuple[torch.Tensor, torch.Tensor] | None = None) -> VisualSolver:
    """A fresh SATNet (the `satnet` params section `sat`), or `solver` trained on, trained end to
    end behind `reader`, frozen and read once (train's path at `train.classifier_lr` 0): BCE on
    the blank cells, Adam at sat.lr, the last `decay_epochs` epochs decaying. `givens`
    (image indices (G,), labels (G,)) replaces the reader's reading of those training images by
    the labels, certain; the dev boards stay the reader's. Returns the model in eval mode, its
    SATNet solving at sat.solve_sweeps as a loaded one does."""
    if solver is None:
        solver = solver_from_params(train.board_size, sat, zero_input_outputs=True)
    else:  # trained on: its dev curves scored as train's are, by the stopping rule
        solver.requires_grad_(True)
        solver.satnet.solve_sweeps = None
    model = VisualSolver(reader, solver).to(device)
    freeze(reader)
    optimizer = torch.optim.Adam(solver.parameters(), lr=sat.lr)
    with readings_once(model, train, dev) as (train_in, dev_in):
        if givens is not None:
            train_in = replace(train_in, images=as_labels(train_in.images, *givens))
        fit(model, train_in, dev_in, optimizer, bce_loss(on_inputs=False), epochs, batch_size, device,
            generator, report, desc=desc, prefix=prefix, decay_epochs=decay_epochs)
    solver.satnet.solve_sweeps = sat.solve_sweeps
    return model.eval()


def as_labels(readings: torch.Tensor, indices: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """`readings` (P, K log-probabilities) with rows `indices` one-hot at `labels`; the log of 0
    is clamped to a finite floor so no -inf meets a product."""
    read = readings.clone()
    read[indices] = torch.log(F.one_hot(labels, readings.shape[1]).to(readings.dtype).clamp_min(1e-6))
    return read


def freeze(module: nn.Module) -> None:
    for parameter in module.parameters():
        parameter.requires_grad_(False)


def tune_classifier(model: VisualSolver, train: Boards, dev: Boards, epochs: int, lr: float,
                    batch_size: int, device: torch.device, generator: torch.Generator, report=None,
                    resume: ResumeOptions = ResumeOptions()) -> dict[str, float]:
    """The classifier alone learns end to end through the frozen SATNet (ours, `train.tune_epochs`):
    the loss of training (BCE on the blank cells, no given's label), Adam at a constant `lr`.
    LeNet learns whole, every image read each batch; a CNN ensemble (distill.classifier:
    clusterer) learns its nets' output layers on features read once (features_once: the whole
    nets cost several times LeNet a batch). Curves are logged as tune_<name>; returns the last row.
    SATNet's S gets no gradient (the layer skips its GEMM). A run killed here replays the
    end-to-end epochs before it (their resume file is gone), then resumes these."""
    freeze(model.solver)
    ensemble = isinstance(model.classifier, DigitReader)
    with features_once(model, train, dev) if ensemble else nullcontext((train, dev)) as (train, dev):
        model.classifier.requires_grad_(True)
        optimizer = torch.optim.Adam(model.classifier.parameters(), lr=lr)
        return fit(model, train, dev, optimizer, bce_loss(on_inputs=False), epochs, batch_size,
                   device, generator, report, desc="tune", prefix="tune_", resume=resume)
