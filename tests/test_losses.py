"""The Symbol Grounding Loss: Proposition 3.1 with approxmax = max, and what holds for the 2-norm."""
import itertools

import pytest
import torch

from satground.solver.grounding import permutation_matrix
from satground.solver.losses import (APPROXMAX, LOSSES, GroundingLoss, approxmax, matched_loss, sinkhorn,
                                     sinkhorn_loss, soft_matching, soft_permutation, symbol_grounding_loss)

torch.set_num_threads(1)


def onehot(digits, K):
    return torch.nn.functional.one_hot(torch.as_tensor(digits), K).float()


def is_relabelling(pred_digits, label_digits) -> bool:
    """Is there a bijection f with pred = f(label) row by row?"""
    forward, backward = {}, {}
    for p, y in zip(pred_digits, label_digits):
        if forward.setdefault(y, p) != p or backward.setdefault(p, y) != y:
            return False
    return True


def test_max_loss_is_zero_exactly_for_column_permutations_of_the_labels():
    # Proposition 3.1 over every hard prediction of 6 cells with K = 3 (3^6 = 729 of them):
    # every digit occurs in the labels, predictions are one-hot rows.
    K = 3
    labels = [0, 1, 2, 2, 0, 1]
    target = onehot(labels, K)
    zeros = 0
    for pred_digits in itertools.product(range(K), repeat=len(labels)):
        loss, _ = symbol_grounding_loss(onehot(pred_digits, K), target, kind="max")
        if is_relabelling(pred_digits, labels):
            assert loss.item() == 0.0, pred_digits
            zeros += 1
        else:
            assert loss.item() > 0.1, pred_digits
    assert zeros == 6  # the 3! relabellings


def test_max_loss_is_positive_for_soft_predictions():
    gen = torch.Generator().manual_seed(0)
    K, R = 4, 40
    target = onehot(torch.arange(R) % K, K)
    for _ in range(20):
        pred = torch.softmax(3 * torch.randn(R, K, generator=gen), dim=1)
        assert symbol_grounding_loss(pred, target, kind="max")[0].item() > 0.0
    # slightly soft version of a perfect relabelling: small but positive
    sigma = torch.tensor([2, 0, 3, 1])
    near = 0.98 * target[:, sigma] + 0.02 / K
    loss = symbol_grounding_loss(near, target, kind="max")[0].item()
    assert 0.0 < loss < 0.1


def test_p_hat_is_the_permutation_at_the_optimum():
    # Proposition 3.1 (2): prediction column i = label column sigma(i)  =>  P_hat[i, j] = [j == sigma(i)]
    K = 5
    target = onehot(torch.arange(50) % K, K)
    sigma = torch.tensor([3, 0, 4, 1, 2])
    P = soft_permutation(target[:, sigma], target)
    assert torch.allclose(P, permutation_matrix(sigma), atol=1e-12)


def test_l2_loss_properties():
    gen = torch.Generator().manual_seed(1)
    K, R = 4, 48
    labels = torch.arange(R) % K
    target = onehot(labels, K)
    sigma = torch.tensor([1, 3, 0, 2])
    # 0 at a column permutation, like the max version
    assert abs(symbol_grounding_loss(target[:, sigma], target, "l2")[0].item()) < 1e-12
    for _ in range(20):
        pred = torch.softmax(2 * torch.randn(R, K, generator=gen), dim=1)
        l2 = symbol_grounding_loss(pred, target, "l2")[0]
        # ||row||_2 >= max(row): the 2-norm loss never exceeds the max loss ...
        assert l2 <= symbol_grounding_loss(pred, target, "max")[0] + 1e-7
        # ... and, like it, ignores how clusters and digits are numbered
        tau, rho = torch.randperm(K, generator=gen), torch.randperm(K, generator=gen)
        assert torch.allclose(symbol_grounding_loss(pred[:, tau], target[:, rho], "l2")[0], l2, atol=1e-6)
    # but it is not minimised at a permutation: a blurred prediction scores below 0. This is why
    # the self-grounded phase overfits and needs early stopping (paper sec. 4).
    uniform = torch.full((R, K), 1.0 / K)
    assert symbol_grounding_loss(uniform, target, "l2")[0].item() < 0.0


