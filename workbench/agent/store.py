"""Episodes on disk: a folder per model and invocation.

    DIR/episodes.jsonl   one episode a line (workbench.agent.episode.Episode.to_dict), streamed as each one ends
    DIR/screens/NNN-<task>/SS.png   the screenshot the model saw at step SS; final.png after the last action
    DIR/summary.json     the metrics (workbench.agent.metrics) and the settings of the run (and, where the
                         bench played them, their replay key: ``replay_key``)

An adapter served from a run directory keeps its episodes in ``RUN_DIR/episodes/<stamp>/``
(``runs.layout.EPISODES_DIR``); anything else (a base model, the oracle, another server's model) under the
``--out`` folder.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from pathlib import Path

from ..config.files import jsonl_lines
from .episode import Episode

EPISODES_FILE = "episodes.jsonl"
SUMMARY_FILE = "summary.json"
SCREENS_DIR = "screens"


def folder_name(text: str) -> str:
    """``text`` (a model id, a task id) as one safe path component."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:60] or "x"


class EpisodeWriter:
    """Writes episodes into ``folder`` as they end (a crash keeps the ones that ended). ``append``: after the episodes
    the folder holds already (a folder of demonstrations, recorded one at a time), instead of in their place."""

    def __init__(self, folder: str | Path, screens: bool = True, append: bool = False):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.screens = screens
        path = self.folder / EPISODES_FILE
        self.count = len(read_episodes(self.folder)) if append and path.is_file() else 0
        # an earlier summary no longer describes the folder (a crash now must not leave it beside new episodes)
        (self.folder / SUMMARY_FILE).unlink(missing_ok=True)
        self._file = open(path, "a" if append else "w", encoding="utf-8")

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

    def close(self, summary: dict | None = None) -> None:
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
    for line in jsonl_lines(path):
        try:
            if line.error is not None:
                raise ValueError(line.error)
            episodes.append(Episode.from_dict(line.value))
        except (ValueError, TypeError) as err:
            raise ValueError(f"{path}:{line.number}: not an episode: {err}") from None
    return episodes


def episode_folders(runs_dir: str | Path) -> list[Path]:
    """The episode folders under ``runs_dir`` (``RUN/episodes/<time>/`` of runs, ``episodes/<time>/<model>/`` of the
    rest), newest first."""
    root = Path(runs_dir)
    if not root.is_dir():
        return []
    found = [p.parent for pattern in (f"*/*/{EPISODES_FILE}", f"*/*/*/{EPISODES_FILE}") for p in root.glob(pattern)]
    return sorted(set(found), key=lambda p: p.stat().st_mtime, reverse=True)


REPLAY_KEY = "replay_key"  # in summary.json: what decided a greedy evaluation's episodes, as one hash
SOURCE_ROOT = Path(__file__).resolve().parents[1]  # the workbench package: its source is part of the key


def replay_numerics(device) -> dict:
    """What decides greedy decoding's numbers besides the weights, settings, tasks and code: the device, the kernels
    (the CPU class, or the GPU; the thread count) and the libraries' versions; ``replay_key``'s ``numerics``."""
    import torch
    import transformers

    from ..hardware import cpu_class

    device = torch.device(device)
    return {
        "device": str(device),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "threads": torch.get_num_threads(),
        "cpu": cpu_class(),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
    }


def replay_key(model_dir: str | Path, settings: dict, tasks: Iterable[str], numerics: dict) -> str | None:
    """One hash of everything greedy episodes of a local model follow from: the weights' bytes (every file of
    ``model_dir``), the evaluation's settings, the tasks in their order (each as text: the batches follow it), the
    code that plays them (every source file of workbench) and the numerics (``numerics``: ``replay_numerics``); None when ``model_dir`` is not a local directory (a hub id: no bytes here to hash). Equal keys, equal
    episodes: greedy decoding repeats exactly."""
    root = Path(model_dir)
    if not root.is_dir():
        return None
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode())
        with open(path, "rb") as f:
            while chunk := f.read(1 << 22):
                digest.update(chunk)
    for path in sorted(SOURCE_ROOT.rglob("*.py")):
        digest.update(str(path.relative_to(SOURCE_ROOT)).encode() + path.read_bytes())
    digest.update(json.dumps([settings, list(tasks), numerics], sort_keys=True, default=str).encode())
    return digest.hexdigest()


def find_replay(runs_dir: str | Path, name: str, key: str) -> Path | None:
    """An episode folder called ``name`` in some run of ``runs_dir`` (``RUN/episodes/<name>/``) whose summary holds
    ``key``: the same episodes, played before (e.g. the base model of several runs that start from one model)."""
    for summary in sorted(Path(runs_dir).glob(f"*/episodes/{name}/{SUMMARY_FILE}")):
        try:
            if json.loads(summary.read_text(encoding="utf-8")).get(REPLAY_KEY) == key:
                return summary.parent
        except (OSError, ValueError):
            continue  # a folder being written, or not ours: play instead
    return None
