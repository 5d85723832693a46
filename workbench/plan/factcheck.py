"""Fact-check of published memory claims about fine-tuning and serving AutoGLM-Phone-9B (three blog posts,
``DOCUMENTS``) against the planner's figures for the real model (AutoGLM-Phone-9B = transformers' Glm4vConfig()
defaults).

Verdicts rest on lower bounds where possible: if the weights (or the model state) alone exceed the
claimed figure, no activation or framework detail can rescue the claim.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass

import torch

from ..config import LoraSection
from .arch import planned_census
from .inference import weight_bytes
from .planner import DEFAULT_DEVICES, T4_DEVICES, DeviceSet, GiB, Setting, plan_matrix, policy_for, predict

MODEL = "autoglm-phone-9b"


@dataclass(frozen=True)
class Document:
    title: str  # as published (Chinese)
    title_en: str  # its title in English
    short: str  # how the table cites it


# The documents whose claims are checked: blog posts published in Chinese, cited by title (not part of this repository).
DOCUMENTS = {
    "optimization-guide": Document(
        "AutoGLM-Phone-9B优化指南：混合精度训练方案",
        "AutoGLM-Phone-9B optimization guide: a mixed-precision training scheme",
        'blog post "AutoGLM-Phone-9B optimization guide"',
    ),
    "training-techniques": Document(
        "AutoGLM-Phone-9B技术揭秘：轻量化模型的训练技巧",
        "AutoGLM-Phone-9B revealed: training techniques for a lightweight model",
        'blog post "AutoGLM-Phone-9B revealed"',
    ),
    "fine-tuning-in-practice": Document(
        "autoglm-phone-9b模型微调训练实战：从数据准备到生产部署全流程解析",
        "Fine-tuning autoglm-phone-9b in practice: from data preparation to production deployment",
        'blog post "Fine-tuning autoglm-phone-9b in practice"',
    ),
    "open-autoglm-230": Document(
        "github.com/zai-org/Open-AutoGLM/issues/230",
        "a community GGUF of AutoGLM-Phone-9B run with llama.cpp on an 8 GB RTX 4060",
        "Open-AutoGLM issue #230",
    ),
}


def cite(document: str, where: str = "") -> str:
    """A claim's source as the table prints it: the document's short title, then where in it."""
    return DOCUMENTS[document].short + (f", {where}" if where else "")


@dataclass(frozen=True)
class Claim:
    id: str
    source: str  # cite(...): the document by title, and where in it
    text: str  # the claim as the document states it (translated)
    claimed_gib: float | None  # None: the claim states no figure
    settings: str  # the settings the document evidently means


@dataclass(frozen=True)
class Verdict:
    claim: Claim
    planner_gib: float  # planner's per-GPU figure under the evident settings
    lower_bound_gib: float  # bytes that no setting of this kind avoids (weights / model state per GPU)
    verdict: str  # plausible | impossible | plausible only if ...
    why: str

    def to_dict(self) -> dict:
        return {
            **asdict(self.claim),
            "planner_gib": round(self.planner_gib, 1),
            "lower_bound_gib": round(self.lower_bound_gib, 1),
            "verdict": self.verdict,
            "why": self.why,
        }


CLAIMS = (
    Claim(
        "000-fp32",
        cite("optimization-guide", "§4.1 (2x RTX 4090)"),
        "FP32 full precision: ~28 GB peak per card, does not fit a 24 GB 4090",
        28,
        "full fine-tuning, fp32, one copy per card (DDP), micro-batch 1, seq 512, gradient checkpointing",
    ),
    Claim(
        "000-amp",
        cite("optimization-guide", "§4.1 (2x RTX 4090)"),
        "FP16 + AMP: ~18 GB per card, trains with batch <= 2",
        18,
        "full fine-tuning (the document never mentions LoRA), torch AMP fp16, DDP, micro-batch 2, seq 512, ckpt",
    ),
    Claim(
        "000-zero3",
        cite("optimization-guide", "§3.3/§4.1 (2x RTX 4090)"),
        "FP16 + DeepSpeed ZeRO-3: ~11 GB per card, batch up to 4 per GPU",
        11,
        "its deepspeed_config.json: fp16, ZeRO-3, offload_optimizer to CPU, micro-batch 4, full fine-tuning, ckpt, seq 512",
    ),
    Claim(
        "003-fp32",
        cite("fine-tuning-in-practice", "NVIDIA T4"),
        "FP32 full-parameter training: 24 GB",
        24,
        "full fine-tuning, fp32, one T4 (16 GB), batch 8, max_length 512",
    ),
    Claim(
        "003-fp16",
        cite("fine-tuning-in-practice", "NVIDIA T4"),
        "FP16 mixed precision: 12 GB",
        12,
        "full fine-tuning, torch AMP fp16 (T4 has no bf16), batch 8, max_length 512",
    ),
    Claim(
        "003-lora-fp16",
        cite("fine-tuning-in-practice", "NVIDIA T4"),
        "LoRA + FP16: 8 GB",
        8,
        "LoRA r=8 (its target names 'query'/'value' match no GLM module; we use q_proj,v_proj), fp16 frozen base, batch 8, seq 512",
    ),
    Claim(
        "003-lora-int8",
        cite("fine-tuning-in-practice", "NVIDIA T4"),
        "LoRA + INT8 quantization: 5 GB",
        5,
        "LoRA r=8 (q_proj, v_proj) over an int8 base (quantization.base int8: bitsandbytes LLM.int8, linear weights "
        "1 byte + an fp32 scale per row; embeddings, lm_head and the vision tower fp16), fp16, batch 8, seq 512, "
        "gradient checkpointing, one T4",
    ),
    # once images are counted: AutoGLM-Phone's training rows are screenshots
    Claim(
        "000-zero3-images",
        cite("optimization-guide", "§4.1 (2x RTX 4090), screenshots counted"),
        "FP16 + ZeRO-3: ~11 GB per card, batch up to 4 per GPU",
        11,
        "its ZeRO-3 fp16 config at micro-batch 4, read as kindly as possible (LoRA, parameters offloaded too, ckpt), "
        "each row one 1080x2400 screenshot + 512 text tokens",
    ),
    Claim(
        "002-batch16-images",
        cite("training-techniques", "§4.1 (RTX 4090), screenshots counted"),
        "FP16 + AMP with gradient accumulation: batch size 16 per 4090",
        24,
        "LoRA, fp16, the cheapest 2x4090 strategy at micro-batch 16 (ckpt), one 1080x2400 screenshot + 512 text tokens per row",
    ),
    # deployment: inference memory of one request, weights in fp16/bf16/int8/int4
    Claim(
        "002-infer-8gb",
        cite("training-techniques", "§1.2"),
        "one inference uses under 8 GB of GPU memory (INT8/FP16 mixed inference)",
        8,
        "one request: 4,096 text tokens + one 1080x2400 screenshot, weights int8 / fp16 (and int4 for comparison)",
    ),
    Claim(
        "002-two-4090",
        cite("training-techniques", "§2"),
        "serving needs 2 or more RTX 4090s: one card cannot hold the full model",
        24,
        "one request (4,096 text tokens + one screenshot), bf16 weights, on one 24 GB RTX 4090",
    ),
    Claim(
        "003-int8-deploy",
        cite("fine-tuning-in-practice", "deployment"),
        "dynamic INT8 quantization (quantize_dynamic on Linear) for deployment",
        None,
        "int8 weight-only / dynamic on every Linear but lm_head; sizes vs bf16, and SmolLM2's measured exports",
    ),
    Claim(
        "003-onnx",
        cite("fine-tuning-in-practice", "deployment"),
        "export to ONNX (opset 13, a (1, 512) dummy input) and run it with ONNX Runtime / CoreML",
        None,
        "torch.onnx.export of the merged model in fp32, as the document's code does",
    ),
    Claim(
        "003-mobile",
        cite("fine-tuning-in-practice", "conclusion"),
        "24 GB -> 5 GB makes deploying and updating the model on mobile devices possible",
        5,
        "inference with int4 weights (the smallest format) and one screenshot; 'updating' = LoRA training",
    ),
    Claim(
        "gguf-8gb",
        cite("open-autoglm-230"),
        "a Q4_K_M GGUF (5.74 GB) plus its mmproj (1.66 GB) runs on an 8 GB RTX 4060",
        8,
        "llama.cpp: Q4_K_M text GGUF + f16 mmproj + f16 KV cache at 25,480 tokens (Open-AutoGLM's context), all on "
        "the GPU",
    ),
)

# Sizes measured on SmolLM2-135M-Instruct after the demo's fine-tune (docs/export.md, `python -m workbench.bench.export`),
# MB (10^6 bytes) of the export directory: weights + tokenizer/config files.
SMOLLM2_MEASURED_MB = {"fp32": 541.6, "bf16": 272.6, "int8": 224.0, "onnx": 546.2}
SMOLLM2 = "smollm2-135m-instruct"


def fact_check(devices_4090=DEFAULT_DEVICES, devices_t4=T4_DEVICES) -> list[Verdict]:
    """Every claim's verdict, in the order of ``CLAIMS``."""
    return [
        *_two_4090_verdicts(devices_4090),
        *_t4_verdicts(devices_t4),
        *_image_verdicts(devices_4090),
        *_deployment_verdicts(),
        _gguf_verdict(),
    ]


