"""The config panel: one widget per RunConfig field, generated from the pydantic schema.

Sections, fields, defaults, choices and help all come from ``RunConfig.model_fields``, so a section
added to the schema (e.g. ``sharding``) appears here with no change. Every edit re-validates with
``config_from_dict``; each problem is shown next to its field with the validator's reason.
"""
from __future__ import annotations

import html
import json
import shlex
import typing
from pathlib import Path
from typing import Any, Callable, Literal, Optional

import ipywidgets as W
import yaml
from pydantic import BaseModel

from ..config import (
    ConfigError, RunConfig, Section, config_from_dict, config_to_dict, leaf_fields, read_config_file, save_config,
)

DESCRIPTION_STYLE = {"description_width": "150px"}
ROW_LAYOUT = W.Layout(width="420px")


# ---- schema -> widgets ------------------------------------------------------------------------
schema_leaves = leaf_fields  # the CLI's flags come from the same walk


def schema_sections(model: type[BaseModel] = RunConfig) -> list[tuple[str, list]]:
    """[(section name, [(path, field)])]; top-level plain fields go to a 'general' section."""
    out, general = [], []
    for name, info in model.model_fields.items():
        ann = info.annotation
        if isinstance(ann, type) and issubclass(ann, Section):
            out.append((name, list(schema_leaves(ann, f"{name}."))))
        else:
            general.append((name, info))
    return out + ([("general", general)] if general else [])


def _literal_choices(ann) -> Optional[list]:
    if typing.get_origin(ann) is Literal:
        return list(typing.get_args(ann))
    return None


def _optional_inner(ann):
    args = typing.get_args(ann)
    if typing.get_origin(ann) is typing.Union and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]
    return None


class FieldEditor:
    """One field: its widget, how to read it into a config value, and where its problem goes."""

    def __init__(self, path: str, info):
        self.path = path
        self.info = info
        ann = info.annotation
        name = path.rsplit(".", 1)[-1]
        common = dict(description=name, style=DESCRIPTION_STYLE, layout=ROW_LAYOUT,
                      tooltip=info.description or "")
        self.kind = "yaml"
        inner = _optional_inner(ann)
        self.optional = inner is not None
        base = inner if inner is not None else ann
        choices = _literal_choices(base)
        if choices is not None and not self.optional:
            self.kind = "choice"
            self.widget = W.Dropdown(options=choices, **common)
        elif base is bool and not self.optional:
            self.kind = "bool"
            self.widget = W.Checkbox(indent=True, **common)
        elif base is int and not self.optional:
            self.kind = "int"
            self.widget = W.IntText(**common)
        elif base is float and not self.optional:
            self.kind = "float"
            self.widget = W.FloatText(**common)
        elif base is str:
            self.kind = "str"
            self.widget = W.Text(placeholder="(empty = null)" if self.optional else "", **common)
        else:
            # Unions such as Literal["all-linear"] | list[str], optional numbers: free text read as YAML
            options = [c for a in typing.get_args(base) for c in (_literal_choices(a) or [])]
            hint = " / ".join(map(str, options)) + (" or " if options else "") + "a YAML value"
            if options:
                self.widget = W.Combobox(options=options, ensure_option=False, placeholder=hint, **common)
            else:
                self.widget = W.Text(placeholder=("(empty = null) " if self.optional else "") + hint, **common)
        self.error = W.HTML(layout=W.Layout(margin="0 0 0 8px"))
        help_text = html.escape(info.description or "")
        self.help = W.HTML(f"<span style='color:#888;font-size:90%' title='{help_text}'>{help_text[:90]}"
                           f"{'...' if len(help_text) > 90 else ''}</span>", layout=W.Layout(margin="0 0 0 8px"))
        self.row = W.HBox([self.widget, W.VBox([self.error, self.help])])

    def set(self, value: Any) -> None:
        if self.kind in ("choice", "bool", "int", "float"):
            self.widget.value = value
        elif self.kind == "str":
            self.widget.value = "" if value is None else str(value)
        else:
            self.widget.value = "" if value is None else (value if isinstance(value, str) else _yaml_flow(value))

    def get(self) -> Any:
        """The value to validate; a text that is not even YAML raises ValueError."""
        v = self.widget.value
        if self.kind in ("choice", "bool", "int", "float"):
            return v
        if self.kind == "str":
            return None if (self.optional and v.strip() == "") else v
        if v.strip() == "":
            return None
        try:
            parsed = yaml.safe_load(v)
        except yaml.YAMLError as err:
            raise ValueError(f"not a YAML value: {err.problem if hasattr(err, 'problem') else err}") from None
        if isinstance(parsed, str) and "," in parsed:  # "q_proj, v_proj" reads as a list
            parsed = [p.strip() for p in parsed.split(",") if p.strip()]
        return parsed

    def show_problem(self, message: Optional[str]) -> None:
        self.error.value = (f"<span style='color:#c62828' class='wb-field-error'>&#9888; {html.escape(message)}</span>"
                            if message else "")


