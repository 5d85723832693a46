"""Each package imported alone (in a fresh child of an interpreter that loaded only third-party libraries): it imports
on its own, the engine loads no instrument (workbench.diagnosis is composed at the entry points) and nothing but
workbench.ui loads ipywidgets. The layer order itself is checked statically against docs/architecture.md in
tests/test_architecture.py."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import pytest

import workbench

PACKAGES = sorted(m.name for m in pkgutil.iter_modules(workbench.__path__, "workbench.") if m.ispkg)
# One interpreter loads the heavy third-party libraries every package shares (torch alone is ~2 s a start), then
# forks a child per package that imports it and reports what it loaded: each package still imports alone (no
# workbench module and no ipywidgets is loaded before the fork), for one interpreter start instead of 22.
PROBE = """
import importlib, json, os, sys
import numpy, pydantic, torch, transformers, transformers.modeling_utils, peft  # noqa: F401 (preloaded: not ours)
assert not [m for m in sys.modules if m.startswith(("workbench", "ipywidgets"))]
for package in sys.argv[1:]:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            importlib.import_module(package)
            out = {"loaded": sorted(m for m in sys.modules if m.startswith(("workbench", "ipywidgets")))}
        except BaseException as e:
            import traceback
            out = {"error": traceback.format_exc()[-3000:]}
        os.write(write, json.dumps(out).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        print(json.dumps({package: json.loads(f.read())}), flush=True)
    os.waitpid(pid, 0)
"""


def _probe() -> dict[str, dict]:
    out = subprocess.run([sys.executable, "-c", PROBE, *PACKAGES], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"the import probe failed:\n{out.stderr[-3000:]}"
    return {k: v for line in out.stdout.splitlines() if line.startswith("{") for k, v in json.loads(line).items()}


@pytest.fixture(scope="module")
def loaded_by(tmp_path_factory, worker_id) -> dict[str, dict]:
    if worker_id == "master":  # one process: probe here
        return _probe()
    # pytest-xdist workers share this session's temporary root: the first probes, the other reads its answer
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp().parent / "import-probe.json"
    with FileLock(f"{shared}.lock"):
        if not shared.is_file():
            shared.write_text(json.dumps(_probe()), encoding="utf-8")
        return json.loads(shared.read_text(encoding="utf-8"))


def test_the_packages_are_the_ones_the_layering_names():
    assert {"workbench.engine", "workbench.diagnosis", "workbench.precision", "workbench.ui"} <= set(PACKAGES)


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_imports_alone_and_respects_the_layers(loaded_by, package):
    assert "error" not in loaded_by[package], f"import {package} alone failed:\n{loaded_by[package]['error']}"
    loaded = set(loaded_by[package]["loaded"])
    if package != "workbench.ui":
        assert not any(m.startswith("ipywidgets") for m in loaded), f"{package} imports ipywidgets"
    if package in (
        "workbench.engine",
        "workbench.precision",
        "workbench.config",
        "workbench.events",
        "workbench.models",
        "workbench.data",
        "workbench.plan",
        "workbench.distributed",
    ):
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


# Module paths renamed so that one word names one thing (docs/architecture.md's glossary): none is kept as an alias,
# so code that still uses one fails here and at its own import instead of reading a second name for the same thing.
RENAMED = {
    "workbench.phone.runtime": "workbench.phone.conversation",
    "workbench.serve.runtime": "workbench.serve.registry",
    "workbench.serve.engine": "workbench.serve.batcher",
    "workbench.serve.engines": "workbench.serve.backends",
    "workbench.serve.generate": "workbench.serve.collect",
    "workbench.precision.policy_loss": "workbench.engine.grpo_loss",
    "workbench.plan.state": "workbench.plan.model_state",
    "workbench.eval.tasks": "workbench.eval.task_protocol",
    # ui files named by role: *_panel a panel, <panel>_<part> a part of one, the rest widget-free (tests/ui/test_roles.py)
    "workbench.ui.monitor": "workbench.ui.monitor_panel",
    "workbench.ui.episodes": "workbench.ui.episodes_panel",
    "workbench.ui.recorder": "workbench.ui.recorder_panel",
    "workbench.ui.precision_compare_view": "workbench.ui.precision_compare_panel",
    "workbench.ui.dashboard": "workbench.ui.dashboard_panel",
    "workbench.ui.export_section": "workbench.ui.runs_export",
    "workbench.ui.export_chat": "workbench.ui.chat_exports",
}


@pytest.mark.parametrize("old", sorted(RENAMED))
def test_a_renamed_module_path_no_longer_imports_and_its_new_one_does(old):
    import importlib

    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)
    importlib.import_module(RENAMED[old])
