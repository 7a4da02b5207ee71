"""InfoGAN at nine digits, trained until it stops improving (docs/studies/infogan-nine.md).

    python studies/infogan_nine.py run --seed 0 --epochs 80 --shift 2 --out results/infogan_nine/curves.jsonl
    python studies/infogan_nine.py table results/infogan_nine/curves.jsonl
    python studies/infogan_nine.py record results/cpu9_paper [--workspace <its dvc repro checkout>]

`run` prepares the boards of the `cpu9_paper` profile with `data.seed` = S (the real `prepare`
stage, once per seed, in --scratch), then trains the paper's InfoGAN on the training boards'
given-cell images with `cluster.seed` = S + restart and the settings given, through the same
`InfoGANClusterer` the `cluster` stage runs. After every epoch it appends one JSON line: the
losses, seconds, the label-free figures (Q's code information on the training images, the
largest cluster's share) and, for the report only, the clustering accuracy on the dev images.
The last epoch's cluster of every training image goes to --scratch, for the agreement between
restarts that `table` computes (label-free too).

`record` prints what a kept `cpu9_paper` record (scripts/keep_results.py) shows of the paper's
pipeline: each InfoGAN restart's dev clustering curve, the restart table (the label-free
criterion, the code information, the dev accuracy, which run was kept), the grounding phase's
per-cell curve on held-out training boards with the epoch it stopped at, and the permutation by
the authors' arg max and by the Hungarian matching of the same P_hat. With --workspace (the
finished checkout, before its models are gone) it also says whether each is the true one, from
the training images' truth (a report only; no stage reads it).
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from common import REPO, append_rows, read_rows, stage


def prepared_boards(seed: int, scratch: Path) -> Path:
    """data/prepared of the cpu9_paper profile at data.seed = seed (prepared once)."""
    import yaml
    from satground.harness.params import compose

    folder = scratch / f"data_seed{seed}"
    if not (folder / "prepared" / "train.pt").is_file():
        folder.mkdir(parents=True, exist_ok=True)
        params = compose("cpu9_paper")
        params["data"]["seed"] = seed
        (folder / "params.yaml").write_text(yaml.safe_dump(params))
        stage("prepare.py", "--params", folder / "params.yaml", "--data-out", folder / "prepared",
              "--plot-out", folder / "boards.png", "--metrics-out", folder / "metrics")
    return folder / "prepared"


def run(args) -> None:
    import numpy as np
    import torch
    from types import SimpleNamespace

    from satground.clustering.infogan import InfoGANClusterer, code_information, code_probabilities
    from satground.boards.data import load_given_images, load_image_labels
    from satground.boards.metrics import cluster_report
    from satground.harness.params import compose

    prepared = prepared_boards(args.seed, args.scratch)
    train_images, _, boards = load_given_images(prepared, "train")
    dev_images, dev_idx, _ = load_given_images(prepared, "dev", boards.n_digits)
    dev_labels = load_image_labels(prepared, "dev", dev_idx)  # the report only
    k = boards.n_digits
    cfg = SimpleNamespace(**{**compose("cpu9_paper")["cluster"], "epochs": args.epochs,
                             "batch_size": args.batch, "lr_d": args.lr_d, "lr_g": args.lr_g,
                             "shift": args.shift})
    seed = args.seed + args.restart
    tag = f"s{args.seed}r{args.restart}_b{args.batch}_shift{args.shift}_d{args.lr_d:g}_g{args.lr_g:g}"
    settings = {"data_seed": args.seed, "restart": args.restart, "cluster_seed": seed,
                "batch": args.batch, "shift": args.shift, "lr_d": args.lr_d, "lr_g": args.lr_g,
                "threads": torch.get_num_threads(), "tag": tag}

    def on_epoch(epoch, clusterer, losses, seconds):
        probs = code_probabilities(clusterer.model, train_images)
        train = cluster_report(probs.argmax(1), None, k)
        dev = cluster_report(clusterer.assign(dev_images), dev_labels, k)
        row = {**settings, "epoch": epoch, "seconds": seconds, **losses,
               "code_information": code_information(probs),
               "largest_cluster": train["largest_cluster_fraction"], "dev_accuracy": dev["accuracy"]}
        append_rows(args.out, [row])
        print(f"{tag} epoch {epoch}: dev {dev['accuracy']:.3f} info {row['code_information']:.3f}"
              f" ({seconds or 0:.1f} s)", flush=True)
        if epoch == args.epochs:
            np.save(args.scratch / f"{tag}_e{epoch}.npy", probs.argmax(1).numpy().astype(np.int8))
        return row

    start = time.perf_counter()
    InfoGANClusterer.from_settings(train_images, k, seed, cfg, on_epoch=on_epoch)
    print(f"{tag}: {time.perf_counter() - start:.0f} s")


def agreement(tags: list[str], scratch: Path, epoch: int) -> dict[str, float]:
    """Each run's mean adjusted Rand index with the other runs' clusters of the same training
    images (label-free): runs that found the digits agree with one another."""
    import numpy as np
    from sklearn.metrics import adjusted_rand_score

    found = {t: np.load(scratch / f"{t}_e{epoch}.npy") for t in tags
             if (scratch / f"{t}_e{epoch}.npy").is_file()}
    return {t: float(np.mean([adjusted_rand_score(found[t], found[u]) for u in found if u != t]))
            for t in found if len(found) > 1}


def table(path: Path, scratch: Path) -> str:
    rows = read_rows(path)
    runs: dict[str, list[dict]] = {}
    for row in rows:
        runs.setdefault(row["tag"], []).append(row)
    lines = ["| run | epochs | best dev % (epoch) | last dev % | code information, last | s/epoch |",
             "|---|---|---|---|---|---|"]
    finals = {}
    for tag, curve in runs.items():
        best = max(curve, key=lambda r: r["dev_accuracy"])
        last = curve[-1]
        timed = [r["seconds"] for r in curve if r["seconds"]]
        finals[tag] = last
        lines.append(f"| {tag} | {last['epoch']} | {100 * best['dev_accuracy']:.1f} ({best['epoch']}) | "
                     f"{100 * last['dev_accuracy']:.1f} | {last['code_information']:.3f} | "
                     f"{sum(timed) / max(len(timed), 1):.1f} |")
    by_group: dict[tuple, list[str]] = {}
    for tag, last in finals.items():
        by_group.setdefault((last["data_seed"], last["epoch"]), []).append(tag)
    for (seed, epoch), tags in sorted(by_group.items()):
        scores = agreement(tags, scratch, epoch)
        if scores:
            lines += ["", f"Data seed {seed}, epoch {epoch}: agreement between restarts (mean ARI)",
                      "", "| run | agreement | code information | dev % |", "|---|---|---|---|"]
            lines += [f"| {t} | {scores[t]:.3f} | {finals[t]['code_information']:.3f} | "
                      f"{100 * finals[t]['dev_accuracy']:.1f} |" for t in sorted(scores)]
    return "\n".join(lines)


def curve(kept, stage: str, name: str) -> dict[int, float]:
    """step -> value of a kept record's curve; a one-line error naming the record where absent."""
    from satground.harness.io import PipelineError

    if name not in kept.curves.get(stage, {}):
        raise PipelineError(f"{kept.folder / 'metrics.json'}: no curve {name!r} of stage {stage!r}")
    return kept.curves[stage][name]


