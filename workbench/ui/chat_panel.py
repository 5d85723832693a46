"""The chat compare panel: one prompt to 2-3 served models, answers streaming side by side.

Answers stream through langchain-openai (``workbench.serve.client.chat_model``, which keeps the
reasoning) with ``astream`` in asyncio tasks on the kernel's loop, so the kernel stays free and
widgets are only touched from that loop. Reasoning goes in a collapsible section above each answer.
An image picker (``ImagePicker``: upload, or a sample phone screenshot) attaches one image, shown as a
thumbnail and sent to every compared model as a base64 data: URL. Below, whole phone-agent episodes of two models
replay side by side (``EpisodesSection``).
"""

from __future__ import annotations

import asyncio
import html
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import ipywidgets as W

from ..serve.client import ChatReply, absorb_chunk, chat_model, served_models
from ..serve.remote import prompt_messages
from .chat_exports import ExportChatSection
from .episodes_panel import EpisodesSection
from .view_helpers import ChatImage, Throttle, sample_screenshots

MAX_MODELS = 3
THINKING = {"template default": None, "on": True, "off": False}  # the thinking choice -> chat_model(enable_thinking=)
REDRAWS_PER_S = 4


class AnswerColumn(W.VBox):
    def __init__(self, model: str):
        self.model = model
        self.header = W.HTML(f"<b>{html.escape(model)}</b> <small>...</small>")
        self.reasoning = W.HTML()
        self.reasoning_box = W.Accordion(children=[self.reasoning], titles=("reasoning",), selected_index=None)
        self.reasoning_box.layout.display = "none"
        self.answer = W.HTML()
        self.answer.add_class("wb-answer")
        super().__init__(
            [self.header, self.reasoning_box, self.answer],
            layout=W.Layout(border="1px solid #ccc", padding="6px", width="100%"),
        )
        self.add_class("wb-answer-column")

    def show(self, reply: ChatReply, done: bool) -> None:
        status = f"{reply.seconds:.1f} s" if done else "streaming..."
        self.header.value = f"<b>{html.escape(reply.model)}</b> <small class='wb-answer-status'>{status}</small>"
        if reply.reasoning:
            self.reasoning_box.layout.display = None
            self.reasoning.value = (
                f"<div style='color:#777;font-style:italic;white-space:pre-wrap'>{html.escape(reply.reasoning)}</div>"
            )
        text = html.escape(reply.content)
        if reply.error:
            text += f"<div style='color:#c62828'>{html.escape(reply.error)}</div>"
        self.answer.value = f"<div class='wb-answer-text' style='white-space:pre-wrap'>{text}</div>"


