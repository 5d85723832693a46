"""workbench/ui's files are named by role: ``<name>_panel.py`` a panel (widgets), ``<panel>_<part>.py`` a part of one
(widgets), and every other module imports no widget library (the models and helpers any view can reuse)."""

from __future__ import annotations

import ast
from pathlib import Path

import workbench.ui

UI = Path(workbench.ui.__file__).parent
WIDGET_LIBRARIES = ("ipywidgets", "anywidget", "plotly", "traitlets")


def imports_widgets(path: Path) -> bool:
    """Whether the module imports a widget library anywhere (function-level imports too)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom) and not node.level
            else []
        )
        if any(n.split(".")[0] in WIDGET_LIBRARIES for n in names):
            return True
    return False


# the models a view reads (and the magics, which show panels only through them): never a widget
WIDGET_FREE = (
    "run_state",
    "run_log",
    "run_poller",
    "config_form",
    "precision_compare",
    "drawing",
    "view_helpers",
    "lab_settings",
    "magics",
)


def test_a_module_with_widgets_is_a_panel_or_a_part_of_one_and_a_panel_has_widgets():
    modules = {p.stem: p for p in UI.glob("*.py") if p.stem != "__init__"}
    panels = [name[: -len("_panel")] for name in modules if name.endswith("_panel")]
    for name, path in sorted(modules.items()):
        if name.endswith("_panel"):
            assert imports_widgets(path), f"ui/{name}.py is named a panel and has no widgets"
        elif not any(name.startswith(f"{panel}_") for panel in panels):
            assert not imports_widgets(path), (
                f"ui/{name}.py imports a widget library: name it *_panel or <panel>_<part>"
            )
    for name in WIDGET_FREE:
        assert not imports_widgets(modules[name]), f"ui/{name}.py is a model: it imports no widget library"
