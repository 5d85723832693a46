"""The command lines of the docs, as a user would type them: read from a page's fenced ``bash`` blocks, each split into
the commands it runs, the docs' notation expanded, and parsed against the parser of the program it calls.

Reusable by any test of a page (``tests/docs/test_commands.py`` holds README.md and the guides to it):

    for cmd in page_commands(REPO / "docs/training.md"):
        cmd.page, cmd.line, cmd.text, cmd.argv       # where it is, as written, as the shell would split it

The docs' notation, read as a user reads it:

- ``[--follow]`` and ``[NAME ...]``: optional parts (kept: the longest form is checked);
- ``tensorboard|csv``: alternatives (the first is checked; ``a | b`` with spaces is a pipe: its first command);
- ``...``: "and the rest" (dropped); ``FILE``, ``runs/NAME``, ``URL``, ``<time>``, ``$SFT``: placeholders (a word
  the user replaces, passed to the parser as written; ``placeholders(cmd)`` lists them);
- ``a && b``, ``a; b``: two commands; ``cmd &``: run in the background (the command is ``cmd``); ``X=1 cmd``: an
  environment setting (dropped); ``for v in A B; do cmd $v; done``: ``cmd A``; ``# ...``: a comment; a line ending in
  ``\\`` continues on the next.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import runpy
import shlex
from dataclasses import dataclass
from pathlib import Path

FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)
SHELL_LANGS = ("bash", "sh", "shell", "console")
QUOTED = re.compile(r"""('[^']*'|"(?:\\.|[^"\\])*")""")
ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=\S*$")
# a placeholder: an upper-case word (NAME, FILE, URL, ID2, TASK_ID, AGENT; a lone letter as a path's part: runs/A),
# <...>, $VAR, or a path holding one
PLACEHOLDER = re.compile(r"(?<![a-z0-9-])[A-Z][A-Z0-9_]+(?![a-z])|(?:^|/)[A-Z](?:/|$)|<[^>]+>|\$\{?[A-Za-z_]")


@dataclass(frozen=True)
class DocCommand:
    page: str  # the page, relative to the repository (or as given)
    line: int  # the line of the page the command starts on
    text: str  # the command as written (continuation lines joined, the comment left out)
    argv: tuple[str, ...]  # the command as the shell splits it, the notation expanded (a redirect left out)
    stdout: str | None = None  # the file a ``> FILE`` redirect writes the output to

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.text}"


def fenced_blocks(text: str, langs=SHELL_LANGS) -> list[tuple[int, str]]:
    """(line of the block's first line, the block's text) of each fenced block in one of ``langs``."""
    return [(text.count("\n", 0, m.start(2)) + 1, m.group(2)) for m in FENCE.finditer(text) if m.group(1) in langs]


def page_commands(path: Path, root: Path | None = None) -> list[DocCommand]:
    """Every command of ``path``'s fenced shell blocks, in order."""
    text = Path(path).read_text(encoding="utf-8")
    name = str(Path(path).relative_to(root)) if root else str(path)
    out = []
    for first, block in fenced_blocks(text):
        for line, statement in _statements(block, first):
            for part, argv in _commands(statement):
                stdout = argv[argv.index(">") + 1] if ">" in argv[:-1] else None
                argv = argv[: argv.index(">")] if ">" in argv else argv
                out.append(DocCommand(name, line, part, tuple(argv), stdout))
    return out


def _statements(block: str, first: int):
    """(line, text) of each logical line: continuations joined, comments and blank lines left out."""
    pending, start = "", first
    for i, raw in enumerate(block.splitlines()):
        line = _strip_comment(raw).rstrip()
        if not pending:
            start = first + i
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        statement = (pending + line).strip()
        pending = ""
        if statement:
            yield start, statement


def _unquoted(text: str, change) -> str:
    """``text`` with ``change`` applied to its parts outside quotes."""
    return "".join(part if QUOTED.fullmatch(part) else change(part) for part in QUOTED.split(text))


