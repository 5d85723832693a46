"""The layering of docs/architecture.md, checked against the code: the graph between workbench's packages has only
edges from a higher layer to a lower one, and no two modules reach each other around a loop.

An edge is every way one module reaches another: an import statement (function-level and relative ones included),
a name a package hands out lazily (``from workbench import train``), attribute access on an imported package
(``import workbench; workbench.ui.state``), a module named in a string (``importlib.import_module("workbench.x")``,
a lazy table) and a child process (``[sys.executable, "-m", "workbench.x"]``)."""

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


def declared_entry_points(text: str) -> set[str]:
    """The modules the doc's "Processes" table lists as started by workbench itself (its rows ``| `python -m
    workbench.x ...` | ... |``)."""
    section = text.split("## Processes", 1)[-1].split("\n## ", 1)[0]
    return set(re.findall(r"^\|\s*`python -m (workbench[\w.]*)", section, re.M))


def code_units(root: Path = PACKAGE_ROOT) -> set[str]:
    """The subpackages and top-level modules of workbench (what the layers are made of)."""
    units = {p.name for p in root.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    units |= {p.stem for p in root.glob("*.py") if p.stem != "__init__"}
    return units


def module_files(root: Path = PACKAGE_ROOT) -> dict[str, Path]:
    """{dotted name: file} of every module and package (a package by its ``__init__.py``)."""
    files = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


def package_exports(package: str, path: Path, modules) -> dict[str, str]:
    """{name: module} of the names a package's ``__init__`` hands out: re-exported imports and the values of a lazy
    table (``{"train": "workbench.training"}`` or ``{"RunMonitor": "monitor_panel"}``)."""
    exports = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = _absolute(node, package.split("."))
            for alias in node.names:
                exports[alias.asname or alias.name] = (
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                )
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and isinstance(value, ast.Constant) and isinstance(value.value, str):
                    for name in (value.value, f"{package}.{value.value}"):
                        if name in modules:
                            exports[key.value] = name
    return exports


def _absolute(node: ast.ImportFrom, package: list[str]) -> str:
    """The module ``from X import ...`` names, relative ones resolved from the file's package."""
    base = package[: len(package) - node.level + 1] if node.level else []
    return ".".join(base + (node.module.split(".") if node.module else []))


class References:
    """The modules one file reaches, each with the line that does it: ``found`` = [(module, line)]."""

    def __init__(self, name: str, path: Path, modules: dict[str, Path], exports):
        self.modules, self.exports, self.found = modules, exports, []
        is_package = path.name == "__init__.py"
        self.package = name.split(".") if is_package else name.split(".")[:-1]
        self.bound: dict[str, str] = {}  # local name -> module, from `import workbench[.x] [as y]`
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                self._import(node)
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(node, self.package)
                for alias in node.names:
                    self._add(self._member(base, alias.name) or base, node.lineno)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and (chain := _dotted(node)) and chain[0] in self.bound:
                self._attribute(self.bound[chain[0]], chain[1:], node.lineno)
            elif isinstance(node, (ast.List, ast.Tuple)):
                self._child_processes(node.elts)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("workbench."):
                self._add(node.value if node.value in modules else None, node.lineno)

    def _add(self, module: str | None, line: int) -> None:
        if module in self.modules:
            self.found.append((module, line))

    def _member(self, module: str, name: str) -> str | None:
        """The module ``module.name`` is: a submodule, or a name the package hands out."""
        if f"{module}.{name}" in self.modules:
            return f"{module}.{name}"
        return self.exports.get(module, {}).get(name)

    def _import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".")[0] == "workbench":
                self._add(alias.name, node.lineno)
                self.bound[alias.asname or "workbench"] = alias.name if alias.asname else "workbench"

    def _attribute(self, module: str, attrs: list[str], line: int) -> None:
        for attr in attrs:  # workbench.ui.state.RunState: the deepest module on the chain
            member = self._member(module, attr)
            if member is None:
                break
            module = member
        self._add(module, line)

    def _child_processes(self, elts: list[ast.expr]) -> None:
        """``[..., "-m", "workbench.x", ...]``: a child process running that module (``workbench``: its __main__)."""
        for flag, target in zip(elts, elts[1:]):
            if (
                isinstance(flag, ast.Constant)
                and flag.value == "-m"
                and isinstance(target, ast.Constant)
                and isinstance(target.value, str)
                and target.value.split(".")[0] == "workbench"
            ):
                main = f"{target.value}.__main__"
                self._add(main if main in self.modules else target.value, target.lineno)


