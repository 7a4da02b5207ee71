"""The re-read step: SATNet's votes reach exactly the released givens, hide them from SATNet,
and correct a misreading classifier; the new reader survives a solver checkpoint."""
import numpy as np
import pytest
import torch
from torch import nn

from satground.boards.data import build_visual_boards, onehot
from satground.readers.digitcnn import DigitReader
from satground.readers.lenet import LeNet
from satground.solver.models import SymbolicSolver, VisualSolver, checkpoint, load_solver
from satground.solver.check import Checked, checked_readings, verified_readings
from satground.solver.reread import pseudo_labels, reground, satnet_votes, train_reader
from satground.boards.sudoku import generate_puzzles
from satground.harness.params import Reread

READER = Reread().reader_training()  # the schema's reader rate, batch and augmentation (and the cnn's width)
LENET = Reread().reader_training("lenet")  # the same without a width, which sizes the cnn alone

K = 4
torch.set_num_threads(1)


class IndexReader(nn.Module):
    """A classifier that reads image i (pixel (0, 0) holds i) as `logits[i]`."""

    def __init__(self, logits):
        super().__init__()
        self.logits = logits

    def forward(self, images):
        index = images.reshape(len(images), -1)[:, 0]
        if index.dtype != torch.uint8:  # image_batch scaled it to [0, 1]
            index = (index * 255).round()
        return self.logits[index.long()]


class OracleSolver(SymbolicSolver):
    """Answers every blank cell with the board's true digit and records what it was shown."""

    def __init__(self, solutions):
        super().__init__(2, m=4, aux=0)
        self.truth, self.shown = onehot(torch.as_tensor(solutions).reshape(len(solutions), -1), K), []

    def forward(self, z_in, is_input):  # one batch holds every board
        self.shown.append((z_in.clone(), is_input.clone()))
        return torch.where(is_input.repeat_interleave(K, 1), z_in, self.truth)


def boards_with_index_images(n_boards=30):
    puzzles, solutions = generate_puzzles(n_boards, 2, seed=3)
    digits = np.repeat(np.arange(1, K + 1), 10).astype(np.uint8)
    images = np.zeros((len(digits), 28, 28), np.uint8)
    images[:, 0, 0] = np.arange(len(digits))
    boards = build_visual_boards(puzzles, solutions, images, digits, 2, seed=1)
    return boards, torch.from_numpy(digits).long() - 1, solutions


def test_votes_correct_a_misreading_classifier_from_released_givens_only():
    boards, digits, solutions = boards_with_index_images()
    logits = 4.0 * torch.nn.functional.one_hot(digits, K).float()
    misread = torch.arange(0, len(digits), 5)  # every fifth image read as the next digit
    logits[misread] = 4.0 * torch.nn.functional.one_hot((digits[misread] + 1) % K, K).float()
    solver = OracleSolver(solutions)
    model = VisualSolver(IndexReader(logits), solver)

    votes, counts, reading = satnet_votes(model, boards, release=0.5, passes=3, batch_size=len(boards),
                                          generator=torch.Generator().manual_seed(0))
    # SATNet saw each released given as a blank: zero input there, and not marked as input
    for z_in, seen in solver.shown:
        assert (z_in.reshape(len(z_in), -1, K)[~seen] == 0).all()
    assert len(solver.shown) == 3
    assert int(counts.sum()) == sum(int((boards.is_input & ~seen).sum()) for _, seen in solver.shown)
    used = counts > 0
    assert used.sum() >= len(digits) - 2
    assert (reading.argmax(1)[misread] != digits[misread]).all()
    fixed = pseudo_labels(votes, reading)
    assert (fixed[used] == digits[used]).all()  # the votes outweigh the classifier's misreading


