"""The shape of the code: no function of workbench over 60 statement lines (the project's standard: a longer one does
several jobs, each of which wants a name).

A statement line is a line on which a statement of the function starts, so the count is the same however the formatter
wraps a long call (``ruff format`` puts each argument of a call that does not fit on its own line). The standard was 80
physical lines before the tree was formatted; the longest function then had 55 statement lines, and so it has now."""

from __future__ import annotations

import ast
from pathlib import Path

import workbench

PACKAGE_ROOT = Path(workbench.__file__).parent
MAX_LINES = 60

# Functions still to split, named; the list only shrinks (an entry that is no longer long fails the test below).
BEING_SPLIT: set[str] = set()


def long_functions(root: Path = PACKAGE_ROOT, limit: int = MAX_LINES) -> dict[str, int]:
    """{"path:qualified name": statement lines} of every function (nested and methods included) with more than
    ``limit`` lines on which one of its statements starts."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).as_posix()

        def visit(node: ast.AST, prefix: str) -> None:
            for child in ast.iter_child_nodes(node):
                name = prefix
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    name = f"{prefix}{child.name}"
                    lines = len({n.lineno for n in ast.walk(child) if isinstance(n, ast.stmt) and n is not child})
                    if not isinstance(child, ast.ClassDef) and lines > limit:
                        found[f"{rel}:{name}"] = lines
                    name += "."
                visit(child, name)

        visit(ast.parse(path.read_text(encoding="utf-8")), "")
    return found


def test_no_function_is_over_60_statement_lines():
    long = {name: n for name, n in long_functions().items() if name not in BEING_SPLIT}
    assert not long, f"functions over {MAX_LINES} statement lines (split them into named steps):\n" + "\n".join(
        f"  {name}: {n} lines" for name, n in sorted(long.items())
    )


def test_the_allow_list_names_only_long_functions():
    """An entry whose function was split (or renamed) leaves the list."""
    stale = BEING_SPLIT - set(long_functions())
    assert not stale, f"no longer over {MAX_LINES} lines, drop from BEING_SPLIT: {sorted(stale)}"


def test_the_check_measures_methods_and_nested_functions(tmp_path):
    pkg = tmp_path / "workbench"
    pkg.mkdir()
    body = "\n".join(f"        x{i} = {i}" for i in range(80))
    (pkg / "m.py").write_text(
        f"class C:\n    def long(self):\n{body}\n\n    def short(self):\n        pass\n\n"
        f"def outer():\n    def inner():\n{body}\n"
    )
    wrapped = "\n".join(f"            {i}," for i in range(200))  # one statement over 202 lines: not long
    (pkg / "w.py").write_text(f"def wrapped():\n    return max(\n{wrapped}\n    )\n")
    assert long_functions(pkg, limit=60) == {
        "workbench/m.py:C.long": 80,
        "workbench/m.py:outer": 81,  # inner's def and its 80 statements
        "workbench/m.py:outer.inner": 80,
    }
