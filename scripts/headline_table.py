"""The README's results tables, written from the kept records (results/), never by hand.

    python scripts/headline_table.py            # rewrites the tables between the markers
    python scripts/headline_table.py --check    # exit 1 if a table is not the records'

One column per configuration: rule-free (`cpu9_fast`, the default profile and the headline,
records in results/cpu9_fast_verify_zen4/: the check in 36 folds and the verify, on an AMD EPYC Zen 4),
the same models without the verify, the default before it, with more seeds
(results/cpu9_fast_check_folds36_zen4/), the default with the check in 16 folds, before aa29689, on an
Intel Xeon with AMX (results/cpu9_fast_reader_width16/: its float sums train other models; its seeds
0-4 on the Zen 4, results/cpu9_fast_reader_width16_zen4/, have a seeds table but no column), the same with the paper's distilled LeNet as the
classifier (the default before it kept the clusterer's CNNs, records in results/cpu9_fast_lenet/),
the same with a fine-tuned classifier, fp32-grade products and a proofreader (`cpu9`), rule-aware (`cpu9_rules`), the paper's mechanism (`cpu9_paper`, 10 end-to-end epochs) and its 100-epoch run (results/cpu9_paper_100/), and the default's pipeline on Fashion-MNIST's
clothing (`fashion9`, results/fashion9_reground/, on an AMD EPYC Zen 4) and the same with the ground stage's map, before rule 12 (results/fashion9_pool/, on an Intel Xeon with AMX), each the mean +- sample std over its seeds' records (results/<p>/
and results/<p>/seeds/seed*/), with the mean's 95 % interval over the test images and boards
in brackets where every seed's record has evaluate's bootstrap (satground/boards/intervals.py;
seeds combined by their standard errors), then the paper's own figures. A configuration without a record
shows "not run". The 4x4 table is the 4x4 profile's record, results/4x4/, as `evaluate`
wrote it. docs/results.md gets each configuration's seeds table (results/<p>/seeds/seeds.md, as
scripts/ablation_report.py wrote it) between its markers, and so do the records without a
column (SEEDS_ONLY: `fashion9` before the verify, results/fashion9/, with its verify's first rule, results/fashion9_verify/, and before its 25,200 training images, results/fashion9_verify_readings/; `fashion9` of rule 7 on an AMD EPYC Zen 5, results/fashion9_zen5/; the clusterer's CNNs at width 16, the default from 37ddfef until the unchecked
as-trained criterion brought 32 back, results/cpu9_fast_cluster_width16/ and, on the Zen 4,
results/cpu9_fast_cluster_width16_zen4/; both CNNs at width 32, results/cpu9_fast_three_rounds_bf16_gemm/; two self-labelling rounds, results/cpu9_fast_two_rounds_bf16_gemm/; three rounds with fp32 GEMMs, results/cpu9_fast_ground4500/: the grounding
phase on 4,500 boards, SATNet at rank 16; the same at the former rank 32, results/cpu9_fast/; the
default with two self-labelling rounds of three nets, results/cpu9_fast_rounds2/,
at rank 16 with the grounding phase on every board, results/cpu9_fast_k16/, whose seeds 0-2
trained the models of cpu9_fast_ground4500's seeds 0-2, and three nets a round,
results/cpu9_fast_nets3/).
"""
import argparse
import statistics
import sys
from pathlib import Path

import pandas as pd

from satground.boards.intervals import mean_interval
from satground.boards.metrics import percent_places
from satground.harness.io import PipelineError
from satground.harness.records import read_record, seed_folders

