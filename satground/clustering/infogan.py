"""InfoGAN (Chen et al. 2016) for unsupervised clustering of digit images.

The MNIST model of the public InfoGAN-PyTorch code the paper's authors used. The generator sees noise (62) + a one-hot categorical code with K values + continuous
codes (2, uniform in [-1, 1]); the discriminator trunk is shared by the real/fake head D and
the head Q that recovers the codes from an image. The cluster of a real image is the arg max
of Q's categorical logits. Layers that act on a 1x1 map (or a kernel covering the whole map)
are written as nn.Linear: the same functions and parameter counts as the reference convs.

Parameter counts at K=9: generator 6,631,808; trunk 6,556,992; D head 1,025; Q head 133,005;
13,322,830 in all. The paper's "7,307,997 parameters" is trunk + Q head (the classifying path,
6,689,997) plus SATNet's clause matrix S of 1030 x 600 = 618,000.
"""
from __future__ import annotations

import math
import threading
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from tqdm import tqdm

from ..harness.io import seed_everything
from ..readers.lenet import image_batch


_GLOBAL_RNG = threading.Lock()  # the global torch generator, which weight initialisation reads


def _init_weights(module: nn.Module) -> None:
    # DCGAN initialisation, as in the reference code.
    if isinstance(module, (nn.Conv2d, nn.ConvTranspose2d, nn.Linear)):
        nn.init.normal_(module.weight, 0.0, 0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, (nn.BatchNorm1d, nn.BatchNorm2d)):
        nn.init.normal_(module.weight, 1.0, 0.02)
        nn.init.zeros_(module.bias)


class Generator(nn.Module):
    # The first two transposed convs act on a 1x1 map, where a transposed conv is a fully
    # connected layer (1x1 -> 1024, 1x1 -> 128x7x7); nn.Linear computes the same function with
    # the same parameter count, about twice as fast on CPU.
    def __init__(self, latent_dim: int):
        super().__init__()
        self.fc = nn.Sequential(
            nn.Linear(latent_dim, 1024, bias=False), nn.BatchNorm1d(1024), nn.ReLU(),
            nn.Linear(1024, 128 * 7 * 7, bias=False),
        )
        self.bn = nn.BatchNorm2d(128)
        self.deconv = nn.Sequential(
            nn.ConvTranspose2d(128, 64, 4, 2, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
            nn.ConvTranspose2d(64, 1, 4, 2, padding=1, bias=False), nn.Sigmoid(),
        )

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        """latent (B, latent_dim) -> images (B, 1, 28, 28) in [0, 1]."""
        x = F.relu(self.bn(self.fc(latent).view(-1, 128, 7, 7)))
        return self.deconv(x)


class DiscriminatorTrunk(nn.Module):
    # The 7x7 conv to 1024 channels sees a 7x7 map with no padding: a fully connected layer
    # on the 128*7*7 features (same function and parameter count as the conv, faster on CPU).
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(1, 64, 4, 2, padding=1), nn.LeakyReLU(0.1),
            nn.Conv2d(64, 128, 4, 2, padding=1, bias=False), nn.BatchNorm2d(128), nn.LeakyReLU(0.1),
        )
        self.fc = nn.Sequential(nn.Linear(128 * 7 * 7, 1024, bias=False), nn.BatchNorm1d(1024),
                                nn.LeakyReLU(0.1))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.fc(self.conv(images).flatten(1))  # (B, 1024)


class QHead(nn.Module):
    # 1x1 convs on the trunk's 1x1 map, i.e. fully connected layers.
    def __init__(self, n_classes: int, n_cont: int):
        super().__init__()
        self.hidden = nn.Sequential(nn.Linear(1024, 128, bias=False), nn.BatchNorm1d(128),
                                    nn.LeakyReLU(0.1))
        self.logits = nn.Linear(128, n_classes)
        self.mu = nn.Linear(128, n_cont)
        self.log_var = nn.Linear(128, n_cont)

    def forward(self, features: torch.Tensor):
        h = self.hidden(features)
        return self.logits(h), self.mu(h), self.log_var(h)


