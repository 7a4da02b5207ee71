"""Re-reading the givens after end-to-end training (ours, beyond the paper).

After `train`, SATNet has learned the rules and the classifier reads nearly every *training*
image right (it has fitted them), yet it reads unseen test images about a point worse: a
LeNet fitted to a few thousand images generalises no further. Two steps close much of that gap
without any input label:

1. SATNet's votes. Each pass releases a random share of every training board's givens (they
   become blank cells) and lets SATNet infer them from the givens it still sees, read by the
   classifier (`reread.context: givens`, as at test time), or from those and the board's blank
   cells as their training labels (`solution`: the targets `train` learned from, never a
   given's label; with 45 cells known, one pass can release every given). A pool image appears
   in many boards, so it collects several such inferences, each from a different context and
   none from its own pixels. Its pseudo-label is the arg max of the summed log-probabilities of
   those votes and the classifier's own reading.
2. A new reader trained on the pseudo-labels of the training images under random affine
   augmentation: an ensemble of small CNNs on deskewed images (`cnn`), or the paper's LeNet
   retrained from scratch (`lenet`), then put in the classifier's place in front of SATNet.

At test time SATNet also checks the readings of a board's own givens: satground.solver.check.

Nothing here reads an input label or the Sudoku rules: the rules come from the trained SATNet.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..readers import lenet
from ..boards.data import Boards
from ..boards.metrics import confusion_matrix
from ..readers.digitcnn import DigitReader, deskew, train_digit_cnns
from .check import log_inference
from .grounding import hard_permutation
from .models import VisualSolver


CONTEXTS = ("givens", "solution")


@torch.no_grad()
def satnet_votes(model: VisualSolver, boards: Boards, release: float, passes: int,
                 batch_size: int, generator: torch.Generator, context: str = "givens",
                 voters: torch.Tensor | None = None):
    """SATNet's inferences of released givens, summed per pool image. `context`: what SATNet
    sees besides the readings of the givens not released: nothing (`givens`) or the blank cells'
    labels of the ungrounded boards (`solution`). `voters` (bool (N, C)): the given cells whose
    inferences count, every given by default (the reuse study counts fewer an image; every
    given is released as often either way).

    Returns (votes float (P, K): summed log-probabilities, counts float (P,): votes per image,
    reading float (P, K): the classifier's probabilities of every pool image)."""
    if context not in CONTEXTS:
        raise ValueError(f"context must be one of {CONTEXTS}, got {context!r}")
    model.eval()
    K, C = boards.n_digits, boards.n_cells
    device = next(model.solver.parameters()).device
    reading = F.softmax(lenet.outputs(model.classifier, boards.images), dim=1)
    votes = torch.zeros(len(boards.images), K)
    counts = torch.zeros(len(boards.images))
    for _ in range(passes):
        released = (torch.rand(boards.is_input.shape, generator=generator) < release) & boards.is_input
        for start in range(0, len(boards), batch_size):
            rows = slice(start, start + batch_size)
            cell_image, is_input, out = boards.cell_image[rows], boards.is_input[rows], released[rows]
            seen = is_input & ~out  # a released given is a blank cell to SATNet: no reading of it
            z = torch.zeros(len(cell_image), C, K)
            z[seen] = reading[cell_image[seen]]
            if context == "solution":  # the blanks' training labels (1..K), as one-hot inputs;
                # read at blank cells only, so boards that hold the givens' labels leak none
                blank = ~is_input
                z[blank] = F.one_hot(boards.labels[rows][blank].long() - 1, K).float()
                seen = seen | blank
            probs = model.solver(z.reshape(len(z), -1).to(device), seen.to(device)).cpu()
            if voters is not None:
                out = out & voters[rows]
            shown = cell_image[out]
            votes.index_add_(0, shown, log_inference(probs.reshape(len(z), C, K)[out]))
            counts.index_add_(0, shown, torch.ones(len(shown)))
    return votes, counts, reading


def reground(classifier: nn.Module, solver: nn.Module, train: Boards, perm: torch.Tensor,
             batch_size: int) -> tuple[torch.Tensor, dict]:
    """A second grounding through the SATNet the rules epochs taught (ours, `train.reground`):
    SATNet infers every given of the training boards from their blank cells' labels alone
    (satnet_votes, context `solution`, every given released), each pool image takes the
    digit its summed votes name, and the map of the classifier's clusters (`classifier` not yet
    folded) onto those digits replaces `perm`, the ground stage's: the best one-to-one matching
    of their co-occurrence counts (with more clusters than digits the best onto map).
    Rule free and label free: the rules are SATNet's, learnt from the blank labels, and no
    given's label is read. Returns (the new perm, a report: both maps, the share of voted
    images on which each agrees with SATNet, the co-occurrence counts)."""
    release_all = torch.Generator().manual_seed(0)  # every given released: the draws decide nothing
    votes, counts, reading = satnet_votes(VisualSolver(classifier, solver), train, 1.0, 1, batch_size,
                                          release_all, context="solution")
    voted = counts > 0
    clusters, inferred = reading[voted].argmax(dim=1), votes[voted].argmax(dim=1)
    cooccurrence = confusion_matrix(clusters.numpy(), inferred.numpy(), len(perm), train.n_digits)
    new = hard_permutation(torch.from_numpy(cooccurrence), "hungarian")

    def agreement(p):
        return round(float((p[clusters] == inferred).float().mean()), 6)
    return new, {"permutation": new.tolist(), "ground_permutation": perm.tolist(),
                 "agrees_with_ground": bool(torch.equal(new, perm)),
                 "images_voted": int(voted.sum()), "agreement": agreement(new),
                 "ground_agreement": agreement(perm), "cooccurrence": cooccurrence.tolist()}


def pseudo_labels(votes: torch.Tensor, reading: torch.Tensor) -> torch.Tensor:
    """Arg max of SATNet's summed log-votes plus the classifier's own log-probability."""
    return (votes + reading.clamp_min(1e-4).log()).argmax(dim=1)


def train_reader(kind: str, images: torch.Tensor, labels: torch.Tensor, n_classes: int,
                 epochs: int, nets: int, seed: int, *, lr: float, batch_size: int, augment: dict,
                 width: int | None = None, label_smoothing: float = 0.0,
                 keep: nn.Module | None = None) -> nn.Module:
    """A reader of uint8 images (N, 28, 28) trained on `labels` by Adam at `lr` under random affine
    augmentation (`augment`: shift pixels, rotation degrees, scale fraction; lr, batch_size and
    augment as `reread`'s schema section gives them, Reread.reader_training()): `cnn`, a
    DigitReader of `nets` CNNs `width` channels wide (None: DigitCNN's own; with `keep`, a LeNet
    classifier, averaged into it unchanged; `label_smoothing` in their cross-entropy), or
    `lenet`, a fresh LeNet. Each net
    trains on one thread, so the same seed gives the same reader on any machine and load; the CNNs
    train side by side, as many at once as torch has threads."""
    if (keep is not None or width is not None or label_smoothing) and kind != "cnn":
        raise ValueError(f"only a cnn reader keeps the classifier or takes a width or label "
                         f"smoothing, got {kind!r}")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        if kind == "cnn":
            x = deskew(images)
            sized = {} if width is None else {"width": width}
            reader = DigitReader(n_classes, nets, lenet=keep is not None, **sized)
            trained = train_digit_cnns(x, labels, torch.arange(len(x)), n_classes,
                                       [seed * 1000 + m for m in range(nets)], epochs, threads,
                                       batch_size=batch_size, lr=lr, label_smoothing=label_smoothing,
                                       **sized, **augment)
            for net, fitted in zip(reader.nets, trained):
                net.load_state_dict(fitted.state_dict())
            if keep is not None:
                reader.lenet.load_state_dict(keep.state_dict())
            return reader.eval()
        if kind == "lenet":
            torch.manual_seed(seed)
            generator = torch.Generator().manual_seed(seed + 1)
            model = lenet.LeNet(n_classes)
            optimizer = torch.optim.Adam(model.parameters(), lr=lr)
            for _ in range(epochs):
                lenet.distill_epoch(model, optimizer, images, labels, batch_size, generator, augment)
            return model.eval()
    finally:
        torch.set_num_threads(threads)
    raise ValueError(f"reader must be 'cnn' or 'lenet', got {kind!r}")