ROOT = Path(__file__).resolve().parent.parent
BEGIN = "<!-- 9x9 table: written by scripts/headline_table.py from results/; do not edit -->"
END = "<!-- end of the 9x9 table -->"
SMALL_BEGIN = "<!-- 4x4 table: written by scripts/headline_table.py from results/4x4/; do not edit -->"
SMALL_END = "<!-- end of the 4x4 table -->"
CONFIGURATIONS = {"cpu9_fast_verify_zen4": "rule-free, the default (`cpu9_fast`), on the Zen 4",
                  "cpu9_fast_check_folds36_zen4": "rule-free, the default without the verify, on the Zen 4 (`evaluate.verify_doubtful: 0`)",
                  "cpu9_fast_reader_width16": "rule-free, the default with the check in 16 folds, on an Intel Xeon (`evaluate.check_folds: 16`)",
                  "cpu9_fast_lenet": "rule-free, the paper's LeNet (`cpu9_fast`, `distill.classifier: lenet`)",
                  "cpu9": "rule-free, slower (`cpu9`)",
                  "cpu9_rules": "rule-aware (`cpu9_rules`)",
                  "cpu9_paper": "paper's mechanism (`cpu9_paper`)",
                  "cpu9_paper_100": "paper's mechanism, 100 epochs (`cpu9_paper`, `train.epochs: 100`)",
                  "fashion9_reground": "rule-free, clothing instead of digits (`fashion9`, Fashion-MNIST), on the Zen 4",
                  "fashion9_pool": "rule-free, clothing, the ground stage's map (`train.reground: false`), on an Intel Xeon"}
SEEDS_ONLY = ("fashion9", "fashion9_verify", "fashion9_verify_readings", "fashion9_zen5", "cpu9_fast_reader_width16_zen4", "cpu9_fast_cluster_width16", "cpu9_fast_cluster_width16_zen4", "cpu9_fast_three_rounds_bf16_gemm", "cpu9_fast_two_rounds_bf16_gemm", "cpu9_fast_ground4500", "cpu9_fast", "cpu9_fast_rounds2", "cpu9_fast_k16", "cpu9_fast_nets3")  # records with a seeds table in docs/results.md and no column: former defaults, fashion9 before its pool, on the Zen 5
# row -> (evaluate metric, or a function of the metrics; the paper's figure)
ROWS = {
    "exact boards, as trained": ("boards", "n/a (the paper counts valid grids: next row)"),
    "valid grids, as trained (the paper's measure)": ("valid_grids", "62.8"),
    "every blank right, as trained": ("blank_boards", "n/a"),
    "exact boards, as trained, read in views (`evaluate.views`, ours)": ("boards_views", "n/a"),
    "exact boards, final model": ("final", "64.8 (valid grid, proofreader)"),
    "every blank right, final model": ("blank_final", "n/a"),
    "givens read right, final model": ("visual_final", "98.9"),
}


def metric_name(metrics: dict, metric: str) -> str:
    """The metrics.json key of a row: for the final model's rows, re-read + check where both
    are on, else what the profile ends with (the proofreader, where it is the last step)."""
    names = {"final": ("boards_checked", "boards_reread", "boards_pr", "boards"),
             "blank_final": ("blank_boards_checked", "blank_boards_reread", "blank_boards_pr", "blank_boards"),
             "visual_final": ("visual_checked", "visual_reread", "visual")}.get(metric, (metric,))
    return next((name for name in names if metrics.get(name) is not None), names[-1])


def read_run(folder: Path) -> dict:
    record = read_record(folder)
    if "evaluate" not in record.metrics:
        raise PipelineError(f"{folder / 'metrics.json'}: evaluate metrics not found")
    intervals = record.info.get("evaluate", {}).get("intervals", {})
    return {"metrics": record.metrics["evaluate"], "intervals": intervals, "run": record.run,
            "epochs": record.params["train"]["epochs"], "dev": record.params["data"].get("n_dev")}


