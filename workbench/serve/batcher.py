"""The generation engine: one thread owns the model and decodes all running requests as one batch.

Each step feeds every running sequence its last token in a single forward pass over a shared,
left-padded KV cache. A request joins after a prefill of its own (batch of one, so its first token is
exactly what a lone request would get) and its cache is padded into the batch; a finished or cancelled
request leaves at once and the padding no row needs any more is trimmed. Attention masks and explicit
position ids make a padded row compute what it would alone, so greedy output does not depend on
which other requests share the batch.

LoRA adapters ride on one peft model over the shared base (never merged): each row of a batch names its
adapter (``adapter_names=``, "__base__" for the plain base), so base and adapters decode together.

Images (vision-language models) enter at the prefill only: a request's ``prefill_inputs`` (pixel values,
image grids, token types: ``workbench.data.multimodal.vision_batch``) go to its prefill forward with the 3D
rotary positions the model computes for them. Image tokens take fewer rotary positions than cache slots, so
such a row keeps a ``position_offset`` and decodes with text positions shifted by it, in the same batch as
text-only rows.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import random
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ..forward.generate import model_stop_token_ids
from .packed import pack_linear_weights
from .text import IncrementalDetokenizer, StopStringMatcher

log = logging.getLogger(__name__)

BASE = "__base__"  # peft's name for "no adapter" in a mixed batch


@dataclass
class SamplingParams:
    max_new_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    ignore_eos: bool = False
    # OpenAI: logit -= count * frequency_penalty + (count > 0) * presence_penalty, counting generated tokens
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    # vLLM / transformers: a logit of any token already in the prompt or the output is divided by it when
    # positive, multiplied when negative (1 = off)
    repetition_penalty: float = 1.0
    # None: no logprobs; k >= 0: each generated token's log-probability and the k most likely alternatives
    logprobs: int | None = None

    @property
    def penalized(self) -> bool:
        return bool(self.frequency_penalty or self.presence_penalty or self.repetition_penalty != 1.0)

    @property
    def greedy(self) -> bool:
        return self.temperature < 1e-5


@dataclass
class TokenLogprob:
    """One generated token's log-probability under the model (before penalties and temperature), with the
    ``top`` most likely tokens of that step as (token id, log-probability)."""

    token: int
    logprob: float
    top: list[tuple[int, float]] = field(default_factory=list)


@dataclass
class TokenEvent:
    """What the decoder tells a request's consumer: a text delta, then one final event."""

    text: str = ""
    logprobs: list[TokenLogprob] | None = None  # the tokens behind this delta, when the request asked
    finish_reason: str | None = None  # "stop" | "length" | "cancelled" | "error"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None


class GenerationRequest:
    def __init__(
        self,
        prompt_ids: list[int],
        params: SamplingParams,
        sink: Callable[[TokenEvent], None],
        adapter: str | None = None,
        prefill_inputs: dict[str, torch.Tensor] | None = None,
    ):
        self.prompt_ids = list(prompt_ids)
        self.params = params
        self.sink = sink  # called from the decoder thread; must not block
        self.adapter = adapter  # internal adapter name, None for the base model
        self.prefill_inputs = prefill_inputs  # images: extra model inputs of the prefill forward only
        self.position_offset = 0  # decode position = cache position + this (rotary positions of images)
        self.cancelled = threading.Event()
        self.generated: list[int] = []
        self.done = False
        self._detok: IncrementalDetokenizer | None = None
        self._stops: StopStringMatcher | None = None
        self._generator: torch.Generator | None = None
        self._logprobs: list[TokenLogprob] = []  # tokens accepted but not yet handed out with an event
        self._step_logprob: TokenLogprob | None = None

    def cancel(self) -> None:
        self.cancelled.set()


class DecoderError(RuntimeError):
    pass