def _strip_comment(line: str) -> str:
    parts = QUOTED.split(line)
    for i, part in enumerate(parts):
        if not QUOTED.fullmatch(part) and (m := re.search(r"(^|\s)#", part)):
            return "".join(parts[:i]) + part[: m.start()]
    return line


def _expand_notation(part: str) -> str:
    part = re.sub(r"(?<=[^\s|])(\|[^\s|&;]+)+", "", part)  # tensorboard|csv -> tensorboard
    part = re.sub(r"(^|\s)\[", r"\1", part)  # [--follow] -> --follow
    part = re.sub(r"\]+(?=\s|$)", "", part)
    return re.sub(r"(^|\s)\.\.\.(?=\s|$)", r"\1", part)  # ... -> (nothing)


def _commands(statement: str):
    """(text, argv) of each command a logical line runs (of a pipeline, the first: the others read its output)."""
    loop = re.fullmatch(r"for (\w+) in ([^;]+); do (.*?);? done", statement)
    if loop:  # the loop's body with its first value
        var, values, body = loop.groups()
        statement = re.sub(rf"\${{?{var}\b}}?", values.split()[0], body)
    marked = _unquoted(statement, lambda s: re.sub(r"\s\|\s[^\0]*", "", re.sub(r"&&|\|\||;|&\s*$", "\0", s)))
    for text in marked.split("\0"):
        argv = shlex.split(_unquoted(text.strip(), _expand_notation))
        while argv and ENV_ASSIGNMENT.match(argv[0]):
            argv = argv[1:]
        if argv:
            yield text.strip(), argv


def is_placeholder(arg: str) -> bool:
    """Whether the user is to replace ``arg`` (NAME, runs/NAME, URL, <time>, $SFT, ...)."""
    return bool(PLACEHOLDER.search(arg))


def placeholders(cmd: DocCommand) -> list[str]:
    """The arguments of ``cmd`` the user is to replace."""
    return [a for a in cmd.argv if is_placeholder(a)]


# ---- parsing against the program's own parser


class Parsed(Exception):
    """Raised by a parser once the command line parsed: the program's own code never runs."""

    def __init__(self, namespace):
        super().__init__("parsed")
        self.namespace = namespace


@contextlib.contextmanager
def parse_only(lenient_types=("existing",)):
    """Within: any ``argparse`` parser stops right after a successful ``parse_args`` (raising ``Parsed``), and an
    argument whose ``type`` checks that a path exists (its name starts with one of ``lenient_types``) takes the
    value as written (a page names the runs and files its earlier steps create): the context's value, a list, gets
    each such value, for the caller to check."""
    parse_args, get_value = argparse.ArgumentParser.parse_args, argparse.ArgumentParser._get_value

    def stop_after_parsing(self, args=None, namespace=None):
        raise Parsed(parse_args(self, args, namespace))

    def value(self, action, arg_string):
        name = getattr(action.type, "__name__", "")
        if any(name.startswith(prefix) for prefix in lenient_types):
            lenient.append(arg_string)
            return arg_string
        return get_value(self, action, arg_string)

    lenient: list[str] = []
    argparse.ArgumentParser.parse_args, argparse.ArgumentParser._get_value = stop_after_parsing, value
    try:
        yield lenient
    finally:
        argparse.ArgumentParser.parse_args, argparse.ArgumentParser._get_value = parse_args, get_value


def parse_command_line(run, args: list[str]):
    """Parse ``args`` with the parser ``run(args)`` builds and parses with, without running the program: (the
    namespace or, when the parser refused them, its message; the values of path arguments taken as written)."""
    err = io.StringIO()
    with parse_only() as lenient:
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                run(args)
        except Parsed as done:
            return done.namespace, lenient
        except SystemExit as exit_:
            if exit_.code == 0:  # --help
                return argparse.Namespace(help=True), lenient
            return err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else f"exit {exit_.code}", lenient
    return "the program ran without parsing a command line", lenient


def run_module_main(module: str):
    """``run(args)`` for ``parse_command_line``: ``python -m MODULE ARGS`` (the module run as ``__main__``)."""
    import sys

    def run(args):
        argv, sys.argv = sys.argv, [module, *args]
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=False)
        finally:
            sys.argv = argv

    return run
