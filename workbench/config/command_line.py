"""A run configuration written back as the ``workbench train`` command line that reproduces it.

The inverse of ``flags.overrides_from_args``: one ``--section.field VALUE`` flag per value that
differs from the schema default, each value quoted so the shell and the flag parser read it back as is.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

import yaml

from .loading import config_to_dict
from .schema import RunConfig, leaf_fields

_MISSING = object()


def _dotted(data: Mapping, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(data, Mapping) or part not in data:
            return _MISSING
        data = data[part]
    return data


def flag_value(value: Any) -> str:
    """A config value as one shell word that the CLI parses back to the same value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return shlex.quote(yaml.safe_dump(value, default_flow_style=True, width=10_000).strip())
    return shlex.quote(str(value))


def changed_settings(config: RunConfig | Mapping) -> dict[str, Any]:
    """{dotted path: value} of every leaf of ``config`` (a RunConfig or a partial config dict) that differs from its
    default, in schema order; leaves a partial dict lacks are left out."""
    data = config_to_dict(config) if isinstance(config, RunConfig) else config
    defaults = config_to_dict(RunConfig())
    changed = {}
    for path, _ in leaf_fields(RunConfig):
        value = _dotted(data, path)
        if value is not _MISSING and value != _dotted(defaults, path):
            changed[path] = value
    return changed


def command_line(config: RunConfig | Mapping, command: str = "workbench train", multiline: bool = True) -> str:
    """``command`` with a flag for every leaf of ``config`` (a RunConfig or a partial config dict) that
    differs from its default; leaves a partial dict lacks are left at their defaults."""
    parts = [command] + [f"--{path} {flag_value(value)}" for path, value in changed_settings(config).items()]
    return (" \\\n    " if multiline else " ").join(parts)
