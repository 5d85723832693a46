"""The config panel: a view of ``ConfigForm`` with one widget per RunConfig field.

Sections, fields, choices and help come from the schema (``config_form.form_sections``), so a section
added to the schema appears here with no change. The form holds the values, validates and routes each
problem to its field; this module only binds widgets to it and draws what it says.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from pathlib import Path

import ipywidgets as W
from traitlets import TraitError

from ..config import ConfigError, RunConfig
from ..data import DataError
from .config_form import ConfigForm, DataPreview, FieldSpec, preview_data

DESCRIPTION_STYLE = {"description_width": "150px"}
ROW_LAYOUT = W.Layout(width="420px")
RED = "#c62828"


def _red(text: str, cls: str = "") -> str:
    return f"<span style='color:{RED}'{f' class={cls!r}' if cls else ''}>{html.escape(text)}</span>"


def _error_lines(err: ConfigError) -> str:
    return "<br>".join(_red(f"{p}: {m}" if p and p != "file" else m) for p, m in err.problems)


class FieldEditor:
    """One field's widget, its problem line and its help line."""

    def __init__(self, spec: FieldSpec):
        self.spec = spec
        common = dict(description=spec.name, style=DESCRIPTION_STYLE, layout=ROW_LAYOUT, tooltip=spec.help)
        if spec.kind == "choice":
            self.widget = W.Dropdown(options=list(spec.choices), **common)
        elif spec.kind == "bool":
            self.widget = W.Checkbox(indent=True, **common)
        elif spec.kind == "int":
            self.widget = W.IntText(**common)
        elif spec.kind == "float":
            self.widget = W.FloatText(**common)
        elif spec.choices:
            self.widget = W.Combobox(
                options=list(map(str, spec.choices)), ensure_option=False, placeholder=spec.hint, **common
            )
        else:
            self.widget = W.Text(placeholder=spec.hint, **common)
        self.error = W.HTML(layout=W.Layout(margin="0 0 0 8px"))
        help_text = html.escape(spec.help)
        self.help = W.HTML(
            f"<span style='color:#888;font-size:90%' title='{help_text}'>{help_text[:90]}"
            f"{'...' if len(help_text) > 90 else ''}</span>",
            layout=W.Layout(margin="0 0 0 8px"),
        )
        self.row = W.HBox([self.widget, W.VBox([self.error, self.help])])

    def show_problems(self, messages: list[str]) -> None:
        self.error.value = (
            f"<span style='color:{RED}' class='wb-field-error'>&#9888; {html.escape('; '.join(messages))}</span>"
            if messages
            else ""
        )


# The schema has ~20 sections: in one row ipywidgets shrinks every tab to ~7 characters ("checkpo..."), so the section
# tabs keep their whole names and wrap onto a second row instead.
SECTION_TABS_STYLE = (
    "<style>"
    ".wb-section-tabs > .lm-TabBar { height: auto; }"
    ".wb-section-tabs > .lm-TabBar .lm-TabBar-content { flex-wrap: wrap; }"
    ".wb-section-tabs > .lm-TabBar .lm-TabBar-tab { flex: 0 0 auto; min-width: fit-content; padding: 0 10px; }"
    "</style>"
)


