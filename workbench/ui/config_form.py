"""The config panel's model: the form's field values, its problems by field, its command line. No widgets.

``ConfigForm`` holds one value per ``RunConfig`` leaf as a form shows it (text for free-text fields,
typed values for choices, switches and numbers), re-validates on every change with
``config_from_dict`` and routes each problem to the field that owns it. A view binds one widget per
``FieldSpec`` to ``form.values`` and draws ``form.field_problems(path)``; the notebook panel is one
such view, a test or a script can drive the form without any.
"""

from __future__ import annotations

import functools
import operator
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel

from ..config import (
    ConfigError,
    RunConfig,
    Section,
    apply_overrides,
    config_from_dict,
    config_to_dict,
    leaf_fields,
    optional_parts,
    read_config_file,
    save_config,
)
from ..config.assemble import AssembledSettings, RunInputs, assemble_settings, process_default
from ..config.command_line import changed_settings, command_line

TYPED_KINDS = ("choice", "bool", "int", "float")  # a form holds these as typed values, the others as text


@dataclass(frozen=True)
class FieldSpec:
    """How a form shows one config leaf. ``kind``: choice | bool | int | float | str (plain text) |
    yaml (free text read as YAML: unions, lists, optional numbers); ``choices`` for choice, or the
    suggestions of a yaml field."""

    path: str
    section: str
    kind: str
    optional: bool
    choices: tuple = ()
    help: str = ""

    @property
    def name(self) -> str:
        return self.path.rsplit(".", 1)[-1]

    @property
    def hint(self) -> str:
        """Placeholder text of a free-text field."""
        if self.kind == "str":
            return "(empty = null)" if self.optional else ""
        options = " / ".join(map(str, self.choices)) + (" or " if self.choices else "") + "a YAML value"
        return ("(empty = null) " if self.optional and not self.choices else "") + options

    def shown(self, value: Any) -> Any:
        """A config value as the form holds it."""
        if self.kind in TYPED_KINDS:
            return value
        if value is None:
            return ""
        if self.kind == "str" or isinstance(value, str):
            return str(value)
        return yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()

    def parsed(self, shown: Any) -> Any:
        """The config value of what the form holds; raises ValueError for a text that is not YAML."""
        if self.kind in TYPED_KINDS:
            return shown
        text = "" if shown is None else str(shown)
        if self.kind == "str":
            return None if self.optional and not text.strip() else text
        if not text.strip():
            return None
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise ValueError(f"not a YAML value: {getattr(err, 'problem', None) or err}") from None
        if isinstance(value, str) and "," in value:  # "q_proj, v_proj" reads as a list
            value = [v.strip() for v in value.split(",") if v.strip()]
        return value


def _literal_choices(ann) -> tuple:
    return typing.get_args(ann) if typing.get_origin(ann) is Literal else ()


def _field_spec(path: str, section: str, info) -> FieldSpec:
    ann = info.annotation
    rest, optional = optional_parts(ann)
    if optional:
        ann = functools.reduce(operator.or_, rest)
    help_text = info.description or ""
    choices = _literal_choices(ann)
    if choices and not optional:
        return FieldSpec(path, section, "choice", False, choices, help_text)
    for kind, typ in (("bool", bool), ("int", int), ("float", float)):
        if ann is typ and not optional:
            return FieldSpec(path, section, kind, False, (), help_text)
    if ann is str:
        return FieldSpec(path, section, "str", optional, (), help_text)
    # e.g. Literal["all-linear"] | list[str], optional numbers: free text read as YAML, the literals suggested
    suggestions = tuple(c for a in typing.get_args(ann) for c in _literal_choices(a))
    return FieldSpec(path, section, "yaml", optional, suggestions, help_text)


def form_sections(model: type[BaseModel] = RunConfig) -> list[tuple[str, list[FieldSpec]]]:
    """[(section, its fields)] in schema order; top-level plain fields go to a 'general' section."""
    out, general = [], []
    for name, info in model.model_fields.items():
        ann = info.annotation
        if isinstance(ann, type) and issubclass(ann, Section):
            out.append((name, [_field_spec(p, name, i) for p, i in leaf_fields(ann, f"{name}.")]))
        else:
            general.append(_field_spec(name, "general", info))
    return out + ([("general", general)] if general else [])


def _set_dotted(d: dict, path: str, value: Any) -> None:
    *parents, leaf = path.split(".")
    for p in parents:
        d = d.setdefault(p, {})
    d[leaf] = value


def _get_dotted(d: Any, path: str) -> Any:
    for p in path.split("."):
        d = d[p]
    return d


