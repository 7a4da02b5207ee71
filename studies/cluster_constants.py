"""The selflabel clusterer's constants, screened by a label-free criterion (R8 of
docs/studies/label-free-choices.md, issue 67).

The constants (UMAP runs and agreement, PCA and UMAP sizes, the self-labelling confidence, the
CNNs' epochs, rate, batch, width, features and augmentation) were set on test-pool clustering
accuracy. This screen re-decides them on the default's own data, reading no label:

- Criterion: the **peer-conflict rate** (satground.boards.metrics.peer_conflict_rate) of the
  fitted clusterer's readings, the share of image pairs shown in peer given cells (same row,
  column or box of one board, so different digits) that it puts in one cluster; 0 for clusters
  that are the digits. Computed on the training boards (the images it clustered) and on the dev
  boards (new images). It reads the cells' positions, never a label; the clusterer itself never
  sees the boards. The dev clustering accuracy is printed beside it, for the report only: it
  reads the dev givens' digits and decides nothing.
- Noise floor: the default refitted with another clusterer seed on the same data (`reseed`).
- Rule, fixed before the runs: a value wins the screen if, on every seed, both its rates (train
  and dev) are below the default's by more than that seed's re-seed spread (|default - reseed|
  on the same rate). A winner needs whole runs over five seeds before it may become the default;
  otherwise the default stands.

Each seed prepares the default's boards at that seed (`stages/prepare.py` into --scratch), then
fits one clusterer per value in this process, exactly as `stages/cluster.py` does. Rows are
appended to --out as they finish, value by value over the seeds; a rerun skips the (seed, value) pairs already there.

    python studies/cluster_constants.py --seeds 0 1 --reseed --set confidence=0.7 \
        --set augment.shift=0,augment.rotation=0,augment.scale=0 \
        --out results/clusterer_constants/runs.jsonl
    python studies/cluster_constants.py --table results/clusterer_constants/runs.jsonl
"""
from __future__ import annotations

import platform
import time
from pathlib import Path

from common import append_rows, markdown, read_rows, screen_arguments, stage

DEFAULT, RESEED = "default", "reseed"


def cpu_name() -> str:
    """The CPU's model name with its family and model numbers (fit seconds depend on it)."""
    info = dict(line.split(":", 1) for line in Path("/proc/cpuinfo").read_text().splitlines()[:30]
                if ":" in line)
    info = {k.strip(): v.strip() for k, v in info.items()}
    return f"{info.get('model name', platform.machine())} (family {info.get('cpu family')}, model {info.get('model')})"


def cluster_settings(seed: int, changes: dict, reseed: bool):
    """The default's cluster section at `seed` with `changes` laid over it, checked by the schema."""
    from satground.harness.io import PipelineError
    from satground.harness.params import overlay, parse_params, schema_defaults

    values = overlay(schema_defaults(), {"seed": seed, "cluster": changes})
    if reseed:
        values["cluster"]["seed"] = seed + 1
    try:
        return parse_params(values, f"--set {changes}").cluster
    except PipelineError as exc:
        raise SystemExit(str(exc)) from None


def prepared_boards(seed: int, scratch: Path) -> Path:
    """data/prepared of the default profile at `seed` (prepared once per scratch folder)."""
    import yaml
    from satground.harness.params import overlay, schema_defaults

    folder = scratch / f"seed{seed}"
    if not (folder / "prepared" / "dev.pt").is_file():
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "params.yaml").write_text(yaml.safe_dump(overlay(schema_defaults(), {"seed": seed})))
        stage("prepare.py", "--params", folder / "params.yaml", "--data-out", folder / "prepared",
              "--plot-out", folder / "boards.png", "--metrics-out", folder / "metrics")
    return folder / "prepared"


class SeedData:
    """One seed's prepared boards: the given images of train and dev, their peer pairs, and the
    dev images' digits (the report column only)."""

    def __init__(self, seed: int, scratch: Path):
        from satground.boards.data import load_given_images, load_image_labels, peer_cannot_links

        prepared = prepared_boards(seed, scratch)
        self.train_images, train_idx, train_boards = load_given_images(prepared, "train")
        self.K = train_boards.n_digits
        self.dev_images, dev_idx, dev_boards = load_given_images(prepared, "dev", self.K)
        self.train_links = peer_cannot_links(train_boards, train_idx)
        self.dev_links = peer_cannot_links(dev_boards, dev_idx)
        self.dev_labels = load_image_labels(prepared, "dev", dev_idx)


