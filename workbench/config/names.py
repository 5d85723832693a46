"""Names a configuration may use for things implemented in higher layers (eval tasks, reward functions):
the config validates a name against these catalogues without importing the layer that implements it.

Each catalogue holds the built-in names, and the layer that implements them registers any plug-in name it adds
(``workbench.eval.registry.register_task``); a test checks that the built-ins match the implementations.
"""

from __future__ import annotations


class NameCatalogue:
    def __init__(self, kind: str, builtin: tuple[str, ...]):
        self.kind = kind
        self._names = set(builtin)

    def add(self, name: str) -> None:
        self._names.add(name)

    def remove(self, name: str) -> None:
        self._names.discard(name)

    def names(self) -> list[str]:
        return sorted(self._names)

    def unknown(self, path: str, given: list[str]) -> list[tuple[str, str]]:
        """A (field path, reason) problem per name of ``given`` this catalogue does not hold."""
        return [
            (path, f"unknown {self.kind} {name!r}: use one of {', '.join(self.names())}")
            for name in given
            if name not in self._names
        ]


EVAL_TASKS = NameCatalogue(
    "task",
    (
        "heldout_loss",
        "identity",
        "phone_actions",
        "phone_actions_reasoning",
        "phone_episodes",
        "phone_screens",
        "phone_steps",
        "text",
    ),
)
# The phone agent's whole-episode task (workbench.agent: episodes on the simulated phone, success on the final state);
# a recipe may be judged by it (its evaluation's data: the tasks, e.g. heldout), a training run's eval.tasks not.
EPISODE_TASK = "phone_agent"
# Reward functions of reinforcement fine-tuning (``rl.rewards``), implemented in ``workbench.rewards``.
REWARDS = NameCatalogue(
    "reward",
    (
        "action_type",
        "episode_efficiency",
        "episode_shortest",
        "episode_success",
        "format",
        "swipe_direction",
        "tap_distance",
        "tap_in_box",
        "text_match",
    ),
)
# The rewards that score an episode played on from the sampled action (rl.prompts phone_tasks plays it once for all)
EPISODE_REWARDS = ("episode_success", "episode_efficiency", "episode_shortest")