def _two_4090_verdicts(devices_4090) -> list[Verdict]:
    """Seed 000's training claims on 2x RTX 4090: fp32, AMP and ZeRO-3."""
    out = []
    p = predict(MODEL, Setting("fp32", "ddp", 0, "none", False, 2, 1, 512, True), devices_4090)
    out.append(
        Verdict(
            CLAIMS[0],
            p.gpu_total / GiB,
            p.state.total / GiB,
            "impossible (figure); conclusion right",
            f"fp32 weights alone are {p.state.weights / GiB:.1f} GiB and AdamW model state "
            f"{p.state.total / GiB:.0f} GiB per card; ~28 GB understates the need ~{p.gpu_total / GiB / 28:.0f}x. "
            "'Does not fit' is correct, and even ZeRO-3 over 2 cards leaves ~80 GiB/card of model state.",
        )
    )
    p = predict(MODEL, Setting("fp16", "ddp", 0, "none", False, 2, 2, 512, True), devices_4090)
    lora_p = predict(MODEL, Setting("fp16", "deepspeed", 3, "none", True, 2, 2, 512, True), devices_4090)
    out.append(
        Verdict(
            CLAIMS[1],
            p.gpu_total / GiB,
            p.state.total / GiB,
            "impossible for full fine-tuning; plausible only as LoRA with the fp16 base sharded over both cards",
            f"AMP keeps fp32 weights (the master copy): model state {p.state.total / GiB:.0f} GiB per card. "
            f"~18 GB is about the fp16 weights of the text decoder alone ({_text_fp16_gib():.1f} GiB), i.e. nothing "
            f"trains. LoRA + ZeRO-3 (fp16 base split over 2 cards) would need {lora_p.gpu_total / GiB:.1f} GiB/card.",
        )
    )
    p = predict(MODEL, Setting("fp16", "deepspeed", 3, "optimizer", False, 2, 4, 512, True), devices_4090)
    p2 = predict(MODEL, Setting("fp16", "deepspeed", 3, "optimizer+params", False, 2, 4, 512, True), devices_4090)
    out.append(
        Verdict(
            CLAIMS[2],
            p.gpu_total / GiB,
            p.state.weights / GiB,
            "impossible with its config; plausible only if parameters are offloaded too and the host has ~"
            f"{p2.host_total / GiB:.0f} GiB RAM",
            f"With offload_optimizer only, each card still holds its fp16 parameter shard "
            f"({p.state.weights / GiB:.1f} GiB) + ZeRO-3 buckets + activations: {p.gpu_total / GiB:.1f} GiB; the "
            f"host needs {p.host_total / GiB:.0f} GiB for fp32 master + Adam + gradients. Adding offload_param gives "
            f"{p2.gpu_total / GiB:.1f} GiB/card at {p2.host_total / GiB:.0f} GiB host RAM. "
            "('fp16_optimizer_state' is not a DeepSpeed option.)",
        )
    )
    return out


