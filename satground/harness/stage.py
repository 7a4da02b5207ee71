"""What every stage script shares: its command line, the lock on its outputs, its device, the
machine checks before any work, and one-line errors for what a user can fix.
"""
from __future__ import annotations

import argparse
import errno
import fcntl
import hashlib
import inspect
import os
import signal
import sys
import tempfile
from pathlib import Path
from typing import Callable

from .io import PipelineError, pick_device


def stage_arguments(doc: str, paths: list[str], argv=None, extra: Callable | None = None,
                    params: bool = True):
    """A stage script's command line: --params and each path it reads or writes, all required.

    dvc.yaml's command of the stage names every path, so paths live in one place: there, next to
    the deps and outs that declare them. Outputs end in -out (a folder for --metrics-out: the
    stage's metrics, satground.harness.tracking). `extra(parser)` adds a stage's other options.
    """
    script = Path(inspect.currentframe().f_back.f_code.co_filename)  # the stage script calling
    asks_help = any(a in ("-h", "--help") for a in (sys.argv[1:] if argv is None else argv))
    stages = declared_stages(script) if asks_help else {}  # --help reads dvc.yaml; a run does not
    parser = argparse.ArgumentParser(
        prog=f"python stages/{script.name}", description=doc.strip(),
        epilog=stage_params_help(stages) if stages and params else None,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    for name in ["params"] * params + paths:
        if name == "resume-dir":  # not an artifact: outside the workspace unless asked
            parser.add_argument("--resume-dir", type=Path, metavar="PATH",
                                help=f"resume files of a killed run (default: ${RESUME_VARIABLE} "
                                     f"or ~/.cache/satground/resume)")
        else:
            parser.add_argument(f"--{name}", required=True, metavar="PATH", help=path_help(name, stages))
    if extra is not None:
        extra(parser)
    args = parser.parse_args(argv)
    outputs = [Path(getattr(args, name.replace("-", "_"))) for name in paths
               if name.endswith("-out")]
    if "resume-dir" in paths:
        args.resume_dir = args.resume_dir or resume_folder()
        outputs.append(args.resume_dir)
    for path in outputs:
        check_output_place(path)
    if outputs:
        hold_output_lock(outputs[0])
    return args


def declared_stages(script: Path) -> dict:
    """dvc.yaml's stages that run `script` (baseline_visual.py runs two): {name: stage}."""
    from .params import read_yaml

    stages = read_yaml(script.resolve().parents[1] / "dvc.yaml", "dvc.yaml").get("stages", {})
    return {name: stage for name, stage in stages.items()
            if stage.get("cmd", "").split()[1:2] == [f"stages/{script.name}"]}


def path_help(name: str, stages: dict) -> str:
    """'read' or 'written', and the path each stage's dvc.yaml command gives option --name."""
    values = {}
    for stage, entry in stages.items():
        words = entry["cmd"].split()
        values[stage] = dict(zip(words[2::2], words[3::2])).get(f"--{name}")
    role = "written" if name.endswith("-out") else "read"
    if not values or None in values.values():
        return role
    if len(set(values.values())) == 1:
        return f"{role}; dvc.yaml: {next(iter(values.values()))}"
    return f"{role}; dvc.yaml: " + ", ".join(f"{value} ({stage})" for stage, value in values.items())


def stage_params_help(stages: dict) -> str:
    """The parameters the stages read, as dvc.yaml declares them (its `params:`, which DVC
    watches), each with its default and meaning from the schema."""
    from .params import describe

    lines = []
    for name, stage in stages.items():
        lines += [f"stage {name} reads (dvc.yaml):"]
        lines += [f"  {line}" for key in stage.get("params", []) for line in describe(key)]
    return "\n".join(lines + ["Set them in params.yaml, a profile, or `dvc exp run -S key=value`."])


RESUME_VARIABLE = "SATGROUND_RESUME_DIR"


def resume_folder() -> Path:
    """Where the training stages keep resume files (satground.harness.resume): $SATGROUND_RESUME_DIR,
    else satground/resume in the user's cache folder. Outside the workspace, because DVC deletes
    a stage's outputs before a rerun and a queued experiment's whole workspace when it stops."""
    if os.environ.get(RESUME_VARIABLE):
        return Path(os.environ[RESUME_VARIABLE])
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "satground" / "resume"


def check_output_place(path: Path) -> None:
    """Before any work: an output's folder can be created and written (a file is really made
    and removed there: a special filesystem such as /proc may say writable and refuse), and a
    file output (a name with a suffix: .pt, .json, .png) is not an existing folder."""
    if path.suffix and path.is_dir():
        raise PipelineError(f"{path}: output is an existing folder, expected a file")
    if not path.suffix and path.exists() and not path.is_dir():
        raise PipelineError(f"{path}: output is an existing file, expected a folder")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    # files are made beside an output (atomic writes) and, for an existing folder, in it
    for place in [parent] + [path] * path.is_dir():
        if not place.is_dir() or not os.access(place, os.W_OK | os.X_OK):
            raise PipelineError(f"{path}: cannot write here ({place} is not a writable folder)")
        try:
            with tempfile.TemporaryFile(dir=place):
                pass
        except OSError as exc:
            raise PipelineError(f"{path}: cannot write here ({place}: {exc.strerror})") from None
    if path.exists() and not os.access(path, os.W_OK):
        raise PipelineError(f"{path}: cannot write here (the file is read-only)")


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


# a write the world refused (not a bug): said in one line, like a user error
WORLD_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM}


