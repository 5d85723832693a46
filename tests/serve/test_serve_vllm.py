"""Everything that talks to a server, against ``--engine vllm`` (one vLLM start for the module, shared).

Marked ``vllm``: the default suite leaves it out; its CI step runs ``-m vllm`` after ``bash scripts/setup.sh --vllm``,
and a missing vLLM environment FAILS there (start_vllm raises VllmMissing), it never skips."""

from __future__ import annotations

import json
import re

import pytest

from .helpers import SMALL

pytestmark = pytest.mark.vllm

PROMPT = "Who are you?"


@pytest.fixture(scope="module")
def vllm_server(small_adapter_run):
    """SmolLM2 + the probe adapter (the same files small_server serves) in vLLM, in float32: the log-probabilities
    are compared with the float32 model's, the answers with our server's in float32 (``our_server``). Auto would be
    bfloat16 on this CPU (the run's policy), where the two engines' kernels round apart."""
    from workbench.serve import start_server

    with start_server(
        SMALL,
        engine="vllm",
        runs=[str(small_adapter_run)],
        dtype="float32",
        max_batch=8,
        max_context=2048,
        threads=1,
        vllm_args=["--enforce-eager"],
        timeout=900,
    ) as srv:
        yield srv


@pytest.fixture(scope="module")
def our_server(small_adapter_run, tmp_path_factory):
    """Our server on the same files in the same dtype as ``vllm_server`` (float32)."""
    from workbench.serve import start_server

    with start_server(
        SMALL,
        runs=[str(small_adapter_run)],
        dtype="float32",
        max_batch=8,
        threads=1,
        adapter_root=str(tmp_path_factory.getbasetemp()),
    ) as srv:
        yield srv


