"""Our model's variants on boards with the truth: the evaluate stage's scoring.

`our_variants` builds, from the trained models, the variants the results table scores (the
model as trained in one look and in `evaluate.views` views, re-read, proofread, and the final
model checked by SATNet); `score_ours` scores each against the true solutions with bootstrap
intervals; `grounding_scores` checks the cluster -> digit maps against the true matching of the
test images. Truth is read here to report only: nothing it computes feeds a model.

    ours, intervals = score_ours(our_variants(solvers, params), test, solution, image_digits,
                                 params, device)   # {variant: {"board_accuracy": ..., ...}}
"""
from __future__ import annotations

import numpy as np
import torch

from ..boards.data import given_image_indices
from ..boards.intervals import board_outcomes, image_bootstrap
from ..boards.metrics import best_matching, clustering_accuracy, solution_metrics
from ..readers.lenet import predict as classify
from ..readers.views import ReaderViews
from .check import Checked
from .grounding import hard_permutation
from .models import VisualSolver
from .training import solution_digits, solution_scores


# the variants of our model scored, in this order: one_view only with evaluate.views > 1,
# reread unless reread.reader is none, proofreader unless proofread.epochs is 0, the checked ones
# with evaluate.check_folds
OUR_VARIANTS = ("one_view", "no_proofreader", "reread", "proofreader", "checked", "proofreader_checked")


def our_variants(solvers: dict, params) -> dict:
    """OUR_VARIANTS that run, by name: each reader reading in `evaluate.views` views (the model
    as trained also kept in one view, the paper's), and the final model and its proofreader
    checked by SATNet. The proofreader sits on the final reader: re-read, or as trained."""
    reread, views = params.reread.reader != "none", params.evaluate.views
    folds, starts, rounds = params.evaluate.check_folds, params.evaluate.starts, params.evaluate.check_rounds
    context = params.evaluate.check_context
    verify = (params.evaluate.verify_doubtful, params.evaluate.verify_weight, params.evaluate.verify_rounds,
              params.evaluate.verify_readings, params.evaluate.verify_patience)
    proofread = solvers["proofreader"].solver.proofreader is not None  # proofread.epochs 0: no rows
    variants = {name: solvers[name] for name in ["no_proofreader"] + ["reread"] * reread
                + ["proofreader"] * proofread}
    if views > 1:
        variants["one_view"] = variants["no_proofreader"]
        for name, model in list(variants.items()):
            if name != "one_view":
                variants[name] = VisualSolver(ReaderViews(model.classifier, views, params.evaluate.mirror),
                                              model.solver)
    if folds:
        variants["checked"] = Checked(variants["reread" if reread else "no_proofreader"], folds, starts,
                                      rounds=rounds, context=context, verify=verify)
        if proofread:
            variants["proofreader_checked"] = Checked(variants["proofreader"], folds, starts, rounds=rounds,
                                                      context=context, verify=verify)
    return {name: variants[name] for name in OUR_VARIANTS if name in variants}


def score_ours(variants: dict, test, solution, image_digits, params, device) -> tuple[dict, dict]:
    """(scores, intervals) by variant: the board metrics of its digits against the true
    solutions, and their bootstrap intervals over the test images and boards."""
    digits = {name: solution_digits(model.to(device), test, params.evaluate.batch_size, device)
              for name, model in variants.items()}
    scores = {name: solution_metrics(d, solution, test) for name, d in digits.items()}
    intervals = {name: image_bootstrap(board_outcomes(d, solution, test), test, image_digits,
                                       seed=params.seed) for name, d in digits.items()}
    return scores, intervals


def grounding_scores(ground_model, test, solution, truth: dict, saved_perm: dict, batch_size: int,
                     device, folded: torch.Tensor | None = None) -> dict:
    """The self-grounded phase's test scores, its model (speaking clusters) read through the
    learned permutation, and the maps checked against the true cluster -> digit matching of the
    frozen distilled classifier (in ground.pt) on the test images: truth used to report only.
    `folded`: the map train folded into the model (models.folded_permutation; None: the learned
    permutation, as train folded before it recorded its map). "permutation_correct" is the folded
    map's, "ground_permutation_correct" the ground stage's."""
    perm, output_perm = saved_perm["permutation"], saved_perm["output_permutation"]
    folded = perm if folded is None else folded
    ground_model = ground_model.to(device)
    phase = solution_scores(ground_model, test, solution, batch_size, device, perm, output_perm)
    K, pool = test.n_digits, given_image_indices(test)
    n_clusters = len(perm)  # K' > K: a many-to-one map, checked against the best onto one
    clusters = classify(ground_model.classifier.to(device), test.images[pool]).numpy()
    digits = truth["image_labels"][pool].long().numpy() - 1
    true_perm = torch.from_numpy(best_matching(clusters, digits, n_clusters, K))
    soft = saved_perm["soft_permutation"]

    def right(mapping: torch.Tensor) -> bool:
        """The map equals the true one; with more clusters than digits, on every cluster that
        holds a test image (a cluster no image falls in carries no evidence either way)."""
        used = torch.from_numpy(np.unique(clusters)) if n_clusters > K else torch.arange(K)
        return bool(torch.equal(mapping[used], true_perm[used]))

    return {
        "clustering_accuracy": clustering_accuracy(clusters, digits, n_clusters, K),
        "map_images_right": float((folded[torch.from_numpy(clusters)].numpy() == digits).mean()),
        "permutation_correct": right(folded),
        "ground_permutation_correct": right(perm),
        "reground": not torch.equal(folded, perm),  # train folded another map than the ground stage's
        "folded_permutation": folded.tolist(),
        "output_permutation_correct": right(output_perm),
        "argmax_correct": right(hard_permutation(soft, "argmax")),
        "hungarian_correct": right(hard_permutation(soft, "hungarian")),
        "true_permutation": true_perm.tolist(),
        **{f"phase_{k}": v for k, v in phase.items()},
    }
