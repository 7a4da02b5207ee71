"""The as-trained classifier's design ceiling: report only, nothing here decides a setting.

    python studies/classifier_ceiling.py --prepared data/prepared --seed 0 --out ceiling.jsonl
        [--designs default n_nets=8 cnn_width=64 cnn_epochs=20 augment.rotation=15 ...]

The model as trained solves a board exactly only if its classifier reads every given right (SATNet
passes the givens' readings through), so its exact boards are bounded by the share of boards whose
~36 givens are all read right. The default's classifier is the clusterer's CNN ensemble, trained on
self-made labels. This study trains the same ensemble on the training images' *true* digits, an
oracle the method never has, for each design (the clusterer's settings with some changed), and
scores the dev images and the dev boards with every given read right: what the method could reach
at best if its self-labels were all right, and whether capacity, epochs or augmentation raise that.

A design is `default` or comma-joined `KEY=VALUE` under the clusterer's section (`cluster.*` of
params: n_nets, cnn_width, cnn_features, cnn_epochs, cnn_lr, cnn_batch_size, augment.rotation,
augment.scale, augment.shift), checked by the params schema as a profile would be. Reads
train_truth.pt and dev_truth.pt; never the test split.
"""
import argparse
import json
import time
from pathlib import Path

import torch

from common import append_rows, parse_setting
from satground.boards.data import given_image_indices, load_boards, load_image_labels
from satground.harness.io import PipelineError
from satground.harness.params import overlay, parse_params, schema_defaults
from satground.readers.digitcnn import deskew, mean_softmax, train_digit_cnns


def design(spec: str):
    """'default' or 'KEY=VALUE,...' -> the default's cluster section with those values, checked."""
    changes = {} if spec == "default" else parse_setting(spec)
    try:
        return parse_params(overlay(schema_defaults(), {"cluster": changes}), f"--designs {spec}").cluster
    except PipelineError as exc:
        raise SystemExit(str(exc)) from None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prepared", default="data/prepared")
    parser.add_argument("--seed", type=int, required=True, help="the run's seed (the nets' seeds as the clusterer's round 1)")
    parser.add_argument("--designs", nargs="+", default=["default"])
    parser.add_argument("--out", type=Path, required=True, help="JSON lines, appended")
    args = parser.parse_args(argv)

    train = load_boards(args.prepared, "train")
    dev = load_boards(args.prepared, "dev", like=train)
    train_pool, dev_pool = given_image_indices(train), given_image_indices(dev)
    truth = load_image_labels(args.prepared, "train", train_pool)
    dev_truth = load_image_labels(args.prepared, "dev", dev_pool)
    x, dev_x = deskew(train.images[train_pool]), deskew(dev.images[dev_pool])
    # dev boards: is each given's image one the reader reads right?
    position = torch.full((len(dev.images),), -1, dtype=torch.long)
    position[dev_pool] = torch.arange(len(dev_pool))
    givens = dev.is_input

    designs = [(spec, design(spec)) for spec in args.designs]  # every design checked before the first fit
    for spec, cfg in designs:
        start = time.perf_counter()
        nets = train_digit_cnns(x, truth, torch.arange(len(x)), train.n_digits,
                                [args.seed * 1000 + 100 + m for m in range(cfg.n_nets)], cfg.cnn_epochs,
                                torch.get_num_threads(), batch_size=cfg.cnn_batch_size, lr=cfg.cnn_lr,
                                rotation=cfg.augment.rotation, scale=cfg.augment.scale,
                                shift=cfg.augment.shift, width=cfg.cnn_width, feature_dim=cfg.cnn_features)
        right = mean_softmax(nets, dev_x, train.n_digits).argmax(1) == dev_truth
        cell_right = right[position[dev.cell_image.clamp(min=0)]] | ~givens
        row = {"seed": args.seed, "design": spec, "training_images": len(train_pool),
               "dev_images": len(dev_pool), "dev_read_right": right.float().mean().item(),
               "dev_boards_givens_right": cell_right.flatten(1).all(1).float().mean().item(),
               "givens_per_dev_board": givens.flatten(1).sum(1).float().mean().item(),
               "seconds": round(time.perf_counter() - start, 1)}
        print(json.dumps(row), flush=True)
        append_rows(args.out, [row])


if __name__ == "__main__":
    main()
