"""Console commands (pyproject's [project.scripts]), run from the project folder:

    satground-profile NAME    params.yaml <- profile NAME (as `python scripts/profile.py NAME`)
    satground-exps [ARGS]     `dvc exp show` cut to what tells runs apart, in 120 columns, paged or not

DVC has no setting for which columns `dvc exp show` prints, and on this pipeline it prints
every metric, every declared param and every code dep's hash, so that at a terminal's width
every cell is elided. `satground-exps` passes DVC the filter instead: the headline
metrics, and the params whose values differ between the experiments shown (`--only-changed`);
no dep hashes. Further arguments go to `dvc exp show` as they are (`-A`, `--csv`, `--sort-by
boards_checked`, `--keep perm_right`, ...).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# the run's name (`rev` names it in --csv), then evaluate's metrics.json: exact boards as trained
# and after re-read + check, every blank right after the check (`--keep perm_right` adds the
# permutation, `--keep Created` the time); `seed` and `rule_aware` are the two params outside a
# section (the only ones whose column has no dot)
HEADLINE = ("Experiment", "rev", "boards", "boards_checked", "blank_boards_checked", "seed", "rule_aware")
FILE_SUFFIXES = ("py", "c", "yaml", "html", "json", "csv", "md", "pt")
# the headline metrics show even where every row has the same value (--only-changed drops those)
EXPS_KEEP = rf"^(?:{'|'.join((HEADLINE[0], *HEADLINE[2:5]))})$"
# drop a column unless it is a headline one or a sectioned param ("train.epochs"); a file dep
# such as "dvc.yaml" has a dot too, hence the suffix test, and a path has a slash
EXPS_DROP = (rf"^(?!(?:{'|'.join(HEADLINE)})$)"
             rf"(?!(?![^/]*\.(?:{'|'.join(FILE_SUFFIXES)})$)[a-z0-9_]+(?:\.[a-z0-9_]+)+$).*")


def exps_command(extra: list[str]) -> list[str]:
    # DVC of this interpreter's environment, activated or not. --no-pager: with its pager, DVC
    # widens the table to its full width (up to 1024 columns, dvc/ui/table.py) whatever COLUMNS
    # says; without, it fits the table into COLUMNS, and exps() pages the fitted table itself
    return [sys.executable, "-m", "dvc", "exp", "show", "--only-changed", "--drop", EXPS_DROP,
            "--keep", EXPS_KEEP, "--no-pager", *extra]


def exps(argv: list[str] | None = None) -> int:
    """satground-exps: `dvc exp show` with the filter above, 120 columns unless COLUMNS says,
    through DVC's pager (DVC_PAGER, PAGER or less) at a terminal, as `dvc exp show` pages."""
    argv = sys.argv[1:] if argv is None else argv
    env = dict(os.environ, COLUMNS=os.environ.get("COLUMNS", "120"))
    if "--no-pager" in argv or not sys.stdout.isatty():
        return subprocess.run(exps_command(argv), env=env).returncode
    shown = subprocess.run(exps_command(argv), env=env, stdout=subprocess.PIPE, text=True)
    if shown.stdout:
        from dvc.ui.pager import pager  # here: DVC loads slowly, and a pipe needs no pager

        pager(shown.stdout)
    return shown.returncode


def profile(argv: list[str] | None = None) -> int:
    """satground-profile NAME: writes ./params.yaml as the schema's defaults with
    profiles/NAME.yaml laid over them (satground.harness.params.params_text)."""
    from .io import PipelineError, atomic_write  # here: torch comes with them, and satground-exps needs neither
    from .params import params_text

    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: satground-profile NAME  (or python scripts/profile.py NAME)", file=sys.stderr)
        return 1
    try:
        text = params_text(argv[0])
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        with atomic_write("params.yaml") as tmp:  # a full disk or a kill never leaves half a file
            Path(tmp).write_text(text)
    except OSError as exc:
        print(f"error: params.yaml not written ({exc.strerror or exc}); the old one is kept",
              file=sys.stderr)
        return 1
    print(f"params.yaml <- {argv[0]} profile")
    return 0