def test_the_solution_context_shows_the_blank_labels_and_no_given_label():
    """reread.context solution: SATNet sees every blank cell as an input holding its training
    label, the unreleased givens as read, and the released givens as 0; only `voters` vote."""
    boards, digits, solutions = boards_with_index_images()
    solver = OracleSolver(solutions)
    model = VisualSolver(IndexReader(4.0 * torch.nn.functional.one_hot(digits, K).float()), solver)
    voters = torch.zeros_like(boards.is_input)
    voters[:, :8] = True  # the givens of the first two rows may vote
    _, counts, _ = satnet_votes(model, boards, release=1.0, passes=1, batch_size=len(boards),
                                generator=torch.Generator().manual_seed(0), context="solution",
                                voters=voters)
    (z_in, seen), = solver.shown
    z, blank = z_in.reshape(len(z_in), -1, K), ~boards.is_input
    assert seen[blank].all() and (z[blank].sum(-1) == 1).all()
    assert torch.equal(z[blank].argmax(-1) + 1, boards.labels[blank].long())
    released = boards.is_input & ~seen
    assert torch.equal(released, boards.is_input)  # release 1: every given
    assert (z[released] == 0).all() and int(counts.sum()) == int((released & voters).sum())
    with pytest.raises(ValueError, match="context"):
        satnet_votes(model, boards, 1.0, 1, len(boards), torch.Generator(), context="truth")


def test_reground_reads_the_cluster_map_off_a_satnet_that_knows_the_rules():
    """train.reground: a classifier that speaks clusters (cluster c holds digit CLUSTERED[c], every
    seventh image in a wrong cluster) and a wrong ground permutation (two clusters swapped); a
    SATNet that knows the rules, shown each board's blank labels and no given, names the map.
    Every given is released, so no given's reading or label reaches SATNet."""
    from dataclasses import replace
    boards, digits, solutions = boards_with_index_images()
    boards = replace(boards, labels=torch.where(boards.is_input, 0, boards.labels))  # ungrounded
    clustered = torch.tensor([2, 0, 3, 1])  # cluster c -> digit
    cluster_of = torch.argsort(clustered)   # digit d -> its cluster
    clusters = cluster_of[digits]
    clusters[::7] = (clusters[::7] + 1) % K
    solver = OracleSolver(solutions)
    ground = clustered[torch.tensor([1, 0, 2, 3])]
    new, report = reground(IndexReader(4.0 * torch.nn.functional.one_hot(clusters, K).float()), solver,
                           boards, ground, batch_size=len(boards))
    assert torch.equal(new, clustered) and report["permutation"] == clustered.tolist()
    assert not report["agrees_with_ground"] and report["ground_permutation"] == ground.tolist()
    assert 0.8 < report["agreement"] < 1 and report["ground_agreement"] < report["agreement"] - 0.3
    assert sum(map(sum, report["cooccurrence"])) == report["images_voted"] > 0.9 * len(digits)
    (z_in, seen), = solver.shown
    assert not (seen & boards.is_input).any() and (z_in.reshape(len(z_in), -1, K)[boards.is_input] == 0).all()
    same, report = reground(IndexReader(4.0 * torch.nn.functional.one_hot(clusters, K).float()),
                            OracleSolver(solutions), boards, clustered, batch_size=len(boards))
    assert torch.equal(same, clustered) and report["agrees_with_ground"]  # a right map stays


def test_a_reader_trained_on_pseudo_labels_replaces_the_classifier_in_a_solver_file(tmp_path):
    rng = np.random.default_rng(0)
    digits = np.repeat(np.arange(K), 48)
    images = rng.integers(0, 30, size=(len(digits), 28, 28)).astype(np.uint8)
    shapes = np.zeros((K, 28, 28), np.uint8)  # shapes deskewing cannot merge: -, |, box, +
    shapes[0, 12:16, 4:24] = shapes[1, 4:24, 12:16] = 255
    shapes[2, 6:22, 6:22] = 255
    shapes[2, 10:18, 10:18] = 0
    shapes[3, 12:16, 4:24] = shapes[3, 4:24, 12:16] = 255
    for i, d in enumerate(digits):
        images[i] = np.maximum(images[i], shapes[d])
    images, labels = torch.from_numpy(images), torch.from_numpy(digits).long()
    for kind in ("cnn", "lenet"):
        reader = train_reader(kind, images, labels, K, epochs=20, nets=2, seed=0,
                              **(READER if kind == "cnn" else LENET))
        assert (reader(images).argmax(1) == labels).float().mean() >= 0.95, kind
    model = VisualSolver(reader if isinstance(reader, DigitReader) else
                         train_reader("cnn", images, labels, K, 8, 2, 0, **READER), SymbolicSolver(2, 8, 2))
    path = tmp_path / "solver.pt"
    torch.save(checkpoint(model), path)
    again = load_solver(path, kind="visual")
    assert isinstance(again.classifier, DigitReader) and len(again.classifier.nets) == 2
    again.train()  # frozen: batch norms keep their running statistics even in training mode
    with torch.no_grad():
        assert torch.allclose(again.classifier(images[:8]), model.classifier(images[:8]), atol=1e-6)
    # the paper's LeNet still loads as before
    torch.save(checkpoint(VisualSolver(LeNet(K), SymbolicSolver(2, 8, 2))), path)
    assert isinstance(load_solver(path, kind="visual").classifier, LeNet)


