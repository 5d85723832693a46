"""GRPO rollouts sampled by vLLM (``rl.rollout_engine: vllm``).

A vLLM server is started once for the run on the run's base model, in the dtype of the run's precision policy, with
runtime LoRA loading on and log-probabilities taken after temperature (``--logprobs-mode processed_logprobs``: the
distribution sampled, as the in-process sampler keeps them). Each optimizer step the current adapter is saved and
loaded under a new name (``step-N``; the previous one is unloaded), the prompts go to ``/v1/completions`` as token
ids, and the completions come back as token ids with vLLM's own log-probabilities: ``policy_mismatch`` then measures
the trainer against the inference engine.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import torch

from ..data.multimodal import encode_prompt
from ..forward.generate import Rollouts, left_padded, rollouts_of

DTYPE_OF_MODE = {"fp32": "float32", "bf16": "bfloat16", "pure-bf16": "bfloat16", "fp16": "float16"}


class VllmRollouts:
    """The run's vLLM server and the adapter it currently serves."""

    def __init__(self, cfg, precision, tokenizer, stops: list[int], device):
        from ..config import config_from_dict
        from ..serve.config import ServeConfig
        from ..serve.vllm import has_nvidia_gpu, start_vllm

        rl, s = cfg.rl, cfg.schedule
        self.tokenizer, self.stops, self.device = tokenizer, stops, device
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stops[0]
        serve = config_from_dict(
            {
                "engine": "vllm",
                "model": cfg.model.source,
                "dtype": DTYPE_OF_MODE[precision.mode],
                "port": 0,
                "max_batch": max(8, s.micro_batch_size * rl.group_size),
                "max_context": cfg.data.max_length + rl.max_new_tokens,
            },
            ServeConfig,
        )
        print(f"[grpo] starting vLLM for the rollouts ({serve.dtype}) ...", flush=True)
        # on a CPU, torch.compile's warm-up costs minutes of a run's start: eager there
        eager = [] if has_nvidia_gpu() else ["--enforce-eager"]
        self.server = start_vllm(
            serve,
            lora_rank=cfg.lora.r,
            extra_args=["--logprobs-mode", "processed_logprobs", *eager],
            progress=lambda t, line: print(f"[grpo] vLLM starting ({t:.0f} s)", flush=True),
        )
        self.adapters = Path(tempfile.mkdtemp(prefix="workbench-grpo-adapters-"))
        self.current: str | None = None

    def push_adapter(self, peft_model, step: int) -> None:
        """Serve the adapter as it is now under ``step-N`` (runtime loading), then drop the previous one."""
        name = f"step-{step}"
        peft_model.save_pretrained(self.adapters / name)
        self.server.add_adapter(name, self.adapters / name)
        if self.current is not None:
            self.server.remove_adapter(self.current)
            shutil.rmtree(self.adapters / self.current, ignore_errors=True)
        self.current = name

    def sample(
        self, conversations: list[list[dict]], group_size: int, max_new_tokens: int, temperature: float
    ) -> Rollouts:
        """``group_size`` completions of each conversation from the current adapter, with vLLM's log-probabilities."""
        prompts = [encode_prompt(self.tokenizer, list(messages)) for messages in conversations]
        body = {
            "model": self.current,
            "prompt": [list(p.input_ids) for p in prompts],
            "n": group_size,
            "max_tokens": max_new_tokens,
            "temperature": temperature,
            "top_p": 1.0,
            "top_k": -1,
            "logprobs": 0,
            "return_tokens_as_token_ids": True,
            "stop_token_ids": self.stops,
            "skip_special_tokens": False,
        }
        choices = sorted(self._post("/v1/completions", body)["choices"], key=lambda c: c["index"])
        rows = [
            ([int(t.rsplit(":", 1)[1]) for t in c["logprobs"]["tokens"]], c["logprobs"]["token_logprobs"])
            for c in choices
        ]
        width = max(1, max(len(ids) for ids, _ in rows))
        generated = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        sampled = torch.zeros((len(rows), width), dtype=torch.float32)
        for r, (ids, logps) in enumerate(rows):
            generated[r, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            sampled[r, : len(ids)] = torch.tensor([float(x) for x in logps], dtype=torch.float32)
        inputs = left_padded([p for p in prompts for _ in range(group_size)], self.pad_id, self.device)
        return rollouts_of(
            self.tokenizer, inputs, prompts, generated.to(self.device), sampled.to(self.device), self.stops
        )

    def _post(self, path: str, body: dict) -> dict:
        return self.server.client.post(path, body)  # the one client of model servers (serve.remote)

    def close(self) -> None:
        self.server.stop()
        shutil.rmtree(self.adapters, ignore_errors=True)