def test_smooth_variants_bracket_the_max():
    gen = torch.Generator().manual_seed(2)
    P = torch.rand(6, 6, generator=gen)
    assert torch.all(approxmax(P, "softmax", 0.1) <= approxmax(P, "max") + 1e-7)
    assert torch.all(approxmax(P, "logsumexp", 0.1) >= approxmax(P, "max") - 1e-7)
    # and they approach the max as the temperature goes to 0
    assert torch.allclose(approxmax(P, "logsumexp", 1e-3), approxmax(P, "max"), atol=1e-2)
    assert torch.allclose(approxmax(P, "softmax", 1e-3), approxmax(P, "max"), atol=1e-2)


@pytest.mark.parametrize("kind", APPROXMAX)
def test_gradients_are_finite_even_for_hard_predictions(kind):
    K = 4
    target = onehot(torch.arange(16) % K, K)
    for pred in (target[:, [1, 0, 3, 2]].clone(), torch.full((16, K), 0.25)):
        pred.requires_grad_(True)
        loss, P = symbol_grounding_loss(pred, target, kind)
        loss.backward()
        assert torch.isfinite(loss) and torch.isfinite(pred.grad).all() and P.shape == (K, K)


def test_bad_shapes_and_kind_are_refused():
    with pytest.raises(ValueError):  # fewer prediction columns than digits: no onto map
        symbol_grounding_loss(torch.rand(5, 3), torch.rand(5, 4))
    with pytest.raises(ValueError):
        symbol_grounding_loss(torch.rand(5, 4), torch.rand(6, 3))
    assert symbol_grounding_loss(torch.rand(5, 4), torch.rand(5, 3))[1].shape == (4, 3)
    with pytest.raises(ValueError):
        symbol_grounding_loss(torch.rand(5, 3), torch.rand(5, 3), kind="mean")


# ---------------------------------------------------------------------------------------------
# the matched forms: they keep the Proposition at nine digits and give a signal near uniform outputs


def board_like(K, R=None, seed=0):
    """(target (R, K) one-hot with every digit equally often, a random permutation sigma)."""
    gen = torch.Generator().manual_seed(seed)
    R = R or 20 * K
    labels = torch.randperm(R, generator=gen) % K
    return onehot(labels, K), torch.randperm(K, generator=gen)


def tilted(target, sigma, delta):
    """Near-uniform predictions leaning by delta towards the relabelling sigma:
    pred column i = 1/K + delta * (label column sigma(i) - 1/K) (rows still sum to 1)."""
    K = target.shape[1]
    return 1.0 / K + delta * (target[:, sigma] - 1.0 / K)


@pytest.mark.parametrize("K", [4, 9])
def test_matched_loss_is_minimised_exactly_at_the_permutation(K):
    target, sigma = board_like(K)
    at_perm = matched_loss(soft_permutation(target[:, sigma], target), sigma).item()
    uniform = matched_loss(soft_permutation(torch.full_like(target, 1 / K), target), sigma).item()
    assert at_perm == 0.0
    assert uniform == pytest.approx(1 - (1 / K) ** (1 / K) * (1 - 1 / K) ** ((K - 1) / K), abs=1e-6)
    previous = at_perm
    for delta in (0.99, 0.9, 0.5, 0.1, 0.0):  # blurring towards uniform only raises it
        value = matched_loss(soft_permutation(tilted(target, sigma, delta), target), sigma).item()
        assert previous < value <= uniform + 1e-6
        previous = value
    # the matching the loss is told matters: another permutation scores 1 at sigma's predictions
    other = torch.roll(sigma, 1)
    assert matched_loss(soft_permutation(target[:, sigma], target), other).item() == pytest.approx(1.0)


@pytest.mark.parametrize("K", [4, 9])
def test_matched_loss_never_below_the_max_form(K):
    # 1 - mean_i P[i, perm(i)] >= 1 - mean_i max_j P[i, j] >= 0 for any perm and prediction
    gen = torch.Generator().manual_seed(K)
    target, sigma = board_like(K)
    for _ in range(10):
        pred = torch.softmax(2 * torch.randn(target.shape, generator=gen), dim=1)
        P = soft_permutation(pred, target)
        max_form = symbol_grounding_loss(pred, target, "max")[0]
        for perm in (sigma, torch.randperm(K, generator=gen)):
            assert matched_loss(P, perm) >= max_form - 1e-7 >= -1e-7


