"""Prompts from the offline phone's tasks (``rl.prompts: phone_tasks``) and the reward that plays their episodes
(``episode_success``).

A prompt is the first step of a task exactly as the episode runner sends it (``agent.run_episodes``, AutoGLM's
runtime format: system prompt, instruction, the screenshot as a base64 PNG data: URL, the app on screen), made by
running the task's oracle for one step and reading that step back as a training row (``agent.record.episode_rows``):
the oracle's first reply is the reference and, for a tap, its target box is the row's ``meta.target_box``, so every
single-step reward (format, action_type, tap_in_box, ...) applies to these prompts too.

``episode_success`` plays each sampled first action on: a fresh simulated phone per completion, the sampled reply
as step 1, then the model being trained answers every later step greedily (``agent.InProcessPolicy`` under the
run's precision policy, ``rl.max_new_tokens`` a step) through ``agent.run_episodes``, all of a batch's episodes
side by side, up to ``rl.episode_max_steps`` steps. The reward is 1 when the episode ends on a parsed finish with
the task's final-state checks all holding, else 0. Greedy continuation is a choice: only the first action is
sampled and trained on (its log-probabilities are the ones GRPO has); the rest measures where that action leads
the current policy, deterministically.
"""
from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Optional

from ..agent import InProcessPolicy, run_episodes, sim_devices
from ..agent.policy import OraclePolicy
from ..agent.record import episode_rows
from ..config import ConfigError, RunConfig
from ..data.formats import without_weights
from ..data.multimodal import image_data_url
from ..eval.tasks import Example
from ..phone.screen import parse_size
from ..phone.tasks import PhoneTask, select_tasks
from ..serve.remote import Completion
from .functions import RewardError
from .examples import ExamplesScorer


@dataclass(frozen=True)
class TaskPrompt(Example):
    """An ``eval.tasks.Example`` (the first step's conversation, the oracle's reply as reference) with its task."""

    task: Optional[PhoneTask] = None


def first_step_prompts(tasks: list[PhoneTask], size: tuple[int, int], date: datetime.date) -> list[TaskPrompt]:
    """The first step of each task as the runner sends it, with the oracle's first reply as the reference."""
    episodes = run_episodes(tasks, OraclePolicy(tasks), sim_devices(size), max_steps=1, concurrency=len(tasks),
                            date=date)
    prompts = []
    for number, (task, episode) in enumerate(zip(tasks, episodes), start=1):
        row = episode_rows(episode, number, image_data_url)[0]
        messages = row["messages"]
        prompts.append(TaskPrompt(number, without_weights(messages[:-1]), messages[-1]["content"], row, task))
    return prompts


class _SampledFirst:
    """A policy whose first call answers with the sampled completions (one per episode, in the order of the tasks
    ``run_episodes`` was given: with concurrency >= the tasks, its first call holds every episode's step 1, in
    order) and whose later calls are ``then``'s."""

    name = "sampled-first"

    def __init__(self, first: list[str], then):
        self.first, self.then = list(first), then

    def __call__(self, conversations: list[list[dict]]) -> list[Completion]:
        if self.first is None:
            return self.then(conversations)
        first, self.first = self.first, None
        if len(first) != len(conversations):
            raise RuntimeError(f"{len(conversations)} episodes began, for {len(first)} sampled first actions")
        return [Completion(text) for text in first]


def play_episodes(prompts: list[TaskPrompt], first_replies: list[str], continuation, size: tuple[int, int],
                  max_steps: int, date: datetime.date) -> list:
    """Each prompt's episode with ``first_replies[i]`` as its step 1 and ``continuation`` (a ``agent.Policy``)
    answering the rest: the ``agent.Episode`` of each, in order."""
    return run_episodes([p.task for p in prompts], _SampledFirst(first_replies, continuation), sim_devices(size),
                        max_steps=max_steps, concurrency=max(1, len(prompts)), date=date)


class PhoneTasksScorer(ExamplesScorer):
    """The rollout scorer of ``rl.prompts: phone_tasks``: prompts from the tasks' first steps; with
    ``episode_success`` among the rewards, every completion's episode played on (``verdict["episode"]``)."""

    def __init__(self, tasks: list[PhoneTask], names: list[str], size: tuple[int, int], episode_max_steps: int,
                 max_new_tokens: int, date: Optional[datetime.date] = None):
        self.size, self.episode_max_steps, self.max_new_tokens = size, episode_max_steps, max_new_tokens
        self.date = date or datetime.date.today()  # one date for the whole run: the prompts and the episodes agree
        super().__init__(first_step_prompts(tasks, size, self.date), names)
        self.continuation = None  # the trained model's greedy policy, once the engine attaches it

    @classmethod
    def from_config(cls, cfg: RunConfig) -> "PhoneTasksScorer":
        rl = cfg.rl
        try:
            tasks = select_tasks(rl.tasks)
        except ValueError as err:
            raise ConfigError([("rl.tasks", str(err))]) from None
        try:
            size = parse_size(rl.screen_size)
        except ValueError as err:
            raise ConfigError([("rl.screen_size", str(err))]) from None
        date = datetime.date.fromisoformat(rl.date) if rl.date else None
        return cls(tasks, list(rl.rewards), size, rl.episode_max_steps, rl.max_new_tokens, date)

    def attach(self, policy) -> None:
        """The model being trained (``engine.grpo.TrainedPolicy``): it answers the episodes' later steps."""
        self.continuation = InProcessPolicy(policy.model, policy.tokenizer, policy.processor, name="trained",
                                            max_tokens=self.max_new_tokens, autocast=policy.autocast)

    def where(self, example) -> str:
        return f"task {example.task.id} (prompt {example.index} of rl.tasks)"

    def add_to_verdicts(self, prompts: list, completions: list[str], verdicts: list[dict]) -> None:
        if "episode_success" not in self.names:
            return
        if self.continuation is None:
            raise RewardError("reward 'episode_success' needs the model being trained to play the episodes on: "
                              "the engine attaches it (PhoneTasksScorer.attach)")
        try:
            episodes = play_episodes(prompts, completions, self.continuation, self.size, self.episode_max_steps,
                                     self.date)
        except Exception as err:  # noqa: BLE001 - re-raised naming the reward and the tasks
            tasks = ", ".join(sorted({p.task.id for p in prompts}))
            raise RewardError(f"reward 'episode_success' raised playing the episodes of tasks {tasks}: "
                              f"{type(err).__name__}: {err}") from err
        for verdict, episode in zip(verdicts, episodes):
            verdict["episode"] = episode