def _yaml_flow(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()


def _set_dotted(d: dict, path: str, value: Any) -> None:
    *parents, leaf = path.split(".")
    for p in parents:
        d = d.setdefault(p, {})
    d[leaf] = value


def _get_dotted(d: dict, path: str) -> Any:
    for p in path.split("."):
        d = d[p]
    return d


def _cli_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return shlex.quote(_yaml_flow(value))
    return shlex.quote(str(value))


def cli_command(cfg_dict: dict) -> str:
    """The ``workbench train`` command for a config: every value that differs from the schema default."""
    defaults = config_to_dict(RunConfig())
    parts = ["workbench train"]
    for path, _ in schema_leaves():
        try:
            value = _get_dotted(cfg_dict, path)
        except (KeyError, TypeError):
            continue
        if value != _get_dotted(defaults, path):
            parts.append(f"--{path} {_cli_value(value)}")
    return " \\\n    ".join(parts)


class ConfigPanel(W.VBox):
    """Edit a RunConfig. ``config`` is the current valid config (None while a value is invalid)."""

    def __init__(self, cfg: Optional[RunConfig] = None, path: str = "run_config.yaml", preview_rows: int = 3):
        self.editors: dict[str, FieldEditor] = {}
        self._callbacks: list[Callable] = []
        self._muted = False
        self.config: Optional[RunConfig] = None
        self.problems: list[tuple[str, str]] = []
        tabs, titles = [], []
        for section, leaves in schema_sections():
            rows = []
            for path, info in leaves:
                ed = FieldEditor(path, info)
                ed.widget.observe(self._on_edit, names="value")
                self.editors[path] = ed
                rows.append(ed.row)
            if section == "data":
                self.preview = DataPreview(self, preview_rows)
                rows.append(self.preview)
            tabs.append(W.VBox(rows))
            titles.append(section)
        self.tabs = W.Tab(children=tabs, titles=titles)
        self.status = W.HTML()
        self.other_problems = W.HTML()
        self.path_text = W.Text(value=path, description="file", style={"description_width": "40px"},
                                layout=W.Layout(width="360px"))
        self.load_button = W.Button(description="Load", icon="folder-open", layout=W.Layout(width="90px"))
        self.save_button = W.Button(description="Save", icon="save", layout=W.Layout(width="90px"))
        self.load_button.on_click(lambda _: self.load(self.path_text.value))
        self.save_button.on_click(lambda _: self.save(self.path_text.value))
        self.file_message = W.HTML()
        self.cli = W.HTML()
        super().__init__([W.HTML("<b>Run configuration</b>"), self.tabs, self.status, self.other_problems,
                          W.HBox([self.path_text, self.load_button, self.save_button, self.file_message]),
                          W.HTML("<b>Equivalent command</b>"), self.cli])
        self.add_class("wb-config-panel")
        self.set_config(cfg or RunConfig())

    # ---- reading / writing the form ---------------------------------------------------------
    def set_config(self, cfg: RunConfig | dict) -> None:
        data = cfg if isinstance(cfg, dict) else config_to_dict(cfg)
        self._muted = True
        try:
            for path, ed in self.editors.items():
                try:
                    ed.set(_get_dotted(data, path))
                except (KeyError, TypeError):
                    pass
        finally:
            self._muted = False
        self.validate()

    def set(self, path: str, value: Any) -> Optional[RunConfig]:
        """Set one field as a user would (``panel.set("lora.r", 8)``); returns the new valid config or None."""
        self.editors[path].set(value)
        return self.config

    def form_dict(self) -> tuple[dict, list[tuple[str, str]]]:
        data: dict = {}
        unreadable = []
        for path, ed in self.editors.items():
            try:
                _set_dotted(data, path, ed.get())
            except ValueError as err:
                unreadable.append((path, str(err)))
        return data, unreadable

    def validate(self) -> Optional[RunConfig]:
        data, problems = self.form_dict()
        unreadable = {p for p, _ in problems}
        for p in unreadable:  # validate the rest with this field at its default
            *parents, leaf = p.split(".")
            node = data
            for q in parents:
                node = node.get(q, {})
            node.pop(leaf, None)
        cfg = None
        try:
            cfg = config_from_dict(data)
        except ConfigError as err:
            problems += err.problems
        self.problems = problems
        self.config = None if problems else cfg
        by_field: dict[str, list[str]] = {}
        other = []
        for path, msg in problems:
            owner = self._owner(path)
            if owner is None:
                other.append(f"{path or '(config)'}: {msg}")
            else:
                by_field.setdefault(owner, []).append(msg if owner == path else f"{path[len(owner):].lstrip('.')}: {msg}")
        for path, ed in self.editors.items():
            ed.show_problem("; ".join(by_field.get(path, [])) or None)
        self.other_problems.value = "".join(f"<div style='color:#c62828'>&#9888; {html.escape(m)}</div>" for m in other)
        if problems:
            self.status.value = (f"<span style='color:#c62828' class='wb-config-status'>{len(problems)} problem(s): "
                                 f"{html.escape(', '.join(sorted({p for p, _ in problems})))}</span>")
        else:
            self.status.value = "<span style='color:#2e7d32' class='wb-config-status'>&#10004; valid configuration</span>"
        self.cli.value = f"<pre class='wb-cli'>{html.escape(cli_command(data))}</pre>"
        for cb in list(self._callbacks):
            cb(self.config)
        return self.config

    def _owner(self, path: str) -> Optional[str]:
        """The field a problem belongs to: ``precision.module_rules[0].pattern`` -> ``precision.module_rules``."""
        if path in self.editors:
            return path
        best = None
        for p in self.editors:
            if path.startswith(p) and path[len(p):len(p) + 1] in (".", "[") and (best is None or len(p) > len(best)):
                best = p
        return best

    def _on_edit(self, change) -> None:
        if not self._muted:
            self.validate()

    def on_change(self, callback: Callable[[Optional[RunConfig]], None]) -> None:
        """``callback(config or None)`` after every edit."""
        self._callbacks.append(callback)

    # ---- files --------------------------------------------------------------------------------
    def load(self, path: str | Path) -> Optional[RunConfig]:
        try:
            data = read_config_file(path)
        except ConfigError as err:
            self.file_message.value = f"<span style='color:#c62828'>{html.escape(str(err))}</span>"
            return None
        # Start from the defaults so a partial file leaves the other fields at their defaults
        full = config_to_dict(RunConfig())
        for p, _ in schema_leaves():
            try:
                _set_dotted(full, p, _get_dotted(data, p))
            except (KeyError, TypeError):
                pass
        self.set_config(full)
        self.file_message.value = f"loaded {html.escape(str(path))}"
        return self.config

    def save(self, path: str | Path) -> bool:
        if self.config is None:
            self.file_message.value = "<span style='color:#c62828'>not saved: fix the problems first</span>"
            return False
        path = Path(path)
        if path.suffix in (".yaml", ".yml"):
            path.write_text(yaml.safe_dump(config_to_dict(self.config), sort_keys=False), encoding="utf-8")
        else:
            save_config(self.config, path)
        self.file_message.value = f"saved {html.escape(str(path))}"
        return True

    @property
    def cli_command(self) -> str:
        return cli_command(self.form_dict()[0])


# ---- data preview --------------------------------------------------------------------------------
_TOKENIZERS: dict[str, Any] = {}


def load_tokenizer(source: str):
    """The tokenizer of a model source, without loading large weights (cached per source)."""
    if source in _TOKENIZERS:
        return _TOKENIZERS[source]
    from ..models import BUILTIN, load_for_inference

    builtin = BUILTIN.get(source)
    if builtin is not None and builtin.hub_id is None:
        tok = load_for_inference(source).tokenizer  # built-ins are small (tiny or the packaged 135M)
    else:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(builtin.hub_id if builtin else source)
    _TOKENIZERS[source] = tok
    return tok


def preview_rows(cfg: RunConfig, n: int = 3, tokenizer=None) -> list[dict]:
    """The first ``n`` rows of the training file as the engine tokenizes them: [{tokens: [(text, trained)], ...}]."""
    from ..data import row_to_messages, tokenize_messages
    from ..precision import IGNORE_INDEX

    tok = tokenizer or load_tokenizer(cfg.model.source)
    out = []
    with open(cfg.data.train, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if len(out) >= n:
                break
            if not line.strip():
                continue
            try:
                messages = row_to_messages(json.loads(line), cfg.data.format, cfg.data.system_prompt)
                ex = tokenize_messages(tok, messages, cfg.data.max_length)
            except (ValueError, TypeError) as err:
                out.append({"line": lineno, "error": str(err), "tokens": []})
                continue
            tokens = [(tok.decode([i]), lab != IGNORE_INDEX) for i, lab in zip(ex.input_ids, ex.labels)]
            out.append({"line": lineno, "tokens": tokens, "trained": sum(t for _, t in tokens),
                        "total": len(tokens), "truncated": ex.truncated})
    return out


def preview_html(rows: list[dict]) -> str:
    parts = ["<div class='wb-data-preview' style='font-family:monospace;font-size:85%'>",
             "<div><span style='background:#c8e6c9'>trained (assistant) tokens</span> &nbsp; "
             "<span style='color:#999'>context tokens (label -100)</span></div>"]
    for r in rows:
        if r.get("error"):
            parts.append(f"<div style='color:#c62828'>line {r['line']}: {html.escape(r['error'])}</div>")
            continue
        spans = "".join(
            f"<span style='background:#c8e6c9'>{html.escape(t)}</span>" if trained
            else f"<span style='color:#999'>{html.escape(t)}</span>" for t, trained in r["tokens"])
        parts.append(f"<div style='margin-top:6px'><b>line {r['line']}</b>: {r['trained']} of {r['total']} tokens "
                     f"trained{' (truncated)' if r['truncated'] else ''}<div style='white-space:pre-wrap;"
                     f"border:1px solid #ddd;padding:4px'>{spans}</div></div>")
    parts.append("</div>")
    return "".join(parts)


class DataPreview(W.VBox):
    def __init__(self, panel: ConfigPanel, rows: int = 3):
        self.panel = panel
        self.rows = rows
        self.button = W.Button(description="Preview data", icon="eye")
        self.button.on_click(lambda _: self.refresh())
        self.output = W.HTML()
        super().__init__([self.button, self.output])

    def refresh(self) -> list[dict]:
        cfg = self.panel.config
        if cfg is None:
            self.output.value = "<span style='color:#c62828'>fix the configuration problems first</span>"
            return []
        self.output.value = "<i>tokenizing...</i>"
        try:
            rows = preview_rows(cfg, self.rows)
        except Exception as err:  # noqa: BLE001 - shown to the user, e.g. a hub tokenizer without internet
            self.output.value = f"<span style='color:#c62828'>{html.escape(type(err).__name__ + ': ' + str(err))}</span>"
            return []
        self.output.value = preview_html(rows)
        return rows
