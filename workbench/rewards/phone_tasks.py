"""Prompts from the offline phone's tasks (``rl.prompts: phone_tasks``) and the reward that plays their episodes
(``episode_success``).

A prompt is the first step of a task exactly as the episode runner sends it (``agent.run_episodes``, Open-AutoGLM's
runtime format: its system prompt in ``rl.lang``, instruction, the screenshot as a base64 PNG data: URL, the app on
screen), made by
running the task's oracle for one step and reading that step back as a training row (``agent.record.episode_rows``):
the oracle's first reply is the reference and, for a tap, its target box is the row's ``meta.target_box``, so every
single-step reward (format, action_type, tap_in_box, ...) applies to these prompts too.

With ``rl.prompt_steps: all`` every step of each task's oracle episode is a prompt (the conversation up to that step
as the oracle played it, the oracle's reply there the reference), so that the later steps of an episode are sampled
and trained too, not only the first. ``rl.observation`` says what the prompts show of each screen (``ui_tree``: the
screen's tree as text, for a text model).

``episode_success`` plays each sampled action on: a fresh simulated phone per completion, the prompt's earlier
steps replayed as the oracle took them, the sampled reply as the next, then the model being trained answers every
later step greedily (``agent.InProcessPolicy`` under the
run's precision policy, ``rl.max_new_tokens`` a step) through ``agent.run_episodes``, all of a batch's episodes
side by side, up to ``rl.episode_max_steps`` steps. The reward is 1 when the episode ends on a parsed finish with
the task's final-state checks all holding, else 0. Greedy continuation is a choice: only the first action is
sampled and trained on (its log-probabilities are the ones GRPO has); the rest measures where that action leads
the current policy, deterministically.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from ..agent import InProcessPolicy, run_episodes, sim_devices
from ..agent.policy import OraclePolicy
from ..agent.record import episode_rows
from ..config import ConfigError, RunConfig
from ..config.names import EPISODE_REWARDS
from ..data.formats import without_weights
from ..engine.grpo import ScoredCompletions
from ..eval.task_protocol import Example
from ..image_io import image_data_url
from ..phone.conversation import DEFAULT_LANG, replayable_reply, replied_actions
from ..phone.expert import Expert, replay
from ..phone.screen import parse_size
from ..phone.tasks import PhoneTask, select_tasks
from ..serve.remote import ModelReply
from .credit import anchor_step_advantages
from .examples import ExamplesScorer
from .functions import RewardError
from .task_pool import TaskPool


@dataclass(frozen=True)
class TaskPrompt(Example):
    """An ``eval.task_protocol.Example`` (the first step's conversation, the oracle's reply as reference) with its task."""

    task: PhoneTask | None = None


def step_prompts(
    tasks: list[PhoneTask],
    size: tuple[int, int],
    date: datetime.date,
    observation: str = "screenshot",
    steps: str = "first",
    lang: str = DEFAULT_LANG,
) -> list[TaskPrompt]:
    """The first step (``steps="first"``) or every step (``"all"``) of each task's oracle episode as the runner sends
    it, shown as ``observation`` asks, with the oracle's reply there as the reference."""
    episodes = run_episodes(
        tasks,
        OraclePolicy(tasks),
        sim_devices(size),
        max_steps=1 if steps == "first" else 100,
        concurrency=len(tasks),
        date=date,
        observation=observation,
        lang=lang,
    )
    prompts = []
    for number, (task, episode) in enumerate(zip(tasks, episodes), start=1):
        for row in episode_rows(episode, number, image_data_url)[: 1 if steps == "first" else None]:
            messages = row["messages"]
            prompts.append(
                TaskPrompt(len(prompts) + 1, without_weights(messages[:-1]), messages[-1]["content"], row, task)
            )
    return prompts


def first_step_prompts(tasks: list[PhoneTask], size: tuple[int, int], date: datetime.date) -> list[TaskPrompt]:
    """The first step of each task as the runner sends it (its screenshot), the oracle's first reply the reference."""
    return step_prompts(tasks, size, date)