def _t4_verdicts(devices_t4) -> list[Verdict]:
    """Seed 003's training claims on one T4 (16 GB, no bf16): fp32, fp16, LoRA and LoRA over an int8 base."""
    q_v = LoraSection(r=8, alpha=16, dropout=0.1, target_modules=["q_proj", "v_proj"])
    out = []
    p = predict(MODEL, Setting("fp32", "none", 0, "none", False, 1, 8, 512, False), devices_t4)
    out.append(
        Verdict(
            CLAIMS[3],
            p.gpu_total / GiB,
            p.state.total / GiB,
            "impossible",
            f"A T4 has 16 GB, so '24 GB' cannot be on it; fp32 full fine-tuning needs {p.state.total / GiB:.0f} GiB "
            f"of model state (weights {p.state.weights / GiB:.1f} GiB).",
        )
    )
    p = predict(MODEL, Setting("fp16", "none", 0, "none", False, 1, 8, 512, False), devices_t4)
    out.append(
        Verdict(
            CLAIMS[4],
            p.gpu_total / GiB,
            p.state.weights / GiB,
            "impossible",
            f"AMP keeps fp32 weights ({p.state.weights / GiB:.1f} GiB) plus gradients and Adam "
            f"({p.state.total / GiB:.0f} GiB); even bare fp16 weights are {_all_fp16_gib():.1f} GiB > 12.",
        )
    )
    p = predict(MODEL, Setting("fp16", "none", 0, "none", True, 1, 8, 512, False), devices_t4, lora=q_v)
    out.append(
        Verdict(
            CLAIMS[5],
            p.gpu_total / GiB,
            p.state.weights / GiB,
            "impossible",
            f"The frozen fp16 base alone is {p.state.weights / GiB:.1f} GiB (> 8, and > the T4's 15 GiB); "
            "LoRA shrinks gradients and optimizer state, not the base weights. (8 GB is about right for a ~3-4 B model.)",
        )
    )
    # the planner's QLoRA rows (quantization.base): the base as the workbench trains it over int8 / nf4 weights
    qlora = Setting("fp16", "none", 0, "none", True, 1, 8, 512, True, quantized_base="int8")
    p = predict(MODEL, qlora, devices_t4, lora=q_v)
    nf4 = predict(MODEL, dataclasses.replace(qlora, quantized_base="nf4"), devices_t4, lora=q_v)
    out.append(
        Verdict(
            CLAIMS[6],
            p.gpu_total / GiB,
            p.state.weights / GiB,
            "impossible (even an nf4 base exceeds it)",
            f"The int8 base alone is {p.state.weights / GiB:.1f} GiB (linear weights 1 byte + row scales, "
            f"embeddings, lm_head and the vision tower fp16) > 5 GB before any activation; the run needs "
            f"{p.gpu_total / GiB:.1f} GiB, {p.gpu['activations'] / GiB:.1f} of them activations (LLM.int8 keeps "
            f"each quantized layer's 16-bit input, checkpointing or not). An nf4 base is "
            f"{nf4.state.weights / GiB:.1f} GiB and the run {nf4.gpu_total / GiB:.1f} GiB: 5 GB holds neither. "
            "(5 GB is about the int8 weights of a 4-5 B model.)",
        )
    )
    return out


