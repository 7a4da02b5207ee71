"""LeNet and the `distill` stage."""
import json
import shutil

import numpy as np
import pytest
import torch

from satground.readers import digitcnn, lenet
from satground.readers.classifier import load_classifier, save_classifier
from satground.clustering import infogan
from satground.clustering.ablation import mislabel, shift_boundaries
from satground.clustering import CLUSTERERS, save_clusterer
from satground.clustering.selflabel import SelfLabelClusterer
from satground.readers.digitcnn import DigitCNN, DigitReader
from satground.clustering.infogan import InfoGANClusterer
from satground.harness.io import PipelineError
from test_clustering import digit_images, make_prepared, record_loads, write_params

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def outside_the_repo(tmp_path, monkeypatch):
    # dvclive looks for a DVC/Git repo from the working directory: run where there is none.
    monkeypatch.chdir(tmp_path)


class QuadrantClusterer:
    """A test-only clusterer: the brightest quadrant of the image, shifted by 1 (mod 4).

    On the test images (digit d = bright square in quadrant d-1) it is a perfect clustering
    under a permutation; registering it also shows a new method plugs into `distill` as is.
    """
    method = "quadrant"
    n_clusters = 4

    @classmethod
    def from_checkpoint(cls, ckpt):
        return cls()

    def checkpoint(self):
        return {"method": self.method, "config": {}, "state_dict": {}}

    def assign(self, images):
        q = images.float().reshape(-1, 2, 14, 2, 14).sum(dim=(2, 4)).flatten(1)
        return (q.argmax(1) + 1) % 4

    def parameter_counts(self):
        return {}


def run_distill(tmp_path, data, teacher, name="run", cluster=None, **overrides):
    """The stage with the clusterer folder of `teacher` (its final.pt, or the epoch_XXX.pt that
    distill.checkpoint names); `cluster` overrides that section."""
    import distill

    out = tmp_path / name
    params = write_params(tmp_path / f"{name}.yaml", distill=overrides, cluster=cluster or {})
    distill.main(["--params", str(params), "--prepared", str(data), "--clusterer", str(teacher.parent),
                  "--model-out", str(out / "classifier.pt"), "--metrics-out", str(out / "live")])
    return out


def info(out):
    return json.loads((out / "live" / "info.json").read_text())


def untrained_infogan_checkpoint(path, n_classes=4):
    torch.manual_seed(0)
    save_clusterer(InfoGANClusterer(infogan.InfoGAN(n_classes, noise_dim=8)), path, epoch=0)
    return path


# ---------------------------------------------------------------------------------------------
# LeNet


def test_lenet_parameter_counts():
    assert lenet.count_parameters(lenet.LeNet(10)) == 431_080
    assert lenet.count_parameters(lenet.LeNet(9)) == 430_579
    # the paper's "1,049,080" = LeNet at K=10 + SATNet's S ((729 + 1 + 300) x 600)
    assert 431_080 + 1030 * 600 == 1_049_080


def test_lenet_takes_uint8_or_float_images():
    torch.manual_seed(0)
    model = lenet.LeNet(9)
    images = torch.randint(0, 256, (5, 28, 28), dtype=torch.uint8)
    logits = model(images)
    assert logits.shape == (5, 9)
    assert torch.allclose(logits, model(images.float().div(255).unsqueeze(1)))


@pytest.mark.parametrize("build", [lambda: lenet.LeNet(9), lambda: DigitCNN(9)], ids=["lenet", "cnn"])
def test_channels_last_layout_is_kept_and_changes_only_rounding(build, tmp_path):
    # both nets keep their conv weights channels-last (the faster oneDNN path) through a save and
    # load, and compute what the same weights compute in the NCHW layout; their gradients agree
    # up to rounding too, except where rounding flips a max-pool's pick between near-equal values
    torch.manual_seed(0)
    net = build().train()
    path = tmp_path / "net.pt"
    torch.save(net.state_dict(), path)
    loaded = build()
    loaded.load_state_dict(torch.load(path))
    convs = [m.weight for m in loaded.modules() if isinstance(m, torch.nn.Conv2d)]
    assert convs and all(w.is_contiguous(memory_format=torch.channels_last) for w in convs)
    assert not all(w.is_contiguous() for w in convs)  # (one input channel is both layouts)
    nchw = build().to(memory_format=torch.contiguous_format).train()
    nchw.load_state_dict(net.state_dict())
    assert all(w.is_contiguous() for w in nchw.parameters())
    images, target = torch.rand(64, 1, 28, 28), torch.randint(0, 9, (64,))
    logits = [model(images) for model in (net, nchw)]
    assert ((logits[0] - logits[1]).abs().max() / logits[1].abs().max()).item() < 1e-4
    for out in logits:
        torch.nn.functional.cross_entropy(out, target).backward()
    head = list(dict(net.named_parameters()))[-2:]  # the last layer: after every pool
    total = torch.cat([p.grad.flatten() for p in nchw.parameters()]).norm()
    for (name, a), b in zip(net.named_parameters(), nchw.parameters()):
        # a conv bias before a batch norm has no gradient but rounding: scale it by the whole
        error = float((a.grad - b.grad).norm() / torch.maximum(b.grad.norm(), 1e-3 * total))
        assert error < (1e-4 if name in head else 5e-2), name


