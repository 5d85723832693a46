"""How each export target is written and read back. Every writer takes the merged fp32 model and fills a
directory; every reader loads what was written, from disk, as the logits function parity checks.

    merged     adapter merged into the base, a plain transformers directory (fp32 / bf16 / fp16)
    int8       torchao int8 weights (dynamic int8 activations, or weight-only), reloadable by transformers
    onnx       torch.onnx.export(dynamo=True): (input_ids, attention_mask) -> logits, no KV cache
    onnx-int8  the onnx graph with onnxruntime's dynamic int8 quantization
"""
from __future__ import annotations

import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from .parity import LogitsFn, ParityGate, torch_logits

# torchao probes for CUDA/C++ kernels it does not need on the CPU and warns on every import without this.
os.environ.setdefault("TORCHAO_FORCE_SKIP_LOADING_SO_FILES", "1")

TARGETS = ("merged", "int8", "onnx", "onnx-int8")
DTYPES = ("float32", "bfloat16", "float16")
INT8_MODES = ("dynamic", "weight")
ONNX_FAMILIES = ("llama", "glm4")  # text-only decoders; see unsupported_reason
# Processor files of a vision-language base, copied beside the merged weights so the export loads as the base did.
PROCESSOR_FILES = ("preprocessor_config.json", "processor_config.json", "video_preprocessor_config.json")


@dataclass(frozen=True)
class TargetSpec:
    target: str
    dtype: str = "float32"  # merged only
    int8_mode: str = "dynamic"  # int8 only

    @property
    def name(self) -> str:
        """The export's default directory name under RUN/exports/."""
        return {"merged": f"merged-{self.dtype}", "int8": f"int8-{self.int8_mode}"}.get(self.target, self.target)

    @property
    def precision(self) -> str:
        return {"merged": self.dtype, "int8": f"int8 weights ({'int8 dynamic activations' if self.int8_mode == 'dynamic' else 'weight-only'}, torchao)",
                "onnx": "float32", "onnx-int8": "int8 dynamic (onnxruntime quantize_dynamic)"}[self.target]

    def default_gate(self) -> ParityGate:
        """Bounds chosen from what healthy exports measured (docs/export.md) with a margin; a corrupted weight
        or a wrong merge lands far outside them."""
        if self.target in ("onnx",) or (self.target == "merged" and self.dtype == "float32"):
            return ParityGate(max_logit_diff=1e-3, min_agreement=0.99, max_loss_increase=1e-3)
        # The low-precision logit bounds catch corruption, not rounding: SmolLM2's logits reach ~30, and a healthy
        # bf16 merge of the demo run differed by up to 2.05 (agreement 0.984, loss unchanged).
        if self.target == "merged":  # half precision: rounding of every weight and activation
            return ParityGate(max_logit_diff=5.0, min_agreement=0.9, max_loss_increase=0.05)
        return ParityGate(max_logit_diff=8.0, min_agreement=0.85, max_loss_increase=0.1)  # int8


def target_choices() -> list[TargetSpec]:
    """Every export there is to ask for, once each: merged per dtype, int8 per mode, onnx, onnx-int8."""
    return ([TargetSpec("merged", dtype=d) for d in DTYPES] + [TargetSpec("int8", int8_mode=m) for m in INT8_MODES]
            + [TargetSpec("onnx"), TargetSpec("onnx-int8")])


def unsupported_reason(spec: TargetSpec, family: str) -> str | None:
    if spec.target.startswith("onnx") and family not in ONNX_FAMILIES:
        return (f"--target {spec.target} exports text-only decoders ({', '.join(ONNX_FAMILIES)}); this run's model is "
                f"{family} (a vision tower + decoder, whose image inputs the logits-only graph does not take): export "
                "--target merged or int8 instead")
    return None


def save_tokenizer_files(tokenizer, base_path: str, out: Path) -> None:
    """Tokenizer with its chat template, plus a vision-language base's processor files."""
    tokenizer.save_pretrained(out)
    base = Path(base_path)
    for name in PROCESSOR_FILES:
        if (base / name).is_file() and not (out / name).exists():
            shutil.copy2(base / name, out / name)


