"""GRPO's vLLM rollouts: what vLLM's /v1/completions answers becomes the same Rollouts the trainer reads.

The server is replaced by its recorded answer shape here (tests/serve/test_serve_vllm.py checks that shape against a
real vLLM: token ids, one log-probability each, a stopped completion ending on its stop token)."""

from __future__ import annotations

import torch

from workbench.engine.vllm_rollouts import VllmRollouts
from workbench.models.tiny import byte_tokenizer


def _choice(index: int, ids: list[int], logps: list[float], finish: str) -> dict:
    return {
        "index": index,
        "finish_reason": finish,
        "logprobs": {"tokens": [f"token_id:{i}" for i in ids], "token_logprobs": logps},
    }


def test_completions_become_rollouts_with_vllms_logprobs():
    tok = byte_tokenizer()
    eos = tok.eos_token_id
    hi = tok("hi", add_special_tokens=False)["input_ids"]
    sampler = VllmRollouts.__new__(VllmRollouts)  # no server: its answer is given below
    sampler.tokenizer, sampler.stops, sampler.device, sampler.pad_id, sampler.current = tok, [eos], "cpu", eos, "step-1"
    sent = {}

    def post(path, body):
        sent.update(body, path=path)
        # the groups come back out of order; the second completion was cut at max_tokens (no stop token)
        return {
            "choices": [_choice(1, hi + hi, [-0.5] * 4, "length"), _choice(0, hi + [eos], [-0.1, -0.2, -0.3], "stop")]
        }

    sampler._post = post
    r = sampler.sample([[{"role": "user", "content": "Say hi"}]], group_size=2, max_new_tokens=4, temperature=0.7)
    assert sent["path"] == "/v1/completions" and sent["model"] == "step-1" and sent["n"] == 2
    assert sent["logprobs"] == 0 and sent["return_tokens_as_token_ids"] and sent["stop_token_ids"] == [eos]
    assert sent["temperature"] == 0.7 and sent["top_p"] == 1.0 and sent["top_k"] == -1
    assert r.texts == ["hi", "hihi"] and r.stopped == [True, False]
    assert r.completion_mask.tolist() == [[1, 1, 1, 0], [1, 1, 1, 1]]  # up to and including the stop token
    assert torch.allclose(r.sampler_logprobs, torch.tensor([[-0.1, -0.2, -0.3, 0.0], [-0.5] * 4]))
    prompt = sent["prompt"][0]
    assert r.input_ids[0, : r.prompt_width].tolist() == prompt and r.input_ids[0, r.prompt_width :].tolist() == hi + [
        eos,
        eos,
    ]
    assert r.batch()["attention_mask"].shape == r.input_ids.shape
