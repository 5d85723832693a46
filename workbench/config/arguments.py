"""Argument types for paths the user names on the command line: a missing directory is an argparse error
(exit code 2) that says so, before any command runs (a run directory: ``workbench.runs.existing_run_dir``)."""

from __future__ import annotations

import argparse
from pathlib import Path


class CommandInputError(ValueError):
    """A command-line input that names nothing usable (exit code 2)."""


def existing_directory(value: str) -> Path:
    path = Path(value)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{value!r} does not exist")
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{value!r} is a file, not a directory")
    return path