def relu_then_pool(net, images):
    """The textbook order, ReLU then max-pool, over the same layers (what both nets computed
    before they pooled first)."""
    F = torch.nn.functional
    if isinstance(net, lenet.LeNet):
        x = lenet.image_batch(images)
        x = F.max_pool2d(F.relu(net.conv1(x)), 2)
        x = F.max_pool2d(F.relu(net.conv2(x)), 2)
        return net.fc2(F.relu(net.fc1(x.flatten(1))))
    layers = list(net.body)
    for i, layer in enumerate(layers[:-1]):
        if isinstance(layer, torch.nn.MaxPool2d) and isinstance(layers[i + 1], torch.nn.ReLU):
            layers[i], layers[i + 1] = layers[i + 1], layer
    return net.head(torch.nn.Sequential(*layers)(images))


@pytest.mark.parametrize("build", [lambda: lenet.LeNet(9), lambda: DigitCNN(9)], ids=["lenet", "cnn"])
def test_pooling_before_relu_gives_the_textbook_values_and_gradients_bit_for_bit(build):
    # images with blank background, as MNIST's: the pool windows there tie (a conv of zeros is
    # its bias), and with a negative bias every value of the window is below 0
    torch.manual_seed(0)
    net = build().train()
    images = torch.rand(64, 1, 28, 28) * (torch.rand(64, 1, 28, 28) < 0.3)
    target = torch.randint(0, 9, (64,))
    results = []
    for forward in (net, lambda x: relu_then_pool(net, x)):
        net.zero_grad(set_to_none=True)
        logits = forward(images)
        torch.nn.functional.cross_entropy(logits, target).backward()
        results.append([logits.detach()] + [p.grad.clone() for p in net.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*results))


def tiny_set(copies: int = 16):
    """(images, targets) of synthetic digits 1-4, and a fresh seeded LeNet, Adam and generator."""
    digits = np.tile(np.arange(1, 5), copies)
    images = torch.from_numpy(digit_images(digits, np.random.default_rng(0)))
    torch.manual_seed(0)
    model = lenet.LeNet(4)
    return (images, torch.from_numpy(digits - 1).long(), model,
            torch.optim.Adam(model.parameters(), lr=1e-3), torch.Generator().manual_seed(0))


def test_lenet_learns_a_tiny_set():
    images, targets, model, optimizer, gen = tiny_set()
    losses = [lenet.distill_epoch(model, optimizer, images, targets, 16, gen) for _ in range(6)]
    assert losses[-1] < 0.5 * losses[0]
    assert (lenet.predict(model, images) == targets).float().mean() >= 0.95


def test_augment_moves_the_digit_within_its_bounds_and_keeps_values_in_range():
    image = torch.zeros(1, 28, 28, dtype=torch.uint8)
    image[0, 12:16, 12:16] = 255  # a bright square in the middle
    gen = torch.Generator().manual_seed(0)
    still = lenet.augment(image, gen)
    assert still.shape == (1, 1, 28, 28) and torch.allclose(still, lenet.image_batch(image), atol=1e-6)
    moved = lenet.augment(image.expand(64, 28, 28), gen, shift=3)
    assert moved.min() >= 0 and moved.max() <= 1
    ys, xs = torch.meshgrid(torch.arange(28.0), torch.arange(28.0), indexing="ij")
    mass = moved[:, 0].sum(dim=(1, 2))
    centre_x = (moved[:, 0] * xs).sum(dim=(1, 2)) / mass - 13.5
    centre_y = (moved[:, 0] * ys).sum(dim=(1, 2)) / mass - 13.5
    assert centre_x.abs().max() <= 3 + 1e-4 and centre_y.abs().max() <= 3 + 1e-4
    assert centre_x.std() > 1  # shifts are spread over the range, not all zero
    turned = lenet.augment(image.expand(8, 28, 28), gen, rotation=90, scale=0.2)
    assert not torch.allclose(turned, lenet.image_batch(image).expand(8, 1, 28, 28))


