"""The runs panel's Export section: export a run's adapter (merged fp32/bf16/fp16, int8, ONNX) and read the
manifest: sizes on disk and the parity figures, a failed gate shown as a failure with its figures.

The export runs in a child process (``workbench.export.job.ExportJob``); an asyncio task on the kernel's
loop polls it, so the kernel stays free and widgets are only touched from that loop. Without a loop (tests,
scripts) ``wait_sync()`` polls instead.
"""

from __future__ import annotations

import asyncio
import html
from collections.abc import Iterable
from pathlib import Path

import ipywidgets as W

from ..export.exporter import PHASES, run_exports
from ..export.job import ExportJob, ExportJobState
from ..export.targets import target_choices
from ..runs import has_adapter

POLL_INTERVAL_S = 0.25
RED, GREEN = "#c62828", "#2e7d32"


def _mb(n: int | None) -> str:
    return "-" if n is None else f"{n / 1e6:.1f} MB"


def manifest_html(manifest: dict) -> str:
    """An export's manifest as a small report: what, sizes, parity figures against the gate, wall time."""
    sizes, parity, gate = (
        manifest.get("sizes", {}),
        manifest.get("parity", {}),
        manifest.get("parity", {}).get("gate", {}),
    )
    passed = parity.get("passed", manifest.get("status") == "passed")
    verdict = (
        f"<b style='color:{GREEN}'>parity passed</b>"
        if passed
        else f"<b style='color:{RED}'>FAILED its parity gate</b>: "
        + html.escape("; ".join(parity.get("failures") or [manifest.get("status", "")]))
    )
    rows = [
        (
            "size on disk",
            f"{_mb(sizes.get('total_bytes'))} (weights {_mb(sizes.get('weights_bytes'))}; "
            f"fp32 merged {_mb(sizes.get('reference_fp32_bytes'))})",
        ),
        (
            "max |logit diff|",
            f"{parity.get('max_logit_diff', float('nan')):.3g} (gate &le; {gate.get('max_logit_diff', '?')})",
        ),
        (
            "greedy agreement",
            f"{parity.get('greedy_agreement', float('nan')):.4f} (gate &ge; {gate.get('min_agreement', '?')})",
        ),
        (
            "held-out loss",
            f"{parity.get('export_loss', float('nan')):.4f} vs {parity.get('reference_loss', float('nan')):.4f} "
            f"unexported (gate +{gate.get('max_loss_increase', '?')})",
        ),
        ("compared on", f"{parity.get('positions', '?')} positions of {parity.get('examples', '?')} held-out examples"),
        (
            "wall",
            f"write {manifest.get('wall_s', {}).get('write_s', 0):.1f} s, parity "
            f"{manifest.get('wall_s', {}).get('parity_s', 0):.1f} s",
        ),
    ]
    body = "".join(f"<tr><td>{k}</td><td>{v}</td></tr>" for k, v in rows)
    return (
        f"<div class='wb-export-manifest'>{html.escape(manifest.get('target', '?'))} "
        f"({html.escape(str(manifest.get('precision', '')))}): {verdict}"
        f"<table style='font-size:90%;border-spacing:12px 2px'>{body}</table></div>"
    )


def exports_table_html(exports: list[tuple[Path, dict]]) -> str:
    """One row per export of a run (failed ones in red)."""
    if not exports:
        return "<i>no exports of this run yet</i>"
    rows = []
    for path, m in exports:
        p = m.get("parity", {})
        ok = m.get("status") == "passed"
        rows.append(
            f"<tr><td>{html.escape(path.name)}</td><td style='color:{GREEN if ok else RED}'>"
            f"{html.escape(m.get('status', '?'))}</td><td>{_mb(m.get('sizes', {}).get('total_bytes'))}</td>"
            f"<td>{p.get('greedy_agreement', float('nan')):.3f}</td><td>{p.get('max_logit_diff', float('nan')):.3g}</td>"
            f"<td>{p.get('export_loss', float('nan')):.4f}</td></tr>"
        )
    return (
        "<table class='wb-exports' style='font-size:90%;border-spacing:12px 2px'><tr><th>export</th><th>status</th>"
        "<th>size</th><th>agreement</th><th>max |&Delta;logit|</th><th>held-out loss</th></tr>"
        + "".join(rows)
        + "</table>"
    )


