"""Imports a script of benchmarks/ or studies/ as `python FOLDER/NAME.py` would run it.

Both folders keep a `common.py` that their scripts import as `from common import ...`; a test
that put both folders on the module path would hand one folder's scripts the other's `common`.
The folder goes first on the path only while the script loads, and `common` is dropped after, so
each script binds its own folder's helpers."""
import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def script(folder: str, name: str):
    """The module of REPO/folder/name.py, its `from common import` bound to folder/common.py."""
    path, saved_path = REPO / folder, list(sys.path)
    saved_common = sys.modules.pop("common", None)
    sys.path.insert(0, str(path))
    try:
        spec = importlib.util.spec_from_file_location(f"{folder}_{name}", path / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved_path
        sys.modules.pop("common", None)
        if saved_common is not None:
            sys.modules["common"] = saved_common
    return module
