"""The command lines of README.md and the guides work when a user types them.

Each page's fenced ``bash`` blocks are read as commands (``tests/docs/commands.py``) and followed in order in a
folder of their own, as a user in a fresh clone would (``data_samples/`` there, the user's own training files given
as ``my_train.jsonl`` / ``my_heldout.jsonl``):

- every ``workbench`` and ``python -m workbench...`` command is parsed by the program's own parser; a ``workbench
  train`` line's configuration is resolved too (a bad value or a missing ``--config`` file fails); every run
  directory, model or file a line names exists, is a placeholder (``runs/NAME``), the user's own, or is made by an
  earlier line of the page (``--output.run_name``, ``--out``, ``recipes copy``, ``> FILE``);
- the fast ones also run for real (``FAST``: ``--help``, ``recipes``, ``env``, ``data check``, ``--print-config``,
  ...: a few seconds for all pages); the slower ones (``SLOW``: ``plan``, ``fact-check``, the oracle's episodes) run
  in ``-m slow`` (CI's slow step); the rest (training for minutes to hours, a server, a GPU, a phone) is parsed only;
- ``pytest`` lines name test files that exist and registered markers; ``bash scripts/setup.sh``, ``.ci/run`` and
  ``scripts/nightly.sh`` lines, flags and steps they have;
- any other program is one of ``EXTERNAL`` (another project's command, said so on the page).

docs/autoglm_phone_9b.md has its own test. The README's two set-up commands are what CI runs (``.ci/run``).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO, SAMPLES
from tests.docs.commands import (
    DocCommand,
    is_placeholder,
    page_commands,
    parse_command_line,
    placeholders,
    run_module_main,
)

OWN_TEST = {"docs/autoglm_phone_9b.md": "tests/docs/test_autoglm_phone_9b.py"}
PAGES = [
    p
    for p in [
        "README.md",
        *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md")),
        "extensions/README.md",
        "data_samples/README.md",
        *sorted(str(p.relative_to(REPO)) for p in SAMPLES.glob("*/README.md")),
    ]
    if p not in OWN_TEST
]
# The user's own files, as a page names them: given (a copy of a sample) or only named (the command is parsed)
USER_FILES = {
    "my_train.jsonl": SAMPLES / "identity" / "train.jsonl",
    "my_heldout.jsonl": SAMPLES / "identity" / "heldout.jsonl",
}
USER_NAMED = {"my_rows.jsonl", "tasks.jsonl", "serve.yaml", "demonstrations", "heldout-demonstrations"}
# Other programs a page may show, and whose they are
EXTERNAL = {
    "main.py": "Open-AutoGLM's runner, in its checkout",
    "pip": "pip",
    "apt-get": "Debian's",
    "tensorboard": "TensorBoard's viewer",
    "source": "the shell's",
    "jupyter": "JupyterLab's",
}
OUTPUT_FLAGS = ("--out",)
PATH_FLAGS = ("--config", "--deepspeed", "--data.train", "--data.eval", "--model.source")


def program(cmd: DocCommand) -> tuple[str, list[str]]:
    """(which program, its arguments): "workbench", a module "workbench.bench.X", "pytest", "script PATH" (bash),
    "external"."""
    argv = list(cmd.argv)
    name = Path(argv[0]).name
    if name == "workbench":
        return "workbench", argv[1:]
    if re.fullmatch(r"python3?", name) and argv[1:2] == ["-m"]:
        module = argv[2]
        return ("workbench" if module == "workbench" else module), argv[3:]
    if argv[0] == "bash" and len(argv) > 1:
        return f"script {argv[1]}", argv[2:]
    if (argv[1] if re.fullmatch(r"python3?", name) and len(argv) > 1 else name) in EXTERNAL:
        return "external", argv
    return "unknown", argv


def fast(args: list[str]) -> bool:
    """A ``workbench`` command that runs for real in the default suite (well under a second each)."""
    return (
        "--help" in args
        or args[:1] in (["recipes"], ["env"], ["deepspeed"])
        or args == ["models"]
        or (args[:1] == ["train"] and "--print-config" in args)
        or (args[:2] == ["data", "check"] and "--model" not in args)
        or (args[:1] == ["plan"] and "--inference" in args)
    )


def slow(args: list[str]) -> bool:
    """One that runs for real in ``-m slow`` (seconds to a minute: the 9B's census on the meta device, episodes)."""
    return (
        args[:1] in (["plan"], ["fact-check"])
        or args[:2] in (["data", "check"], ["data", "convert"])
        or (args[:2] in (["agent", "run"], ["agent", "record"]) and "--oracle" in args)
    )


def outputs(args: list[str], cmd: DocCommand) -> set[str]:
    """The paths a workbench command makes (so later lines of the page may name them)."""
    made = {args[i + 1] for i, a in enumerate(args[:-1]) if a in OUTPUT_FLAGS}
    made |= {f"runs/{args[i + 1]}" for i, a in enumerate(args[:-1]) if a == "--output.run_name"}
    if args[:2] in (["recipes", "copy"], ["data", "convert"]) and len(args) > 3:
        made.add(args[3])
    return made | ({cmd.stdout} if cmd.stdout else set())


def inputs(args: list[str], cmd: DocCommand) -> list[str]:
    """The paths a workbench command reads, as named (its outputs left out)."""
    made = outputs(args, cmd)
    return [
        a
        for a in args
        if not a.startswith("-")
        and "://" not in a
        and a not in made
        and ("/" in a or re.search(r"\.(jsonl|json|ya?ml)$", a))
    ]


@contextlib.contextmanager
def working_directory(path: Path):
    here = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(here)


class Page:
    """A page followed in order in ``folder``: what its lines made so far."""

    def __init__(self, folder: Path):
        self.folder, self.made = folder, set()
        (folder / "data_samples").symlink_to(SAMPLES)
        for name, sample in USER_FILES.items():
            shutil.copy(sample, folder / name)

    def known(self, path: str) -> bool:
        """Whether a page may name ``path``: it exists, the user's own, a placeholder, or made by an earlier line."""
        path = path.split("=")[0].rstrip("/")
        return (
            path == "null"
            or (self.folder / path).exists()
            or path in USER_NAMED
            or is_placeholder(path)
            or any(m == path or m.startswith(path + "/") or path.startswith(m + "/") for m in self.made)
        )

    def unknown_paths(self, values) -> list[str]:
        return [v for v in values if not self.known(v)]


def check_workbench(page: Page, cmd: DocCommand, args: list[str], run: bool) -> str | None:
    """Parse (and with ``run``, run) one workbench command; the problem, or None."""
    from workbench.cli.main import _resolved, build_parser, main

    parsed, lenient = parse_command_line(lambda a: build_parser().parse_args(a), args)
    problem = parsed if isinstance(parsed, str) else None
    if problem is None and (unknown := page.unknown_paths(lenient)):
        problem = f"names {unknown}, which no earlier line of the page makes"
    if problem is None and args[:1] == ["train"] and not getattr(parsed, "help", False):
        problem = check_train(page, args, parsed, _resolved)
    page.made |= outputs(args, cmd)
    if problem or not run or placeholders(cmd) or any(not (page.folder / p).exists() for p in inputs(args, cmd)):
        return problem
    out, err = io.StringIO(), io.StringIO()
    with working_directory(page.folder), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(args)
        except SystemExit as exit_:
            code = exit_.code
    if cmd.stdout:
        (page.folder / cmd.stdout).write_text(out.getvalue(), encoding="utf-8")
    return None if code == 0 else f"exit {code}: {(err.getvalue() or out.getvalue()).strip()[-400:]}"


def check_train(page: Page, args: list[str], parsed, resolve) -> str | None:
    """A ``workbench train`` line: every file it names is known, and its configuration resolves."""
    from workbench.config import ConfigError

    named = [
        args[i + 1]
        for i, a in enumerate(args[:-1])
        if a in PATH_FLAGS and (a != "--model.source" or "/" in args[i + 1])
    ]
    if unknown := page.unknown_paths(named):
        return f"names {unknown}, which no earlier line of the page makes"
    if any(not (page.folder / p).exists() for p in named):
        return None  # made by a line that only parses (a training): nothing to resolve against
    try:
        with working_directory(page.folder), contextlib.redirect_stderr(io.StringIO()):  # an import's notes
            resolve(parsed)
    except ConfigError as err:
        return str(err).replace("\n", " ")
    return None


def check_pytest(args: list[str]) -> str | None:
    markers = re.findall(r'^\s*"(\w+):', (REPO / "pyproject.toml").read_text(encoding="utf-8"), re.M)
    marked = " ".join(args[i + 1] for i, a in enumerate(args[:-1]) if a == "-m")
    paths = [a.split("::")[0] for a in args if a.startswith("tests")]
    unknown = set(re.findall(r"\w+", marked)) - set(markers) - {"and", "or", "not"}
    missing = [p for p in paths if not (REPO / p).exists()]
    return f"unknown markers {sorted(unknown)}, missing paths {missing}" if unknown or missing else None


def check_script(path: str, args: list[str]) -> str | None:
    """``bash scripts/setup.sh --flag``, ``bash .ci/run STEP``, ``bash scripts/nightly.sh STEP``: the script exists
    and takes the flag or step."""
    if not (REPO / path).is_file():
        return f"{path}: no such script"
    if path == "scripts/setup.sh":
        script = (REPO / path).read_text(encoding="utf-8")
        return next((f"{path} has no {a}" for a in args if f'"{a}"' not in script), None)
    run = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    steps = {
        "nightly",
        *(
            s
            for name in ("CI_STEPS", "NIGHTLY_STEPS")
            for s in re.search(rf'^{name}="([\w ]+)"$', run, re.M).group(1).split()
        ),
    }
    return next((f"{path}: no step {a} ({sorted(steps)})" for a in args if a not in steps), None)


def check_page(page_name: str, tmp_path: Path, runnable) -> list[str]:
    page, problems = Page(tmp_path), []
    for cmd in page_commands(REPO / page_name, REPO):
        which, args = program(cmd)
        if which == "workbench":
            problem = check_workbench(page, cmd, args, runnable(args))
        elif which.startswith("workbench."):
            parsed, lenient = parse_command_line(run_module_main(which), args)
            problem = (
                parsed
                if isinstance(parsed, str)
                else (
                    f"names {unknown}, which no earlier line of the page makes"
                    if (unknown := page.unknown_paths(lenient))
                    else None
                )
            )
        elif which == "pytest":
            problem = check_pytest(args)
        elif which.startswith("script "):
            problem = check_script(which.split()[1], args)
        elif which == "external":
            problem = None
        else:
            problem = f"{cmd.argv[0]}: not a workbench command nor one of {sorted(EXTERNAL)}"
        if problem:
            problems.append(f"{cmd}\n    -> {problem}")
    return problems


@pytest.mark.parametrize("page_name", PAGES)
def test_every_command_line_of_the_page_parses_and_the_fast_ones_run(page_name, tmp_path):
    problems = check_page(page_name, tmp_path, fast)
    assert not problems, f"{page_name}: {len(problems)} command line(s) that fail:\n" + "\n".join(problems)


@pytest.mark.slow
@pytest.mark.parametrize(
    "page_name",
    [
        p
        for p in PAGES
        if any(
            program(c)[0] == "workbench" and slow(program(c)[1]) and not fast(program(c)[1]) and not placeholders(c)
            for c in page_commands(REPO / p, REPO)
        )
    ],
)
def test_the_slower_command_lines_of_the_page_run(page_name, tmp_path):
    problems = check_page(page_name, tmp_path, lambda args: fast(args) or slow(args))
    assert not problems, f"{page_name}: {len(problems)} command line(s) that fail:\n" + "\n".join(problems)


def test_the_readme_opens_with_the_two_set_up_commands_ci_runs():
    """The README's first lines are its quick start, and CI's suite step runs the second as written (the first's
    set-up is tests/config/test_packages.py's and the demo CI's demo step: tests/test_demo.py)."""
    first = page_commands(REPO / "README.md", REPO)[:4]
    assert [c.text for c in first[::2]] == ["bash scripts/setup.sh", "bash scripts/setup.sh --test"]
    assert [c.argv for c in first[1::2]] == [
        (".venv/bin/workbench", "demo"),
        (".venv/bin/python", "-m", "pytest", "-n", "2"),
    ]
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert readme.index("```bash") < readme.index("\n## "), "the set-up commands come before the first section"
    assert "bash scripts/setup.sh --test && .venv/bin/python -m pytest -n 2" in (REPO / ".ci" / "run").read_text()
