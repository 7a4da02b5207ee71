"""The small digit CNN shared by the image-only clusterer and the re-read stage's reader.

deskew (slant and position removed), augment (random affine copies), DigitCNN (three conv
blocks), train_digit_cnn (one net on labelled images under augmentation), train_digit_cnns
(several, one per thread), and DigitReader: an ensemble of DigitCNNs behind deskew, a drop-in
for LeNet as the visual solver's classifier.
"""
from __future__ import annotations

import math
import threading
from concurrent.futures import ThreadPoolExecutor

import torch
import torch.nn as nn
import torch.nn.functional as F

from .lenet import LeNet, image_batch, mirror_half


def deskew(images: torch.Tensor) -> torch.Tensor:
    """uint8 or float images (N, 28, 28) -> float (N, 1, 28, 28) in [0, 1], slant removed and
    centred on the centre of mass (bilinear resampling, zeros outside)."""
    x = images.float()
    if images.dtype == torch.uint8:
        x = x / 255.0
    n, h, w = x.shape
    rows = torch.arange(h, dtype=torch.float32, device=x.device).view(1, h, 1)
    cols = torch.arange(w, dtype=torch.float32, device=x.device).view(1, 1, w)
    mass = x.sum(dim=(1, 2)).clamp_min(1e-8)
    mr = (x * rows).sum(dim=(1, 2)) / mass
    mc = (x * cols).sum(dim=(1, 2)) / mass
    var_r = (x * (rows - mr.view(-1, 1, 1)) ** 2).sum(dim=(1, 2)) / mass
    cov = (x * (rows - mr.view(-1, 1, 1)) * (cols - mc.view(-1, 1, 1))).sum(dim=(1, 2)) / mass
    alpha = cov / var_r.clamp_min(1e-8)
    # grid_sample coordinates (align_corners=True): pixel i sits at (i - c) / c, c = (size-1)/2.
    # Input column = output column + alpha * (output row - centre) + column shift, so the shear
    # straightens the slant and the shifts move the centre of mass to the image centre.
    cr, cc = (h - 1) / 2, (w - 1) / 2
    theta = torch.zeros(n, 2, 3, device=x.device)
    theta[:, 0, 0] = 1.0
    theta[:, 0, 1] = alpha * cr / cc
    theta[:, 0, 2] = (mc - cc) / cc
    theta[:, 1, 1] = 1.0
    theta[:, 1, 2] = (mr - cr) / cr
    grid = F.affine_grid(theta, (n, 1, h, w), align_corners=True)
    return F.grid_sample(x.unsqueeze(1), grid, mode="bilinear", padding_mode="zeros",
                         align_corners=True)


def augment(x: torch.Tensor, generator: torch.Generator, rotation: float, scale: float,
            shift: float, flip: bool = False) -> torch.Tensor:
    """Random affine copies of x (B, 1, 28, 28): rotation in +-`rotation` degrees, zoom in
    1 +- `scale`, shift in +-`shift` pixels, drawn from `generator` (repeatable); with `flip`,
    each copy mirrored left to right with probability 1/2 (drawn after the affine draws, so
    without it the draws are as before)."""
    b, _, h, _ = x.shape
    angle = (torch.rand(b, generator=generator) * 2 - 1) * math.radians(rotation)
    zoom = 1 + (torch.rand(b, generator=generator) * 2 - 1) * scale
    move = (torch.rand(b, 2, generator=generator) * 2 - 1) * shift / (h / 2)
    cos, sin = torch.cos(angle) / zoom, torch.sin(angle) / zoom
    theta = torch.stack([torch.stack([cos, -sin, move[:, 0]], 1),
                         torch.stack([sin, cos, move[:, 1]], 1)], 1)
    if flip:
        mirror_half(theta, generator)
    grid = F.affine_grid(theta.to(x.device), x.shape, align_corners=False)
    return F.grid_sample(x, grid, align_corners=False, padding_mode="zeros")


class DigitCNN(nn.Module):
    """Three conv blocks (width, 2 width, 2 width channels; 28 -> 14 -> 7 -> 3) and two linear
    layers: small enough to train in seconds per epoch on one CPU thread. Each block pools
    before its ReLU: the same values and gradients as ReLU then pool (ReLU is monotone), with a
    quarter of the ReLU's work; parameter names are unchanged (ReLU and pool hold none)."""

    def __init__(self, n_classes: int, width: int = 32, feature_dim: int = 128):
        super().__init__()
        w2 = 2 * width
        self.body = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1), nn.BatchNorm2d(width), nn.MaxPool2d(2), nn.ReLU(),
            nn.Conv2d(width, w2, 3, padding=1), nn.BatchNorm2d(w2), nn.MaxPool2d(2), nn.ReLU(),
            nn.Conv2d(w2, w2, 3, padding=1), nn.BatchNorm2d(w2), nn.MaxPool2d(2), nn.ReLU(),
            nn.Flatten(), nn.Linear(w2 * 9, feature_dim), nn.BatchNorm1d(feature_dim), nn.ReLU())
        self.head = nn.Linear(feature_dim, n_classes)
        self.to(memory_format=torch.channels_last)  # faster convolutions, as LeNet's

    def forward(self, x):
        return self.head(self.body(x))