class InfoGAN(nn.Module):
    def __init__(self, n_classes: int, noise_dim: int = 62, n_cont: int = 2):
        super().__init__()
        self.n_classes, self.noise_dim, self.n_cont = n_classes, noise_dim, n_cont
        self.generator = Generator(noise_dim + n_classes + n_cont)
        self.trunk = DiscriminatorTrunk()
        # The real/fake head returns a logit: its sigmoid is folded into the BCE loss (same
        # model, numerically safer).
        self.d_head = nn.Linear(1024, 1)
        self.q_head = QHead(n_classes, n_cont)
        self.apply(_init_weights)

    def config(self) -> dict:
        return {"n_classes": self.n_classes, "noise_dim": self.noise_dim, "n_cont": self.n_cont}

    def sample_latent(self, batch: int, rng: torch.Generator, codes: torch.Tensor | None = None):
        """Random latent vectors; returns (latent (B, D), categorical codes (B,), continuous (B, c))."""
        noise = torch.randn(batch, self.noise_dim, generator=rng)
        if codes is None:
            codes = torch.randint(self.n_classes, (batch,), generator=rng)
        cont = torch.rand(batch, self.n_cont, generator=rng) * 2 - 1
        latent = torch.cat([noise, F.one_hot(codes, self.n_classes).float(), cont], dim=1)
        return latent, codes, cont

    def cluster_logits(self, images: torch.Tensor) -> torch.Tensor:
        """Q's categorical logits for images (uint8 (N,28,28) or float (N,1,28,28))."""
        return self.q_head(self.trunk(image_batch(images)))[0]


def parameter_counts(model: InfoGAN) -> dict[str, int]:
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    counts = {"generator": count(model.generator), "trunk": count(model.trunk),
              "d_head": count(model.d_head), "q_head": count(model.q_head)}
    counts["classifier_path"] = counts["trunk"] + counts["q_head"]
    counts["total"] = count(model)
    return counts


def make_optimizers(model: InfoGAN, lr_d: float, lr_g: float):
    """Adam for D (trunk + D head) and for G + Q, betas (0.5, 0.999) as in the reference code."""
    opt_d = torch.optim.Adam([*model.trunk.parameters(), *model.d_head.parameters()],
                             lr=lr_d, betas=(0.5, 0.999))
    opt_g = torch.optim.Adam([*model.generator.parameters(), *model.q_head.parameters()],
                             lr=lr_g, betas=(0.5, 0.999))
    return opt_d, opt_g


def gaussian_nll(x: torch.Tensor, mu: torch.Tensor, log_var: torch.Tensor) -> torch.Tensor:
    """Negative log-likelihood of x under N(mu, exp(log_var)), summed over codes, batch mean."""
    nll = 0.5 * (math.log(2 * math.pi) + log_var + (x - mu) ** 2 * torch.exp(-log_var))
    return nll.sum(1).mean()


def translate(images: torch.Tensor, shift: int, rng: torch.Generator) -> torch.Tensor:
    """Each image (B, 1, H, W) moved by its own random whole-pixel offset in [-shift, shift] on
    both axes, zeros shifted in. A gather, so gradients reach a generated image unchanged."""
    if shift == 0:
        return images
    batch, _, height, width = images.shape
    offsets = torch.randint(-shift, shift + 1, (2, batch, 1, 1), generator=rng).to(images.device)
    rows = torch.arange(height, device=images.device).view(1, height, 1) - offsets[0]
    cols = torch.arange(width, device=images.device).view(1, 1, width) - offsets[1]
    inside = ((rows >= 0) & (rows < height) & (cols >= 0) & (cols < width)).unsqueeze(1)
    flat = (rows.clamp(0, height - 1) * width + cols.clamp(0, width - 1)).view(batch, 1, -1)
    moved = images.flatten(2).gather(2, flat).view_as(images)
    return moved * inside


