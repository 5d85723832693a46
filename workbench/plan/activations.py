"""Activation memory: a per-op formula for the text decoder, and a measurement to hold it to.

The formula walks one decoder layer op by op (RMSNorm, q/k/v/o projections, RoPE, SDPA, the gated
MLP, peft's LoRA path, the loss head) and records which tensors autograd saves for backward, their
dtype and width per token; it then multiplies by micro-batch x sequence length. It follows the
rules PyTorch actually applies (verified against ``measure_saved_activations``):

* an op saves an input only if the *other* operand requires grad (a frozen Linear does not keep
  its input, only its weight, which is a parameter and not an activation);
* autocast casts a Linear's input to the autocast dtype (a new tensor, saved if the weight trains)
  and makes low-precision copies of fp32 weights (reported apart as ``autocast_copies``);
* RMSNorm upcasts its input to fp32 and keeps that plus 1/rms; SDPA keeps q, k, v, the output
  and the fp32 log-sum-exp (no seq^2 term; ``eager`` attention adds one);
* peft casts a LoRA input to the adapter dtype, dropout keeps its mask (fp32-sized noise on CPU,
  a bool mask on CUDA), lora_A keeps its (cast) input, lora_B the rank-r intermediate;
* the loss head (``workbench.forward.head``, ``memory.loss_head``): ``full`` keeps the fp32 log-softmax of the
  logits at every position (``workbench.precision.token_loss_sum``); ``labels`` keeps it only at labelled
  positions, plus their int64 indices and targets; ``chunked`` keeps no logits at all, only the labelled positions'
  hidden states (checkpoint inputs), indices and targets, and backward recomputes one chunk's logits at a time.

Gradient checkpointing (HF, non-reentrant) keeps only each layer's input; backward recomputes one
layer at a time, which the peak estimate adds back.

The GLM-4.1V vision tower (``estimate_vision_activations``) is walked the same way over its patches;
the planner adds its image tokens to the decoder's sequence (``workbench/plan/images.py``).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import asdict, dataclass

import torch

from ..models.processor import merged_tokens
from .arch import DecoderShape, PlannedCensus

FP32 = torch.float32


def _size(dtype: torch.dtype | None) -> int:
    return (dtype or torch.get_default_dtype()).itemsize  # None: no autocast, the default dtype


@dataclass(frozen=True)
class ActivationInputs:
    """Everything the activation formula depends on besides the decoder shape."""

    micro_batch: int
    seq_len: int
    autocast_dtype: torch.dtype | None  # None: compute in the storage dtype
    base_dtype: torch.dtype  # frozen / base weights (and the residual stream they produce)
    trainable_dtype: torch.dtype
    full_finetune: bool
    lora_targets: frozenset = frozenset()  # linear names in a decoder layer with adapters
    lora_layers: frozenset | None = None  # indices of the decoder layers with adapters (None: every layer)
    lora_rank: int = 0
    lora_dropout: float = 0.0
    gradient_checkpointing: bool = False
    attn_implementation: str = "sdpa"
    device_type: str = "cuda"  # dropout keeps an fp32-sized mask on CPU, a bool mask on CUDA
    loss_head: str = "full"  # memory.loss_head: full | labels | chunked
    label_tokens: int | None = None  # positions with a (shifted) label per row; None: every position but the last
    loss_chunk_tokens: int = 512  # memory.loss_chunk_tokens (chunked)
    quantized_base: str = "none"  # quantization.base: nf4 | int8 | none
    quantized_linears: frozenset = frozenset()  # linear names in a decoder layer that are quantized
    dequantized_bytes: int = 0  # the largest quantized weight dequantized for one matmul (forward and backward)

    @property
    def labelled(self) -> int:
        """Labelled positions in the micro-batch: the rows the loss head projects (full: it projects them all)."""
        per_row = self.seq_len - 1 if self.label_tokens is None else min(self.label_tokens, self.seq_len - 1)
        return self.micro_batch * per_row


@dataclass(frozen=True)
class ActivationEstimate:
    """Bytes saved for backward during one forward (what ``measure_saved_activations`` measures),
    and the modelled peak during backward."""

    per_layer: int  # one decoder layer, all ops, without checkpointing
    lora_per_layer: int  # of which LoRA's dropout masks, casts and rank-r intermediates
    first_layer: int  # layer 0 keeps less under LoRA: its input needs no gradient
    layer_inputs: int  # what checkpointing keeps per layer
    head: int  # final norm, lm_head, fp32 log-softmax of the loss
    shared: int  # RoPE cos/sin (kept once)
    saved_forward: int  # total saved for backward during the forward
    backward_transient: int  # gradients of the largest op and the loss head, live during backward
    recompute: int  # one layer recomputed in backward (checkpointing only)
    peak: int  # saved_forward + recompute + backward_transient
    autocast_copies: int  # low-precision weight copies autocast keeps (cached or saved)

    def to_dict(self) -> dict:
        return asdict(self)


class _Tracer:
    """Tensors as (id, bytes per token, requires_grad); a set of saved ids counts each storage once."""

    def __init__(self):
        self.ids = itertools.count()
        self.saved: dict[int, tuple[int, str]] = {}
        self.copies = 0  # autocast weight copies, in bytes (not per token)

    def new(self, width: int, dtype: torch.dtype, rg: bool) -> _Tensor:
        return _Tensor(next(self.ids), width, dtype, rg)

    def save(self, t: _Tensor, tag: str, dtype: torch.dtype | None = None) -> None:
        self.saved.setdefault(t.id, (t.width * _size(dtype or t.dtype), tag))

    def total(self, tag: str | None = None) -> int:
        return sum(b for b, tg in self.saved.values() if tag is None or tg == tag)


@dataclass(frozen=True)
class _Tensor:
    id: int
    width: int  # elements per token
    dtype: torch.dtype
    rg: bool  # requires grad


class _Layer:
    """One pass through a decoder layer's ops under the run's precision."""

    def __init__(self, tr: _Tracer, shape: DecoderShape, a: ActivationInputs, cast_weights_seen: set):
        self.tr, self.s, self.a = tr, shape, a
        self.c = a.autocast_dtype
        self.w_dtype = a.trainable_dtype if a.full_finetune else a.base_dtype
        self.cast_seen = cast_weights_seen
        self.adapted = True  # this layer carries adapters (lora.layers: the last ones only)
        self.int8_held: dict = {}  # tensor id -> bytes per token LLM.int8's matmuls keep (quantization.base int8)

    def _weight_copy(self, key: str, numel: int, w_dtype: torch.dtype, trainable: bool, needed: bool) -> None:
        # autocast caches casts of trainable leaves for the whole forward; frozen ones are cast per
        # use and live only if saved (the input needs a gradient)
        if self.c is None or w_dtype == self.c or not (trainable or needed) or key in self.cast_seen:
            return
        if trainable:
            self.cast_seen.add(key)
        self.tr.copies += numel * _size(self.c)

    def norm(self, x: _Tensor, key: str) -> _Tensor:
        tr, trainable = self.tr, self.a.full_finetune
        if x.rg:
            x32 = x if x.dtype == FP32 else tr.new(x.width, FP32, True)
            tr.save(x32, "base")
            tr.save(tr.new(1, FP32, True), "base")  # 1/rms
        if trainable:  # weight * normed.to(input dtype) keeps the normed tensor for the weight's grad
            tr.save(tr.new(x.width, x.dtype, True), "base")
        out_dtype = torch.promote_types(self.w_dtype, x.dtype)
        return tr.new(x.width, out_dtype, x.rg or trainable)

    def linear(self, x: _Tensor, name: str, out_width: int, key: str) -> _Tensor:
        tr, a = self.tr, self.a
        trainable = a.full_finetune
        xc = x if self.c is None or x.dtype == self.c else tr.new(x.width, self.c, x.rg)
        if trainable:
            tr.save(xc, "base")
        if name in a.quantized_linears:
            if a.quantized_base == "int8" and x.rg:
                # LLM.int8's matmul keeps its input for the input's gradient on its own context, whatever autocast
                # does, and outside autograd's saved tensors: gradient checkpointing does not drop it either
                tr.save(x, "base")
                self.int8_held.setdefault(x.id, x.width * _size(x.dtype))
        else:  # a quantized layer dequantizes inside its own matmul: autocast makes no copy of its weight
            self._weight_copy(key, x.width * out_width, self.w_dtype, trainable, x.rg)
        out_dtype = self.c or x.dtype
        lora = name in a.lora_targets and not a.full_finetune and self.adapted
        out = tr.new(out_width, out_dtype, x.rg or trainable or lora)
        if lora:
            self._lora(x, out_width, key)
        return out

    def _lora(self, x: _Tensor, out_width: int, key: str) -> None:
        tr, a = self.tr, self.a
        xl = x if x.dtype == a.trainable_dtype else tr.new(x.width, a.trainable_dtype, x.rg)
        if a.lora_dropout > 0:
            if x.rg:  # the mask: CPU dropout keeps input-dtype noise, CUDA's fused kernel a bool mask
                mask_dtype = xl.dtype if a.device_type == "cpu" else torch.bool
                tr.save(tr.new(xl.width, mask_dtype, False), "lora")
            xl = tr.new(xl.width, xl.dtype, x.rg)
        xa = xl if self.c is None or xl.dtype == self.c else tr.new(xl.width, self.c, xl.rg)
        tr.save(xa, "lora")  # lora_A's input (its weight trains)
        self._weight_copy(key + ".A", x.width * a.lora_rank, a.trainable_dtype, True, True)
        mid = tr.new(a.lora_rank, self.c or xl.dtype, True)
        tr.save(mid, "lora")  # lora_B's input
        self._weight_copy(key + ".B", a.lora_rank * out_width, a.trainable_dtype, True, True)

    def forward(self, x: _Tensor, index: int) -> _Tensor:
        s, tr = self.s, self.tr
        k = f"layer{index}"
        self.adapted = self.a.lora_layers is None or index in self.a.lora_layers
        q_w, kv_w = s.heads * s.head_dim, s.kv_heads * s.head_dim
        h = self.norm(x, k + ".in")
        q = self.linear(h, "q_proj", q_w, k + ".q")
        kk = self.linear(h, "k_proj", kv_w, k + ".k")
        v = self.linear(h, "v_proj", kv_w, k + ".v")
        rg = q.rg or kk.rg or v.rg
        # RoPE multiplies by cos/sin in the residual dtype: fp32 there promotes q and k to fp32
        rope_dtype = torch.promote_types(q.dtype, x.dtype)
        q_r, k_r = tr.new(q_w, rope_dtype, q.rg), tr.new(kv_w, rope_dtype, kk.rg)
        if rg:
            att_dtype = self.c or rope_dtype
            for t in (q_r, k_r, v):
                tr.save(t if t.dtype == att_dtype else tr.new(t.width, att_dtype, True), "base")
            if self.a.attn_implementation == "eager":
                # fp32 softmax output and its cast, per head x key position
                tr.save(tr.new(s.heads * self.a.seq_len, FP32, True), "base")
                tr.save(tr.new(s.heads * self.a.seq_len, att_dtype, True), "base")
            else:
                tr.save(tr.new(s.heads, FP32, False), "base")  # log-sum-exp
        att_dtype = self.c or rope_dtype
        attn = tr.new(q_w, att_dtype, rg)
        if rg and self.a.attn_implementation != "eager":
            tr.save(attn, "base")  # SDPA keeps its output
        if s.glm_style and self.a.quantized_base == "int8" and "o_proj" in self.a.quantized_linears:
            # GLM's partial rotary concatenates q back into (batch, heads, seq, dim), so SDPA's output comes out in that
            # layout and turning it into (batch, seq, hidden) copies it (Llama's rotary keeps the projection's layout:
            # no copy); LLM.int8 keeps that copy as o_proj's input (measured on both)
            attn = tr.new(q_w, att_dtype, rg)
        o = self.linear(attn, "o_proj", s.hidden, k + ".o")
        if s.glm_style:
            o = self.norm(o, k + ".post_attn")
        res = tr.new(s.hidden, torch.promote_types(x.dtype, o.dtype), x.rg or o.rg)
        h2 = self.norm(res, k + ".mlp_in")
        i = s.intermediate
        if s.glm_style:
            gu = self.linear(h2, "gate_up_proj", 2 * i, k + ".gu")
            if gu.rg:
                tr.save(gu, "base")  # silu keeps gate, mul keeps up: both views of one storage
            gate_rg, up_rg = gu.rg, gu.rg
        else:
            g = self.linear(h2, "gate_proj", i, k + ".g")
            u = self.linear(h2, "up_proj", i, k + ".u")
            if g.rg:
                tr.save(g, "base")  # silu's input
            if u.rg or g.rg:
                tr.save(u, "base")
            gate_rg, up_rg = g.rg, u.rg
            gu = g
        act = tr.new(i, gu.dtype, gate_rg)
        if up_rg:
            tr.save(act, "base")  # mul keeps silu(gate) for up's gradient
        prod = tr.new(i, gu.dtype, gate_rg or up_rg)
        d = self.linear(prod, "down_proj", s.hidden, k + ".d")
        if s.glm_style:
            d = self.norm(d, k + ".post_mlp")
        return tr.new(s.hidden, torch.promote_types(res.dtype, d.dtype), res.rg or d.rg)


def _head(tr: _Tracer, layer: _Layer, x: _Tensor, shape: DecoderShape, a: ActivationInputs) -> _Tensor:
    """The final norm (every position) and, for the full head, lm_head + the fp32 log-softmax per position.
    Returns the norm's output: what the output projection takes."""
    h = layer.norm(x, "final")
    trainable = a.full_finetune
    layer._weight_copy("lm_head", shape.hidden * shape.vocab, layer.w_dtype, trainable, h.rg)
    if a.loss_head != "full":
        return h
    hc = h if layer.c is None or h.dtype == layer.c else tr.new(h.width, layer.c, h.rg)
    if trainable:
        tr.save(hc, "head")
    tr.save(tr.new(shape.vocab, FP32, True), "head")  # fp32 log-softmax kept by cross-entropy
    return h


