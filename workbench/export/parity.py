"""Parity of an export with the unexported model on held-out examples, and the gate it must pass.

Both models see the same right-padded batches, made as training's eval makes them (``workbench.forward``: the
run's tokenization, and its processor for rows with screenshots, whose pixel values and grids the models get too);
figures are taken over real (unpadded) positions only: the largest |logit difference|, the share of positions
whose greedy (argmax) next token agrees, and each model's held-out loss (mean next-token cross-entropy over the
assistant tokens, as in training's eval).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ..forward import batch_logits, on_device
from ..precision import count_target_tokens, token_loss_sum
from ..precision.parity import LogitAgreement, logit_agreement

# logits(batch) -> [batch, seq, vocab]; a batch is forward.collated's (input_ids, attention_mask, labels, images)
LogitsFn = Callable[[dict], torch.Tensor]


@dataclass(frozen=True)
class ParityGate:
    """What an export must reach to count as exported; a figure outside any bound fails the export."""

    max_logit_diff: float  # largest |logit difference| allowed
    min_agreement: float  # least share of positions whose greedy token agrees
    max_loss_increase: float  # held-out loss (nats/token) the export may lose against the reference

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ParityReport:
    max_logit_diff: float
    agreement: float
    reference_loss: float
    export_loss: float
    examples: int
    positions: int
    gate: ParityGate

    @property
    def loss_increase(self) -> float:
        return self.export_loss - self.reference_loss

    def failures(self) -> list[str]:
        g, out = self.gate, []
        if not self.max_logit_diff <= g.max_logit_diff:  # NaN fails
            out.append(f"max |logit diff| {self.max_logit_diff:.3g} > {g.max_logit_diff:g}")
        if not self.agreement >= g.min_agreement:
            out.append(f"greedy agreement {self.agreement:.4f} < {g.min_agreement:g}")
        if not self.loss_increase <= g.max_loss_increase:
            out.append(
                f"held-out loss {self.export_loss:.4f} vs {self.reference_loss:.4f} (+{self.loss_increase:.4g}) "
                f"> +{g.max_loss_increase:g}"
            )
        return out

    @property
    def passed(self) -> bool:
        return not self.failures()

    def to_dict(self) -> dict:
        return {
            "max_logit_diff": self.max_logit_diff,
            "greedy_agreement": self.agreement,
            "reference_loss": self.reference_loss,
            "export_loss": self.export_loss,
            "loss_increase": self.loss_increase,
            "examples": self.examples,
            "positions": self.positions,
            "gate": self.gate.to_dict(),
            "passed": self.passed,
            "failures": self.failures(),
        }

    def summary(self) -> str:
        return (
            f"max |logit diff| {self.max_logit_diff:.3g}, greedy agreement {self.agreement:.4f} over "
            f"{self.positions} positions of {self.examples} held-out examples, held-out loss "
            f"{self.export_loss:.4f} (reference {self.reference_loss:.4f})"
        )


class ParityFailed(RuntimeError):
    """An export whose parity figures are outside its gate: a failed export (the figures are in ``report``)."""

    def __init__(self, where: Path, report: ParityReport):
        super().__init__(f"export {where} failed its parity gate: {'; '.join(report.failures())} ({report.summary()})")
        self.where, self.report = where, report


@torch.no_grad()
def reference_logits(reference: LogitsFn, batches: list[dict]) -> list[torch.Tensor]:
    return [reference(b).float() for b in batches]


@torch.no_grad()
def compare(reference: list[torch.Tensor], candidate: LogitsFn, batches: list[dict], gate: ParityGate) -> ParityReport:
    """Figures of ``candidate`` against the reference logits of the same ``batches``."""
    pooled, tokens = LogitAgreement(), 0
    ref_loss = exp_loss = 0.0
    for ref, batch in zip(reference, batches):
        out = candidate(batch).float()
        pooled = pooled + logit_agreement(ref, out, batch["attention_mask"])
        tokens += count_target_tokens(batch["labels"])
        ref_loss += float(token_loss_sum(ref, batch["labels"]))
        exp_loss += float(token_loss_sum(out, batch["labels"]))
        if not pooled.finite:  # NaN: nothing below changes the verdict
            break
    examples = sum(len(b["input_ids"]) for b in batches)
    return ParityReport(
        max_logit_diff=pooled.max_logit_diff,
        agreement=pooled.greedy_agreement,
        reference_loss=ref_loss / max(tokens, 1),
        export_loss=exp_loss / max(tokens, 1),
        examples=examples,
        positions=pooled.positions,
        gate=gate,
    )


def torch_logits(model: torch.nn.Module) -> LogitsFn:
    """The logits of a batch from ``model`` on its own device (the batch follows it), returned in host memory where
    every export's logits are compared."""

    def logits(batch: dict) -> torch.Tensor:
        device = next(model.parameters()).device
        return batch_logits(model, on_device(batch, device)).cpu()

    return logits