def train_step(model: InfoGAN, opt_d, opt_g, real: torch.Tensor, rng: torch.Generator,
               cont_weight: float = 0.1, shift: int = 0) -> dict[str, float]:
    """One InfoGAN update: D on real vs fake, then G + Q (fool D, recover the codes).

    shift > 0 (ours; 0 = the paper's) moves every image D and Q see, real and generated alike, by
    a random offset (differentiable augmentation, Zhao et al. 2020): with a few thousand real
    images D otherwise memorises them, and G's gradients fade."""
    device = real.device
    batch = real.shape[0]
    ones = torch.ones(batch, device=device)
    zeros = torch.zeros(batch, device=device)

    latent, codes, cont = model.sample_latent(batch, rng)
    latent, codes, cont = latent.to(device), codes.to(device), cont.to(device)
    fake = model.generator(latent)

    opt_d.zero_grad(set_to_none=True)
    d_real = model.d_head(model.trunk(translate(real, shift, rng))).flatten()
    d_fake = model.d_head(model.trunk(translate(fake.detach(), shift, rng))).flatten()
    loss_d = (F.binary_cross_entropy_with_logits(d_real, ones)
              + F.binary_cross_entropy_with_logits(d_fake, zeros))
    loss_d.backward()
    opt_d.step()

    opt_g.zero_grad(set_to_none=True)
    features = model.trunk(translate(fake, shift, rng))
    loss_g = F.binary_cross_entropy_with_logits(model.d_head(features).flatten(), ones)
    logits, mu, log_var = model.q_head(features)
    loss_cat = F.cross_entropy(logits, codes)
    loss_cont = gaussian_nll(cont, mu, log_var)
    (loss_g + loss_cat + cont_weight * loss_cont).backward()
    opt_g.step()
    # D's gradients from this pass are discarded: opt_d zeroes them before its next step.
    return {"loss_d": loss_d.item(), "loss_g": loss_g.item(), "loss_q_cat": loss_cat.item(),
            "loss_q_cont": loss_cont.item()}


def adversarial_epoch(model: InfoGAN, opt_d, opt_g, images: torch.Tensor, batch_size: int,
                      rng: torch.Generator, cont_weight: float = 0.1, shift: int = 0,
                      progress=None) -> dict[str, float]:
    """One pass over uint8 images (N, 28, 28) in random order; mean of each loss."""
    model.train()
    device = next(model.parameters()).device
    order = torch.randperm(len(images), generator=rng)
    sums: dict[str, float] = {}
    steps = 0
    # Full batches only: a last batch of 1 would break batch norm.
    for start in range(0, len(images) - batch_size + 1, batch_size):
        real = image_batch(images[order[start:start + batch_size]].to(device))
        for name, value in train_step(model, opt_d, opt_g, real, rng, cont_weight, shift).items():
            sums[name] = sums.get(name, 0.0) + value
        steps += 1
        if progress is not None:
            progress.update(1)
    return {name: value / max(steps, 1) for name, value in sums.items()}


