"""The scoring every rollout scorer shares: prompts that are ``eval.task_protocol.Example`` items, each completion's
phone-action verdict computed once, then each named reward on it, errors naming the reward and the prompt."""

from __future__ import annotations

from ..engine.grpo import ScoredCompletions
from ..eval.phone import PhoneActionsTask
from ..image_io import image_data_url, last_image_url, load_image, thumbnail_png
from ..serve.remote import ModelReply
from .functions import REWARD_FUNCTIONS, RewardError

THUMBNAIL_BOX, THUMBNAIL_COLORS = (64, 160), 64  # the samples table's screenshot: <= 64 px wide, ~3 KB as a data: URL


class ExamplesScorer:
    """Prompts that are ``eval.task_protocol.Example`` items (the conversation up to the answer, the reference answer),
    completions scored by the phone-action verdict and the named reward functions. A subclass may add to the
    verdicts of a batch (``add_to_verdicts``) what a reward needs beyond the one completion."""

    def __init__(self, prompts: list, names: list[str]):
        self.prompts, self.names = prompts, list(names)
        self.task = PhoneActionsTask()

    def where(self, example) -> str:
        return f"prompt {example.index}"

    def add_to_verdicts(self, prompts: list, completions: list[str], verdicts: list[dict]) -> None:
        """Nothing by default."""

    def __call__(self, prompts: list, completions: list[str]) -> ScoredCompletions:
        verdicts = []
        for example, completion in zip(prompts, completions):
            try:
                verdicts.append(self.task.score(example, ModelReply(content=completion)))
            except Exception as err:  # noqa: BLE001 - re-raised naming the row
                raise RewardError(f"scoring {self.where(example)} failed: {type(err).__name__}: {err}") from err
        self.add_to_verdicts(prompts, completions, verdicts)
        rewards = {name: [] for name in self.names}
        for example, completion, verdict in zip(prompts, completions, verdicts):
            for name in self.names:
                try:
                    rewards[name].append(float(REWARD_FUNCTIONS[name](example, completion, verdict)))
                except Exception as err:  # noqa: BLE001 - re-raised naming the reward and the row
                    raise RewardError(
                        f"reward {name!r} raised on {self.where(example)}: {type(err).__name__}: "
                        f"{err} (completion: {completion[:200]!r})"
                    ) from err
        return self.finish(prompts, verdicts, ScoredCompletions(rewards, [bool(v["parsed"]) for v in verdicts]))

    def finish(self, prompts: list, verdicts: list[dict], scored: ScoredCompletions) -> ScoredCompletions:
        """What a subclass adds to a batch's scores from its verdicts (nothing by default)."""
        return scored

    @staticmethod
    def describe(example) -> str:
        user = [m for m in example.messages if m["role"] == "user"]
        content = user[-1]["content"] if user else ""
        if not isinstance(content, str):  # a screenshot turn: its text parts (the image is not text)
            content = " ".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
        return content[:300]

    @staticmethod
    def thumbnail(example) -> str | None:
        """The prompt's latest screenshot, small, as a PNG data: URL for the samples table; None for a text prompt."""
        url = last_image_url(example.messages)
        return None if url is None else image_data_url(thumbnail_png(load_image(url), THUMBNAIL_BOX, THUMBNAIL_COLORS))
