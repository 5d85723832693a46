"""How each export target is written and read back. Every writer takes the merged fp32 model and fills a
directory; every reader loads what was written, from disk, as the logits function parity checks.

    merged     adapter merged into the base, a plain transformers directory (fp32 / bf16 / fp16)
    int8       torchao int8 weights (dynamic int8 activations, or weight-only), reloadable by transformers
    onnx       torch.onnx.export(dynamo=True): (input_ids, attention_mask, position_ids, past key/values) ->
               logits + present key/values (a KV cache as flat tensors)
    onnx-int8  the onnx graph with onnxruntime's dynamic int8 quantization
    gguf       llama.cpp's GGUF (f16, q8_0, q4_k_m) by llama.cpp's own converter and llama-quantize, a GLM-4.1V's
               vision projector (mmproj) beside it, an Ollama Modelfile (``export.gguf``); read back by llama-server
    gguf-lora  the adapter alone as a GGUF LoRA over the base's f16 GGUF (``convert_lora_to_gguf.py``)
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from ..plan.gguf import GGUF_QUANTS
from .parity import LogitsFn, ParityGate, torch_logits

# torchao probes for CUDA/C++ kernels it does not need on the CPU and warns on every import without this.
os.environ.setdefault("TORCHAO_FORCE_SKIP_LOADING_SO_FILES", "1")

TARGETS = ("merged", "int8", "onnx", "onnx-int8", "gguf", "gguf-lora")
DTYPES = ("float32", "bfloat16", "float16")
INT8_MODES = ("dynamic", "weight")
# the modules each target imports beyond the core install (the `export` extra): checked before any work starts
TARGET_MODULES = {
    "merged": (),
    "int8": ("torchao",),
    "onnx": ("onnx", "onnxscript", "onnxruntime"),
    "onnx-int8": ("onnx", "onnxscript", "onnxruntime"),
    "gguf": ("sentencepiece",),  # llama.cpp's converter imports it for every Llama-family tokenizer
    "gguf-lora": ("sentencepiece",),
}
ONNX_FAMILIES = ("llama", "glm4")  # text-only decoders; see unsupported_reason
# Processor files of a vision-language base, copied beside the merged weights so the export loads as the base did.
PROCESSOR_FILES = ("preprocessor_config.json", "processor_config.json", "video_preprocessor_config.json")


@dataclass(frozen=True)
class TargetSpec:
    target: str
    dtype: str = "float32"  # merged only
    int8_mode: str = "dynamic"  # int8 only
    quant: str = "f16"  # gguf only: f16, q8_0, q4_k_m

    @property
    def name(self) -> str:
        """The export's default directory name under RUN/exports/."""
        names = {"merged": f"merged-{self.dtype}", "int8": f"int8-{self.int8_mode}", "gguf": f"gguf-{self.quant}"}
        return names.get(self.target, self.target)

    @property
    def precision(self) -> str:
        return {
            "merged": self.dtype,
            "int8": f"int8 weights ({'int8 dynamic activations' if self.int8_mode == 'dynamic' else 'weight-only'}, torchao)",
            "onnx": "float32",
            "onnx-int8": "int8 dynamic (onnxruntime quantize_dynamic)",
            "gguf": f"GGUF {self.quant} (llama.cpp)",
            "gguf-lora": "GGUF LoRA f16 over the base's f16 GGUF (llama.cpp)",
        }[self.target]

    def default_gate(self) -> ParityGate:
        """Bounds chosen from what healthy exports measured (docs/export.md) with a margin; a corrupted weight
        or a wrong merge lands far outside them."""
        if self.target.startswith("gguf"):
            return GGUF_GATES[self.quant]
        if self.target in ("onnx",) or (self.target == "merged" and self.dtype == "float32"):
            return ParityGate(max_logit_diff=1e-3, min_agreement=0.99, max_loss_increase=1e-3)
        # The low-precision logit bounds catch corruption, not rounding: SmolLM2's logits reach ~30, and a healthy
        # bf16 merge of the demo run differed by up to 2.05 (agreement 0.984, loss unchanged).
        if self.target == "merged":  # half precision: rounding of every weight and activation
            return ParityGate(max_logit_diff=5.0, min_agreement=0.9, max_loss_increase=0.05)
        # int8: the largest single logit moves most (a healthy torchao int8-dynamic export of a 16-step demo run
        # measured 9.17 with loss +0.0065 and agreement 0.919); loss and agreement are what judge it, the logit
        # bound only catches garbage (onnxruntime's default int8 of SmolLM2: 32, loss +0.75).
        return ParityGate(max_logit_diff=16.0, min_agreement=0.85, max_loss_increase=0.1)


# GGUF parity is measured through llama-server at the answer positions (export.gguf.gguf_parity): max_logit_diff bounds
# the largest |log-probability difference| over llama.cpp's top tokens at least 1% likely. The bounds catch corruption,
# not rounding: a SmolLM2 LoRA run measured 0.034 in f16 and 1.40 in q8_0, both with greedy agreement 1.0 and the loss
# unchanged (tests/export/test_gguf.py). f16 and q8_0 are gated; q4_k_m is reported (its gate passes anything finite:
# 4-bit weights move a small model's answers, the figures say how much). Where the held-out answers are phone actions,
# the GGUF's whole greedy replies must also act as the adapter's (min_action_agreement: the share of action rows whose
# action matches, export.parity.ActionParity): all but a near-tie in f16, three in four in q8_0.
GGUF_GATES = {
    "f16": ParityGate(max_logit_diff=0.5, min_agreement=0.97, max_loss_increase=0.02, min_action_agreement=0.9),
    "q8_0": ParityGate(max_logit_diff=2.5, min_agreement=0.93, max_loss_increase=0.05, min_action_agreement=0.75),
    "q4_k_m": ParityGate(max_logit_diff=float("inf"), min_agreement=0.0, max_loss_increase=float("inf")),
}