class _Scripted:
    """A policy that answers each episode from its script (the prompt's earlier replies, the oracle's, then the
    sampled completion), then hands it to ``then``. Episodes are told apart by their conversation's list, which the
    runner keeps for the whole episode; its first call holds every episode in the order of the scripts (concurrency
    >= the episodes)."""

    name = "sampled-step"

    def __init__(self, scripts: list[list[str]], then):
        self.scripts, self.then, self.index = scripts, then, {}

    def __call__(self, conversations: list[list[dict]]) -> list[ModelReply]:
        if not self.index:
            if len(conversations) != len(self.scripts):
                raise RuntimeError(f"{len(conversations)} episodes began, for {len(self.scripts)} sampled actions")
            self.index = {id(c): i for i, c in enumerate(conversations)}
        replies: list[ModelReply | None] = [None] * len(conversations)
        rest = []
        for n, messages in enumerate(conversations):
            script = self.scripts[self.index[id(messages)]]
            done = sum(1 for m in messages if m["role"] == "assistant")
            if done < len(script):
                replies[n] = ModelReply(script[done])
            else:
                rest.append(n)
        if rest:
            for n, reply in zip(rest, self.then([conversations[n] for n in rest])):
                replies[n] = reply
        return replies


def play_episodes(
    prompts: list[TaskPrompt],
    replies: list[str],
    continuation,
    size: tuple[int, int],
    max_steps: int,
    date: datetime.date,
    observation: str = "screenshot",
    lang: str = DEFAULT_LANG,
) -> list:
    """Each prompt's episode: its earlier steps as the prompt holds them (the oracle's replies), ``replies[i]`` at
    the prompt's step, and ``continuation`` (a ``agent.Policy``) answering the rest: the ``agent.Episode`` of each,
    in order."""
    scripts = [
        [replayable_reply(m["content"]) for m in p.messages if m["role"] == "assistant"] + [reply]
        for p, reply in zip(prompts, replies)
    ]
    return run_episodes(
        [p.task for p in prompts],
        _Scripted(scripts, continuation),
        sim_devices(size),
        max_steps=max_steps,
        concurrency=max(1, len(prompts)),
        date=date,
        observation=observation,
        lang=lang,
    )


def rl_tasks(rl) -> list[PhoneTask]:
    """The phone tasks an RL section names (``rl.tasks``); ConfigError naming the field when it names none."""
    try:
        return select_tasks(rl.tasks)
    except ValueError as err:
        raise ConfigError([("rl.tasks", str(err))]) from None


def episode_settings(rl) -> dict:
    """How an RL section's episodes are played (the rollouts here, and whatever plays the same tasks beside them: the
    bench's baselines): observation, max_steps, max_tokens, size (rl.screen_size parsed) and date (rl.date, or None:
    today); ConfigError naming rl.screen_size when it is no size."""
    try:
        size = parse_size(rl.screen_size)
    except ValueError as err:
        raise ConfigError([("rl.screen_size", str(err))]) from None
    return {
        "observation": rl.observation,
        "max_steps": rl.episode_max_steps,
        "max_tokens": rl.max_new_tokens,
        "size": size,
        "date": datetime.date.fromisoformat(rl.date) if rl.date else None,
    }