class ConfigPanel(W.VBox):
    """Edit a RunConfig. ``config`` is the current valid config (None while a value is invalid); ``form``
    the model behind the widgets (``config_form.ConfigForm``).

    Args:
        cfg: the configuration shown first (default: the defaults).
        path: the file box's first value (the file Load and Save use).
        preview_rows: examples the data preview shows.
    """

    def __init__(self, cfg: RunConfig | None = None, path: str = "", preview_rows: int = 3):
        self.form = ConfigForm()
        self.editors: dict[str, FieldEditor] = {}
        self._pushing = False  # True while form values are written into the widgets
        self.tabs = self._section_tabs(preview_rows)
        self.status = W.HTML()
        self.other_problems = W.HTML()
        file_style = {"description_width": "80px"}
        self.path_text = W.Text(
            value=path,
            description="file",
            placeholder="run.yaml (YAML or JSON)",
            style=file_style,
            layout=W.Layout(width="400px"),
        )
        self.load_button = W.Button(description="Load", icon="folder-open", layout=W.Layout(width="90px"))
        self.save_button = W.Button(description="Save", icon="save", layout=W.Layout(width="90px"))
        self.load_button.on_click(lambda _: self.load(self.path_text.value))
        self.save_button.on_click(lambda _: self.save(self.path_text.value))
        self.file_message = W.HTML()
        self.deepspeed_text = W.Text(
            description="DeepSpeed", placeholder="ds_config.json", style=file_style, layout=W.Layout(width="400px")
        )
        self.deepspeed_button = W.Button(
            description="Load DeepSpeed JSON",
            icon="file-import",
            tooltip="take batch, precision, ZeRO stage and offload from a DeepSpeed config",
            layout=W.Layout(width="190px"),
        )
        self.deepspeed_button.on_click(lambda _: self.load_deepspeed(self.deepspeed_text.value))
        self.deepspeed_message = W.HTML()
        self.deepspeed_message.add_class("wb-deepspeed-message")
        self.cli = W.HTML()
        from ..config.recipes import recipe_names

        self.recipe_choice = W.Dropdown(
            options=[("(a recipe)", "")] + [(n, n) for n in recipe_names()],
            value="",
            description="start from",
            style=file_style,
            layout=W.Layout(width="400px"),
        )
        self.recipe_button = W.Button(
            description="Use recipe",
            icon="book",
            layout=W.Layout(width="120px"),
            tooltip="set every field from a packaged recipe (workbench recipes)",
        )
        self.recipe_button.on_click(lambda _: self.start_from_recipe(self.recipe_choice.value))
        self.recipe_message = W.HTML()
        self.recipe_message.add_class("wb-recipe-message")
        super().__init__(
            [
                W.HTML(f"<b>Run configuration</b>{SECTION_TABS_STYLE}"),
                W.HBox([self.recipe_choice, self.recipe_button]),
                self.recipe_message,
                self.tabs,
                self.status,
                self.other_problems,
                W.HBox([self.path_text, self.load_button, self.save_button, self.file_message]),
                W.HBox([self.deepspeed_text, self.deepspeed_button]),
                self.deepspeed_message,
                W.HTML("<b>Equivalent command</b>"),
                self.cli,
            ]
        )
        self.add_class("wb-config-panel")
        self.form.on_change(lambda form: self._draw())
        self.form.set_config(cfg or RunConfig())

    def _section_tabs(self, preview_rows: int) -> W.Tab:
        """A tab a schema section, an editor a field (into ``editors``); the data tab ends with the data preview."""
        tabs, titles = [], []
        for section, specs in self.form.sections:
            rows = []
            for spec in specs:
                ed = FieldEditor(spec)
                ed.widget.observe(lambda change, p=spec.path: self._on_edit(p, change["new"]), names="value")
                self.editors[spec.path] = ed
                rows.append(ed.row)
            if section == "data":
                self.preview = DataPreviewView(self, preview_rows)
                rows.append(self.preview)
            tabs.append(W.VBox(rows))
            titles.append(section)
        section_tabs = W.Tab(children=tabs, titles=titles)
        section_tabs.add_class("wb-section-tabs")
        return section_tabs

    # ---- the form <-> the widgets ---------------------------------------------------------------
    @property
    def config(self) -> RunConfig | None:
        return self.form.config

    @property
    def problems(self) -> list[tuple[str, str]]:
        return self.form.problems

    @property
    def cli_command(self) -> str:
        return self.form.cli_command

    def set_config(self, cfg: RunConfig | dict) -> RunConfig | None:
        return self.form.set_config(cfg)

    def set(self, path: str, value) -> RunConfig | None:
        """Set one field as a user would (``panel.set("lora.r", 8)``); returns the new valid config or None."""
        return self.form.set(path, value)

    def validate(self) -> RunConfig | None:
        return self.form.validate()

    def on_change(self, callback: Callable[[RunConfig | None], None]) -> None:
        """``callback(config or None)`` after every edit."""
        self.form.on_change(lambda form: callback(form.config))

    def _on_edit(self, path: str, value) -> None:
        if not self._pushing:
            self.form.set(path, value)

    def _draw(self) -> None:
        form = self.form
        self._pushing = True
        try:
            for path, ed in self.editors.items():
                if ed.widget.value != form.values[path]:
                    try:
                        ed.widget.value = form.values[path]
                    except TraitError:  # e.g. a loaded file's "abc" for a number: the widget keeps its value,
                        pass  # the field's problem line says what is wrong
        finally:
            self._pushing = False
        for path, ed in self.editors.items():
            ed.show_problems(form.field_problems(path))
        self.other_problems.value = "".join(f"<div>{_red('⚠ ' + m)}</div>" for m in form.other_problems)
        if form.problems:
            fields = ", ".join(sorted({p for p, _ in form.problems}))
            self.status.value = _red(f"{len(form.problems)} problem(s): {fields}", "wb-config-status")
        else:
            self.status.value = (
                "<span style='color:#2e7d32' class='wb-config-status'>&#10004; valid configuration</span>"
            )
        self.cli.value = f"<pre class='wb-cli'>{html.escape(form.cli_command)}</pre>"

    # ---- files --------------------------------------------------------------------------------
    def load(self, path: str | Path) -> RunConfig | None:
        if not str(path).strip():
            self.file_message.value = _red("type the path of a YAML or JSON config file first")
            return None
        try:
            cfg = self.form.load(path)
        except ConfigError as err:
            self.file_message.value = _error_lines(err)
            return None
        self.file_message.value = f"loaded {html.escape(str(path))}"
        return cfg

    def save(self, path: str | Path) -> bool:
        if not str(path).strip():
            self.file_message.value = _red("type a file name to save to first (run.yaml, run.json)")
            return False
        if self.form.config is None:
            self.file_message.value = _red("not saved: fix the problems first")
            return False
        try:
            written = self.form.save(path)
        except ConfigError as err:
            self.file_message.value = _error_lines(err)
            return False
        self.file_message.value = f"saved {html.escape(str(written))}"
        return True

    def start_from_recipe(self, name: str):
        """Set every field from a packaged recipe and show what it is for, reaches and needs; returns it or None."""
        if not name:
            self.recipe_message.value = _red("pick a recipe first")
            return None
        try:
            recipe = self.form.start_from_recipe(name)
        except ConfigError as err:
            self.recipe_message.value = _error_lines(err)
            return None
        self.recipe_message.value = (
            f"<div class='wb-recipe'><b>{html.escape(recipe.name)}</b>: {html.escape(recipe.purpose)}<br>"
            f"expected: {html.escape(recipe.summary())}<br>needs: {html.escape(recipe.requirements.describe())}"
            + (
                f"<br><b>starts from the model recipe {html.escape(recipe.starts_from)} trains</b>: set model.source "
                "to that run's model (RUN/model)"
                if recipe.starts_from
                else ""
            )
            + f"<br><span style='color:#888'>check it: python -m workbench.bench.recipes {html.escape(recipe.name)}"
            "</span></div>"
        )
        return recipe

    def load_deepspeed(self, path: str | Path):
        """Apply a DeepSpeed JSON config's settings (through the project's importer) and show its warnings;
        returns the importer's result or None."""
        if not str(path).strip():
            self.deepspeed_message.value = _red("type the path of a DeepSpeed JSON config first")
            return None
        try:
            imported = self.form.import_deepspeed(path)
        except ConfigError as err:
            self.deepspeed_message.value = _error_lines(err)
            return None
        fields = ", ".join(f"{k} = {v!r}" for k, v in imported.overrides.items()) or "no settings it maps"
        lines = [f"<div>from {html.escape(str(path))}: {html.escape(fields)}</div>"]
        lines += [
            f"<div class='wb-deepspeed-warning' style='color:#ef6c00'>&#9888; {html.escape(k)}: {html.escape(m)}</div>"
            for k, m in imported.warnings
        ]
        lines += [f"<div style='color:#666'>{html.escape(k)}: {html.escape(m)}</div>" for k, m in imported.notes]
        self.deepspeed_message.value = "".join(lines)
        return imported


