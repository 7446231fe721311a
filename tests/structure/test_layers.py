"""The folders of core stack in pipeline order: no folder imports one that imports it back
(function-level imports included), and the frontend never reaches the runtime."""
import ast
import collections
from pathlib import Path

import anytile

CORE = Path(anytile.__file__).parent


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "anytile"


def _folder_graph():
    edges = collections.defaultdict(dict)
    for path in CORE.rglob("*.py"):
        rel = path.relative_to(CORE.parent).with_suffix("")
        module = ".".join(rel.parts)
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        if path.name == "__init__.py":
            module = package
        source = _unit(module) if path.parent != CORE or path.name != "__init__.py" else "anytile"
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
            elif isinstance(node, ast.Import):
                target = next((a.name for a in node.names if a.name.startswith("anytile")), "")
            else:
                continue
            if not target.startswith("anytile"):
                continue
            dest = _unit(target)
            if dest != source:
                edges[source].setdefault(dest, f"{path.relative_to(CORE.parent)}:{node.lineno}")
    return edges


def test_no_cycle_between_folders():
    edges = _folder_graph()
    state: dict[str, int] = {}

    def visit(node, trail):
        state[node] = 1
        for nxt, where in edges.get(node, {}).items():
            if state.get(nxt) == 1:
                raise AssertionError("import cycle: " + " -> ".join(trail + [f"{nxt} ({where})"]))
            if nxt not in state:
                visit(nxt, trail + [f"{nxt} ({where})"])
        state[node] = 2

    for node in list(edges):
        if node not in state:
            visit(node, [node])


def test_pipeline_order():
    edges = _folder_graph()
    assert "runtime" not in edges["frontend"], edges["frontend"].get("runtime")
    assert "runtime" not in edges["language"], edges["language"].get("runtime")
    assert not {"frontend", "language", "runtime", "passes"} & set(edges["ir"]), edges["ir"]
    assert "anytile" not in edges["runtime"], edges["runtime"].get("anytile")
