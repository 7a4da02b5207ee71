"""The proofreader, the symbolic and visual solvers, and solver checkpoints (4x4 boards)."""
import numpy as np
import pytest
import torch

from satground.boards.data import build_visual_boards
from satground.harness.io import PipelineError, save_torch
from satground.readers.lenet import LeNet
from satground.solver.models import (Proofreader, SymbolicSolver, VisualSolver, add_trainable_proofreader,
                                     checkpoint, load_solver, solver_config)
from satground.boards.sudoku import generate_puzzles
from satground.readers.digitcnn import DigitReader
from satground.solver.check import Checked
from satground.boards.metrics import solution_metrics
from satground.solver.training import features_once, predicted_digits, predict, readings_once, solution_scores

torch.set_num_threads(1)
K, C = 4, 16  # 4x4 boards


def random_board_probs(B, gen, sharp=3.0):
    return torch.softmax(sharp * torch.randn(B, C, K, generator=gen), dim=2).reshape(B, C * K)


def test_proofreader_starts_as_the_identity_on_one_hot_and_near_one_hot_cells():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    for n_digits, n_cells in ((4, 16), (9, 81)):
        proofreader = Proofreader(n_cells, n_digits)
        digits = torch.randint(0, n_digits, (8, n_cells), generator=gen)
        one_hot = torch.nn.functional.one_hot(digits, n_digits).float().reshape(8, -1)
        with torch.no_grad():
            # exact one-hot cells come out one-hot up to (K-1) exp(-10) ~ 4e-4
            assert (proofreader(one_hot) - one_hot).abs().max() < 1e-3
            near = 0.999 * one_hot + 0.001 / n_digits
            assert (proofreader(near) - near).abs().max() < 2e-3
            uniform = torch.full_like(one_hot, 1.0 / n_digits)  # an undecided cell stays undecided
            assert (proofreader(uniform) - uniform).abs().max() < 1e-3
            # and any cell keeps its most likely digit
            soft = torch.softmax(torch.randn(8, n_cells, n_digits, generator=gen), 2).reshape(8, -1)
            out = proofreader(soft)
        assert torch.equal(out.reshape(8, n_cells, n_digits).argmax(2),
                           soft.reshape(8, n_cells, n_digits).argmax(2))
        sums = out.reshape(8, n_cells, n_digits).sum(2)
        assert torch.allclose(sums, torch.ones_like(sums), atol=1e-5)


@pytest.mark.parametrize("output_softmax", [False, True])
def test_ungrounded_solver_returns_its_input_probabilities_at_given_cells(output_softmax):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    solver = SymbolicSolver(2, m=30, aux=5, max_iter=10, zero_input_outputs=True,
                            output_softmax=output_softmax)
    is_input = torch.rand(3, C, generator=gen) < 0.4
    z = random_board_probs(3, gen)
    out = solver(z, is_input)
    var_input = is_input.repeat_interleave(K, dim=1)
    assert out.shape == (3, C * K)
    assert torch.equal(out[var_input], z[var_input])  # Appendix B: the classifier's values
    # the blank cells are solved from the givens: other given digits, other blank outputs
    flipped = z.clone()
    flipped[var_input] = 1 - flipped[var_input]
    torch.manual_seed(0)
    same_start = solver(z, is_input)
    torch.manual_seed(0)
    other = solver(flipped, is_input)
    assert not torch.allclose(other[~var_input], same_start[~var_input], atol=1e-3)
    if output_softmax:
        sums = out.reshape(3, C, K).sum(2)[~is_input]
        assert torch.allclose(sums, torch.ones_like(sums), atol=1e-5)


def test_original_solver_passes_inputs_through_satnet():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(2)
    solver = SymbolicSolver(2, m=30, aux=5, max_iter=10, zero_input_outputs=False)
    is_input = torch.rand(2, C, generator=gen) < 0.4
    z = random_board_probs(2, gen).requires_grad_(True)
    out = solver(z, is_input)
    var_input = is_input.repeat_interleave(K, dim=1)
    assert torch.allclose(out[var_input], z[var_input])
    # a loss on the given cells reaches the inputs directly: the label-leakage path
    out[var_input].sum().backward()
    assert (z.grad[var_input] != 0).any()


def test_visual_solver_places_classifier_probabilities_and_trains_it_through_satnet():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(3)
    model = VisualSolver(LeNet(K), SymbolicSolver(2, m=30, aux=5, max_iter=10))
    is_input = torch.rand(2, C, generator=gen) < 0.4
    images = torch.randint(0, 256, (int(is_input.sum()), 28, 28), dtype=torch.uint8, generator=gen)
    probs = model.input_probs(images, is_input)
    blocks = probs.reshape(2, C, K)
    assert torch.allclose(blocks[is_input].sum(1), torch.ones(int(is_input.sum())), atol=1e-6)
    assert (blocks[~is_input] == 0).all()
    out = model(images, is_input)
    # a loss on output cells only still trains the classifier, through SATNet's input gradient
    out.reshape(2, C, K)[~is_input].pow(2).sum().backward()
    assert model.classifier.fc2.weight.grad.abs().sum() > 0
    assert model.solver.satnet.S.grad.abs().sum() > 0


def test_add_trainable_proofreader_freezes_everything_else():
    model = VisualSolver(LeNet(K), SymbolicSolver(2, m=30, aux=5, max_iter=10))
    proofreader = add_trainable_proofreader(model)
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    assert trainable == {"solver.proofreader.linear.weight", "solver.proofreader.linear.bias"}
    assert model.solver.proofreader is proofreader


