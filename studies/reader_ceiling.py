"""The re-read reader's ceiling on a run's training pool: report only, nothing here decides a setting.

    python studies/reader_ceiling.py [--params params.yaml] [--prepared data/prepared] [--models models]
        [--out-models models_oracle]

Two figures the method may never use, to say where its reading is lost:
1. the pseudo-labels' accuracy: the first re-read round's labels (`reread` as the stage makes them,
   from models/solver.pt with the same seed) against the training images' true digits;
2. an oracle reader: `reread`'s reader trained, with the same settings, on those true digits
   instead of the pseudo-labels; its dev images read right beside the run's reader's.
The oracle reader, in front of the run's final SATNet (models/solver_reread.pt), is written to
--out-models as solver_reread.pt, for `studies/dev_choices.py --models` to score on the dev boards:
what the final model would solve with a reader that had every training label right.
Reads train_truth.pt and dev_truth.pt (the images' digits); never the test split.
"""
import argparse
import json
from pathlib import Path

import torch

from common import workspace_arguments
from satground.boards.data import given_image_indices, load_boards, load_image_labels
from satground.harness.io import save_all, seed_everything
from satground.harness.params import load_params
from satground.readers.lenet import predict as classify
from satground.satnet import check_setup
from satground.solver.models import VisualSolver, checkpoint, load_solver
from satground.solver.reread import pseudo_labels, satnet_votes, train_reader


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    workspace_arguments(parser)
    parser.add_argument("--out-models", default="models_oracle")
    args = parser.parse_args(argv)

    params = load_params(args.params)
    cfg = params.reread
    check_setup(torch.device("cpu"), params.satnet.precision, params.satnet.gemm)
    train = load_boards(args.prepared, "train")
    dev = load_boards(args.prepared, "dev", like=train)
    models = Path(args.models)
    as_trained = load_solver(models / "solver.pt", boards=train, kind="visual", solve_sweeps=params.satnet.solve_sweeps)
    final = load_solver(models / "solver_reread.pt", boards=dev, kind="visual", solve_sweeps=params.satnet.solve_sweeps)
    train_pool, dev_pool = given_image_indices(train), given_image_indices(dev)
    train_truth = load_image_labels(args.prepared, "train", train_pool)
    dev_truth = load_image_labels(args.prepared, "dev", dev_pool)

    def dev_read_right(reader) -> float:
        return (classify(reader, dev.images[dev_pool]) == dev_truth).float().mean().item()

    generator = seed_everything(cfg.seed)  # round 1's votes, as the stage draws them
    votes, counts, reading = satnet_votes(as_trained, train, cfg.release, cfg.passes, cfg.batch_size,
                                          generator, cfg.context)
    labels = pseudo_labels(votes, reading)[train_pool]
    oracle = train_reader(cfg.reader, train.images[train_pool], train_truth, train.n_digits, cfg.epochs,
                          cfg.nets, cfg.seed, **cfg.reader_training())
    out = Path(args.out_models)
    save_all({out / "solver_reread.pt": checkpoint(VisualSolver(oracle, final.solver))})
    report = {
        "training_images": len(train_pool),
        "classifier_train_read_right": (reading[train_pool].argmax(1) == train_truth).float().mean().item(),
        "pseudo_labels_right": (labels == train_truth).float().mean().item(),
        "pseudo_labels_right_by_digit": [
            (labels[train_truth == d] == d).float().mean().item() for d in range(train.n_digits)],
        "run_reader_dev_read_right": dev_read_right(final.classifier),
        "oracle_reader_dev_read_right": dev_read_right(oracle),
    }
    print(json.dumps(report, indent=1))
    (out / "ceiling.json").write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