def test_a_reader_that_keeps_the_classifier_averages_both_and_saves_them(tmp_path):
    """reread.keep_classifier: the CNNs' mean probability and the end-to-end classifier's, half
    and half, the classifier's weights unchanged and frozen; the solver file rebuilds it."""
    rng = np.random.default_rng(2)
    images = torch.from_numpy(rng.integers(0, 256, size=(64, 28, 28)).astype(np.uint8))
    labels = torch.from_numpy(rng.integers(0, K, size=64)).long()
    classifier = LeNet(K)
    kept = train_reader("cnn", images, labels, K, epochs=1, nets=2, seed=3, keep=classifier, **READER)
    alone = train_reader("cnn", images, labels, K, epochs=1, nets=2, seed=3, **READER)
    with torch.no_grad():
        want = (alone(images).exp() + torch.softmax(classifier(images), 1)) / 2
        assert torch.allclose(kept(images).exp(), want, atol=1e-6)
    assert all(torch.equal(a, b) for a, b in zip(kept.lenet.parameters(), classifier.parameters()))
    model = VisualSolver(kept, SymbolicSolver(2, 8, 2))
    torch.save(checkpoint(model), tmp_path / "solver.pt")
    again = load_solver(tmp_path / "solver.pt", kind="visual").classifier
    assert again.lenet is not None and not again.train().lenet.training
    with torch.no_grad():
        assert torch.allclose(again(images), kept(images), atol=1e-6)
    with pytest.raises(ValueError, match="only a cnn reader keeps the classifier"):
        train_reader("lenet", images, labels, K, epochs=1, nets=1, seed=0, keep=classifier, **LENET)


def test_the_reader_width_sizes_every_cnn_and_survives_the_solver_file(tmp_path):
    """reread.width: each CNN's conv blocks are width, 2 width, 2 width channels wide, and a
    solver file keeps the width, so the reader loads and reads as it was trained."""
    rng = np.random.default_rng(1)
    images = torch.from_numpy(rng.integers(0, 256, size=(32, 28, 28)).astype(np.uint8))
    labels = torch.arange(32) % K
    reader = train_reader("cnn", images, labels, K, epochs=1, nets=2, seed=0, **{**READER, "width": 8})
    convs = [m.out_channels for m in reader.nets[0].body if isinstance(m, torch.nn.Conv2d)]
    assert convs == [8, 16, 16]
    path = tmp_path / "solver.pt"
    torch.save(checkpoint(VisualSolver(reader, SymbolicSolver(2, 8, 2))), path)
    again = load_solver(path, kind="visual").classifier
    with torch.no_grad():
        assert torch.equal(again(images), reader(images))
    with pytest.raises(ValueError, match="width"):
        train_reader("lenet", images, labels, K, epochs=1, nets=1, seed=0, **{**LENET, "width": 8})


