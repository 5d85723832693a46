"""The activation planner against what autograd saves for backward: the figures of docs/memory_planner.md
("Achieved tolerance", the screenshots' vision share), printed.

    python -m workbench.bench.activations [--cases default|tiny|vision|quantized ...]

Each case builds a model as a run does (precision policy, LoRA, gradient checkpointing), measures one forward + the
run's loss under ``plan.SavedTensors`` (``measure_saved_activations``) and prints the planner's prediction
(``predict_for_run``) beside it: bytes and the relative difference. ``default``: SmolLM2-135M-Instruct (the packaged
model; ~1 CPU-minute), micro-batch 2 x 256 tokens, every token labelled, the default loss head; ``tiny``: tiny GLM-4
and GLM-4V, 2 x 48 tokens; ``vision``: tiny GLM-4V with one 112x224 screenshot per row, the vision tower's share
(the batch with pixels minus the same tokens without). tests/plan/test_activations.py and test_images.py hold the
same measurements (these functions) to the tolerances the doc states.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace

from ..user_output import text_table


@dataclass(frozen=True)
class Case:
    source: str
    mode: str
    lora: bool
    ckpt: bool
    batch: int = 2
    seq: int = 256
    dropout: float = 0.05
    loss_head: str = "chunked"  # memory.loss_head (the default)
    lora_layers: int | None = None  # lora.layers: adapters on the last N decoder layers only
    quantized: str = "none"  # quantization.base: nf4 | int8 (LoRA over a quantized base)

    @property
    def label(self) -> str:
        adapter = ("LoRA" if self.quantized == "none" else f"QLoRA-{self.quantized}") if self.lora else "full"
        return (
            f"{self.source} {self.mode} {adapter}"
            f"{' dropout ' + format(self.dropout, 'g') if self.lora else ''}{' ckpt' if self.ckpt else ''}"
            f" {self.batch}x{self.seq}"
            + ("" if self.loss_head == "chunked" else f" loss_head {self.loss_head}")
            + ("" if self.lora_layers is None else f" last {self.lora_layers} layers")
        )


DEFAULT_CASES = [
    Case("smollm2-135m-instruct", *c)
    for c in (
        ("bf16", True, False, 1),
        ("bf16", True, False, 2),
        ("bf16", True, True, 2),
        ("fp32", False, False, 2, 256, 0.0),
        ("pure-bf16", False, False, 2, 256, 0.0),
        ("bf16", False, False, 2, 256, 0.0),
        ("bf16", True, False, 2, 256, 0.0),
    )
]
DEFAULT_CASES += [replace(c, lora_layers=8) for c in DEFAULT_CASES[1:3]]  # bf16 LoRA 2x256, without and with ckpt
TINY_CASES = [
    Case(source, mode, lora, ckpt, 2, 48)
    for source in ("tiny-glm4", "tiny-glm4v")
    for mode, lora, ckpt in (
        ("bf16", True, False),
        ("fp32", False, False),
        ("pure-bf16", True, True),
        ("bf16", False, True),
        ("fp16", True, False),
    )
]
# LoRA over a quantized base: nf4 keeps nothing more than LoRA over a 16-bit base; LLM.int8 keeps each quantized
# linear's input (on its autograd context, which the measurement walks too)
QUANTIZED_CASES = [
    Case("tiny-glm4", mode, True, ckpt, 2, 48, quantized=kind)
    for kind in ("nf4", "int8")
    for mode, ckpt in (("bf16", False), ("fp32", False), ("bf16", True))
]
QUANTIZED_CASES += [
    Case("smollm2-135m-instruct", "bf16", True, False, 1, 256, quantized=kind) for kind in ("nf4", "int8")
]
VISION_CASES = [
    Case("tiny-glm4v", mode, lora, ckpt, 2, 40)
    for mode, lora, ckpt in (
        ("bf16", True, False),
        ("bf16", True, True),
        ("fp16", True, True),
        ("fp32", False, False),
        ("bf16", False, False),
        ("pure-bf16", False, True),
    )
]


def _run_config(case: Case):
    from ..config import RunConfig

    return RunConfig.model_validate(
        {
            "model": {"source": case.source, "gradient_checkpointing": case.ckpt},
            "precision": {"mode": case.mode},
            "lora": {"enabled": case.lora, "dropout": case.dropout, "layers": case.lora_layers},
            "data": {"train": "unused.jsonl", "eval": None, "max_length": case.seq},
            "schedule": {"micro_batch_size": case.batch},
            "memory": {"loss_head": case.loss_head},
            "quantization": {"base": case.quantized},
        }
    )


def text_activations(case: Case) -> tuple[int, int]:
    """(predicted, measured) bytes saved for backward by one forward of random tokens, every token labelled."""
    import torch

    from ..models import apply_lora, build_run_model, enable_gradient_checkpointing
    from ..plan import measure_saved_activations, predict_for_run
    from ..precision import resolve_precision

    cfg = _run_config(case)
    precision = resolve_precision(cfg, torch.device("cpu"))
    base = build_run_model(cfg, precision.base_dtype, compute_dtype=precision.compute_dtype)  # quantized as a run's
    model = apply_lora(base, cfg.lora, precision.trainable_dtype)
    model.train()
    if case.ckpt:
        enable_gradient_checkpointing(model)
    ids = torch.randint(0, 250, (case.batch, case.seq), generator=torch.Generator().manual_seed(0))
    measured = measure_saved_activations(model, ids, precision.autocast, memory=cfg.memory)
    return predict_for_run(cfg, precision).activations["saved_forward"], measured.saved_forward


def screenshot_batch(model, images):
    """input_ids [rows, 8 text + image tokens with their markers + 32 text] and the model inputs of ``images``
    (one a row) through GLM-4.1V's published image processor."""
    import torch
    from transformers.models.glm4v.image_processing_pil_glm4v import Glm4vImageProcessorPil

    from ..models.processor import grid_token_count
    from ..plan.images import GLM41V_PREPROCESSOR

    p = GLM41V_PREPROCESSOR
    processor = Glm4vImageProcessorPil(
        size=p["size"],
        patch_size=p["patch_size"],
        merge_size=p["merge_size"],
        temporal_patch_size=p["temporal_patch_size"],
    )
    cfg = model.config
    out = processor(images=images, return_tensors="pt")
    n = grid_token_count(out["image_grid_thw"][0].tolist(), processor.merge_size)
    image = torch.tensor([cfg.image_start_token_id] + [cfg.image_token_id] * n + [cfg.image_end_token_id])
    text = torch.randint(0, 250, (len(images), 40), generator=torch.Generator().manual_seed(0))
    ids = torch.cat([text[:, :8], image.expand(len(images), -1), text[:, 8:]], 1)
    inputs = {
        "pixel_values": out["pixel_values"],
        "image_grid_thw": out["image_grid_thw"],
        "mm_token_type_ids": (ids == cfg.image_token_id).int(),
    }
    return ids, inputs


