"""Everything that talks to a server, against ``--engine vllm`` (one vLLM start for the module, shared).

Marked ``vllm``: the default suite leaves it out; its CI step runs ``-m vllm`` after ``bash scripts/setup.sh --vllm``,
and a missing vLLM environment FAILS there (start_vllm raises VllmMissing), it never skips."""
from __future__ import annotations

import json

import pytest

from .helpers import SMALL

pytestmark = pytest.mark.vllm

PROMPT = "Who are you?"


@pytest.fixture(scope="module")
def vllm_server(small_adapter_run):
    """SmolLM2 + the probe adapter (the same files small_server serves) in vLLM, float32 like ours."""
    from workbench.serve import start_server

    with start_server(SMALL, engine="vllm", runs=[str(small_adapter_run)], max_batch=8, max_context=2048,
                      threads=1, vllm_args=["--enforce-eager"], timeout=900) as srv:
        yield srv


def _eval_answers(capsys, url: str) -> dict:
    from workbench.cli.main import main

    assert main(["eval", "--server", url, "--task", "identity", "--limit", "6", "--max-tokens", "24", "--json",
                 "--no-write"]) == 0
    report = json.loads(capsys.readouterr().out)
    answers = {(model, mode, r["index"]): r["answer"] for model, by_mode in report["records"].items()
               for mode, records in by_mode.items() for r in records}
    return answers, report["metrics"]


def test_served_under_our_ids_and_health_answers_as_ours(vllm_server, small_adapter_run):
    assert vllm_server.models() == [SMALL, small_adapter_run.name]
    assert vllm_server.health() == {"status": "ok", "model": SMALL}


def test_eval_server_gives_our_servers_greedy_answers(vllm_server, small_server, capsys):
    """`workbench eval --server` against both engines: the same greedy answers from the base and the adapter."""
    ours, our_metrics = _eval_answers(capsys, small_server.url)
    theirs, their_metrics = _eval_answers(capsys, vllm_server.url)
    assert ours.keys() == theirs.keys() and len(ours) == 12
    same = [k for k in ours if ours[k] == theirs[k]]
    assert len(same) >= 10, {k: (ours[k], theirs[k]) for k in ours if k not in same}
    assert our_metrics.keys() == their_metrics.keys()


def test_chat_panels_compare_streams_every_model_side_by_side(vllm_server, small_adapter_run):
    from workbench.serve.client import compare

    replies = compare(PROMPT, base_url=vllm_server.base_url, show=False, max_tokens=16, temperature=0)
    assert list(replies) == [SMALL, small_adapter_run.name]
    texts = [r.content for r in replies.values()]
    assert all(texts) and texts[0] != texts[1]  # the adapter changes the answer


def test_chat_openai_invokes_and_streams(vllm_server):
    from workbench.serve.client import chat_model

    llm = chat_model(SMALL, base_url=vllm_server.base_url, max_tokens=12, temperature=0)
    whole = llm.invoke(PROMPT).content
    streamed = "".join(chunk.content for chunk in llm.stream(PROMPT))
    assert whole and streamed == whole


def test_runtime_adapter_loading_under_a_new_name(vllm_server, small_adapter_run):
    """What GRPO does each step: load the adapter under a new id, use it, unload it."""
    vllm_server.add_adapter("step-1", small_adapter_run / "adapter")
    assert "step-1" in vllm_server.models()
    vllm_server.remove_adapter("step-1")
    assert "step-1" not in vllm_server.models()
