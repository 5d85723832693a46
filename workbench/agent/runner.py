"""The episode loop, as a library call: ``run_episodes(tasks, policy, device_factory, max_steps, concurrency)``.

Up to ``concurrency`` episodes run at once. Each round, the conversations of every running episode go to the
policy together (a served model gets them as concurrent requests, which the server batches), each reply is
parsed and executed on that episode's phone, and a finished episode's slot takes the next task. Every turn is
built exactly as Open-AutoGLM's runtime builds it (``workbench.phone.conversation.Conversation``; ``lang``: its
system prompt, ``en`` or ``cn``): the screenshot as a base64 PNG data: URL in the latest user turn only, each reply
kept as the runtime keeps it, and read as the runtime reads it (``phone.openautoglm.runtime_split``: the action is
everything from ``do(action=`` / ``finish(message=`` on).
``observation`` (``screenshot``, ``ui_tree``, ``both``; ``workbench.phone.conversation.OBSERVATIONS``) says what the
model is shown of each screen: the screenshot, the screen's compact tree in ``screen_info``, or both; the
screenshot is kept with each step either way (replays, recording).
An episode ends on finish, on a reply that does not parse (finish with the raw reply, no success), at the step
limit, when the agent is stuck (``repeat_limit`` times in a row the same action on the same screen: the phone is
deterministic, so every later repeat would do nothing too, and such loops ran greedy models to the step limit),
when the server refuses the conversation as too long for its context, or when a request fails.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..image_io import image_data_url, png_bytes
from ..phone.actions import format_action, split_answer
from ..phone.conversation import (
    DEFAULT_LANG,
    MAX_STEPS,
    REPEAT_LIMIT,
    Conversation,
    check_observation,
    repeat_limit_problem,
)
from ..phone.env import PhoneEnv
from ..phone.openautoglm import runtime_split
from ..phone.sim import PHONE_SIZE, SimPhone
from ..phone.tasks import PhoneTask
from ..phone.uitree import tree_of
from .episode import Episode, Turn
from .policy import Policy


@dataclass
class _Running:
    task: PhoneTask
    env: PhoneEnv
    conversation: Conversation
    episode: Episode
    png: bytes
    app: str
    tree: str | None = None
    done: bool = False

    def show(self) -> None:
        """The current screen into the conversation, as its observation mode asks."""
        image = image_data_url(self.png) if self.conversation.observation != "ui_tree" else None
        self.conversation.observe(image, self.app, self.tree)

    def read_tree(self) -> None:
        if self.conversation.observation != "screenshot":
            self.tree = tree_of(self.env.device)
            if self.tree is None:
                raise ValueError(
                    f"observation {self.conversation.observation!r}: the device "
                    f"{type(self.env.device).__name__} gives no screen tree (ui_tree())"
                )


def sim_devices(size: tuple[int, int] = PHONE_SIZE) -> Callable[[], SimPhone]:
    """A device factory: a fresh simulated phone of ``size`` pixels per episode."""
    return lambda: SimPhone(size)


def run_episodes(
    tasks: Sequence[PhoneTask],
    policy: Policy,
    device_factory: Callable[[], object] | None = None,
    max_steps: int = MAX_STEPS,
    concurrency: int = 8,
    *,
    date: datetime.date | None = None,
    on_episode: Callable[[Episode], None] | None = None,
    observation: str = "screenshot",
    repeat_limit: int = REPEAT_LIMIT,
    lang: str = DEFAULT_LANG,
) -> list[Episode]:
    """Run every task once with ``policy``, ``concurrency`` episodes at a time, one batch of replies per turn.

    Args:
        tasks: the phone tasks to play.
        policy: what answers the conversations (``agent.policy``: a served model, the oracle, a model in memory).
        device_factory: a phone per episode (default: simulated 1080x2400 phones; a real phone with concurrency 1).
        max_steps: turns before an episode ends as ``step_limit``.
        concurrency: episodes played at once.
        date: the date in the system prompt (default: today).
        on_episode: called as each episode ends (progress bars, streaming to disk).
        observation: what the model is shown of each screen (``phone.conversation.OBSERVATIONS``).
        repeat_limit: the same action on the same screen this many times in a row ends the episode as ``repeated``
            (0: never).
        lang: the runtime's system prompt (``cn`` or ``en``).

    Returns:
        The episodes, in the order of ``tasks``; ValueError for an option out of range.
    """
    if max_steps < 1:
        raise ValueError(f"max_steps must be at least 1, got {max_steps}")
    if repeat_limit_problem(repeat_limit):
        raise ValueError(repeat_limit_problem(repeat_limit))
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    check_observation(observation)
    device_factory = device_factory or sim_devices()
    date = date or datetime.date.today()
    pending = list(enumerate(tasks))[::-1]
    running: list[tuple[int, _Running]] = []
    finished: dict[int, Episode] = {}
    while pending or running:
        while pending and len(running) < concurrency:
            index, task = pending.pop()
            running.append((index, _start(task, policy.name, device_factory(), max_steps, date, observation, lang)))
        replies = policy([r.conversation.messages for _, r in running])
        if len(replies) != len(running):
            raise RuntimeError(f"policy {policy.name!r} answered {len(replies)} of {len(running)} conversations")
        for (_, r), reply in zip(running, replies):
            _advance(r, reply, repeat_limit)
        for index, r in running:
            if r.done:
                finished[index] = r.episode
                if on_episode is not None:
                    on_episode(r.episode)
        running = [(i, r) for i, r in running if not r.done]
    return [finished[i] for i in range(len(tasks))]


def _start(
    task: PhoneTask, model: str, device, max_steps: int, date: datetime.date, observation: str, lang: str
) -> _Running:
    env = PhoneEnv(device, tasks=[task], max_steps=max_steps)
    obs, _ = env.reset(options={"task": task})
    episode = Episode(
        task.id,
        task.template,
        task.split,
        list(task.apps),
        task.instruction,
        model,
        date.isoformat(),
        observation=observation,
        lang=lang,
    )
    r = _Running(
        task,
        env,
        Conversation(task.instruction, date, observation, lang),
        episode,
        png_bytes(obs["screenshot"]),
        obs["current_app"],
    )
    r.read_tree()
    r.show()
    return r


def _advance(r: _Running, reply, repeat_limit: int) -> None:
    """One reply: record it, execute it, and either end the episode or show the model the next screen."""
    ep = r.episode
    step = Turn(len(ep.steps) + 1, r.app, prompt_tokens=reply.prompt_tokens, png=r.png, ui_tree=r.tree)
    ep.steps.append(step)
    if reply.error:
        step.error = reply.error
        _end(r, "context_overflow" if reply.context_overflow else "error", reply.error)
        return
    # the runtime reads the content alone (a reasoning the server split off never reaches it): the action is what
    # its client cuts out of the content, and the conversation keeps the reply as it does
    step.content, step.reasoning = reply.content, split_answer(reply.content, reply.reasoning).reasoning
    step.answer = runtime_split(reply.content or "")[1].strip()
    r.conversation.reply(reply.content)
    obs, _, terminated, truncated, info = r.env.step(reply.content or "")
    action = info["action"]  # None: the runtime parses it but does nothing with it
    step.action, step.parse_error, step.valid, step.effect = (
        format_action(action) if action else None,
        info["parse_error"],
        info["valid"],
        info["effect"],
    )
    step.element, step.target_box = info["element"], list(info["box"]) if info["box"] else None
    r.png, r.app = png_bytes(obs["screenshot"]), obs["current_app"]
    r.read_tree()
    if terminated or truncated:
        ep.checks, ep.success = info["checks"], info["success"] if info["checks"] is not None else None
        reason = "parse_failure" if info["parse_error"] else "finish" if terminated else "step_limit"
        _end(r, reason, action.args.get("message") if terminated else f"no finish within {r.env.max_steps} steps")
        return
    repeats = _repeats(ep.steps)
    if repeat_limit and repeats >= repeat_limit:
        _end(r, "repeated", f"{step.action} on the same screen {repeats} times in a row")
        return
    r.show()


def _repeats(steps: list[Turn]) -> int:
    """How many steps in a row, up to the latest, gave its action on its screen."""
    last, count = steps[-1], 0
    for step in reversed(steps):
        if step.action != last.action or step.png != last.png:
            break
        count += 1
    return count


def _end(r: _Running, reason: str, message: str | None) -> None:
    ep = r.episode
    ep.end_reason, ep.message = reason, message
    if ep.success is None and ep.checks is None and r.env.judge() is not None:
        ep.checks, ep.success = r.env.judge(), False  # ended without a parsed finish: no success
    ep.final_app, ep.final_png = r.app, r.png
    r.done = True
