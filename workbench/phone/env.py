"""The phone as a gymnasium environment: ``reset(options={"task": task})`` -> (observation, info),
``step(action)`` -> (observation, reward, terminated, truncated, info).

The observation is what AutoGLM's runtime reads from a phone: ``{"screenshot": HxWx3 uint8, "current_app": str}``.
An action is the agent's reply text (``<think>..</think>\n<answer>do(...)``, or the bare call), read and carried
out as Open-AutoGLM's runtime does (``phone.openautoglm``: ``runtime_split`` cuts everything from ``do(action=`` on,
``runtime_action`` reads it as its parser and handler do), or a parsed ``Action``. A reply its parser rejects becomes
``finish(message=<the reply>)``, as in the runtime: the episode terminates and ``info["parse_error"]`` says why. A call
it parses but its handler does nothing with (an action it does not know, a missing argument) is a step that changes
nothing (``valid`` False), and the episode goes on, as there. The episode terminates on ``finish``, and is truncated
after ``max_steps`` steps. On termination by a parsed ``finish`` the reward is 1.0 when every final-state check
of the task holds, else 0.0 (``info["checks"]``); a device that cannot read its state (a real phone over ADB)
gives ``checks`` None and reward 0.0.

``gymnasium.make("workbench/Phone-v0", max_steps=N)`` builds one once this module is imported.

The device is the simulated phone (``SimPhone``) or anything with its interface: ``size``, ``reset(state)``,
``screenshot()``, ``current_app()``, ``execute(action) -> Outcome``, ``judges_state`` (``workbench.phone.adb``).
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from .actions import Action, ActionSyntaxError
from .conversation import MAX_STEPS
from .openautoglm import runtime_action, runtime_split
from .sim import SimPhone
from .tasks import TASKS, PhoneTask

_CHARSET = string.ascii_letters + string.digits + string.punctuation + " \n\t"


class PhoneEnv(gymnasium.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 1}

    def __init__(
        self,
        device=None,
        tasks: Sequence[PhoneTask] | None = None,
        max_steps: int = MAX_STEPS,
        render_mode: str | None = "rgb_array",
    ):
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {max_steps}")
        self.device = device if device is not None else SimPhone()
        self.tasks = list(tasks) if tasks is not None else TASKS
        self.max_steps = max_steps
        self.render_mode = render_mode
        width, height = self.device.size
        self.observation_space = spaces.Dict(
            {
                "screenshot": spaces.Box(0, 255, (height, width, 3), np.uint8),
                "current_app": spaces.Text(max_length=64, charset=_CHARSET),
            }
        )
        self.action_space = spaces.Text(max_length=4096, charset=_CHARSET)
        self.task: PhoneTask | None = None
        self.steps = 0
        self._start = None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start ``options["task"]`` (a PhoneTask or a task id); without one, a task drawn from ``tasks`` with the
        environment's seeded generator."""
        super().reset(seed=seed)
        task = (options or {}).get("task")
        if task is None:
            task = self.tasks[int(self.np_random.integers(len(self.tasks)))]
        elif isinstance(task, str):
            found = [t for t in self.tasks if t.id == task]
            if not found:
                raise ValueError(f"unknown task id {task!r}")
            task = found[0]
        self.task, self.steps = task, 0
        self._start = task.initial_state()
        self.device.reset(self._start)
        return self._observe(), {"task": task.id, "instruction": task.instruction}

    def step(self, action: Any):
        if self.task is None:
            raise RuntimeError("call reset() before step()")
        self.steps += 1
        parse_error = None
        if isinstance(action, str):
            raw = action
            text = runtime_split(raw)[1]
            try:
                action = runtime_action(text)
            except ActionSyntaxError as err:
                parse_error, action = str(err), Action("finish", {"message": text})
            if action is None:  # parsed, but the runtime's handler does nothing with it: a step that changes nothing
                return self._nothing_done(text)
        if action.type == "finish":
            outcome_valid, effect = (
                parse_error is None,
                "finished" if parse_error is None else "did not parse: finished",
            )
            element = box = None
        else:
            outcome = self.device.execute(action)
            outcome_valid, effect, element, box = outcome.valid, outcome.effect, outcome.element, outcome.box
        terminated = action.type == "finish"
        truncated = not terminated and self.steps >= self.max_steps
        checks = self.judge() if terminated or truncated else None
        success = bool(terminated and parse_error is None and checks and all(checks.values()))
        info = {
            "action": action,
            "valid": outcome_valid,
            "effect": effect,
            "element": element,
            "box": box,
            "parse_error": parse_error,
            "checks": checks,
            "success": success,
            "step": self.steps,
        }
        return self._observe(), 1.0 if success else 0.0, terminated, truncated, info

    def _nothing_done(self, text: str):
        truncated = self.steps >= self.max_steps
        checks = self.judge() if truncated else None
        info = {
            "action": None,
            "text": text,
            "valid": False,
            "element": None,
            "box": None,
            "parse_error": None,
            "effect": "the runtime parses it, but its handler does nothing with it (an action it does not know, or "
            "a missing argument)",
            "checks": checks,
            "success": False,
            "step": self.steps,
        }
        return self._observe(), 0.0, False, truncated, info

    def judge(self) -> dict[str, bool] | None:
        """The task's final-state checks now; None when the device cannot read its state."""
        if not getattr(self.device, "judges_state", False):
            return None
        return self.task.check(self.device, self._start)

    def render(self):
        return np.asarray(self.device.screenshot())

    def _observe(self) -> dict:
        return {"screenshot": np.asarray(self.device.screenshot()), "current_app": self.device.current_app()}


ENV_ID = "workbench/Phone-v0"
if ENV_ID not in gymnasium.registry:
    gymnasium.register(ENV_ID, entry_point=PhoneEnv)