def test_label_smoothing_makes_the_reader_less_sure_and_zero_is_the_plain_loss():
    """reread.label_smoothing: the CNNs fitted to the same labels end less sure of them (the
    check can then overrule a misreading), and 0 trains the very reader the plain loss does."""
    rng = np.random.default_rng(2)
    labels = torch.arange(64) % K
    images = torch.from_numpy(rng.integers(0, 60, size=(64, 28, 28)).astype(np.uint8))
    for i, label in enumerate(labels.tolist()):  # a bright bar whose row tells the label
        images[i, 4 + 5 * label:7 + 5 * label, 6:22] = 255
    settings = {k: v for k, v in READER.items() if k != "label_smoothing"} | {"width": 8, "batch_size": 16}

    def reader(**smoothing):
        return train_reader("cnn", images, labels, K, epochs=15, nets=1, seed=0, **settings, **smoothing)
    plain, zero, smooth = reader(), reader(label_smoothing=0.0), reader(label_smoothing=0.3)
    assert all(torch.equal(a, b) for a, b in zip(plain.state_dict().values(), zero.state_dict().values()))
    with torch.no_grad():
        sure = [r(images).softmax(1).max(1).values.mean().item() for r in (plain, smooth)]
    assert sure[1] < sure[0] - 0.05, sure
    with pytest.raises(ValueError, match="smoothing"):
        train_reader("lenet", images, labels, K, epochs=1, nets=1, seed=0, label_smoothing=0.1, **LENET)


def test_the_reader_is_the_same_whether_its_cnns_train_in_turn_or_side_by_side():
    """train_reader trains its CNNs on as many threads as torch has: the nets must not depend on
    that (each seeds its own weights and draws), or a busy or bigger machine reads differently."""
    rng = np.random.default_rng(1)
    images = torch.from_numpy(rng.integers(0, 256, size=(96, 28, 28)).astype(np.uint8))
    labels = torch.from_numpy(rng.integers(0, K, size=96)).long()
    threads = torch.get_num_threads()
    try:
        readers = []
        for n in (1, 3):
            torch.set_num_threads(n)
            readers.append(train_reader("cnn", images, labels, K, epochs=2, nets=3, seed=5, **READER))
            assert torch.get_num_threads() == n  # restored for the stage's SATNet
    finally:
        torch.set_num_threads(threads)
    one, many = (r.state_dict() for r in readers)
    assert all(torch.equal(one[k], many[k]) for k in one)
    assert not torch.equal(one["nets.0.head.weight"], one["nets.1.head.weight"])  # own seeds


def misread_givens_before_an_oracle():
    """Boards whose reader misreads every fifth image (4.0 logits on the next digit) in front of
    an OracleSolver: (boards, solutions, model, the given cells' images, their readings z)."""
    boards, digits, solutions = boards_with_index_images()
    logits = 4.0 * torch.nn.functional.one_hot(digits, K).float()
    misread = torch.arange(0, len(digits), 5)
    logits[misread] = 4.0 * torch.nn.functional.one_hot((digits[misread] + 1) % K, K).float()
    model = VisualSolver(IndexReader(logits), OracleSolver(solutions))
    images = boards.images[boards.cell_image[boards.is_input]]
    return boards, solutions, model, images, model.input_probs(images, boards.is_input)


def test_the_check_hides_each_given_once_and_overrules_a_misreading():
    """SATNet checks every given exactly once, from a pass in which it does not see it; a
    misreading it contradicts is overruled, a reading it cannot judge (uniform) is kept."""
    boards, solutions, model, images, z = misread_givens_before_an_oracle()

    checked = checked_readings(model.solver, z, boards.is_input, folds=3)
    passes = model.solver.shown
    assert len(passes) == 3
    hidden = torch.stack([boards.is_input & ~seen for _, seen in passes])
    assert torch.equal(hidden.sum(0), boards.is_input.long())  # each given checked exactly once
    for z_in, seen in passes:
        assert (z_in.reshape(len(z_in), -1, K)[~seen] == 0).all()
    read = checked.reshape(len(boards), -1, K).argmax(2)[boards.is_input]
    truth = torch.as_tensor(solutions).reshape(len(solutions), -1)[boards.is_input] - 1
    assert (z.reshape(len(boards), -1, K).argmax(2)[boards.is_input] != truth).any()
    assert torch.equal(read, truth)
    assert (checked.reshape(len(boards), -1, K)[~boards.is_input] == 0).all()

    class Unsure(OracleSolver):
        def forward(self, z_in, is_input):
            return torch.full_like(z_in, 1.0 / K)

    kept = checked_readings(Unsure(solutions), z, boards.is_input, folds=3)
    assert torch.allclose(kept, z, atol=1e-4)