class ChatComparePanel(W.VBox):
    """Pick 2-3 model ids the server lists, type a prompt, read the answers side by side.

    Args:
        server: a ``ServerHandle`` to ask (or ``base_url``: an OpenAI-compatible server's URL).
        models: the model ids offered before the server is asked (Refresh models lists the served ones).
        max_tokens: the answers' length cap at the start.
        runs_dir: where the exports and episodes sections look for runs.
    """

    def __init__(
        self,
        server: Any = None,
        base_url: str | None = None,
        models: Iterable[str] = (),
        max_tokens: int = 128,
        runs_dir: str = "runs",
    ):
        self.server = server
        self.base_url = base_url
        self.endpoints: dict[str, Any] = {}  # model id -> the server of a model served apart (an export)
        self.replies: dict[str, ChatReply] = {}
        self.columns: dict[str, AnswerColumn] = {}
        self._task: asyncio.Task | None = None
        self.models = W.SelectMultiple(
            options=list(models),
            description="models",
            rows=4,
            style={"description_width": "60px"},
            layout=W.Layout(width="420px"),
        )
        self.refresh_button = W.Button(description="Refresh models", icon="refresh")
        self.refresh_button.on_click(lambda _: self.refresh_models())
        self.prompt = W.Textarea(placeholder="Ask the selected models...", layout=W.Layout(width="98%", height="60px"))
        # Option values are labels, not None/True/False: a Dropdown reads value None as "nothing selected"
        # and would start blank instead of on "template default".
        self.thinking = W.Dropdown(
            options=list(THINKING),
            value="template default",
            description="thinking",
            style={"description_width": "60px"},
        )
        self.max_tokens = W.BoundedIntText(
            value=max_tokens,
            min=1,
            max=32768,
            description="max tokens",
            style={"description_width": "80px"},
            layout=W.Layout(width="180px"),
        )
        self.ask_button = W.Button(description="Ask", icon="paper-plane", button_style="primary")
        self.ask_button.add_class("wb-ask")
        self.ask_button.on_click(lambda _: self.ask())
        self.message = W.HTML()
        self.answers = W.GridBox(layout=W.Layout(grid_template_columns="repeat(2, 1fr)", grid_gap="6px"))
        self.answers.add_class("wb-answers")
        self.image_picker = ImagePicker()
        self.replay = ReplayRows(self)
        super().__init__(
            [
                W.HTML("<b>Chat compare</b>"),
                W.HBox([self.models, self.refresh_button]),
                self.prompt,
                self.image_picker,
                W.HBox([self.thinking, self.max_tokens, self.ask_button, self.message]),
                self.answers,
                self.replay,
            ]
        )
        self.add_class("wb-chat-panel")
        if server is not None and not self.models.options:
            self.refresh_models()

        # ---- exports of a run, each on a server of its own (workbench/ui/chat_exports.py) ----
        self.export_models = ExportChatSection(self, runs_dir)
        # ---- whole phone-agent episodes of two models, side by side (workbench/ui/episodes_panel.py) ----
        self.episodes = EpisodesSection(runs_dir)
        self.children = (*self.children, self.export_models, self.episodes)

    def add_endpoint(self, model_id: str, server: Any, select: bool = True) -> None:
        """Offer a model that another server serves (an export): asked there, listed beside this server's."""
        self.endpoints[model_id] = server
        self.add_model(model_id, select)

    def remove_endpoint(self, model_id: str) -> None:
        self.endpoints.pop(model_id, None)
        self.models.options = [m for m in self.models.options if m != model_id]

    def add_run_adapter(self, run_dir: Path) -> str:
        """Serve ``run_dir``'s adapter on this panel's server (once) and return its model id, the run's name.
        Touches no widget: the export section calls it from a worker thread."""
        if self.server is None:
            raise RuntimeError("the chat panel has no server to add the adapter to")
        if run_dir.name not in self.server.models():
            self.server.add_adapter(run_dir.name, str(run_dir))
        return run_dir.name

    def offer_models(self, endpoints: dict[str, Any], served_here: list[str]) -> list[str]:
        """Offer models served apart (``endpoints``: model id -> server) and models of this panel's server, and
        select them (the last MAX_MODELS: the panel asks 2 to 3 at once). Returns the offered ids."""
        for model_id, server in endpoints.items():
            self.add_endpoint(model_id, server, select=False)
        for model_id in served_here:
            if model_id not in self.models.options:
                self.add_model(model_id, select=False)
        ids = [*endpoints, *served_here]
        if ids:
            self.models.value = tuple(ids[-MAX_MODELS:])
        return ids

    def _conn(self, model: str | None = None) -> dict:
        if model in self.endpoints:
            return {"server": self.endpoints[model]}
        return (
            {"server": self.server}
            if self.server is not None
            else ({"base_url": self.base_url} if self.base_url else {})
        )

    def refresh_models(self) -> list[str]:
        try:
            ids = served_models(**self._conn())
            ids += [m for m in self.endpoints if m not in ids]
        except Exception as err:  # noqa: BLE001 - no server yet: say so in the panel
            self.message.value = f"<span style='color:#c62828'>cannot list models: {html.escape(str(err))}</span>"
            return list(self.models.options)
        selected = [m for m in self.models.value if m in ids]
        self.models.options = ids
        self.models.value = tuple(selected or ids[:2])
        return ids

    def add_model(self, model_id: str, select: bool = True) -> None:
        before = [m for m in self.models.value if m != model_id]
        if model_id not in self.models.options:
            self.models.options = list(self.models.options) + [model_id]  # resets the selection
        self.models.value = tuple(before[: MAX_MODELS - 1] + [model_id]) if select else tuple(before)

    def _start(self, prompt: str | None, models: Iterable[str] | None) -> tuple[str, list[str]] | None:
        prompt = self.prompt.value if prompt is None else prompt
        models = list(dict.fromkeys(models if models is not None else self.models.value))
        if not (2 <= len(models) <= MAX_MODELS) or not prompt.strip():
            self.message.value = (
                f"<span style='color:#c62828'>pick 2 to {MAX_MODELS} models and type a prompt "
                f"({len(models)} picked)</span>"
            )
            return None
        self.prompt.value = prompt
        self.message.value = ""
        self.replies = {m: ChatReply(m) for m in models}
        self.columns = {m: AnswerColumn(m) for m in models}
        self.answers.layout.grid_template_columns = f"repeat({len(models)}, 1fr)"
        self.answers.children = list(self.columns.values())
        return prompt, models

    def ask(self, prompt: str | None = None, models: Iterable[str] | None = None) -> dict[str, ChatReply] | None:
        """Button handler: in a kernel, start streaming and return at once; without a loop, answer synchronously."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.ask_async(prompt, models))
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._task = loop.create_task(self.ask_async(prompt, models))
        return None

    async def ask_async(
        self, prompt: str | None = None, models: Iterable[str] | None = None, messages: list | None = None
    ) -> dict[str, ChatReply]:
        """Stream every model's answer at once; returns {model: ChatReply} when all are done. ``messages``: the whole
        conversation to send (a replayed row's), ``prompt`` then being only what the prompt box shows."""
        started = self._start(prompt, models)
        if started is None:
            return {}
        prompt, models = started
        self.ask_button.disabled = True
        messages = messages or prompt_messages(prompt, None, self.image_picker.data_urls())
        throttle = Throttle(1.0 / REDRAWS_PER_S)

        async def one(model: str) -> None:
            reply = self.replies[model]
            llm = chat_model(
                model,
                enable_thinking=THINKING[self.thinking.value],
                max_tokens=self.max_tokens.value,
                **self._conn(model),
            )
            t0 = time.monotonic()
            try:
                async for chunk in llm.astream(messages):
                    absorb_chunk(reply, chunk)
                    reply.seconds = time.monotonic() - t0
                    if throttle.ready():
                        for m, col in self.columns.items():
                            col.show(self.replies[m], done=False)
            except Exception as err:  # noqa: BLE001 - shown in its column; the others keep going
                reply.error = f"{type(err).__name__}: {err}"
            reply.seconds = time.monotonic() - t0
            self.columns[model].show(reply, done=True)

        try:
            await asyncio.gather(*(one(m) for m in models))
        finally:
            self.ask_button.disabled = False
        for m, col in self.columns.items():
            col.show(self.replies[m], done=True)
        return self.replies

    async def answered(self) -> dict[str, ChatReply]:
        """Wait for the answers the Ask button started (``await wb.chat.answered()``)."""
        if self._task is not None:
            await self._task
        return self.replies


# ---- image picker (vision-language models) ------------------------------------------------------------

NO_SAMPLE = "(no sample)"


class ImagePicker(W.VBox):
    """One image for the prompt: uploaded, or a sample phone screenshot; a thumbnail shows what will be sent.
    The image itself is a ``view_helpers.ChatImage`` (plain Python); this widget only picks and shows it."""

    def __init__(self):
        self.image: ChatImage | None = None
        self.from_sample = False  # whether the image is the chosen sample (choosing none then drops it)
        self.samples = sample_screenshots()
        self.upload = W.FileUpload(accept="image/*", multiple=False, description="Upload image")
        self.upload.observe(lambda change: self._uploaded(change["new"]), names="value")
        self.sample = W.Dropdown(
            options=[NO_SAMPLE] + list(self.samples),
            value=NO_SAMPLE,
            description="or sample",
            style={"description_width": "70px"},
            layout=W.Layout(width="300px"),
        )
        self.sample.observe(lambda change: self.choose_sample(change["new"]), names="value")
        self.clear_button = W.Button(description="No image", icon="times")
        self.clear_button.on_click(lambda _: self.clear())
        self.thumbnail = W.Image(
            format="png", layout=W.Layout(max_width=f"{ChatImage.THUMBNAIL_SIDE}px", display="none")
        )
        self.status = W.HTML("<small>no image: text only</small>")
        super().__init__([W.HBox([self.upload, self.sample, self.clear_button]), W.HBox([self.thumbnail, self.status])])
        self.add_class("wb-image-picker")

    def data_urls(self) -> list[str]:
        """What the prompt carries: the picked image's data: URL, or nothing."""
        return [self.image.data_url] if self.image is not None else []

    def choose_sample(self, name: str) -> None:
        if name == NO_SAMPLE:
            if self.from_sample:
                self.clear()
            return
        if self.sample.value != name:
            self.sample.value = name  # its observer comes back here
            return
        self._use(lambda: ChatImage.from_source(self.samples[name]), from_sample=True)

    def use_upload(self, name: str, content: bytes) -> None:
        self._use(lambda: ChatImage.from_source(bytes(content), name), from_sample=False)

    def clear(self) -> None:
        self.image, self.from_sample = None, False
        self.thumbnail.layout.display = "none"
        self.status.value = "<small>no image: text only</small>"
        self.sample.value = NO_SAMPLE

    def _uploaded(self, files) -> None:
        for f in files[-1:]:  # ipywidgets 8: a tuple of {"name", "content", ...}
            self.use_upload(f["name"], f["content"])

    def _use(self, make, from_sample: bool) -> None:
        try:
            image = make()
        except ValueError as err:  # not an image, unreadable: said here, and the previous choice is dropped
            self.clear()
            self.status.value = f"<span style='color:#c62828'>{html.escape(str(err))}</span>"
            return
        self.image, self.from_sample = image, from_sample
        if not from_sample:
            self.sample.value = NO_SAMPLE  # from_sample is False already: the observer leaves the upload
        self.thumbnail.value = image.thumbnail
        self.thumbnail.layout.display = None
        self.status.value = (
            f"<small><b>{html.escape(image.name)}</b> {image.width}x{image.height}, sent to every "
            "compared model</small>"
        )


# ---- replay held-out rows of a task set -------------------------------------------------------------------


def _verdict_html(verdict: dict) -> str:
    """One model's verdict: pass/fail (the task's ``ok`` or ``exact``) and the flags and figures behind it; a
    request that failed is no verdict: its reason is shown instead."""
    if verdict.get("error"):
        return f"<b style='color:#c62828'>error</b> <small>{html.escape(str(verdict['error']))}</small>"
    passed = verdict.get("ok", verdict.get("exact"))
    mark = (
        "<b style='color:#2e7d32'>pass</b>"
        if passed
        else "<b style='color:#c62828'>fail</b>"
        if passed is not None
        else ""
    )
    details = ", ".join(
        f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}"
        for k, v in verdict.items()
        if k not in ("ok", "exact") and v is not None and not isinstance(v, (list, dict))
    )
    return f"{mark} <small>{html.escape(details)}</small>"


