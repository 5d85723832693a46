"""The layering of docs/architecture.md, checked against the code: the import graph between workbench's packages
(every import statement, function-level ones included) has only edges from a higher layer to a lower one."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import workbench

PACKAGE_ROOT = Path(workbench.__file__).parent
DOC = PACKAGE_ROOT.parent / "docs" / "architecture.md"


def declared_layers(text: str) -> dict[str, int]:
    """{package: layer} from the doc's table rows ``| N | `a`, `b` | ... |``."""
    layers = {}
    for match in re.finditer(r"^\|\s*(\d+)\s*\|([^|]*)\|", text, re.M):
        for name in re.findall(r"`([\w.]+)`", match.group(2)):
            layers[name] = int(match.group(1))
    return layers


def code_units(root: Path = PACKAGE_ROOT) -> set[str]:
    """The subpackages and top-level modules of workbench (what the layers are made of)."""
    units = {p.name for p in root.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    units |= {p.stem for p in root.glob("*.py") if p.stem != "__init__"}
    return units


def import_edges(root: Path = PACKAGE_ROOT) -> dict[tuple[str, str], list[str]]:
    """{(from unit, to unit): ["file:line", ...]} for every import of one workbench unit by another."""
    units = code_units(root)
    edges: dict[tuple[str, str], list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        here, package = parts[0], parts[:-1]  # a relative import counts from the file's package
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[: len(package) - node.level + 1]
                    dotted = base + (node.module.split(".") if node.module else [])
                    targets = [dotted[0]] if dotted else [a.name.split(".")[0] for a in node.names]
                elif node.module and node.module.startswith("workbench."):
                    targets = [node.module.split(".")[1]]
                elif node.module == "workbench":
                    targets = [a.name for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name.split(".")[1] for a in node.names if a.name.startswith("workbench.")]
            for target in targets:
                if target != here and target in units:
                    edges.setdefault((here, target), []).append(f"{path.relative_to(root.parent)}:{node.lineno}")
    return edges


def back_edges(edges, layers) -> list[str]:
    return [f"{a} (layer {layers[a]}) -> {b} (layer {layers[b]}) at {', '.join(where[:3])}"
            for (a, b), where in sorted(edges.items()) if layers[b] >= layers[a]]


def test_every_package_has_a_layer_in_the_doc_and_every_layer_entry_exists():
    layers, units = declared_layers(DOC.read_text(encoding="utf-8")), code_units()
    assert not units - set(layers), f"packages missing from docs/architecture.md: {sorted(units - set(layers))}"
    assert not set(layers) - units, f"docs/architecture.md names packages that do not exist: {sorted(set(layers) - units)}"


def test_packages_import_only_lower_layers():
    layers = declared_layers(DOC.read_text(encoding="utf-8"))
    bad = back_edges(import_edges(), layers)
    assert not bad, "imports that go sideways or up the layers of docs/architecture.md:\n" + "\n".join(bad)


def test_the_check_finds_a_back_edge_and_a_lazy_one(tmp_path):
    """The checker itself: a function-level import up the layers and a relative one are both found."""
    pkg = tmp_path / "workbench"
    for name in ("low", "high"):
        (pkg / name).mkdir(parents=True)
        (pkg / name / "__init__.py").write_text("")
    (pkg / "low" / "a.py").write_text("def f():\n    from ..high import thing\n")
    (pkg / "high" / "b.py").write_text("from workbench.low import a\n")
    edges = import_edges(pkg)
    assert set(edges) == {("low", "high"), ("high", "low")}
    bad = back_edges(edges, {"low": 0, "high": 1})
    assert len(bad) == 1 and bad[0].startswith("low (layer 0) -> high (layer 1) at workbench/low/a.py:2")


def module_edges(root: Path = PACKAGE_ROOT) -> dict[str, set[str]]:
    """{module: the workbench modules it imports} (lazy imports included), package ``__init__`` files left out: a
    package re-exporting its modules is not a dependency between them."""
    modules = {".".join(p.relative_to(root.parent).with_suffix("").parts): p for p in root.rglob("*.py")
               if p.name != "__init__.py"}
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name.split(".")[:-1]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                module = ".".join(base + (node.module.split(".") if node.module else []))
                found |= {m for m in [module, *(f"{module}.{a.name}" for a in node.names)] if m in modules}
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name in modules}
        edges[name] = found - {name}
    return edges


def module_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, directly or around a loop (strongly connected components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return cycles


def test_no_two_modules_import_each_other():
    """Within a package too, dependencies go one way (ui.export_chat reaches the chat panel through a protocol; the
    eval task registry imports the scorers, which import only what a task is)."""
    cycles = module_cycles(module_edges())
    assert not cycles, "modules that import each other:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_check_finds_a_lazy_loop():
    assert module_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


if __name__ == "__main__":  # `python tests/test_architecture.py [PACKAGE_DIR]`: the package graph's figures
    import sys

    root = Path(sys.argv[1]) if len(sys.argv) > 1 else PACKAGE_ROOT
    graph: dict[str, set[str]] = {}
    for a, b in import_edges(root):
        graph.setdefault(a, set()).add(b)
    cycles = module_cycles(graph)
    inside = sum(1 for a, targets in graph.items() for b in targets if any(a in c and b in c for c in cycles))
    print(f"{len(code_units(root))} units, {sum(map(len, graph.values()))} package edges, "
          f"{len(cycles)} cycle(s) {cycles}, {inside} edges inside cycles")