class ConfigForm:
    """Field values, the valid config they make (``config``; None while any problem remains) and the
    problems, each ``(field path, reason)`` as the validator names them."""

    def __init__(self, cfg: RunConfig | dict | None = None):
        self.sections = form_sections()
        self.fields: dict[str, FieldSpec] = {f.path: f for _, fs in self.sections for f in fs}
        self.values: dict[str, Any] = {}
        self.config: RunConfig | None = None
        self.problems: list[tuple[str, str]] = []
        self._listeners: list[Callable[[ConfigForm], None]] = []
        self.set_config(cfg if cfg is not None else RunConfig())

    # ---- changing the values --------------------------------------------------------------------
    def set(self, path: str, value: Any) -> RunConfig | None:
        """Set one field, typed (``8``, ``["q_proj"]``) or as the form shows it (``"q_proj, v_proj"``);
        returns the new valid config or None."""
        if path not in self.fields:
            raise KeyError(f"{path!r} is not a config field (fields: section.name, e.g. 'lora.r')")
        self.values[path] = self.fields[path].shown(value)
        self._apply_process_default({path})
        return self.validate()

    def set_config(self, cfg: RunConfig | dict) -> RunConfig | None:
        """Every field from ``cfg`` (a RunConfig or a partial config dict: missing fields take their defaults)."""
        source = cfg if isinstance(cfg, dict) else config_to_dict(cfg)
        defaults = config_to_dict(RunConfig())
        for path, spec in self.fields.items():
            try:
                value = _get_dotted(source, path)
            except (KeyError, TypeError):
                value = _get_dotted(defaults, path)
            self.values[path] = spec.shown(value)
        return self.validate()

    def update(self, overrides: dict[str, Any]) -> RunConfig | None:
        """Set several fields at once ({dotted path: value}), validating once."""
        unknown = sorted(set(overrides) - set(self.fields))
        if unknown:
            raise KeyError(f"not config fields: {', '.join(unknown)}")
        for path, value in overrides.items():
            self.values[path] = self.fields[path].shown(value)
        self._apply_process_default(set(overrides))
        return self.validate()

    def _apply_process_default(self, edited: set[str]) -> None:
        """An edit of the process count, the strategy left at its default, takes the strategy a command line's
        ``--nproc N`` takes (``config.assemble.process_default``: more than one process means ddp)."""
        if not {"sharding.nproc_per_node", "sharding.nnodes"} & edited or "sharding.strategy" in edited:
            return
        if self.values["sharding.strategy"] != RunConfig().sharding.strategy:
            return
        counts = {key: self.values[f"sharding.{key}"] for key in ("nproc_per_node", "nnodes")}
        self.values.update(process_default({"sharding": counts}))

    def on_change(self, listener: Callable[[ConfigForm], None]) -> None:
        """``listener(form)`` after every validation."""
        self._listeners.append(listener)

    # ---- validation ---------------------------------------------------------------------------
    def data(self) -> tuple[dict, list[tuple[str, str]]]:
        """The config dict of the values, and the fields whose text could not be read (left out of the dict)."""
        data: dict = {}
        unreadable = []
        for path, spec in self.fields.items():
            try:
                _set_dotted(data, path, spec.parsed(self.values[path]))
            except ValueError as err:
                unreadable.append((path, str(err)))
        return data, unreadable

    def validate(self) -> RunConfig | None:
        data, problems = self.data()  # an unreadable field is validated at its default, its own problem kept
        cfg = None
        try:
            cfg = config_from_dict(data)
        except ConfigError as err:
            problems += err.problems
        self.problems = problems
        self.config = None if problems else cfg
        for listener in list(self._listeners):
            listener(self)
        return self.config

    def owner(self, path: str) -> str | None:
        """The field a problem belongs to: ``precision.module_rules[0].pattern`` -> ``precision.module_rules``;
        None for a problem of the whole config or a section."""
        if path in self.fields:
            return path
        owners = [p for p in self.fields if path.startswith(p) and path[len(p) : len(p) + 1] in (".", "[")]
        return max(owners, key=len) if owners else None

    def field_problems(self, path: str) -> list[str]:
        """The problems of one field, a sub-path named in front of its reason."""
        out = []
        for where, msg in self.problems:
            if self.owner(where) == path:
                out.append(msg if where == path else f"{where[len(path) :].lstrip('.')}: {msg}")
        return out

    @property
    def other_problems(self) -> list[str]:
        """Problems no single field owns (checks across sections), as ``path: reason``."""
        return [f"{where or '(config)'}: {msg}" for where, msg in self.problems if self.owner(where) is None]

    @property
    def cli_command(self) -> str:
        """The ``workbench train`` command of the values (also while they have problems)."""
        return command_line(self.data()[0])

    # ---- the inputs of a run: recipe, files, DeepSpeed JSON (config.assemble, as workbench train takes them) -----
    def assemble(self, inputs: RunInputs) -> AssembledSettings:
        """Every field from the inputs ``workbench train`` takes, assembled as it assembles them
        (``config.assemble``): a recipe, a config's settings, a DeepSpeed file, ``--set`` overrides and flags; the
        fields they leave unset at their defaults. Returns the assembled settings (their recipe, the DeepSpeed
        import's warnings and notes); ConfigError for an unknown recipe or an unusable file."""
        assembled = assemble_settings(inputs)
        if assembled.imported is not None:  # the importer and this schema disagree: say so rather than drop settings
            unknown = sorted(set(assembled.imported.overrides) - set(self.fields))
            if unknown:
                raise ConfigError(
                    [("file", f"{inputs.deepspeed}: maps to fields this config does not have: {', '.join(unknown)}")]
                )
        self.set_config(assembled.settings)
        return assembled

    def load(self, path: str | Path) -> RunConfig | None:
        """Fill the form from a YAML/JSON config file (missing fields at their defaults), as ``workbench train
        --config FILE`` reads it; raises ConfigError (naming the file) for a file that cannot be read."""
        try:
            data = read_config_file(path)
        except ConfigError as err:  # named for the form's file box, not the CLI's --config flag
            raise ConfigError([("file", msg) for _, msg in err.problems]) from None
        except (UnicodeDecodeError, IsADirectoryError) as err:
            reason = "a folder" if isinstance(err, IsADirectoryError) else "not UTF-8 text"
            raise ConfigError([("file", f"{str(path)!r} is {reason}: give a YAML or JSON config file")]) from None
        self.assemble(RunInputs(config=data))
        return self.config

    def save(self, path: str | Path) -> Path:
        """Write the valid config to ``path`` (.yaml/.yml: YAML, else JSON); raises ConfigError while the form
        has problems or the file cannot be written."""
        if self.config is None:
            raise ConfigError([(p, m) for p, m in self.problems] or [("", "the configuration is not valid")])
        path = Path(path)
        if not path.name or path.is_dir():
            raise ConfigError([("file", f"{str(path)!r} is a folder: give a file name such as run.yaml")])
        try:
            if path.suffix in (".yaml", ".yml"):
                path.write_text(yaml.safe_dump(config_to_dict(self.config), sort_keys=False), encoding="utf-8")
            else:
                save_config(self.config, path)
        except OSError as err:
            raise ConfigError(
                [("file", f"cannot write {str(path)!r}: {err.strerror} (pick a writable folder)")]
            ) from None
        return path

    def start_from_recipe(self, name: str):
        """Every field from the packaged recipe ``name`` (the fields it does not set at their defaults; output.*,
        where runs go, kept as it is). Returns the recipe; raises ConfigError for an unknown or broken recipe."""
        assembled = assemble_settings(RunInputs(recipe=name))
        data = assembled.settings
        current, _ = self.data()  # a field whose text does not parse is left out: it takes its default
        data["output"] = {**current.get("output", {}), **data.get("output", {})}
        self.set_config(data)
        return assembled.recipe

    def import_deepspeed(self, path: str | Path):
        """Apply a DeepSpeed JSON config over the form's values, as ``workbench train --config FILE --deepspeed
        PATH`` applies it over the file (its batch, precision, ZeRO and offload settings; the form's process count
        splits its train_batch_size). Returns the importer's result: ``.warnings`` and ``.notes`` are
        ``(DeepSpeed key, message)``. Raises ConfigError naming the file for one that is not a DeepSpeed JSON
        object. A field whose text does not parse keeps its text unless the file sets it."""
        current, unreadable = self.data()
        kept = {p: self.values[p] for p, _ in unreadable}
        assembled = self.assemble(
            RunInputs(config=apply_overrides({}, changed_settings(current)), deepspeed=path, deepspeed_field="file")
        )
        kept = {p: v for p, v in kept.items() if p not in assembled.imported.overrides}
        if kept:
            self.values.update(kept)
            self.validate()
        return assembled.imported


