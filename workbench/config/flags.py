"""CLI flags generated from a configuration schema (RunConfig unless told): one ``--section.field`` per leaf,
help from its description, values validated by the schema afterwards (so every bad flag is reported at once)."""

from __future__ import annotations

import argparse
import typing
from typing import Any

from .loading import parse_value
from .schema import RunConfig, Section, cli_flag, leaf_fields, optional_parts


def _unannotated(annotation: Any) -> Any:
    return typing.get_args(annotation)[0] if typing.get_origin(annotation) is typing.Annotated else annotation


def _is_plain_str(annotation: Any) -> bool:
    members, _ = optional_parts(_unannotated(annotation))
    return [_unannotated(a) for a in members] == [str]


def add_config_arguments(
    parser: argparse.ArgumentParser, model: type[Section] = RunConfig, *, dashes: bool = False
) -> None:
    """Add a flag per leaf of ``model``; ``dashes`` spells ``max_batch`` as ``--max-batch``."""
    for section, section_field in model.model_fields.items():
        ann = section_field.annotation
        if isinstance(ann, type) and issubclass(ann, Section):
            group = parser.add_argument_group(f"{section} ({ann.__name__})")
            leaves = leaf_fields(ann, f"{section}.")
        else:
            group, leaves = parser, [(section, section_field)]
        for path, field in leaves:
            flag = cli_flag(field)
            name = flag.name or path
            default = field.get_default(call_default_factory=True)
            choices = typing.get_args(field.annotation) if typing.get_origin(field.annotation) is typing.Literal else ()
            help_text = (
                f"{field.description or ''}{' One of: ' + ', '.join(map(str, choices)) + '.' if choices else ''}"
                f" ({'repeatable' if flag.repeat else f'default: {default!r}'})"
            )
            group.add_argument(
                f"--{name.replace('_', '-') if dashes else name}",
                dest=f"cfg:{path}",
                default=argparse.SUPPRESS,
                metavar=flag.metavar,
                action="append" if flag.repeat else "store",
                help=help_text.replace("%", "%%"),
            )
    for old in model.renamed_keys:  # taken (not listed) so that validation names the new key with the other problems
        parser.add_argument(
            f"--{old.replace('_', '-') if dashes else old}",
            dest=f"cfg:{old}",
            default=argparse.SUPPRESS,
            help=argparse.SUPPRESS,
        )


def overrides_from_args(args: argparse.Namespace, model: type[Section] = RunConfig) -> dict[str, Any]:
    """Dotted overrides given on the command line, typed: strings stay strings, other values parse as YAML,
    a repeatable flag gives the list of its raw values."""
    fields = dict(leaf_fields(model))
    out = {}
    for key, raw in vars(args).items():
        if not key.startswith("cfg:"):
            continue
        path = key[4:]
        if path in model.renamed_keys:
            out[path] = parse_value(raw)
            continue
        field = fields[path]
        ann = field.annotation
        if cli_flag(field).repeat:
            out[path] = list(raw)
        else:
            out[path] = None if raw == "null" and ann is not str else (raw if _is_plain_str(ann) else parse_value(raw))
    return out
