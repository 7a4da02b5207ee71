"""params.yaml loading and validation.

Stage scripts read their parameters with `param(params, "section.key", ...)`, which checks the
type and range and raises a one-line PipelineError naming the parameter when it is wrong.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

import yaml

from .io import PipelineError, pick_device

_MISSING = object()


def load_params(path: str | Path = "params.yaml") -> dict:
    path = Path(path)
    if not path.is_file():
        raise PipelineError(f"{path}: params file not found")
    try:
        params = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise PipelineError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(params, dict):
        raise PipelineError(f"{path}: expected a mapping of sections")
    return params


def param(params: dict, key: str, kind: type | tuple = int, *, low=None, high=None,
          choices=None, default: Any = _MISSING):
    """Read `params["a"]["b"]` for key "a.b", check type/range/choices, return the value."""
    node: Any = params
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            if default is not _MISSING:
                return default
            raise PipelineError(f"params.yaml: missing parameter '{key}'")
        node = node[part]
    value = node
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if float in kinds and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if value is None and type(None) in kinds:
        return None
    if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
        names = "/".join(k.__name__ for k in kinds)
        raise PipelineError(f"params.yaml: '{key}' must be {names}, got {value!r}")
    if choices is not None and value not in choices:
        raise PipelineError(f"params.yaml: '{key}' must be one of {list(choices)}, got {value!r}")
    if low is not None and value < low:
        raise PipelineError(f"params.yaml: '{key}' must be >= {low}, got {value!r}")
    if high is not None and value > high:
        raise PipelineError(f"params.yaml: '{key}' must be <= {high}, got {value!r}")
    return value


def run_stage(main: Callable[[], None]) -> None:
    """Entry point of every stage script: user errors become one line on stderr and exit 1."""
    try:
        main()
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)


def run_settings(params: dict):
    """(seed, torch device) of the stages that train or run models."""
    return (param(params, "seed", int, default=0),
            pick_device(param(params, "device", str, default="auto")))


def satnet_sizes(params: dict) -> tuple[int, int, int]:
    """(m, aux, max_iter) of the SATNet layer, shared by every stage that builds one."""
    return (param(params, "satnet.m", int, low=1), param(params, "satnet.aux", int, low=0),
            param(params, "satnet.max_iter", int, low=1))
