"""The digit classifiers' forward + backward on this CPU: the convolutions' memory layout (NCHW
against channels-last), then the order of ReLU and max-pool (the textbook ReLU-then-pool
against the nets' pool-then-ReLU, channels-last both).

    python benchmarks/conv_layout.py [--repeats 15] [--threads 2]

Times a forward + backward pass of each net at the size a 9x9 pipeline runs it, both variants
pair by pair in one run (median seconds, ratio), from the same initial weights, and prints how
far the two variants' logits (max) and whole gradients (2-norm, relative) differ (the two
orders: 0, bit for bit):

    lenet   the end-to-end classifier (satground.readers.lenet.LeNet) on a `train` batch's given cells:
            40 boards x 36 givens = 1,440 images
    cnn     one net of the re-read ensemble (satground.readers.digitcnn.DigitCNN) on a batch of 128
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from satground.readers.digitcnn import DigitCNN
from satground.readers.lenet import LeNet

NETS = {"lenet": (lambda: LeNet(9), 1440), "cnn": (lambda: DigitCNN(9), 128)}


def relu_then_pool(net: torch.nn.Module, images: torch.Tensor) -> torch.Tensor:
    """The net's logits with each ReLU before its max-pool (the order both nets had before)."""
    if isinstance(net, LeNet):
        x = F.max_pool2d(F.relu(net.conv1(images)), 2)
        x = F.max_pool2d(F.relu(net.conv2(x)), 2)
        return net.fc2(F.relu(net.fc1(x.flatten(1))))
    layers = list(net.body)
    for i, layer in enumerate(layers[:-1]):
        if isinstance(layer, torch.nn.MaxPool2d) and isinstance(layers[i + 1], torch.nn.ReLU):
            layers[i], layers[i + 1] = layers[i + 1], layer
    return net.head(torch.nn.Sequential(*layers)(images))


def step(net: torch.nn.Module, images: torch.Tensor, target: torch.Tensor, forward=None):
    """Seconds of one forward + backward (`forward(net, images)`, or the net's own), and its
    logits and gradients."""
    net.zero_grad(set_to_none=True)
    start = time.perf_counter()
    logits = forward(net, images) if forward else net(images)
    F.cross_entropy(logits, target).backward()
    seconds = time.perf_counter() - start
    return seconds, logits.detach(), [p.grad.clone() for p in net.parameters()]


def inputs(name: str):
    build, n = NETS[name]
    torch.manual_seed(0)
    return build, torch.rand(n, 1, 28, 28), torch.randint(0, 9, (n,))


def pairs(runs: dict, repeats: int):
    """Median seconds of each run (a call returning `step`'s triple), timed pair by pair, and
    each run's last logits and gradients."""
    times, results = {key: [] for key in runs}, {}
    for _ in range(repeats + 1):  # the first pair warms up
        for key, run in runs.items():
            seconds, *results[key] = run()
            times[key].append(seconds)
    return [statistics.median(times[key][1:]) for key in runs], list(results.values())


def compare(name: str, repeats: int) -> list:
    build, images, target = inputs(name)
    runs = {}
    for layout in (torch.contiguous_format, torch.channels_last):
        torch.manual_seed(1)  # the same initial weights in both layouts
        net = build().to(memory_format=layout).train()
        runs[layout] = lambda net=net: step(net, images, target)
    (nchw, last), ((out_a, grads_a), (out_b, grads_b)) = pairs(runs, repeats)
    return [name, len(images), f"{nchw:.4f}", f"{last:.4f}", f"{nchw / last:.2f}x",
            f"{float((out_a - out_b).abs().max()):.1e}",
            f"{float((flat(grads_a) - flat(grads_b)).norm() / flat(grads_b).norm()):.1e}"]


def compare_order(name: str, repeats: int) -> list:
    build, images, target = inputs(name)
    torch.manual_seed(1)
    net = build().train()
    runs = {"relu_first": lambda: step(net, images, target, relu_then_pool),
            "pool_first": lambda: step(net, images, target)}
    (before, after), ((out_a, grads_a), (out_b, grads_b)) = pairs(runs, repeats)
    identical = torch.equal(out_a, out_b) and all(map(torch.equal, grads_a, grads_b))
    return [name, len(images), f"{before:.4f}", f"{after:.4f}", f"{before / after:.2f}x",
            "identical" if identical else "DIFFER"]


def table(header: list[str], rows) -> None:
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(map(str, row)) + " |")


def flat(tensors: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat([t.flatten() for t in tensors])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} threads, forward + backward, median of {args.repeats}")
    table(["net", "images", "NCHW s", "channels-last s", "ratio", "max logit diff",
           "gradient rel diff (2-norm)"], (compare(name, args.repeats) for name in NETS))
    print()
    table(["net", "images", "ReLU then pool s", "pool then ReLU s", "ratio", "logits and gradients"],
          (compare_order(name, args.repeats) for name in NETS))


if __name__ == "__main__":
    main()