def _labelled_head(h: _Tensor, shape: DecoderShape, a: ActivationInputs, c: torch.dtype | None) -> int:
    """Bytes the labels / chunked head keeps (``forward.head.labelled_loss_sum``) for ``a.labelled`` rows: the
    int64 positions index_select keeps and the int64 targets, then per head what backward needs."""
    n = a.labelled
    kept = 8 * n + 8 * n
    if a.loss_head == "chunked":
        return kept + n * shape.hidden * _size(h.dtype)  # the checkpointed chunks' inputs: views of one [n, hidden]
    if a.full_finetune:  # a trained lm_head keeps its (autocast-cast) input
        kept += n * shape.hidden * _size(c if c is not None else h.dtype)
    return kept + n * shape.vocab * 4 + 4  # fp32 log-softmax and nll's total_weight


def estimate_activations(shape: DecoderShape, a: ActivationInputs) -> ActivationEstimate:
    """Activation bytes of one micro-batch through the text decoder (see the module docstring)."""
    if a.micro_batch < 1 or a.seq_len < 2:
        raise ValueError(f"micro_batch={a.micro_batch}, seq_len={a.seq_len}: need micro_batch >= 1 and seq_len >= 2")
    tokens = a.micro_batch * a.seq_len
    tr = _Tracer()
    cast_seen: set = set()
    emb_dtype = a.trainable_dtype if a.full_finetune else a.base_dtype
    x = tr.new(shape.hidden, emb_dtype, a.full_finetune)
    layer = _Layer(tr, shape, a, cast_seen)
    layer_bytes, lora_bytes, int8_bytes = [], [], []
    inputs = []
    for i in range(shape.layers):
        before, before_lora, before_int8 = tr.total(), tr.total("lora"), sum(layer.int8_held.values())
        inputs.append(x)
        x = layer.forward(x, i)
        layer_bytes.append(tr.total() - before)
        lora_bytes.append(tr.total("lora") - before_lora)
        int8_bytes.append(sum(layer.int8_held.values()) - before_int8)
    head_tr = _Tracer()
    head_layer = _Layer(head_tr, shape, a, cast_seen)
    h = _head(head_tr, head_layer, x, shape, a)
    tr.copies += head_tr.copies
    if a.loss_head == "full":
        # the loss covers seq_len - 1 positions (next-token shift); the rest scales with every token
        head = head_tr.total() * tokens - shape.vocab * 4 * a.micro_batch
        head += 8 * a.micro_batch * (a.seq_len - 1) + 4  # int64 targets and total_weight of the loss
    else:
        head = head_tr.total() * tokens + _labelled_head(h, shape, a, a.autocast_dtype)
    if a.full_finetune:
        head += 8 * tokens  # the embedding keeps its int64 indices
    shared = 2 * a.seq_len * shape.head_dim * _size(emb_dtype)  # RoPE cos/sin, one copy for all layers
    per_layer = max(layer_bytes) * tokens
    first = layer_bytes[0] * tokens
    layer_input = shape.hidden * _size(emb_dtype if a.full_finetune else a.base_dtype)
    if a.full_finetune and a.autocast_dtype is not None:
        layer_input = shape.hidden * 4  # the residual stream is fp32 under AMP full fine-tuning
    layer_inputs = layer_input * tokens
    if a.gradient_checkpointing:
        # every checkpointed layer keeps its input, also one below every adapter that needs no gradient (measured);
        # an int8 base's matmuls keep their inputs all the same (on their autograd context), in every layer, since
        # each checkpointed layer's input requires a gradient
        body = layer_inputs * shape.layers + max(int8_bytes) * shape.layers * tokens
        recompute = per_layer
    else:
        body = sum(layer_bytes) * tokens
        recompute = 0
    saved = body + head + shared
    c = a.autocast_dtype or emb_dtype
    widest = max(2 * shape.intermediate, shape.heads * shape.head_dim, shape.hidden)
    # logits + fp32 grads of the loss head over the rows it projects at once (chunked: one recomputed chunk, which
    # also holds its fp32 log-softmax again)
    head_rows = {"full": tokens, "labels": a.labelled}.get(a.loss_head, min(a.loss_chunk_tokens, a.labelled))
    head_bytes = _size(c) + (8 if a.loss_head != "chunked" else 12)
    # gradient buffers of the widest op in backward, beside (a quantized base) its weight dequantized for the matmul
    transient = max(head_rows * shape.vocab * head_bytes, 2 * tokens * widest * 4 + a.dequantized_bytes)
    return ActivationEstimate(
        per_layer=per_layer,
        lora_per_layer=max(lora_bytes) * tokens,
        first_layer=first,
        layer_inputs=layer_inputs,
        head=head,
        shared=shared,
        saved_forward=saved,
        backward_transient=transient,
        recompute=recompute,
        peak=saved + recompute + transient,
        autocast_copies=tr.copies,
    )


