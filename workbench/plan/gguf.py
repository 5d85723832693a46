"""GGUF files and llama.cpp's inference memory: the bytes of a model's GGUF at f16, q8_0 and q4_k_m, of a GLM-4.1V's
vision projector (mmproj), and of llama.cpp's KV cache at a context, from the model's config alone (meta device).

Each tensor's type follows llama.cpp's rules (the pinned ``src/llama-quant.cpp``, ``llama_tensor_get_type``): 1-D
tensors (norms, biases) stay f32; q8_0 and f16 store every 2-D weight so; q4_k_m stores them in Q4_K except the
output (or tied embedding: Q6_K), half of attn_v and ffn_down (``use_more_bits``: the first and last eighth of the
layers and every third in between: Q6_K), and a tensor whose row length is not a multiple of 256 falls back (Q4_K ->
Q5_0, Q6_K -> Q8_0). The converter writes the mmproj in f16 (f32 for 1-D tensors and the position embedding). The
tokenizer's metadata (a few MB) is not counted. The KV cache is llama.cpp's default f16 K and V.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass

from .arch import DecoderShape, build_meta_model, is_vision_language, load_model_config
from .planner import GiB

GGUF_QUANTS = ("f16", "q8_0", "q4_k_m")
# ggml's block sizes: (elements, bytes) per block
BLOCKS = {
    "f32": (1, 4),
    "f16": (1, 2),
    "q8_0": (32, 34),
    "q5_0": (32, 22),
    "q4_k": (256, 144),
    "q6_k": (256, 210),
}
FALLBACK = {"q4_k": "q5_0", "q6_k": "q8_0"}  # llama-quant.cpp tensor_type_fallback
LLAMA_CPP_CONTEXT = 25480  # Open-AutoGLM's vLLM --max-model-len for AutoGLM-Phone-9B, the context planned here


def _more_bits(i: int, n: int) -> bool:
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def tensor_type(role: str, quant: str, layer: int, layers: int, row: int, dims: int) -> str:
    """The ggml type llama-quantize gives one tensor (``row``: its row length, ne[0])."""
    if dims == 1:
        return "f32"
    if quant == "f16":
        return "f16"
    if quant == "q8_0":
        return "q8_0" if row % 32 == 0 else "f16"
    wanted = "q4_k"
    if role == "output":
        wanted = "q6_k" if row % 256 == 0 else "q8_0"
    elif role in ("attn_v", "ffn_down") and _more_bits(layer, layers):
        wanted = "q6_k"
    if row % BLOCKS[wanted][0]:
        wanted = FALLBACK.get(wanted, wanted)
        if row % BLOCKS[wanted][0]:
            return "f16"
    return wanted


def tensor_bytes(numel: int, type_: str) -> int:
    elements, size = BLOCKS[type_]
    return -(-numel // elements) * size


@dataclass(frozen=True)
class _Tensor:
    role: str
    layer: int
    row: int
    dims: int
    numel: int


@functools.lru_cache(maxsize=8)
def _tensors(source: str) -> tuple[tuple[_Tensor, ...], tuple[_Tensor, ...], int]:
    """(text tensors, vision tensors, layers) of ``source`` as the converter writes them."""
    config = load_model_config(source)
    model = build_meta_model(config)
    tied = DecoderShape.from_config(config).tied_embeddings
    text, vision = [], []
    for name, p in model.named_parameters():
        layer = re.search(r"\.layers\.(\d+)\.", name)
        if name.endswith("embed_tokens.weight"):
            role = "output" if tied else "token_embd"
        elif name.endswith("lm_head.weight"):
            role = "output"
        elif name.endswith("v_proj.weight"):
            role = "attn_v"
        elif name.endswith("down_proj.weight"):
            role = "ffn_down"
        else:
            role = "other"
        t = _Tensor(role, int(layer.group(1)) if layer else -1, p.shape[-1], p.dim(), p.numel())
        (vision if ".visual." in f".{name}" else text).append(t)
    return tuple(text), tuple(vision), DecoderShape.from_config(config).layers


def gguf_bytes(source: str, quant: str) -> int:
    """Bytes of the tensors of ``source``'s text GGUF at ``quant``."""
    text, _, layers = _tensors(source)
    return sum(tensor_bytes(t.numel, tensor_type(t.role, quant, t.layer, layers, t.row, t.dims)) for t in text)


def mmproj_bytes(source: str) -> int:
    """Bytes of the vision projector's GGUF (f16; 0 for a text model)."""
    _, vision, _ = _tensors(source)
    return sum(tensor_bytes(t.numel, "f32" if t.dims == 1 else "f16") for t in vision)


def llama_cpp_kv_bytes(source: str, context: int = LLAMA_CPP_CONTEXT) -> int:
    """llama.cpp's KV cache (f16 K and V of every layer) for ``context`` tokens."""
    s = DecoderShape.from_config(load_model_config(source))
    return 2 * s.layers * s.kv_heads * s.head_dim * context * 2


@dataclass(frozen=True)
class GgufPlan:
    model: str
    quant: str
    context: int
    file_bytes: int
    mmproj_bytes: int
    kv_cache_bytes: int

    @property
    def total(self) -> int:
        """Weights + mmproj + KV cache: what must sit on the GPU to run it all there (llama.cpp's compute buffers
        and the CUDA context come on top)."""
        return self.file_bytes + self.mmproj_bytes + self.kv_cache_bytes

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "total_bytes": self.total}


def gguf_plan(source: str, quant: str, context: int = LLAMA_CPP_CONTEXT) -> GgufPlan:
    config = load_model_config(source)
    return GgufPlan(
        source,
        quant,
        context,
        gguf_bytes(source, quant),
        mmproj_bytes(source) if is_vision_language(config) else 0,
        llama_cpp_kv_bytes(source, context),
    )


def gguf_max_context(source: str, quant: str, device_bytes: int) -> int:
    """The longest context whose KV cache fits beside the GGUF and the mmproj in ``device_bytes`` (compute buffers
    not counted: an upper bound)."""
    plan = gguf_plan(source, quant, 0)
    per_token = llama_cpp_kv_bytes(source, 1)
    return max(0, (device_bytes - plan.file_bytes - plan.mmproj_bytes) // per_token)


def format_gguf(plans: list[GgufPlan]) -> str:
    from ..user_output import text_table

    p0 = plans[0]
    rows = [
        [p.quant, *(f"{b / GiB:.2f}" for b in (p.file_bytes, p.mmproj_bytes, p.kv_cache_bytes, p.total))] for p in plans
    ]
    head = (
        f"GGUF of {p0.model} for llama.cpp: files and inference memory at {p0.context:,} tokens of context (GiB, "
        "as model hubs and nvidia-smi count)"
    )
    header = ["quant", "GGUF", "mmproj f16", "KV cache f16", "weights+mmproj+KV"]
    table = "\n".join(text_table([header, *rows], right=range(1, 5)))
    foot = (
        "tensor types as llama-quantize assigns them (llama.cpp 0c1e57098bba); the tokenizer metadata (a few MB), "
        "llama.cpp's compute buffers and the CUDA context are not counted"
    )
    return f"{head}\n{table}\n{foot}"
