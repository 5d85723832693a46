"""Parity of an export with the unexported model on held-out examples, and the gate it must pass.

Both models see the same right-padded batches, made as training's eval makes them (``workbench.forward``: the
run's tokenization, and its processor for rows with screenshots, whose pixel values and grids the models get too);
figures are taken over real (unpadded) positions only: the largest |logit difference|, the share of positions
whose greedy (argmax) next token agrees, and each model's held-out loss (mean next-token cross-entropy over the
assistant tokens, as in training's eval).

Where the held-out answers are phone actions, an export can also be held to **action parity** (``ActionParity``,
GGUF exports: ``export.gguf``): both models answer those rows greedily, whole, and the export's action must be the
unexported model's by the one matching rule (``phone.action_match``), each side's parse rate and exact-match rate
against the recorded actions reported beside it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ..forward import batch_logits, on_device
from ..phone.action_match import match_action
from ..phone.actions import Action
from ..phone.openautoglm import reply_action
from ..precision import count_target_tokens, token_loss_sum
from ..precision.parity import LogitAgreement, logit_agreement
from ..stats import rate

# logits(batch) -> [batch, seq, vocab]; a batch is forward.collated's (input_ids, attention_mask, labels, images)
LogitsFn = Callable[[dict], torch.Tensor]


@dataclass(frozen=True)
class ActionRow:
    """A held-out row whose answer is a phone action: its prompt as each side is asked it, the recorded action."""

    prompt: list[dict]  # the messages before the answer, screenshots decoded (the unexported model's input)
    served_prompt: list[dict]  # the same, screenshots as data: URLs (a server's request)
    answer: str  # the recorded reply
    recorded: Action  # its action
    box: tuple | None  # the recorded target's box (meta.target_box), when the row has one


@dataclass(frozen=True)
class ReferenceActions:
    """The unexported model's greedy replies to the held-out action rows, taken before the export is written."""

    rows: list[ActionRow]
    replies: list[str]
    max_tokens: int  # what each side may generate (``export.gguf.action_max_tokens``)


@dataclass(frozen=True)
class ActionParity:
    """The export's greedy actions against the unexported model's on the held-out action rows."""

    rows: int
    agreement: float  # rows where both read no action, or the export's matches the reference's exactly
    reference: dict  # {"parse_rate", "exact_match"}: the unexported model's actions against the recorded ones
    export: dict  # the same for the export

    def to_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        ref, exp = self.reference, self.export
        return (
            f"action agreement {self.agreement:.3f} over {self.rows} action rows (parse {exp['parse_rate']:.3f} vs "
            f"{ref['parse_rate']:.3f}, exact vs recorded {exp['exact_match']:.3f} vs {ref['exact_match']:.3f})"
        )


def action_parity(rows: list[ActionRow], reference_replies: list[str], export_replies: list[str]) -> ActionParity:
    """The two models' replies to ``rows``, read as Open-AutoGLM's runtime reads them (``reply_action``) and matched by
    ``phone.action_match``: the export's action against the reference's, and each against the recorded one. ValueError
    for no rows (no figure to gate on)."""
    if not rows:
        raise ValueError("action parity needs at least one action row")
    ref_actions = [reply_action(r) for r in reference_replies]
    exp_actions = [reply_action(r) for r in export_replies]

    def against_recorded(actions: list) -> dict:
        return {
            "parse_rate": rate(a is not None for a in actions),
            "exact_match": rate(match_action(row.recorded, a, row.box).exact for row, a in zip(rows, actions)),
        }

    return ActionParity(
        rows=len(rows),
        agreement=rate(
            (r is None and e is None) or (r is not None and match_action(r, e).exact)
            for r, e in zip(ref_actions, exp_actions)
        ),
        reference=against_recorded(ref_actions),
        export=against_recorded(exp_actions),
    )


@dataclass(frozen=True)
class ParityGate:
    """What an export must reach to count as exported; a figure outside any bound fails the export."""

    max_logit_diff: float  # largest |logit difference| allowed
    min_agreement: float  # least share of positions whose greedy token agrees
    max_loss_increase: float  # held-out loss (nats/token) the export may lose against the reference
    # least share of held-out action rows whose greedy action is the reference's (exports measured on actions)
    min_action_agreement: float = 0.0

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
    actions: ActionParity | None = None  # where the held-out answers are phone actions and the export measures them

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
        if self.actions is not None and self.actions.rows and not self.actions.agreement >= g.min_action_agreement:
            out.append(
                f"action agreement {self.actions.agreement:.3f} < {g.min_action_agreement:g} "
                f"over {self.actions.rows} action rows"
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
            "actions": self.actions.to_dict() if self.actions is not None else None,
            "passed": self.passed,
            "failures": self.failures(),
        }

    def summary(self) -> str:
        actions = f"; {self.actions.summary()}" if self.actions is not None and self.actions.rows else ""
        return (
            f"max |logit diff| {self.max_logit_diff:.3g}, greedy agreement {self.agreement:.4f} over "
            f"{self.positions} positions of {self.examples} held-out examples, held-out loss "
            f"{self.export_loss:.4f} (reference {self.reference_loss:.4f}){actions}"
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