def test_the_checks_later_rounds_see_the_last_rounds_checked_readings():
    """evaluate.check_rounds: each later round hides the same folds, and SATNet sees the other
    givens as the round before checked them, no longer as read; the classifier's own reading
    counts once (an unchanged SATNet inference leaves the checked readings where round 1 left
    them); a checked solver runs every round's passes, then its solve."""
    boards, solutions, model, images, z = misread_givens_before_an_oracle()
    once = checked_readings(model.solver, z, boards.is_input, folds=3)
    model.solver.shown.clear()
    twice = checked_readings(model.solver, z, boards.is_input, folds=3, rounds=2)
    passes = model.solver.shown
    assert len(passes) == 6
    for (first, seen), (later, seen_later) in zip(passes[:3], passes[3:]):
        assert torch.equal(seen, seen_later)  # the same folds each round
        assert torch.allclose(first, z * seen.repeat_interleave(K, 1))  # round 1: as read
        assert torch.allclose(later, once * seen.repeat_interleave(K, 1))  # round 2: as checked
    assert not torch.allclose(once, z, atol=1e-3)  # round 1 changed the misread givens' readings
    assert torch.allclose(twice, once, atol=1e-6)
    model.solver.shown.clear()
    Checked(model, folds=3, starts=2, rounds=2)(images, boards.is_input)
    assert len(model.solver.shown) == 3 * 2 + 2


@pytest.mark.parametrize("context", ["solved", "solved_soft"])
def test_the_check_can_see_the_blanks_as_satnet_solves_them(context):
    """evaluate.check_context: each round first solves the board from its readings (one pass that
    sees the givens alone), then infers each fold from the other givens and every blank as solved:
    one-hot at SATNet's most likely digit ("solved") or its outputs renormalised ("solved_soft");
    a misreading is overruled as before."""
    boards, solutions, model, images, z = misread_givens_before_an_oracle()

    class Vague(OracleSolver):  # the true digit likeliest, never certain
        def forward(self, z_in, is_input):
            self.shown.append((z_in.clone(), is_input.clone()))
            return torch.where(is_input.repeat_interleave(K, 1), z_in, 0.9 * self.truth + 0.01)

    solver = Vague(solutions)
    checked = checked_readings(solver, z, boards.is_input, folds=3, context=context)
    assert len(solver.shown) == 1 + 3
    solve_in, solve_seen = solver.shown[0]
    assert torch.equal(solve_seen, boards.is_input) and torch.equal(solve_in, z)
    blanks = solver.truth if context == "solved" else (0.9 * solver.truth + 0.01) / (0.9 + 0.01 * K)
    blank = (~boards.is_input).repeat_interleave(K, 1)
    hidden = torch.zeros_like(boards.is_input)
    for z_in, seen in solver.shown[1:]:
        out = boards.is_input & ~seen
        assert torch.equal(seen, ~out)  # every blank and every other given shown
        assert torch.allclose(z_in[blank], blanks[blank])
        assert (z_in.reshape(len(z_in), -1, K)[out] == 0).all()
        hidden |= out
    assert torch.equal(hidden, boards.is_input)
    truth = torch.as_tensor(solutions).reshape(len(solutions), -1)[boards.is_input] - 1
    assert torch.equal(checked.reshape(len(boards), -1, K).argmax(2)[boards.is_input], truth)
    assert (checked.reshape(len(boards), -1, K)[~boards.is_input] == 0).all()
    with pytest.raises(ValueError, match="context"):
        checked_readings(solver, z, boards.is_input, folds=3, context="solution")


