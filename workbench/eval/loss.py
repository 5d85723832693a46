"""The held-out loss task: mean token loss and perplexity of the assistant tokens of a data file, computed by
the model itself (through the engine's loading and tokenization, not the server: a served answer has no loss).

Unlike the answer-scoring tasks it has no ``score``/``summarize``; it ``measure``s a model in memory, which
``evaluate`` (base + each run's adapter) and ``eval.tasks`` during training both call.
"""
from __future__ import annotations

import contextlib
import math
from pathlib import Path
from typing import Optional

import torch

from ..config.samples import samples_dir


class HeldoutLossTask:
    name = "heldout_loss"
    description = "held-out token loss and perplexity of the assistant tokens (the model itself, not the server)"
    needs_model = True  # measured on a model in memory, not on served answers

    def __init__(self, default_data: Optional[Path] = None):
        self.default_data = default_data or samples_dir() / "identity" / "heldout.jsonl"

    @torch.no_grad()
    def measure(self, model, tokenizer, data: str | Path, *, limit: Optional[int] = None, max_length: int = 512,
                batch_size: int = 8, system_prompt: Optional[str] = None, autocast=None) -> dict:
        """{"n", "tokens", "loss", "perplexity"} of ``model`` on the rows of ``data`` (the first ``limit``),
        tokenized as training tokenizes them (assistant tokens only)."""
        from ..data import collate, load_examples, model_inputs
        from ..precision import count_target_tokens, token_loss_sum

        examples, _ = load_examples(data, tokenizer, max_length, system_prompt=system_prompt)
        examples = examples[:limit] if limit else examples
        device = next(model.parameters()).device
        was_training = model.training
        model.eval()
        total, tokens = 0.0, 0
        try:
            for start in range(0, len(examples), batch_size):
                batch = {k: v.to(device) for k, v in collate(examples[start:start + batch_size],
                                                              tokenizer.pad_token_id).items()}
                with (autocast() if autocast is not None else contextlib.nullcontext()):
                    logits = model(**model_inputs(batch)).logits  # what training passes, for the same loss
                total += float(token_loss_sum(logits, batch["labels"]))
                tokens += count_target_tokens(batch["labels"])
        finally:
            model.train(was_training)
        loss = total / tokens
        return {"n": len(examples), "tokens": tokens, "loss": loss, "perplexity": math.exp(min(loss, 700.0))}
