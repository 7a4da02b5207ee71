"""dvc.yaml's `params:` of each stage are exactly the params.yaml keys its script reads: a key read
but not declared would not rerun the stage when changed (issue 69: `rule_aware`, read by evaluate's
results label, was declared by no stage, so flipping it reran nothing); one declared but never
read reruns it for nothing.

Read statically from the stage script: `params.section.key`, a section bound to a name
(`cfg = params.cluster`, then `cfg.method`), a section or `params` passed to a function of the
script or of satground (followed into its body), a `Params` method the script calls
(`params.configuration()`, followed into satground/harness/params.py) or a method of a section's
class (`cfg.reader_training()`, likewise); a section passed anywhere else counts as read whole.
`load_params`' own checks on load are not a stage's read.
"""
import ast
from pathlib import Path

import yaml

from satground.harness.params import SEEDED_SECTIONS, known_keys

REPO = Path(__file__).resolve().parent.parent
SCHEMA = REPO / "satground/harness/params.py"
KEYS = set(known_keys())
SECTIONS = {key.rsplit(".", i)[0] for key in KEYS for i in range(1, key.count(".") + 1)}


def chain(node) -> tuple[ast.AST, list[str]]:
    """`a.b.c` -> (Name a, ['b', 'c'])."""
    names = []
    while isinstance(node, ast.Attribute):
        names.insert(0, node.attr)
        node = node.value
    return node, names


def schema_prefix(prefix: str, names: list[str]) -> tuple[str, list[str]]:
    """The longest schema key or section reached from `prefix` by `names`, and the names left."""
    for i, name in enumerate(names):
        key = f"{prefix}.{name}" if prefix else name
        if key not in KEYS and key not in SECTIONS:
            return prefix, names[i:]
        prefix = key
    return prefix, []


class Module:
    """A source file's functions and the satground names it imports."""

    def __init__(self, path: Path):
        self.path, self.tree = path, ast.parse(path.read_text())
        self.functions = {node.name: node for node in ast.walk(self.tree)
                          if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
        self.imported = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ImportFrom) and node.module and (node.module.startswith("satground") or node.level):
                base = node.module if not node.level else ".".join(
                    path.relative_to(REPO).parent.parts[:len(path.relative_to(REPO).parent.parts) - node.level + 1]
                    + ((node.module,) if node.module else ()))
                for alias in node.names:
                    self.imported[alias.asname or alias.name] = (base, alias.name)

    def resolve(self, name: str):
        """(Module, FunctionDef) of a function named in this file, or None."""
        if name in self.functions:
            return self, self.functions[name]
        if name in self.imported:
            base, attr = self.imported[name]
            file = REPO / Path(*base.split(".")).with_suffix(".py")
            if file.is_file():
                module = Module(file)
                if isinstance(module.functions.get(attr), ast.FunctionDef):
                    return module, module.functions[attr]
        return None


def reads(module: Module, body, bound: dict[str, str], seen: set) -> set[str]:
    """Keys read in `body` through the names in `bound` (name -> schema prefix, '' = all params)."""
    found, bound = set(), dict(bound)
    nodes = list(ast.walk(body)) if isinstance(body, ast.AST) else [n for b in body for n in ast.walk(b)]
    # names bound to a section: cfg = params.cluster; cfg, sat = params.a, params.b
    for node in nodes:
        if isinstance(node, ast.Assign):
            targets, values = node.targets[0], node.value
            pairs = (zip(targets.elts, values.elts) if isinstance(targets, ast.Tuple)
                     and isinstance(values, ast.Tuple) else [(targets, values)])
            for target, value in pairs:
                root, names = chain(value)
                if isinstance(target, ast.Name) and isinstance(root, ast.Name) and root.id in bound:
                    prefix, left = schema_prefix(bound[root.id], names)
                    if not left and prefix in SECTIONS | {""}:
                        bound[target.id] = prefix
    inner = {id(n.value) for n in nodes if isinstance(n, ast.Attribute)}
    assigned = {id(n.value) for n in nodes if isinstance(n, ast.Assign)}
    assigned |= {id(e) for n in nodes if isinstance(n, ast.Assign) and isinstance(n.value, ast.Tuple)
                 for e in n.value.elts}
    called = {id(n.func): n for n in nodes if isinstance(n, ast.Call)}
    passed = {id(a): (n, i) for n in nodes if isinstance(n, ast.Call) for i, a in enumerate(n.args)}
    passed |= {id(k.value): (n, k.arg) for n in nodes if isinstance(n, ast.Call) for k in n.keywords}
    for node in nodes:
        if id(node) in inner or not isinstance(node, (ast.Attribute, ast.Name)):
            continue
        root, names = chain(node)
        if not isinstance(root, ast.Name) or root.id not in bound or isinstance(node.ctx, ast.Store):
            continue
        prefix, left = schema_prefix(bound[root.id], names)
        if prefix in KEYS:
            found.add(prefix)
        elif left and prefix == "" and id(node) in called:  # a Params method: params.configuration()
            method = Module(SCHEMA).functions["Params"]
            (function,) = [f for f in method.body if isinstance(f, ast.FunctionDef) and f.name == left[0]]
            if (function.name, "") not in seen:
                seen.add((function.name, ""))
                found |= reads(module, function.body, {"self": ""}, seen)
                found |= follow_self_calls(function, method, seen)
        elif left and prefix in SECTIONS and id(node) in called:  # a section's method
            function = section_method(prefix, left[0])
            if (function.name, prefix) not in seen:
                seen.add((function.name, prefix))
                found |= reads(None, function.body, {"self": prefix}, seen)
        elif left:  # an attribute outside the schema (params.source)
            continue
        elif id(node) in assigned:
            continue
        elif id(node) in passed:  # a section or the params handed to a function
            call, where = passed[id(node)]
            target = module.resolve(call.func.id) if isinstance(call.func, ast.Name) else None
            if target is None:
                found |= {key for key in KEYS if not prefix or key.startswith(prefix + ".")}
                continue
            callee_module, function = target
            arguments = [a.arg for a in function.args.args]
            name = arguments[where] if isinstance(where, int) else where
            if (function.name, name, prefix) not in seen:
                seen.add((function.name, name, prefix))
                found |= reads(callee_module, function.body, {name: prefix}, seen)
        elif isinstance(node, ast.Attribute):  # a section used whole (asdict(cfg.augment) is passed)
            found |= {key for key in KEYS if key == prefix or key.startswith(prefix + ".")}
    return found


