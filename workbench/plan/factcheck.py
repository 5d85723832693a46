"""Fact-check of the reference documents' memory claims against the planner's figures for the real
model (AutoGLM-Phone-9B = transformers' Glm4vConfig() defaults).

Verdicts rest on lower bounds where possible: if the weights (or the model state) alone exceed the
claimed figure, no activation or framework detail can rescue the claim.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from ..config import LoraSection
from .planner import DEFAULT_DEVICES, GiB, T4_DEVICES, Setting, policy_for, predict
from .arch import census

MODEL = "autoglm-phone-9b"


@dataclass(frozen=True)
class Claim:
    id: str
    source: str
    text: str  # the claim as the document states it (translated)
    claimed_gib: float
    settings: str  # the settings the document evidently means


@dataclass(frozen=True)
class Verdict:
    claim: Claim
    planner_gib: float  # planner's per-GPU figure under the evident settings
    lower_bound_gib: float  # bytes that no setting of this kind avoids (weights / model state per GPU)
    verdict: str  # plausible | impossible | plausible only if ...
    why: str

    def to_dict(self) -> dict:
        return {**asdict(self.claim), "planner_gib": round(self.planner_gib, 1),
                "lower_bound_gib": round(self.lower_bound_gib, 1), "verdict": self.verdict, "why": self.why}


CLAIMS = (
    Claim("000-fp32", "seed 000 §4.1 (2x RTX 4090)", "FP32 full precision: ~28 GB peak per card, does not fit a 24 GB 4090", 28,
          "full fine-tuning, fp32, one copy per card (DDP), micro-batch 1, seq 512, gradient checkpointing"),
    Claim("000-amp", "seed 000 §4.1 (2x RTX 4090)", "FP16 + AMP: ~18 GB per card, trains with batch <= 2", 18,
          "full fine-tuning (the document never mentions LoRA), torch AMP fp16, DDP, micro-batch 2, seq 512, ckpt"),
    Claim("000-zero3", "seed 000 §3.3/§4.1 (2x RTX 4090)", "FP16 + DeepSpeed ZeRO-3: ~11 GB per card, batch up to 4 per GPU", 11,
          "its deepspeed_config.json: fp16, ZeRO-3, offload_optimizer to CPU, micro-batch 4, full fine-tuning, ckpt, seq 512"),
    Claim("003-fp32", "seed 003 (NVIDIA T4)", "FP32 full-parameter training: 24 GB", 24,
          "full fine-tuning, fp32, one T4 (16 GB), batch 8, max_length 512"),
    Claim("003-fp16", "seed 003 (NVIDIA T4)", "FP16 mixed precision: 12 GB", 12,
          "full fine-tuning, torch AMP fp16 (T4 has no bf16), batch 8, max_length 512"),
    Claim("003-lora-fp16", "seed 003 (NVIDIA T4)", "LoRA + FP16: 8 GB", 8,
          "LoRA r=8 (its target names 'query'/'value' match no GLM module; we use q_proj,v_proj), fp16 frozen base, batch 8, seq 512"),
    Claim("003-lora-int8", "seed 003 (NVIDIA T4)", "LoRA + INT8 quantization: 5 GB", 5,
          "LoRA r=8 on an int8-quantized base (bitsandbytes LLM.int8: Linear weights 1 byte, embeddings/lm_head fp16), batch 8"),
)


def quantized_weight_bytes(bits: int) -> int:
    """Weights of the real model with Linear layers quantized to ``bits`` (embeddings, norms and lm_head
    stay fp16, as bitsandbytes does; quantization constants ignored, which only flatters the claim)."""
    lora = LoraSection(enabled=False)
    c = census(MODEL, lora, policy_for("pure-bf16", lora))
    out = 0
    for p in c.params:
        linear = p.group in ("decoder", "vision") and p.name.endswith(".weight") and any(
            k in p.name for k in ("_proj", ".qkv", ".proj", ".fc"))
        out += p.numel * bits // 8 if linear else p.numel * 2
    return out


def fact_check(devices_4090=DEFAULT_DEVICES, devices_t4=T4_DEVICES) -> list[Verdict]:
    q_v = LoraSection(r=8, alpha=16, dropout=0.1, target_modules=["q_proj", "v_proj"])
    out = []

    def run(claim, setting, devices, lora=None):
        return predict(MODEL, setting, devices, lora=lora)

    # 000: 2x 4090
    p = run(CLAIMS[0], Setting("fp32", "ddp", 0, "none", False, 2, 1, 512, True), devices_4090)
    out.append(Verdict(CLAIMS[0], p.gpu_total / GiB, p.state.total / GiB, "impossible (figure); conclusion right",
                       f"fp32 weights alone are {p.state.weights / GiB:.1f} GiB and AdamW model state "
                       f"{p.state.total / GiB:.0f} GiB per card; ~28 GB understates the need ~{p.gpu_total / GiB / 28:.0f}x. "
                       "'Does not fit' is correct, and even ZeRO-3 over 2 cards leaves ~80 GiB/card of model state."))
    p = run(CLAIMS[1], Setting("fp16", "ddp", 0, "none", False, 2, 2, 512, True), devices_4090)
    lora_p = run(CLAIMS[1], Setting("fp16", "deepspeed", 3, "none", True, 2, 2, 512, True), devices_4090)
    out.append(Verdict(CLAIMS[1], p.gpu_total / GiB, p.state.total / GiB,
                       "impossible for full fine-tuning; plausible only as LoRA with the fp16 base sharded over both cards",
                       f"AMP keeps fp32 weights (the master copy): model state {p.state.total / GiB:.0f} GiB per card. "
                       f"~18 GB is about the fp16 weights of the text decoder alone ({_text_fp16_gib():.1f} GiB), i.e. nothing "
                       f"trains. LoRA + ZeRO-3 (fp16 base split over 2 cards) would need {lora_p.gpu_total / GiB:.1f} GiB/card."))
    p = run(CLAIMS[2], Setting("fp16", "deepspeed", 3, "optimizer", False, 2, 4, 512, True), devices_4090)
    p2 = run(CLAIMS[2], Setting("fp16", "deepspeed", 3, "optimizer+params", False, 2, 4, 512, True), devices_4090)
    out.append(Verdict(CLAIMS[2], p.gpu_total / GiB, p.state.weights / GiB,
                       "impossible with its config; plausible only if parameters are offloaded too and the host has ~"
                       f"{p2.host_total / GiB:.0f} GiB RAM",
                       f"With offload_optimizer only, each card still holds its fp16 parameter shard "
                       f"({p.state.weights / GiB:.1f} GiB) + ZeRO-3 buckets + activations: {p.gpu_total / GiB:.1f} GiB; the "
                       f"host needs {p.host_total / GiB:.0f} GiB for fp32 master + Adam + gradients. Adding offload_param gives "
                       f"{p2.gpu_total / GiB:.1f} GiB/card at {p2.host_total / GiB:.0f} GiB host RAM. "
                       "('fp16_optimizer_state' is not a DeepSpeed option.)"))
    # 003: one T4 (16 GB, no bf16)
    t4 = devices_t4
    p = run(CLAIMS[3], Setting("fp32", "none", 0, "none", False, 1, 8, 512, False), t4)
    out.append(Verdict(CLAIMS[3], p.gpu_total / GiB, p.state.total / GiB, "impossible",
                       f"A T4 has 16 GB, so '24 GB' cannot be on it; fp32 full fine-tuning needs {p.state.total / GiB:.0f} GiB "
                       f"of model state (weights {p.state.weights / GiB:.1f} GiB)."))
    p = run(CLAIMS[4], Setting("fp16", "none", 0, "none", False, 1, 8, 512, False), t4)
    out.append(Verdict(CLAIMS[4], p.gpu_total / GiB, p.state.weights / GiB, "impossible",
                       f"AMP keeps fp32 weights ({p.state.weights / GiB:.1f} GiB) plus gradients and Adam "
                       f"({p.state.total / GiB:.0f} GiB); even bare fp16 weights are {_all_fp16_gib():.1f} GiB > 12."))
    p = run(CLAIMS[5], Setting("fp16", "none", 0, "none", True, 1, 8, 512, False), t4, lora=q_v)
    out.append(Verdict(CLAIMS[5], p.gpu_total / GiB, p.state.weights / GiB, "impossible",
                       f"The frozen fp16 base alone is {p.state.weights / GiB:.1f} GiB (> 8, and > the T4's 15 GiB); "
                       "LoRA shrinks gradients and optimizer state, not the base weights. (8 GB is about right for a ~3-4 B model.)"))
    int8 = quantized_weight_bytes(8)
    int4 = quantized_weight_bytes(4)
    out.append(Verdict(CLAIMS[6], (int8 + p.gpu_total - p.state.weights) / GiB, int8 / GiB,
                       "impossible (even 4-bit weights exceed it)",
                       f"int8 Linear weights + fp16 embeddings/lm_head = {int8 / GiB:.1f} GiB > 5 before any activation; "
                       f"4-bit would be {int4 / GiB:.1f} GiB of weights, still above 5 GB with CUDA context and activations."))
    return out


def _text_fp16_gib() -> float:
    lora = LoraSection(enabled=False)
    c = census(MODEL, lora, policy_for("pure-bf16", lora))
    return (c.bytes() - c.bytes(group="vision")) / GiB


def _all_fp16_gib() -> float:
    lora = LoraSection(enabled=False)
    return census(MODEL, lora, policy_for("pure-bf16", lora)).bytes() / GiB


def format_markdown(verdicts: list[Verdict]) -> str:
    lines = ["| claim | source | claimed | evident settings | planner (per GPU) | lower bound | verdict | why |",
             "|---|---|---|---|---|---|---|---|"]
    for v in verdicts:
        c = v.claim
        lines.append(f"| {c.text} | {c.source} | {c.claimed_gib:g} GB | {c.settings} | {v.planner_gib:.1f} GiB | "
                     f"{v.lower_bound_gib:.1f} GiB | **{v.verdict}** | {v.why} |")
    return "\n".join(lines)