class ExportSection(W.VBox):
    """Pick a run with an adapter and a target, export it (in a child process), read its manifest."""

    def __init__(self):
        self.run_paths: dict[str, Path] = {}
        self.specs = {s.name: s for s in target_choices()}
        self.job: ExportJob | None = None
        self._task: asyncio.Task | None = None
        self.run = W.Dropdown(
            options=[], description="run", style={"description_width": "60px"}, layout=W.Layout(width="320px")
        )
        self.target = W.Dropdown(
            options=[(f"{name}: {s.precision}", name) for name, s in self.specs.items()],
            value="merged-float32",
            description="target",
            style={"description_width": "60px"},
            layout=W.Layout(width="420px"),
        )
        self.overwrite = W.Checkbox(value=False, description="overwrite", indent=False, layout=W.Layout(width="100px"))
        self.export_button = W.Button(description="Export", icon="download", button_style="primary")
        self.export_button.add_class("wb-export-start")
        self.cancel_button = W.Button(description="Cancel", icon="stop", disabled=True)
        self.export_button.on_click(lambda _: self.start())
        self.cancel_button.on_click(lambda _: self.cancel())
        self.run.observe(lambda _: self.show_exports(), names="value")
        self.progress = W.FloatProgress(value=0.0, min=0.0, max=1.0, layout=W.Layout(width="300px", display="none"))
        self.status = W.HTML()
        self.result = W.HTML()
        self.result.add_class("wb-export-result")
        self.exports = W.HTML()
        super().__init__(
            [
                W.HTML("<b>Export</b> (merged, int8, ONNX; checked for parity against the unexported model)"),
                W.HBox([self.run, self.target, self.overwrite]),
                W.HBox([self.export_button, self.cancel_button, self.progress, self.status]),
                self.result,
                self.exports,
            ]
        )
        self.add_class("wb-export-section")

    def set_runs(self, run_dirs: Iterable[Path]) -> list[str]:
        """Offer the runs that have an adapter (keeps the selection when it is still there)."""
        self.run_paths = {Path(p).name: Path(p) for p in run_dirs if has_adapter(p)}
        current = self.run.value
        self.run.options = list(self.run_paths)
        self.run.value = current if current in self.run_paths else (next(iter(self.run_paths), None))
        self.show_exports()
        return list(self.run_paths)

    def show_exports(self) -> None:
        path = self.run_paths.get(self.run.value)
        self.exports.value = exports_table_html(run_exports(path)) if path else "<i>no run with an adapter here</i>"

    def start(self, run: str | None = None, target: str | None = None, **job_options) -> ExportJob | None:
        """Start exporting (the Export button); returns the job at once. ``job_options``: ExportJob's (out, ...)."""
        run, target = run or self.run.value, target or self.target.value
        if self.job is not None and not self.job.state.done:
            self.status.value = "an export is already running"
            return None
        if run not in self.run_paths:
            self.status.value = f"<span style='color:{RED}'>pick a run with an adapter</span>"
            return None
        self.run.value, self.target.value = run, target
        job_options.setdefault("overwrite", self.overwrite.value)
        self.job = ExportJob(self.run_paths[run], self.specs[target], **job_options).start()
        self.result.value = ""
        self.export_button.disabled, self.cancel_button.disabled = True, False
        self.progress.layout.display = None
        self.poll_once()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return self.job  # no kernel loop: wait_sync() polls
        self._task = loop.create_task(self._poll_loop())
        return self.job

    async def _poll_loop(self) -> None:
        while not self.poll_once().done:
            await asyncio.sleep(POLL_INTERVAL_S)

    def poll_once(self) -> ExportJobState:
        state = self.job.poll()
        self._draw(state)
        return state

    def _draw(self, s: ExportJobState) -> None:
        self.progress.value = s.fraction
        what = f"{self.job.spec.name} of {self.job.run_dir.name}"
        if not s.done:
            self.status.value = (
                f"exporting {html.escape(what)}: [{s.phase}/{len(PHASES)}] {html.escape(s.phase_name)} "
                f"({s.seconds:.0f} s)"
                if s.phase
                else f"exporting {html.escape(what)}: starting"
            )
            return
        self.export_button.disabled, self.cancel_button.disabled = False, True
        self.progress.layout.display = "none"
        if s.status == "passed":
            self.status.value = (
                f"<span style='color:{GREEN}'>exported {html.escape(what)} to {html.escape(str(s.path))}</span>"
            )
        elif s.status == "failed":
            self.status.value = (
                f"<span style='color:{RED}'>export {html.escape(what)} FAILED its parity gate "
                f"(kept as {html.escape(str(s.path))})</span>"
            )
        else:
            self.status.value = f"<span style='color:{RED}'>export {html.escape(what)}: {html.escape(s.message)}</span>"
        self.result.value = manifest_html(s.manifest) if s.manifest else ""
        self.show_exports()

    def cancel(self) -> None:
        if self.job is not None:
            self.job.cancel()
            self._draw(self.job.state)

    def wait_sync(self, timeout: float | None = None) -> ExportJobState:
        """Without an event loop (tests, scripts): poll until the export ends."""
        self.job.wait(timeout, interval=POLL_INTERVAL_S)
        return self.poll_once()

    async def wait(self, timeout: float | None = None) -> ExportJobState:
        """``await section.wait()`` in a notebook, while the section keeps updating."""
        if self._task is not None:
            await asyncio.wait_for(self._task, timeout)
        return self.poll_once()
