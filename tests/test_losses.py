"""The Symbol Grounding Loss: Proposition 3.1 with approxmax = max, and what holds for the 2-norm."""
import itertools

import pytest
import torch

from satground.grounding import permutation_matrix
from satground.losses import APPROXMAX, approxmax, soft_permutation, symbol_grounding_loss

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
    with pytest.raises(ValueError):
        symbol_grounding_loss(torch.rand(5, 3), torch.rand(5, 4))
    with pytest.raises(ValueError):
        symbol_grounding_loss(torch.rand(5, 3), torch.rand(5, 3), kind="mean")
