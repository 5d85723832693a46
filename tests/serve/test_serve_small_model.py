"""Against a running server on the real small model (SmolLM2-135M-Instruct) with a random LoRA adapter."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest

from .helpers import SMALL, make_adapter

PROMPTS = [
    "What is the capital of France?",
    "Name three colors.",
    "What is 2+2?",
    "Who wrote Hamlet?",
    "Say hello in French.",
    "What color is the sky?",
    "Count to three.",
    "What is water made of?",
]
PROBE = "What is the capital of France? Answer briefly."


def _stream_text(client, model, prompt, max_tokens=16):
    out = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens, temperature=0, stream=True
    )
    return "".join(c.choices[0].delta.content or "" for c in out if c.choices)


def test_models_lists_base_and_adapter_with_parent(small_server):
    data = {m["id"]: m for m in httpx.get(small_server.url + "/v1/models").json()["data"]}
    assert set(data) == {SMALL, "probe-run"}
    assert data["probe-run"]["parent"] == SMALL and data[SMALL]["parent"] is None


def test_probe_answer(small_server):
    r = small_server.openai_client().chat.completions.create(
        model=SMALL, messages=[{"role": "user", "content": PROBE}], max_tokens=12, temperature=0
    )
    assert "Paris" in r.choices[0].message.content and r.choices[0].finish_reason == "stop"


def test_eight_concurrent_streams_equal_their_sequential_outputs(small_server):
    client = small_server.openai_client(max_retries=0)
    sequential = [_stream_text(client, SMALL, p) for p in PROMPTS]
    with ThreadPoolExecutor(8) as pool:
        concurrent = list(pool.map(lambda p: _stream_text(client, SMALL, p), PROMPTS))
    assert concurrent == sequential
    # and they were decoded together: a server taking one request at a time would pass the line above
    assert httpx.get(small_server.url + "/health").json()["peak_batch"] >= 2
    assert len(set(sequential)) == len(PROMPTS)  # distinct answers: a mix-up between streams would show


def test_base_and_adapter_differ_without_cross_talk(small_server):
    client = small_server.openai_client(max_retries=0)
    base = _stream_text(client, SMALL, PROBE)
    tuned = _stream_text(client, "probe-run", PROBE)
    assert base != tuned
    jobs = [(SMALL, PROBE), ("probe-run", PROBE)] * 4
    with ThreadPoolExecutor(8) as pool:
        outs = list(pool.map(lambda j: _stream_text(client, *j), jobs))
    assert outs == [base, tuned] * 4


def test_langchain_chatopenai_streamed_and_not(small_server):
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(
        model=SMALL,
        base_url=small_server.base_url,
        api_key="EMPTY",
        temperature=0,
        max_tokens=12,
        max_retries=0,
        stream_usage=True,
    )
    whole = llm.invoke(PROBE)
    assert "Paris" in whole.content
    merged = None
    for chunk in llm.stream(PROBE):
        merged = chunk if merged is None else merged + chunk
    assert merged.content == whole.content
    assert merged.usage_metadata["output_tokens"] == whole.usage_metadata["output_tokens"]


def test_client_disconnect_frees_its_slot(small_server):
    body = {
        "model": SMALL,
        "messages": [{"role": "user", "content": "Write a very long story about a dragon."}],
        "max_tokens": 2000,
        "temperature": 0.8,
        "seed": 1,
        "stream": True,
    }
    before = small_server.served.decoder.counters["cancelled"]
    with httpx.stream("POST", small_server.url + "/v1/chat/completions", json=body, timeout=60) as r:
        lines = r.iter_lines()
        for _ in range(4):
            next(lines)
        assert httpx.get(small_server.url + "/health").json()["running"] == 1
    # the connection is closed: the server must notice and drop the request long before 2000 tokens
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        health = httpx.get(small_server.url + "/health").json()
        if health["running"] == 0 and small_server.served.decoder.counters["cancelled"] > before:
            break
        time.sleep(0.1)
    assert health["running"] == 0 and health["waiting"] == 0
    assert small_server.served.decoder.counters["cancelled"] == before + 1


def test_non_streamed_client_giving_up_frees_its_slot(small_server):
    body = {
        "model": SMALL,
        "messages": [{"role": "user", "content": "Write a very long story."}],
        "max_tokens": 2000,
        "temperature": 0.8,
        "seed": 2,
    }
    before = small_server.served.decoder.counters["cancelled"]
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(small_server.url + "/v1/chat/completions", json=body, timeout=1.5)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and small_server.served.decoder.counters["cancelled"] == before:
        time.sleep(0.1)
    assert small_server.served.decoder.counters["cancelled"] == before + 1
    assert httpx.get(small_server.url + "/health").json()["running"] == 0


def test_adapters_added_and_removed_at_runtime(small_server, tmp_path):
    run = make_adapter(SMALL, tmp_path / "second", seed=2)
    client = small_server.openai_client(max_retries=0)
    card = small_server.add_adapter("second", run)
    assert card["parent"] == SMALL and "second" in small_server.models()
    assert _stream_text(client, "second", PROBE, 8) != _stream_text(client, SMALL, PROBE, 8)
    small_server.remove_adapter("second")
    assert "second" not in small_server.models()
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="second", messages=[{"role": "user", "content": "hi"}])
    assert "probe-run" in small_server.models()


def test_adapter_for_another_base_is_refused(small_server, tmp_path):
    wrong = make_adapter("tiny-glm4", tmp_path / "glm-run", seed=0)
    r = httpx.post(small_server.url + "/v1/load_lora_adapter", json={"lora_name": "glm", "lora_path": str(wrong)})
    assert r.status_code == 400 and "trained on 'tiny-glm4'" in r.json()["error"]["message"]
    # same check without a run config, from the adapter's own files (shapes do not fit)
    r = httpx.post(
        small_server.url + "/v1/load_lora_adapter", json={"lora_name": "glm2", "lora_path": str(wrong / "adapter")}
    )
    assert r.status_code == 400
    assert "glm" not in small_server.models() and "glm2" not in small_server.models()
    missing = httpx.post(
        small_server.url + "/v1/load_lora_adapter", json={"lora_name": "x", "lora_path": str(tmp_path / "nope")}
    )
    assert missing.status_code == 400 and "does not exist" in missing.json()["error"]["message"]
    outside = httpx.post(small_server.url + "/v1/load_lora_adapter", json={"lora_name": "x", "lora_path": "/nope"})
    assert outside.status_code == 400 and "outside the adapter root" in outside.json()["error"]["message"]


def test_cli_refuses_run_of_another_base(tmp_path):
    import subprocess
    import sys

    wrong = make_adapter("tiny-glm4", tmp_path / "glm-run", seed=0)
    res = subprocess.run(
        [sys.executable, "-m", "workbench", "serve", "--model", SMALL, "--run", str(wrong), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and "trained on 'tiny-glm4'" in res.stderr and "--model tiny-glm4" in res.stderr
    assert "Traceback" not in res.stderr