# ---------------------------------------------------------------------------------------------
# The vision tower (GLM-4.1V) over a batch of images


@dataclass(frozen=True)
class VisionShape:
    """Dimensions of a GLM-4.1V vision tower (transformers' Glm4vVisionModel) that activations scale with."""

    depth: int
    hidden: int
    heads: int
    mlp: int  # a block's gate/up width (Glm4VisionMlp uses out_hidden_size)
    out_hidden: int  # after the 2x2 downsample conv: the language model's hidden size
    merger: int  # the patch merger's gate/up width (intermediate_size)
    patch_dim: int  # in_channels x temporal_patch_size x patch_size^2 values per patch
    positions: int  # learned position table, interpolated per image
    merge: int

    @classmethod
    def from_config(cls, config) -> VisionShape:
        v = config.vision_config
        return cls(
            depth=v.depth,
            hidden=v.hidden_size,
            heads=v.num_heads,
            mlp=v.out_hidden_size,
            out_hidden=v.out_hidden_size,
            merger=v.intermediate_size,
            patch_dim=v.in_channels * v.temporal_patch_size * v.patch_size**2,
            positions=(v.image_size // v.patch_size) ** 2,
            merge=v.spatial_merge_size,
        )


@dataclass(frozen=True)
class VisionEstimate:
    """Bytes of the vision tower for one micro-batch of images. A frozen tower saves nothing for backward
    (neither its weights nor its input need a gradient) but each block's input under checkpointing; its
    forward still needs a working set."""

    patches: int  # over the micro-batch
    image_tokens: int  # after the merge, over the micro-batch
    saved_forward: int  # saved for backward (frozen: 0, or the blocks' inputs under checkpointing)
    per_block: int  # one block, without checkpointing (0 when frozen)
    forward_transient: int  # live while one block computes: pixel values + the block's working set
    recompute: int  # one block recomputed in backward (checkpointing, trainable tower)

    def to_dict(self) -> dict:
        return asdict(self)


def _vision_block(
    tr: _Tracer, layer: _Layer, v: VisionShape, x: _Tensor, a: ActivationInputs, index: int, largest_image: int
) -> _Tensor:
    """Glm4vVisionBlock: RMSNorm, fused qkv, 2D RoPE (computed in fp32, cast back), SDPA per image,
    proj; RMSNorm, gate/up/down MLP."""
    k = f"vision{index}"
    h = layer.norm(x, k + ".norm1")
    qkv = layer.linear(h, "qkv", 3 * v.hidden, k + ".qkv")
    q_r, k_r = tr.new(v.hidden, qkv.dtype, qkv.rg), tr.new(v.hidden, qkv.dtype, qkv.rg)
    if qkv.rg:
        tr.save(q_r, "base")
        tr.save(k_r, "base")
        tr.save(qkv, "base")  # v is a view of the fused qkv output: its whole storage stays
        if a.attn_implementation == "eager":
            tr.save(tr.new(v.heads * largest_image, FP32, True), "base")
            tr.save(tr.new(v.heads * largest_image, qkv.dtype, True), "base")
        else:
            tr.save(tr.new(v.heads, FP32, False), "base")  # log-sum-exp
            tr.save(tr.new(v.hidden, qkv.dtype, True), "base")  # SDPA keeps its output
    attn = tr.new(v.hidden, qkv.dtype, qkv.rg)  # transposed back and concatenated over images: a new tensor
    o = layer.linear(attn, "proj", v.hidden, k + ".proj")
    res = tr.new(v.hidden, torch.promote_types(x.dtype, o.dtype), x.rg or o.rg)
    h2 = layer.norm(res, k + ".norm2")
    g = layer.linear(h2, "gate_proj", v.mlp, k + ".gate")
    u = layer.linear(h2, "up_proj", v.mlp, k + ".up")
    if g.rg:
        tr.save(g, "base")  # silu's input
        tr.save(tr.new(v.mlp, g.dtype, True), "base")  # mul keeps silu(gate) for up's gradient
        tr.save(u, "base")  # ... and up for silu's
    d = layer.linear(tr.new(v.mlp, g.dtype, g.rg), "down_proj", v.hidden, k + ".down")
    return tr.new(v.hidden, torch.promote_types(res.dtype, d.dtype), res.rg or d.rg)


def _conv(tr: _Tracer, layer: _Layer, x: _Tensor, out_width: int, key: str) -> _Tensor:
    """A convolution saves its (autocast-cast) input when its weight trains, like a Linear."""
    return layer.linear(x, "conv", out_width, key)


def estimate_vision_activations(
    v: VisionShape,
    a: ActivationInputs,
    trainable: bool,
    patches_per_image: int,
    images: int,
    gradient_checkpointing: bool = False,
    weight_dtype: torch.dtype | None = None,
) -> VisionEstimate:
    """The vision tower over ``images`` images of ``patches_per_image`` patches each (one micro-batch).

    ``a`` gives the autocast dtype as for the text decoder; ``weight_dtype`` the tower's storage dtype (the
    census's: module rules may keep it fp32); ``trainable``: its weights train (full fine-tuning), else it
    is frozen (LoRA on the language model) and saves nothing, except that gradient checkpointing (HF's,
    non-reentrant, on every block) keeps each block's input whether or not anything needs a gradient.
    """
    P = patches_per_image * images
    tokens = merged_tokens(P, v.merge)
    w = weight_dtype or (a.trainable_dtype if trainable else a.base_dtype)
    forward_transient = _vision_forward_transient(v, a, w, P, patches_per_image)
    tr = _Tracer()
    va = _vision_inputs(a, w, trainable)
    layer = _Layer(tr, None, va, set())
    x = _embedded_patches(tr, layer, v, w, trainable)
    block_input = x.width * _size(x.dtype)
    if not trainable:
        kept = block_input * P * v.depth if gradient_checkpointing else 0
        return VisionEstimate(
            patches=P,
            image_tokens=tokens,
            saved_forward=kept,
            per_block=0,
            forward_transient=forward_transient,
            recompute=0,
        )
    per_patch_fixed = tr.total()
    block_bytes = []
    for i in range(v.depth):
        before = tr.total()
        x = _vision_block(tr, layer, v, x, va, i, patches_per_image)
        block_bytes.append(tr.total() - before)
    per_patch_tail, per_token_merger = _after_the_blocks(tr, v, va, x)
    shared = 2 * P * (v.hidden // v.heads) * 4  # 2D RoPE cos/sin (fp32), kept once for all blocks
    if w != FP32:
        shared += v.positions * v.hidden * 4  # grid_sample's fp32 copy of the position table
    if gradient_checkpointing:
        body = block_input * P * v.depth
        recompute = max(block_bytes) * P
    else:
        body = sum(block_bytes) * P
        recompute = 0
    saved = (per_patch_fixed + per_patch_tail) * P + body + per_token_merger * tokens + shared
    return VisionEstimate(
        patches=P,
        image_tokens=tokens,
        saved_forward=saved,
        per_block=max(block_bytes) * P,
        forward_transient=forward_transient,
        recompute=recompute,
    )


def _vision_forward_transient(v: VisionShape, a: ActivationInputs, w: torch.dtype, P: int, patches_per_image: int):
    """Bytes live during the forward but not kept: one block's working set (all of it freed as the block finishes
    when frozen) and the processor's fp32 pixel values."""
    c = _size(a.autocast_dtype or w)
    block_live = max(9 * v.hidden, 2 * v.hidden + 4 * v.mlp) * P * c
    if a.attn_implementation == "eager":
        block_live += v.heads * patches_per_image**2 * (4 + c)  # one image's fp32 scores and their cast
    pixels = P * v.patch_dim * 4  # the processor's fp32 pixel values, live through the forward
    return pixels + block_live


def _vision_inputs(a: ActivationInputs, w: torch.dtype, trainable: bool) -> ActivationInputs:
    """The decoder's precision inputs as the tower sees them: its weights in ``w``, trained or frozen with it."""
    return ActivationInputs(
        micro_batch=1,
        seq_len=2,
        autocast_dtype=a.autocast_dtype,
        base_dtype=w,
        trainable_dtype=w,
        full_finetune=trainable,
        attn_implementation=a.attn_implementation,
        device_type=a.device_type,
    )


def _embedded_patches(tr: _Tracer, layer: _Layer, v: VisionShape, w: torch.dtype, trainable: bool) -> _Tensor:
    """The first block's input: the pixels through patch_embed and post_conv_layernorm, plus the interpolated
    position embeddings (what each step saves recorded on ``tr``)."""
    pix = tr.new(v.patch_dim, FP32, False)
    if w != FP32:
        pix = tr.new(v.patch_dim, w, False)  # patch_embed casts pixels to its weight dtype
    x = _conv(tr, layer, pix, v.hidden, "patch_embed")
    x = layer.norm(x, "post_conv")
    if trainable:
        tr.save(tr.new(2, FP32, False), "base")  # grid_sample's sampling grid (position interpolation)
    return tr.new(v.hidden, torch.promote_types(x.dtype, w), trainable)  # + interpolated positions


def _after_the_blocks(tr: _Tracer, v: VisionShape, va: ActivationInputs, x: _Tensor) -> tuple[int, int]:
    """Bytes saved after the last block: per patch (post_layernorm and the downsample conv's input) and per merged
    token (the patch merger); their autocast weight copies added to ``tr``'s."""
    tail_tr = _Tracer()
    tail = _Layer(tail_tr, None, va, set())
    y = _conv(tail_tr, tail, tail.norm(x, "post_layernorm"), v.out_hidden * v.merge**2, "downsample")
    merger_tr = _Tracer()
    _merger(merger_tr, _Layer(merger_tr, None, va, set()), v, merger_tr.new(v.out_hidden, y.dtype, True))
    tr.copies += tail_tr.copies + merger_tr.copies
    return tail_tr.total(), merger_tr.total()


def _merger(tr: _Tracer, layer: _Layer, v: VisionShape, x: _Tensor) -> _Tensor:
    """Glm4vVisionPatchMerger: proj, LayerNorm (fp32 under autocast), GELU, gate/up/down."""
    o = v.out_hidden
    h = layer.linear(x, "proj", o, "merger.proj")
    ln_dtype = FP32 if layer.c is not None else h.dtype
    hin = h if h.dtype == ln_dtype else tr.new(o, ln_dtype, h.rg)
    tr.save(hin, "base")  # layer_norm keeps its input, mean and rstd
    tr.save(tr.new(2, FP32, False), "base")
    ln = tr.new(o, ln_dtype, True)
    tr.save(ln, "base")  # GELU keeps its input
    act = tr.new(o, ln_dtype, True)
    g = layer.linear(act, "gate_proj", v.merger, "merger.gate")
    u = layer.linear(act, "up_proj", v.merger, "merger.up")
    tr.save(g, "base")
    tr.save(tr.new(v.merger, g.dtype, True), "base")
    tr.save(u, "base")
    return layer.linear(tr.new(v.merger, g.dtype, True), "down_proj", o, "merger.down")


def lora_targets_in_layer(census: PlannedCensus) -> frozenset:
    """Which linears of a decoder layer carry adapters, read from the census (peft's own matching)."""
    names = set()
    for p in census.params:
        if p.group == "lora" and ".lora_A." in p.name:
            names.add(p.name.split(".lora_A.")[0].rsplit(".", 1)[-1])
    return frozenset(names)


def quantized_linears_in_layer(census: PlannedCensus) -> frozenset:
    """Which linears of a decoder layer hold quantized weights (quantization.base), read from the census."""
    return frozenset(
        p.name.removesuffix(".weight").removesuffix(".base_layer").rsplit(".", 1)[-1]
        for p in census.quantized
        if p.group == "decoder"
    )


def lora_layers_in(census: PlannedCensus) -> frozenset:
    """The indices of the decoder layers that carry adapters, read from the census (``lora.layers``: the last ones)."""
    return frozenset(
        int(m.group(1))
        for p in census.params
        if p.group == "lora" and ".lora_A." in p.name
        for m in [re.search(r"\.layers\.(\d+)\.", p.name)]
        if m and ".visual." not in p.name
    )


# ---------------------------------------------------------------------------------------------
# Measurement


@dataclass(frozen=True)
class ActivationMeasurement:
    saved_forward: int  # unique storages saved for backward, excluding parameters and weight copies
    autocast_copies: int  # low-precision copies of weights that were saved
    tensors: int

    def to_dict(self) -> dict:
        return asdict(self)


_VIEW_OPS = {
    "TBackward0",
    "ViewBackward0",
    "UnsafeViewBackward0",
    "PermuteBackward0",
    "ExpandBackward0",
    "TransposeBackward0",
    "AliasBackward0",
}


def _is_weight_copy(t: torch.Tensor, param_dtype_by_shape: dict) -> bool:
    """A low-precision copy of a weight made by autocast (not an activation)."""
    fn, cast = t.grad_fn, False
    while fn is not None:  # trainable leaf: ToCopyBackward0 (+ views) -> AccumulateGrad
        name = type(fn).__name__
        if name == "AccumulateGrad":
            return cast
        if name == "ToCopyBackward0":
            cast = True
        elif name not in _VIEW_OPS:
            return False
        nxt = [f for f, _ in fn.next_functions if f is not None]
        if len(nxt) != 1:
            return False
        fn = nxt[0]
    # a frozen weight cast by autocast has no grad_fn: a parameter's shape in another dtype
    if t.grad_fn is not None or t.dim() != 2:
        return False
    for shape in (tuple(t.shape), tuple(t.shape[::-1])):
        dtypes = param_dtype_by_shape.get(shape)
        if dtypes and t.dtype not in dtypes:
            return True
    return False


class SavedTensors:
    """Counts the unique storages autograd saves for backward while active (``with SavedTensors(model) as saved``):
    parameters excluded (weights, not activations), autocast's weight copies reported apart. Saved storages are kept
    alive until ``result()``: under checkpointing autograd drops what it saved, and the allocator could hand the same
    address to a later tensor, which would then go uncounted."""

    def __init__(self, model: torch.nn.Module):
        self.param_ptrs = {p.untyped_storage().data_ptr() for p in model.parameters()}
        self.param_shapes: dict = {}
        for p in model.parameters():
            if p.dim() == 2:
                self.param_shapes.setdefault(tuple(p.shape), set()).add(p.dtype)
        self.seen: dict[int, tuple[int, bool]] = {}
        self.alive: list = []
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)

    def _pack(self, t: torch.Tensor):
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in self.param_ptrs and ptr not in self.seen:
            self.seen[ptr] = (storage.nbytes(), _is_weight_copy(t, self.param_shapes))
            self.alive.append(storage)
        return t

    def __enter__(self) -> SavedTensors:
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._hooks.__exit__(*exc)

    def add_held_by_graph(self, output: torch.Tensor) -> None:
        """Count what bitsandbytes' autograd functions keep for backward on their own context, out of autograd's
        saved tensors (LLM.int8's matmul keeps its input there): walked from ``output``'s graph."""
        seen, todo = set(), [output.grad_fn]
        while todo:
            fn = todo.pop()
            if fn is None or id(fn) in seen:
                continue
            seen.add(id(fn))
            if type(fn).__name__.startswith("MatMul"):  # bitsandbytes' MatMul8bitLt / MatMul8bitFp / MatMul4Bit
                held = [getattr(fn, "A", None), *(getattr(fn, "tensors", None) or ())]
                for t in held:
                    if isinstance(t, torch.Tensor):
                        self._pack(t)
            todo += [f for f, _ in fn.next_functions]

    def result(self) -> ActivationMeasurement:
        self.alive = []
        return ActivationMeasurement(
            saved_forward=sum(n for n, copy in self.seen.values() if not copy),
            autocast_copies=sum(n for n, copy in self.seen.values() if copy),
            tensors=len(self.seen),
        )


def measure_saved_activations(
    model: torch.nn.Module, input_ids: torch.Tensor, autocast=None, labels=None, memory=None, **inputs
) -> ActivationMeasurement:
    """Run one forward + the project's loss (``forward.batch_loss_sum``: the loss head of ``memory``, a
    ``MemorySection``; None: the default) under ``SavedTensors`` and return what autograd saved for backward.
    ``autocast``: a context manager factory (e.g. ``policy.autocast``). ``labels``: None labels every token.
    ``inputs``: further model inputs (``pixel_values`` and ``image_grid_thw`` of a vision-language batch)."""
    from ..forward import batch_loss_sum

    batch = {"input_ids": input_ids, "labels": input_ids if labels is None else labels, **inputs}
    with SavedTensors(model) as saved:
        loss = batch_loss_sum(model, batch, autocast, memory)
    saved.add_held_by_graph(loss)
    del loss
    return saved.result()
