"""The held-out loss task: mean token loss and perplexity of the assistant tokens of a data file, computed by
the model itself (the engine's tokenization, batching and loss, not the server: a served answer has no loss).

The data file is a run's own ``data.eval`` (during training, and for ``workbench eval --run``), so the task's loss
is the run's eval loss; ``default_data`` serves a base model measured without a run.

Unlike the answer-scoring tasks it has no ``score``/``summarize``; it ``measure``s a model in memory, which
``evaluate`` (base + each run's adapter) and ``eval.tasks`` during training both call.
"""

from __future__ import annotations

from pathlib import Path

from ..config.samples import samples_dir


class HeldoutLossTask:
    name = "heldout_loss"
    description = "held-out token loss and perplexity of the assistant tokens (the model itself, not the server)"
    needs_model = True  # measured on a model in memory, not on served answers

    def __init__(self, default_data: Path | None = None):
        self.default_data = default_data or samples_dir() / "identity" / "heldout.jsonl"

    def measure(
        self,
        model,
        tokenizer,
        data: str | Path,
        *,
        limit: int | None = None,
        max_length: int = 512,
        batch_size: int = 8,
        system_prompt: str | None = None,
        autocast=None,
        processor=None,
    ) -> dict:
        """{"n", "tokens", "loss", "perplexity"} of ``model`` on the rows of ``data`` (the first ``limit``),
        tokenized and batched as training's eval does (assistant tokens only; ``processor``: a vision-language
        model's, for rows with screenshots): the engine's held-out loss, ``workbench.forward.heldout_loss``."""
        from ..forward import heldout_loss, load_heldout

        examples = load_heldout(data, tokenizer, max_length, processor, system_prompt, limit)
        measured = heldout_loss(model, examples, tokenizer.pad_token_id, batch_size=batch_size, autocast=autocast)
        return {
            "n": measured.examples,
            "tokens": measured.tokens,
            "loss": measured.loss,
            "perplexity": measured.perplexity,
        }
