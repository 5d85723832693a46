"""Episodes on disk: a folder per model and invocation.

    DIR/episodes.jsonl   one episode a line (workbench.agent.episode.Episode.to_dict), streamed as each one ends
    DIR/screens/NNN-<task>/SS.png   the screenshot the model saw at step SS; final.png after the last action
    DIR/summary.json     the metrics (workbench.agent.metrics) and the settings of the run

An adapter served from a run directory keeps its episodes in ``RUN_DIR/episodes/<stamp>/``
(``runs.layout.EPISODES_DIR``); anything else (a base model, the oracle, another server's model) under the
``--out`` folder.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Optional

from .episode import Episode

EPISODES_FILE = "episodes.jsonl"
SUMMARY_FILE = "summary.json"
SCREENS_DIR = "screens"


def folder_name(text: str) -> str:
    """``text`` (a model id, a task id) as one safe path component."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:60] or "x"


class EpisodeWriter:
    """Writes episodes into ``folder`` as they end (a crash keeps the ones that ended)."""

    def __init__(self, folder: str | Path, screens: bool = True):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.screens = screens
        self.count = 0
        self._file = open(self.folder / EPISODES_FILE, "w", encoding="utf-8")

    def write(self, episode: Episode) -> None:
        self.count += 1
        if self.screens:
            where = Path(SCREENS_DIR) / f"{self.count:03d}-{folder_name(episode.task)}"
            (self.folder / where).mkdir(parents=True, exist_ok=True)
            for step in episode.steps:
                if step.png is not None:
                    step.screenshot = str(where / f"{step.index:02d}.png")
                    (self.folder / step.screenshot).write_bytes(step.png)
            if episode.final_png is not None:
                episode.final_screenshot = str(where / "final.png")
                (self.folder / episode.final_screenshot).write_bytes(episode.final_png)
        self._file.write(json.dumps(episode.to_dict(), ensure_ascii=False) + "\n")
        self._file.flush()

    def close(self, summary: Optional[dict] = None) -> None:
        self._file.close()
        if summary is not None:
            (self.folder / SUMMARY_FILE).write_text(json.dumps(summary, indent=1, ensure_ascii=False), encoding="utf-8")


def read_episodes(folder: str | Path) -> list[Episode]:
    """The episodes stored in ``folder``; their screenshot paths are relative to it. ValueError naming the line of
    a bad one."""
    path = Path(folder) / EPISODES_FILE
    if not path.is_file():
        raise ValueError(f"{folder} holds no {EPISODES_FILE}: give a folder `workbench agent run` wrote")
    episodes = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                episodes.append(Episode.from_dict(json.loads(line)))
            except (ValueError, TypeError) as err:
                raise ValueError(f"{path}:{number}: not an episode: {err}") from None
    return episodes