class DataPreviewView(W.VBox):
    """The first training examples as the engine tokenizes them: trained tokens highlighted."""

    def __init__(self, panel: ConfigPanel, rows: int = 3):
        self.panel = panel
        self.rows = rows
        self.button = W.Button(description="Preview data", icon="eye")
        self.button.on_click(lambda _: self.refresh())
        self.output = W.HTML()
        super().__init__([self.button, self.output])

    def refresh(self) -> DataPreview | None:
        cfg = self.panel.config
        if cfg is None:
            self.output.value = _red("fix the configuration problems first")
            return None
        self.output.value = "<i>tokenizing...</i>"
        try:
            preview = preview_data(cfg, self.rows)
        except (DataError, ConfigError) as err:
            self.output.value = _red(str(err))
            return None
        except Exception as err:  # noqa: BLE001 - shown to the user, e.g. a hub tokenizer without internet
            self.output.value = _red(f"{type(err).__name__}: {err}")
            return None
        self.output.value = preview_html(preview)
        return preview


def preview_html(p: DataPreview) -> str:
    s = p.stats
    counts = (
        f"{s.examples} example(s) from {s.rows} row(s) of {html.escape(str(s.path))}; {s.truncated} truncated"
        + (f"; {s.skipped_bad} bad row(s) skipped" if s.skipped_bad else "")
        + (f"; {s.dropped_no_target} with no assistant tokens left" if s.dropped_no_target else "")
    )
    parts = [
        "<div class='wb-data-preview' style='font-family:monospace;font-size:85%'>",
        f"<div>{counts}</div>",
        "<div><span style='background:#c8e6c9'>trained (assistant) tokens</span> &nbsp; "
        "<span style='color:#999'>context tokens (label -100)</span></div>",
    ]
    for i, tokens in enumerate(p.examples):
        spans = "".join(
            f"<span style='background:#c8e6c9'>{html.escape(t)}</span>"
            if trained
            else f"<span style='color:#999'>{html.escape(t)}</span>"
            for t, trained in tokens
        )
        parts.append(
            f"<div style='margin-top:6px'><b>example {i + 1}</b>: {p.trained(i)} of {len(tokens)} tokens trained"
            f"{' (truncated)' if p.truncated[i] else ''}<div style='white-space:pre-wrap;"
            f"border:1px solid #ddd;padding:4px'>{spans}</div></div>"
        )
    parts.append("</div>")
    return "".join(parts)
