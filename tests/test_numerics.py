"""Non-finite numbers in and around the SATNet layer: a bad sample never poisons the others'
gradients, NaN/inf inputs, an overflowing S, empty batches and unsupported dtypes fail with one
clear line, and a training loop stops before a NaN reaches the model."""
import math

import pytest
import torch
import torch.nn.functional as F

from satground.boards.data import Boards
from satground.harness.io import PipelineError
from satground.solver.models import SymbolicSolver
from satground.satnet import SATNet
from satground.satnet.layer import MixingFunction
from satground.solver.training import train_epoch

N_VARS, M, AUX, BATCH, BAD = 10, 12, 2, 4, 1  # sample BAD gets the non-finite entry


def problem(seed=0, dtype=torch.float64):
    """z, is_input, upstream weights and one input cell (BAD, cell) to poison."""
    g = torch.Generator().manual_seed(seed)
    z = torch.rand(BATCH, N_VARS, generator=g, dtype=dtype)
    is_input = torch.rand(BATCH, N_VARS, generator=g) < 0.4
    is_input[:, 0] = True
    weights = torch.randn(BATCH, N_VARS, generator=g, dtype=dtype)
    return z, is_input, weights, (BAD, 0)


def satnet(backend, dtype=torch.float64, **kw):
    torch.manual_seed(0)
    return SATNet(N_VARS, M, AUX, max_iter=30, backend=backend, **kw).to(dtype)


def grads(layer, z, is_input, weights, seed=1):
    """(outputs, S.grad, z.grad) for the loss sum(outputs * weights), the draws seeded."""
    z = z.clone().requires_grad_()
    layer.zero_grad()
    out = layer(z, is_input, generator=torch.Generator().manual_seed(seed))
    out.backward(weights)
    return out.detach(), layer.S.grad.clone(), z.grad.clone()


def without_bad_sample(weights):
    """Upstream weights under which sample BAD contributes nothing: the reference gradients."""
    weights = weights.clone()
    weights[BAD] = 0.0
    return weights


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_backward_drops_a_nan_sample_exactly(backend):
    # Straight through the autograd function (no input checks): a NaN input cell makes the
    # sample's V, Omega and Phi NaN. The backward must drop that sample without 0 * NaN
    # reaching the batch-wide dS product.
    layer = satnet(backend)
    z, is_input, w, cell = problem()

    def run(z, weights):
        S = layer.S.detach().clone().requires_grad_()
        z = z.clone().requires_grad_()
        out = MixingFunction.apply(S, z, is_input, 30, 1e-4, 1e-2, 32, backend,
                                   torch.Generator().manual_seed(1))
        out.backward(weights)
        return S.grad, z.grad

    dS_ref, dz_ref = run(z, without_bad_sample(w))
    z[cell] = math.nan
    dS, dz = run(z, w)
    assert torch.isfinite(dS).all()
    assert torch.allclose(dS, dS_ref, atol=1e-10, rtol=0)
    assert (dz[BAD] == 0).all()
    good = torch.arange(BATCH) != BAD
    assert torch.allclose(dz[good], dz_ref[good], atol=1e-10, rtol=0)