def _gguf_verdict() -> Verdict:
    """The community's Q4_K_M GGUF on 8 GB against the GGUF planner (plan/gguf.py: llama-quantize's tensor types)."""
    from .gguf import gguf_max_context, gguf_plan

    plan = gguf_plan(MODEL, "q4_k_m")
    eight = 8 * GiB  # an RTX 4060's 8 GB, as nvidia-smi counts it
    ctx = gguf_max_context(MODEL, "q4_k_m", eight)
    return Verdict(
        _claim("gguf-8gb"),
        plan.total / GiB,
        (plan.file_bytes + plan.mmproj_bytes) / GiB,
        "plausible at a shorter context; not at 25,480 tokens with everything on the GPU",
        f"The sizes are GiB and right: llama-quantize's Q4_K_M of the 9B is {plan.file_bytes / GiB:.2f} GiB of "
        f"tensors (+ a few MB of tokenizer), the f16 mmproj {plan.mmproj_bytes / GiB:.2f} GiB: "
        f"{(plan.file_bytes + plan.mmproj_bytes) / GiB:.2f} GiB before any token. llama.cpp's f16 KV cache is 40 KiB "
        f"a token (40 layers, 2 KV heads of 128): {plan.kv_cache_bytes / GiB:.2f} GiB at 25,480 tokens, "
        f"{plan.total / GiB:.2f} GiB in all > 8 GiB. Everything on the GPU fits up to {ctx:,} tokens before "
        "llama.cpp's compute buffers and the CUDA context (a few hundred MB) are taken: a shorter -c (or a q8_0 KV "
        "cache, or the mmproj on the CPU: --no-mmproj-offload) makes it run.",
    )