def _eval_answers(capsys, url: str) -> dict:
    from workbench.cli.main import main

    assert (
        main(
            [
                "eval",
                "--server",
                url,
                "--task",
                "identity",
                "--limit",
                "6",
                "--max-tokens",
                "24",
                "--json",
                "--no-write",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    answers = {
        (model, mode, r["index"]): r["answer"]
        for model, by_mode in report["records"].items()
        for mode, records in by_mode.items()
        for r in records
    }
    return answers, report["metrics"]


def test_served_under_our_ids_and_health_answers_as_ours(vllm_server, small_adapter_run):
    assert vllm_server.models() == [SMALL, small_adapter_run.name]
    assert vllm_server.health() == {"status": "ok", "model": SMALL}


def test_eval_server_gives_our_servers_greedy_answers(vllm_server, our_server, capsys):
    """`workbench eval --server` against both engines: the same greedy answers from the base and the adapter."""
    ours, our_metrics = _eval_answers(capsys, our_server.url)
    theirs, their_metrics = _eval_answers(capsys, vllm_server.url)
    assert ours.keys() == theirs.keys() and len(ours) == 12
    same = [k for k in ours if ours[k] == theirs[k]]
    assert len(same) >= 10, {k: (ours[k], theirs[k]) for k in ours if k not in same}
    # the metrics are the answers' (rates over 6 rows): each answer that differs moves a rate by at most 1/6, so the
    # two engines' rates differ by no more than their differing answers allow (equal where every answer is)
    assert our_metrics.keys() == their_metrics.keys()
    for model, by_mode in our_metrics.items():
        for mode, metrics in by_mode.items():
            differing = sum(1 for k in ours if k[:2] == (model, mode) and ours[k] != theirs[k])
            theirs_here = their_metrics[model][mode]
            assert metrics["n"] == theirs_here["n"] == 6
            for name, value in metrics.items():
                if name.endswith("_rate"):
                    assert abs(value - theirs_here[name]) <= differing / 6 + 1e-9, (model, mode, name, differing)


def test_step_metrics_on_recorded_demonstrations_are_our_servers(vllm_server, our_server, capsys):
    """`workbench eval --task phone_steps` on the recorded demonstrations as text (own_app/heldout_tree.jsonl: no
    image, what a text model reads): vLLM's greedy answers are ours, base and adapter, and the report names the
    evaluator's rules either way."""
    from workbench.cli.main import main

    from ..conftest import SAMPLES

    def steps(url: str) -> dict:
        assert (
            main(
                [
                    "eval",
                    "--server",
                    url,
                    "--task",
                    "phone_steps",
                    "--data",
                    str(SAMPLES / "own_app" / "heldout_tree.jsonl"),
                    "--limit",
                    "4",
                    "--max-tokens",
                    "24",
                    "--json",
                    "--no-write",
                ]
            )
            == 0
        )
        return json.loads(capsys.readouterr().out)

    def replies(report: dict) -> dict:
        # ours splits the first <think>...</think> into reasoning_content, vLLM keeps the text whole: compared are the
        # model's words, the tags aside (a base model imitating the runtime's history writes them doubled)
        return {
            (m, r["index"]): " ".join(
                re.sub(r"</?(?:think|answer)>", " ", (r["reasoning"] or "") + " " + (r["answer"] or "")).split()
            )
            for m, by_mode in report["records"].items()
            for r in by_mode["default"]
        }

    ours, theirs = steps(our_server.url), steps(vllm_server.url)
    assert ours["settings"]["rules"] == theirs["settings"]["rules"] and "AgentCPM-GUI" in theirs["settings"]["rules"]
    mine, vllms = replies(ours), replies(theirs)
    same = [k for k in mine if mine[k] == vllms[k]]
    assert len(mine) == 8 and mine.keys() == vllms.keys() and len(same) >= 6, {k: (mine[k], vllms[k]) for k in mine}
    assert {m: v["default"]["n"] for m, v in theirs["metrics"].items()} == {m: 4 for m in ours["metrics"]}


def test_chat_panels_compare_streams_every_model_side_by_side(vllm_server, small_adapter_run):
    from workbench.serve.client import compare

    replies = compare(PROMPT, base_url=vllm_server.base_url, show=False, max_tokens=16, temperature=0)
    assert list(replies) == [SMALL, small_adapter_run.name]
    texts = [r.content for r in replies.values()]
    assert all(texts) and texts[0] != texts[1]  # the adapter changes the answer
    # each column is its model's own greedy answer, whole and in order: what the server answers it unstreamed
    client = vllm_server.client
    for model, text in zip(replies, texts):
        answer = client.chat(
            {"model": model, "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 16, "temperature": 0}
        )
        assert answer.error is None and text == answer.content, (model, text, answer)


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


def test_completions_give_token_ids_and_logprobs_up_to_the_stop_token(vllm_server):
    """What GRPO's vLLM rollouts read (workbench/engine/vllm_rollouts.py): sampled token ids with a log-probability
    each, a completion that stopped ending on its stop token."""
    import urllib.request

    import torch
    from transformers import AutoTokenizer

    from workbench.models import load_for_inference, packaged

    tok = AutoTokenizer.from_pretrained(packaged.checkpoint_dir())
    ids = tok.apply_chat_template([{"role": "user", "content": "Say hi"}], add_generation_prompt=True, tokenize=True)
    ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
    body = {
        "model": SMALL,
        "prompt": [ids],
        "n": 4,
        "max_tokens": 48,
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": -1,
        "logprobs": 0,
        "return_tokens_as_token_ids": True,
        "stop_token_ids": [tok.eos_token_id],
        "seed": 0,
        "skip_special_tokens": False,
    }
    req = urllib.request.Request(
        vllm_server.base_url + "/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    choices = json.loads(urllib.request.urlopen(req, timeout=300).read())["choices"]
    assert sorted(c["index"] for c in choices) == [0, 1, 2, 3]
    model = load_for_inference(SMALL).model  # float32, as vLLM serves it
    for c in choices:
        tokens, logps = c["logprobs"]["tokens"], c["logprobs"]["token_logprobs"]
        assert len(tokens) == len(logps) > 0 and all(t.startswith("token_id:") for t in tokens)
        sampled = [int(t.rsplit(":", 1)[1]) for t in tokens]
        # a completion ends on the stop token exactly when it stopped, else at max_tokens; no stop token before
        assert (sampled[-1] == tok.eos_token_id) == (c["finish_reason"] == "stop"), c["finish_reason"]
        assert c["finish_reason"] == "stop" or (c["finish_reason"] == "length" and len(sampled) == 48)
        assert tok.eos_token_id not in sampled[:-1]
        # each log-probability is the model's own for the sampled token (temperature 1: no scaling), computed here
        with torch.no_grad():
            logits = model(torch.tensor([ids + sampled])).logits[0, len(ids) - 1 : -1].float()
        reference = torch.log_softmax(logits, -1).gather(1, torch.tensor(sampled)[:, None])[:, 0]
        assert torch.allclose(torch.tensor(logps), reference, atol=2e-3), (torch.tensor(logps) - reference).abs().max()
    assert any(c["finish_reason"] == "stop" for c in choices)