def test_augment_flip_mirrors_about_half_the_copies_exactly_and_draws_nothing_without_it():
    """`augment.flip`: each copy is the image or its mirror image, pixel for pixel, about half each.
    The mirror draws come after the affine ones: on, a copy is off's copy or its mirror image, as
    the draw that follows off's says; so off draws what it drew before the option."""
    gen = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (200, 28, 28), generator=gen, dtype=torch.uint8)
    x = lenet.image_batch(images)
    for flipped in (lenet.augment(images, torch.Generator().manual_seed(1), flip=True),
                    digitcnn.augment(x, torch.Generator().manual_seed(1), 0.0, 0.0, 0.0, flip=True)):
        same = (flipped - x).abs().amax(dim=(1, 2, 3)) < 1e-5
        mirror = (flipped - x.flip(-1)).abs().amax(dim=(1, 2, 3)) < 1e-5
        assert bool((same ^ mirror).all()) and 70 <= int(mirror.sum()) <= 130
    for aug in (lambda g, **f: lenet.augment(images, g, shift=2.0, rotation=10.0, scale=0.1, **f),
                lambda g, **f: digitcnn.augment(x, g, 10.0, 0.1, 2.0, **f)):
        g_off, g_on = torch.Generator().manual_seed(2), torch.Generator().manual_seed(2)
        off, on = aug(g_off, flip=False), aug(g_on, flip=True)
        mirrored = (torch.rand(len(images), generator=g_off) < 0.5).view(-1, 1, 1, 1)
        torch.testing.assert_close(on, torch.where(mirrored, off.flip(-1), off), atol=1e-5, rtol=0)


@pytest.mark.parametrize("augmentation", [None, {"shift": 0.0, "rotation": 0.0, "scale": 0.0}])
def test_lenet_without_augmentation_trains_exactly_as_before(augmentation):
    # off (None or all zeros) draws nothing from the generator: the default profile's weights
    # are the same as before augmentation existed
    states = []
    for aug in (augmentation, "plain"):
        images, targets, model, optimizer, gen = tiny_set(copies=8)
        extra = () if aug == "plain" else (aug,)
        lenet.distill_epoch(model, optimizer, images, targets, 16, gen, *extra)
        states.append(model.state_dict())
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])


def test_lenet_learns_a_tiny_set_with_augmentation():
    images, targets, model, optimizer, gen = tiny_set()
    augmentation = {"shift": 2.0, "rotation": 10.0, "scale": 0.1}
    for _ in range(8):
        lenet.distill_epoch(model, optimizer, images, targets, 16, gen, augmentation)
    assert (lenet.predict(model, images) == targets).float().mean() >= 0.95


@pytest.mark.parametrize("build", [lambda: lenet.LeNet(9), lambda: DigitReader(9, n_nets=2, width=8)],
                         ids=["lenet", "reader"])
def test_classifier_file_round_trip(tmp_path, build):
    torch.manual_seed(0)
    model = build().eval()
    save_classifier(model, tmp_path / "classifier.pt")
    saved = torch.load(tmp_path / "classifier.pt", weights_only=False)
    reader = isinstance(model, DigitReader)
    assert set(saved) == {"state_dict", "n_classes"} | ({"reader"} if reader else set())
    assert saved["n_classes"] == 9
    loaded = load_classifier(tmp_path / "classifier.pt").eval()
    assert type(loaded) is type(model)
    images = torch.randint(0, 256, (3, 28, 28), dtype=torch.uint8)
    assert torch.equal(loaded(images), model(images))
    torch.save({"weights": 1}, tmp_path / "other.pt")
    with pytest.raises(PipelineError, match="other.pt: not a classifier model file"):
        load_classifier(tmp_path / "other.pt")
    torch.save({**saved, "reader": {"n_nets": 5}}, tmp_path / "wrong.pt")
    with pytest.raises(PipelineError, match="wrong.pt: classifier weights do not fit"):
        load_classifier(tmp_path / "wrong.pt")


# ---------------------------------------------------------------------------------------------
# the stage

DISTILL_KEYS = {"classifier", "teacher", "mislabel", "boundary_shift", "seed", "epochs", "n_classes", "n_train_images", "n_dev_images",
                "final_loss", "train_agreement", "dev_agreement", "dev_accuracy", "teacher_dev_accuracy", "targets_moved",
                "classifier_parameters", "teacher_parameters", "teacher_parameters_classifier_path", "device"}