class BatchDecoder:
    def __init__(
        self,
        model,
        tokenizer,
        *,
        max_batch: int = 16,
        max_context: int | None = None,
        eos_token_ids: list[int] | None = None,
        pack_weights: bool = False,
    ):
        """``pack_weights``: compute the linear layers with oneDNN-packed weights (``workbench.serve.packed``): for
        a model only this decoder uses and nobody trains, as the server's own."""
        self.base_model = model
        self.model = model  # becomes a peft model once an adapter is loaded
        self.tokenizer = tokenizer
        self.max_batch = max(1, max_batch)
        self.max_context = max_context or _max_context(model)
        self.eos_token_ids = set(eos_token_ids if eos_token_ids is not None else model_stop_token_ids(model, tokenizer))
        self.device = next(model.parameters()).device
        self.packed_linears = pack_linear_weights(model) if pack_weights else 0
        unbatchable = _why_not_batched(model)
        if unbatchable and self.max_batch > 1:
            # sliding-window / hybrid caches keep extra state that padding rows in and out would corrupt
            log.warning("decoding one request at a time: %s", unbatchable)
            self.max_batch = 1
        self._waiting: deque[GenerationRequest] = deque()
        self._running: list[GenerationRequest] = []
        self._cache = None  # the batch's DynamicCache, rows in the order of _running
        self._pad: list[int] = []  # left padding of each row in _cache
        self._commands: queue.Queue = queue.Queue()
        self._adapters: set[str] = set()
        self._retired_adapters: set[str] = set()  # unloaded once no running request uses them
        self._wake = threading.Condition()
        self._stop = False
        self._thread: threading.Thread | None = None
        # peak_batch: the most requests decoded in one forward pass (1 forever would mean no batching)
        self.counters = {"finished": 0, "cancelled": 0, "steps": 0, "peak_batch": 0}

    # ---- public API (any thread) -------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="workbench-decoder", daemon=True)
        self._thread.start()

    def shutdown(self, timeout: float = 10.0) -> None:
        with self._wake:
            self._stop = True
            self._wake.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)

    def submit(self, req: GenerationRequest) -> None:
        with self._wake:
            self._waiting.append(req)
            self._wake.notify_all()

    def stats(self) -> dict:
        return {
            "running": len(self._running),
            "waiting": len(self._waiting),
            "max_batch": self.max_batch,
            "packed_linears": self.packed_linears,
            **self.counters,
        }

    def add_adapter(self, name: str, path: str, timeout: float = 300.0) -> None:
        """Load a peft adapter under ``name`` next to the base (between decode steps)."""
        self._call(self._load_adapter, name, path, timeout=timeout)

    def remove_adapter(self, name: str) -> None:
        """Stop routing to ``name``; its weights go once no running request uses them."""
        self._call(self._retire_adapter, name, timeout=60.0)

    # ---- decoder thread -------------------------------------------------------------------------

    def _call(self, fn, *args, timeout: float):
        if self._thread is None or not self._thread.is_alive():
            return fn(*args)  # decoder not running: nobody else touches the model
        done = threading.Event()
        box: dict = {}

        def run():
            try:
                box["value"] = fn(*args)
            except BaseException as err:  # handed back to the caller
                box["error"] = err
            finally:
                done.set()

        self._commands.put(run)
        with self._wake:
            self._wake.notify_all()
        if not done.wait(timeout):
            raise DecoderError(f"decoder did not run {fn.__name__} within {timeout:.0f} s")
        if "error" in box:
            raise box["error"]
        return box.get("value")

    def _loop(self) -> None:
        torch.set_grad_enabled(False)
        while True:
            with self._wake:
                while not (self._stop or self._waiting or self._running or not self._commands.empty()):
                    self._wake.wait()
                if self._stop:
                    break
            self._run_commands()
            try:
                self._admit()
                if self._running:
                    self._decode_step()
            except Exception as err:  # a failed forward must not kill the server: fail the batch
                log.exception("generation failed")
                for req in self._running:
                    self._finish(req, "error", error=f"{type(err).__name__}: {err}")
                self._running, self._cache, self._pad = [], None, []
            self._drop_retired_adapters()
        for req in list(self._running) + list(self._waiting):
            self._finish(req, "cancelled")

    def _run_commands(self) -> None:
        while True:
            try:
                cmd = self._commands.get_nowait()
            except queue.Empty:
                return
            cmd()

    def _admit(self) -> None:
        while len(self._running) < self.max_batch:
            with self._wake:
                if not self._waiting:
                    return
                req = self._waiting.popleft()
            if req.cancelled.is_set():
                self._finish(req, "cancelled")
                continue
            try:
                self._start(req)
            except Exception as err:  # fails this request only, not the batch already running
                log.exception("prefill failed")
                self._finish(req, "error", error=f"{type(err).__name__}: {err}")

    def _forward(self, input_ids, attention_mask, position_ids, cache, adapters: list[str | None], **inputs):
        kwargs = dict(inputs)
        routing = contextlib.nullcontext()
        if self.model is not self.base_model:
            if inputs:  # a prefill with images (one request): see _one_adapter
                routing = _one_adapter(self.model, adapters[0])
            else:  # peft: every row names its adapter
                kwargs["adapter_names"] = [a or BASE for a in adapters]
        with routing:
            out = self.model(
                input_ids=input_ids,
                attention_mask=attention_mask,
                position_ids=position_ids,
                cache=cache,
                use_cache=True,
                logits_to_keep=1,
                **kwargs,
            )
        return out.logits[:, -1, :].float()

    def _start(self, req: GenerationRequest) -> None:
        from transformers import DynamicCache

        req._detok = IncrementalDetokenizer(self.tokenizer)
        req._stops = StopStringMatcher(req.params.stop)
        if not req.params.greedy:
            req._generator = torch.Generator(device=self.device)  # where the probabilities it draws from are
            seed = req.params.seed if req.params.seed is not None else random.SystemRandom().randrange(2**63)
            req._generator.manual_seed(seed % 2**63)  # any JSON integer; torch takes 64 bits
        n = len(req.prompt_ids)
        ids = torch.tensor([req.prompt_ids], device=self.device)
        cache = DynamicCache(config=self.model.config)
        positions, inputs = torch.arange(n, device=self.device)[None], {}
        if req.prefill_inputs:
            inputs = {k: v.to(self.device) for k, v in req.prefill_inputs.items()}
            positions, req.position_offset = _image_positions(self.base_model, ids, inputs)
        logits = self._forward(ids, torch.ones_like(ids), positions, cache, [req.adapter], **inputs)
        token = self._sample(logits, [req])[0]
        if self._accept(req, token):
            return
        self._join(req, cache)

    def _join(self, req: GenerationRequest, cache) -> None:
        new_len = cache.get_seq_length()
        if self._cache is None:
            self._cache, self._pad, self._running = cache, [0], [req]
            return
        cur_len = self._cache.get_seq_length()
        width = max(cur_len, new_len)
        for mine, theirs in zip(self._cache.layers, cache.layers):
            mine.keys = torch.cat([_left_pad(mine.keys, width), _left_pad(theirs.keys, width)])
            mine.values = torch.cat([_left_pad(mine.values, width), _left_pad(theirs.values, width)])
        self._pad = [p + width - cur_len for p in self._pad] + [width - new_len]
        self._running.append(req)

    def _leave(self, keep: list[int]) -> None:
        if not keep:
            self._running, self._cache, self._pad = [], None, []
            return
        index = torch.tensor(keep, device=self.device)
        self._running = [self._running[i] for i in keep]
        self._pad = [self._pad[i] for i in keep]
        trim = min(self._pad)  # columns that are padding in every remaining row
        for layer in self._cache.layers:
            layer.keys = layer.keys.index_select(0, index)[:, :, trim:]
            layer.values = layer.values.index_select(0, index)[:, :, trim:]
        self._pad = [p - trim for p in self._pad]

    def _decode_step(self) -> None:
        keep = [i for i, r in enumerate(self._running) if not r.cancelled.is_set()]
        if len(keep) < len(self._running):
            for i, r in enumerate(self._running):
                if r.cancelled.is_set():
                    self._finish(r, "cancelled")
            self._leave(keep)
            if not self._running:
                return
        width = self._cache.get_seq_length()
        batch = len(self._running)
        mask = torch.ones(batch, width + 1, dtype=torch.long, device=self.device)
        for row, pad in enumerate(self._pad):
            mask[row, :pad] = 0
        positions = torch.tensor(
            [[width - pad + r.position_offset] for pad, r in zip(self._pad, self._running)], device=self.device
        )
        last = torch.tensor([[r.generated[-1]] for r in self._running], device=self.device)
        logits = self._forward(last, mask, positions, self._cache, [r.adapter for r in self._running])
        self.counters["steps"] += 1
        self.counters["peak_batch"] = max(self.counters["peak_batch"], batch)
        tokens = self._sample(logits, self._running)
        keep = [i for i, (req, tok) in enumerate(zip(self._running, tokens)) if not self._accept(req, tok)]
        if len(keep) < batch:
            self._leave(keep)

    def _sample(self, logits: torch.Tensor, reqs: list[GenerationRequest]) -> list[int]:
        raw = logits
        if any(r.params.penalized for r in reqs):
            logits = logits.clone()
            for row, req in enumerate(reqs):
                if req.params.penalized:
                    apply_penalties(logits[row], req)
        tokens = logits.argmax(-1).tolist()
        for row, req in enumerate(reqs):
            if req.params.greedy:
                continue
            probs = torch.softmax(logits[row] / req.params.temperature, -1)
            if req.params.top_p < 1.0:
                sorted_p, order = probs.sort(descending=True)
                # keep the smallest prefix whose mass reaches top_p (always at least one token)
                drop = sorted_p.cumsum(-1) - sorted_p >= req.params.top_p
                drop[0] = False
                sorted_p[drop] = 0.0
                probs = torch.zeros_like(probs).scatter_(0, order, sorted_p)
            tokens[row] = int(torch.multinomial(probs, 1, generator=req._generator))
        for row, req in enumerate(reqs):
            if req.params.logprobs is not None:
                req._step_logprob = _token_logprob(raw[row], tokens[row], req.params.logprobs)
        return tokens

    def _accept(self, req: GenerationRequest, token: int) -> bool:
        """Record one sampled token; returns True when the request is finished."""
        if req.cancelled.is_set():
            self._finish(req, "cancelled")
            return True
        req.generated.append(token)
        if token in self.eos_token_ids and not req.params.ignore_eos:  # not part of the output, nor its logprobs
            self._emit(req, req._stops.push(req._detok.flush())[0] + req._stops.flush())
            self._finish(req, "stop")
            return True
        if req._step_logprob is not None:
            req._logprobs.append(req._step_logprob)
        text, stopped = req._stops.push(req._detok.add(token))
        if stopped:
            self._emit(req, text)
            self._finish(req, "stop")
            return True
        out_of_room = len(req.prompt_ids) + len(req.generated) >= self.max_context
        if len(req.generated) >= req.params.max_new_tokens or out_of_room:
            tail, stopped = req._stops.push(req._detok.flush())
            self._emit(req, text + tail + ("" if stopped else req._stops.flush()))
            self._finish(req, "stop" if stopped else "length")
            return True
        self._emit(req, text)
        return False

    def _emit(self, req: GenerationRequest, text: str) -> None:
        if text:
            req.sink(TokenEvent(text=text, logprobs=self._take_logprobs(req)))

    @staticmethod
    def _take_logprobs(req: GenerationRequest) -> list[TokenLogprob] | None:
        if req.params.logprobs is None:
            return None
        out, req._logprobs = req._logprobs, []
        return out

    def _finish(self, req: GenerationRequest, reason: str, error: str | None = None) -> None:
        if req.done:
            return
        req.done = True
        self.counters["cancelled" if reason == "cancelled" else "finished"] += 1
        req.sink(
            TokenEvent(
                finish_reason=reason,
                prompt_tokens=len(req.prompt_ids),
                completion_tokens=len(req.generated),
                error=error,
                logprobs=self._take_logprobs(req),
            )
        )

    # ---- adapters (decoder thread) ----------------------------------------------------------

    def _load_adapter(self, name: str, path: str) -> None:
        from peft import PeftModel

        from ..models import peft_deprecation_hidden

        if name in self._adapters:
            raise DecoderError(f"adapter {name!r} is already loaded")
        with peft_deprecation_hidden():
            if self.model is self.base_model:
                self.model = PeftModel.from_pretrained(self.base_model, path, adapter_name=name, is_trainable=False)
            else:
                self.model.load_adapter(path, adapter_name=name, is_trainable=False)
        self.model.eval()
        self._adapters.add(name)

    def _retire_adapter(self, name: str) -> None:
        if name not in self._adapters:
            raise DecoderError(f"adapter {name!r} is not loaded")
        self._retired_adapters.add(name)

    def _drop_retired_adapters(self) -> None:
        for name in list(self._retired_adapters):
            if any(r.adapter == name for r in self._running) or any(r.adapter == name for r in self._waiting):
                continue
            self._retired_adapters.discard(name)
            self._adapters.discard(name)
            if self._adapters:
                if self.model.active_adapter == name:
                    self.model.set_adapter(next(iter(self._adapters)))
                self.model.delete_adapter(name)
            else:
                # the last adapter: unwrap, restoring the untouched base modules
                self.base_model = self.model.unload()
                self.model = self.base_model


