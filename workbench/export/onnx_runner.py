"""A small onnxruntime runner for an ONNX export: logits, and greedy generation from a chat.

The exported graph maps (input_ids, attention_mask) to logits with no KV cache, so each generated
token re-runs the whole sequence (quadratic in length: fine for short answers, a benchmark figure
to read as such).

    python -m workbench.export.onnx_runner EXPORT_DIR "Who are you?" [--max-tokens 40]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

MODEL_FILE = "model.onnx"
INT8_MODEL_FILE = "model.int8.onnx"


class OnnxCausalLM:
    """An exported model in onnxruntime, with its tokenizer (saved beside it)."""

    def __init__(self, export_dir: str | Path, model_file: str | None = None, threads: int | None = None):
        import onnxruntime as ort
        from transformers import AutoTokenizer

        self.dir = Path(export_dir)
        manifest = json.loads((self.dir / "manifest.json").read_text()) if (self.dir / "manifest.json").is_file() else {}
        name = model_file or manifest.get("onnx", {}).get("model_file") or MODEL_FILE
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        options.log_severity_level = 3  # quantized graphs warn about unused initializers
        self.session = ort.InferenceSession(str(self.dir / name), options, providers=["CPUExecutionProvider"])
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.dir))
        gen = json.loads((self.dir / "generation_config.json").read_text()) if (self.dir / "generation_config.json").is_file() else {}
        eos = gen.get("eos_token_id", self.tokenizer.eos_token_id)
        self.eos_ids = set(eos if isinstance(eos, list) else [eos]) - {None}

    def logits(self, input_ids, attention_mask) -> np.ndarray:
        """[batch, seq, vocab] float32 logits for int64 token ids and mask (numpy arrays or torch tensors)."""
        feed = {"input_ids": np.asarray(input_ids, dtype=np.int64), "attention_mask": np.asarray(attention_mask, dtype=np.int64)}
        return self.session.run(["logits"], feed)[0]

    def generate_ids(self, prompt_ids: list[int], max_new_tokens: int = 32) -> list[int]:
        """Greedy continuation of ``prompt_ids`` (stops at an end-of-sequence token)."""
        ids = list(prompt_ids)
        out: list[int] = []
        for _ in range(max_new_tokens):
            arr = np.asarray([ids], dtype=np.int64)
            nxt = int(self.logits(arr, np.ones_like(arr))[0, -1].argmax())
            if nxt in self.eos_ids:
                break
            ids.append(nxt)
            out.append(nxt)
        return out

    def chat(self, messages: list[dict] | str, max_new_tokens: int = 32) -> str:
        """The greedy answer to a conversation (or one user message) through the export's chat template."""
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        prompt = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        return self.tokenizer.decode(self.generate_ids(ids, max_new_tokens), skip_special_tokens=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m workbench.export.onnx_runner", description="Greedy chat with an ONNX export")
    p.add_argument("export_dir")
    p.add_argument("prompt")
    p.add_argument("--max-tokens", type=int, default=40)
    p.add_argument("--model-file", help=f"the graph to run (default: the manifest's, else {MODEL_FILE})")
    args = p.parse_args(argv)
    if not (Path(args.export_dir) / (args.model_file or MODEL_FILE)).is_file() and not (Path(args.export_dir) / "manifest.json").is_file():
        print(f"error: {args.export_dir} holds no ONNX export", file=sys.stderr)
        return 2
    print(OnnxCausalLM(args.export_dir, args.model_file).chat(args.prompt, args.max_tokens))
    return 0


if __name__ == "__main__":
    sys.exit(main())