_GLOBAL_RNG = threading.Lock()  # a net's initialisation seeds and draws torch's global generator


def train_digit_cnn(x: torch.Tensor, target: torch.Tensor, train_idx: torch.Tensor, n_classes: int,
                    seed: int, epochs: int, batch_size: int = 128, lr: float = 1e-3,
                    rotation: float = 10.0, scale: float = 0.1, shift: float = 2.0,
                    flip: bool = False, width: int = 32, feature_dim: int = 128, label_smoothing: float = 0.0) -> DigitCNN:
    """One CNN trained to predict target[train_idx] from augmented copies of x[train_idx]
    (deskewed float images (N, 1, 28, 28)), its cross-entropy's target smoothed by
    `label_smoothing`; returned in eval mode. Its initial weights come from
    torch's global generator seeded with `seed`, every later draw from its own generator."""
    with _GLOBAL_RNG:
        torch.manual_seed(seed)
        net = DigitCNN(n_classes, width, feature_dim)
    gen = torch.Generator().manual_seed(seed + 1)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    net.train()
    for _ in range(epochs):
        order = train_idx[torch.randperm(len(train_idx), generator=gen)]
        for i in range(0, len(order), batch_size):
            batch = order[i:i + batch_size]
            if len(batch) < 2:  # batch norm needs two samples
                continue
            loss = F.cross_entropy(net(augment(x[batch], gen, rotation, scale, shift, flip)),
                                   target[batch], label_smoothing=label_smoothing)
            opt.zero_grad()
            loss.backward()
            opt.step()
    net.eval()
    return net


def train_digit_cnns(x: torch.Tensor, target: torch.Tensor, train_idx: torch.Tensor,
                     n_classes: int, seeds: list[int], epochs: int, workers: int,
                     **settings) -> list[DigitCNN]:
    """One train_digit_cnn per seed, `workers` at a time on Python threads, each net's torch ops on
    one thread: the nets are the same, bit for bit, as if trained one after another (each draws
    from its own generator once its weights are set), and the ops release the GIL."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        def train(seed):
            return train_digit_cnn(x, target, train_idx, n_classes, seed, epochs, **settings)
        with ThreadPoolExecutor(max(1, min(workers, len(seeds)))) as pool:
            return list(pool.map(train, seeds))
    finally:
        torch.set_num_threads(threads)


@torch.no_grad()
def mean_softmax(nets, x: torch.Tensor, n_classes: int) -> torch.Tensor:
    """(N, K) average of the nets' softmax on deskewed images x (N, 1, 28, 28), in eval mode."""
    total = torch.zeros(len(x), n_classes, device=x.device)
    for net in nets:
        net.eval()
        for i in range(0, len(x), 1024):
            total[i:i + 1024] += F.softmax(net(x[i:i + 1024]), dim=1)
    return total / max(len(nets), 1)


