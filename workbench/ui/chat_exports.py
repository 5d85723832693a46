"""The chat compare panel's "Exports of a run" section: serve a run's merged / int8 / GGUF exports next to its
adapter and ask them side by side (fp32 merged vs int8 vs q4_k_m GGUF vs the adapter).

Each export is a model of its own, so each gets its own server, started from what ``server_start`` makes of the
export's directory and manifest: our server over a merged or int8 directory (``start_server(EXPORT_DIR)``, in a
child process by default), llama.cpp's llama-server over a ``gguf`` export's GGUF file (with the export's vision
projector, ``mmproj-f16.gguf``, when it has one; always a child process; a machine without llama.cpp shows the
set-up command in the section). The adapter is added to the panel's server (base + adapters). The servers start in
an executor thread that returns plain handles; the widgets are updated on the kernel's loop, which never waits.
Not served here: ONNX exports (they run in ``workbench.export.onnx_runner``: ``workbench onnx-chat``) and
``gguf-lora`` exports (the base's GGUF with the adapter as a GGUF LoRA, applied per request by index: ``workbench
serve --engine llama-cpp --model BASE.gguf`` with its ``loras``).

The section reaches the chat panel only through ``ChatTarget`` (the panel's public methods): the panel imports
this module, never the other way round.
"""

from __future__ import annotations

import asyncio
import html
from pathlib import Path
from typing import Any, Protocol

import ipywidgets as W

from ..export.exporter import run_exports
from ..export.gguf import gguf_file, mmproj_file
from ..runs import has_adapter, run_dirs


class ChatTarget(Protocol):
    """What the section needs of a chat panel (``ChatComparePanel`` is one)."""

    def add_run_adapter(self, run_dir: Path) -> str:
        """Serve the run's adapter on the panel's server; returns its model id (called from a worker thread)."""

    def offer_models(self, endpoints: dict[str, Any], served_here: list[str]) -> list[str]:
        """Offer and select models served apart (id -> server) and models of the panel's server."""

    def remove_endpoint(self, model_id: str) -> None:
        """Stop offering a model served apart."""


SERVABLE_TARGETS = ("merged", "int8", "gguf")  # our server loads the first two's directory, llama-server a GGUF file
RED = "#c62828"
NO_RUNS_YET = "no run with an adapter or a passed export"


def server_start(export_dir: Path, manifest: dict, subprocess_mode: bool = True) -> dict | None:
    """``start_server``'s arguments for one export (None: it failed parity, or no server here loads it): the one
    place an export becomes a server. merged / int8: our server over the directory (``subprocess_mode``: in a child
    process); gguf: llama-server over the GGUF file of the export's quantization, with its mmproj when it has one."""
    target = manifest.get("target")
    if manifest.get("status") != "passed" or target not in SERVABLE_TARGETS:
        return None
    if target != "gguf":
        return {"model": str(export_dir), "subprocess_mode": subprocess_mode}
    start = {"model": str(gguf_file(export_dir, manifest["options"]["quant"])), "engine": "llama-cpp"}
    mmproj = mmproj_file(export_dir)
    return {**start, "mmproj": str(mmproj)} if mmproj else start


def servable_exports(run_dir: str | Path, subprocess_mode: bool = True) -> dict[str, dict]:
    """{export name: ``start_server``'s arguments} of a run's exports that passed parity and a server can load."""
    starts = {path.name: server_start(path, m, subprocess_mode) for path, m in run_exports(run_dir)}
    return {name: start for name, start in starts.items() if start is not None}


def export_model_id(run_dir: str | Path, export_name: str) -> str:
    return f"{Path(run_dir).name}:{export_name}"


