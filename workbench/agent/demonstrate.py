"""A person's demonstrations on a phone, recorded as episodes: the training data of an agent for your own app.

``Demonstrator(folder, device)`` drives a phone (the simulated ``SimPhone``, a real one through ``AdbPhone``, anything
with their interface) one action at a time, as the agent would: ``start(task)``, then ``tap(x, y)``,
``long_press``, ``double_tap``, ``swipe`` (or ``swipe_direction``), ``type_text``, ``back``, ``home``, ``launch``,
``wait``, each with an optional thought, ``undo()`` the last one, and ``finish(message)``, which appends the
demonstration to ``folder`` as an episode of model ``demonstration`` (``workbench.agent.store``: the screenshot and
the screen's tree each step showed, the action, what it did, the element it hit and its box). Points are on
AutoGLM's 0-999 grid. ``write_rows(out)`` turns the folder's demonstrations into training rows through the one
recorder of rows (``agent.record.record_rows``, as ``workbench agent record`` does), in the runtime format the agent
is trained and served in.

``correct(episode, step)`` continues a model's episode from the step it got wrong: on the simulated phone the phone
is put back into that step's state (the task's start, then the episode's actions before the step, each screen
checked against the stored one); the model's earlier steps stay as context (``Episode.context_steps``), the person
demonstrates the rest, and only the person's steps become training targets.

A step's thought is optional; without one its reasoning says what was done (``Tap "Wi-Fi".``). On the simulated
phone a demonstration of a built-in task is judged by the task's final-state checks at finish (a demonstration that
fails them is kept, marked failed, and ``write_rows`` leaves it out); a task typed as free text, and any task on a
real phone, is not judged (``success`` None) and is recorded as demonstrated.
"""

from __future__ import annotations

import copy
import datetime
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..image_io import image_from_bytes, png_bytes
from ..phone.actions import GRID, POINT_ACTIONS, Action, format_action, hit_box, parse_action
from ..phone.conversation import assistant_target
from ..phone.openautoglm import runtime_action
from ..phone.sim import PHONE_SIZE, SimPhone
from ..phone.tasks import TASKS, PhoneTask
from ..phone.uitree import element_line_at, tree_boxes, tree_of
from .episode import Episode, Turn
from .store import EpisodeWriter, read_episodes

MODEL = "demonstration"  # Episode.model of what a person demonstrated
OWN_TEMPLATE = "own"  # Episode.template of a task given as free text (no template of the simulator's)
DIRECTIONS = {
    "up": ((500, 700), (500, 300)),
    "down": ((500, 300), (500, 700)),  # the finger's way (AITW's sense)
    "left": ((800, 500), (200, 500)),
    "right": ((200, 500), (800, 500)),
}


class DemonstrationError(ValueError):
    """What cannot be done now, and what to do instead."""


@dataclass
class Screen:
    """What the phone shows now: the screenshot (PNG), the app on screen and its tree (None without one)."""

    png: bytes
    app: str
    tree: str | None


def launchable_apps(device) -> list[str]:
    """The app names a Launch on ``device`` can open: the simulated phone's installed apps, or a real phone's
    known packages (``AdbPhone.packages``)."""
    packages = getattr(device, "packages", None)
    if packages is not None:
        return sorted(packages)
    state = getattr(device, "state", None)
    return list(state.contents.apps) if state is not None else []


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.casefold()).strip("-")[:48] or "task"


def _describe(action: Action, element: str | None) -> str:
    """The reasoning of a step given no thought: what was done, in the grammar's words."""
    kind = action.type
    if kind in POINT_ACTIONS:
        return f'{kind} "{element}".' if element else f"{kind} at {action.args['element']}."
    if kind == "Swipe":
        return f"Swipe from {action.args['start']} to {action.args['end']}."
    if kind == "Type":
        return f'Type "{action.args["text"]}".'
    if kind == "Launch":
        return f"Launch {action.args['app']}."
    if kind == "finish":
        return "The task is done."
    return f"{kind}."


def _on_grid(point: Sequence[float]) -> list[int]:
    if len(point) != 2:
        raise DemonstrationError(f"a point is [x, y] on the 0-{GRID} grid, got {list(point)!r}")
    return [max(0, min(GRID, int(round(v)))) for v in point]


