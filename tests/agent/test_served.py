"""Episodes against servers: the exact requests the runner sends (a stand-in server answering the oracle's replies),
and ``evaluate_agent`` against ``workbench serve --model tiny-glm4v`` with an adapter run, whose metrics land in the
run's eval_results.json for the runs panel."""

from __future__ import annotations

import json

import httpx
import pytest

from workbench.agent import AgentError, OraclePolicy, ServedPolicy, evaluate_agent, run_episodes, sim_devices
from workbench.agent.evaluate import TASK_NAME
from workbench.agent.store import read_episodes
from workbench.phone.tasks import select_tasks
from workbench.runs.results import metric_rows, read_results
from workbench.serve.remote import ServerClient

from ..serve.helpers import make_adapter


def standin_client(answer) -> tuple[ServerClient, list[dict]]:
    """A ServerClient whose server is ``answer(body) -> httpx.Response``; the request bodies are kept."""
    bodies = []

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json={"data": [{"id": "m", "parent": None}]})
        body = json.loads(request.content)
        bodies.append(body)
        return answer(body)

    return ServerClient("http://standin", transport=httpx.MockTransport(handle)), bodies


def test_requests_are_the_runtime_conversation_and_usage_is_recorded():
    task = select_tasks("toggle_setting/wifi-off")
    oracle = OraclePolicy(task)

    def answer(body):
        [reply] = oracle([body["messages"]])
        return httpx.Response(
            200,
            json={
                "choices": [{"message": {"content": reply.content}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 100 * len(body["messages"])},
            },
        )

    client, bodies = standin_client(answer)
    policy = ServedPolicy(client, "m", max_tokens=64)
    [ep] = run_episodes(task, policy, sim_devices((112, 252)))
    assert ep.success and [s.prompt_tokens for s in ep.steps] == [200, 400, 600] and ep.prompt_tokens_last == 600
    assert [set(b) for b in bodies] == [{"model", "temperature", "max_tokens", "messages"}] * 3
    assert bodies[0]["model"] == "m" and bodies[0]["temperature"] == 0.0 and bodies[0]["max_tokens"] == 64
    last = bodies[-1]["messages"]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert last[1]["content"] == [{"type": "text", "text": 'Turn off Wi-Fi\n\n{"current_app": "System Home"}'}]
    assert last[3]["content"] == [
        {"type": "text", "text": '** Screen Info **\n\n{"current_app": "AndroidSystemSettings"}'}
    ]
    assert last[5]["content"][0]["image_url"]["url"].startswith("data:image/png;base64,")
    assert last[2]["content"].startswith(
        "<think><think>Wi-Fi is a setting. I launch Settings.</think>\n<answer></think><answer>do(action="
    )


def test_a_context_overflow_ends_the_episode_with_the_prompt_size():
    message = (
        "This model's maximum context length is 1024 tokens. However, you requested 1335 tokens (1303 in the "
        "messages, 36 of them image tokens, 32 in the completion)."
    )
    client, _ = standin_client(
        lambda body: httpx.Response(400, json={"error": {"message": message, "code": "context_length_exceeded"}})
    )
    [ep] = run_episodes(select_tasks("open_app/settings"), ServedPolicy(client, "m"), sim_devices((112, 252)))
    assert ep.end_reason == "context_overflow" and ep.prompt_tokens_last == 1303 and not ep.success


@pytest.fixture(scope="module")
def tiny_vision_server(tmp_path_factory):
    from workbench.serve import start_server

    runs = tmp_path_factory.mktemp("runs")
    run = make_adapter("tiny-glm4v", runs / "phone-run", seed=1)
    # the tiny model's own context (1024) is shorter than the system prompt alone in its byte tokens
    with start_server("tiny-glm4v", runs=[str(run)], max_batch=8, max_context=8192, threads=1) as srv:
        yield srv, run


def test_evaluate_agent_against_a_served_vision_model_stores_episodes_and_metrics(tiny_vision_server, tmp_path):
    srv, run = tiny_vision_server
    tasks = select_tasks("open_app")[:2]
    report = evaluate_agent(tasks, server=srv.url, size=(112, 252), max_tokens=8, out=tmp_path / "out", progress=False)
    assert set(report.metrics) == {"tiny-glm4v", "phone-run"}
    for model, by_mode in report.metrics.items():
        m = by_mode["default"]
        assert m["n"] == 2 and m["success_rate"] == 0.0  # a random model does not finish tasks
        assert m["prompt_tokens_last"] > 1000  # the server counted the runtime prompt: system prompt + screenshot
    # the adapter's episodes live in its run directory, the base model's under out
    assert report.episodes["phone-run"].startswith(str(run / "episodes"))
    assert report.episodes["tiny-glm4v"] == str(tmp_path / "out" / "tiny-glm4v")
    assert len(read_episodes(report.episodes["phone-run"])) == 2
    stored = read_results(run)["tasks"][TASK_NAME]
    assert stored["model"] == "phone-run" and stored["metrics"] == report.metrics
    rows = metric_rows([run], TASK_NAME)  # what the runs panel shows, next to the single-step task metrics
    assert {r["label"] for r in rows} == {"phone-run", "tiny-glm4v (base)"} and all("success_rate" in r for r in rows)


def test_unknown_model_and_unreachable_server_are_agent_errors(tiny_vision_server):
    srv, _ = tiny_vision_server
    tasks = select_tasks("open_app/settings")
    with pytest.raises(AgentError, match=r"'nope' not served at .*; served: tiny-glm4v, phone-run"):
        evaluate_agent(tasks, ["nope"], server=srv.url, progress=False)
    with pytest.raises(AgentError, match="cannot reach the server at http://127.0.0.1:9/v1"):
        evaluate_agent(tasks, server="http://127.0.0.1:9", progress=False)
    with pytest.raises(AgentError, match="one phone runs one episode at a time"):
        evaluate_agent(tasks, server=srv.url, device="adb:X", concurrency=2, progress=False)
