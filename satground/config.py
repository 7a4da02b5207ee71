"""params.yaml loading and validation.

Stage scripts read their parameters with `param(params, "section.key", ...)`, which checks the
type and range and raises a one-line PipelineError naming the parameter (and the params file
it came from) when it is wrong. `load_params` refuses keys that no profile knows: the set of
known keys is that of the default profile, `profiles/default.yaml`, so a misspelt key stops the
stage instead of being ignored.
"""
from __future__ import annotations

import argparse
import difflib
import os
import sys
from pathlib import Path
from typing import Any, Callable

import yaml

from .io import PipelineError, pick_device

_MISSING = object()
DEFAULT_PROFILE = Path(__file__).resolve().parents[1] / "profiles" / "default.yaml"
SEED_MAX = 2**32 - 1  # numpy's and torch's seeds are 32-bit


class Params(dict):
    """The parsed params file; `source` names it in error messages."""

    def __init__(self, values: dict, source: str = "params.yaml"):
        super().__init__(values)
        self.source = source


def flat_keys(tree: dict, prefix: str = "") -> list[str]:
    """'section.key' names of every leaf of a nested mapping."""
    keys = []
    for name, value in tree.items():
        key = f"{prefix}{name}"
        keys += flat_keys(value, key + ".") if isinstance(value, dict) and value else [key]
    return keys


def read_yaml(path, what: str = "params file") -> dict:
    """A YAML file of sections (params, profiles, dvc.yaml): one-line errors name the file."""
    path = Path(path)
    if not path.is_file():
        raise PipelineError(f"{path}: {what} not found")
    try:
        values = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise PipelineError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(values, dict):
        raise PipelineError(f"{path}: expected a mapping of sections")
    return values


def known_keys() -> list[str]:
    return flat_keys(read_yaml(DEFAULT_PROFILE))


def check_known_keys(values: dict, source: str) -> None:
    """One-line error for the first key no profile knows, naming the nearest known key."""
    known = known_keys()
    for key in flat_keys(values):
        if key not in known:
            near = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
            hint = f" (did you mean '{near[0]}'?)" if near else ""
            raise PipelineError(f"{source}: unknown parameter '{key}'{hint}")


def load_params(path: str | Path = "params.yaml") -> Params:
    path = Path(path)
    values = read_yaml(path)
    check_known_keys(values, str(path))
    return Params(values, str(path))


def source(params: dict) -> str:
    """The params file a dict came from, for messages."""
    return getattr(params, "source", "params.yaml")


def param(params: dict, key: str, kind: type | tuple = int, *, low=None, high=None,
          choices=None, default: Any = _MISSING):
    """Read `params["a"]["b"]` for key "a.b", check type/range/choices, return the value."""
    node: Any = params
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            if default is not _MISSING:
                return default
            raise PipelineError(f"{source(params)}: missing parameter '{key}'")
        node = node[part]
    value = node
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if float in kinds and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if value is None and type(None) in kinds:
        return None
    if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
        names = "/".join(k.__name__ for k in kinds)
        raise PipelineError(f"{source(params)}: '{key}' must be {names}, got {value!r}")
    if choices is not None and value not in choices:
        raise PipelineError(f"{source(params)}: '{key}' must be one of {list(choices)}, got {value!r}")
    if low is not None and value < low:
        raise PipelineError(f"{source(params)}: '{key}' must be >= {low}, got {value!r}")
    if high is not None and value > high:
        raise PipelineError(f"{source(params)}: '{key}' must be <= {high}, got {value!r}")
    return value


def stage_arguments(doc: str, paths: list[str], argv=None, extra: Callable | None = None,
                    params: bool = True):
    """A stage script's command line: --params and each path it reads or writes, all required.

    dvc.yaml's command of the stage names every path, so paths live in one place: there, next to
    the deps and outs that declare them. Outputs end in -out (a folder for --metrics-out: the
    stage's metrics, satground.tracking). `extra(parser)` adds a stage's other options.
    """
    parser = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    for name in ["params"] * params + paths:
        parser.add_argument(f"--{name}", required=True, metavar="PATH")
    if extra is not None:
        extra(parser)
    return parser.parse_args(argv)


def run_stage(main: Callable[[], None]) -> None:
    """Entry point of every stage script: user errors become one line on stderr and exit 1."""
    try:
        main()
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)


def seed_param(params: dict, key: str, default: Any = _MISSING) -> int:
    """A seed: an int in 0..2**32-1 (what numpy and torch accept)."""
    return param(params, key, int, low=0, high=SEED_MAX, default=default)


DEVICE_VARIABLE = "SATGROUND_DEVICE"


def device_param():
    """The torch device: $SATGROUND_DEVICE (auto, cpu, cuda or cuda:N; auto when unset: CUDA when
    present), checked against this machine before any work. Not a parameter on purpose: the machine
    is not part of the experiment, so moving a run to a new GPU makes no stage stale."""
    return pick_device(os.environ.get(DEVICE_VARIABLE, "auto"), f"${DEVICE_VARIABLE}")


def run_settings(params: dict):
    """(seed, torch device) of the stages that train or run models."""
    return seed_param(params, "seed", default=0), device_param()


def satnet_sizes(params: dict) -> tuple[int, int, int]:
    """(m, aux, max_iter) of the SATNet layer, shared by every stage that builds one."""
    return (param(params, "satnet.m", int, low=1), param(params, "satnet.aux", int, low=0),
            param(params, "satnet.max_iter", int, low=1))
