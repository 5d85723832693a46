"""Chat messages -> token ids with loss only on assistant tokens (those of weight 1: an assistant message with
``"weight": 0`` is context, labelled IGNORE_INDEX like the prompt).

The conversation is rendered with the tokenizer's own chat template, then cut into segments at
each assistant turn (prefix rendered with ``add_generation_prompt``). Each segment is tokenized on
its own, so the boundary between prompt and answer falls exactly where generation would start.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# The label of a position that carries no loss (context, padding): PyTorch's cross-entropy default.
IGNORE_INDEX = -100


@dataclass
class TokenizedExample:
    input_ids: list[int]
    labels: list[int]
    truncated: bool
    vision: Any = None  # the row's images (workbench.data.multimodal.VisionInputs), None for text-only rows

    @property
    def target_tokens(self) -> int:
        return sum(1 for t in self.labels[1:] if t != IGNORE_INDEX)


def _render(tokenizer, messages, add_generation_prompt: bool, chat_template: str | None) -> str:
    return tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=add_generation_prompt, chat_template=chat_template
    )


def tokenize_messages(
    tokenizer,
    messages: list[dict],
    max_length: int,
    chat_template: str | None = None,
    expand: Callable[[str], str] | None = None,
) -> TokenizedExample:
    """Token ids and labels (IGNORE_INDEX outside assistant turns and on turns of weight 0), truncated to ``max_length``.
    ``chat_template`` overrides the tokenizer's; ``expand`` rewrites each rendered segment before it is
    tokenized, in order (a vision processor expands image placeholders to the image's token count)."""
    input_ids: list[int] = []
    labels: list[int] = []
    done_text = ""
    eos = tokenizer.eos_token_id

    def add(text: str, train: bool) -> None:
        if expand is not None:
            text = expand(text)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"] if text else []
        input_ids.extend(ids)
        labels.extend(ids if train else [IGNORE_INDEX] * len(ids))

    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        prompt_text = _render(tokenizer, messages[:i], True, chat_template)
        full_text = _render(tokenizer, messages[: i + 1], False, chat_template)
        if not prompt_text.startswith(done_text) or not full_text.startswith(prompt_text):
            raise ValueError(
                "the chat template does not render conversations as growing prefixes, so assistant "
                "tokens cannot be located; use a model whose template does"
            )
        add(prompt_text[len(done_text) :], train=False)
        answer = full_text[len(prompt_text) :]
        before = len(input_ids)
        train = m.get("weight", 1) != 0
        add(answer, train=train)
        # Templates like GLM-4's end an answer with nothing: the next turn's tag stops generation.
        # Train an explicit EOS after the final answer so the fine-tuned model learns to stop.
        if i == len(messages) - 1 and eos is not None and eos not in input_ids[before:]:
            input_ids.append(eos)
            labels.append(eos if train else IGNORE_INDEX)
        done_text = full_text
    truncated = len(input_ids) > max_length
    return TokenizedExample(input_ids[:max_length], labels[:max_length], truncated)
