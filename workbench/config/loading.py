"""Build a RunConfig from files, dicts and dotted overrides, reporting every problem at once."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from .files import UnreadableFile, read_text
from .schema import RunConfig, Section


class ConfigError(ValueError):
    """All problems of a configuration, each as ``field.path: message``."""

    def __init__(self, problems: list[tuple[str, str]], what: str = "run configuration"):
        self.problems = problems
        lines = "\n".join(f"  - {path or '(top level)'}: {msg}" for path, msg in problems)
        super().__init__(f"{len(problems)} problem(s) in the {what}:\n{lines}")


def _is_field_name(part) -> bool:
    # pydantic adds union-member tags ("literal['all-linear']", "list[str]") and "[key]" (a mapping's key
    # was wrong) to a location; mapping keys themselves may be any text ("adapters.my-run")
    return isinstance(part, int) or not (str(part).endswith("]") and "[" in str(part))


def _field_path(prefix: str, loc) -> str:
    """``precision.module_rules[0].pattern``: list indices in brackets, as the section checks write them."""
    path = prefix
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif _is_field_name(part):
            path = f"{path}.{part}" if path else str(part)
    return path


def _pydantic_problems(
    err: ValidationError, prefix: str = "", model: type[Section] = RunConfig
) -> list[tuple[str, str]]:
    messages: dict[str, list[str]] = {}
    inputs: dict[str, str] = {}
    for e in err.errors():
        path = _field_path(prefix, e["loc"])
        if e["type"] == "extra_forbidden":
            new = model.renamed_keys.get(path)
            messages.setdefault(path, []).append(
                f"renamed: use {new}"
                if new
                else f"unknown key (check the spelling; `{model.help_command}` lists every key)"
            )
            continue
        messages.setdefault(path, []).append(e["msg"].removeprefix("Value error, "))
        if "input" in e and e["type"] != "missing" and repr(e["input"]) not in e["msg"]:
            inputs[path] = f" (got {e['input']!r})"
    # One line per field: the alternatives of a union read "A, or B (got X)".
    return [(path, ", or ".join(msgs) + inputs.get(path, "")) for path, msgs in messages.items()]


def _section_problems(cfg: Section, path: str) -> list[tuple[str, str]]:
    out = list(cfg.problems(path))
    for name in type(cfg).model_fields:
        value = getattr(cfg, name)
        if isinstance(value, Section):
            out += _section_problems(value, f"{path}.{name}" if path else name)
    return out


def config_from_dict(data: Mapping[str, Any], model: type[Section] = RunConfig, *, checks: bool = True):
    """Validate ``data`` into ``model`` (a RunConfig unless told) or raise ConfigError listing every problem.

    ``checks=False`` validates the schema only, skipping the sections' cross-field and environment checks
    (files that must exist, visible GPUs): for a configuration saved elsewhere that is read, not run."""
    what = model.config_title
    if not isinstance(data, Mapping):
        raise ConfigError([("", f"a configuration is a mapping of sections, got {type(data).__name__}")], what)
    try:
        cfg = model.model_validate(dict(data))
    except ValidationError as err:
        problems = _pydantic_problems(err, model=model)
        # Sections that parsed on their own still get their cross-field checks, so one run of the
        # validator shows everything wrong rather than one layer at a time.
        for name, field in model.model_fields.items() if checks else ():
            ann = field.annotation
            if name in data and isinstance(ann, type) and issubclass(ann, Section):
                try:
                    problems += ann.model_validate(data[name]).problems(name)
                except (ValidationError, TypeError):
                    pass  # the section's own errors are in ``problems`` already, from the whole model's validation
        raise ConfigError(problems, what) from None
    problems = _section_problems(cfg, "") if checks else []
    if problems:
        raise ConfigError(problems, what)
    return cfg


def parse_value(text: str) -> Any:
    """A CLI value as YAML scalar/list: '3' -> 3, 'null' -> None, '[q_proj,v_proj]' -> list."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def apply_overrides(data: Mapping[str, Any], overrides: Iterable[str] | Mapping[str, Any]) -> dict:
    """Return a copy of ``data`` with dotted overrides (``precision.mode=fp16``) applied."""
    out = copy.deepcopy(dict(data))
    items = overrides.items() if isinstance(overrides, Mapping) else (split_override(o) for o in overrides)
    for key, value in items:
        node = out
        *parents, leaf = key.split(".")
        for p in parents:
            child = node.get(p)
            if not isinstance(child, dict):
                child = {} if child is None else child
                node[p] = child
            node = child
        node[leaf] = value
    return out