def _image_verdicts(devices_4090) -> list:
    """Seed 000's and 002's training claims once every row carries a phone screenshot."""
    img = dict(images_per_row=1, image_size="1080x2400")
    claim = _claim("000-zero3-images")

    def kindest(loss_head: str):
        return min(
            (
                predict(
                    MODEL,
                    Setting("fp16", "deepspeed", 3, off, True, 2, 4, 512, True, **img, loss_head=loss_head),
                    devices_4090,
                )
                for off in ("optimizer", "optimizer+params")
            ),
            key=lambda p: p.gpu_total,
        )

    best, full = kindest("chunked"), kindest("full")  # the engine's default head; the full head theirs computes
    a, fa = best.activations, full.activations
    tokens = a["images"]["tokens_per_image"]
    out = [
        Verdict(
            claim,
            best.gpu_total / GiB,
            best.gpu["activations"] / GiB,
            "impossible once screenshots are counted",
            f"A 1080x2400 screenshot is {tokens:,} image tokens (the processor's resize, 2x2 merge), so a row is "
            f"{a['seq_len']:,} tokens, not 512. Even as LoRA with everything offloaded and the loss head only at "
            f"labelled positions in checkpointed chunks (memory.loss_head chunked), micro-batch 4 needs "
            f"{best.gpu_total / GiB:.0f} GiB per card: {best.gpu['activations'] / GiB:.0f} GiB of decoder "
            f"activations and {best.gpu['vision_activations'] / GiB:.1f} GiB for the vision tower. A full loss head "
            f"over every position (what the document's stack computes) needs {full.gpu_total / GiB:.0f} GiB: fp32 "
            f"log-softmax {fa['head'] / GiB:.1f} GiB kept, logits and their gradients "
            f"{fa['backward_transient'] / GiB:.1f} GiB in backward.",
        )
    ]
    claim = _claim("002-batch16-images")
    m = plan_matrix(
        MODEL, devices_4090, 16, 512, lora_choices=(True,), ckpt_choices=(True,), precisions=("fp16",), **img
    )
    cheapest16 = min(m.plans, key=lambda p: p.gpu_total)
    fits = max(
        (
            mb
            for mb in (1, 2, 4, 8)
            if plan_matrix(
                MODEL, devices_4090, mb, 512, lora_choices=(True,), ckpt_choices=(True,), precisions=("fp16",), **img
            ).cheapest()
        ),
        default=0,
    )
    out.append(
        Verdict(
            claim,
            cheapest16.gpu_total / GiB,
            cheapest16.gpu["activations"] / GiB,
            "impossible once screenshots are counted",
            f"At micro-batch 16 the smallest plan ({cheapest16.setting.label}) needs "
            f"{cheapest16.gpu_total / GiB:.0f} GiB per card; the largest micro-batch that fits 2x 4090 with one "
            f"screenshot per row is {fits}. A batch of 16 is reachable only through gradient accumulation "
            "(16 micro-batches of 1), which the document also uses: that is throughput, not memory.",
        )
    )
    return out