class DigitReader(nn.Module):
    """An ensemble of DigitCNNs reading raw images: deskew, mean softmax of the nets. forward
    returns the log of that mean, so a softmax of it (what VisualSolver applies) gives it back.
    It is trained net by net (train_digit_cnn) and then frozen: its batch norms stay in eval mode
    under `.train()`, so a later stage that trains around it (the proofreader) cannot move them.

    With `lenet` it also holds a LeNet (the end-to-end classifier, its weights loaded by the
    caller) and averages two opinions, half and half: the CNNs' mean probability and the LeNet's.

    With `merge` (K',) the nets read K' clusters and the reader the n_classes digits they map
    onto (surjective grounding, ours): a digit's probability is the sum of its clusters'."""

    def __init__(self, n_classes: int, n_nets: int = 3, width: int = 32, feature_dim: int = 128,
                 lenet: bool = False, merge: list[int] | None = None):
        super().__init__()
        self.n_classes = n_classes
        self.config = {"n_nets": n_nets, "width": width, "feature_dim": feature_dim}
        if lenet:  # only then: a reader without one saves as it did before the option
            self.config["lenet"] = True
        outputs = n_classes if merge is None else len(merge)
        self.nets = nn.ModuleList(DigitCNN(outputs, width, feature_dim) for _ in range(n_nets))
        self.lenet = LeNet(outputs) if lenet else None
        self.merge = None
        if merge is not None:
            self._set_merge(torch.as_tensor(merge, dtype=torch.long), n_classes)
        self.train()  # the nets' batch norms in eval mode from the start

    def _set_merge(self, merge: torch.Tensor, n_classes: int) -> None:
        if merge.dim() != 1 or not torch.equal(torch.unique(merge), torch.arange(n_classes)):
            raise ValueError(f"merge must map the nets' classes onto 0..{n_classes - 1}, "
                             f"got {merge.tolist()}")
        self.merge, self.n_classes = merge, n_classes
        self.config["merge"] = merge.tolist()

    def merge_classes(self, merge: torch.Tensor) -> None:
        """Read digits from now on: merge (K',) maps each of the nets' K' classes onto one of
        max(merge) + 1 digits, every digit some class's (a many-to-one grounding map)."""
        if self.merge is not None:
            raise ValueError("the reader's classes are merged already")
        if len(merge) != self.n_classes:
            raise ValueError(f"merge has {len(merge)} entries, the reader {self.n_classes} classes")
        merge = torch.as_tensor(merge, dtype=torch.long).cpu()
        self._set_merge(merge, int(merge.max()) + 1)

    def merged(self, probs: torch.Tensor) -> torch.Tensor:
        """(N, K') class probabilities -> (N, K) digit probabilities (unchanged without merge)."""
        if self.merge is None:
            return probs
        total = probs.new_zeros(len(probs), self.n_classes)
        return total.index_add(1, self.merge.to(probs.device), probs)

    def train(self, mode: bool = True):
        super().train(mode)
        self.nets.eval()
        if self.lenet is not None:
            self.lenet.eval()
        return self

    def output_layers(self) -> list[nn.Linear]:
        """Each net's output layer (and the LeNet's): where a relabelling of the classes is folded."""
        return [net.head for net in self.nets] + ([self.lenet.fc2] if self.lenet is not None else [])

    @torch.no_grad()
    def features(self, images: torch.Tensor, batch_size: int = 1024) -> torch.Tensor:
        """uint8 images (N, 28, 28) -> (N, n_nets * feature_dim): each net's body in eval mode,
        side by side, read on the reader's device and returned on the CPU (as lenet.outputs
        returns readings); what `heads()` reads."""
        if self.lenet is not None:
            raise ValueError("a reader that holds a LeNet has no heads-only form")
        x = deskew(images.to(next(self.parameters()).device))
        return torch.cat([torch.cat([net.body(x[i:i + batch_size]) for i in range(0, len(x), batch_size)])
                          for net in self.nets], 1).cpu()

    def heads(self) -> "ReaderHeads":
        """The nets' output layers alone, reading `features` (shared: training them trains the reader)."""
        return ReaderHeads([net.head for net in self.nets], self.merged)

    def probabilities(self, images: torch.Tensor, read=None) -> torch.Tensor:
        """uint8 (N, 28, 28) or float (N, 1, 28, 28) in [0, 1] -> digit probabilities (N, K): the
        nets' mean on the deskewed images, half and half with the LeNet's on the images as they
        are where the reader holds one, clusters summed into digits. `read(net, x)` gives one
        net's (N, K') probabilities (default: the softmax of its output; test-time views pass
        their mean over the views, satground.readers.views)."""
        read = read or (lambda net, x: F.softmax(net(x), dim=1))
        x = image_batch(images)
        straight = deskew(x[:, 0])
        probs = torch.stack([read(net, straight) for net in self.nets]).mean(0)
        if self.lenet is not None:
            probs = (probs + read(self.lenet, x)) / 2
        return self.merged(probs)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 (N, 28, 28) or float (N, 1, 28, 28) in [0, 1] -> log mean probabilities (N, K)."""
        return self.probabilities(images).clamp_min(1e-12).log()


class ReaderHeads(nn.Module):
    """A DigitReader's output layers on its nets' features (DigitReader.features): the same log
    mean probabilities as the reader, with the bodies read once (the tune epochs, ours)."""

    def __init__(self, heads: list[nn.Linear], merged=None):
        super().__init__()
        self.heads = nn.ModuleList(heads)
        self.merged = merged  # the reader's merge of classes into digits (DigitReader.merged)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        chunks = features.chunk(len(self.heads), dim=1)
        probs = torch.stack([F.softmax(head(x), dim=1) for head, x in zip(self.heads, chunks)]).mean(0)
        if self.merged is not None:
            probs = self.merged(probs)
        return probs.clamp_min(1e-12).log()