def test_the_paper_form_prefers_uniform_outputs_at_nine_digits():
    # the failure the matched form fixes (issue 24): 1 - 3 * 0.7055 < 0 = the permutation's value
    target, sigma = board_like(9)
    uniform = symbol_grounding_loss(torch.full_like(target, 1 / 9), target, "l2")[0].item()
    assert uniform == pytest.approx(-1.1165, abs=1e-3)
    assert symbol_grounding_loss(target[:, sigma], target, "l2")[0].item() == pytest.approx(0.0, abs=1e-9)


def gradient_towards(loss_fn, pred, target, sigma):
    """How the loss's gradient moves the right entries: d(loss)/d(pred) on the entries where
    pred column i meets label sigma(i), minus on the others (negative: the gradient step raises
    the right entries' probability), and whether every output column moves the right way."""
    pred = pred.clone().requires_grad_(True)
    loss_fn(pred).backward()
    right = target[:, sigma].bool()
    g = pred.grad
    per_column = torch.stack([g[:, i][right[:, i]].mean() - g[:, i][~right[:, i]].mean()
                              for i in range(target.shape[1])])
    return per_column


@pytest.mark.parametrize("K", [4, 9])
def test_matched_gradient_near_uniform_points_to_the_permutation(K):
    target, sigma = board_like(K)
    pred = tilted(target, sigma, 0.01)
    P = soft_permutation(pred, target).detach()
    perm = hard_permutation_of(P)
    assert torch.equal(perm, sigma)  # the faint tilt is enough for the matching
    towards = gradient_towards(lambda p: matched_loss(soft_permutation(p, target), perm), pred, target, sigma)
    assert (towards < 0).all()
    # a step down the gradient raises every matched entry of P_hat
    pred_step = (pred - 0.05 * torch.autograd.functional.jacobian(
        lambda p: matched_loss(soft_permutation(p, target), perm), pred)).clamp(1e-6, 1 - 1e-6)
    P_step = soft_permutation(pred_step, target)
    assert (P_step[torch.arange(K), sigma] > P[torch.arange(K), sigma]).all()


def test_the_paper_gradient_near_uniform_does_not_at_nine_digits():
    # control for the test above: the 2-norm form pulls the right entries back (towards uniform)
    target, sigma = board_like(9)
    pred = tilted(target, sigma, 0.01)
    towards = gradient_towards(lambda p: symbol_grounding_loss(p, target, "l2")[0], pred, target, sigma)
    assert (towards > 0).all()


def hard_permutation_of(P):
    from satground.solver.grounding import hard_permutation
    return hard_permutation(P, "hungarian")


def batch_of(pred, target, K):
    """A training.Batch-like object with every cell a labelled output cell."""
    from types import SimpleNamespace

    R = pred.shape[0]
    labels = target.argmax(1).reshape(1, R) + 1
    return SimpleNamespace(labels=labels, is_input=torch.zeros(1, R, dtype=torch.bool),
                           target=target.reshape(1, -1))


@pytest.mark.parametrize("K", [4, 9])
@pytest.mark.parametrize("form", ["matched", "sinkhorn"])
def test_running_p_hat_gives_a_signal_at_exactly_uniform_outputs(K, form):
    target, sigma = board_like(K)
    for structure, expect_sign in ((sigma, -1), (torch.roll(sigma, 1), +1)):
        loss = GroundingLoss(K, form, temperature=0.3, warmup_epochs=1, decay=0.99)
        assert loss.form == "paper"  # warm-up: faintly tilted batches build the running P_hat
        for delta in (0.004, 0.002, 0.003):
            loss(tilted(target, structure, delta), batch_of(target, target, K))
        loss.end_epoch()
        assert loss.form == form
        assert torch.equal(loss.permutation(), structure)
        uniform = torch.full_like(target, 1 / K)
        towards = gradient_towards(lambda p: loss.compute(p, target)[0], uniform, target, sigma)
        # towards sigma when the running P_hat carries it, away from it when it carries another
        assert (expect_sign * towards > 0).all()


