"""Penalties, logprobs and n > 1 on the tiny-GLM-4 server, checked against the model run in this process."""

from __future__ import annotations

import json

import httpx
import pytest
import torch

from workbench.serve.batcher import GenerationRequest, SamplingParams, apply_penalties

MODEL = "tiny-glm4"
PROMPT = "Once upon a time"


@pytest.fixture(scope="module")
def reference():
    """The same tiny model and tokenizer the server loads (seeded), for log-likelihoods computed here."""
    from workbench.models import load_for_inference

    loaded = load_for_inference(MODEL)
    loaded.model.eval()
    return loaded


def _complete(srv, **body) -> dict:
    r = httpx.post(srv.url + "/v1/completions", json={"model": MODEL, "prompt": PROMPT, "temperature": 0, **body})
    assert r.status_code == 200, r.text
    return r.json()


def _ids(tokens: list[str]) -> list[int]:
    assert all(t.startswith("token_id:") for t in tokens)
    return [int(t.split(":")[1]) for t in tokens]


def test_penalty_arithmetic_is_openais_then_the_repetition_penalty():
    req = GenerationRequest([1, 2], SamplingParams(8, frequency_penalty=0.5, presence_penalty=1.0), lambda e: None)
    req.generated = [5, 5, 7]
    logits = torch.arange(10, dtype=torch.float32) - 4  # -4..5
    before = logits.clone()
    apply_penalties(logits, req)
    expected = before.clone()
    expected[5] -= 2 * 0.5 + 1.0
    expected[7] -= 1 * 0.5 + 1.0
    assert torch.equal(logits, expected)
    req.params = SamplingParams(8, repetition_penalty=2.0)
    logits = before.clone()
    apply_penalties(logits, req)
    seen = [1, 2, 5, 7]  # prompt and output: positive logits halved, negative ones doubled
    assert logits[seen].tolist() == [before[i].item() / 2 if before[i] > 0 else before[i].item() * 2 for i in seen]
    assert torch.equal(logits[[0, 3, 4, 6, 8, 9]], before[[0, 3, 4, 6, 8, 9]])


@pytest.mark.parametrize(
    "penalties",
    [
        {"frequency_penalty": 1.5},
        {"presence_penalty": 2.0},
        {"frequency_penalty": -1.0, "presence_penalty": 0.5},
        {"repetition_penalty": 1.8},
    ],
)
def test_served_greedy_output_with_penalties_is_the_reference_decoding(tiny_server, reference, penalties):
    """The server's greedy tokens equal a plain loop here that applies the penalties as specified."""
    out = _complete(tiny_server, max_tokens=12, logprobs=0, return_tokens_as_token_ids=True, **penalties)
    served = _ids(out["choices"][0]["logprobs"]["tokens"])
    prompt = reference.tokenizer(PROMPT, add_special_tokens=True)["input_ids"]
    fp, pp = penalties.get("frequency_penalty", 0.0), penalties.get("presence_penalty", 0.0)
    rp = penalties.get("repetition_penalty", 1.0)
    generated: list[int] = []
    with torch.no_grad():
        for _ in range(12):
            logits = reference.model(torch.tensor([prompt + generated])).logits[0, -1].float()
            for tok in set(generated):
                logits[tok] -= generated.count(tok) * fp + pp
            for tok in set(prompt + generated):
                logits[tok] = logits[tok] / rp if logits[tok] > 0 else logits[tok] * rp
            generated.append(int(logits.argmax()))
    assert served == generated
    plain = _ids(
        _complete(tiny_server, max_tokens=12, logprobs=0, return_tokens_as_token_ids=True)["choices"][0]["logprobs"][
            "tokens"
        ]
    )
    assert served != plain  # the tiny model repeats itself: a penalty changes what it says


def test_logprobs_sum_to_the_models_log_likelihood(tiny_server, reference):
    """Tolerance 1e-3 nats over 10 tokens: the server decodes with a KV cache, the reference in one fp32 pass."""
    out = _complete(tiny_server, max_tokens=10, logprobs=3, return_tokens_as_token_ids=True)
    lp = out["choices"][0]["logprobs"]
    ids = _ids(lp["tokens"])
    prompt = reference.tokenizer(PROMPT, add_special_tokens=True)["input_ids"]
    with torch.no_grad():
        logits = reference.model(torch.tensor([prompt + ids])).logits[0].float()
    logprobs = torch.log_softmax(logits[len(prompt) - 1 : -1], -1)
    expected = logprobs[torch.arange(len(ids)), torch.tensor(ids)]
    assert sum(lp["token_logprobs"]) == pytest.approx(float(expected.sum()), abs=1e-3)
    assert lp["token_logprobs"] == pytest.approx(expected.tolist(), abs=1e-4)
    for chosen, top in zip(lp["token_logprobs"], lp["top_logprobs"]):  # greedy: the chosen token is the best
        assert len(top) == 3 and max(top.values()) == pytest.approx(chosen)


def test_chat_logprobs_streamed_and_not(tiny_server):
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 6,
        "temperature": 0,
        "logprobs": True,
        "top_logprobs": 2,
    }
    whole = httpx.post(tiny_server.url + "/v1/chat/completions", json=body).json()
    content = whole["choices"][0]["logprobs"]["content"]
    assert len(content) == whole["usage"]["completion_tokens"] == 6
    assert all(len(c["top_logprobs"]) == 2 and c["logprob"] <= 0 and isinstance(c["bytes"], list) for c in content)
    with httpx.stream("POST", tiny_server.url + "/v1/chat/completions", json={**body, "stream": True}) as r:
        chunks = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]
    streamed = [
        c for ch in chunks for choice in ch["choices"] for c in (choice.get("logprobs") or {}).get("content", [])
    ]
    assert streamed == content
    plain = httpx.post(tiny_server.url + "/v1/chat/completions", json={**body, "logprobs": False, "top_logprobs": None})
    assert plain.json()["choices"][0]["logprobs"] is None


def test_n_choices_are_the_seeded_single_requests(tiny_server):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "temperature": 1.0}
    many = httpx.post(tiny_server.url + "/v1/chat/completions", json={**body, "n": 3, "seed": 11}).json()
    assert [c["index"] for c in many["choices"]] == [0, 1, 2]
    singles = [
        httpx.post(tiny_server.url + "/v1/chat/completions", json={**body, "seed": 11 + i}).json() for i in range(3)
    ]
    assert [c["message"] for c in many["choices"]] == [s["choices"][0]["message"] for s in singles]
    assert many["usage"]["completion_tokens"] == sum(s["usage"]["completion_tokens"] for s in singles)
    assert many["usage"]["prompt_tokens"] == singles[0]["usage"]["prompt_tokens"]
    with httpx.stream(
        "POST",
        tiny_server.url + "/v1/chat/completions",
        json={**body, "n": 3, "seed": 11, "stream": True, "stream_options": {"include_usage": True}},
    ) as r:
        chunks = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]
    texts = ["", "", ""]
    for ch in chunks:
        for choice in ch["choices"]:
            texts[choice["index"]] += choice["delta"].get("content") or ""
    assert texts == [c["message"]["content"] for c in many["choices"]]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == many["usage"]
    assert sum(1 for ch in chunks if ch.get("usage")) == 1
    text = httpx.post(
        tiny_server.url + "/v1/completions",
        json={"model": MODEL, "prompt": PROMPT, "n": 2, "max_tokens": 3, "temperature": 0},
    ).json()
    assert [c["index"] for c in text["choices"]] == [0, 1] and text["choices"][0]["text"] == text["choices"][1]["text"]