def spread(values: list[float], seeds: int | None = None, intervals: list[dict] | None = None) -> str:
    """Mean +- sample std in %; says how many of the `seeds` records it covers where not all;
    then the mean's 95 % interval over the test images and boards, where every record has one
    (records before evaluate's bootstrap have none)."""
    interval = ""
    if intervals and len(intervals) == len(values) and all(intervals):
        bounds = mean_interval(intervals, values) if len(values) > 1 else intervals[0]
        interval = f" [{100 * bounds['low']:.1f}, {100 * bounds['high']:.1f}]"
    values = [100 * v for v in values]
    note = (f" ({len(values)} of {seeds} seeds)" if seeds and len(values) < seeds
            else " (1 seed)" if len(values) == 1 else "")
    places = percent_places([statistics.mean(values)])
    if len(values) == 1:
        return f"{values[0]:.{places}f}{interval}{note}"
    return f"{statistics.mean(values):.{places}f} +- {statistics.stdev(values):.{places}f}{interval}{note}"


def table() -> str:
    runs = {profile: [read_run(folder) for folder in seed_folders(ROOT / "results", profile)] for profile in CONFIGURATIONS}
    head = ["| 9x9 test boards, % |"] + [f" {name} |" for name in CONFIGURATIONS.values()] + [" paper |"]
    lines = ["".join(head), "|---" * (len(CONFIGURATIONS) + 2) + "|"]
    for row, (metric, paper) in ROWS.items():
        cells = []
        for profile in CONFIGURATIONS:
            # a metric older records lack (read in one view: none of their own) is skipped
            named = [(r, metric_name(r["metrics"], metric)) for r in runs[profile]]
            named = [(r, name) for r, name in named if r["metrics"].get(name) is not None]
            values = [r["metrics"][name] for r, name in named]
            intervals = [r["intervals"].get(name) for r, name in named]
            cells.append(spread(values, len(runs[profile]), intervals) if values
                         else "not run" if not runs[profile] else "not measured")
        lines.append(f"| {row} | " + " | ".join(cells) + f" | {paper} |")
    effective = []
    for p in CONFIGURATIONS:
        sizes = [r["intervals"].get("boards", {}).get("effective_boards") for r in runs[p]]
        effective.append("not run" if not runs[p] else "not measured" if None in sizes or not sizes
                         else f"{statistics.mean(sizes):.0f}")
    lines.append("| test boards' effective number (exact, as trained; bootstrap) | " + " | ".join(effective) + " | n/a |")
    perm = [f"{sum(bool(r['metrics']['perm_right']) for r in runs[p])} of {len(runs[p])}" if runs[p] else "not run"
            for p in CONFIGURATIONS]
    lines.append("| cluster -> digit permutation right | " + " | ".join(perm) + " | n/a |")
    epochs = [", ".join(sorted({str(r["epochs"]) for r in runs[p]})) if runs[p] else "not run" for p in CONFIGURATIONS]
    lines.append("| end-to-end epochs | " + " | ".join(epochs) + " | 100 |")
    split = ["dev boards" if runs[p] and all(r["dev"] for r in runs[p]) else
             ("test boards (before the dev split)" if runs[p] else "not run") for p in CONFIGURATIONS]
    lines.append("| per-epoch curves scored on | " + " | ".join(split) + " | test boards |")
    times = []
    for p in CONFIGURATIONS:
        timed = [r["run"] for r in runs[p] if r["run"].get("wall_seconds") is not None]
        machines = {run.get("machine") for run in timed}
        if not timed:
            times.append("not timed" if runs[p] else "not run")
        elif len(machines) > 1:
            times.append(f"{len(machines)} machines")
        else:  # seeds run in parts (a stage rerun) have no whole-run time: the others' mean
            minutes = [run["wall_seconds"] / 60 for run in timed]
            mean = f"{statistics.mean(minutes):.1f}" + (f" +- {statistics.stdev(minutes):.1f}" if len(minutes) > 1 else "")
            part = f"{len(timed)} of {len(runs[p])} seeds timed, " if len(timed) < len(runs[p]) else ""
            times.append(f"{mean} ({part}{machines.pop()})")
    lines.append("| whole run, minutes (2 cores) | " + " | ".join(times) + " | n/a |")
    return "\n".join(lines) + "\n"


