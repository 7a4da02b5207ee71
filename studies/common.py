"""What the studies share: the repository's folder and a finished run's files, the command line
of a study that scores a finished run, its dev boards, running a stage script, the true cluster ->
digit permutation (for reports only), and the JSON-lines records and markdown tables they write.
A study never reads the test split (satground.boards.data refuses it): it scores the dev boards,
and a final figure comes from a kept record (satground.harness.records).

A study runs as a script from the repository root (`python studies/NAME.py`): Python puts the
script's folder, studies/, first on the module path, so `from common import ...` finds this file.
satground comes from the installed package. torch and satground are imported inside the functions
that need them, so a study that only prints a table starts fast.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterable

REPO = Path(__file__).resolve().parents[1]

# a `dvc repro` workspace (dvc.yaml's outputs)
WORKSPACE = {"prepared": "data/prepared", "lenet": "models/classifier.pt", "ground": "models/ground.pt",
             "permutation": "models/permutation.json", "cluster": "metrics/cluster",
             "distill": "metrics/distill", "ground_metrics": "metrics/ground"}


def stage(script: str, *args) -> float:
    """Run a stage script (stages/<script>) from the repository root; returns the CPU seconds
    (user + system) it took. A failed stage ends the study with its stderr's tail."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, str(REPO / "stages" / script), *map(str, args)],
                          capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        sys.exit(f"{script} failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def workspace_arguments(parser: argparse.ArgumentParser, models: bool = True) -> None:
    """--params, --prepared (and --models): a finished workspace's files, its own by default."""
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--prepared", default="data/prepared")
    if models:
        parser.add_argument("--models", default="models")


def run_arguments(parser: argparse.ArgumentParser, table: Callable[[Path], str],
                  argv: list[str] | None = None) -> argparse.Namespace | None:
    """The command line of a study that scores a finished run: --run-dir and --out to run, or
    --table to print a results file with `table(path)` (then None)."""
    parser.add_argument("--run-dir", type=Path, help="a finished `dvc repro` workspace")
    args = results_arguments(parser, table, argv)
    if args is not None and (args.run_dir is None or args.out is None):
        parser.error("--run-dir and --out are required to run")
    return args


def results_arguments(parser: argparse.ArgumentParser, table: Callable[[Path], str],
                      argv: list[str] | None) -> argparse.Namespace | None:
    """--out (JSON lines, appended) added to `parser`, and --table: print a results file with
    `table(path)` and return None; otherwise the parsed arguments."""
    parser.add_argument("--out", type=Path, help="JSON lines, appended")
    parser.add_argument("--table", type=Path, help="print the table of a results file and stop")
    args = parser.parse_args(argv)
    if args.table:
        print(table(args.table))
        return None
    return args


def dev_boards(run_dir: Path):
    """A finished workspace's dev boards and their true full solutions (N, C). A study scores the
    dev split; the test split is read by `evaluate` and kept in records (scripts/keep_results.py)."""
    return dev_split(run_dir / WORKSPACE["prepared"])


def dev_split(prepared):
    """The dev boards in a `prepared` folder and their true full solutions (N, C)."""
    from satground.boards.data import load_boards

    return load_boards(prepared, "dev"), load_boards(prepared, "dev", view="grounded").labels.long()


def final_model_on_dev(params, prepared: str, models: str):
    """A finished workspace's final model (models/solver_reread.pt, or solver.pt where
    `reread.reader` is none) on the device and precision its evaluate takes, with the dev boards,
    their true digits (B, C; for reports) and the final reader's readings in `evaluate.views`
    views (B, C, K): (dev, solution, model, readings, device)."""
    from satground.harness.stage import stage_device
    from satground.readers.views import ReaderViews
    from satground.satnet import check_setup
    from satground.solver.models import VisualSolver, load_solver

    device = stage_device()
    check_setup(device, params.satnet.precision, params.satnet.gemm)
    dev, solution = dev_split(prepared)
    final = "solver_reread.pt" if params.reread.reader != "none" else "solver.pt"
    given = dev.is_input
    model = load_solver(f"{models}/{final}", boards=dev, kind="visual").to(device)
    reader = VisualSolver(ReaderViews(model.classifier, params.evaluate.views, params.evaluate.mirror),
                          model.solver).eval()
    readings = reader.input_probs(dev.images[dev.cell_image[given]], given).reshape(len(dev), dev.n_cells, dev.n_digits)
    return dev, solution, model, readings, device


def scored_split(row: dict) -> str:
    """The boards a result row scored: its "split" ("dev"); rows written before the dev-only rule
    carry none and scored the test boards."""
    return row.get("split") or "test, before the dev-only rule"


def true_permutation(prepared: Path, lenet: Path) -> list[int]:
    """cluster -> digit of the distilled classifier on the training given-cell images: the
    Hungarian matching of its clusters to the images' true digits (truth read here, for a report
    only; the stages never read it)."""
    from satground.boards.data import given_image_indices, load_boards, load_truth
    from satground.readers.classifier import load_classifier
    from satground.readers.lenet import predict
    from satground.boards.metrics import best_matching

    boards = load_boards(prepared, "train")
    pool = given_image_indices(boards)
    clusters = predict(load_classifier(lenet), boards.images[pool])
    digits = load_truth(prepared, "train", boards)["image_labels"][pool].long() - 1
    return best_matching(clusters.numpy(), digits.numpy(), boards.n_digits, boards.n_digits).tolist()


def screen_arguments(doc: str, section: str, table: Callable[[Path], str], extra: Callable,
                     argv: list[str] | None = None) -> argparse.Namespace | None:
    """The command line of a screen of settings: `extra(parser)`'s inputs, --set (a value of
    `section` to screen, repeatable), --scratch and --out to run, or --table to print a results
    file with `table(path)` (then None). args.values: [(text, changes)] read by parse_setting."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    extra(parser)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE[,KEY=VALUE]",
                        help=f"a value to screen (keys under {section}); repeat for more")
    parser.add_argument("--scratch", type=Path, default=REPO.parent / "scratch" / section,
                        help="the screen's working files")
    args = results_arguments(parser, table, argv)
    if args is None:
        return None
    if args.out is None:
        parser.error("--out is required to run")
    args.values = [(text, parse_setting(text)) for text in args.set]
    args.scratch = args.scratch.resolve()
    return args


def parse_setting(text: str) -> dict:
    """'a=1,augment.shift=0' -> {'a': 1, 'augment': {'shift': 0}} (values read as YAML)."""
    import yaml  # here: a study that only prints a table starts fast

    changes: dict = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise SystemExit(f"--set {text!r}: expected KEY=VALUE[,KEY=VALUE], KEY under the section studied")
        *path, last = key.strip().split(".")
        node = changes
        for name in path:
            node = node.setdefault(name, {})
        value = yaml.safe_load(value)
        if isinstance(value, str):  # YAML reads 3e-3 as a string
            try:
                value = float(value)
            except ValueError:
                pass
        node[last] = value
    return changes


def read_rows(path: Path) -> list[dict]:
    """The records of a JSON-lines results file, blank lines skipped."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def append_rows(path: Path, rows: Iterable[dict]) -> None:
    """Append records to a JSON-lines results file (its folder made if missing)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        out.writelines(json.dumps(row) + "\n" for row in rows)


def markdown(header: list[str], rows: Iterable[list]) -> str:
    """A markdown table: the header, the separator line and a line per row."""
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in rows]
    return "\n".join(lines)


def dev_percentages(scores: dict) -> dict:
    """A dev-board row's headline columns, in %, from training.solution_scores: exact boards
    (reads the givens' labels: reported, never a criterion), and the label-free criteria that read
    the blank cells alone, every blank right and blank cells right (issue 67)."""
    return {"dev_exact_pct": round(100 * scores["board_accuracy"], 1),
            "dev_every_blank_pct": round(100 * scores["blank_board_accuracy"], 1),
            "dev_blank_cells_pct": round(100 * scores["output_cell_accuracy"], 2)}


def show_rows(rows: list[dict], title: str, out: str | None) -> None:
    """Print the rows as a markdown table under `title`; also to CSV `out` where given."""
    import pandas as pd
    from satground.boards.metrics import markdown_table

    frame = pd.DataFrame(rows)
    print(f"\n{title}\n")
    print(markdown_table(frame))
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(out, index=False)
