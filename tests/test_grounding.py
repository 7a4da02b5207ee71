"""Permutation extraction from P_hat and folding a permutation into the classifier and SATNet."""
import pytest
import torch

from satground.solver.grounding import (PermutationAccumulator, PermutationHistory, align_to_inputs,
                                        fold_into_classifier, fold_into_satnet, hard_permutation, is_permutation,
                                        peer_cooccurrence, peer_label_cooccurrence, peer_label_permutation,
                                        permutation_matrix, relabel)
from satground.readers.lenet import LeNet
from satground.boards.sudoku import peers
from satground.solver.losses import symbol_grounding_loss
from satground.satnet import SATNet

torch.set_num_threads(1)


def noisy_cluster_predictions(labels, cluster_of_digit, signal, gen):
    """Probabilities in cluster encoding: the true cluster gets `signal` extra mass over noise."""
    K = len(cluster_of_digit)
    noise = torch.softmax(torch.randn(len(labels), K, generator=gen), dim=1)
    truth = torch.nn.functional.one_hot(cluster_of_digit[labels], K).float()
    return (1 - signal) * noise + signal * truth


@pytest.mark.parametrize("K", [4, 9])
def test_planted_permutation_is_recovered_from_the_epoch_mean(K):
    gen = torch.Generator().manual_seed(K)
    cluster_to_digit = torch.randperm(K, generator=gen)        # the planted permutation
    cluster_of_digit = torch.argsort(cluster_to_digit)
    accumulator = PermutationAccumulator(K)
    for _ in range(20):  # batches of an epoch, each with a weak signal
        labels = torch.randint(0, K, (200,), generator=gen)
        pred = noisy_cluster_predictions(labels, cluster_of_digit, signal=0.15, gen=gen)
        target = torch.nn.functional.one_hot(labels, K).float()
        accumulator.add(symbol_grounding_loss(pred, target, "l2")[1])
    P = accumulator.mean()
    assert torch.equal(hard_permutation(P, "argmax"), cluster_to_digit)
    assert torch.equal(hard_permutation(P, "hungarian"), cluster_to_digit)


def test_hungarian_is_immune_to_digit_frequency_bias_where_argmax_is_not():
    # A digit that is rarer among output cells shifts its whole column of P_hat. Row-wise arg max
    # then sends several clusters to one digit; the one-to-one matching is unchanged by a
    # per-column offset and still finds the planted permutation.
    planted = torch.tensor([2, 0, 3, 1])
    P = 0.70 + 0.02 * permutation_matrix(planted) + torch.tensor([0.0, 0.0, 0.05, 0.0])
    assert not is_permutation(hard_permutation(P, "argmax"))
    assert torch.equal(hard_permutation(P, "hungarian"), planted)


def test_accumulator_mean_and_permutation_helpers():
    acc = PermutationAccumulator(3)
    acc.add(torch.eye(3))
    acc.add(torch.zeros(3, 3))
    assert torch.allclose(acc.mean(), 0.5 * torch.eye(3))
    with pytest.raises(ValueError):
        PermutationAccumulator(3).mean()
    assert is_permutation(torch.tensor([2, 0, 1])) and not is_permutation(torch.tensor([0, 0, 1]))
    with pytest.raises(ValueError):
        hard_permutation(torch.eye(3), "greedy")


def test_folding_into_the_classifier_only_relabels_its_predictions():
    torch.manual_seed(0)
    K = 4
    net = LeNet(K)
    images = torch.rand(10, 1, 28, 28)
    before = torch.softmax(net(images), dim=1)
    perm = torch.tensor([2, 0, 3, 1])  # cluster c -> digit perm[c]
    fold_into_classifier(net, perm)
    after = torch.softmax(net(images), dim=1)
    assert torch.allclose(after[:, perm], before, atol=1e-7)  # digit perm[c] gets cluster c
    # the same relabelling as applying the permutation matrix to board probabilities
    boards = before.reshape(2, 5 * K)
    assert torch.allclose(relabel(boards, perm, K), after.reshape(2, 5 * K), atol=1e-7)
    with pytest.raises(ValueError):
        fold_into_classifier(net, torch.tensor([0, 0, 1, 2]))


def test_folding_into_satnet_moves_each_cells_digit_rows():
    torch.manual_seed(0)
    K, cells, aux = 4, 16, 5
    layer = SATNet(cells * K, 8, aux=aux)
    S = layer.S.detach().clone()
    perm = torch.tensor([1, 3, 0, 2])
    fold_into_satnet(layer, perm, K)
    new = layer.S.detach()
    assert torch.equal(new[0], S[0]) and torch.equal(new[-aux:], S[-aux:])  # truth and aux rows
    for c in range(cells):
        for k in range(K):
            assert torch.equal(new[1 + c * K + perm[k]], S[1 + c * K + k])


