"""Self-grounded training: learn which cluster is which digit through SATNet (paper sec. 3.2).

The distilled classifier is frozen; SATNet is trained on the ungrounded training boards with
the Symbol Grounding Loss over output cells. After each epoch the epoch's mean P_hat gives the
current hard permutation, and the per-cell accuracy of held-out training boards (output cells,
read through that permutation) decides early stopping. Input-cell labels are never read.

With ground.permutation: peers (ours, label free) the permutation folded into the classifier
comes instead from the rule the boards obey: a given cell of cluster c never has a row, column
or box peer whose output label is its digit (satground.grounding.peer_label_permutation). The
loss's permutation is still found and reported beside it.

P_hat maps SATNet's output encoding to digits. With ground.align_inputs (our addition, label
free) the permutation is then moved to the classifier's encoding by the relabelling that
SATNet's outputs show against their peer givens (satground.grounding.align_to_inputs); it is
the identity, changing nothing, when SATNet numbers outputs like inputs.
"""
from __future__ import annotations

import copy

import torch

from satground.config import (load_params, param, run_settings, run_stage, satnet_sizes, source,
                              stage_arguments)
from satground.data import load_boards
from satground.grounding import (ASSIGNMENTS, PERMUTATION_SOURCES, PermutationAccumulator,
                                 align_to_inputs, hard_permutation, is_permutation, peer_cooccurrence,
                                 peer_label_cooccurrence, peer_label_permutation, permutation_record)
from satground.io import PipelineError, save_all, save_figure, seed_everything
from satground.lenet import load_lenet
from satground.lenet import predict as classify
from satground.losses import APPROXMAX, grounding_loss
from satground.models import SymbolicSolver, VisualSolver, checkpoint
from satground.resume import Resumable
from satground.satnet import check_setup
from satground.tracking import StageReport
from satground.training import (freeze, grounding_epoch_metrics, predict, predicted_digits,
                                split_boards, train_epoch)


def plot_permutation(P: torch.Tensor, perm: torch.Tensor):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    K = P.shape[0]
    fig, ax = plt.subplots(figsize=(1.2 + 0.45 * K, 1.0 + 0.45 * K))
    # scaled to the data: P_hat's entries sit close together (a flat square from a 0 floor)
    low, high = float(P.min()), float(P.max())
    image = ax.imshow(P.numpy(), cmap="viridis", vmin=low, vmax=max(high, low + 1e-6))
    ax.scatter(perm.numpy(), range(K), marker="x", color="red", s=30, label="hard permutation")
    ax.set_xticks(range(K), [str(d + 1) for d in range(K)])
    ax.set_yticks(range(K), [str(c) for c in range(K)])
    ax.set_xlabel("digit (label encoding)")
    ax.set_ylabel("cluster (pre-trained encoding)")
    ax.set_title("Soft permutation P_hat (epoch mean)", fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.046)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), fontsize=7, frameon=False)
    return fig