@dataclass(frozen=True)
class VisionMeasurement:
    predicted_vision: int  # the plan with screenshots minus the plan of the same sequence length without
    measured_vision: int  # the batch with pixels minus the same tokens without
    predicted_total: int
    measured_total: int
    seq_len: int  # the planned decoder sequence (text + image tokens + markers)
    batch_len: int  # the measured batch's


def vision_activations(case: Case) -> VisionMeasurement:
    """One 112x224 screenshot a row on the model the engine builds; labels on the text tokens only, as real rows."""
    import torch
    from PIL import Image

    from ..data.tokenize import IGNORE_INDEX
    from ..engine.build import build_model
    from ..plan import measure_saved_activations, predict_for_run
    from ..precision import resolve_precision

    cfg = _run_config(case)
    precision = resolve_precision(cfg, torch.device("cpu"))
    model = build_model(cfg, precision, torch.device("cpu")).model
    model.train()
    ids, inputs = screenshot_batch(
        model.get_base_model() if case.lora else model, [Image.new("RGB", (112, 224), (9, 99, 199))] * case.batch
    )
    labels = ids.clone()
    labels[:, 8 : ids.shape[1] - 32] = IGNORE_INDEX  # the image and its markers follow 8 text tokens
    with_images = measure_saved_activations(
        model, ids, precision.autocast, labels=labels, memory=cfg.memory, **inputs
    ).saved_forward
    text_only = measure_saved_activations(
        model, ids, precision.autocast, labels=labels, memory=cfg.memory
    ).saved_forward
    plan = predict_for_run(cfg, precision, seq_len=case.seq, images_per_row=1, image_size="112x224")
    same_length = predict_for_run(cfg, precision, seq_len=ids.shape[1], label_tokens=39)  # 40 text tokens: 39 labels
    return VisionMeasurement(
        plan.activations["saved_forward"] - same_length.activations["saved_forward"],
        with_images - text_only,
        plan.activations["saved_forward"],
        with_images,
        plan.activations["seq_len"],
        ids.shape[1],
    )


def _rel(predicted: int, measured: int) -> str:
    if measured == 0:
        return "exact" if predicted == 0 else "-"
    if predicted == measured:
        return "exact"
    percent = (predicted - measured) / measured * 100
    return f"{percent:+.4f}%" if abs(percent) >= 1e-4 else f"{percent:+.1e}%"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m workbench.bench.activations", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--cases",
        nargs="+",
        choices=("default", "tiny", "vision", "quantized"),
        default=["default", "tiny", "vision", "quantized"],
    )
    ap.add_argument(
        "--loss-head",
        choices=("full", "labels", "chunked"),
        default="chunked",
        help="memory.loss_head of every case (default: chunked, the run's default)",
    )
    args = ap.parse_args(argv)
    rows = [("case", "predicted B", "measured B", "predicted - measured")]
    for group in args.cases:
        if group == "vision":
            for case in (replace(c, loss_head=args.loss_head) for c in VISION_CASES):
                m = vision_activations(case)
                rows.append(
                    (
                        f"{case.label} + 112x224 screenshot: vision tower",
                        f"{m.predicted_vision:,}",
                        f"{m.measured_vision:,}",
                        _rel(m.predicted_vision, m.measured_vision),
                    )
                )
                rows.append(
                    (
                        f"{case.label} + 112x224 screenshot: whole batch",
                        f"{m.predicted_total:,}",
                        f"{m.measured_total:,}",
                        _rel(m.predicted_total, m.measured_total),
                    )
                )
            continue
        cases = {"default": DEFAULT_CASES, "tiny": TINY_CASES, "quantized": QUANTIZED_CASES}[group]
        for case in (replace(c, loss_head=args.loss_head) for c in cases):
            predicted, measured = text_activations(case)
            rows.append(
                (
                    case.label,
                    f"{predicted:,}",
                    f"{measured:,}",
                    _rel(predicted, measured) + ("" if predicted == measured else f" ({predicted - measured:+,} B)"),
                )
            )
    print("\n".join(text_table(rows)))
    return 0


if __name__ == "__main__":
    import sys

    from ..user_output import hide_third_party_deprecations

    hide_third_party_deprecations()
    sys.exit(main())
