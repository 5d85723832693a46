"""Verifiable rewards for reinforcement fine-tuning (``training.method: grpo``), by name (``rl.rewards``), built from
the phone-action scorer of ``workbench.eval`` and the action grammar of ``workbench.phone``; the rollout scorer
``workbench.training`` hands the engine."""

from .functions import REWARD_FUNCTIONS, RewardError, register_reward, unregister_reward
from .scorer import RowsScorer, scorer_for

__all__ = ["REWARD_FUNCTIONS", "RewardError", "register_reward", "unregister_reward", "RowsScorer", "scorer_for"]
