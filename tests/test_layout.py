"""The library's import graph, from the code's own imports: no cycle, and a short chain from a
stage script down to the SATNet layer (issue 69: seven layers before the layout by role).

    python tests/test_layout.py     # prints the longest chain from each stage to the layer
"""
import functools
from pathlib import Path

from test_code_deps import project_imports

REPO = Path(__file__).resolve().parents[1]
LAYER = "satground.satnet.layer"
MOST_LAYERS = 6  # modules on the longest chain from a stage script to the layer, both counted


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def library_modules() -> dict[str, Path]:
    return {module_name(p): p for p in (REPO / "satground").rglob("*.py")}


def imports(path: Path, name: str) -> set[str]:
    """The library modules a file imports (test_code_deps reads them), less its own packages'
    __init__ (`from . import cpu` inside satground.satnet runs it already: not a layer above)."""
    found = {module_name(p) for p in project_imports(path)}
    return {m for m in found if m != name and not name.startswith(m + ".")}


def graph() -> dict[str, set[str]]:
    edges = {name: imports(path, name) for name, path in library_modules().items()}
    for script in (REPO / "stages").glob("*.py"):
        edges[f"stages/{script.name}"] = imports(script, script.stem)
    return edges


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def longest_chains(edges: dict[str, set[str]]) -> dict[str, list[str]]:
    """For each stage script reaching the layer, its longest import chain down to it."""
    @functools.cache
    def chain(node: str) -> tuple[str, ...] | None:
        if node == LAYER:
            return (node,)
        below = [c for c in (chain(n) for n in sorted(edges.get(node, ()))) if c]
        return (node,) + max(below, key=len) if below else None

    return {stage: list(found) for stage in sorted(edges) if stage.startswith("stages/")
            if (found := chain(stage))}


def test_the_library_has_no_import_cycle():
    assert find_cycle(graph()) is None, " -> ".join(find_cycle(graph()))


def test_no_stage_is_more_than_a_few_layers_above_the_satnet_layer():
    chains = longest_chains(graph())
    assert chains, "no stage reaches the layer: the graph reader lost the imports"
    longest = max(chains.values(), key=len)
    assert len(longest) <= MOST_LAYERS, " -> ".join(longest)


if __name__ == "__main__":
    for stage, found in longest_chains(graph()).items():
        print(f"{len(found)}  {' -> '.join(found)}")