def test_distill_from_an_infogan_checkpoint(tmp_path):
    data = make_prepared(tmp_path / "prepared")
    teacher = untrained_infogan_checkpoint(tmp_path / "cluster" / "epoch_000.pt")
    out = run_distill(tmp_path, data, teacher, checkpoint=0)
    metrics = info(out)
    assert set(metrics) == DISTILL_KEYS and metrics["teacher"].endswith("epoch_000.pt")
    assert set(json.loads((out / "live" / "metrics.json").read_text())) == {"classifier_dev_accuracy"}
    assert metrics["classifier_parameters"] == 428_074  # K = 4: LeNet
    assert metrics["teacher_parameters"] == infogan.parameter_counts(infogan.InfoGAN(4, noise_dim=8))["total"]
    assert metrics["n_train_images"] == 32 and metrics["n_dev_images"] == 24
    saved = torch.load(out / "classifier.pt", weights_only=False)
    assert set(saved) == {"state_dict", "n_classes"} and saved["n_classes"] == 4
    assert isinstance(load_classifier(out / "classifier.pt"), lenet.LeNet)
    tsv = (out / "live" / "plots" / "metrics" / "loss.tsv").read_text().splitlines()
    assert len(tsv) == 1 + 3  # header + 3 epochs


def test_distill_can_keep_the_clusterers_own_nets(tmp_path):
    """distill.classifier: clusterer: the classifier is the self-labelled clusterer's ensemble,
    reading every image as the clusterer does, and nothing is trained."""
    data = make_prepared(tmp_path / "prepared")
    torch.manual_seed(0)
    config = {"n_clusters": 4, "width": 8, "feature_dim": 16, "n_nets": 2}
    teacher = SelfLabelClusterer(config, [DigitCNN(4, 8, 16) for _ in range(2)])
    save_clusterer(teacher, tmp_path / "cluster" / "final.pt")
    out = run_distill(tmp_path, data, tmp_path / "cluster" / "final.pt", classifier="clusterer",
                      cluster={"method": "selflabel"})
    metrics = info(out)
    assert set(metrics) == DISTILL_KEYS and metrics["epochs"] == 0 and metrics["final_loss"] is None
    assert metrics["dev_accuracy"] == metrics["teacher_dev_accuracy"] and metrics["dev_agreement"] == 1.0
    reader = load_classifier(out / "classifier.pt")
    assert isinstance(reader, DigitReader) and metrics["classifier_parameters"] == teacher.parameter_counts()["total"]
    images = torch.randint(0, 256, (5, 28, 28), dtype=torch.uint8)
    assert torch.allclose(reader(images).exp(), teacher.probabilities(images), atol=1e-6)


def test_the_clusterers_nets_need_a_classifying_clusterer(tmp_path):
    data = make_prepared(tmp_path / "prepared")
    teacher = untrained_infogan_checkpoint(tmp_path / "cluster" / "final.pt")
    with pytest.raises(PipelineError, match="'distill.classifier: clusterer' needs .*'cluster.method: infogan'"):
        run_distill(tmp_path, data, teacher, classifier="clusterer")
    with pytest.raises(PipelineError, match="'distill.mislabel' .* needs 'distill.classifier: lenet'"):
        run_distill(tmp_path, data, teacher, classifier="clusterer", mislabel=0.1,
                    cluster={"method": "selflabel"})


def test_distill_copies_a_good_teacher(tmp_path, monkeypatch):
    monkeypatch.setitem(CLUSTERERS, "quadrant", QuadrantClusterer)
    data = make_prepared(tmp_path / "prepared")
    save_clusterer(QuadrantClusterer(), tmp_path / "cluster" / "final.pt")
    out = run_distill(tmp_path, data, tmp_path / "cluster" / "final.pt", epochs=8)
    metrics = info(out)
    assert metrics["teacher_dev_accuracy"] == 1.0
    assert metrics["train_agreement"] >= 0.95
    assert metrics["dev_accuracy"] >= 0.9 and metrics["dev_agreement"] >= 0.9
    live = [line.split("\t") for line in (out / "live" / "plots" / "metrics" / "loss.tsv").read_text().splitlines()]
    assert float(live[-1][1]) < 0.5 * float(live[1][1])  # the loss decreases


@pytest.mark.parametrize("error", ["mislabel", "boundary_shift"])
def test_distill_moves_that_share_of_targets_to_wrong_clusters(tmp_path, monkeypatch, error):
    # the ablation's controlled errors: a perfect teacher, 30 % of its training targets moved
    monkeypatch.setitem(CLUSTERERS, "quadrant", QuadrantClusterer)
    data = make_prepared(tmp_path / "prepared")
    save_clusterer(QuadrantClusterer(), tmp_path / "cluster" / "final.pt")
    out = run_distill(tmp_path, data, tmp_path / "cluster" / "final.pt", epochs=1, **{error: 0.3})
    metrics = info(out)
    assert metrics[error] == 0.3 and metrics["teacher_dev_accuracy"] == 1.0
    n = metrics["n_train_images"]
    assert metrics["targets_moved"] == pytest.approx(round(0.3 * n) / n)