def true_digit_second(digits: torch.Tensor) -> torch.Tensor:
    """Reader logits: every fifth image read as the next digit with its true one second (log
    odds -0.5), the rest read right."""
    logits = 4.0 * torch.nn.functional.one_hot(digits, K).float()
    misread = torch.arange(0, len(digits), 5)
    logits[misread] = (3.0 * torch.nn.functional.one_hot((digits[misread] + 1) % K, K)
                       + 2.5 * torch.nn.functional.one_hot(digits[misread], K)).float()
    return logits


class Consistent(OracleSolver):
    """Solves a board the surer the fewer of its shown givens are wrong: each blank's output is
    the true digit with weight 0.5 ** (wrong givens shown), the rest spread evenly."""

    def forward(self, z_in, is_input):
        self.shown.append((z_in.clone(), is_input.clone()))
        B = len(z_in)
        truth = self.truth.reshape(B, -1, K)
        wrong = ((z_in.reshape(B, -1, K).argmax(2) != truth.argmax(2)) & is_input).sum(1)
        sure = (0.5 ** wrong.float())[:, None, None]
        blanks = (sure * truth + (1 - sure) / K).reshape(B, -1)
        return torch.where(is_input.repeat_interleave(K, 1), z_in, blanks)


@pytest.mark.parametrize("rounds", [1, 2])
def test_the_verify_takes_the_second_reading_whose_solve_satnet_is_surer_of(rounds):
    """evaluate.verify_*: the least sure givens are tried at their second reading, a solve per try;
    a board takes its best try where the solve's gain outweighs the readings' log odds (one a
    round: a board misread twice needs two rounds); doubtful 0 or weight 0 change nothing."""
    boards, digits, solutions = boards_with_index_images()
    logits = true_digit_second(digits)
    model = VisualSolver(IndexReader(logits), Consistent(solutions))
    given = boards.is_input
    z = model.input_probs(boards.images[boards.cell_image[given]], given)
    truth = torch.as_tensor(solutions).reshape(len(solutions), -1) - 1
    wrong_before = (z.reshape(len(boards), -1, K).argmax(2) != truth) & given
    doubtful = int(wrong_before.sum(1).max()) + 1
    assert (wrong_before.sum(1) >= 2).any() and (wrong_before.sum(1) == 1).any()

    verified = verified_readings(model.solver, z, given, doubtful, rounds=rounds)
    assert len(model.solver.shown) == rounds * (doubtful + 1)
    for z_in, seen in model.solver.shown:  # every given shown one-hot, nothing hidden
        assert torch.equal(seen, given)
        assert torch.equal(z_in.reshape(len(boards), -1, K).sum(2), given.float())
    wrong_after = (verified.reshape(len(boards), -1, K).argmax(2) != truth) & given
    assert torch.equal(wrong_after.sum(1), (wrong_before.sum(1) - rounds).clamp_min(0))
    same = wrong_after == wrong_before  # a given left alone keeps its reading; a taken one swaps its top two
    assert torch.equal(verified.reshape(len(boards), -1, K)[same], z.reshape(len(boards), -1, K)[same])
    taken = verified.reshape(len(boards), -1, K)[~same].sort(1).values
    assert torch.equal(taken, z.reshape(len(boards), -1, K)[~same].sort(1).values)
    assert torch.equal(verified_readings(model.solver, z, given, 0), z)
    assert torch.equal(verified_readings(model.solver, z, given, doubtful, weight=0.0), z)


