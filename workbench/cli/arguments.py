"""Argument types for paths the user names on the command line: a missing run or directory is an
argparse error (exit code 2) that says so, before any command runs."""
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


def existing_run_dir(value: str) -> Path:
    """A run directory: one that holds the run's config.json or events.jsonl."""
    path = existing_directory(value)
    if not ((path / "config.json").is_file() or (path / "events.jsonl").is_file()):
        raise argparse.ArgumentTypeError(f"{value!r} is not a run directory (it holds no config.json or events.jsonl)")
    return path