def main(argv=None):
    args = stage_arguments(__doc__, ["prepared", "classifier", "model-out", "permutation-out",
                                     "plot-out", "metrics-out", "resume-dir"], argv)

    params = load_params(args.params)
    seed, device = run_settings(params)
    m, aux, max_iter = satnet_sizes(params)
    check_setup(device)  # the kernel's compiler and settings, before any work
    epochs = param(params, "ground.epochs", int, low=1)
    patience = param(params, "ground.patience", int, low=1)
    lr = param(params, "ground.lr", float, low=0.0, high=1.0)
    batch_size = param(params, "ground.batch_size", int, low=1)
    approxmax = param(params, "ground.approxmax", str, choices=APPROXMAX)
    temperature = param(params, "ground.temperature", float, low=1e-6, default=0.1)
    output_softmax = param(params, "ground.output_softmax", bool)
    val_fraction = param(params, "ground.val_fraction", float, low=0.0, high=0.9)
    assignment = param(params, "ground.assignment", str, choices=ASSIGNMENTS)
    align_inputs = param(params, "ground.align_inputs", bool)
    permutation_source = param(params, "ground.permutation", str, choices=PERMUTATION_SOURCES,
                               default="loss")

    generator = seed_everything(seed)
    boards = load_boards(args.prepared, "train")  # ungrounded: no input-cell label in it
    K = boards.n_digits
    try:
        train, val = split_boards(boards, val_fraction, generator)
    except ValueError as exc:
        raise PipelineError(f"{source(params)}: 'ground.val_fraction': {exc}") from None
    classifier = load_lenet(args.classifier)
    if classifier.n_classes != K:
        raise PipelineError(f"{args.classifier}: classifier has {classifier.n_classes} classes, "
                            f"boards have {K} digits")
    freeze(classifier)
    solver = SymbolicSolver(boards.board_size, m, aux, max_iter, zero_input_outputs=True,
                            output_softmax=output_softmax)
    model = VisualSolver(classifier, solver).to(device)
    optimizer = torch.optim.Adam(solver.parameters(), lr=lr)

    report = StageReport(args.metrics_out)
    resumable = Resumable(args.resume_dir, "ground", model, optimizer, generator, train, val, epochs,
                          patience, batch_size, approxmax, temperature, assignment)
    epoch, state = resumable.restore()
    best, waited, history = (state["best"], state["waited"], state["history"]) if state else (None, 0, [])
    for done, row in enumerate(history, start=1):  # the curves of the epochs already run
        report.log_epoch(done, row)
    while epoch < epochs and waited < patience:
        epoch += 1
        accumulator = PermutationAccumulator(K)
        loss = train_epoch(model, train, optimizer, grounding_loss(approxmax, temperature, accumulator),
                           batch_size, device, generator, desc=f"ground epoch {epoch}")
        P = accumulator.mean()
        argmax = hard_permutation(P, "argmax")
        # early stopping reads predictions through the current hard permutation
        perm = argmax if assignment == "argmax" else hard_permutation(P, "hungarian")
        scores = grounding_epoch_metrics(model, val, perm, batch_size, device)
        history.append({"loss": loss, **{f"val_{k}": v for k, v in scores.items()},
                        "argmax_is_permutation": is_permutation(argmax)})
        report.log_epoch(epoch, history[-1])
        print(f"ground {epoch}/{epochs}: L_SG {loss:.4f}, val blank cells "
              f"{scores['blank_cells']:.3f}, argmax {argmax.tolist()}")
        if best is None or scores["blank_cells"] > best["scores"]["blank_cells"]:
            best = {"epoch": epoch, "scores": scores, "P": P, "loss": loss,
                    "state": copy.deepcopy(solver.state_dict())}
            waited = 0
        else:
            waited += 1  # stops after `patience` epochs without a better one
        resumable.save(epoch, {"best": best, "waited": waited, "history": history})
    resumable.finish()

    solver.load_state_dict(best["state"])
    P = best["P"]
    argmax = hard_permutation(P, "argmax")
    hungarian = hard_permutation(P, "hungarian")
    argmax_ok = is_permutation(argmax)
    # Folding needs a one-to-one map: when arg max sends two clusters to one digit, fall back
    # to the Hungarian matching of the same matrix (and say so).
    output_perm = argmax if assignment == "argmax" and argmax_ok else hungarian
    used = "argmax" if assignment == "argmax" and argmax_ok else "hungarian"
    # P_hat speaks SATNet's output encoding; find how it relabels the classifier's (label-free)
    val_clusters = predicted_digits(predict(model, val, batch_size, device, desc="align"), K) - 1
    cooccurrence = peer_cooccurrence(val_clusters, val.is_input, val.board_size)
    aligned, rho = align_to_inputs(output_perm, cooccurrence)
    from_loss = aligned if align_inputs else output_perm
    # the rule every board obeys, read off the given cells' clusters and the output labels
    given_clusters = classify(classifier, boards.images)[boards.cell_image.clamp_min(0)]
    label_cooccurrence = peer_label_cooccurrence(given_clusters, boards.labels, boards.is_input,
                                                 boards.board_size)
    from_peers = peer_label_permutation(label_cooccurrence)
    chosen = from_peers if permutation_source == "peers" else from_loss

    permutation = permutation_record(chosen, output_perm, P, source=permutation_source,
                                     from_loss=from_loss.tolist(), from_peers=from_peers.tolist(),
                                     peer_label_cooccurrence=label_cooccurrence.tolist(),
                                     assignment=used, argmax=argmax.tolist(),
                                     hungarian=hungarian.tolist(), argmax_is_permutation=argmax_ok,
                                     output_to_input=rho.tolist(), aligned_to_inputs=align_inputs,
                                     peer_cooccurrence=cooccurrence.tolist(), best_epoch=best["epoch"])
    save_figure(plot_permutation(P, output_perm), args.plot_out)
    info = {
        **{f"val_{k}": v for k, v in best["scores"].items()},
        "loss": best["loss"],
        "best_epoch": best["epoch"],
        "epochs_run": epoch,
        "argmax_is_permutation": argmax_ok,
        "argmax_equals_hungarian": bool(torch.equal(argmax, hungarian)),
        "outputs_numbered_like_inputs": bool(torch.equal(rho, torch.arange(K))),
        "loss_agrees_with_peers": bool(torch.equal(from_loss, from_peers)),
    }
    save_all({args.model_out: checkpoint(model.cpu()), args.permutation_out: permutation})
    report.finish({"ground_cells": info["val_blank_cells"]}, info)
    print(f"ground: best epoch {best['epoch']}/{epoch}, val blank cells "
          f"{info['val_blank_cells']:.3f}, cluster->digit {chosen.tolist()} from "
          f"{permutation_source} (loss: {from_loss.tolist()} by {used}"
          f"{', aligned to inputs' if align_inputs else ''}; peers: {from_peers.tolist()})")


if __name__ == "__main__":
    run_stage(main)