@pytest.mark.parametrize("backend", ["reference", "cpu"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_drop_gives_nonfinite_samples_zero_gradient_and_leaves_the_rest(backend, value):
    z, is_input, w, cell = problem()
    # what "drop" promises: the bad entry solved as 0.5, the sample's gradient exactly zero
    z_clean = z.clone()
    z_clean[cell] = 0.5
    out_ref, dS_ref, dz_ref = grads(satnet(backend), z_clean, is_input, without_bad_sample(w))
    z[cell] = value
    out, dS, dz = grads(satnet(backend, nonfinite="drop"), z, is_input, w)
    assert torch.isfinite(out).all() and torch.isfinite(dS).all() and torch.isfinite(dz).all()
    assert torch.allclose(out, out_ref, atol=1e-10, rtol=0)
    assert torch.allclose(dS, dS_ref, atol=1e-10, rtol=0)
    assert (dz[BAD] == 0).all()
    good = torch.arange(BATCH) != BAD
    assert torch.allclose(dz[good], dz_ref[good], atol=1e-10, rtol=0)


@pytest.mark.parametrize("backend", ["reference", "cpu"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_nonfinite_z_raises_by_default(backend, value):
    z, is_input, _, cell = problem()
    z[cell] = value
    with pytest.raises(ValueError, match=rf"z has 1 non-finite entries .* sample\(s\) \[{BAD}\]"):
        satnet(backend)(z, is_input)


def test_nonfinite_option_is_validated():
    with pytest.raises(ValueError, match="nonfinite"):
        SATNet(4, 4, nonfinite="ignore")


@pytest.mark.parametrize("backend", ["reference", "cpu"])
@pytest.mark.parametrize("dtype,scale", [(torch.float32, 1e20), (torch.float32, 1e12),
                                         (torch.float64, 1e200), (torch.float64, 1e100)])
def test_huge_S_raises_instead_of_returning_nan(backend, dtype, scale):
    # the larger scales overflow S S^T (caught before the solve), the smaller ones only ||g||
    # (caught after it); either way no NaN or garbage output comes back
    layer = satnet(backend, dtype)
    z, is_input, _, _ = problem(dtype=dtype)
    with torch.no_grad():
        layer.S.mul_(scale)
    with pytest.raises(ValueError, match=r"SATNet: (S is too large|non-finite outputs)"):
        layer(z, is_input)


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_nonfinite_S_raises(backend):
    layer = satnet(backend)
    z, is_input, _, _ = problem()
    with torch.no_grad():
        layer.S[2, 3] = math.nan
    with pytest.raises(ValueError, match="S has 1 non-finite entries"):
        layer(z, is_input)


def test_nonfinite_outputs_raise(monkeypatch):
    # whatever goes wrong inside a backend, NaN outputs are an error, not a return value
    from satground.satnet import reference

    solve = reference.mix_forward

    def broken(C, V, free, order, max_iter, eps):
        V, gnrm, iters = solve(C, V, free, order, max_iter, eps)
        V[2] = math.nan
        return V, gnrm, iters

    monkeypatch.setattr(reference, "mix_forward", broken)
    z, is_input, _, _ = problem()
    with pytest.raises(ValueError, match=r"non-finite outputs in sample\(s\) \[2\]"):
        satnet("reference")(z, is_input)


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_empty_batch_is_rejected(backend):
    with pytest.raises(ValueError, match=r"empty batch \(B=0\)"):
        satnet(backend)(torch.zeros(0, N_VARS), torch.zeros(0, N_VARS, dtype=torch.bool))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_cpu_backend_rejects_half_precision(dtype):
    z, is_input, _, _ = problem(dtype=dtype)
    with pytest.raises(ValueError, match=rf"cpu backend needs float32 or float64.*{dtype}"):
        satnet("cpu", dtype)(z, is_input)
    assert torch.isfinite(satnet("reference", dtype)(z, is_input)).all()  # the reference runs it


# ---------------------------------------------------------------------------------------------
# train_epoch


def tiny_training(seed=0):
    """A 4x4 SymbolicSolver, 12 random boards and Adam: a one-second epoch."""
    g = torch.Generator().manual_seed(seed)
    n_boards = 12
    labels = torch.randint(1, 5, (n_boards, 16), generator=g).to(torch.uint8)
    is_input = torch.rand(n_boards, 16, generator=g) < 0.4
    boards = Boards(2, torch.zeros(1, 28, 28, dtype=torch.uint8),
                    torch.zeros(n_boards, 16, dtype=torch.long), is_input, labels)
    torch.manual_seed(seed)
    model = SymbolicSolver(board_size=2, m=8, aux=2, max_iter=5, backend="reference")
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    return model, boards, optimizer


def bce(pred, batch):
    return F.binary_cross_entropy(pred, batch.target)


def epoch(model, boards, optimizer, loss_fn):
    return train_epoch(model, boards, optimizer, loss_fn, 4, torch.device("cpu"),
                       torch.Generator().manual_seed(0), desc="non-visual SATNet 3")


def snapshot(model):
    return {name: t.clone() for name, t in model.state_dict().items()}


def assert_unchanged(model, before):
    after = model.state_dict()
    assert all(torch.equal(before[name], after[name]) for name in before)


def test_train_epoch_runs_and_updates_on_finite_numbers():
    model, boards, optimizer = tiny_training()
    before = snapshot(model)
    assert math.isfinite(epoch(model, boards, optimizer, bce))
    assert not torch.equal(before["satnet.S"], model.state_dict()["satnet.S"])


def test_train_epoch_stops_on_a_nan_loss_before_updating():
    model, boards, optimizer = tiny_training()
    before = snapshot(model)
    with pytest.raises(PipelineError,
                       match=r"^non-visual SATNet 3: loss is not finite \(nan\) at batch 1 of 3"):
        epoch(model, boards, optimizer, lambda pred, batch: bce(pred, batch) * math.nan)
    assert_unchanged(model, before)


def test_train_epoch_stops_on_a_nan_gradient_before_updating():
    model, boards, optimizer = tiny_training()
    model.satnet.S.register_hook(lambda grad: grad * math.nan)  # finite loss, NaN gradient
    before = snapshot(model)
    with pytest.raises(PipelineError,
                       match=r"^non-visual SATNet 3: gradient of satnet.S is not finite"):
        epoch(model, boards, optimizer, bce)
    assert_unchanged(model, before)


def test_train_epoch_turns_a_satnet_forward_error_into_one_line():
    model, boards, optimizer = tiny_training()
    with torch.no_grad():
        model.satnet.S[0, 0] = math.inf  # e.g. a model file saved by an older, unguarded run
    with pytest.raises(PipelineError, match=r"^non-visual SATNet 3: SATNet: S has 1 non-finite"):
        epoch(model, boards, optimizer, bce)
