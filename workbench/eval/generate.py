"""Greedy answers straight from a model in memory (no server): what the demo compares and what ``eval.tasks``
scores while a run trains."""
from __future__ import annotations

from typing import Optional, Sequence

import torch


@torch.no_grad()
def generate_replies(model, tokenizer, conversations: Sequence[list[dict]], max_new_tokens: int = 64,
                     batch_size: int = 8, autocast=None, repetition_penalty: Optional[float] = None) -> list[str]:
    """The greedy answer to each conversation (its messages up to the answer), batched with left padding.

    ``autocast``: a context manager factory the forward runs under (a training run's precision policy).
    """
    import contextlib

    side = tokenizer.padding_side
    was_training = model.training
    model.eval()
    answers: list[str] = []
    try:
        tokenizer.padding_side = "left"
        for start in range(0, len(conversations), batch_size):
            texts = [tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
                     for messages in conversations[start:start + batch_size]]
            enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
            enc = {k: v.to(next(model.parameters()).device) for k, v in enc.items()}
            extra = {"repetition_penalty": repetition_penalty} if repetition_penalty else {}
            with (autocast() if autocast is not None else contextlib.nullcontext()):
                out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False,
                                     pad_token_id=tokenizer.pad_token_id, **extra)
            width = enc["input_ids"].shape[1]
            answers += [tokenizer.decode(o[width:], skip_special_tokens=True).strip() for o in out]
    finally:
        tokenizer.padding_side = side
        model.train(was_training)
    return answers
