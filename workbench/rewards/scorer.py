"""The rollout scorer the engine's GRPO step is given (``engine.grpo.RolloutScorer``): the prompts, and the rewards
of ``rl.rewards`` for each completion."""
from __future__ import annotations

from ..config import RunConfig
from ..engine.grpo import ScoredCompletions
from ..eval.phone import PhoneActionsTask
from ..eval.tasks import Reply, load_examples
from .functions import REWARD_FUNCTIONS, RewardError


class RowsScorer:
    """Prompts from the single-step rows of a JSONL file (every message but the last answer; the answer is the
    reference), completions scored by the phone-action verdict and the named reward functions."""

    def __init__(self, path: str, names: list[str], system_prompt=None):
        self.path, self.names = path, list(names)
        self.prompts = load_examples(path, system_prompt=system_prompt)
        self.task = PhoneActionsTask()

    def __call__(self, prompts: list, completions: list[str]) -> ScoredCompletions:
        rewards = {name: [] for name in self.names}
        parsed = []
        for example, completion in zip(prompts, completions):
            where = f"row {example.index} of {self.path}"
            try:
                verdict = self.task.score(example, Reply(content=completion))
            except Exception as err:  # noqa: BLE001 - re-raised naming the row
                raise RewardError(f"scoring {where} failed: {type(err).__name__}: {err}") from err
            parsed.append(bool(verdict["parsed"]))
            for name in self.names:
                try:
                    rewards[name].append(float(REWARD_FUNCTIONS[name](example, completion, verdict)))
                except Exception as err:  # noqa: BLE001 - re-raised naming the reward and the row
                    raise RewardError(f"reward {name!r} raised on {where}: {type(err).__name__}: {err} "
                                      f"(completion: {completion[:200]!r})") from err
        return ScoredCompletions(rewards, parsed)

    @staticmethod
    def describe(example) -> str:
        user = [m for m in example.messages if m["role"] == "user"]
        content = user[-1]["content"] if user else ""
        return (content if isinstance(content, str) else str(content))[:300]


def scorer_for(cfg: RunConfig):
    """The rollout scorer of a GRPO run (None for SFT)."""
    if cfg.training.method != "grpo":
        return None
    return RowsScorer(cfg.data.train, list(cfg.rl.rewards), cfg.data.system_prompt)
