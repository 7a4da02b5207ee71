"""Adopt another checkout's run as the committed one: its dvc.lock, and the DVC cache objects of
every stage's metrics/<stage>/metrics.json, which git carries force-added so that a fresh clone's
`dvc metrics show` and `dvc metrics diff` read the committed run (docs/pipeline.md).

    python scripts/adopt_run.py /path/to/fresh-clone   # then: git commit

Stages both: `git add dvc.lock` and `git add -f` of each object. Objects the new lock no longer
names stay tracked (an older commit's lock names them). Stops with a one-line error, before
copying anything, when the clone lacks dvc.lock or one of the objects.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent


def metrics_objects(lock_text: str, stages) -> list[str]:
    """The cache paths (relative to a checkout) of each stage's metrics.json in a dvc.lock."""
    lock = yaml.safe_load(lock_text)["stages"]
    paths = []
    for stage in stages:
        for out in lock.get(stage, {}).get("outs", []):
            if out["path"] == f"metrics/{stage}/metrics.json":
                md5 = out["md5"]
                paths.append(f".dvc/cache/files/md5/{md5[:2]}/{md5[2:]}")
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("clone", type=Path, help="a checkout that ran `dvc repro`")
    args = parser.parse_args()
    lock_file = args.clone / "dvc.lock"
    if not lock_file.is_file():
        sys.exit(f"adopt_run: {lock_file} does not exist: run `dvc repro` there first")
    lock_text = lock_file.read_text()
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    objects = metrics_objects(lock_text, stages)
    missing = [o for o in objects if not (args.clone / o).is_file()]
    if missing:
        sys.exit(f"adopt_run: {args.clone} lacks the cache object {missing[0]} its dvc.lock names")
    for obj in objects:
        (REPO / obj).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(args.clone / obj, REPO / obj)
    (REPO / "dvc.lock").write_text(lock_text)
    subprocess.run(["git", "add", "dvc.lock"], cwd=REPO, check=True)
    subprocess.run(["git", "add", "-f", *objects], cwd=REPO, check=True)
    print(f"staged dvc.lock and {len(objects)} metrics objects from {args.clone}")


if __name__ == "__main__":
    main()
