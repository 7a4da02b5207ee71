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
import fcntl
import hashlib
import math
import os
import sys
import tempfile
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


class _UniqueKeyLoader(yaml.SafeLoader):
    """safe_load that refuses a key given twice in one mapping (YAML keeps the last silently)."""

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise _DuplicateKey(f"key '{key}' given twice, on lines {seen[key] + 1} and "
                                    f"{key_node.start_mark.line + 1}")
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep)


class _DuplicateKey(Exception):
    pass


def read_yaml(path, what: str = "params file") -> dict:
    """A YAML file of sections (params, profiles, dvc.yaml): one-line errors name the file."""
    path = Path(path)
    if not path.is_file():
        raise PipelineError(f"{path}: {what} not found")
    try:
        values = yaml.load(path.read_text(), Loader=_UniqueKeyLoader)
    except _DuplicateKey as exc:
        raise PipelineError(f"{path}: {exc}") from None
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
    if isinstance(value, float) and not math.isfinite(value):
        raise PipelineError(f"{source(params)}: '{key}' must be a finite number, got {value!r}")
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
    args = parser.parse_args(argv)
    outputs = [Path(getattr(args, name.replace("-", "_"))) for name in paths
               if name.endswith("-out")]
    for path in outputs:
        check_output_place(path)
    if outputs:
        hold_output_lock(outputs[0])
    return args


def check_output_place(path: Path) -> None:
    """Before any work: an output's folder can be created and written, and a file output
    (a name with a suffix: .pt, .json, .png) is not an existing folder."""
    if path.suffix and path.is_dir():
        raise PipelineError(f"{path}: output is an existing folder, expected a file")
    if not path.suffix and path.exists() and not path.is_dir():
        raise PipelineError(f"{path}: output is an existing file, expected a folder")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK) or (
            path.exists() and not os.access(path, os.W_OK)):
        raise PipelineError(f"{path}: cannot write here ({parent} is not a writable folder)")


_LOCKS = {}  # lock path -> open lock file of this process: held until it exits


def output_lock_path(output: Path) -> Path:
    """The lock file guarding a stage's outputs (named by the first one's absolute path)."""
    digest = hashlib.sha256(str(output.resolve()).encode()).hexdigest()[:20]
    return Path(tempfile.gettempdir()) / f"satground-{os.getuid()}" / f"{digest}.lock"


def hold_output_lock(output: Path) -> None:
    """Refuse to start while another process writes the same outputs (a stage left running
    when its `dvc repro` was killed, or a second `dvc repro`); the lock ends with the process."""
    lock = output_lock_path(output)
    if lock in _LOCKS:  # this process holds it already (a stage run twice in one process)
        return
    lock.parent.mkdir(parents=True, exist_ok=True)
    handle = open(lock, "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "unknown"
        handle.close()
        raise PipelineError(f"{output}: another process (pid {holder}) is writing this stage's "
                            f"outputs; wait for it or stop it, then rerun") from None
    handle.truncate(0)
    handle.write(str(os.getpid()))
    handle.flush()
    _LOCKS[lock] = handle


def run_stage(main: Callable[[], None]) -> None:
    """Entry point of every stage script: user errors (bad input, parameters, or a machine the
    SATNet kernel cannot be built on) become one line on stderr and exit 1."""
    try:
        main()
    except Exception as exc:
        if not getattr(exc, "user_facing", False):  # PipelineError, the SATNet SetupError
            raise
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


def machine_memory() -> int:
    """This machine's physical memory in bytes (0 where the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def check_memory(params: dict, keys: str, nbytes: float) -> None:
    """One-line error, before any work, when parameters ask for more memory than the machine has."""
    total = machine_memory()
    if total and nbytes > total:
        raise PipelineError(f"{source(params)}: {keys} need about {nbytes / 2**30:,.0f} GiB, more "
                            f"than this machine's {total / 2**30:,.0f} GiB")


def satnet_sizes(params: dict) -> tuple[int, int, int]:
    """(m, aux, max_iter) of the SATNet layer, shared by every stage that builds one; S and its
    Adam state (4 N x m) and the Gram matrix (N x N) must fit in memory, N = n + 1 + aux with
    n = 729, the 9x9 board's cells x digits (the largest board)."""
    m, aux = param(params, "satnet.m", int, low=1), param(params, "satnet.aux", int, low=0)
    max_iter = param(params, "satnet.max_iter", int, low=1)
    N = 729 + 1 + aux
    check_memory(params, "'satnet.m' and 'satnet.aux'", 4 * (4 * N * m + 2 * N * N))
    return m, aux, max_iter