def _why_not_batched(model) -> str | None:
    """Why requests of ``model`` cannot share a batch (None: they can). Rows join and leave a batch by padding its
    KV cache, which only a cache of plain DynamicLayers allows; sliding-window or hybrid layers keep extra state."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    try:
        layers = DynamicCache(config=model.config).layers
    except KeyError as err:  # a layer type this transformers has no dynamic cache for
        return f"this model's KV cache has a layer type transformers' DynamicCache does not know ({err})"
    others = sorted({type(layer).__name__ for layer in layers if type(layer) is not DynamicLayer})
    return f"this model's KV cache is not a plain DynamicCache (it has {', '.join(others)})" if others else None


@contextlib.contextmanager
def _one_adapter(peft_model, name: str | None):
    """Only ``name`` (None: no adapter) active for one forward. LoRA layers in the vision tower (an adapter
    trained with its projector) see image patches, not batch rows, so peft's per-row ``adapter_names`` cannot
    route them; a prefill is one request, so activating its adapter routes every layer."""
    if name is None:
        with peft_model.disable_adapter():
            yield
    else:
        peft_model.set_adapter(name)
        yield


def _image_positions(model, ids: torch.Tensor, inputs: dict) -> tuple[torch.Tensor, int]:
    """The 3D rotary positions (3, 1, n) of a prompt with images, and the offset of the positions after it
    (the model's own rule: ``get_rope_index`` of GLM-4.1V / Qwen2-VL-style models)."""
    positions, delta = model.model.get_rope_index(ids, **inputs)
    return positions, int(delta.reshape(-1)[0])


def _left_pad(t: torch.Tensor, width: int) -> torch.Tensor:
    missing = width - t.shape[-2]
    if missing == 0:
        return t
    pad = t.new_zeros(*t.shape[:-2], missing, t.shape[-1])
    return torch.cat([pad, t], dim=-2)


def _max_context(model) -> int:
    cfg = model.config
    text_cfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    return int(getattr(text_cfg, "max_position_embeddings", None) or 2048)


def apply_penalties(logits: torch.Tensor, req: GenerationRequest) -> None:
    """Apply the request's penalties to one row of logits, in place (OpenAI's, then the repetition penalty)."""
    p = req.params
    if req.generated and (p.frequency_penalty or p.presence_penalty):
        ids, counts = torch.tensor(req.generated, device=logits.device).unique(return_counts=True)
        logits[ids] -= counts.to(logits.dtype) * p.frequency_penalty + p.presence_penalty
    if p.repetition_penalty != 1.0:
        ids = torch.tensor(req.prompt_ids + req.generated, device=logits.device).unique()
        seen = logits[ids]
        logits[ids] = torch.where(seen > 0, seen / p.repetition_penalty, seen * p.repetition_penalty)


def _token_logprob(logits: torch.Tensor, token: int, top: int) -> TokenLogprob:
    logprobs = torch.log_softmax(logits.float(), -1)
    best = logprobs.topk(top) if top else None
    return TokenLogprob(
        token,
        float(logprobs[token]),
        list(zip(best.indices.tolist(), best.values.tolist())) if best is not None else [],
    )