def test_the_verify_tries_readings_past_the_second_where_asked():
    """evaluate.verify_readings: a given misread with its true digit third is fixed where the
    verify tries three readings, at (doubtful * 2 + 1) passes a round, and not where it tries
    two, which leave exactly those; three readings leave no given wrong; two is the default."""
    boards, digits, solutions = boards_with_index_images()
    one_hot = lambda d: torch.nn.functional.one_hot(d % K, K).float()
    logits = 4.0 * one_hot(digits)
    third, second = torch.arange(0, len(digits), 9), torch.arange(4, len(digits), 9)
    logits[third] = 3.0 * one_hot(digits[third] + 1) + 2.5 * one_hot(digits[third] + 2) + 2.0 * one_hot(digits[third])
    logits[second] = 3.0 * one_hot(digits[second] + 1) + 2.5 * one_hot(digits[second])
    model = VisualSolver(IndexReader(logits), Consistent(solutions))
    given = boards.is_input
    z = model.input_probs(boards.images[boards.cell_image[given]], given)
    truth = torch.as_tensor(solutions).reshape(len(solutions), -1) - 1
    top = z.reshape(len(boards), -1, K).topk(3, dim=2).indices
    wrong_before = (top[..., 0] != truth) & given
    assert ((top[..., 2] == truth) & wrong_before).any() and ((top[..., 1] == truth) & wrong_before).any()
    doubtful, rounds = int(wrong_before.sum(1).max()) + 1, int(wrong_before.sum(1).max())

    def wrong_after(readings):
        model.solver.shown.clear()
        verified = verified_readings(model.solver, z, given, doubtful, rounds=rounds, readings=readings)
        assert len(model.solver.shown) == rounds * (doubtful * (readings - 1) + 1)
        return (verified.reshape(len(boards), -1, K).argmax(2) != truth) & given

    two, three = wrong_after(2), wrong_after(3)
    assert not three.any()
    assert torch.equal(two, wrong_before & (top[..., 2] == truth))
    assert torch.equal(verified_readings(model.solver, z, given, doubtful, rounds=rounds),
                       verified_readings(model.solver, z, given, doubtful, rounds=rounds, readings=2))


class ConsistentOnAnySubset(Consistent):
    """Consistent on any subset of the boards, each told by its givens' positions (unique here)."""

    def __init__(self, solutions, is_input):
        super().__init__(solutions)
        self.masks, self.full = is_input, self.truth

    def forward(self, z_in, is_input):
        rows = (is_input[:, None, :] == self.masks[None]).all(2).float().argmax(1)
        self.truth = self.full[rows]
        try:
            return super().forward(z_in, is_input)
        finally:
            self.truth = self.full


@pytest.mark.parametrize("patience", [1, 2])
def test_boards_leave_the_verify_after_rounds_without_a_win_and_a_deterministic_solver_reads_the_same(patience):
    """evaluate.verify_patience: after `patience` rounds in a row in which no try of a board won,
    the board is no longer solved; with a solver that answers a board the same every time, the
    readings are those of the verify without it, at fewer boards solved; a board misread w times
    wins in its first w rounds, then stays `patience` rounds more."""
    boards, digits, solutions = boards_with_index_images()
    given = boards.is_input
    assert len(torch.unique(given, dim=0)) == len(boards)
    logits = true_digit_second(digits)
    solver = ConsistentOnAnySubset(solutions, given)
    z = VisualSolver(IndexReader(logits), solver).input_probs(boards.images[boards.cell_image[given]], given)
    truth = torch.as_tensor(solutions).reshape(len(solutions), -1) - 1
    wrong = ((z.reshape(len(boards), -1, K).argmax(2) != truth) & given).sum(1)
    doubtful, rounds = int(wrong.max()) + 1, int(wrong.max()) + patience + 2
    assert (wrong == 0).any() and (wrong > 0).any()

    def verify(patience):
        solver.shown.clear()
        verified = verified_readings(solver, z, given, doubtful, rounds=rounds, patience=patience)
        return verified, [len(z_in) for z_in, _ in solver.shown]

    every, solved_every = verify(0)
    left, solved_left = verify(patience)
    assert torch.equal(left, every)
    assert not ((every.reshape(len(boards), -1, K).argmax(2) != truth) & given).any()
    assert solved_every == [len(boards)] * (rounds * (doubtful + 1))
    per_round = solved_left[::doubtful + 1]
    assert solved_left == [n for n in per_round for _ in range(doubtful + 1)]
    assert per_round == [int((wrong + patience > r).sum()) for r in range(int(wrong.max()) + patience)]


