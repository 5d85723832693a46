"""The loss head where the labels are: the output projection and the fp32 cross-entropy at labelled positions only.

``memory.loss_head`` (``config.MemorySection``) chooses:

* ``full``: the model's own forward gives logits at every position; ``precision.token_loss_sum`` takes them.
* ``labels``: the model's output projection sees only the hidden states of positions with a (shifted) label;
  a screenshot's ~3,300 image tokens and the prompt cost no logits.
* ``chunked``: the same positions in chunks of ``memory.loss_chunk_tokens``, each chunk's projection and
  cross-entropy under non-reentrant ``torch.utils.checkpoint``: forward keeps only the chunk's input hidden
  states and targets, backward recomputes one chunk's logits at a time.

How: for one forward the model's output module (``get_output_embeddings()``: ``lm_head``, peft's LoRA wrapper of
it included, a precision rule's fp32 wrapper included) gets a forward that takes the final hidden states and
returns the summed loss, which the model then hands back as its ``logits``. The loss is so computed *inside* the
model's forward and returned through the output module's call, which is what FSDP2 and DeepSpeed ZeRO-3 hook:
parameters are gathered for the forward and again before backward reaches the head (its pre-backward hooks fire
on the module's output, i.e. on the loss), and DDP sees the loss flow from its wrapped module's output.
The cross-entropy is ``precision.target_loss_sum`` (fp32) for every head, so all three are the same sum over the
same (position, target) pairs, in another order.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch
from torch.utils.checkpoint import checkpoint

from ..data.tokenize import IGNORE_INDEX
from ..precision import target_loss_sum, target_losses

Project = Callable[[torch.Tensor], torch.Tensor]
# Set on the output module by each forward through the head: (rows projected, the logits' dtype). Its forward hooks
# see the summed loss as its output, so an instrument that counts its matmul work (diagnosis.coverage) reads this.
PROJECTED = "_workbench_projected"


def output_head(model: torch.nn.Module) -> torch.nn.Module:
    """The module that maps final hidden states to vocabulary logits, through DDP's and DeepSpeed's wrappers and
    peft's (which forwards ``get_output_embeddings`` to the transformers model)."""
    m = model
    while not hasattr(m, "get_output_embeddings") and isinstance(getattr(m, "module", None), torch.nn.Module):
        m = m.module  # DistributedDataParallel
    head = m.get_output_embeddings() if hasattr(m, "get_output_embeddings") else None
    if head is None:
        raise ValueError(
            f"{type(model).__name__} has no output embeddings (get_output_embeddings() gave none): "
            "set memory.loss_head full"
        )
    return head


def labelled_positions(labels: torch.Tensor) -> torch.Tensor:
    """Flat indices b * seq + t of the positions t whose next token t+1 carries a label, in row-major order (the
    order ``token_loss_sum`` sums them in)."""
    batch, seq = labels.shape
    keep = torch.zeros_like(labels, dtype=torch.bool)
    keep[:, :-1] = labels[:, 1:] != IGNORE_INDEX
    return keep.reshape(-1).nonzero().squeeze(1)


def _chunk_loss(project: Project, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return target_loss_sum(project(hidden), targets)


def _chunk_row_losses(
    project: Project, hidden: torch.Tensor, targets: torch.Tensor, rows: torch.Tensor, batch: int
) -> torch.Tensor:
    """[batch]: each row's summed cross-entropy over the chunk's positions (``rows``: each position's row)."""
    losses = target_losses(project(hidden), targets)
    return losses.new_zeros(batch).index_add(0, rows.to(losses.device), losses)


def labelled_loss_sum(
    project: Project,
    hidden: torch.Tensor,
    labels: torch.Tensor,
    chunk_tokens: int | None = None,
    per_row: bool = False,
) -> torch.Tensor:
    """Summed next-token cross-entropy of ``project(hidden)`` [batch, seq, vocab] against ``labels`` [batch, seq],
    with ``project`` applied only at labelled positions; ``chunk_tokens``: in checkpointed chunks of that many;
    ``per_row``: a [batch] sum per row (DPO's replies) instead of one. A micro-batch without labels gives a zero that
    still reaches the projection's parameters (a data-parallel wrapper then sees every parameter used, as under the
    full head)."""
    if hidden.shape[:2] != labels.shape:
        raise ValueError(
            f"the output projection got hidden states of shape {tuple(hidden.shape)} for labels of "
            f"shape {tuple(labels.shape)}: this model's head does not see one state per token; set "
            "memory.loss_head full"
        )
    positions = labelled_positions(labels)
    x = hidden.reshape(-1, hidden.size(-1)).index_select(0, positions)  # saves only the int64 positions
    targets = labels.reshape(-1)[positions + 1]  # the label at t+1 (a row's last position is never kept)
    if per_row:  # no chunk spans two rows: a row's sum never depends on the rows batched with it
        rows = positions // labels.shape[1]
        return _row_sums(project, x, targets, rows, labels.shape[0], chunk_tokens)
    if chunk_tokens is None:
        return _chunk_loss(project, x, targets)
    total = None
    for start in range(0, max(len(targets), 1), chunk_tokens):
        part = checkpoint(
            _chunk_loss,
            project,
            x[start : start + chunk_tokens],
            targets[start : start + chunk_tokens],
            use_reentrant=False,
        )
        total = part if total is None else total + part
    return total


def _row_sums(
    project: Project,
    x: torch.Tensor,
    targets: torch.Tensor,
    rows: torch.Tensor,
    batch: int,
    chunk_tokens: int | None,
) -> torch.Tensor:
    """[batch]: each row's summed cross-entropy, its positions (row-major, ``rows``: each one's row) projected row by
    row, in chunks of ``chunk_tokens`` (checkpointed) or whole."""
    pieces, start = [], 0
    for n in torch.bincount(rows, minlength=batch).tolist():
        step = chunk_tokens or max(n, 1)
        pieces += [(a, min(a + step, start + n)) for a in range(start, start + n, step)]
        start += n
    total = None
    for a, b in pieces or [(0, 0)]:  # no labels: a zero that still reaches the projection
        args = (project, x[a:b], targets[a:b], rows[a:b], batch)
        part = checkpoint(_chunk_row_losses, *args, use_reentrant=False) if chunk_tokens else _chunk_row_losses(*args)
        total = part if total is None else total + part
    return total


@contextlib.contextmanager
def loss_at_labels(
    model: torch.nn.Module, labels: torch.Tensor, chunk_tokens: int | None = None, per_row: bool = False
):
    """For the forwards inside it, ``model``'s output module returns ``labelled_loss_sum`` of its input (the model's
    ``logits`` is then that scalar, or with ``per_row`` its [batch] sums). The module's own forward (whatever wraps
    it then) is what projects."""
    head = output_head(model)
    own = "forward" in head.__dict__  # a precision rule's wrapper is an instance attribute
    project = head.forward

    def forward(hidden, *args, **kwargs):
        dtypes = []

        def projected(x):
            out = project(x, *args, **kwargs)
            dtypes.append(out.dtype)  # backward's recomputation appends too, after the forward has read it
            return out

        loss = labelled_loss_sum(projected, hidden, labels, chunk_tokens, per_row)
        setattr(head, PROJECTED, (int((labels[:, 1:] != IGNORE_INDEX).sum()), dtypes[0]))
        return loss

    head.forward = forward
    try:
        yield
    finally:
        if own:
            head.forward = project
        else:
            del head.forward
