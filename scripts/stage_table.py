"""Seconds per stage of kept records, as a markdown table (issue 70's stage budget).

    python scripts/stage_table.py results/cpu9_fast results/cpu9_fast/fresh_clone

Each argument is a column: a record folder, or a profile's folder with seeds (results/<p>/ and
results/<p>/seeds/seed*/ together, scripts/keep_results.py's layout). A cell is the stage's wall
seconds from the records' metrics.json (each stage's timing.json), the mean +- sample std over
the column's records, and its share of the stages' sum. The column's head names its CPU and its
commits; a column whose records ran on different CPUs is refused, since their seconds do not
average. Stages that ran in none of the columns' records (0 s or no timing) are left out.
"""
import argparse
import statistics
import sys
from pathlib import Path

from satground.harness.io import PipelineError
from satground.harness.records import read_record, seed_folders

# the pipeline's order, for the rows; a stage not named here still counts, after these
ORDER = ("prepare", "cluster", "distill", "ground", "train", "reread", "proofread", "baseline_grounded",
         "baseline_ungrounded", "baseline_nonvisual", "error_injection", "evaluate")


def records(folder: Path) -> list:
    """The records a column averages: the folder's seeds where it has them, else the folder."""
    folder = Path(folder)
    seeds = seed_folders(folder.parent, folder.name) if (folder / "seeds").is_dir() else []
    return [read_record(path) for path in (seeds or [folder])]


def column(folder: Path) -> dict:
    runs = records(folder)
    machines = {(run.run or {}).get("machine", "machine not recorded") for run in runs}
    if len(machines) > 1:
        raise PipelineError(f"{folder}: its records ran on different CPUs ({'; '.join(sorted(machines))}); "
                            f"give each as a column of its own")
    return {"folder": folder, "machine": machines.pop(), "records": len(runs),
            "commits": sorted({(run.run or {}).get("commit", "?") for run in runs}),
            "runs": [run.seconds for run in runs]}


def pipeline_order(stage: str) -> tuple:
    return (ORDER.index(stage) if stage in ORDER else len(ORDER), stage)


def cell(values: list[float], total: float) -> str:
    mean = statistics.mean(values)
    spread = f" +- {statistics.stdev(values):.0f}" if len(values) > 1 else ""
    return f"{mean:.0f}{spread} ({100 * mean / total:.0f} %)" if total else f"{mean:.0f}{spread}"


def table(folders: list[Path]) -> str:
    columns = [column(folder) for folder in folders]
    ran = {stage for c in columns for run in c["runs"] for stage, seconds in run.items() if seconds > 0}
    stages = sorted(ran, key=pipeline_order)
    for c in columns:  # a stage a record did not run (or time) counts 0 s in it
        c["seconds"] = {stage: [run.get(stage, 0.0) for run in c["runs"]] for stage in stages}
    totals = [sum(statistics.mean(c["seconds"][s]) for s in stages) for c in columns]
    head = ["| stage, seconds (share) |"] + [
        f" `{c['folder']}`: {c['records']} record{'s' * (c['records'] > 1)}, {c['machine']}, "
        f"commit {', '.join(c['commits'])} |" for c in columns]
    lines = ["".join(head), "|---" * (len(columns) + 1) + "|"]
    for stage in stages:
        lines.append(f"| {stage} | " + " | ".join(cell(c["seconds"][stage], t) for c, t in zip(columns, totals)) + " |")
    sums = [[sum(run) for run in zip(*(c["seconds"][s] for s in stages))] for c in columns]
    lines.append("| every stage | " + " | ".join(cell(s, 0.0) for s in sums) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="record folders, or profile folders with seeds/")
    args = parser.parse_args(argv)
    try:
        print(table(args.folders), end="")
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
