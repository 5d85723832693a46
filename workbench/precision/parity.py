"""How far one model's logits are from another's on the same batch: the largest |logit difference| and the
share of positions whose greedy (argmax) next token agrees, over the real (unpadded) positions only.

One measure for every "does this model still compute what that one did" question: an export against the
unexported model (workbench.export's parity gate), QAT's converted model against its fake-quantized one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class LogitAgreement:
    """Figures over ``positions`` real positions; ``+`` pools batches (a NaN difference stays NaN)."""

    max_logit_diff: float = 0.0
    agreeing: int = 0
    positions: int = 0

    @property
    def greedy_agreement(self) -> float:
        return self.agreeing / max(self.positions, 1)

    @property
    def finite(self) -> bool:
        return not math.isnan(self.max_logit_diff)

    def __add__(self, other: LogitAgreement) -> LogitAgreement:
        # max() would drop a NaN (nan > x is False): a non-finite difference anywhere decides the pooled figure
        worst = (
            self.max_logit_diff
            if not self.finite
            else other.max_logit_diff
            if not other.finite
            else max(self.max_logit_diff, other.max_logit_diff)
        )
        return LogitAgreement(worst, self.agreeing + other.agreeing, self.positions + other.positions)


@torch.no_grad()
def logit_agreement(reference: torch.Tensor, candidate: torch.Tensor, attention_mask: torch.Tensor) -> LogitAgreement:
    """``reference`` and ``candidate``: [batch, seq, vocab] logits of the same inputs; ``attention_mask``
    [batch, seq] marks the real positions. An inf or NaN difference gives ``max_logit_diff`` NaN."""
    real = attention_mask.bool()
    diff = (candidate.float() - reference.float()).abs()[real]
    worst = (
        float(diff.max())
        if diff.numel() and bool(torch.isfinite(diff).all())
        else (0.0 if not diff.numel() else math.nan)
    )
    agreeing = int((candidate.argmax(-1) == reference.argmax(-1))[real].sum())
    return LogitAgreement(worst, agreeing, int(real.sum()))
