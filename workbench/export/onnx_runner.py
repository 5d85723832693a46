"""A small onnxruntime runner for an ONNX export: logits, and greedy generation from a chat.

The exported graph takes (input_ids, attention_mask, position_ids, past.{i}.key/value) and returns the
logits and the present key/values: generation runs the prompt once with an empty past, then one token per
call with the cache. (A graph without cache inputs, as exported before the cache was added, is run the old
way: the whole sequence again for every generated token.)

    workbench onnx-chat EXPORT_DIR "Who are you?" [--max-tokens 40]
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

MODEL_FILE = "model.onnx"
INT8_MODEL_FILE = "model.int8.onnx"


class OnnxCausalLM:
    """An exported model in onnxruntime, with its tokenizer (saved beside it)."""

    def __init__(self, export_dir: str | Path, model_file: str | None = None, threads: int | None = None):
        import onnxruntime as ort
        from transformers import AutoTokenizer

        from ..forward.generate import stop_token_ids

        self.dir = Path(export_dir)
        manifest = (
            json.loads((self.dir / "manifest.json").read_text()) if (self.dir / "manifest.json").is_file() else {}
        )
        name = model_file or manifest.get("onnx", {}).get("model_file") or MODEL_FILE
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        options.log_severity_level = 3  # quantized graphs warn about unused initializers
        self.session = ort.InferenceSession(str(self.dir / name), options, providers=["CPUExecutionProvider"])
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.dir))
        gen = (
            json.loads((self.dir / "generation_config.json").read_text())
            if (self.dir / "generation_config.json").is_file()
            else {}
        )
        self.eos_ids = set(stop_token_ids(self.tokenizer, gen.get("eos_token_id")))  # the in-process and served rule
        # past.{i}.key / past.{i}.value: [batch, kv_heads, past, head_dim]; none in a logits-only graph
        self.cache_inputs = [(i.name, i.shape) for i in self.session.get_inputs() if i.name.startswith("past.")]

    @property
    def has_cache(self) -> bool:
        return bool(self.cache_inputs)

    def empty_cache(self, batch: int) -> list[np.ndarray]:
        return [np.zeros((batch, shape[1], 0, shape[3]), dtype=np.float32) for _, shape in self.cache_inputs]

    def forward(
        self, input_ids, attention_mask, past: list[np.ndarray] | None = None
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """Logits of the new tokens ``input_ids`` after ``past`` (None: no past) and the present cache.
        ``attention_mask`` covers past and new tokens."""
        ids, mask = np.asarray(input_ids, dtype=np.int64), np.asarray(attention_mask, dtype=np.int64)
        if not self.has_cache:
            return self.session.run(["logits"], {"input_ids": ids, "attention_mask": mask})[0], []
        positions = np.clip(mask.cumsum(-1) - 1, 0, None)[:, mask.shape[1] - ids.shape[1] :]
        feed = {"input_ids": ids, "attention_mask": mask, "position_ids": positions}
        feed.update(
            zip((name for name, _ in self.cache_inputs), past if past is not None else self.empty_cache(len(ids)))
        )
        logits, *present = self.session.run(None, feed)
        return logits, present

    def logits(self, input_ids, attention_mask) -> np.ndarray:
        """[batch, seq, vocab] float32 logits for int64 token ids and mask (numpy arrays or torch tensors)."""
        return self.forward(input_ids, attention_mask)[0]

    def generate_ids(self, prompt_ids: list[int], max_new_tokens: int = 32) -> list[int]:
        """Greedy continuation of ``prompt_ids`` (stops at an end-of-sequence token): the in-process greedy rule."""
        from ..forward.generate import greedy_tokens

        return greedy_tokens(self._next_logits, prompt_ids, max_new_tokens, self.eos_ids)

    def _next_logits(self, new: list[int], past) -> tuple[np.ndarray, object]:
        """The logits after ``new`` and the state for the next call: (the cache, the length so far), or without a
        cache the whole sequence so far (run again every token)."""
        if self.has_cache:
            cache, length = past or (None, 0)
            length += len(new)
            logits, cache = self.forward([new], np.ones((1, length), dtype=np.int64), cache)
            return logits[0, -1], (cache, length)
        ids = (past or []) + list(new)
        logits, _ = self.forward([ids], np.ones((1, len(ids)), dtype=np.int64))
        return logits[0, -1], ids

    def chat(self, messages: list[dict] | str, max_new_tokens: int = 32) -> str:
        """The greedy answer to a conversation (or one user message) through the export's chat template: the
        prompt and the answer's text as in process and on the server (``workbench.forward.generate``)."""
        from ..data.multimodal import encode_prompt
        from ..forward.generate import answer_text

        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        ids = encode_prompt(self.tokenizer, messages).input_ids
        return answer_text(self.tokenizer, self.generate_ids(ids, max_new_tokens), self.eos_ids)
