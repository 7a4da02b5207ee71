"""Settings of the grounding phase, screened by what it hands on (issue 67: `ground.warmup_epochs`,
`ground.match_decay`, never varied at 9x9).

With `train.init_from_ground` off, the phase hands end-to-end training its cluster -> digit
permutation and nothing else, so a value that hands on the default's permutation leaves every
later model as it is. The screen reruns the real `stages/ground.py` on a finished workspace's
prepared boards and classifier, once at the workspace's own params (the default) and once per
value, into --scratch, and records, reading no label:

- the permutation handed on, and whether it is the default's;
- the held-out training boards' blank cells read right through it (`val_blank_cells`, the
  stage's own early-stopping figure: blank cells' labels only) and the phase's epochs and seconds;
- the soft permutation's margin: the mean of the entries the permutation matches minus the mean
  of the others (how clearly the loss singles out the permutation).

Rule, fixed before the runs: a value that hands on the default's permutation on every seed changes
nothing downstream, and replaces the default only if the phase is shorter on every seed. A value
that hands on another permutation on some seed is rejected if its `val_blank_cells` is lower there.

    python studies/ground_settings.py --run-dir /path/to/workspace --set warmup_epochs=0 \
        --set match_decay=0.9 --out results/grounding_settings/runs.jsonl
    python studies/ground_settings.py --table results/grounding_settings/runs.jsonl
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from common import WORKSPACE, append_rows, markdown, read_rows, screen_arguments, stage

DEFAULT = "default"


def ground_params(run_dir: Path, name: str, changes: dict) -> tuple[dict, object]:
    """The workspace's params with `changes` under ground: (the values, the checked params)."""
    from satground.harness.io import PipelineError
    from satground.harness.params import overlay, parse_params, read_yaml

    values = overlay(read_yaml(run_dir / "params.yaml"), {"ground": changes})
    try:
        return values, parse_params(values, f"--set {name}")
    except PipelineError as exc:
        raise SystemExit(str(exc)) from None


def run_ground(run_dir: Path, scratch: Path, name: str, changes: dict) -> dict:
    """stages/ground.py on the workspace's boards and classifier with `changes` under ground."""
    import yaml

    values, params = ground_params(run_dir, name, changes)
    folder = scratch / f"seed{params.seed}" / name.replace("=", "_").replace(",", "+")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "params.yaml").write_text(yaml.safe_dump(values))
    start = time.perf_counter()
    cpu = stage("ground.py", "--params", folder / "params.yaml", "--prepared", run_dir / WORKSPACE["prepared"],
                "--classifier", run_dir / WORKSPACE["lenet"], "--model-out", folder / "ground.pt",
                "--permutation-out", folder / "permutation.json", "--plot-out", folder / "permutation.png",
                "--metrics-out", folder / "metrics", "--resume-dir", folder / "resume")
    wall = time.perf_counter() - start
    chosen = json.loads((folder / "permutation.json").read_text())
    info = json.loads((folder / "metrics" / "info.json").read_text())
    soft, perm = chosen["soft_permutation"], chosen["permutation"]
    matched = [soft[i][perm[i]] for i in range(len(perm))]
    others = [x for i, row in enumerate(soft) for j, x in enumerate(row) if j != perm[i]]
    return {"seed": params.seed, "value": name, "changes": changes, "permutation": perm,
            "val_blank_cells": info["val_blank_cells"], "val_given_conflicts": info.get("val_given_conflicts"),
            "epochs_run": info["epochs_run"], "best_epoch": info["best_epoch"],
            "margin": sum(matched) / len(matched) - sum(others) / len(others),
            "wall_seconds": round(wall, 1), "cpu_seconds": round(cpu, 1), "run_dir": str(run_dir)}


def table(path: Path) -> str:
    rows = read_rows(path)
    default = {r["seed"]: r for r in rows if r["value"] == DEFAULT}
    lines = []
    for r in rows:
        base = default.get(r["seed"])
        same = "-" if base is None else ("yes" if r["permutation"] == base["permutation"] else "**no**")
        lines.append([r["seed"], r["value"], same, f"{100 * r['val_blank_cells']:.2f}", f"{r['margin']:.4f}",
                      r["epochs_run"], f"{r['wall_seconds']:.0f}"])
    return markdown(["seed", "value", "the default's permutation", "val blank cells %", "soft margin",
                     "epochs", "wall s"], lines)


def main(argv=None) -> None:
    def inputs(parser):
        parser.add_argument("--run-dir", type=Path, nargs="+", default=[],
                            help="finished `dvc repro` workspaces, one a seed")

    args = screen_arguments(__doc__, "ground", table, inputs, argv)
    if args is None:
        return
    if not args.run_dir:
        raise SystemExit("ground_settings.py: --run-dir is required to run")
    values = [(DEFAULT, {})] + args.values
    for run_dir in args.run_dir:  # every value checked before the first run
        for name, changes in values:
            ground_params(run_dir, name, changes)
    for run_dir in args.run_dir:
        for name, changes in values:
            row = run_ground(run_dir.resolve(), args.scratch, name, changes)
            append_rows(args.out, [row])
            print(f"seed {row['seed']} {name}: permutation {row['permutation']}, val blank cells "
                  f"{row['val_blank_cells']:.4f}, margin {row['margin']:.4f}, {row['epochs_run']} epochs, "
                  f"{row['wall_seconds']:.0f} s", flush=True)
    print(table(args.out))


if __name__ == "__main__":
    main()