def test_alignment_finds_how_satnet_relabels_its_outputs_without_labels():
    # Boards solved perfectly, but in two encodings: givens in the classifier's clusters, outputs
    # in clusters shifted by tau. P_hat (outputs only) then yields the output encoding's
    # permutation; peer co-occurrence recovers tau and moves it to the classifier's encoding.
    from satground.boards.sudoku import generate_puzzles
    from satground.boards.metrics import given_conflict_rate

    puzzles, solutions = generate_puzzles(200, 2, seed=0)
    is_input = torch.from_numpy(puzzles != 0)
    digits = torch.from_numpy(solutions).long() - 1
    cluster_of_digit = torch.tensor([2, 0, 3, 1])
    tau = torch.tensor([1, 0, 2, 3])  # output value tau[c] stands for input cluster c
    given_clusters = cluster_of_digit[digits]
    output_values = tau[given_clusters]
    clusters = torch.where(is_input, given_clusters, output_values)

    K = 4
    cells = ~is_input.reshape(-1)
    P = symbol_grounding_loss(torch.nn.functional.one_hot(output_values.reshape(-1)[cells], K).float(),
                              torch.nn.functional.one_hot(digits.reshape(-1)[cells], K).float(), "max")[1]
    output_perm = hard_permutation(P, "hungarian")
    true_perm = torch.argsort(cluster_of_digit)  # cluster -> digit
    assert not torch.equal(output_perm, true_perm)
    input_perm, rho = align_to_inputs(output_perm, peer_cooccurrence(clusters, is_input, 2))
    assert torch.equal(input_perm, true_perm)
    assert torch.equal(rho[tau], torch.arange(K))  # rho undoes tau
    # a consistent solver is left alone, and the conflict rate tells the two apart
    consistent = torch.where(is_input, given_clusters, given_clusters)
    same, rho_id = align_to_inputs(true_perm, peer_cooccurrence(consistent, is_input, 2))
    assert torch.equal(same, true_perm) and torch.equal(rho_id, torch.arange(K))
    assert given_conflict_rate(consistent, is_input, 2) == 0.0
    assert given_conflict_rate(clusters, is_input, 2) > 0.1


@pytest.mark.parametrize("board_size", [2, 3])
def test_peer_labels_give_the_permutation_from_the_ungrounded_view(board_size):
    # Given cells read as clusters (digit d -> cluster cluster_of_digit[d]), output cells with
    # their labels, input cells with none: a cluster never meets its digit among its peers.
    from satground.boards.sudoku import generate_puzzles

    K = board_size ** 2
    puzzles, solutions = generate_puzzles(40, board_size, seed=1)
    is_input = torch.from_numpy(puzzles != 0)
    digits = torch.from_numpy(solutions).long() - 1
    cluster_of_digit = torch.randperm(K, generator=torch.Generator().manual_seed(board_size))
    labels = torch.where(is_input, 0, digits + 1)  # the ungrounded view
    given_clusters = torch.where(is_input, cluster_of_digit[digits], -1)
    M = peer_label_cooccurrence(given_clusters, labels, is_input, board_size)
    true_perm = torch.argsort(cluster_of_digit)  # cluster -> digit
    assert (M[torch.arange(K), true_perm] == 0).all() and (M.sum(dim=1) > 0).all()
    assert torch.equal(peer_label_permutation(M), true_perm)
    # a tenth of the givens read as a wrong cluster: the matching still holds
    gen = torch.Generator().manual_seed(0)
    wrong = is_input & (torch.rand(is_input.shape, generator=gen) < 0.1)
    noisy = torch.where(wrong, (given_clusters + 1) % K, given_clusters)
    assert torch.equal(peer_label_permutation(peer_label_cooccurrence(noisy, labels, is_input,
                                                                      board_size)), true_perm)


def test_peers_of_a_4x4_cell():
    p = peers(2)
    assert p.shape == (16, 16) and not p.diagonal().any() and torch.equal(p, p.T)
    assert p[0].nonzero().flatten().tolist() == [1, 2, 3, 4, 5, 8, 12]  # row, box, column


def test_alignment_ignores_weak_evidence():
    # A SATNet that has barely learned: co-occurrences all alike, a slightly smaller entry off
    # the diagonal. The numbering is left alone.
    M = torch.full((4, 4), 100.0)
    M[0, 1] = M[1, 0] = 97.0
    perm = torch.tensor([2, 0, 3, 1])
    aligned, rho = align_to_inputs(perm, M)
    assert torch.equal(rho, torch.arange(4)) and torch.equal(aligned, perm)
    # decisive: every output value avoids one given cluster, 0 and 1 each other's
    M[0, 1] = M[1, 0] = M[2, 2] = M[3, 3] = 5.0
    aligned, rho = align_to_inputs(perm, M)
    assert rho.tolist() == [1, 0, 2, 3] and aligned.tolist() == [0, 2, 3, 1]


def test_the_permutation_history_names_the_epoch_its_reading_settled_and_survives_a_resume():
    history = PermutationHistory([])
    for perm in ([1, 0, 2], [2, 0, 1], [2, 1, 0], [2, 1, 0], [0, 1, 2]):
        history.add(torch.tensor(perm))
    assert history.epochs[2] == [2, 1, 0]
    assert history.settled_epoch(4) == 3  # epochs 3 and 4 read the same; epoch 2 did not
    assert history.settled_epoch(2) == 2 and history.settled_epoch(1) == 1
    assert history.settled_epoch(5) == 5  # the last reading changed again
    assert not history.settled_for(1) and not history.settled_for(0)
    history.add(torch.tensor([0, 1, 2]))
    assert history.settled_for(1) and not history.settled_for(2)
    history.epochs.pop()
    resumed = PermutationHistory([])
    resumed.load_state_dict(history.state_dict())
    resumed.add(torch.tensor([0, 1, 2]))
    assert resumed.settled_epoch(6) == 5 and len(history.epochs) == 5  # a copy, not shared
