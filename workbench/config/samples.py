"""Where the sample data lives: ``data_samples/`` at the top of a source checkout, shipped inside the
wheel as ``workbench/data_samples`` (setup.py maps the one folder there, so git holds one copy).

Paths that start with ``data_samples/`` (the config defaults, the README, the notebooks) resolve
against the working directory first and then against these samples, so they work from any
directory and from a non-editable install.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

PREFIX = "data_samples"


def samples_dir() -> Path:
    """The sample data folder of this installation."""
    packaged = Path(str(resources.files("workbench"))) / PREFIX  # a wheel install
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / PREFIX  # a source checkout (editable install)


def sample_path(*parts: str) -> Path:
    return samples_dir().joinpath(*parts)


def resolve_sample_path(value: str) -> str:
    """``value`` unchanged if it exists or is not under ``data_samples/``; else the packaged sample's path."""
    path = Path(value)
    if path.exists() or path.is_absolute() or not path.parts or path.parts[0] != PREFIX:
        return value
    packaged = sample_path(*path.parts[1:])
    return str(packaged) if packaged.exists() else value