def test_the_verify_makes_its_indices_on_its_inputs_device():
    """A GPU run keeps its readings on the GPU while the default device is the CPU: the verify's
    board indices must be made where its inputs are. Here the default device is `meta` and the
    inputs on the CPU: indices made on the default device fail to index them."""
    boards, digits, solutions = boards_with_index_images()
    given = boards.is_input
    logits = true_digit_second(digits)
    solver = ConsistentOnAnySubset(solutions, given)
    z = VisualSolver(IndexReader(logits), solver).input_probs(boards.images[boards.cell_image[given]], given)
    expected = verified_readings(solver, z, given, 3, rounds=2, patience=1)
    with torch.device("meta"):
        assert torch.equal(verified_readings(solver, z, given, 3, rounds=2, patience=1), expected)


def test_a_heavier_check_overrules_a_confident_misreading_that_equal_opinions_tie():
    """A reader sure of a wrong digit against a SATNet sure of the right one: with equal weights
    both floors (1e-4) cancel, a tie; a weight above 1 gives SATNet the reading, and weight 1 is
    the unweighted product."""
    boards, digits, solutions = boards_with_index_images()
    logits = 20.0 * torch.nn.functional.one_hot(digits, K).float()
    misread = torch.arange(0, len(digits), 5)
    logits[misread] = 20.0 * torch.nn.functional.one_hot((digits[misread] + 1) % K, K).float()
    model = VisualSolver(IndexReader(logits), OracleSolver(solutions))
    z = model.input_probs(boards.images[boards.cell_image[boards.is_input]], boards.is_input)
    truth = torch.as_tensor(solutions).reshape(len(solutions), -1)[boards.is_input] - 1

    def read(weight):
        checked = checked_readings(model.solver, z, boards.is_input, folds=3, weight=weight)
        return checked.reshape(len(boards), -1, K)[boards.is_input]

    equal, heavier = read(1.0), read(2.0)
    wrong = equal.argmax(1) != truth
    assert wrong.any() and (equal[wrong].max(1).values < 0.6).all()  # a near tie where misread
    assert torch.equal(heavier.argmax(1), truth)
    unweighted = checked_readings(model.solver, z, boards.is_input, folds=3)
    assert torch.equal(equal, unweighted.reshape(len(boards), -1, K)[boards.is_input])


def test_a_checked_solver_runs_its_final_solve_on_the_checked_readings():
    boards, digits, solutions = boards_with_index_images(8)
    logits = 4.0 * torch.nn.functional.one_hot(digits, K).float()
    logits[::7] = 4.0 * torch.nn.functional.one_hot((digits[::7] + 1) % K, K).float()
    oracle = OracleSolver(solutions)
    plain = VisualSolver(IndexReader(logits), oracle)
    images = boards.images[boards.cell_image[boards.is_input]]
    truth = torch.as_tensor(solutions).reshape(len(solutions), -1)
    assert not torch.equal(plain(images, boards.is_input).reshape(len(boards), -1, K).argmax(2) + 1, truth)
    oracle.shown.clear()
    out = Checked(plain, folds=2)(images, boards.is_input)
    assert len(oracle.shown) == 3  # two check passes, then the solve
    assert torch.equal(out.reshape(len(boards), -1, K).argmax(2) + 1, truth)


def test_the_checked_solve_averages_independent_random_starts():
    """With `starts` > 1 the final solve is the mean of that many SATNet passes on the checked
    readings, each from its own random start (a real SATNet, whose starts end apart)."""
    boards, digits, _ = boards_with_index_images(6)
    torch.manual_seed(0)
    model = VisualSolver(IndexReader(4.0 * torch.nn.functional.one_hot(digits, K).float()),
                         SymbolicSolver(2, m=20, aux=5)).eval()
    images = boards.images[boards.cell_image[boards.is_input]]
    with torch.no_grad():
        torch.manual_seed(1)
        out = Checked(model, folds=2, starts=3)(images, boards.is_input)
        torch.manual_seed(1)
        z = checked_readings(model.solver, model.input_probs(images, boards.is_input), boards.is_input, 2)
        solves = [model.solver(z, boards.is_input) for _ in range(3)]
    assert not torch.allclose(solves[0], solves[1], atol=1e-4)  # the starts differ
    assert torch.allclose(out, sum(solves) / 3, atol=1e-6)
