"""Each package imported alone in a fresh interpreter: it imports on its own, the engine loads no instrument
(workbench.diagnosis is composed at the entry points) and nothing but workbench.ui loads ipywidgets. The layer
order itself is checked statically against docs/architecture.md in tests/test_architecture.py."""
from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import pytest

import workbench

PACKAGES = sorted(m.name for m in pkgutil.iter_modules(workbench.__path__, "workbench.") if m.ispkg)
PROBE = ("import importlib, json, sys; importlib.import_module(sys.argv[1]); "
         "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('workbench', 'ipywidgets')))))")


def _loaded_by(package: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", PROBE, package], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"import {package} alone failed:\n{out.stderr[-3000:]}"
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_the_packages_are_the_ones_the_layering_names():
    assert {"workbench.engine", "workbench.diagnosis", "workbench.precision", "workbench.ui"} <= set(PACKAGES)


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_imports_alone_and_respects_the_layers(package):
    loaded = _loaded_by(package)
    if package != "workbench.ui":
        assert not any(m.startswith("ipywidgets") for m in loaded), f"{package} imports ipywidgets"
    if package in ("workbench.engine", "workbench.precision", "workbench.config", "workbench.events",
                   "workbench.models", "workbench.data", "workbench.plan", "workbench.distributed"):
        assert not any(m.startswith("workbench.diagnosis") for m in loaded), f"{package} imports workbench.diagnosis"
    if package == "workbench.engine":
        assert not any(m.startswith(("workbench.ui", "workbench.serve", "workbench.cli")) for m in loaded)


def _imported_names(package: str) -> dict[str, set[str]]:
    """Every module a package's source imports, at any depth of its code (function-level imports too), by file."""
    import ast
    from pathlib import Path

    root = Path(workbench.__file__).parent.parent
    out = {}
    for path in (root / package.replace(".", "/")).rglob("*.py"):
        here = ".".join(path.relative_to(root).with_suffix("").parts)
        parts = here.split(".")[:-1]  # the package a relative import starts from
        names = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = parts[: len(parts) - node.level + 1] if node.level else []
                names.add(".".join(base + ([node.module] if node.module else [])))
        out[str(path.relative_to(root))] = names
    return out


def test_the_engine_source_never_imports_an_instrument_or_a_view():
    """Also the imports inside functions, which an import-time check does not see."""
    for path, names in _imported_names("workbench.engine").items():
        bad = {n for n in names if n.startswith(("workbench.diagnosis", "workbench.ui", "ipywidgets"))}
        assert not bad, f"{path} imports {bad}"