def write_merged(merged: torch.nn.Module, tokenizer, base_path: str, out: Path, spec: TargetSpec) -> None:
    from ..precision import DTYPE_BY_NAME

    # model.safetensors + config + generation config; the merged copy is the export's own, cast in place
    merged.to(DTYPE_BY_NAME[spec.dtype]).save_pretrained(out)
    save_tokenizer_files(tokenizer, base_path, out)


def write_int8(merged: torch.nn.Module, tokenizer, base_path: str, out: Path, spec: TargetSpec) -> None:
    """Through transformers' TorchAoConfig, so the quantization config is saved and from_pretrained restores it."""
    from torchao.quantization import Int8DynamicActivationInt8WeightConfig, Int8WeightOnlyConfig
    from transformers import TorchAoConfig

    from ..models import pretrained_class

    quant = Int8DynamicActivationInt8WeightConfig() if spec.int8_mode == "dynamic" else Int8WeightOnlyConfig()
    with tempfile.TemporaryDirectory(prefix="workbench-int8-") as staging:
        merged.save_pretrained(staging)
        model = pretrained_class(merged.config).from_pretrained(staging, dtype=torch.float32,
                                                                quantization_config=TorchAoConfig(quant))
        model.save_pretrained(out, safe_serialization=True)
    save_tokenizer_files(tokenizer, base_path, out)


class _LogitsOnly(torch.nn.Module):
    """The graph exported: the model's logits for (input_ids, attention_mask), without a cache."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits


def _export_onnx(merged: torch.nn.Module, path: Path) -> None:
    import warnings

    ids = torch.randint(0, merged.config.get_text_config().vocab_size, (2, 16))
    mask = torch.ones_like(ids)
    mask[1, 12:] = 0  # a padded row, so the traced graph keeps the general attention-mask path
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("sequence")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(_LogitsOnly(merged.eval()), (ids, mask), dynamo=True, verbose=False,
                                    input_names=["input_ids", "attention_mask"], output_names=["logits"],
                                    dynamic_shapes={"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}})
    program.save(str(path), external_data=True)  # model.onnx + model.onnx.data: weights may exceed protobuf's 2 GB


def write_onnx(merged: torch.nn.Module, tokenizer, base_path: str, out: Path, spec: TargetSpec) -> None:
    from .onnx_runner import MODEL_FILE

    if spec.target == "onnx":
        _export_onnx(merged, out / MODEL_FILE)
    else:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        with tempfile.TemporaryDirectory(prefix="workbench-onnx-") as staging:
            fp32 = Path(staging) / MODEL_FILE
            _export_onnx(merged, fp32)
            root = logging.getLogger()
            level = root.level
            root.setLevel(logging.ERROR)  # its advice to pre-process the graph is for image models
            try:
                quantize_dynamic(str(fp32), str(out / MODEL_FILE), weight_type=QuantType.QInt8)
            finally:
                root.setLevel(level)
    merged.config.save_pretrained(out)
    merged.generation_config.save_pretrained(out)
    save_tokenizer_files(tokenizer, base_path, out)


WRITERS: dict[str, Callable] = {"merged": write_merged, "int8": write_int8, "onnx": write_onnx, "onnx-int8": write_onnx}


def read_export(out: Path, spec: TargetSpec) -> LogitsFn:
    """The written export loaded back from disk, as a logits function (what serving or the runner will load)."""
    if spec.target.startswith("onnx"):
        from .onnx_runner import OnnxCausalLM

        runner = OnnxCausalLM(out)
        return lambda ids, mask: torch.from_numpy(runner.logits(ids.numpy(), mask.numpy()))
    from ..models import load_for_inference

    dtype = spec.dtype if spec.target == "merged" else "float32"
    return torch_logits(load_for_inference(str(out), dtype=dtype).model)