@torch.no_grad()
def calibrate_batch_norm(model: InfoGAN, images: torch.Tensor, batch_size: int = 512) -> None:
    """Set the batch-norm statistics of the trunk and Q head to those of real images.

    During training two of every three discriminator passes see generated images, so the
    running statistics describe a mix of real and fake batches; clustering real images in eval
    mode with them misplaces images. Recomputing them on the (unlabelled) training images fixes
    that. Training is unaffected: in train mode batch norm uses batch statistics.
    """
    layers = [m for m in (*model.trunk.modules(), *model.q_head.modules())
              if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    was_training = model.training
    device = next(model.parameters()).device
    momenta = [layer.momentum for layer in layers]
    for layer in layers:
        layer.reset_running_stats()
        layer.momentum = None  # cumulative average over the batches below
    model.train()
    for start in range(0, len(images), batch_size):
        model.q_head(model.trunk(image_batch(images[start:start + batch_size].to(device))))
    for layer, momentum in zip(layers, momenta):
        layer.momentum = momentum
    model.train(was_training)


@torch.no_grad()
def code_probabilities(model: InfoGAN, images: torch.Tensor, batch_size: int = 1024) -> torch.Tensor:
    """Q's categorical distribution (N, K) for uint8 images (N, 28, 28), eval mode."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    out = [model.cluster_logits(images[i:i + batch_size].to(device)).softmax(1).cpu()
           for i in range(0, len(images), batch_size)]
    model.train(was_training)
    return torch.cat(out) if out else torch.zeros(0, model.n_classes)


def code_information(probs: torch.Tensor) -> float:
    """Q's mutual information between a real image and its code, H(mean p) - mean H(p), as a
    share of log K: 1 when Q spreads the images evenly over the codes and is sure of each, 0 when
    it says the same for every image. Reads no label."""
    entropy = lambda p: -(p * p.clamp_min(1e-12).log()).sum(-1)  # noqa: E731
    k = probs.shape[1]
    return float((entropy(probs.mean(0)) - entropy(probs).mean()) / math.log(k))


def assign_clusters(model: InfoGAN, images: torch.Tensor) -> torch.Tensor:
    """Cluster of each uint8 image (N, 28, 28): arg max of Q's categorical distribution (eval mode)."""
    return code_probabilities(model, images).argmax(1)


@torch.no_grad()
def sample_grid(model: InfoGAN, per_code: int, rng: torch.Generator) -> torch.Tensor:
    """Generated images (K, per_code, 28, 28): row k uses code k; column j shares its noise."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    latent, _, _ = model.sample_latent(per_code, rng, codes=torch.zeros(per_code, dtype=torch.long))
    rows = []
    for code in range(model.n_classes):
        latent[:, model.noise_dim:model.noise_dim + model.n_classes] = 0
        latent[:, model.noise_dim + code] = 1
        rows.append(model.generator(latent.to(device)).cpu()[:, 0])
    model.train(was_training)
    return torch.stack(rows)


class InfoGANClusterer:
    """InfoGAN as a clusterer (satground.clustering): trained for cluster.epochs, the cluster of an
    image being Q's categorical arg max."""

    method = "infogan"
    reads_peers = False
    parallel_restarts = True  # training draws from its own generator only (see from_settings)

    def __init__(self, model: InfoGAN):
        self.model = model
        self.n_clusters = model.n_classes

    @classmethod
    def from_settings(cls, images: torch.Tensor, n_clusters: int, seed: int, cfg, cannot_link=None,
                      device: torch.device = torch.device("cpu"), on_epoch=None) -> "InfoGANClusterer":
        """Train on uint8 images (N, 28, 28) for cfg.epochs; on_epoch(epoch, clusterer, losses,
        seconds) after each epoch and at epoch 0 (the untrained start, for the ablation)."""
        if len(images) < cfg.batch_size:
            raise ValueError(f"'cluster.batch_size' = {cfg.batch_size} exceeds the {len(images)} "
                             "training images")
        with _GLOBAL_RNG:  # restarts on threads: each initialises from its own seed in turn
            rng = seed_everything(seed)
            model = InfoGAN(n_clusters, cfg.noise_dim, cfg.n_cont).to(device)
        opt_d, opt_g = make_optimizers(model, cfg.lr_d, cfg.lr_g)
        clusterer = cls(model)

        def end_of_epoch(epoch: int, losses: dict, seconds):
            # clusters of real images use batch-norm statistics of real images (see the function)
            calibrate_batch_norm(model, images)
            return on_epoch(epoch, clusterer, losses, seconds) if on_epoch else {}

        end_of_epoch(0, {}, None)
        steps_per_epoch = len(images) // cfg.batch_size
        with tqdm(total=cfg.epochs * steps_per_epoch, desc=f"infogan seed {seed}", unit="step") as bar:
            for epoch in range(1, cfg.epochs + 1):
                start = time.perf_counter()
                losses = adversarial_epoch(model, opt_d, opt_g, images, cfg.batch_size, rng,
                                           cfg.cont_weight, cfg.shift, progress=bar)
                row = end_of_epoch(epoch, losses, time.perf_counter() - start) or {}
                bar.set_postfix({k: f"{v:.3f}" for k, v in row.items()
                                 if k.endswith("accuracy") and v is not None})
        return clusterer

    @classmethod
    def from_checkpoint(cls, ckpt: dict) -> "InfoGANClusterer":
        model = InfoGAN(**ckpt["config"])
        model.load_state_dict(ckpt["state_dict"])
        return cls(model)

    def checkpoint(self) -> dict:
        state = {name: t.detach().cpu().clone() for name, t in self.model.state_dict().items()}
        return {"method": self.method, "config": self.model.config(), "state_dict": state}

    def assign(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 images (N, 28, 28) -> cluster index (N,) in 0..K-1."""
        return assign_clusters(self.model, images)

    def code_information(self, images: torch.Tensor) -> float:
        """Q's code information on uint8 images (N, 28, 28), label-free (see code_information)."""
        return code_information(code_probabilities(self.model, images))

    def sample_grid(self, images: torch.Tensor):
        """Generated digits, one row per code (the real images are not needed)."""
        return (sample_grid(self.model, 10, torch.Generator().manual_seed(0)),
                "InfoGAN samples: rows share a code, columns share noise")

    def parameter_counts(self) -> dict[str, int]:
        return parameter_counts(self.model)
