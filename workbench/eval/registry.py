"""Tasks by name: the built-in scorers and any a plug-in registers (``register_task``). Apart from ``task_protocol`` (what a
task is), which the scorers import: the registry imports the scorers, so neither needs the other lazily."""

from __future__ import annotations

from ..config.names import EVAL_TASKS
from ..config.samples import samples_dir
from .identity import IdentityTask
from .loss import HeldoutLossTask
from .phone import PhoneActionsTask
from .steps import StepMatchTask
from .task_protocol import Task
from .text import TextMatchTask

_TASKS: dict[str, Task] = {}


def register_task(task: Task) -> Task:
    _TASKS[task.name] = task
    EVAL_TASKS.add(task.name)  # so that a run configuration may name it (eval.tasks)
    return task


def get_task(name: str) -> Task:
    _register_builtin()
    if name not in _TASKS:
        raise KeyError(f"unknown task {name!r}; known tasks: {', '.join(sorted(_TASKS))}")
    return _TASKS[name]


def task_names() -> list[str]:
    _register_builtin()
    return sorted(_TASKS)


def _register_builtin() -> None:
    for task in (
        PhoneActionsTask(),
        PhoneActionsTask("phone_actions_reasoning", samples_dir() / "phone_actions_reasoning" / "heldout.jsonl"),
        PhoneActionsTask("phone_episodes", samples_dir() / "phone_episodes" / "heldout.jsonl"),
        PhoneActionsTask("phone_screens", samples_dir() / "phone_screens" / "heldout.jsonl"),  # screenshots
        StepMatchTask(),
        IdentityTask(),
        TextMatchTask(),
        HeldoutLossTask(),
    ):
        _TASKS.setdefault(task.name, task)
