"""LeNet, the digit classifier of the visual SATNet model.

The variant of SATNet's visual Sudoku code (Wang et al. 2019), which the paper reuses:
conv 20 5x5 -> max-pool 2 -> conv 50 5x5 -> max-pool 2 -> fc 500 -> fc K, ReLU between,
no padding (28 -> 24 -> 12 -> 8 -> 4, so fc1 sees 50*4*4 = 800 features).
It has 431,080 parameters at K=10 and 430,579 at K=9. The paper's "1,049,080 parameters"
is this net at K=10 plus SATNet's clause matrix S of (729+1+300) x 600 = 618,000 entries
(431,080 + 618,000 = 1,049,080), so no padding change is needed to match it.
The network returns logits over the K digit classes (or clusters).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F



def image_batch(images: torch.Tensor) -> torch.Tensor:
    """uint8 images (N, 28, 28) in 0..255 -> float (N, 1, 28, 28) in [0, 1] (what both nets take)."""
    if images.dtype == torch.uint8:
        images = images.float().div_(255.0)
    if images.dim() == 3:
        images = images.unsqueeze(1)
    return images


class LeNet(nn.Module):
    def __init__(self, n_classes: int):
        super().__init__()
        self.n_classes = n_classes
        self.conv1 = nn.Conv2d(1, 20, 5)
        self.conv2 = nn.Conv2d(20, 50, 5)
        self.fc1 = nn.Linear(50 * 4 * 4, 500)
        self.fc2 = nn.Linear(500, n_classes)
        # oneDNN's CPU convolutions run faster on channels-last weights (benchmarks/conv_layout.py),
        # equal up to float rounding; the layout survives .to(device) and load_state_dict
        self.to(memory_format=torch.channels_last)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """images: uint8 (N, 28, 28) or float (N, 1, 28, 28) in [0, 1] -> logits (N, K)."""
        x = image_batch(images)
        # pool, then ReLU: ReLU is monotone, so values and gradients are those of ReLU then pool,
        # bit for bit (tests/test_lenet_distill.py), and ReLU touches a quarter of the elements
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2(x), 2))
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


def count_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


@torch.no_grad()
def outputs(model: nn.Module, images: torch.Tensor, batch_size: int = 1024) -> torch.Tensor:
    """A classifier's outputs (N, K) on uint8 images (N, 28, 28): logits (log-probabilities for
    a DigitReader), in eval mode and in batches on the model's device, returned on the CPU;
    the model's mode is kept."""
    was_training = model.training
    model.eval()
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    out = [model(images[i:i + batch_size].to(device)).cpu() for i in range(0, len(images), batch_size)]
    model.train(was_training)
    return torch.cat(out) if out else torch.zeros(0, model.n_classes)


def predict(model: nn.Module, images: torch.Tensor, batch_size: int = 1024) -> torch.Tensor:
    """Arg max class of each uint8 image (N, 28, 28) (`outputs`)."""
    return outputs(model, images, batch_size).argmax(1)


def augment(images: torch.Tensor, generator: torch.Generator, shift: float = 0.0,
            rotation: float = 0.0, scale: float = 0.0, flip: bool = False) -> torch.Tensor:
    """A random affine copy of each image: up to `shift` pixels along each axis, `rotation`
    degrees and a `scale` fraction, drawn uniformly with `generator`, and with `flip` mirrored
    left to right with probability 1/2 (drawn last). Float (N, 1, 28, 28) out."""
    x = image_batch(images)
    n = len(x)

    def uniform(*shape):
        return torch.rand(*shape, generator=generator) * 2 - 1

    angle = uniform(n) * rotation * torch.pi / 180
    zoom = 1 + uniform(n) * scale
    offset = uniform(n, 2) * shift * 2 / x.shape[-1]  # affine_grid's units: half the image
    cos, sin = zoom * torch.cos(angle), zoom * torch.sin(angle)
    theta = torch.stack([torch.stack([cos, -sin, offset[:, 0]], 1),
                         torch.stack([sin, cos, offset[:, 1]], 1)], 1).to(x)
    if flip:
        mirror_half(theta, generator)
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    return F.grid_sample(x, grid, align_corners=False)


def mirror_half(theta: torch.Tensor, generator: torch.Generator) -> None:
    """Mirror each of the affine maps theta (B, 2, 3) left to right with probability 1/2, in place,
    one draw a map from `generator`: a mirror is the map x -> -x, folded into theta's first column,
    so the copies cost no extra pass (the `augment` functions' `flip`)."""
    mirrored = torch.rand(len(theta), generator=generator) < 0.5
    theta[:, :, 0] *= torch.where(mirrored, -1.0, 1.0).to(theta).view(-1, 1)


def distill_epoch(model: LeNet, optimizer: torch.optim.Optimizer, images: torch.Tensor,
                targets: torch.Tensor, batch_size: int, generator: torch.Generator,
                augmentation: dict | None = None) -> float:
    """One epoch of cross-entropy on (images uint8 (N,28,28), targets long (N,)); mean loss.
    `augmentation` ({shift, rotation, scale, flip}, see `augment`) transforms each batch anew;
    None or all zeros trains on the images as they are."""
    augmentation = augmentation if augmentation and any(augmentation.values()) else None
    model.train()
    device = next(model.parameters()).device
    order = torch.randperm(len(images), generator=generator)
    total, seen = 0.0, 0
    for start in range(0, len(images), batch_size):
        idx = order[start:start + batch_size]
        batch = images[idx]
        if augmentation is not None:
            batch = augment(batch, generator, **augmentation)
        logits = model(batch.to(device))
        loss = F.cross_entropy(logits, targets[idx].to(device))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(idx)
        seen += len(idx)
    return total / max(seen, 1)
