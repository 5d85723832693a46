"""What a model computes on batches, written once for training, evaluation, export parity, overflow replay and
the benchmarks: the loss of a batch, the held-out loss, the logits and next-token log-probabilities of a batch,
greedy and sampled answers in process."""

from .head import labelled_loss_sum, loss_at_labels, output_head
from .loss import (
    HeldoutLoss,
    batch_logits,
    batch_loss_sum,
    collated,
    heldout_loss,
    load_heldout,
    on_device,
    sequence_logprobs,
    token_logprobs,
)

__all__ = [
    "HeldoutLoss",
    "batch_logits",
    "batch_loss_sum",
    "collated",
    "heldout_loss",
    "labelled_loss_sum",
    "load_heldout",
    "loss_at_labels",
    "on_device",
    "output_head",
    "sequence_logprobs",
    "token_logprobs",
]
