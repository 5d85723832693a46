"""Replay phone-agent episodes (``workbench agent run`` stores them): a step slider over the screens the model saw,
its action drawn over the element it hit, its thinking and answer, what the phone did; at the end the final
screen, how the episode ended and the final-state checks. At a step of an episode that did not succeed, *Correct from
this step* opens the recorder panel (``workbench.ui.recorder_panel``) with the phone in that step's state, to demonstrate
the rest (a correction: the model's earlier steps stay as context). ``EpisodeCompare`` shows several models' episodes
of one task side by side on one slider (base vs fine-tuned); ``EpisodesSection`` (in the chat compare panel) picks the
episode folders of a runs directory to compare."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

import ipywidgets as W
from PIL import Image

from ..agent.episode import Episode, Turn
from ..agent.store import episode_folders, read_episodes
from ..image_io import image_from_bytes, png_bytes
from .drawing import draw_action


def _verdict(episode: Episode) -> str:
    if episode.success is None:
        return "not judged"
    return "success" if episode.success else "failed"


class EpisodeReplay(W.VBox):
    def __init__(
        self,
        episodes: str | Path | Sequence[Episode] = (),
        title: str | None = None,
        scale: int = 2,
        picker: bool = True,
        corrections: str | Path = "demonstrations",
    ):
        """One model's episodes, a step at a time: the screen it saw, its reply, what the phone did.

        Args:
            episodes: a folder ``workbench agent run`` wrote (its screenshots are read from it), or episodes in memory
                (with their screenshots).
            title: the header (default: the episodes' model).
            scale: enlarges small screens (112x252) for reading.
            picker: show the episode picker (``EpisodeCompare`` picks for all its replays).
            corrections: the folder the recorder saves corrections to (beside any demonstrations recorded there).
        """
        self.folder = Path(episodes) if isinstance(episodes, (str, Path)) else None
        self.corrections = Path(corrections)
        self.episodes: list[Episode] = read_episodes(self.folder) if self.folder else list(episodes)
        self.scale = scale
        label = title or (self.episodes[0].model if self.episodes else "episodes")
        self.header = W.HTML(f"<b>{html.escape(label)}</b>")
        self.picker = W.Dropdown(
            options=[(f"{e.task}: {_verdict(e)} ({len(e.steps)} steps)", i) for i, e in enumerate(self.episodes)],
            description="episode",
            style={"description_width": "60px"},
            layout=W.Layout(width="98%"),
        )
        self.picker.layout.display = None if picker else "none"
        self.slider = W.IntSlider(
            value=1, min=1, max=1, description="step", style={"description_width": "60px"}, continuous_update=False
        )
        self.image = W.Image(format="png")
        # the screen as the model read it (observation ui_tree or both): beside the screenshot, the hit element bold
        self.tree = W.HTML(layout=W.Layout(display="none", max_width="420px", overflow="auto"))
        self.tree.add_class("wb-episode-tree")
        self.info = W.HTML()
        self.info.add_class("wb-episode-info")
        self.correct_button = W.Button(
            description="Correct from this step",
            icon="pencil",
            tooltip="open this step in the recorder, the phone in its state, and demonstrate the rest",
            layout=W.Layout(width="200px"),
        )
        self.correct_button.add_class("wb-correct")
        self.correct_button.on_click(lambda _: self.open_correction())
        self.correction = W.VBox()  # the recorder panel, once a correction is opened
        self.picker.observe(lambda _: self._episode_changed(), names="value")
        self.slider.observe(lambda _: self.show(), names="value")
        super().__init__(
            [
                self.header,
                self.picker,
                self.slider,
                W.HBox([self.image, self.tree]),
                self.info,
                self.correct_button,
                self.correction,
            ],
            layout=W.Layout(border="1px solid #ccc", padding="6px", width="100%"),
        )
        self.add_class("wb-episode-replay")
        if self.episodes:
            self._episode_changed()
        else:
            self.info.value = "<i>no episodes</i>"

    @property
    def episode(self) -> Episode | None:
        return self.episodes[self.picker.value] if self.episodes and self.picker.value is not None else None

    def select(self, task: str) -> bool:
        """Show the episode of ``task``; False when there is none."""
        for i, e in enumerate(self.episodes):
            if e.task == task:
                self.picker.value = i
                return True
        return False

    def _episode_changed(self) -> None:
        episode = self.episode
        self.slider.max = len(episode.steps) + 1  # the last position is the final screen
        self.slider.value = 1
        self.show()

    def _screenshot(self, step: Turn | None) -> Image.Image | None:
        episode = self.episode
        data = step.png if step else episode.final_png
        name = step.screenshot if step else episode.final_screenshot
        if data is None and name is not None and self.folder is not None:
            data = (self.folder / name).read_bytes()
        return image_from_bytes(data) if data is not None else None

    def show(self, step: int | None = None) -> None:
        """Position ``step`` (1..steps: what the model saw and did; steps + 1: the end)."""
        if step is not None:
            self.slider.value = max(1, min(step, self.slider.max))
            return  # the slider's observer draws it
        episode = self.episode
        if episode is None:
            return
        k = self.slider.value
        current = episode.steps[k - 1] if k <= len(episode.steps) else None
        shot = self._screenshot(current)
        if shot is not None:
            answer = current.answer if current else None
            self.image.value = png_bytes(draw_action(shot, answer, current.target_box if current else None, self.scale))
        self.info.value = self._step_html(episode, current) if current else self._end_html(episode)
        # a step of an episode that did not succeed can be corrected from (the end, or a success, not)
        self.correct_button.layout.display = None if current and episode.success is not True else "none"
        tree = current.ui_tree if current else None
        self.tree.layout.display = None if tree else "none"
        self.tree.value = _tree_html(tree, current.element if current else None) if tree else ""

    def open_correction(self, step: int | None = None):
        """The recorder panel under the replay, the phone in the state of ``step`` (default: the step shown) of the
        episode shown, its earlier steps kept as context; returns the panel."""
        from .recorder_panel import RecorderPanel

        episode = self.episode
        step = step or self.slider.value
        panel = RecorderPanel(self.corrections, size=self._screen_size(episode))
        panel.correct(episode, step, self.folder)
        self.correction.children = [panel]
        return panel

    def _screen_size(self, episode: Episode) -> tuple[int, int]:
        shot = self._screenshot(episode.steps[0]) if episode.steps else None
        return shot.size if shot is not None else (1080, 2400)

    def _step_html(self, episode: Episode, step: Turn) -> str:
        e = html.escape
        lines = [
            f"<div><b>{e(episode.instruction)}</b></div>",
            f"<div>step {step.index} of {len(episode.steps)} &middot; on {e(step.current_app)}"
            + (f" &middot; {step.prompt_tokens} prompt tokens" if step.prompt_tokens else "")
            + "</div>",
        ]
        if step.reasoning:
            lines.append(f"<div style='color:#777;font-style:italic'>thinking: {e(step.reasoning)}</div>")
        lines.append(f"<div>answer: <code>{e(step.answer or step.content)}</code></div>")
        if step.error:
            lines.append(f"<div style='color:#c62828'>request failed: {e(step.error)}</div>")
        elif step.parse_error:
            lines.append(f"<div style='color:#c62828'>does not parse ({e(step.parse_error)}): the episode ends</div>")
        else:
            mark, color = ("did", "#2e7d32") if step.valid else ("did nothing", "#c62828")
            hit = f" on {e(step.element)}" if step.element else ""
            lines.append(f"<div class='wb-step-effect' style='color:{color}'>{mark}{hit}: {e(step.effect)}</div>")
        return "".join(lines)

    def _end_html(self, episode: Episode) -> str:
        e = html.escape
        verdict = _verdict(episode)
        color = {"success": "#2e7d32", "failed": "#c62828"}.get(verdict, "#777")
        checks = "".join(f"<li>{e(name)}: {'yes' if ok else 'no'}</li>" for name, ok in (episode.checks or {}).items())
        return (
            f"<div><b>{e(episode.instruction)}</b></div>"
            f"<div class='wb-episode-end' style='color:{color}'><b>{verdict}</b>: ended by {e(str(episode.end_reason))}"
            f" after {len(episode.steps)} steps</div>"
            + (f"<div>message: {e(episode.message)}</div>" if episode.message else "")
            + (f"<div>final state:<ul>{checks}</ul></div>" if checks else "")
        )


def _tree_html(tree: str, element: str | None) -> str:
    """The compact tree as the model read it, one element a line; the lines naming the element the action hit bold.
    A line too long for the column wraps under itself, indented (unwrapped, its bounds and tap point were cut off at
    the column's edge)."""
    lines = []
    for line in tree.splitlines():
        text = html.escape(line)
        text = f"<b style='color:#1565c0'>{text}</b>" if element and line.startswith(element) else text
        lines.append(f"<div style='padding-left:2ch;text-indent:-2ch'>{text}</div>")
    return (
        "<div style='font-size:11px;color:#555'>the screen as text (what the model read)</div>"
        "<div style='font-family:monospace;font-size:11px;line-height:1.25;white-space:pre-wrap'>"
        + "".join(lines)
        + "</div>"
    )


class EpisodeCompare(W.VBox):
    """Several models' episodes of the same task side by side, one task picker and one step slider for all.

    Args:
        sources: model name -> its episodes (a folder or episodes in memory, as ``EpisodeReplay`` takes them).
        scale: enlarges small screens for reading.
    """

    def __init__(self, sources: dict[str, str | Path | Sequence[Episode]], scale: int = 2):
        self.replays = {
            name: EpisodeReplay(source, title=name, scale=scale, picker=False) for name, source in sources.items()
        }
        common = None
        for replay in self.replays.values():
            tasks = [e.task for e in replay.episodes]
            common = tasks if common is None else [t for t in common if t in tasks]
        self.task = W.Dropdown(
            options=common or [],
            description="task",
            style={"description_width": "60px"},
            layout=W.Layout(width="420px"),
        )
        longest = max((len(e.steps) + 1 for r in self.replays.values() for e in r.episodes), default=1)
        self.slider = W.IntSlider(
            value=1,
            min=1,
            max=longest,
            description="step",
            style={"description_width": "60px"},
            continuous_update=False,
        )
        self.task.observe(lambda _: self._task_changed(), names="value")
        self.slider.observe(lambda _: self._step_changed(), names="value")
        for replay in self.replays.values():
            replay.slider.layout.display = "none"  # the shared slider drives them
        super().__init__(
            [W.HBox([self.task, self.slider]), W.HBox(list(self.replays.values()), layout=W.Layout(width="100%"))]
        )
        self.add_class("wb-episode-compare")
        if common:
            self._task_changed()

    def _task_changed(self) -> None:
        for replay in self.replays.values():
            replay.select(self.task.value)
        longest = max(len(r.episode.steps) + 1 for r in self.replays.values())
        self.slider.max = longest
        self.slider.value = 1
        self._step_changed()

    def _step_changed(self) -> None:
        for replay in self.replays.values():  # a shorter episode stays on its end
            replay.show(min(self.slider.value, replay.slider.max))


class EpisodesSection(W.VBox):
    """Pick 2-3 episode folders of a runs directory (a base model's and a fine-tune's run of the same tasks) and
    replay their episodes side by side."""

    def __init__(self, runs_dir: str | Path = "runs"):
        self.runs_dir = Path(runs_dir)
        self.folders = W.SelectMultiple(
            options=[],
            rows=4,
            description="episodes",
            style={"description_width": "60px"},
            layout=W.Layout(width="520px"),
        )
        self.refresh_button = W.Button(description="Refresh", icon="refresh")
        self.compare_button = W.Button(description="Compare episodes", icon="columns", layout=W.Layout(width="170px"))
        self.compare_button.add_class("wb-compare-episodes")
        self.refresh_button.on_click(lambda _: self.refresh())
        self.compare_button.on_click(lambda _: self.compare())
        self.message = W.HTML()
        self.view = W.VBox()
        super().__init__(
            [
                W.HTML("<b>Episodes side by side</b> (workbench agent run)"),
                W.HBox([self.folders, W.VBox([self.refresh_button, self.compare_button])]),
                self.message,
                self.view,
            ]
        )
        self.add_class("wb-episodes-section")
        self.refresh()

    def refresh(self) -> list[Path]:
        found = episode_folders(self.runs_dir)
        self.folders.options = [(self._label(p), str(p)) for p in found]
        if not found:
            self.message.value = (
                f"<i>no episodes under {html.escape(str(self.runs_dir))} yet: run workbench agent run, then Refresh</i>"
            )
        else:
            self.message.value = ""
        return found

    def _label(self, folder: Path) -> str:
        episodes = read_episodes(folder)
        model = episodes[0].model if episodes else folder.name
        done = sum(bool(e.success) for e in episodes)
        return f"{model}: {done}/{len(episodes)} solved ({folder.relative_to(self.runs_dir)})"

    def compare(self, folders: Sequence[str | Path] | None = None) -> EpisodeCompare | None:
        chosen = list(folders if folders is not None else self.folders.value)
        if not 2 <= len(chosen) <= 3:
            self.message.value = (
                f"<span style='color:#c62828'>pick 2 or 3 episode folders ({len(chosen)} picked)</span>"
            )
            return None
        sources: dict[str, Path] = {}
        for folder in map(Path, chosen):  # a column per folder, named by its model (and folder when one repeats)
            episodes = read_episodes(folder)
            name = episodes[0].model if episodes else folder.name
            sources[name if name not in sources else f"{name} ({folder.name})"] = folder
        view = EpisodeCompare(sources)
        if not view.task.options:
            self.message.value = "<span style='color:#c62828'>these folders share no task</span>"
            return None
        self.message.value = ""
        self.view.children = [view]
        return view