def small_table() -> str:
    """The 4x4 profile's record (results/4x4/): its rows without the proofreader as
    `evaluate` wrote them (its results.csv, in the record's metrics.json), under one line saying what ran, where and how
    long, and that its test grids repeat training grids; every row is in the record's
    summary.md. No paper column: the paper's figures are 9x9 ones."""
    record = read_record(ROOT / "results" / "4x4")
    if record.run is None:
        raise PipelineError(f"{record.folder / 'run.json'}: run record not found")
    run, n_test = record.run, record.stage_info("prepare")["n_test"]
    wall = run.get("wall_seconds")
    took = f"`dvc repro` {int(wall // 60)} min {wall % 60:.0f} s" if wall is not None else "not timed"
    frame = pd.DataFrame(record.table("results.csv")).astype(object).where(lambda f: f.notna(), "n/a")
    frame = frame[frame["proofreader"] == "no"]
    columns = {"model": "model", "configuration": "configuration", "epochs": "epochs", "data": "data",
               "board_accuracy_pct": "exact %",
               "blank_board_accuracy_pct": "every blank right %", "visual_accuracy_pct": "givens read right %"}
    columns = {key: name for key, name in columns.items() if key in frame}
    lines = ["| " + " | ".join(columns.values()) + " |", "|---" * len(columns) + "|"]
    lines += ["| " + " | ".join(str(row[key]) for key in columns) + " |" for _, row in frame.iterrows()]
    return (f"Record `results/4x4/` (commit {run['commit']}, {run['machine']}; {took}), "
            f"{n_test} test boards, without the proofreader (every row: `results/4x4/summary.md`). "
            "Only 288 complete 4x4 grids exist, so the test boards' solutions repeat training "
            "grids (their givens and images differ); the paper reports no 4x4 figure:\n\n"
            + "\n".join(lines) + "\n")


def between(text: str, begin: str, end: str, block: str, where: Path) -> str:
    """`text` with `block` between the markers `begin` and `end`."""
    if begin not in text or end not in text:
        raise PipelineError(f"{where}: no '{begin}' ... '{end}' markers")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{block}{end}{tail}"


def seeds_tables(text: str, where: Path) -> str:
    """`text` with each configuration's seeds table (results/<p>/seeds/seeds.md) between the
    markers `<!-- <p> seeds table ... -->` and `<!-- end of the <p> seeds table -->`, where present."""
    for profile in (*CONFIGURATIONS, *SEEDS_ONLY):
        begin = f"<!-- {profile} seeds table: written by scripts/headline_table.py from results/{profile}/seeds/seeds.md; do not edit -->"
        if begin in text:
            table_file = ROOT / "results" / profile / "seeds" / "seeds.md"
            if not table_file.is_file():
                raise PipelineError(f"{table_file}: seeds table not found (scripts/ablation_report.py --sweep seeds writes it)")
            text = between(text, begin, f"<!-- end of the {profile} seeds table -->", table_file.read_text(), where)
    return text


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a table is stale")
    parser.add_argument("--readme", type=Path, default=ROOT / "README.md")
    parser.add_argument("--results-page", type=Path, default=ROOT / "docs" / "results.md")
    args = parser.parse_args(argv)
    pages = {}
    text = args.readme.read_text()
    new = between(text, BEGIN, END, table(), args.readme)
    if SMALL_BEGIN in text:
        new = between(new, SMALL_BEGIN, SMALL_END, small_table(), args.readme)
    pages[args.readme] = (text, new)
    if args.results_page.is_file():
        text = args.results_page.read_text()
        pages[args.results_page] = (text, seeds_tables(text, args.results_page))
    stale = [path for path, (old, new) in pages.items() if old != new]
    if args.check:
        for path in stale:
            print(f"{path}: a table is not the records' (run scripts/headline_table.py)", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        path.write_text(pages[path][1])
    readme = pages[args.readme][1]
    print(readme[readme.index(BEGIN):readme.index(END)])
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
