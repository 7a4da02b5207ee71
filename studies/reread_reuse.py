"""How the re-read depends on image reuse with SATNet's training held fixed: votes an image limited.

    python studies/reread_reuse.py [--cells 1 5 all] [--settings givens:0.1:2 solution:1:1] [--out FILE.csv]

The image-reuse runs (docs/studies/image-reuse.md) change the boards SATNet trains on together
with the reuse. This study keeps the workspace's trained model (models/solver.pt, after
`dvc repro`) and emulates low reuse in the re-read alone: SATNet's inferences of an image count
from only `--cells` of the given cells it fills, drawn at random (seed 0; with the 60,000 MNIST
training digits an image would fill about 5 at 9,000 boards). Every given is released as the
setting says, so SATNet sees what it would see with that reuse. Per row, the re-read with
params.yaml's reader and seed, at each `--settings` CONTEXT:RELEASE:PASSES (`reread.context`,
`reread.release`, `reread.passes`; default: params.yaml's, and `solution:1:1`, the blank cells'
training labels seen too and every given released at once).

Printed and written: votes an image, pseudo-labels right (the training images' true digits,
read here for this report only; no stage reads them), the new reader's accuracy on the dev
images, and the dev boards exact and with every blank right, re-read and re-read + check
(params.yaml's `evaluate.check_folds` and `evaluate.starts`). Dev boards only, never the test
boards.
"""
import argparse
import time

import torch

from common import dev_percentages, show_rows, workspace_arguments
from satground.solver.check import Checked
from satground.boards.data import given_image_indices, load_boards, load_image_labels
from satground.harness.io import seed_everything
from satground.readers.lenet import predict as classify
from satground.solver.models import VisualSolver, load_solver
from satground.harness.params import load_params
from satground.solver.reread import pseudo_labels, satnet_votes, train_reader
from satground.satnet import check_setup
from satground.solver.training import solution_scores


def voter_cells(boards, cells: int | None, generator: torch.Generator) -> torch.Tensor | None:
    """bool (N, C): `cells` given cells drawn at random for each pool image (all of an image's
    cells where it fills fewer); None (every given) for `cells` None."""
    if cells is None:
        return None
    where = boards.is_input.nonzero()
    image = boards.cell_image[where[:, 0], where[:, 1]]
    order = torch.randperm(len(where), generator=generator)
    by_image = order[torch.sort(image[order], stable=True).indices]  # random order within each image
    counts = torch.bincount(image, minlength=len(boards.images))
    first = torch.cumsum(counts, 0) - counts
    rank = torch.arange(len(by_image)) - first[image[by_image]]
    chosen = where[by_image[rank < cells]]
    mask = torch.zeros_like(boards.is_input)
    mask[chosen[:, 0], chosen[:, 1]] = True
    return mask


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    workspace_arguments(parser, models=False)
    parser.add_argument("--model", default="models/solver.pt")
    parser.add_argument("--cells", nargs="+", default=["1", "5", "all"],
                        help="given cells an image may vote from (all: every one)")
    parser.add_argument("--settings", nargs="+", help="CONTEXT:RELEASE:PASSES of the re-read")
    parser.add_argument("--out", help="CSV of the rows (printed as a table either way)")
    args = parser.parse_args(argv)

    params = load_params(args.params)
    cfg, folds, starts = params.reread, params.evaluate.check_folds, params.evaluate.starts
    device = torch.device("cpu")
    check_setup(device, params.satnet.precision, params.satnet.gemm)
    train = load_boards(args.prepared, "train")
    dev = load_boards(args.prepared, "dev", like=train)
    solution = load_boards(args.prepared, "dev", view="grounded").labels
    model = load_solver(args.model, boards=train, kind="visual", solve_sweeps=params.satnet.solve_sweeps)
    pool, dev_pool = given_image_indices(train), given_image_indices(dev)
    truth = load_image_labels(args.prepared, "train", pool)  # this report only
    dev_truth = load_image_labels(args.prepared, "dev", dev_pool)

    settings = [(context, float(release), int(passes)) for context, release, passes in
                (setting.split(":") for setting in
                 args.settings or [f"{cfg.context}:{cfg.release}:{cfg.passes}", "solution:1:1"])]
    rows = []
    for cells in args.cells:
        voters = voter_cells(train, None if cells == "all" else int(cells), torch.Generator().manual_seed(0))
        for context, release, passes in settings:
            start = time.perf_counter()
            votes, counts, reading = satnet_votes(model, train, release, passes, cfg.batch_size,
                                                  seed_everything(cfg.seed), context, voters)
            labels = pseudo_labels(votes, reading)[pool]
            vote_seconds = time.perf_counter() - start
            reader = train_reader(cfg.reader, train.images[pool], labels, train.n_digits, cfg.epochs,
                                  cfg.nets, cfg.seed, keep=model.classifier if cfg.keep_classifier else None,
                                  **cfg.reader_training())
            reread = VisualSolver(reader, model.solver)
            row = {"cells_an_image": cells, "context": context, "release": release, "passes": passes,
                   "votes_an_image": round(counts[pool].mean().item(), 2),
                   "pseudo_labels_right_pct": round(100 * (labels == truth).float().mean().item(), 2),
                   "reader_dev_pct": round(100 * (classify(reader, dev.images[dev_pool]) == dev_truth)
                                           .float().mean().item(), 2)}
            for name, solver in (("reread", reread), ("checked", Checked(reread, folds, starts))):
                seed_everything(params.seed)
                scores = solution_scores(solver, dev, solution, params.evaluate.batch_size, device)
                row.update({f"{column}_{name}": value for column, value in dev_percentages(scores).items()})
            row["vote_seconds"] = round(vote_seconds, 1)
            row["seconds"] = round(time.perf_counter() - start, 1)
            rows.append(row)
            print(row, flush=True)
    show_rows(rows, f"{len(dev)} dev boards; {len(pool)} training images; re-read with "
                    f"{cfg.reader}, check {folds} folds, {starts} starts", args.out)


if __name__ == "__main__":
    main()