class PhoneTasksScorer(ExamplesScorer):
    """The rollout scorer of ``rl.prompts: phone_tasks``: prompts from the tasks' first steps (or every step); with
    an episode reward among the rewards, every completion's episode played on (``verdict["episode"]``), which then
    also gives each completion's success, its step advantage (``step_credit``: (discount, scale) of GiGPO's anchor
    groups, ``rewards.credit``) and the task pool's tallies (``pool``: ``rewards.task_pool.TaskPool``, rl.pool)."""

    def __init__(
        self,
        tasks: list[PhoneTask],
        names: list[str],
        size: tuple[int, int],
        episode_max_steps: int,
        max_new_tokens: int,
        date: datetime.date | None = None,
        observation: str = "screenshot",
        prompt_steps: str = "first",
        step_credit: tuple[float, bool] | None = None,
        pool: dict | None = None,
        lang: str = DEFAULT_LANG,
    ):
        self.size, self.episode_max_steps, self.max_new_tokens = size, episode_max_steps, max_new_tokens
        self.observation, self.prompt_steps, self.step_credit = observation, prompt_steps, step_credit
        self.lang = lang
        self.date = date or datetime.date.today()  # one date for the whole run: the prompts and the episodes agree
        super().__init__(step_prompts(tasks, size, self.date, observation, prompt_steps, lang), names)
        self.continuation = None  # the trained model's greedy policy, once the engine attaches it
        self.expert, self._shortest = Expert(), {}  # episode_shortest's lengths, by (task, steps replayed)
        self.pool = None if pool is None else TaskPool(self.prompts, self.task_prompts, **pool)

    def task_prompts(self, tasks: list[PhoneTask]) -> list[TaskPrompt]:
        """The prompts of further tasks (the pool's fresh instances), made as the run's own are."""
        return step_prompts(tasks, self.size, self.date, self.observation, self.prompt_steps, self.lang)

    @classmethod
    def from_config(cls, cfg: RunConfig) -> PhoneTasksScorer:
        rl = cfg.rl
        tasks, play = rl_tasks(rl), episode_settings(rl)
        credit = (rl.step_discount, rl.scale_rewards == "group") if rl.step_advantage_weight > 0 else None
        pool = (
            dict(floor=rl.pool_floor, window=rl.pool_window, fresh_share=rl.pool_fresh_share, replay=rl.pool_replay)
            if rl.pool
            else None
        )
        return cls(
            tasks,
            list(rl.rewards),
            play["size"],
            play["max_steps"],
            play["max_tokens"],
            play["date"],
            play["observation"],
            rl.prompt_steps,
            credit,
            pool,
            rl.lang,
        )

    def attach(self, policy) -> None:
        """The model being trained (``engine.grpo.TrainedPolicy``): it answers the episodes' later steps."""
        self.continuation = InProcessPolicy(
            policy.model,
            policy.tokenizer,
            policy.processor,
            name="trained",
            max_tokens=self.max_new_tokens,
            autocast=policy.autocast,
        )

    def shortest(self, prompt: TaskPrompt) -> int:
        """The fewest steps an episode from ``prompt`` can take: its replayed steps, then the expert's shortest path
        from the phone they leave (``phone.expert``; not the fixed oracle's length, which can be longer)."""
        done = replied_actions(prompt.messages)
        key = (prompt.task, len(done))  # a prompt replays the oracle's first steps: its task and their count name it
        if key not in self._shortest:
            self._shortest[key] = len(done) + self.expert.step(prompt.task, replay(prompt.task, done)).steps_left
        return self._shortest[key]

    def where(self, example) -> str:
        return f"task {example.task.id} (prompt {example.index} of rl.tasks)"

    def add_to_verdicts(self, prompts: list, completions: list[str], verdicts: list[dict]) -> None:
        played = [name for name in self.names if name in EPISODE_REWARDS]
        if not played:
            return
        if self.continuation is None:
            raise RewardError(
                f"reward {played[0]!r} needs the model being trained to play the episodes on: "
                "the engine attaches it (PhoneTasksScorer.attach)"
            )
        try:
            episodes = play_episodes(
                prompts,
                completions,
                self.continuation,
                self.size,
                self.episode_max_steps,
                self.date,
                self.observation,
                self.lang,
            )
        except Exception as err:  # noqa: BLE001 - re-raised naming the reward and the tasks
            tasks = ", ".join(sorted({p.task.id for p in prompts}))
            raise RewardError(
                f"reward {played[0]!r} raised playing the episodes of tasks {tasks}: {type(err).__name__}: {err}"
            ) from err
        for verdict, episode, prompt in zip(verdicts, episodes, prompts):
            verdict["episode"], verdict["shortest"] = episode, self.shortest(prompt)

    def finish(self, prompts: list, verdicts: list[dict], scored: ScoredCompletions) -> ScoredCompletions:
        """The episodes' successes, and with step credit each trained step's advantage in its anchor group."""
        episodes = [v.get("episode") for v in verdicts]
        if any(e is None for e in episodes):  # no episode reward: nothing was played
            return scored
        scored.successes = [bool(e.success) for e in episodes]
        if self.step_credit is not None:
            trained = [sum(1 for m in p.messages if m["role"] == "assistant") for p in prompts]
            scored.step_advantages, scored.anchors = anchor_step_advantages(episodes, trained, *self.step_credit)
        return scored