def merge_config(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict:
    """``top`` (a partial configuration: a file's sections) layered over ``base``: sections merge key by key,
    a value in ``top`` replaces the one in ``base``."""
    out = copy.deepcopy(dict(base))
    for key, value in top.items():
        both = isinstance(value, Mapping) and isinstance(out.get(key), Mapping)
        out[key] = merge_config(out[key], value) if both else copy.deepcopy(value)
    return out


def split_override(text: str) -> tuple[str, Any]:
    """``"precision.mode=fp16"`` -> ``("precision.mode", "fp16")``, the value parsed as YAML."""
    if "=" not in text:
        raise ConfigError([(text, "an override is key=value, e.g. precision.mode=fp16")])
    key, value = text.split("=", 1)
    return key.strip(), parse_value(value)


def read_mapping_file(path: str | Path, option: str, what: str = "a mapping of sections") -> dict:
    """A JSON (``.json``) or YAML file holding a mapping; every way it can be unreadable is a
    ConfigError naming ``option`` and the file (and the line)."""
    path = Path(path)
    try:
        text = read_text(path)
    except UnreadableFile as err:
        raise ConfigError([(option, str(err))]) from None
    return mapping_from_text(text, str(path), option, what, is_json=path.suffix == ".json")


def mapping_from_text(
    text: str, source: str, option: str, what: str = "a mapping of sections", *, is_json: bool = False
) -> dict:
    """The mapping a YAML (or JSON) text holds, e.g. a notebook cell's; ``source`` names it in the ConfigError."""
    try:
        data = json.loads(text) if is_json else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as err:
        raise ConfigError([(option, f"{source} is not valid {'JSON' if is_json else 'YAML'}: {err}")]) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError([(option, f"{source} must hold {what}, not {type(data).__name__}")])
    return data


def read_config_file(path: str | Path) -> dict:
    return read_mapping_file(path, "--config")


def load_config(path: str | Path | None = None, overrides: Iterable[str] | Mapping[str, Any] = ()) -> RunConfig:
    """Read YAML/JSON (optional), apply dotted overrides, validate."""
    data = read_config_file(path) if path else {}
    return config_from_dict(apply_overrides(data, overrides))


def with_renamed_keys(data: Mapping[str, Any], model: type[Section] = RunConfig) -> dict:
    """A configuration this package saved before some of ``model``'s keys were renamed (a run directory's
    config.json), under the new names: what reading an older run takes. A user's file or flags are not read through
    this: an old key there is an error naming the new one."""
    out = copy.deepcopy(dict(data))
    for old, new in model.renamed_keys.items():
        *parents, leaf = old.split(".")
        node = out
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and leaf in node:
            value = node.pop(leaf)
            out = apply_overrides(out, {new: value})
    return out


def replace(cfg: RunConfig, **dotted: Any) -> RunConfig:
    """A validated copy of ``cfg`` with dotted keys changed: replace(cfg, **{"precision.mode": "bf16"})."""
    return config_from_dict(apply_overrides(cfg.model_dump(), dotted))


def config_to_dict(cfg: BaseModel) -> dict:
    return cfg.model_dump(mode="json")


def flat_fields(d: dict, prefix: str = "") -> dict:
    """A nested config mapping as ``{"section.field": value}`` (the dotted paths errors and overrides use)."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flat_fields(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def save_config(cfg: RunConfig, path: str | Path) -> None:
    Path(path).write_text(json.dumps(config_to_dict(cfg), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