class ExportChatSection(W.VBox):
    """Pick a run, its exports (and its adapter), serve them and put them in the chat panel's choices."""

    def __init__(self, chat: ChatTarget, runs_dir: str = "runs", subprocess_mode: bool = True):
        self.chat = chat
        self.subprocess_mode = subprocess_mode
        self.servers: dict[str, object] = {}  # model id -> ServerHandle of an export this section started
        self.runs_dir = W.Text(value=runs_dir, description="runs dir", style={"description_width": "60px"})
        self.run = W.Dropdown(
            options=[], description="run", style={"description_width": "60px"}, layout=W.Layout(width="320px")
        )
        self.exports = W.SelectMultiple(
            options=[],
            rows=3,
            description="exports",
            style={"description_width": "60px"},
            layout=W.Layout(width="320px"),
        )
        self.with_adapter = W.Checkbox(
            value=True,
            description="and the run's adapter (on the chat's server)",
            indent=False,
            layout=W.Layout(width="auto"),
        )  # a checkbox is 300 px by default: the label was cut
        self.serve_button = W.Button(description="Serve and compare", icon="server", layout=W.Layout(width="180px"))
        self.serve_button.add_class("wb-serve-exports")
        self.refresh_button = W.Button(description="Refresh", icon="refresh")
        self.status = W.HTML()
        self.run.observe(lambda _: self._list_exports(), names="value")
        self.refresh_button.on_click(lambda _: self.refresh())
        self.serve_button.on_click(lambda _: self.serve())
        self._task: asyncio.Future | None = None
        super().__init__(
            [
                W.HTML("<b>Exports of a run</b> (fp32 merged vs int8 vs GGUF vs the adapter)"),
                W.HBox([self.runs_dir, self.refresh_button]),
                W.HBox([self.run, self.exports]),
                W.HBox([self.with_adapter, self.serve_button]),
                self.status,
            ]
        )
        self.add_class("wb-export-chat")
        self.refresh()

    def refresh(self) -> list[str]:
        root = Path(self.runs_dir.value)
        runs = [p.name for p in run_dirs(root) if servable_exports(p) or has_adapter(p)]
        current = self.run.value
        self.run.options = runs
        self.run.value = current if current in runs else (runs[0] if runs else None)
        self._list_exports()
        if not runs:  # e.g. the panel was made before its first run finished
            self.status.value = (
                f"<small>{NO_RUNS_YET} in {html.escape(str(root))} yet: Refresh when one has finished</small>"
            )
        elif NO_RUNS_YET in self.status.value:
            self.status.value = ""
        return runs

    def _list_exports(self) -> None:
        names = list(servable_exports(Path(self.runs_dir.value) / self.run.value)) if self.run.value else []
        self.exports.options = names
        self.exports.value = tuple(n for n in names if n in ("merged-float32", "int8-dynamic")) or tuple(names[:2])

    def _start_servers(self, run_dir: Path, names: list[str], adapter: bool) -> tuple[dict, list[str]]:
        """In a worker thread: start a server per export (and add the adapter); returns handles and problems."""
        from ..serve import start_server

        starts = servable_exports(run_dir, self.subprocess_mode)
        started, problems = {}, []
        for name in names:
            model_id = export_model_id(run_dir, name)
            if model_id in self.servers:
                started[model_id] = self.servers[model_id]
                continue
            if name not in starts:  # removed, or re-exported and failed, since it was listed
                problems.append(f"{name}: no longer a passed export of {run_dir.name} (Refresh)")
                continue
            try:
                handle = start_server(**starts[name], model_id=model_id, port=0, wait=False, log_level="warning")
                started[model_id] = handle.wait_ready()
            except Exception as err:  # noqa: BLE001 - shown in the section; the other exports still start
                problems.append(f"{name}: {type(err).__name__}: {err}")
        if adapter:
            try:
                self.chat.add_run_adapter(run_dir)
            except Exception as err:  # noqa: BLE001 - shown in the section; the exports are still offered
                problems.append(f"adapter: {type(err).__name__}: {err}")
        return started, problems

    def _show(self, run_dir: Path, started: dict, problems: list[str], adapter: bool) -> list[str]:
        """On the loop: the served exports (and the adapter) become the chat's selected models."""
        self.servers.update(started)
        adapter_served = adapter and not any(p.startswith("adapter:") for p in problems)
        ids = self.chat.offer_models(started, [run_dir.name] if adapter_served else [])
        self.serve_button.disabled = False
        self.status.value = (f"serving {html.escape(', '.join(ids))}" if ids else "") + "".join(
            f"<div style='color:{RED}'>{html.escape(p)}</div>" for p in problems
        )
        return ids

    def serve(self) -> list[str] | None:
        """Button handler: in a kernel, start the servers in a thread and return at once; without a loop, serve
        synchronously and return the model ids now selected in the chat."""
        if not self.run.value:
            self.status.value = (
                f"<span style='color:{RED}'>no run with exports in {html.escape(self.runs_dir.value)}</span>"
            )
            return None
        run_dir, names, adapter = (
            Path(self.runs_dir.value) / self.run.value,
            list(self.exports.value),
            self.with_adapter.value,
        )
        self.serve_button.disabled = True
        self.status.value = f"starting {len(names)} server(s)..."
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return self._show(run_dir, *self._start_servers(run_dir, names, adapter), adapter)

        async def in_background() -> list[str]:
            started, problems = await loop.run_in_executor(None, self._start_servers, run_dir, names, adapter)
            return self._show(run_dir, started, problems, adapter)

        self._task = loop.create_task(in_background())
        return None

    async def served(self) -> list[str]:
        """``await section.served()``: the model ids the Serve button added."""
        return await self._task if self._task is not None else []

    def stop_servers(self) -> None:
        """Stop the export servers this section started."""
        for model_id, handle in list(self.servers.items()):
            handle.stop()
            self.chat.remove_endpoint(model_id)
        self.servers.clear()