def target_choices() -> list[TargetSpec]:
    """Every export there is to ask for, once each: merged per dtype, int8 per mode, onnx, onnx-int8, gguf per
    quantization, gguf-lora."""
    return (
        [TargetSpec("merged", dtype=d) for d in DTYPES]
        + [TargetSpec("int8", int8_mode=m) for m in INT8_MODES]
        + [TargetSpec("onnx"), TargetSpec("onnx-int8")]
        + [TargetSpec("gguf", quant=q) for q in GGUF_QUANTS]
        + [TargetSpec("gguf-lora")]
    )


def unsupported_reason(spec: TargetSpec, family: str) -> str | None:
    if spec.target.startswith("onnx") and family not in ONNX_FAMILIES:
        return (
            f"--target {spec.target} exports text-only decoders ({', '.join(ONNX_FAMILIES)}); this run's model is "
            f"{family} (a vision tower + decoder, whose image inputs the logits-only graph does not take): export "
            "--target merged or int8 instead"
        )
    return None


def save_tokenizer_files(tokenizer, base_path: str, out: Path) -> None:
    """Tokenizer with its chat template, plus a vision-language base's processor files."""
    tokenizer.save_pretrained(out)
    base = Path(base_path)
    for name in PROCESSOR_FILES:
        if (base / name).is_file() and not (out / name).exists():
            shutil.copy2(base / name, out / name)


def write_merged(merged: torch.nn.Module, tokenizer, base_path: str, out: Path, spec: TargetSpec) -> None:
    from ..dtypes import DTYPE_BY_NAME

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
        model = pretrained_class(merged.config).from_pretrained(
            staging, dtype=torch.float32, quantization_config=TorchAoConfig(quant)
        )
        model.save_pretrained(out, safe_serialization=True)
    save_tokenizer_files(tokenizer, base_path, out)


class _CachedLogits(torch.nn.Module):
    """The graph exported: logits and the updated key/value cache for new tokens after a past.

    transformers 5 passes the cache as a DynamicCache object, which torch.export does not flatten; this wrapper
    takes and returns it as plain tensors instead (``past.{i}.key`` / ``past.{i}.value`` in,
    ``present.{i}.key`` / ``present.{i}.value`` out, [batch, kv_heads, length, head_dim]), building the
    DynamicCache inside the traced forward. An empty past (length 0) is a whole-sequence forward, which is
    what parity compares; the runner then decodes one token per call.
    """

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model
        self.layers = model.config.get_text_config().num_hidden_layers

    def forward(self, input_ids, attention_mask, position_ids, past):
        from transformers import DynamicCache

        cache = DynamicCache(config=self.model.config)
        for i in range(self.layers):
            cache.update(past[2 * i], past[2 * i + 1], i)
        out = self.model(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, cache=cache, use_cache=True
        )
        present = [t for layer in out.cache.layers for t in (layer.keys, layer.values)]
        return (out.logits, *present)


def cache_names(layers: int, prefix: str = "past") -> list[str]:
    return [f"{prefix}.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]


def _export_onnx(merged: torch.nn.Module, path: Path) -> None:
    import warnings

    model = _CachedLogits(merged.eval())
    vocab = merged.config.get_text_config().vocab_size
    with torch.no_grad():  # a real past of 3 positions gives the cache tensors' shapes
        past = merged(input_ids=torch.randint(0, vocab, (2, 3)), use_cache=True).cache
    past = tuple(t for layer in past.layers for t in (layer.keys, layer.values))
    ids = torch.randint(0, vocab, (2, 5))
    mask = torch.ones(2, 8, dtype=torch.long)
    mask[1, 6:] = 0  # a padded row, so the traced graph keeps the general attention-mask path
    positions = torch.arange(3, 8).expand(2, 5)
    batch, seq, total, length = (torch.export.Dim(n) for n in ("batch", "sequence", "total", "past"))
    names = cache_names(model.layers)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(
            model,
            (ids, mask, positions, past),
            dynamo=True,
            verbose=False,
            input_names=["input_ids", "attention_mask", "position_ids", *names],
            output_names=["logits", *cache_names(model.layers, "present")],
            dynamic_shapes=(
                {0: batch, 1: seq},
                {0: batch, 1: total},
                {0: batch, 1: seq},
                tuple({0: batch, 2: length} for _ in names),
            ),
        )
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


WRITERS: dict[str, Callable] = {
    "merged": write_merged,
    "int8": write_int8,
    "onnx": write_onnx,
    "onnx-int8": write_onnx,
}  # gguf and gguf-lora: export.gguf's writers (exporter.writer)


def read_export(out: Path, spec: TargetSpec, device: str | torch.device = "cpu") -> LogitsFn:
    """The written export loaded back from disk, as a logits function (what serving or the runner will load); a
    merged export on ``device`` (int8 and ONNX exports run on the CPU, where their kernels are)."""
    if spec.target.startswith("onnx"):
        from .onnx_runner import OnnxCausalLM

        runner = OnnxCausalLM(out)  # text-only graphs (unsupported_reason): token ids and mask are all they take
        return lambda batch: torch.from_numpy(
            runner.logits(batch["input_ids"].numpy(), batch["attention_mask"].numpy())
        )
    from ..models import load_for_inference

    merged = spec.target == "merged"
    return torch_logits(
        load_for_inference(
            str(out), dtype=spec.dtype if merged else "float32", device=device if merged else "cpu"
        ).model
    )
