"""Stage `prepare`: Sudoku puzzles + MNIST digits -> visual boards, grounded and ungrounded views.

Puzzles come from the generator (unique solutions, seeded), the published SATNet files or a
CSV of puzzle/solution strings, cut into train, dev and test boards in that order. Digit images
come from the split's own pool: train, dev and test boards draw from disjoint sets of MNIST images. Writes data/prepared/ (see satground.boards.data),
the mean number of givens as its metric, the data's statistics and plots/boards.png.
"""
import numpy as np

from satground.boards import sudoku
from satground.boards.data import (SPLITS, boards_from_given_images, build_visual_boards, given_image_indices,
                                   save_prepared, split_files, split_image_pools)
from satground.boards.mnist import load_digits
from satground.boards.plots import plot_boards
from satground.boards.puzzles import check_disjoint, get_puzzles, givens_summary
from satground.harness.io import save_figure
from satground.harness.params import load_params
from satground.harness.stage import check_memory, run_stage, stage_arguments
from satground.harness.tracking import StageReport


def main(argv=None):
    args = stage_arguments(__doc__, ["data-out", "plot-out", "metrics-out"], argv)

    params = load_params(args.params)
    cfg = params.data
    # each board: puzzle, solution, image index (int64) and an input flag per cell
    check_memory(params.source, "'data.n_train', 'data.n_dev' and 'data.n_test'",
                 (cfg.n_train + cfg.n_dev + cfg.n_test) * cfg.board_size ** 4 * 25)
    puzzle_seed, pool_seed, *split_seeds = np.random.SeedSequence(cfg.seed).generate_state(2 + len(SPLITS))
    split_seeds = dict(zip(SPLITS, (int(s) for s in split_seeds)))
    digits = None
    if cfg.puzzles.source != "published":  # read the digits first: a bad MNIST path fails fast
        digits = load_digits(cfg.mnist.source, cfg.mnist.root, cfg.mnist.download)
    puzzles, solutions, given, info, names = get_puzzles(cfg, int(puzzle_seed), params.source)
    where = cfg.puzzles.path or "generated puzzles"
    n_train, n_dev, n_test = cfg.n_train, cfg.n_dev, cfg.n_test
    split_rows = {"train": (0, n_train), "dev": (n_train, n_train + n_dev),
                  "test": (n_train + n_dev, n_train + n_dev + n_test)}
    if given is None:
        sudoku.check_puzzles(puzzles, solutions, cfg.board_size, where, names)
        check_disjoint(puzzles, split_rows, where, names)
    else:
        sudoku.check_boards(puzzles, solutions, cfg.board_size, where)
    info["duplicate_puzzles"] = int(len(puzzles) - len(np.unique(puzzles, axis=0)))

    if given is None:  # draw digit images from MNIST, disjoint pools per split
        pools = split_image_pools(*digits, cfg.board_size, cfg.test_image_fraction, int(pool_seed),
                                  params.source, dev_fraction=cfg.dev_image_fraction,
                                  train_images=cfg.train_images)
        image_source = cfg.mnist.source
    else:
        image_source = "published features_img.pt"
    files, boards = {}, {}
    for split in SPLITS:
        start, stop, split_seed = *split_rows[split], split_seeds[split]
        if given is None:
            boards[split] = build_visual_boards(puzzles[start:stop], solutions[start:stop], *pools[split],
                                                cfg.board_size, split_seed)
            pool_labels = pools[split][1]
        else:
            images, positions = given
            rows = (positions[:, 0] >= start) & (positions[:, 0] < stop)
            boards[split], pool_labels = boards_from_given_images(
                puzzles[start:stop], solutions[start:stop], images[rows],
                positions[rows] - [start, 0], cfg.board_size, split_seed)
        files.update(split_files(split, boards[split], pool_labels))

    # our MNIST pools are disjoint by construction; the published images are not split by us
    train_bytes = {bytes(im) for im in boards["train"].images.numpy()}
    overlap = sum(bytes(im) in train_bytes for split in ("dev", "test") for im in boards[split].images.numpy())

    report = StageReport(args.metrics_out)
    save_prepared(args.data_out, files)
    timing = {key: info.pop(key) for key in ("compile_seconds", "generation_seconds") if key in info}
    statistics = {
        "board_size": cfg.board_size, "seed": cfg.seed, "puzzle_source": cfg.puzzles.source,
        "image_source": image_source, "n_train": n_train, "n_dev": n_dev, "n_test": n_test,
        "givens": {split: givens_summary(puzzles[slice(*split_rows[split])]) for split in SPLITS},
        "image_pool_size": {split: len(boards[split].images) for split in SPLITS},
        "given_images_used": {split: int(given_image_indices(boards[split]).numel()) for split in SPLITS},
        "pool_overlap_images": overlap, **info,
    }
    save_figure(plot_boards(boards["train"], n_boards=4), args.plot_out)
    report.finish({"givens": statistics["givens"]["train"]["mean"]}, statistics, **timing)

    K = cfg.board_size ** 2
    generated = (f", {len(puzzles)} puzzles generated in {timing['generation_seconds']:.2f} s"
                 if "generation_seconds" in timing else "")
    pools_shown = "/".join(str(statistics["image_pool_size"][split]) for split in SPLITS)
    print(f"prepare: {n_train} train / {n_dev} dev / {n_test} test {K}x{K} boards ({cfg.puzzles.source}"
          f"{generated}), {statistics['givens']['train']['mean']:.1f} givens on average, image pools "
          f"{pools_shown} ({image_source}) "
          f"-> {args.data_out}")


if __name__ == "__main__":
    run_stage(main)
