"""Stage command lines as dvc.yaml declares them: the one place the paths live."""
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent


def declared(name, **paths) -> list[str]:
    """The arguments of stage `name`'s command in dvc.yaml (run from a folder laid out like the
    repository); `paths` replace some: prepared=... for --prepared, model_out=... for --model-out."""
    argv = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"][name]["cmd"].split()[2:]
    for key, value in paths.items():
        argv[argv.index("--" + key.replace("_", "-")) + 1] = str(value)
    return argv


def script(name) -> str:
    """The script of stage `name` (stages/baseline_visual.py for baseline_grounded)."""
    return yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"][name]["cmd"].split()[1]
