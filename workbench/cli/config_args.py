"""CLI flags generated from the RunConfig schema: one ``--section.field`` per leaf, help from its description."""
from __future__ import annotations

import argparse
import typing
from typing import Any

from ..config import RunConfig, Section, leaf_fields, parse_value


def _is_plain_str(annotation: Any) -> bool:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    return annotation is str or (typing.get_origin(annotation) is typing.Union and args == [str])


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    for section, section_field in RunConfig.model_fields.items():
        ann = section_field.annotation
        if isinstance(ann, type) and issubclass(ann, Section):
            group = parser.add_argument_group(f"{section} ({ann.__name__})")
            leaves = leaf_fields(ann, f"{section}.")
        else:
            group, leaves = parser, [(section, section_field)]
        for path, field in leaves:
            default = field.default
            group.add_argument(f"--{path}", dest=f"cfg:{path}", default=argparse.SUPPRESS, metavar="VALUE",
                               help=f"{field.description or ''} (default: {default!r})".replace("%", "%%"))


def overrides_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """Dotted overrides given on the command line, typed: strings stay strings, other values parse as YAML."""
    fields = dict(leaf_fields(RunConfig))
    out = {}
    for key, raw in vars(args).items():
        if not key.startswith("cfg:"):
            continue
        path = key[4:]
        ann = fields[path].annotation
        out[path] = None if raw == "null" and not ann is str else (raw if _is_plain_str(ann) else parse_value(raw))
    return out