def _deployment_verdicts() -> list:
    """Seed 002's and 003's deployment claims against the inference planner and SmolLM2's measured exports."""
    from .inference import RTX4090, predict_inference

    int8 = predict_inference(MODEL, "int8", RTX4090)
    fp16 = predict_inference(MODEL, "fp16", RTX4090)
    int4 = predict_inference(MODEL, "int4", RTX4090)
    return [
        _eight_gb_verdict(int8, fp16, int4),
        _one_4090_verdict(int8),
        _int8_deploy_verdict(),
        _onnx_verdict(),
        _mobile_verdict(int4),
    ]


def _eight_gb_verdict(int8, fp16, int4) -> Verdict:
    """Seed 002: one inference under 8 GB, against one request's plan in int8, fp16 and int4."""
    from .inference import max_context

    eight_gb = DeviceSet(count=1, bytes_per_device=8 * 10**9, host_ram=32 * GiB, name="8 GB")
    ctx8 = max_context(MODEL, "int4", eight_gb)
    text_ctx8 = max_context(MODEL, "int4", eight_gb, images_per_row=0)
    if ctx8:
        verdict, tail = f"impossible with int8 or fp16; int4 fits with up to {ctx8:,} text tokens", ""
    elif text_ctx8:
        verdict = "impossible with a screenshot (int4 included)"
        tail = f" int4 fits 8 GB only text-only, up to {text_ctx8:,} tokens."
    else:
        verdict = "impossible in every format"
        tail = (
            f" Even int4 weights plus the CUDA context ({(int4.gpu['weights'] + int4.gpu['cuda_context']) / GiB:.1f} "
            f"GiB) exceed 8 GB ({eight_gb.bytes_per_device / GiB:.2f} GiB) before any token."
        )
    return Verdict(
        _claim("002-infer-8gb"),
        int8.total / GiB,
        int4.gpu["weights"] / GiB,
        verdict,
        f"One request with a screenshot needs {int8.total / GiB:.1f} GiB with int8 weights "
        f"({int8.gpu['weights'] / GiB:.1f} GiB of them) and {fp16.total / GiB:.1f} GiB with fp16; int4 "
        f"weights are {int4.gpu['weights'] / GiB:.1f} GiB ({int4.total / GiB:.1f} GiB in all at 4,096 "
        f"text tokens).{tail}",
    )


def _one_4090_verdict(int8) -> Verdict:
    """Seed 002: serving needs two 4090s, against one request's bf16 plan on one."""
    from .inference import RTX4090, max_context, predict_inference

    bf16 = predict_inference(MODEL, "bf16", RTX4090)
    ctx = max_context(MODEL, "bf16", RTX4090)
    return Verdict(
        _claim("002-two-4090"),
        bf16.total / GiB,
        bf16.gpu["weights"] / GiB,
        "wrong for one request: one 4090 holds the bf16 model" if bf16.fits else "right",
        f"bf16 weights are {bf16.gpu['weights'] / GiB:.1f} GiB; with one screenshot and 4,096 text tokens "
        f"one 4090 needs {bf16.total / GiB:.1f} GiB (headroom {bf16.headroom / GiB:.1f}) and fits up to "
        f"{ctx:,} text tokens (GQA with 2 KV heads: 40 KiB of cache per token). A second card buys "
        "context, batch or speed (tensor parallel), not the ability to load it; int8 leaves "
        f"{int8.headroom / GiB:.0f} GiB free on one card.",
    )


def _int8_deploy_verdict() -> Verdict:
    """Seed 003: dynamic int8 for deployment, against the weight rule and SmolLM2's measured export sizes."""
    # SmolLM2: the planner's weight rule vs the export sizes measured on this machine
    small = {f: weight_bytes(SMOLLM2, f, torch.float32) / 1e6 for f in ("fp32", "int8")}
    small["bf16"] = weight_bytes(SMOLLM2, "bf16") / 1e6
    meas = SMOLLM2_MEASURED_MB
    bf16_gib = weight_bytes(MODEL, "bf16") / GiB
    int8_gib = weight_bytes(MODEL, "int8", torch.bfloat16) / GiB
    return Verdict(
        _claim("003-int8-deploy"),
        int8_gib,
        int8_gib,
        "plausible, but int8 about halves the 16-bit size, no more",
        f"Weight-only int8 of every Linear but lm_head: {int8_gib:.1f} GiB vs {bf16_gib:.1f} GiB in bf16 "
        f"({int8_gib / bf16_gib:.2f}x): embeddings and lm_head ({linear_other_gib():.1f} GiB) stay 16-bit. "
        f"Measured on SmolLM2 (tied embeddings are 21% of it): int8 {meas['int8']} MB vs bf16 {meas['bf16']} MB "
        f"({meas['int8'] / meas['bf16']:.2f}x) vs fp32 {meas['fp32']} MB; the same rule predicts "
        f"{small['int8']:.1f} / {small['bf16']:.1f} / {small['fp32']:.1f} MB of weights (the rest is tokenizer "
        "and config files). torch.ao's quantize_dynamic, the document's call, has CPU kernels only: it is a CPU "
        "deployment, not a GPU one.",
    )


