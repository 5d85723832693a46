"""The loss, the logits and the next-token log-probabilities of a batch, and the held-out loss over a data set's batches.

One definition for every caller: the engine's training forward and its (sharded) eval, the ``heldout_loss`` eval
task, export parity, the overflow replay and the benchmarks. A batch is what ``data.collate`` makes of examples
that ``data.load_training_examples`` tokenized (with the model's processor, so rows with screenshots carry their pixel
values and grids); the model gets ``data.model_inputs(batch)``, never a hand-picked subset of it.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from ..config import MemorySection
from ..data import IGNORE_INDEX, collate, load_training_examples, model_inputs
from ..precision import count_target_tokens, token_loss_sum
from .head import loss_at_labels

Autocast = Callable[[], contextlib.AbstractContextManager] | None  # e.g. PrecisionPolicy.autocast


def _autocast(autocast: Autocast):
    return autocast() if autocast is not None else contextlib.nullcontext()


def on_device(batch: dict, device) -> dict:
    return {k: v.to(device) for k, v in batch.items()}


def batch_logits(model: torch.nn.Module, batch: dict, autocast: Autocast = None, last: int = 0) -> torch.Tensor:
    """[batch, seq, vocab] logits of every position, the model given the whole batch (images included); ``last``
    > 0: of the last ``last`` positions only (the output projection skips the rest: transformers' logits_to_keep).
    No KV cache: a whole-sequence forward never reads one, and building it would keep extra key/value copies."""
    extra = {"logits_to_keep": last} if last else {}
    with _autocast(autocast):
        return model(**model_inputs(batch), use_cache=False, **extra).logits


def token_logprobs(
    model: torch.nn.Module,
    batch: dict,
    autocast: Autocast = None,
    temperature: float = 1.0,
    last: int = 0,
    suppress: Sequence[int] = (),
) -> torch.Tensor:
    """[batch, seq - 1] log-probability of each next token (position t+1 given 0..t), the logits divided by
    ``temperature`` and normalised in fp32: what GRPO trains on, and what the sampler's own figures are compared
    with; ``last`` > 0: [batch, last], of the last ``last`` tokens only (a completion after its prompt: the prompt's
    logits are never computed). ``batch`` carries ``input_ids`` and ``attention_mask`` (and ``position_ids`` for
    left-padded prompts, as generation numbered them); callers mask what is not a completion token. ``suppress``:
    token ids taken out of the distribution, as the sampler took them out (``Rollouts.suppressed``)."""
    logits = batch_logits(model, batch, autocast, last=last + 1 if last else 0)[:, :-1, :].float() / temperature
    if suppress:
        logits[..., list(suppress)] = float("-inf")
    targets = batch["input_ids"][:, -logits.shape[1] :].to(logits.device)
    return torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def sequence_logprobs(
    model: torch.nn.Module, batch: dict, autocast: Autocast = None, memory: MemorySection | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """[batch] summed log-probability of each row's target tokens (its labels that are not ``IGNORE_INDEX``: an
    SFT row's assistant tokens), normalised in fp32, and [batch] how many they are: what DPO compares a reply by.
    ``memory``: the run's ``memory`` section, whose ``loss_head`` computes them as it computes SFT's loss (``labels``
    and ``chunked``: logits only at the target positions, ``chunked`` a chunk at a time; ``forward.head``)."""
    memory = memory if memory is not None else MemorySection()
    targets = batch["labels"][:, 1:] != IGNORE_INDEX
    if memory.loss_head == "full":
        logp = token_logprobs(model, batch, autocast)
        targets = targets.to(logp.device)
        return torch.where(targets, logp, torch.zeros_like(logp)).sum(dim=1), targets.sum(dim=1)
    chunk = memory.loss_chunk_tokens if memory.loss_head == "chunked" else None
    with loss_at_labels(model, batch["labels"], chunk, per_row=True):
        losses = batch_logits(model, batch, autocast)  # the head returned each row's summed loss in place of logits
    return -losses, targets.to(losses.device).sum(dim=1)


def batch_loss_sum(
    model: torch.nn.Module, batch: dict, autocast: Autocast = None, memory: MemorySection | None = None
) -> torch.Tensor:
    """The training forward: the summed next-token loss over the batch's target tokens (an fp32 scalar that
    backpropagates; ``precision.step`` divides it by the window's token count). ``memory``: the run's
    ``memory`` section (its ``loss_head``; None: the default), see ``forward.head``."""
    memory = memory if memory is not None else MemorySection()
    if memory.loss_head == "full":
        return token_loss_sum(batch_logits(model, batch, autocast), batch["labels"])
    chunk = memory.loss_chunk_tokens if memory.loss_head == "chunked" else None
    with loss_at_labels(model, batch["labels"], chunk):
        return batch_logits(model, batch, autocast)  # the head returned the summed loss in place of logits


def collated(examples: Sequence, pad_token_id: int, batch_size: int) -> list[dict]:
    """Right-padded batches of ``batch_size`` consecutive examples, in order."""
    return [collate(list(examples[i : i + batch_size]), pad_token_id) for i in range(0, len(examples), batch_size)]


def load_heldout(
    path: str | Path,
    tokenizer,
    max_length: int,
    processor=None,
    system_prompt: str | None = None,
    limit: int | None = None,
) -> list:
    """The examples of a held-out JSONL file tokenized exactly as training tokenizes its data (``processor``: a
    vision-language model's, for rows with screenshots); the first ``limit`` of them (None: all)."""
    examples, _ = load_training_examples(path, tokenizer, max_length, system_prompt=system_prompt, processor=processor)
    return examples[:limit] if limit else examples


@dataclass(frozen=True)
class HeldoutLoss:
    total: float  # summed token loss (nats)
    tokens: int  # target tokens it is summed over
    examples: int

    @property
    def loss(self) -> float:
        return self.total / self.tokens

    @property
    def perplexity(self) -> float:
        return math.exp(min(self.loss, 700.0))


@torch.no_grad()
def heldout_loss(
    model: torch.nn.Module,
    examples: Sequence,
    pad_token_id: int,
    *,
    batch_size: int,
    autocast: Autocast = None,
    device=None,
    rank: int = 0,
    world_size: int = 1,
    reduce: Callable[[list], list] | None = None,
    memory: MemorySection | None = None,
) -> HeldoutLoss:
    """The mean token loss of ``model`` over ``examples`` (eval mode for the duration, restored after).

    Sharded (``world_size`` > 1): rank r takes examples r, r + world_size, ...; every rank runs the same number
    of forwards (a sharded model gathers its parameters collectively), a rank out of examples repeating one and
    discarding it; ``reduce([total, tokens])`` sums over ranks (``DistContext.sum``). ``memory``: the run's loss
    head (``batch_loss_sum``)."""
    if not examples:
        raise ValueError("no held-out examples to measure the loss on")
    device = device if device is not None else next(model.parameters()).device
    mine = list(examples[rank::world_size])
    was_training = model.training
    model.eval()
    total, tokens = 0.0, 0
    try:
        for start in range(0, -(-len(examples) // world_size), batch_size):
            chunk = mine[start : start + batch_size]
            batch = on_device(collate(chunk or list(examples[:1]), pad_token_id), device)
            part = float(batch_loss_sum(model, batch, autocast, memory))
            if chunk:
                total += part
                tokens += count_target_tokens(batch["labels"])
    finally:
        model.train(was_training)
    if reduce is not None:
        total, tokens = reduce([total, tokens])
    return HeldoutLoss(total=float(total), tokens=int(tokens), examples=len(examples))
