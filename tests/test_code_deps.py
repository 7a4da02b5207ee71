"""dvc.yaml's code deps are exactly the modules each stage imports, transitively: a module a stage
imports but does not declare would not rerun it when edited; one it declares but does not import
reruns it for nothing."""
import ast
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent


def project_imports(path: Path) -> set[Path]:
    """Project files (satground/...) that `path` imports, directly, at any depth of its code."""
    package = path.relative_to(REPO).parent
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from .x import y / from . import y
                parts = package.parts[:len(package.parts) - node.level + 1]
                base = ".".join(parts + ((base,) if base else ()))
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if not name.startswith("satground"):
                continue
            module = REPO / Path(*name.split("."))
            for candidate in (module.with_suffix(".py"), module / "__init__.py"):
                if candidate.is_file():
                    found.add(candidate)
    return found


def groups_only(init: Path) -> bool:
    """An __init__.py that holds only a docstring: its package only groups modules (imports none
    of them), so importing one of its modules brings no other, and each is declared by itself."""
    return all(isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
               for node in ast.parse(init.read_text()).body)


def closure(script: Path) -> set[str]:
    seen, todo = set(), [script]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        todo += project_imports(path)
        # importing satground.x.y runs the packages' __init__ on the way
        for parent in path.relative_to(REPO).parents:
            init = REPO / parent / "__init__.py"
            if parent != Path(".") and init.is_file() and init not in seen:
                todo.append(init)
    # the top package's __init__ (a docstring, the numba cache folder, the vector math's set-up:
    # no result depends on them) and those that only group modules: not worth declaring
    return {str(p.relative_to(REPO)) for p in seen
            if p != REPO / "satground" / "__init__.py" and not (p.name == "__init__.py" and groups_only(p))}


def test_code_deps_match_the_import_closure():
    """A module file is declared exactly when the stage imports it; a package folder (the layer,
    the clustering family) is declared whole when the stage imports any module of it, so a
    change anywhere in that package reruns the stage. A package that only groups modules (its
    __init__ a docstring) is no such unit: its modules are declared one by one."""
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    for name, stage in stages.items():
        script = stage["cmd"].split()[1]
        imported = closure(REPO / script)
        declared, folders = set(), []
        for dep in stage["deps"]:
            folder = REPO / dep
            if folder.is_dir() and dep.startswith("satground"):
                folders.append(dep)
                files = {str(p.relative_to(REPO)) for p in folder.glob("*.py")}
                assert files & imported, (name, dep, "declared, none of it imported")
                declared |= files & imported
            elif dep.endswith(".py"):
                declared.add(dep)
        packages = [str(p.parent.relative_to(REPO)) for p in (REPO / "satground").glob("*/__init__.py")
                    if not groups_only(p)]
        for module in imported:  # a module of a package folder is declared by the folder
            if any(module.startswith(package + "/") for package in packages):
                assert any(module.startswith(f + "/") for f in folders), (name, module, "declare its folder")
        assert declared == imported, (name, "undeclared:", sorted(imported - declared),
                                      "declared, not imported:", sorted(declared - imported))