def _dotted(node: ast.expr) -> list[str] | None:
    """``a.b.c`` as ["a", "b", "c"]; None for anything but names and attributes."""
    attrs = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    return [node.id, *reversed(attrs)] if isinstance(node, ast.Name) else None


def references(root: Path = PACKAGE_ROOT) -> dict[str, list[tuple[str, int]]]:
    """{module: [(module it reaches, line), ...]} over the whole package."""
    modules = module_files(root)
    exports = {
        name: package_exports(name, path, modules) for name, path in modules.items() if path.name == "__init__.py"
    }
    return {name: References(name, path, modules, exports).found for name, path in sorted(modules.items())}


def _unit(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def import_edges(root: Path = PACKAGE_ROOT) -> dict[tuple[str, str], list[str]]:
    """{(from unit, to unit): ["file:line", ...]} for every way one workbench unit reaches another."""
    units, files = code_units(root), module_files(root)
    edges: dict[tuple[str, str], list[str]] = {}
    for module, found in references(root).items():
        here = _unit(module)
        for target, line in found:
            there = _unit(target)
            if here in units and there in units and there != here:
                where = f"{files[module].relative_to(root.parent)}:{line}"
                if where not in edges.setdefault((here, there), []):
                    edges[(here, there)].append(where)
    return edges


def back_edges(edges, layers) -> list[str]:
    return [
        f"{a} (layer {layers[a]}) -> {b} (layer {layers[b]}) at {', '.join(where[:3])}"
        for (a, b), where in sorted(edges.items())
        if layers[b] >= layers[a]
    ]


def test_every_package_has_a_layer_in_the_doc_and_every_layer_entry_exists():
    layers, units = declared_layers(DOC.read_text(encoding="utf-8")), code_units()
    assert not units - set(layers), f"packages missing from docs/architecture.md: {sorted(units - set(layers))}"
    assert not set(layers) - units, (
        f"docs/architecture.md names packages that do not exist: {sorted(set(layers) - units)}"
    )


def test_packages_reach_only_lower_layers():
    layers = declared_layers(DOC.read_text(encoding="utf-8"))
    bad = back_edges(import_edges(), layers)
    assert not bad, "edges that go sideways or up the layers of docs/architecture.md:\n" + "\n".join(bad)


def _fake_package(root: Path, files: dict[str, str]) -> Path:
    """A small source tree ``workbench/{low,high}`` plus ``files`` ({relative path: source})."""
    pkg = root / "workbench"
    for name in ("low", "high"):
        (pkg / name).mkdir(parents=True, exist_ok=True)
        (pkg / name / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text('_LAZY = {"train": "workbench.high.train"}\n')
    (pkg / "high" / "train.py").write_text("def train():\n    pass\n")
    (pkg / "high" / "__main__.py").write_text("")
    for rel, source in files.items():
        (pkg / rel).write_text(source)
    return pkg


# Each way a low module can reach a high one; the checker must see every one (file low/a.py, the edge on line 2).
EDGE_KINDS = {
    "a function-level relative import": "def f():\n    from ..high import train\n",
    "an absolute import": "import os\nimport workbench.high.train\n",
    "a lazy package name": "import os\nfrom workbench import train\n",
    "attribute access on the package": "import workbench\nworkbench.high.train.train()\n",
    "the lazy name as an attribute": "import workbench as wb\nx = wb.train\n",
    "an importlib string": "import importlib\nm = importlib.import_module('workbench.high.train')\n",
    "a child process of a module": "import subprocess, sys\nsubprocess.run([sys.executable, '-m', 'workbench.high'])\n",
    "a child process of the package": "import sys\ncommand = (sys.executable, '-m', 'workbench', 'x')\n",
}


def test_the_check_finds_every_kind_of_edge(tmp_path):
    for i, (kind, source) in enumerate(EDGE_KINDS.items()):
        pkg = _fake_package(tmp_path / str(i), {"low/a.py": source, "__main__.py": "import workbench.high\n"})
        edges = import_edges(pkg)
        layers = {"low": 0, "high": 1, "__main__": 2}
        bad = back_edges(edges, layers)
        assert len(bad) == 1 and bad[0].startswith("low (layer 0) -> "), f"{kind} not seen: {edges}"
        assert bad[0].endswith("at workbench/low/a.py:2"), f"{kind}: {bad}"


def test_the_check_sees_no_edge_in_prose_or_other_names(tmp_path):
    pkg = _fake_package(
        tmp_path,
        {
            "low/a.py": '"""Started by ``python -m workbench.high``."""\n'
            'NAME = "workbench.json"\nPROG = "python -m workbench.high"\n'
            "def f(workbench):\n    return workbench.high\n"
        },
    )
    assert ("low", "high") not in import_edges(pkg)


def module_edges(root: Path = PACKAGE_ROOT) -> dict[str, set[str]]:
    """{module: the workbench modules it reaches}, package ``__init__`` files left out: a package re-exporting its
    modules is not a dependency between them."""
    files = module_files(root)
    modules = {name for name, path in files.items() if path.name != "__init__.py"}
    return {
        name: {target for target, _ in found if target in modules} - {name}
        for name, found in references(root).items()
        if name in modules
    }


def module_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that reach each other, directly or around a loop (strongly connected components)."""
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


# Loops being broken, each named; the list only shrinks (empty: the server's child is serve.server itself).
CYCLES_BEING_BROKEN: list[list[str]] = []


def test_no_two_modules_reach_each_other():
    """Within a package too, dependencies go one way (ui.chat_exports reaches the chat panel through a protocol; the
    eval task registry imports the scorers, which import only what a task is; the launcher and the worker it starts
    live in one module)."""
    found = module_cycles(module_edges())
    cycles = [c for c in found if c not in CYCLES_BEING_BROKEN]
    assert all(c in found for c in CYCLES_BEING_BROKEN), "a loop of CYCLES_BEING_BROKEN is gone: drop it from the list"
    assert not cycles, "modules that reach each other:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_check_finds_a_lazy_loop():
    assert module_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_cycle_check_sees_a_child_process(tmp_path):
    pkg = _fake_package(
        tmp_path,
        {
            "low/a.py": "import sys\nCMD = [sys.executable, '-m', 'workbench.high.train']\n",
            "high/train.py": "from ..low import a\n",
        },
    )
    assert module_cycles(module_edges(pkg)) == [["workbench.high.train", "workbench.low.a"]]


def entry_points(root: Path = PACKAGE_ROOT) -> set[str]:
    """The modules a process can start with ``python -m``: a ``__main__.py`` or an ``if __name__ == "__main__"``."""
    found = set()
    for name, path in module_files(root).items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if path.name == "__main__.py" or any(
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name)
            and node.test.left.id == "__name__"
            for node in tree.body
        ):
            found.add(name)
    return found


def test_the_entry_point_check_finds_a_main_block_and_a_main_module(tmp_path):
    pkg = _fake_package(
        tmp_path, {"low/tool.py": 'if __name__ == "__main__":\n    pass\n', "low/quiet.py": "NAME = __name__\n"}
    )
    assert entry_points(pkg) == {"workbench.low.tool", "workbench.high.__main__"}


def test_every_entry_point_is_a_command_a_benchmark_or_a_child_process_in_the_doc():
    """A user's way in is the ``workbench`` command (``python -m workbench``, ``python -m workbench.cli.X``) or a
    benchmark (``python -m workbench.bench.X``); any other module run with ``-m`` is a child process workbench starts
    itself, and the doc's "Processes" table says which and who starts it."""
    modules = module_files()
    declared = {
        f"{m}.__main__" if f"{m}.__main__" in modules else m
        for m in declared_entry_points(DOC.read_text(encoding="utf-8"))
    }
    mains = {m for m in entry_points() if not m.startswith(("workbench.cli.", "workbench.bench."))} - {
        "workbench.__main__"
    }
    assert mains == declared, (
        f"entry points outside workbench/cli and workbench/bench the doc does not list: "
        f"{sorted(mains - declared)}; listed but gone: {sorted(declared - mains)}"
    )
    started = {target for found in references().values() for target, _ in found if target in mains}
    assert started == declared, f"listed child processes nothing starts: {sorted(declared - started)}"


if __name__ == "__main__":  # `python tests/test_architecture.py [PACKAGE_DIR]`: the package graph's figures
    import sys

    root = Path(sys.argv[1]) if len(sys.argv) > 1 else PACKAGE_ROOT
    graph: dict[str, set[str]] = {}
    for a, b in import_edges(root):
        graph.setdefault(a, set()).add(b)
    cycles = module_cycles(graph)
    inside = sum(1 for a, targets in graph.items() for b in targets if any(a in c and b in c for c in cycles))
    print(
        f"{len(code_units(root))} units, {sum(map(len, graph.values()))} package edges, "
        f"{len(cycles)} cycle(s) {cycles}, {inside} edges inside cycles"
    )