def screen(seed: int, data: SeedData, name: str, changes: dict, reseed: bool) -> dict:
    """Fit the clusterer of one value on one seed's training images, as stages/cluster.py does;
    its row of rates."""
    from satground.boards.metrics import cluster_report, peer_conflict_rate
    from satground.clustering import CLUSTERERS

    cfg = cluster_settings(seed, changes, reseed)
    start = time.perf_counter()
    clusterer = CLUSTERERS[cfg.method].from_settings(data.train_images, data.K, cfg.seed, cfg)
    seconds = time.perf_counter() - start
    dev_clusters = clusterer.assign(data.dev_images)
    return {"seed": seed, "value": name, "changes": changes, "cluster_seed": cfg.seed,
            "train_conflicts": peer_conflict_rate(clusterer.assign(data.train_images), data.train_links),
            "dev_conflicts": peer_conflict_rate(dev_clusters, data.dev_links),
            "report_dev_accuracy": cluster_report(dev_clusters, data.dev_labels, data.K, data.K)["accuracy"],
            "fit_seconds": round(seconds, 1), "n_train_images": len(data.train_images),
            "n_dev_images": len(data.dev_images), "cpu": cpu_name()}


def table(path: Path) -> str:
    """Per value: each seed's rates (x 1e4) against the default's, the re-seed spread, and the rule's verdict."""
    rows = read_rows(path)
    by = {(r["seed"], r["value"]): r for r in rows}
    seeds = sorted({r["seed"] for r in rows})
    names = list(dict.fromkeys(r["value"] for r in rows))
    lines = []
    for name in names:
        cells, wins, complete, seconds = [], True, True, []
        for seed in seeds:
            row, base, noise = by.get((seed, name)), by.get((seed, DEFAULT)), by.get((seed, RESEED))
            if row is None or base is None:
                cells.append("-")
                complete = False
                continue
            if row["fit_seconds"] is not None:  # None: timed with the nets one by one (fixed since)
                seconds.append(row["fit_seconds"])
            parts = []
            for rate in ("train_conflicts", "dev_conflicts"):
                spread = abs(base[rate] - noise[rate]) if noise else 0.0
                wins &= name not in (DEFAULT, RESEED) and base[rate] - row[rate] > spread
                parts.append(f"{1e4 * row[rate]:.1f}")
            cells.append(f"{' / '.join(parts)} ({100 * row['report_dev_accuracy']:.2f})")
        verdict = "" if name in (DEFAULT, RESEED) else ("wins" if wins and complete else
                                                         "stands" if complete else "incomplete")
        lines.append([name, *cells, f"{sum(seconds) / len(seconds):.0f}" if seconds else "-", verdict])
    header = ["value", *[f"seed {s}: conflicts x 1e4 train / dev (dev accuracy %, report only)" for s in seeds],
              "fit s, mean", "the default"]
    return markdown(header, lines)


def main(argv=None) -> None:
    def inputs(parser):
        parser.add_argument("--seeds", type=int, nargs="+", default=[0])
        parser.add_argument("--reseed", action="store_true",
                            help="also the default at clusterer seed + 1 (the noise floor)")

    args = screen_arguments(__doc__, "cluster", table, inputs, argv)
    if args is None:
        return
    values = [(DEFAULT, {}, False)] + [(RESEED, {}, True)] * args.reseed
    values += [(text, changes, False) for text, changes in args.values]
    for _, changes, reseed in values:  # every value checked before the first fit
        cluster_settings(args.seeds[0], changes, reseed)
    done = {(row["seed"], row["value"]) for row in read_rows(args.out)} if args.out.is_file() else set()
    data = {}
    for name, changes, reseed in values:  # value by value, every seed: a cut-short screen is whole
        for seed in args.seeds:
            if (seed, name) in done:
                continue
            if seed not in data:
                data[seed] = SeedData(seed, args.scratch)
            row = screen(seed, data[seed], name, changes, reseed)
            append_rows(args.out, [row])
            print(f"seed {seed} {name}: conflicts train {row['train_conflicts']:.5f} dev "
                  f"{row['dev_conflicts']:.5f} (report: dev accuracy {row['report_dev_accuracy']:.4f}) "
                  f"{row['fit_seconds']:.0f} s", flush=True)
    print(table(args.out))


if __name__ == "__main__":
    main()