def record(folder: Path, workspace: Path | None) -> str:
    from satground.harness.io import PipelineError
    from satground.harness.records import read_record

    kept = read_record(folder)
    cluster = kept.stage_info("cluster")
    runs = cluster["restarts"]
    by_run = {run["restart"]: curve(kept, "cluster", (f"restart_{run['restart']}/" if len(runs) > 1 else "")
                                    + "dev_accuracy") for run in runs}
    epochs = sorted(next(iter(by_run.values())))
    shown = [e for e in epochs if e % 10 == 0 or e == epochs[-1]]
    lines = ["InfoGAN, dev clustering accuracy % by epoch (labels read for this report only):", "",
             "| restart (seed) | " + " | ".join(map(str, shown)) + " |", "|---" * (len(shown) + 1) + "|"]
    lines += [f"| {r} ({runs[r]['seed']}) | " + " | ".join(f"{100 * curve[e]:.1f}" for e in shown) + " |"
              for r, curve in by_run.items()]
    choice = cluster.get("restart_choice", "peers")
    lines += ["", (f"Restarts, chosen by `{choice}` (label-free):" if len(runs) > 1 else "One run:"), "",
              "| restart (seed) | criterion | code information | dev % | >= 88 % | kept | minutes |",
              "|---|---|---|---|---|---|---|"]
    for run in runs:
        criterion = run.get("criterion")
        info = run.get("code_information")
        lines.append(f"| {run['restart']} ({run['seed']}) | {'n/a' if criterion is None else f'{criterion:.3f}'} | "
                     f"{'n/a' if info is None else f'{info:.3f}'} | {100 * run['dev_accuracy']:.1f} | "
                     f"{'yes' if run['dev_accuracy'] >= 0.88 else 'no'} | "
                     f"{'**kept**' if run['seed'] == cluster['seed'] else ''} | "
                     f"{run['seconds'] / 60 if run.get('seconds') else float('nan'):.1f} |")
    ground = kept.stage_info("ground")
    cells = curve(kept, "ground", "val_blank_cells")
    lines += ["", "Grounding phase, blank cells right on held-out training boards, % (chance 11.1):", "",
              "| epoch | " + " | ".join(map(str, cells)) + " |", "|---" * (len(cells) + 1) + "|",
              "| blank cells | " + " | ".join(f"{100 * v:.1f}" for v in cells.values()) + " |", "",
              f"Stopped: best epoch {ground['best_epoch']} of {ground['epochs_run']} run."]
    perm = kept.permutation
    if perm is None:
        raise PipelineError(f"{folder / 'metrics.json'}: no permutation kept")
    truth = None
    if workspace is not None:
        from common import WORKSPACE, true_permutation
        truth = true_permutation(workspace / WORKSPACE["prepared"], workspace / WORKSPACE["lenet"])
    for name in ("argmax", "hungarian"):
        right = "" if truth is None else ("  right" if perm[name] == truth else "  WRONG")
        lines.append(f"- {name}: {perm[name]}{right}")
    lines.append(f"- used: {perm['assignment']}; arg max a permutation: {perm['argmax_is_permutation']}")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--restart", type=int, default=0)
    r.add_argument("--epochs", type=int, default=60)
    r.add_argument("--batch", type=int, default=32)
    r.add_argument("--shift", type=int, default=0)
    r.add_argument("--lr-d", type=float, default=2e-4)
    r.add_argument("--lr-g", type=float, default=1e-3)
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--scratch", type=Path, default=REPO / ".scratch" / "infogan_nine")
    t = sub.add_parser("table")
    t.add_argument("path", type=Path)
    t.add_argument("--scratch", type=Path, default=REPO / ".scratch" / "infogan_nine")
    c = sub.add_parser("record")
    c.add_argument("folder", type=Path)
    c.add_argument("--workspace", type=Path)
    args = parser.parse_args(argv)
    if args.command == "record":
        print(record(args.folder, args.workspace))
    elif args.command == "run":
        args.scratch.mkdir(parents=True, exist_ok=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        run(args)
    else:
        print(table(args.path, args.scratch))


if __name__ == "__main__":
    main()
