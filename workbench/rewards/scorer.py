"""The rollout scorers the engine's GRPO step is given (``engine.grpo.RolloutScorer``): the prompts, and the rewards
of ``rl.rewards`` for each completion. ``rl.prompts: rows`` -> ``RowsScorer``; ``phone_tasks`` ->
``rewards.phone_tasks.PhoneTasksScorer``."""

from __future__ import annotations

from ..config import RunConfig
from ..eval.task_protocol import load_eval_examples
from .examples import ExamplesScorer
from .phone_tasks import PhoneTasksScorer


class RowsScorer(ExamplesScorer):
    """Prompts from the single-step rows of a JSONL file (every message but the last answer; the answer is the
    reference)."""

    def __init__(self, path: str, names: list[str], system_prompt=None):
        self.path = path
        super().__init__(load_eval_examples(path, system_prompt=system_prompt), names)

    def where(self, example) -> str:
        return f"row {example.index} of {self.path}"


def scorer_for(cfg: RunConfig):
    """The rollout scorer of a GRPO run (None for SFT)."""
    if cfg.training.method != "grpo":
        return None
    if cfg.rl.prompts == "phone_tasks":
        return PhoneTasksScorer.from_config(cfg)
    return RowsScorer(cfg.data.train, list(cfg.rl.rewards), cfg.data.system_prompt)
