"""Image-only digit clusterers on the offline MNIST digits: dev clustering accuracy over data seeds.

Every run splits the images of digits 1..K as the `prepare` stage does at data.seed = S
(split_image_pools with the schema's data.test_image_fraction and data.dev_image_fraction, 0.2
and 0.1, and the stage's pool seed drawn from S: the same train, dev and test pools), fits a
clusterer on the train pool's images (no labels, no boards), assigns the dev pool's images with
the fitted model (no refit; the test pool is split off and left unused), and records the
Hungarian-matched accuracy of both pools (labels are read for this report only) with the CPU
seconds (user + system) and wall seconds of the whole run: a fresh single-threaded Python
process doing imports, fit and both assignments. Rows written before the dev-only rule
(test_acc, n_test: the figures of docs/image-clustering.md) split with a test fraction of 0.2
and seed S alone and scored that test pool; --table shows them until a rerun of the same method,
digits and seed replaces them, the heading and a mixed mean saying so.

    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python studies/image_clusterers.py \
        --methods umap_deskew n2d selflabel --digits 9 4 --seeds 0 1 2 3 4
    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python studies/image_clusterers.py \
        --methods simclr --digits 9 --seeds 0
    python studies/image_clusterers.py --table          # markdown table of runs.jsonl

Methods:
    umap_deskew  deskewed pixels -> PCA 50 -> UMAP (10-d, min_dist 0) -> Gaussian mixture;
                 held-out images through UMAP's transform and the mixture
    n2d          N2D (McInnes-style): an autoencoder (784-500-500-2000-10 MLP, 20 epochs) on the
                 deskewed pixels, UMAP of its codes (K dimensions, 20 neighbours) -> mixture
    simclr       a SimCLR-trained CNN (NT-Xent, two affine views, 40 epochs) on deskewed images,
                 UMAP of its normalised features -> mixture
    selflabel    satground.clustering.selflabel.SelfLabelClusterer at its defaults
Results are appended as JSON lines to results/image_clusterers/runs.jsonl.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from common import REPO, append_rows, markdown, read_rows

OUT = REPO / "results" / "image_clusterers" / "runs.jsonl"
METHODS = ("umap_deskew", "n2d", "simclr", "selflabel")


# ----------------------------------------------------------------------------- candidates
# Each returns (train clusters, held-out clusters) from uint8 tensors; only images go in.

def _umap_gmm(train_feats, held_out_feats, k, seed, n_neighbors, dim, metric="euclidean"):
    import warnings

    import umap
    from sklearn.mixture import GaussianMixture

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        reducer = umap.UMAP(n_neighbors=n_neighbors, n_components=dim, min_dist=0.0,
                            metric=metric, random_state=seed).fit(train_feats)
        held_out_emb = reducer.transform(held_out_feats)
    mixture = GaussianMixture(k, n_init=5, random_state=seed).fit(reducer.embedding_)
    return mixture.predict(reducer.embedding_), mixture.predict(held_out_emb)


def run_umap_deskew(train, held_out, k, seed):
    from sklearn.decomposition import PCA

    from satground.readers.digitcnn import deskew

    a = deskew(train).reshape(len(train), -1).numpy()
    b = deskew(held_out).reshape(len(held_out), -1).numpy()
    pca = PCA(50, svd_solver="full").fit(a)
    return _umap_gmm(pca.transform(a), pca.transform(b), k, seed, 10, 10)


def run_n2d(train, held_out, k, seed, epochs=20):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    from satground.readers.digitcnn import deskew

    torch.manual_seed(seed)
    a = deskew(train).reshape(len(train), -1)
    b = deskew(held_out).reshape(len(held_out), -1)
    dims = [784, 500, 500, 2000, 10]
    enc, dec = [], []
    for i in range(4):
        enc += [nn.Linear(dims[i], dims[i + 1])] + ([nn.ReLU()] if i < 3 else [])
        dec += [nn.Linear(dims[4 - i], dims[3 - i])] + ([nn.ReLU()] if i < 3 else [])
    enc, dec = nn.Sequential(*enc), nn.Sequential(*dec)
    opt = torch.optim.Adam(list(enc.parameters()) + list(dec.parameters()), lr=1e-3)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        perm = torch.randperm(len(a), generator=gen)
        for i in range(0, len(a), 256):
            x = a[perm[i:i + 256]]
            loss = F.mse_loss(dec(enc(x)), x)
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        fa, fb = enc(a).numpy(), enc(b).numpy()
    return _umap_gmm(fa, fb, k, seed, 20, k)


def run_simclr(train, held_out, k, seed, epochs=40, batch=256, tau=0.2):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    from satground.readers.digitcnn import DigitCNN, augment, deskew

    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    a, b = deskew(train), deskew(held_out)
    net = DigitCNN(1, 32, 128)
    net.head = nn.Identity()
    proj = nn.Sequential(nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 64))
    opt = torch.optim.Adam(list(net.parameters()) + list(proj.parameters()), lr=2e-3)
    views = dict(rotation=15.0, scale=0.15, shift=3.0)
    for _ in range(epochs):
        net.train()
        perm = torch.randperm(len(a), generator=gen)
        for i in range(0, len(a) - batch + 1, batch):
            x = a[perm[i:i + batch]]
            z = F.normalize(proj(net(torch.cat([augment(x, gen, **views), augment(x, gen, **views)]))), dim=1)
            sim = z @ z.T / tau
            sim.fill_diagonal_(-1e9)
            n = len(x)
            loss = F.cross_entropy(sim, torch.cat([torch.arange(n, 2 * n), torch.arange(n)]))
            opt.zero_grad()
            loss.backward()
            opt.step()
    net.eval()
    with torch.no_grad():
        fa, fb = F.normalize(net(a), dim=1).numpy(), F.normalize(net(b), dim=1).numpy()
    return _umap_gmm(fa, fb, k, seed, 10, 10, metric="cosine")


def run_selflabel(train, held_out, k, seed):
    from satground.clustering.selflabel import SelfLabelClusterer
    from satground.harness.params import Cluster

    model = SelfLabelClusterer.fit(train, k, seed=seed, cfg=Cluster(rounds=2, n_nets=3))
    return model.assign(train).numpy(), model.assign(held_out).numpy()


def one(method: str, digits: int, seed: int) -> dict:
    """Runs in the child process: fit + assign, accuracies."""
    import numpy as np
    import torch

    torch.set_num_threads(1)
    from satground.boards.data import SPLITS, split_image_pools
    from satground.boards.metrics import clustering_accuracy
    from satground.boards.mnist import load_digits
    from satground.harness.params import Data

    board = {4: 2, 9: 3}[digits]
    data = Data()  # the schema's image fractions, which params.yaml and every profile keep
    images, labels = load_digits(data.mnist.source)
    # the prepare stage's pool seed for data.seed = S (stages/prepare.py): the pipeline's pools
    pool_seed = np.random.SeedSequence(seed).generate_state(2 + len(SPLITS))[1]
    pools = split_image_pools(images, labels, board, data.test_image_fraction, int(pool_seed),
                              dev_fraction=data.dev_image_fraction)
    (xtr, ytr), (xdev, ydev) = pools["train"], pools["dev"]
    train_cl, dev_cl = globals()[f"run_{method}"](torch.from_numpy(xtr), torch.from_numpy(xdev),
                                                 digits, seed)
    return {"train_acc": clustering_accuracy(np.asarray(train_cl), ytr.astype(int) - 1, digits),
            "dev_acc": clustering_accuracy(np.asarray(dev_cl), ydev.astype(int) - 1, digits),
            "n_train": len(xtr), "n_dev": len(xdev)}


def measure(method: str, digits: int, seed: int) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--one", method, str(digits), str(seed)],
                          capture_output=True, text=True, env=env, cwd=REPO)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"{method} digits={digits} seed={seed} failed:\n{proc.stderr}")
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"method": method, "digits": digits, "seed": seed, **row,
            "cpu_seconds": round(cpu, 1), "wall_seconds": round(wall, 1)}


def held_out(row: dict) -> float:
    """A run's accuracy on held-out images: the dev pool ("test_acc" in rows before the dev-only
    rule, which scored their own test pool)."""
    return row["dev_acc"] if "dev_acc" in row else row["test_acc"]


def table(path: Path) -> str:
    latest = {(r["method"], r["digits"], r["seed"]): r for r in read_rows(path)}  # a rerun replaces
    methods = [m for m in METHODS if any(k[0] == m for k in latest)]
    out = []
    for digits in sorted({k[1] for k in latest}, reverse=True):
        seeds = sorted({k[2] for k in latest if k[1] == digits})
        cols = [m for m in methods if any(k[0] == m and k[1] == digits for k in latest)]
        out.append(f"\n**{digits} digits** (dev clustering accuracy %, test in rows before the dev-only rule; "
                   "CPU s of fit + assignment)\n")
        lines = []
        for s in seeds:
            cells = []
            for m in cols:
                r = latest.get((m, digits, s))
                cells.append("" if r is None else f"{100 * held_out(r):.1f} ({r['cpu_seconds']:.0f} s)")
            lines.append([s, *cells])
        means = []
        for m in cols:
            rs = [latest[(m, digits, s)] for s in seeds if (m, digits, s) in latest]
            acc = sum(held_out(r) for r in rs) / len(rs)
            cpu = sum(r["cpu_seconds"] for r in rs) / len(rs)
            lo = min(held_out(r) for r in rs)
            mixed = len({"dev_acc" in r for r in rs}) > 1
            means.append(f"{100 * acc:.1f} ({cpu:.0f} s), min {100 * lo:.1f}, n={len(rs)}"
                         + (", dev and test rows mixed" if mixed else ""))
        out.append(markdown(["seed", *cols], lines + [["mean", *means]]))
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=["umap_deskew", "n2d", "selflabel"])
    parser.add_argument("--digits", nargs="+", type=int, choices=(4, 9), default=[9, 4])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--table", action="store_true", help="print the markdown table of --out")
    parser.add_argument("--one", nargs=3, metavar=("METHOD", "DIGITS", "SEED"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], int(args.one[1]), int(args.one[2]))))
        return
    if args.table:
        print(table(args.out))
        return
    for digits in args.digits:
        for seed in args.seeds:
            for method in args.methods:
                row = measure(method, digits, seed)
                print(json.dumps(row), flush=True)
                append_rows(args.out, [row])


if __name__ == "__main__":
    main()