def test_distill_rejects_a_negative_augmentation(tmp_path):
    data = make_prepared(tmp_path / "prepared")
    teacher = untrained_infogan_checkpoint(tmp_path / "cluster" / "final.pt")
    with pytest.raises(PipelineError, match=r"'distill.augment.shift' must be >= 0.0, got -1.0"):
        run_distill(tmp_path, data, teacher, augment={"shift": -1.0})
    assert not (tmp_path / "run" / "classifier.pt").exists()


def test_mislabel_moves_exactly_the_share_and_always_to_another_cluster():
    clusters = torch.arange(1000) % 9
    moved = mislabel(clusters, 0.25, 9, seed=3)
    assert ((moved != clusters).sum() == 250) and moved.min() >= 0 and moved.max() < 9
    assert torch.equal(moved, mislabel(clusters, 0.25, 9, seed=3))  # repeatable
    assert not torch.equal(moved, mislabel(clusters, 0.25, 9, seed=4))
    assert torch.equal(mislabel(clusters, 0.0, 9, seed=3), clusters)


def test_distill_rejects_a_teacher_with_other_k(tmp_path):
    data = make_prepared(tmp_path / "prepared")
    teacher = untrained_infogan_checkpoint(tmp_path / "k9" / "final.pt", n_classes=9)
    with pytest.raises(PipelineError, match="k9/final.pt: clusterer has 9 clusters"):
        run_distill(tmp_path, data, teacher)


def test_distill_never_reads_input_labels(tmp_path, monkeypatch):
    data = make_prepared(tmp_path / "prepared")
    teacher = untrained_infogan_checkpoint(tmp_path / "cluster" / "final.pt")
    opened, truth_keys = record_loads(monkeypatch)
    run_distill(tmp_path, data, teacher, epochs=1)
    assert set(opened) == {"final.pt", "train.pt", "dev.pt", "dev_truth.pt"}  # no test file
    assert set(truth_keys) == {"image_labels"}


def test_distill_trains_identically_without_truth(tmp_path):
    data = make_prepared(tmp_path / "prepared")
    blind = tmp_path / "blind"
    blind.mkdir()
    for split in ("train", "dev"):
        shutil.copy(data / f"{split}.pt", blind / f"{split}.pt")
    teacher = untrained_infogan_checkpoint(tmp_path / "cluster" / "final.pt")
    a = torch.load(run_distill(tmp_path, data, teacher, "with") / "classifier.pt", weights_only=False)
    without = run_distill(tmp_path, blind, teacher, "without")
    b = torch.load(without / "classifier.pt", weights_only=False)
    assert all(torch.equal(a["state_dict"][k], b["state_dict"][k]) for k in a["state_dict"])
    metrics = info(without)
    assert set(metrics) == DISTILL_KEYS
    assert metrics["dev_accuracy"] is None and metrics["teacher_dev_accuracy"] is None


def test_shift_boundaries_moves_the_images_nearest_another_cluster():
    # two clusters on a line of one-pixel "images": 0..4 near 0, 10..14 near 10, and 6, 7 between
    values = torch.tensor([0, 1, 2, 3, 4, 6, 7, 10, 11, 12, 13, 14], dtype=torch.float32)
    images = values[:, None, None].expand(-1, 28, 28).contiguous()
    clusters = torch.tensor([0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1])
    moved = shift_boundaries(images, clusters, 2 / 12, 2)
    # cluster means 2.67 and 11.17: 7 (in 1) and 6 (in 0) sit nearest the other mean
    assert (moved != clusters).nonzero().flatten().tolist() == [5, 6]
    assert moved.tolist() == [0, 0, 0, 0, 0, 1, 0, 1, 1, 1, 1, 1]
    assert torch.equal(shift_boundaries(images, clusters, 0.0, 2), clusters)
    nine = torch.randint(0, 9, (200,), generator=torch.Generator().manual_seed(0))
    pictures = torch.randint(0, 256, (200, 28, 28), generator=torch.Generator().manual_seed(1))
    shifted = shift_boundaries(pictures.to(torch.uint8), nine, 0.25, 9)
    assert (shifted != nine).sum() == 50 and shifted.max() < 9  # the share, each to another cluster

