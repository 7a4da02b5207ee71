"""Stage command lines as dvc.yaml declares them: the one place the paths live."""
import shutil
import subprocess
from pathlib import Path

import yaml

from satground.harness.params import compose, overlay

REPO = Path(__file__).resolve().parent.parent


def declared(name, **paths) -> list[str]:
    """The arguments of stage `name`'s command in dvc.yaml (run from a folder laid out like the
    repository); `paths` replace some: prepared=... for --prepared, model_out=... for --model-out,
    or add an option dvc.yaml leaves at its default (resume_dir=...)."""
    argv = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"][name]["cmd"].split()[2:]
    for key, value in paths.items():
        flag = "--" + key.replace("_", "-")
        if flag in argv:
            argv[argv.index(flag) + 1] = str(value)
        else:
            argv += [flag, str(value)]
    return argv


def four_by_four(changes: dict) -> dict:
    """The 4x4 profile's params with `changes` laid over them: the tiny tests' base, so a key a
    test leaves out takes the small profile's value, not the 9x9 default's."""
    return overlay(compose("4x4"), changes)


def script(name) -> str:
    """The script of stage `name` (stages/baseline_visual.py for baseline_grounded)."""
    return yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"][name]["cmd"].split()[1]


def smoke_checkout(root: Path, run) -> Path:
    """This checkout's files as a fresh clone has them (tracked, and untracked but not ignored),
    copied to `root` with no outputs of any run, made a git repository and switched to the
    smoke profile (not committed yet). `run(args, cwd)` runs a command."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.split()
    for name in files:
        if (REPO / name).is_file():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, root / name)
    for path in ("data/prepared", "metrics", "plots", "dvc.lock"):  # start before any run
        shutil.rmtree(root / path, ignore_errors=True) if (root / path).is_dir() else \
            (root / path).unlink(missing_ok=True)
    run(["git", "init", "-q"], root)
    run(["python", "scripts/profile.py", "smoke"], root)
    return root