class ReplayRows(W.VBox):
    """Replay a held-out row of a task set (``workbench eval``'s tasks) to the selected models: the row's
    conversation is asked as in the chat above, then the expected answer and each model's verdict are shown."""

    def __init__(self, chat: ChatComparePanel):
        from ..eval import task_names

        self.chat = chat
        self.examples: list = []
        self.verdicts: dict[str, dict] = {}
        names = [n for n in task_names() if not getattr(_task(n), "needs_model", False)]  # scored on answers
        self.task = W.Dropdown(
            options=names,
            value="identity" if "identity" in names else names[0],
            description="task",
            style={"description_width": "40px"},
            layout=W.Layout(width="300px"),
        )
        self.row = W.Dropdown(description="row", style={"description_width": "40px"}, layout=W.Layout(width="520px"))
        self.replay_button = W.Button(description="Replay row", icon="history")
        self.replay_button.add_class("wb-replay")
        self.expected = W.HTML()
        self.result = W.HTML()
        self.result.add_class("wb-replay-verdicts")
        self.task.observe(lambda _: self.load_rows(), names="value")
        self.replay_button.on_click(lambda _: self.replay())
        super().__init__(
            [
                W.HTML("<b>Replay held-out rows</b>"),
                W.HBox([self.task, self.row, self.replay_button]),
                self.expected,
                self.result,
            ]
        )
        self.add_class("wb-replay-panel")
        self.load_rows()

    def load_rows(self) -> list:
        """The rows of the picked task's held-out set, as the row picker's options."""
        from ..eval import load_eval_examples

        task = _task(self.task.value)
        try:
            self.examples = load_eval_examples(task.default_data)
        except ValueError as err:  # DataError: say so instead of failing the panel
            self.examples = []
            self.expected.value = f"<span style='color:#c62828'>{html.escape(str(err))}</span>"
        self.row.options = [
            (f"{ex.index}: {_preview(_text_of(ex.messages[-1]['content']))}", i) for i, ex in enumerate(self.examples)
        ]
        self.row.value = 0 if self.examples else None  # new options leave a Dropdown blank: start on the first row
        return self.examples

    def replay(self, row: int | None = None, models: Iterable[str] | None = None) -> dict[str, dict] | None:
        """Button handler: in a kernel, start and return at once; without a loop, replay synchronously and return
        {model: verdict}."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.replay_async(row, models))
        loop.create_task(self.replay_async(row, models))
        return None

    async def replay_async(self, row: int | None = None, models: Iterable[str] | None = None) -> dict[str, dict]:
        from ..serve.remote import ModelReply

        if row is not None:
            self.row.value = row
        if self.row.value is None:  # the task's set has no rows (its error is shown above)
            self.result.value = "<span style='color:#c62828'>no row to replay: pick a task with held-out rows</span>"
            return {}
        task, example = _task(self.task.value), self.examples[self.row.value]
        self.expected.value = (
            f"<b>expected</b> <span class='wb-replay-expected' style='white-space:pre-wrap'>"
            f"{html.escape(example.reference)}</span>"
        )
        self.result.value = ""
        # the prompt box shows the row's text; the whole conversation, its screenshots inline, is what is sent
        replies = await self.chat.ask_async(
            _text_of(example.messages[-1]["content"]), models, messages=list(example.messages)
        )
        # the row's images travel inline (load_eval_examples read them); a failed request is not scored
        self.verdicts = {
            m: {"error": r.error} if r.error else task.score(example, ModelReply(r.content, r.reasoning))
            for m, r in replies.items()
        }
        self.result.value = "".join(
            f"<div><b>{html.escape(m)}</b>: {_verdict_html(v)}</div>" for m, v in self.verdicts.items()
        )
        return self.verdicts


def _task(name: str):
    from ..eval import get_task

    return get_task(name)


def _text_of(content) -> str:
    """A message's text: the string, or its text parts joined (images, data: URLs, left out)."""
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content if p.get("type") == "text")


def _preview(text: str, width: int = 70) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 3] + "..."