# ---- data preview: the engine's own loading, the first examples shown -------------------------------
@dataclass
class DataPreview:
    """The first examples of the training file as the engine tokenizes them, and the whole file's counts."""

    examples: list  # [[(token text, trained?)]]
    truncated: list  # per example: cut at data.max_length
    stats: Any  # workbench.data.DataStats of the whole file

    def trained(self, i: int) -> int:
        return sum(on for _, on in self.examples[i])


_TOKENIZERS: dict[str, Any] = {}


def tokenizer_for(source: str):
    """The tokenizer of a model source, loaded once per source (built-ins without their weights' cost
    where they are small, hub ids through transformers)."""
    if source not in _TOKENIZERS:
        from ..models import BUILTIN, load_for_inference

        builtin = BUILTIN.get(source)
        if builtin is not None and builtin.hub_id is None:
            _TOKENIZERS[source] = load_for_inference(source).tokenizer  # tiny or the packaged 135M
        else:
            from transformers import AutoTokenizer

            _TOKENIZERS[source] = AutoTokenizer.from_pretrained(builtin.hub_id if builtin else source)
    return _TOKENIZERS[source]


def preview_data(cfg: RunConfig, n: int = 3, tokenizer=None) -> DataPreview:
    """``n`` examples of ``cfg.data.train`` through ``workbench.data.load_training_examples`` (so a bad row stops the
    preview as it would stop the run: DataError naming file:line)."""
    from ..data import IGNORE_INDEX, load_training_examples

    tok = tokenizer or tokenizer_for(cfg.model.source)
    examples, stats = load_training_examples(
        cfg.data.train, tok, cfg.data.max_length, cfg.data.format, cfg.data.skip_bad_rows, cfg.data.system_prompt
    )
    shown = examples[:n]
    return DataPreview(
        [[(tok.decode([i]), lab != IGNORE_INDEX) for i, lab in zip(ex.input_ids, ex.labels)] for ex in shown],
        [ex.truncated for ex in shown],
        stats,
    )