@pytest.mark.parametrize("K", [4, 9])
def test_the_paper_form_gives_no_signal_at_uniform_outputs(K):
    target, sigma = board_like(K)
    loss = GroundingLoss(K, "paper")
    towards = gradient_towards(lambda p: loss.compute(p, target)[0], torch.full_like(target, 1 / K), target, sigma)
    assert towards.abs().max() < 1e-6


@pytest.mark.parametrize("kind", APPROXMAX)
def test_paper_form_unchanged(kind):
    gen = torch.Generator().manual_seed(3)
    target, _ = board_like(9)
    pred = torch.softmax(torch.randn(target.shape, generator=gen), dim=1)
    loss = GroundingLoss(9, "paper", kind, temperature=0.1, warmup_epochs=0)
    for epoch in range(3):  # every epoch, whatever the warm-up
        value, P = loss.compute(pred, target)
        expected, P_expected = symbol_grounding_loss(pred, target, kind, 0.1)
        assert torch.equal(value, expected) and torch.equal(P, P_expected)
        assert torch.equal(loss.end_epoch(), P_expected)  # the epoch's mean P_hat, the estimate
        assert torch.equal(loss.estimate(), P_expected)


def test_running_p_hat_is_the_warmup_mean_then_an_ema():
    K = 4
    target, sigma = board_like(K)
    loss = GroundingLoss(K, "matched", warmup_epochs=1, decay=0.9)
    Ps = [loss.compute(tilted(target, sigma, d), target)[1] for d in (0.1, 0.3, 0.2)]
    assert torch.allclose(loss.running, torch.stack(Ps).double().mean(0))
    assert torch.allclose(loss.end_epoch(), torch.stack(Ps).mean(0))
    before = loss.running.clone()
    P = loss.compute(tilted(target, sigma, 0.5), target)[1]
    assert torch.allclose(loss.running, 0.9 * before + 0.1 * P.double())
    state = loss.state_dict()
    again = GroundingLoss(K, "matched", warmup_epochs=1, decay=0.9)
    again.load_state_dict(state)
    assert again.form == "matched" and torch.equal(again.running, loss.running)


def test_sinkhorn_soft_matching():
    gen = torch.Generator().manual_seed(4)
    sigma = torch.randperm(9, generator=gen)
    faint = 0.705 + 1e-4 * torch.rand(9, 9, generator=gen)
    faint[torch.arange(9), sigma] += 1e-3
    Q = soft_matching(faint, temperature=0.5)
    assert torch.allclose(Q.sum(0), torch.ones(9, dtype=Q.dtype), atol=1e-3)
    assert torch.allclose(Q.sum(1), torch.ones(9, dtype=Q.dtype), atol=1e-3)
    assert torch.equal(Q.argmax(1), sigma)  # as sharp as a clear P_hat: the scale is relative
    assert torch.allclose(Q, soft_matching(0.5 + 100 * (faint - 0.705), 0.5), atol=1e-6)
    # a cold Sinkhorn is the hard matching, and sinkhorn_loss then the matched loss
    target, _ = board_like(9)
    P = soft_permutation(tilted(target, sigma, 0.2), target)
    hard = sinkhorn(soft_matching(faint, 0.01).log(), 5)
    assert torch.allclose(sinkhorn_loss(P, hard), matched_loss(P, sigma), atol=1e-4)


def test_soft_sinkhorn_breaks_the_proposition_at_nine_digits():
    # why `matched` is the recommended form: with a soft Q an eps-blurred prediction lowers the
    # loss below the permutation's (off-diagonal P_hat grows like eps^(1/K))
    target, sigma = board_like(9)
    P_perm = soft_permutation(target[:, sigma], target)
    Q = soft_matching(P_perm, temperature=1.0)
    blurred = soft_permutation(tilted(target, sigma, 0.99), target)
    assert sinkhorn_loss(blurred, Q) < sinkhorn_loss(P_perm, Q)
    assert matched_loss(blurred, sigma) > matched_loss(P_perm, sigma)


def test_grounding_loss_settings_are_checked():
    for kwargs in ({"form": "hungarian"}, {"approxmax": "mean"}, {"temperature": 0.0},
                   {"warmup_epochs": -1}, {"warmup_epochs": 0.5}, {"decay": 1.0}, {"decay": -0.1}):
        with pytest.raises(ValueError):
            GroundingLoss(4, **kwargs)
    assert LOSSES[0] == "paper"