def _onnx_verdict() -> Verdict:
    """Seed 003: an ONNX export, against the fp32 weights it stores."""
    meas = SMOLLM2_MEASURED_MB
    fp32_gib = weight_bytes(MODEL, "fp32") / GiB
    return Verdict(
        _claim("003-onnx"),
        fp32_gib,
        fp32_gib,
        "plausible for the text path only; no size saving",
        f"ONNX stores the fp32 weights: measured on SmolLM2 {meas['onnx']} MB vs the fp32 merged model's "
        f"{meas['fp32']} MB; for the 9B that is {fp32_gib:.1f} GiB, beyond protobuf's 2 GB single-file limit "
        "(external data files needed). Its dummy input is token ids of shape (1, 512): the exported graph has "
        "no pixel_values, i.e. no screenshots, and a fixed batch/sequence unless dynamic axes are given.",
    )


def _mobile_verdict(int4) -> Verdict:
    """Seed 003: 5 GB for a phone, against int4 inference and LoRA training with a screenshot."""
    lora = predict(MODEL, Setting("fp16", "none", 0, "none", True, 1, 1, 512, True, images_per_row=1), T4_DEVICES)
    return Verdict(
        _claim("003-mobile"),
        int4.total / GiB,
        int4.gpu["weights"] / GiB,
        "impossible at 5 GB; deployment needs int4 and a phone with ~10 GB free; updating on a phone: no",
        f"The smallest format, int4, is {int4.gpu['weights'] / GiB:.1f} GiB of weights and "
        f"{int4.total / GiB:.1f} GiB for one request with a screenshot (on a GPU; a phone's NPU runtime "
        f"differs, the bytes do not). 'Updating' (LoRA training, fp16 base) needs {lora.gpu_total / GiB:.0f} "
        "GiB with one screenshot per row: no phone has that.",
    )


def linear_other_gib() -> float:
    from .inference import linear_split

    return linear_split(MODEL).other * 2 / GiB


def _claim(claim_id: str) -> Claim:
    return next(c for c in CLAIMS if c.id == claim_id)


def _text_fp16_gib() -> float:
    lora = LoraSection(enabled=False)
    c = planned_census(MODEL, lora, policy_for("pure-bf16", lora))
    return (c.bytes() - c.bytes(group="vision")) / GiB


def _all_fp16_gib() -> float:
    lora = LoraSection(enabled=False)
    return planned_census(MODEL, lora, policy_for("pure-bf16", lora)).bytes() / GiB


def format_markdown(verdicts: list[Verdict]) -> str:
    lines = [
        "| claim | source | claimed | evident settings | planner (per GPU) | lower bound | verdict | why |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for v in verdicts:
        c = v.claim
        claimed = "-" if c.claimed_gib is None else f"{c.claimed_gib:g} GB"
        lines.append(
            f"| {c.text} | {c.source} | {claimed} | {c.settings} | {v.planner_gib:.1f} GiB | "
            f"{v.lower_bound_gib:.1f} GiB | **{v.verdict}** | {v.why} |"
        )
    lines += [
        "",
        "Sources: blog posts published in Chinese (claims translated; sections by their numbers) and an "
        "Open-AutoGLM issue:",
    ]
    lines += [f"- {d.short}: {d.title} ({d.title_en})" for d in DOCUMENTS.values()]
    return "\n".join(lines)