class Interrupted(BaseException):  # as KeyboardInterrupt: no `except Exception` swallows it
    """SIGTERM or SIGINT, raised where the stage is, so that every `finally` runs: the write
    under way is abandoned whole (its temporary file removed), the outputs stay as they were."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _interrupt(signum, frame):
    raise Interrupted(signum)


def run_stage(main: Callable[[], None]) -> None:
    """Entry point of every stage script: user errors (bad input, parameters, or a machine the
    SATNet kernel cannot be built on) and writes the machine refuses (a full disk, a read-only
    folder) become one line on stderr and exit 1. Every write is atomic (satground.harness.io), so
    nothing half-written is left behind. SIGTERM and SIGINT (a queue stopped, a laptop closed)
    stop it the same way, exit 128 + the signal; rerun to resume after the last whole epoch."""
    previous = {signum: signal.signal(signum, _interrupt) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        main()
    except Interrupted as exc:
        print(f"error: stopped by {exc}; nothing half-written was left: rerun the same command "
              f"(`dvc repro`), which resumes after the last whole epoch", file=sys.stderr)
        sys.exit(128 + exc.signum)
    except OSError as exc:
        if exc.errno not in WORLD_ERRORS:
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"error: {where}{exc.strerror} (nothing half-written was left: rerun once it can write)",
              file=sys.stderr)
        sys.exit(1)
    except Exception as exc:
        if not getattr(exc, "user_facing", False):  # PipelineError, the SATNet SetupError
            raise
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


DEVICE_VARIABLE = "SATGROUND_DEVICE"


def stage_device():
    """The torch device: $SATGROUND_DEVICE (auto, cpu, cuda or cuda:N; auto when unset: CUDA when
    present), checked against this machine before any work. Not a parameter on purpose: the machine
    is not part of the experiment, so moving a run to a new GPU makes no stage stale."""
    return pick_device(os.environ.get(DEVICE_VARIABLE, "auto"), f"${DEVICE_VARIABLE}")


def machine_memory() -> int:
    """This machine's physical memory in bytes (0 where the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def check_memory(where: str, keys: str, nbytes: float) -> None:
    """One-line error, before any work, when parameters ask for more memory than the machine has."""
    total = machine_memory()
    if total and nbytes > total:
        raise PipelineError(f"{where}: {keys} need about {nbytes / 2**30:,.0f} GiB, more "
                            f"than this machine's {total / 2**30:,.0f} GiB")