def test_checkpoint_round_trip(tmp_path):
    torch.manual_seed(0)
    model = VisualSolver(LeNet(K), SymbolicSolver(2, m=30, aux=5, max_iter=7, output_softmax=True,
                                                  eps=1e-3))
    model.solver.add_proofreader()
    save_torch(checkpoint(model), tmp_path / "m.pt")
    loaded = load_solver(tmp_path / "m.pt")
    assert isinstance(loaded, VisualSolver) and loaded.solver.output_softmax
    assert loaded.solver.satnet.max_iter == 7 and loaded.solver.proofreader is not None
    assert loaded.solver.satnet.eps == 1e-3  # evaluation stops its sweeps as training did
    for (name, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a, b), name
    # satnet.solve_sweeps: a solve after training (eval mode) runs exactly that many sweeps, no
    # early stop; training keeps the model's own rule, and so does its checkpoint
    fixed = load_solver(tmp_path / "m.pt", solve_sweeps=25).solver
    z, is_input = torch.rand(3, fixed.n_cells * K), torch.rand(3, fixed.n_cells) < 0.4
    fixed.eval()(z, is_input)
    assert fixed.satnet.sweep_count.mean() == 25
    fixed.satnet.sweep_count.reset()
    fixed.train()(z, is_input)
    assert fixed.satnet.sweep_count.mean() <= 7
    assert solver_config(fixed)["max_iter"] == 7 and solver_config(fixed)["eps"] == 1e-3
    symbolic = SymbolicSolver(2, m=30, aux=5, k=16)
    save_torch(checkpoint(symbolic), tmp_path / "s.pt")
    loaded = load_solver(tmp_path / "s.pt")
    assert isinstance(loaded, SymbolicSolver) and loaded.satnet.k == 16  # satnet.k travels with it
    saved = checkpoint(SymbolicSolver(2, m=30, aux=5))
    del saved["config"]["k"]  # a checkpoint from before satnet.k: the published rank
    save_torch(saved, tmp_path / "old.pt")
    assert load_solver(tmp_path / "old.pt").satnet.k == 32
    save_torch({"kind": "visual"}, tmp_path / "bad.pt")
    with pytest.raises(PipelineError, match="bad.pt"):
        load_solver(tmp_path / "bad.pt")
    with pytest.raises(PipelineError, match="missing.pt"):
        load_solver(tmp_path / "missing.pt")


def small_boards():
    """Six 4x4 boards over 20 random images (5 a digit): the boards and the images' digits."""
    puzzles, solutions = generate_puzzles(6, 2, seed=0)
    rng = np.random.default_rng(0)
    digits = np.repeat(np.arange(1, 5), 5).astype(np.uint8)
    images = rng.integers(0, 255, size=(len(digits), 28, 28)).astype(np.uint8)
    return build_visual_boards(puzzles, solutions, images, digits, 2, seed=0), digits


def test_readings_once_gives_the_classifiers_answers_and_puts_it_back():
    """proofread reads each pool image once (training.readings_once): the solver's outputs on
    the boards so read equal its outputs on the images, and the classifier is restored."""
    boards, digits = small_boards()
    torch.manual_seed(0)
    classifier = LeNet(4)
    model = VisualSolver(classifier, SymbolicSolver(2, m=8, aux=2))
    cpu = torch.device("cpu")
    torch.manual_seed(1)
    direct = predict(model, boards, 3, cpu)
    with readings_once(model, boards) as (read,):
        assert read.images.shape == (len(digits), 4)
        torch.manual_seed(1)
        cached = predict(model, read, 3, cpu)
    assert model.classifier is classifier
    assert torch.allclose(direct, cached, atol=1e-5)


def test_features_once_gives_the_readers_answers_and_puts_it_back():
    """A CNN ensemble tuned on its heads alone (training.features_once, the tune epochs): the
    solver's outputs on the boards so read equal its outputs on the images, only the heads'
    parameters are seen, and the reader is restored with them."""
    boards, digits = small_boards()
    torch.manual_seed(0)
    reader = DigitReader(4, n_nets=2, width=8, feature_dim=16)
    model = VisualSolver(reader, SymbolicSolver(2, m=8, aux=2))
    cpu = torch.device("cpu")
    torch.manual_seed(1)
    direct = predict(model, boards, 3, cpu)
    with features_once(model, boards) as (read,):
        assert read.images.shape == (len(digits), 2 * 16)
        assert {id(p) for p in model.classifier.parameters()} == {
            id(p) for net in reader.nets for p in net.head.parameters()}
        torch.manual_seed(1)
        cached = predict(model, read, 3, cpu)
    assert model.classifier is reader
    assert torch.allclose(direct, cached, atol=1e-5)


class CountingReader(DigitReader):
    """A DigitReader that counts the images it is shown."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.seen = 0

    def forward(self, images):
        self.seen += len(images)
        return super().forward(images)


def test_test_scores_read_each_pool_image_once_and_equal_reading_each_cell():
    """evaluate's scores (training.solution_scores), plain and checked: the classifier reads the
    pool's images once, not once per given cell, and the scores are those of reading each cell."""
    boards, digits = small_boards()
    torch.manual_seed(0)
    reader = CountingReader(4, n_nets=2, width=8, feature_dim=16)
    cpu, solution = torch.device("cpu"), torch.as_tensor(boards.labels).long()
    model = VisualSolver(reader, SymbolicSolver(2, m=8, aux=2))
    for scored in (model, Checked(model, folds=2)):
        torch.manual_seed(1)
        per_cell = solution_metrics(predicted_digits(predict(scored, boards, 3, cpu), 4), solution, boards)
        reader.seen = 0
        torch.manual_seed(1)
        once = solution_scores(scored, boards, solution, 3, cpu)
        assert reader.seen == len(digits) < int(boards.is_input.sum())
        assert scored.classifier is reader
        assert once == per_cell
