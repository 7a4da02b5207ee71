"""Test-time views of a digit reader (ours, beyond the paper; `evaluate.views`).

A board is solved only if every one of its ~36 givens is read right, so one misread image costs
every board that shows it. The reader here reads each image in a few fixed, slightly moved
copies and averages its probabilities over them: the plain image, its four one-pixel shifts,
then its rotations by -6 and +6 degrees, then the image 6 % smaller and 6 % larger, then its two
diagonal one-pixel shifts (`views` N takes the first N; 1 is the plain image alone, the paper's
reading). With `mirror` (`evaluate.mirror`) each view is read in its mirror image too: only for
symbols a mirror leaves the same (clothing, not digits). The copies are small against the training augmentation of the CNN readers (shifts of 2
pixels, rotations of 10 degrees, scaling by 10 %), so each is an image the reader has learned to
read. Nothing is drawn at random: the same reader gives the same readings.

A DigitReader's views are taken of the deskewed image (its deskew re-centres the image, which
would undo a shift made before it); LeNet's of the image itself. The wrapper holds no weights of
its own and is never saved: it is put in front of a trained reader at test time only.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .digitcnn import DigitReader
from .lenet import image_batch

# (rotation in degrees, shift right, shift down in pixels[, size factor]), in the order `views`
# takes them; the counts a run may ask for end a group: 1, 5, 7, 9, 11
VIEWS = ((0.0, 0, 0), (0.0, 1, 0), (0.0, -1, 0), (0.0, 0, 1), (0.0, 0, -1), (-6.0, 0, 0), (6.0, 0, 0),
         (0.0, 0, 0, 0.94), (0.0, 0, 0, 1.06), (0.0, 1, 1), (0.0, -1, -1))
VIEW_COUNTS = (1, 5, 7, 9, 11)


def view(x: torch.Tensor, degrees: float, right: int, down: int, size: float = 1.0) -> torch.Tensor:
    """x (B, 1, H, W) rotated about its centre, scaled by `size` about it and moved by whole
    pixels (bilinear, zeros outside)."""
    if (degrees, right, down, size) == (0.0, 0, 0, 1.0):
        return x
    b, _, h, w = x.shape
    a = math.radians(degrees)
    # affine_grid maps output to input coordinates in [-1, 1]: a pixel is 2 / w (2 / h) wide; an
    # output pixel reads the input 1 / size as far from the centre, so the digit grows by size
    theta = torch.tensor([[math.cos(a) / size, -math.sin(a) / size, -2.0 * right / w],
                          [math.sin(a) / size, math.cos(a) / size, -2.0 * down / h]],
                         dtype=x.dtype, device=x.device)
    grid = F.affine_grid(theta.expand(b, 2, 3), list(x.shape), align_corners=False)
    return F.grid_sample(x, grid, align_corners=False, padding_mode="zeros")


def mean_over_views(net: nn.Module, x: torch.Tensor, views: int, mirror: bool = False) -> torch.Tensor:
    """(B, K) mean softmax of `net` over the first `views` views of x (B, 1, H, W), and with
    `mirror` over the same views of x mirrored left to right too (2 `views` readings)."""
    images = (x, x.flip(-1)) if mirror else (x,)
    return torch.stack([F.softmax(net(view(y, *v)), dim=1) for y in images for v in VIEWS[:views]]).mean(0)


class ReaderViews(nn.Module):
    """`reader` (a DigitReader or LeNet, frozen) reading each image in `views` views, and with
    `mirror` in their mirror images too (`evaluate.mirror`, for symbols a mirror leaves the same):
    returns the log of its mean probabilities, as a DigitReader does, so a softmax gives them back."""

    def __init__(self, reader: nn.Module, views: int, mirror: bool = False):
        super().__init__()
        if views not in VIEW_COUNTS:
            raise ValueError(f"views must be one of {VIEW_COUNTS}, got {views!r}")
        self.reader, self.views, self.mirror, self.n_classes = reader, views, mirror, reader.n_classes

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 (N, 28, 28) or float (N, 1, 28, 28) in [0, 1] -> log mean probabilities (N, K)."""
        if isinstance(self.reader, DigitReader):  # its nets, LeNet half and merge, each net in views
            probs = self.reader.probabilities(images, lambda net, x: mean_over_views(net, x, self.views, self.mirror))
        else:
            probs = mean_over_views(self.reader, image_batch(images), self.views, self.mirror)
        return probs.clamp_min(1e-12).log()