def section_method(prefix: str, name: str) -> ast.FunctionDef:
    """The method `name` of the schema class that Params types its field `prefix` with."""
    schema = Module(SCHEMA)
    (annotation,) = [node.annotation.id for node in schema.functions["Params"].body
                     if isinstance(node, ast.AnnAssign) and node.target.id == prefix]
    (function,) = [node for node in schema.functions[annotation].body
                   if isinstance(node, ast.FunctionDef) and node.name == name]
    return function


def follow_self_calls(function, params_class, seen) -> set[str]:
    """Params methods that call each other (self.rule_reading() in check)."""
    found = set()
    for node in ast.walk(function):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "self"):
            for other in params_class.body:
                if isinstance(other, ast.FunctionDef) and other.name == node.func.attr and (other.name, "") not in seen:
                    seen.add((other.name, ""))
                    found |= reads(None, other.body, {"self": ""}, seen) | follow_self_calls(other, params_class, seen)
    return found


def stage_reads(script: Path) -> set[str]:
    module = Module(script)
    found = set()
    for node in ast.walk(module.tree):
        if not isinstance(node, ast.Assign):
            continue
        call, names = chain(node.value)  # params = load_params(...), or cfg = load_params(...).distill
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "load_params":
            (target,) = node.targets
            prefix, left = schema_prefix("", names)
            assert not left, (script, names)
            scope = next(f for f in ast.walk(module.tree) if isinstance(f, ast.FunctionDef)
                         and any(n is node for n in ast.walk(f)))
            found |= reads(module, scope.body, {target.id: prefix}, set())
    if any(f"{section}.seed" in found for section in SEEDED_SECTIONS):
        found.add("seed")  # a stage seed left null is the top-level one
    return found


def covered(key: str, declared: list[str]) -> bool:
    return any(key == d or key.startswith(d + ".") for d in declared)


def test_each_stage_declares_exactly_the_params_keys_it_reads():
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    for name, stage in stages.items():
        script = REPO / stage["cmd"].split()[1]
        declared = stage.get("params", [])
        read = stage_reads(script)
        missing = sorted(key for key in read if not covered(key, declared))
        assert not missing, (name, "reads, not in dvc.yaml's params:", missing)
        unread = [d for d in declared if not any(covered(key, [d]) for key in read)]
        assert not unread, (name, "declares, never reads (reruns for nothing):", unread)


def test_the_reader_sees_what_evaluate_and_cluster_read():
    """The analysis itself: a section bound to a name, a Params method, a section passed on."""
    evaluate = stage_reads(REPO / "stages" / "evaluate.py")
    assert {"rule_aware", "cluster.method", "train.epochs", "evaluate.views", "seed"} <= evaluate
    assert {"distill.classifier", "distill.augment.shift"} <= stage_reads(REPO / "stages" / "distill.py")
    cluster = stage_reads(REPO / "stages" / "cluster.py")
    assert {"cluster.method", "cluster.restarts", "cluster.n_neighbors"} <= cluster
    reread = stage_reads(REPO / "stages/reread.py")  # through Reread.reader_training()
    assert {"reread.reader_lr", "reread.reader_batch_size", "reread.augment.shift"} <= reread
    assert "rule_aware" not in cluster and not any(k.startswith("ground.") for k in cluster)
