"""The recorder panel: demonstrate a task on a phone in JupyterLab, a click on its screen at a time.

The phone's screen is an image (``PhoneScreen``, an anywidget): a click on it is a Tap at that point on AutoGLM's
0-999 grid (or a Double Tap / Long Press, as the gesture toggle says), holding the button down for over 0.6 s is a
Long Press, and a drag is a Swipe from where it started to where it ended. Buttons do the rest: Swipe up / down /
left / right, Type (the text box), Back, Home, Launch (the app list), Wait, Finish (with a message), Undo (the last
step). The thought box gives the next step its reasoning (optional). Every step goes through
``workbench.agent.demonstrate.Demonstrator`` (the panel only calls it), which saves each finished demonstration as an
episode in the panel's folder; Write rows turns them into training rows. The phone is the simulated one
(``device="sim"``) or a real one (``device="adb:SERIAL"``, through the ADB bridge).

Clicks reach the kernel only while it is idle: record in a cell of its own, not while a cell is running.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

import anywidget
import ipywidgets as W
import traitlets

from ..agent.demonstrate import DIRECTIONS, DemonstrationError, Demonstrator
from ..image_io import image_data_url
from ..phone.sim import PHONE_SIZE
from ..phone.tasks import TASKS, PhoneTask

LONG_PRESS_MS = 600  # a click held at least this long is a Long Press
DRAG_UNITS = 30  # a drag this far (grid units) is a Swipe, not a click

_ESM = """
function render({ model, el }) {
  const box = document.createElement("div");
  box.className = "wb-phone";
  const img = document.createElement("img");
  img.className = "wb-phone-screen";
  img.draggable = false;
  img.style.cursor = "crosshair";
  img.style.border = "1px solid #999";
  img.style.borderRadius = "8px";
  img.style.touchAction = "none";
  img.style.imageRendering = "pixelated";
  const where = document.createElement("div");
  where.className = "wb-phone-where";
  where.style.font = "11px monospace";
  where.style.color = "#555";
  const hint = "click: tap, hold: long press, drag: swipe";
  where.textContent = hint;
  const draw = () => {
    img.src = model.get("src");
    img.style.width = model.get("width") + "px";
    where.textContent = hint;  // the phone answered
  };
  draw();
  model.on("change:src", draw);
  model.on("change:frame", draw);  // redrawn, the same screen or not: the step was handled
  model.on("change:width", draw);
  const grid = (e) => {  // the point on the screenshot itself (inside the border), on the 0-999 grid
    const r = img.getBoundingClientRect();
    const x = Math.floor((e.clientX - r.left - img.clientLeft) / img.clientWidth * 1000);
    const y = Math.floor((e.clientY - r.top - img.clientTop) / img.clientHeight * 1000);
    return [Math.max(0, Math.min(999, x)), Math.max(0, Math.min(999, y))];
  };
  let down = null;
  img.addEventListener("pointerdown", (e) => {
    e.preventDefault();
    down = { point: grid(e), time: Date.now() };
    img.setPointerCapture(e.pointerId);
  });
  img.addEventListener("pointermove", (e) => {
    const p = grid(e);
    where.textContent = down ? `drag from [${down.point}] to [${p}]` : `x ${p[0]}, y ${p[1]}`;
  });
  img.addEventListener("pointerup", (e) => {
    if (!down) return;
    const p = grid(e);
    const moved = Math.hypot(p[0] - down.point[0], p[1] - down.point[1]);
    const held = Date.now() - down.time;
    if (moved >= model.get("drag_units")) {
      model.send({ gesture: "swipe", start: down.point, end: p });
    } else {
      model.send({ gesture: held >= model.get("long_press_ms") ? "long_press" : "click", point: down.point });
    }
    where.textContent = "sent; waiting for the phone...";
    down = null;
  });
  img.addEventListener("pointerleave", () => { if (!down) where.textContent = hint; });
  box.append(img, where);
  el.append(box);
}
export default { render };
"""


class PhoneScreen(anywidget.AnyWidget):
    """A phone screenshot that reports where it is clicked, held or dragged, on the 0-999 grid: ``on_gesture(f)``
    calls ``f({"gesture": "click" | "long_press", "point": [x, y]})`` or ``f({"gesture": "swipe", "start": [x, y],
    "end": [x, y]})``."""

    _esm = _ESM
    src = traitlets.Unicode("").tag(sync=True)
    width = traitlets.Int(270).tag(sync=True)
    long_press_ms = traitlets.Int(LONG_PRESS_MS).tag(sync=True)
    drag_units = traitlets.Int(DRAG_UNITS).tag(sync=True)
    frame = traitlets.Int(0).tag(sync=True)  # counts the redraws (a step that changed nothing redraws too)

    def __init__(self, width: int = 270, **kwargs):
        super().__init__(width=width, **kwargs)
        self._handlers = []
        self.on_msg(lambda _widget, content, _buffers: self.gesture(content))

    def show(self, png: bytes) -> None:
        self.src = image_data_url(png)
        self.frame += 1

    def on_gesture(self, handler) -> None:
        self._handlers.append(handler)

    def gesture(self, content: dict) -> None:
        """What the browser sends on a click, hold or drag (tests call it as the page would)."""
        for handler in self._handlers:
            handler(content)


def _device(device, size, adb_host: str, adb_port: int):
    if device is None or device == "sim":
        return None  # the Demonstrator's own simulated phone
    if isinstance(device, str):
        from ..agent.evaluate import parse_device
        from ..phone.adb import AdbPhone

        kind, serial = parse_device(device)
        return AdbPhone(serial, host=adb_host, port=adb_port)
    return device


def _button(label: str, css: str, icon: str = "", width: str = "auto") -> W.Button:
    b = W.Button(description=label, icon=icon, layout=W.Layout(width=width))
    b.add_class(css)
    return b


class RecorderPanel(W.VBox):
    """Demonstrate tasks on a phone; each finished demonstration is saved as an episode.

    Args:
        folder: the episode folder demonstrations are saved in.
        device: ``"sim"`` (default: a simulated phone), ``"adb:SERIAL"`` (a real phone) or a device object.
        size: the simulated phone's size in pixels.
        width: the screen's width on the page, in pixels.
        tasks: the tasks offered (the simulated phone judges them on its final state).
        adb_host, adb_port: the ADB server of a real phone.
    """

    def __init__(
        self,
        folder: str | Path = "demonstrations",
        device=None,
        size: tuple[int, int] = PHONE_SIZE,
        width: int = 270,
        tasks: Sequence[PhoneTask] = TASKS,
        adb_host: str = "127.0.0.1",
        adb_port: int = 5037,
    ):
        self.demonstrator = Demonstrator(folder, _device(device, size, adb_host, adb_port), size, tasks)
        sim = self.demonstrator.judges_state
        self.task = W.Combobox(
            placeholder="the task, as the agent will be told it",
            ensure_option=False,
            options=[t.instruction for t in tasks] if sim else [],
            layout=W.Layout(width="420px"),
        )
        self.task.add_class("wb-recorder-task")
        self.start_button = _button("Start", "wb-recorder-start", "play")
        self.discard_button = _button("Discard", "wb-recorder-discard", "trash")
        self.screen = PhoneScreen(width)
        self.thought = W.Textarea(
            placeholder="your reasoning for the next step (optional)", rows=2, layout=W.Layout(width="330px")
        )
        self.thought.add_class("wb-recorder-thought")
        self.click_as = W.ToggleButtons(
            options=["Tap", "Double Tap", "Long Press"],
            value="Tap",
            description="a click:",
            style={"button_width": "100px", "description_width": "60px"},
        )
        self.swipes = {d: _button(f"Swipe {d}", f"wb-recorder-swipe-{d}", width="98px") for d in DIRECTIONS}
        self.text = W.Text(placeholder="text to type", layout=W.Layout(width="230px"))
        self.text.add_class("wb-recorder-text")
        self.type_button = _button("Type", "wb-recorder-type", "keyboard", "90px")
        self.back_button = _button("Back", "wb-recorder-back", "arrow-left", "98px")
        self.home_button = _button("Home", "wb-recorder-home", "home", "98px")
        self.wait_button = _button("Wait", "wb-recorder-wait", "clock-o", "98px")
        self.app = W.Dropdown(options=self.demonstrator.apps(), layout=W.Layout(width="230px"))
        self.app.add_class("wb-recorder-app")
        self.launch_button = _button("Launch", "wb-recorder-launch", "rocket", "90px")
        self.message = W.Text(placeholder="what was done (finish's message)", layout=W.Layout(width="230px"))
        self.message.add_class("wb-recorder-message")
        self.finish_button = _button("Finish", "wb-recorder-finish", "flag-checkered", "90px")
        self.undo_button = _button("Undo last step", "wb-recorder-undo", "undo", "150px")
        self.rows_button = _button("Write rows", "wb-recorder-rows", "save", "150px")
        self.steps_view = W.HTML()
        self.steps_view.add_class("wb-recorder-steps")
        self.status = W.HTML()
        self.status.add_class("wb-recorder-status")
        self._wire()
        controls = self._controls()
        where = "the simulated phone" if sim else f"the phone {getattr(self.demonstrator.device, 'serial', '')}"
        super().__init__(
            [
                W.HTML(
                    f"<b>Record a demonstration</b> on {html.escape(where)}; saved to "
                    f"<code>{html.escape(str(self.demonstrator.folder))}</code>"
                ),
                W.HBox([self.task, self.start_button, self.discard_button]),
                W.HBox([self.screen, controls]),
                self.status,
            ],
            layout=W.Layout(border="1px solid #ccc", padding="6px", width="100%"),
        )
        self.add_class("wb-recorder-panel")
        self.refresh()

    def _controls(self) -> W.VBox:
        """The column right of the screen: the reasoning, the click kind, every action's button, undo and rows."""
        return W.VBox(
            [
                self.thought,
                self.click_as,
                W.HBox([self.swipes["up"], self.swipes["down"], self.swipes["left"], self.swipes["right"]]),
                W.HBox([self.text, self.type_button]),
                W.HBox([self.app, self.launch_button]),
                W.HBox([self.back_button, self.home_button, self.wait_button]),
                W.HBox([self.message, self.finish_button]),
                W.HBox([self.undo_button, self.rows_button]),
                self.steps_view,
            ],
            layout=W.Layout(padding="0 0 0 12px"),
        )

    # ---- wiring: every control calls the Demonstrator, then the panel shows the phone again --------------------
    def _wire(self) -> None:
        d = self.demonstrator
        self.start_button.on_click(lambda _: self._do(lambda: d.start(self.task.value), "started"))
        self.discard_button.on_click(lambda _: self._do(d.discard, "discarded"))
        self.screen.on_gesture(self._gesture)
        for direction, button in self.swipes.items():
            button.on_click(lambda _, way=direction: self._do(lambda: d.swipe_direction(way, self._thought())))
        self.type_button.on_click(lambda _: self._do(lambda: d.type_text(self.text.value, self._thought())))
        self.back_button.on_click(lambda _: self._do(lambda: d.back(self._thought())))
        self.home_button.on_click(lambda _: self._do(lambda: d.home(self._thought())))
        self.wait_button.on_click(lambda _: self._do(lambda: d.wait(1, self._thought())))
        self.launch_button.on_click(lambda _: self._do(lambda: d.launch(self.app.value or "", self._thought())))
        self.finish_button.on_click(lambda _: self._do(lambda: d.finish(self.message.value, self._thought()), "saved"))
        self.undo_button.on_click(lambda _: self._do(d.undo, "undone"))
        self.rows_button.on_click(lambda _: self._do(self.write_rows, "rows"))

    def _thought(self) -> str:
        """The thought box's text for the step being taken; the box empties for the next one."""
        text = self.thought.value.strip()
        self.thought.value = ""
        return text

    def _gesture(self, content: dict) -> None:
        d = self.demonstrator
        kind = content.get("gesture")
        if kind == "swipe":
            self._do(lambda: d.swipe(content["start"], content["end"], self._thought()))
        elif kind == "long_press":
            self._do(lambda: d.long_press(*content["point"], self._thought()))
        elif kind == "click":
            act = {"Tap": d.tap, "Double Tap": d.double_tap, "Long Press": d.long_press}[self.click_as.value]
            self._do(lambda: act(*content["point"], self._thought()))

    def _do(self, call, what: str = "step") -> None:
        """Run one call of the Demonstrator; its problem, if any, in red under the phone. The view is redrawn either
        way."""
        try:
            result = call()
        except (DemonstrationError, ValueError) as err:  # ValueError: an action the grammar refuses
            self.refresh()
            self.status.value = f"<span style='color:#c62828'>{html.escape(str(err))}</span>"
            return
        self.refresh()
        if what == "saved":
            verdict = {True: "its task's checks hold", False: "its task's checks do not hold", None: "not judged"}[
                result.success
            ]
            self._say(
                f"saved demonstration {len(self.demonstrator.demonstrations())} ({result.task}, "
                f"{len(result.steps)} steps; {verdict})",
                ok=result.success is not False,
            )
            self.message.value = ""
        elif what == "rows":
            self._say(f"{result.rows} training rows from {result.episodes} demonstrations: {result.path}")

    def _say(self, text: str, ok: bool = True) -> None:
        notes = "".join(f"<div style='color:#c62828'>{html.escape(n)}</div>" for n in self.demonstrator.notes)
        color = "#2e7d32" if ok else "#c62828"
        self.status.value = f"<div style='color:{color}'>{html.escape(text)}</div>{notes}"

    # ---- what is shown -------------------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Draw the phone's screen, the steps so far and the notes of the last call."""
        d = self.demonstrator
        self.screen.show(d.screen.png)
        self.steps_view.value = self._steps_html()
        notes = "".join(f"<div style='color:#c62828'>{html.escape(n)}</div>" for n in d.notes)
        state = (
            f"recording <b>{html.escape(d.episode.instruction)}</b>: step {len(d.steps) + 1} on "
            f"{html.escape(d.screen.app)}"
            if d.recording
            else "type or pick a task, then Start; a click on the screen is a step"
        )
        self.status.value = f"<div class='wb-recorder-state'>{state}</div>{notes}"

    def _steps_html(self) -> str:
        d = self.demonstrator
        if not d.recording:
            saved = len(d.demonstrations())
            return f"<i>{saved} demonstration(s) saved in {html.escape(str(d.folder))}</i>"
        items = []
        for s in d.steps:
            context = s.index <= d.episode.context_steps
            hit = f" on {html.escape(s.element)}" if s.element else ""
            style = "color:#888" if context else ("" if s.valid else "color:#c62828")
            who = " (the model's)" if context else ""
            items.append(f"<li style='{style}'><code>{html.escape(s.answer)}</code>{hit}{who}</li>")
        return (
            (
                "<div style='font-size:12px'>steps so far:</div><ol style='font-size:12px;margin:0'>"
                + "".join(items)
                + "</ol>"
            )
            if items
            else "<i>no step yet</i>"
        )

    # ---- the Python side of the buttons --------------------------------------------------------------------------
    def correct(self, episode, step: int, screens: str | Path | None = None) -> None:
        """Continue ``episode`` from its step ``step`` (the phone put into that step's state): what the episodes view
        calls."""
        self._do(lambda: self.demonstrator.correct(episode, step, screens), "correcting")
        if self.demonstrator.recording:
            self.task.value = episode.instruction
            self._say(
                f"correcting {episode.model}'s episode of {episode.task} from step {step}: the phone shows that "
                "step's screen; demonstrate the rest, then Finish"
            )

    def write_rows(self, out: str | Path | None = None, observation: str | None = None):
        """The folder's demonstrations as training rows (default ``FOLDER/rows.jsonl``)."""
        return self.demonstrator.write_rows(out or self.demonstrator.folder / "rows.jsonl", observation)