class Demonstrator:
    """Records a person's demonstrations on ``device`` (default: a simulated phone of ``size`` pixels) into the episode
    folder ``folder``. ``tasks``: the built-in tasks a task id or instruction may name (default: the simulator's)."""

    def __init__(
        self,
        folder: str | Path,
        device=None,
        size: tuple[int, int] = PHONE_SIZE,
        tasks: Sequence[PhoneTask] = TASKS,
        date: datetime.date | None = None,
    ):
        self.folder = Path(folder)
        self.device = device if device is not None else SimPhone(size)
        self.tasks = list(tasks)
        self.date = date
        self.episode: Episode | None = None  # the demonstration being recorded
        self.task: PhoneTask | None = None  # its built-in task (None: free text, or a real phone)
        self.notes: list[str] = []  # what the person should know about the last call (shown by the panel)
        self._start_state = None
        self._screen: Screen | None = None

    # ---- what the phone shows ---------------------------------------------------------------------------------
    @property
    def judges_state(self) -> bool:
        return bool(getattr(self.device, "judges_state", False))

    @property
    def screen(self) -> Screen:
        """The screen on show now (read from the phone once per action)."""
        if self._screen is None:
            try:
                tree = tree_of(self.device)
            except (ValueError, SyntaxError, OSError) as err:  # a real phone's dump that did not come or parse
                tree = None
                self.notes.append(f"no screen tree this step ({err}): the rows show the screenshot only")
            self._screen = Screen(png_bytes(self.device.screenshot()), self.device.current_app(), tree)
        return self._screen

    @property
    def steps(self) -> list[Turn]:
        return self.episode.steps if self.episode else []

    @property
    def recording(self) -> bool:
        return self.episode is not None

    def apps(self) -> list[str]:
        return launchable_apps(self.device)

    def find_task(self, text: str) -> PhoneTask | None:
        """The built-in task ``text`` names (its id or its instruction, case and space ignored); None if none."""
        key = " ".join(text.split()).casefold()
        return next((t for t in self.tasks if t.id.casefold() == key or t.instruction.casefold() == key), None)

    # ---- a demonstration --------------------------------------------------------------------------------------
    def start(self, task: str | PhoneTask, template: str | None = None) -> Episode:
        """Begin a demonstration of ``task``: a built-in task (or its id or instruction: the simulated phone starts
        from its initial state and judges the result), or any instruction as free text (the phone as it is now on a
        real phone; a fresh simulated phone). ``template``: a family name for a free-text task (default ``own``)."""
        if isinstance(task, str):
            if not task.strip():
                raise DemonstrationError("type the task first: the instruction the agent will be given")
            found = self.find_task(task)
        else:
            found = task
        self.notes = []
        if found is not None and self.judges_state:
            self._start_state = found.initial_state()
            self.device.reset(self._start_state)
        elif self.judges_state:  # a free-text task on the simulated phone: a fresh phone on its home screen
            self.device.reset()
            self._start_state = self.device.state.copy()
        else:  # a real phone stays as it is: the person brings it to where the task starts
            if found is not None:
                self.notes.append("a real phone cannot be put into the task's start state: set it up by hand")
            self._start_state = None
        self.task = found if self.judges_state else None
        instruction = found.instruction if found is not None else " ".join(task.split())
        self.episode = Episode(
            found.id if found is not None else f"{OWN_TEMPLATE}/{_slug(instruction)}",
            found.template if found is not None else (template or OWN_TEMPLATE),
            found.split if found is not None else "train",
            list(found.apps) if found is not None else [],
            instruction,
            MODEL,
            (self.date or datetime.date.today()).isoformat(),
        )
        self._screen = None
        return self.episode

    def correct(self, episode: Episode, step: int, screens: str | Path | None = None) -> Episode:
        """Continue ``episode`` (a model's, e.g. a failed one) from its step ``step`` (1-based: the first step to
        demonstrate anew): the steps before it are kept as context, and on the simulated phone the phone is put back
        into that step's state and each replayed screen is checked against the stored one (``screens``: the folder
        the episode was stored in). On a real phone put it into that state by hand."""
        if not 1 <= step <= len(episode.steps):
            raise DemonstrationError(f"step {step}: the episode has steps 1..{len(episode.steps)}")
        kept = [copy.copy(s) for s in episode.steps[: step - 1]]
        unusable = [s.index for s in kept if s.action is None or s.parse_error is not None]
        if unusable:
            raise DemonstrationError(
                f"step {unusable[0]} of the episode did not parse or failed: correct it from "
                f"step {unusable[0]} at the latest"
            )
        for s in kept:
            if s.png is None and s.screenshot is not None and screens is not None:
                s.png = (Path(screens) / s.screenshot).read_bytes()
            if s.png is None:
                raise DemonstrationError(
                    f"step {s.index} of the episode has no stored screenshot: give the folder it "
                    "was stored in (screens=)"
                )
        self.notes = []
        if self.judges_state:
            task = self.find_task(episode.task)
            if task is None:
                raise DemonstrationError(
                    f"{episode.task!r} is not one of the simulator's tasks here: the phone cannot be put into its state"
                )
            self._resize_to(episode, screens)
            self._start_state = task.initial_state()
            self.device.reset(self._start_state)
            for s in kept:
                shown = png_bytes(self.device.screenshot())
                if shown != s.png:
                    raise DemonstrationError(
                        f"the phone does not show step {s.index}'s stored screen after the episode's earlier actions "
                        "(the simulator changed since it was recorded?): demonstrate the task anew instead"
                    )
                self._redo(s)
            self.task = task
        else:
            self.notes.append(f"a real phone cannot be put back: bring it to the screen of step {step} by hand")
            self.task, self._start_state = None, None
        self.episode = Episode(
            episode.task,
            episode.template,
            episode.split,
            list(episode.apps),
            episode.instruction,
            MODEL,
            episode.date,
            episode.observation,
            steps=kept,
            context_steps=len(kept),
        )
        self._screen = None
        return self.episode

    def _resize_to(self, episode: Episode, screens) -> None:
        """A simulated phone of the stored screenshots' size (the rows of a correction show screens of one size)."""
        first = episode.steps[0]
        png = first.png
        if png is None and first.screenshot and screens is not None:
            png = (Path(screens) / first.screenshot).read_bytes()
        if png is not None:
            size = image_from_bytes(png).size
            if tuple(self.device.size) != size:
                self.device.size = size

    def _require(self) -> Episode:
        if self.episode is None:
            raise DemonstrationError("no demonstration is being recorded: start one with the task's instruction")
        return self.episode

    def act(self, action: Action | str, thought: str = "") -> Turn:
        """Execute ``action`` on the phone as the next step of the demonstration; the step keeps the screen it acted
        on. ``finish`` ends the demonstration (``finish``)."""
        episode = self._require()
        action = parse_action(action) if isinstance(action, str) else action
        if action.type == "finish":
            return self.finish(action.args["message"], thought)
        self.notes = []
        shown = self.screen
        outcome = self.device.execute(action)
        element, box = outcome.element, outcome.box
        point = action.point() if action.type in POINT_ACTIONS else None
        if point is not None and box is None and shown.tree:  # a real phone: the element from its tree
            box = hit_box(tree_boxes(shown.tree), point)
            line = element_line_at(shown.tree, point)
            element = line.split(" [", 1)[0].split(' "', 1)[0] if line else None  # its name, before its texts
        step = self._step(shown, action, thought or _describe(action, element))
        step.valid, step.effect, step.element = outcome.valid, outcome.effect, element
        step.target_box = list(box) if box is not None and point is not None else None
        episode.steps.append(step)
        self._screen = None
        if not outcome.valid:
            self.notes.append(f"the phone did nothing: {outcome.effect} (undo it, or go on)")
        return step

    def _step(self, shown: Screen, action: Action, thought: str) -> Turn:
        answer = format_action(action)
        return Turn(
            len(self.steps) + 1,
            shown.app,
            content=assistant_target(thought, answer),
            reasoning=thought,
            answer=answer,
            action=answer,
            ui_tree=shown.tree,
            png=shown.png,
        )

    def tap(self, x: float, y: float, thought: str = "") -> Turn:
        return self.act(Action("Tap", {"element": _on_grid((x, y))}), thought)

    def double_tap(self, x: float, y: float, thought: str = "") -> Turn:
        return self.act(Action("Double Tap", {"element": _on_grid((x, y))}), thought)

    def long_press(self, x: float, y: float, thought: str = "") -> Turn:
        return self.act(Action("Long Press", {"element": _on_grid((x, y))}), thought)

    def swipe(self, start: Sequence[float], end: Sequence[float], thought: str = "") -> Turn:
        return self.act(Action("Swipe", {"start": _on_grid(start), "end": _on_grid(end)}), thought)

    def swipe_direction(self, direction: str, thought: str = "") -> Turn:
        """A swipe across the middle of the screen, the finger moving ``direction`` (up: the list scrolls on)."""
        if direction not in DIRECTIONS:
            raise DemonstrationError(f"direction {direction!r}: give one of {', '.join(DIRECTIONS)}")
        start, end = DIRECTIONS[direction]
        return self.swipe(start, end, thought)

    def type_text(self, text: str, thought: str = "") -> Turn:
        if not text:
            raise DemonstrationError("type the text to enter first")
        return self.act(Action("Type", {"text": text}), thought)

    def back(self, thought: str = "") -> Turn:
        return self.act(Action("Back"), thought)

    def home(self, thought: str = "") -> Turn:
        return self.act(Action("Home"), thought)

    def launch(self, app: str, thought: str = "") -> Turn:
        if not app:
            raise DemonstrationError("pick the app to launch first")
        return self.act(Action("Launch", {"app": app}), thought)

    def wait(self, seconds: int = 1, thought: str = "") -> Turn:
        return self.act(Action("Wait", {"duration": f"{seconds} seconds"}), thought)

    def _redo(self, step: Turn) -> None:
        """Carry out a stored step's action again, as the runtime read it when it ran (none: it changed nothing)."""
        if step.action:
            self.device.execute(runtime_action(step.action))

    def undo(self) -> Turn:
        """Take the last step back. The simulated phone is put back into the state before it (the start, then the
        steps before it again); a real phone cannot be: the step leaves the record, and the phone must be put back
        by hand."""
        episode = self._require()
        if len(episode.steps) <= episode.context_steps:
            raise DemonstrationError(
                "nothing to undo"
                if not episode.steps
                else "the steps before the corrected one are the model's: nothing of yours to undo"
            )
        step = episode.steps.pop()
        self.notes = []
        if self.judges_state:
            self.device.reset(self._start_state)
            for s in episode.steps:
                self._redo(s)
        else:
            self.notes.append(f"the phone was not changed back: undo '{step.answer}' on the phone by hand")
        self._screen = None
        return step

    def finish(self, message: str, thought: str = "") -> Episode:
        """End the demonstration with ``finish(message=...)`` and append it to the folder. On the simulated phone a
        built-in task is judged by its final-state checks (``Episode.success``)."""
        episode = self._require()
        if not message.strip():
            raise DemonstrationError("say what was done: finish takes a message")
        shown = self.screen
        action = Action("finish", {"message": message.strip()})
        step = self._step(shown, action, thought or _describe(action, None))
        step.valid, step.effect = True, "finished"
        episode.steps.append(step)
        episode.end_reason, episode.message = "finish", message.strip()
        episode.final_app, episode.final_png = shown.app, shown.png
        if self.task is not None:
            episode.checks = self.task.check(self.device, self._start_state)
            episode.success = all(episode.checks.values())
        writer = EpisodeWriter(self.folder, append=True)
        try:
            writer.write(episode)
        finally:
            writer.close()
        failed = [name for name, ok in (episode.checks or {}).items() if not ok]
        self.notes = (
            [
                f"saved, but the task's checks do not hold ({', '.join(failed)}): it is left out of the "
                "training rows; demonstrate it again"
            ]
            if failed
            else []
        )
        self.episode, self.task, self._screen = None, None, None
        return episode

    def discard(self) -> None:
        """Drop the demonstration being recorded (nothing is saved)."""
        self.episode, self.task, self._screen, self.notes = None, None, None, []

    # ---- the folder -------------------------------------------------------------------------------------------
    def demonstrations(self) -> list[Episode]:
        """The demonstrations saved in the folder (none yet: empty)."""
        return read_episodes(self.folder) if (self.folder / "episodes.jsonl").is_file() else []

    def write_rows(self, out: str | Path, observation: str | None = None, tasks: Sequence[str] | None = None):
        """The folder's demonstrations as training rows (``record_rows``); those that failed their task's checks
        are left out. ``observation``: what the rows show of each screen (default the screenshot; ``ui_tree`` for a
        text model: the screen's tree, no image). ``tasks``: only the demonstrations of these task ids."""
        from .record import record_rows

        kept = [e for e in self.demonstrations() if e.success is not False and (tasks is None or e.task in tasks)]
        if not kept:
            raise DemonstrationError(f"{self.folder} holds no demonstration to write yet")
        return record_rows(kept, out, self.folder, only_success=False, observation=observation)
