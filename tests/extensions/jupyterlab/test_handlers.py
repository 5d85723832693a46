"""The server extension's routes (/workbench/api/) on a real jupyter_server: auth, bad input, traversal,
events from an offset, the SSE streams, notebooks, and a tiny-GLM-4 run launched and stopped through them."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import nbformat
import pytest
from tornado.httpclient import HTTPClientError

from tests.conftest import tiny_run_overrides
from workbench.config import RunConfig, save_config
from workbench.events import Checkpoint, EventWriter, Overflow, RunFinished, RunStarted, Step


@pytest.fixture
def jp_server_config():
    return {"ServerApp": {"jpserver_extensions": {"workbench_jupyterlab": True}}}


def _fake_run(runs: Path, name: str, steps: int = 3, finished: bool = True) -> Path:
    """A run directory as the engine leaves it: config.json and an event log (no worker process)."""
    run = runs / name
    run.mkdir(parents=True)
    save_config(RunConfig(), run / "config.json")
    with EventWriter(run / "events.jsonl") as w:
        w.emit(
            RunStarted(
                run_dir=str(run),
                config={"model": {"source": "tiny-glm4"}},
                hardware={},
                versions={},
                precision={"mode": "fp16"},
                total_steps=10,
            )
        )
        for s in range(1, steps + 1):
            w.emit(
                Step(
                    step=s,
                    loss=4.0 - s,
                    lr=1e-3,
                    grad_norm=1.0,
                    loss_scale=2.0 ** (16 - s),
                    skipped=s == 2,
                    tokens=64,
                    tokens_per_s=100.0,
                    step_time_s=0.1,
                    eta_s=1.0,
                )
            )
        w.emit(
            Overflow(
                step=2,
                scale_before=2.0**14,
                scale_after=2.0**13,
                nonfinite_params=["lm_head.weight"],
                nonfinite_count=1,
            )
        )
        if finished:
            w.emit(Checkpoint(step=steps, path=str(run / "checkpoints" / f"step-{steps}"), kind="resumable"))
            w.emit(RunFinished(step=steps, final_loss=4.0 - steps, adapter_path=None, wall_s=1.0))
    return run


async def _json(jp_fetch, *path, **kw):
    resp = await jp_fetch("workbench", "api", *path, **kw)
    return resp.code, json.loads(resp.body)


async def _error(jp_fetch, *path, **kw) -> tuple[int, dict]:
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch("workbench", "api", *path, **kw)
    return err.value.code, json.loads(err.value.response.body or b"{}")


async def test_runs_are_listed_with_status_and_last_metrics(jp_fetch, jp_root_dir):
    _fake_run(jp_root_dir / "runs", "a-run")
    code, body = await _json(jp_fetch, "runs")
    assert code == 200 and body["runs_dir"] == str(jp_root_dir / "runs")
    (row,) = body["runs"]
    assert row["name"] == "a-run" and row["status"] == "finished"
    assert (row["step"], row["total_steps"], row["loss"], row["loss_scale"]) == (3, 10, 1.0, 2.0**13)
    assert (row["overflows"], row["skipped_steps"], row["checkpoints"]) == (1, 1, 1)
    assert row["loss_series"] == [[1, 3.0], [2, 2.0], [3, 1.0]]
    code, detail = await _json(jp_fetch, "runs", "a-run")
    assert detail["config"]["model"]["source"] == RunConfig().model.source


async def test_without_the_token_every_route_is_refused(jp_fetch, jp_root_dir):
    _fake_run(jp_root_dir / "runs", "a-run")
    for path, method, body in (
        (("runs",), "GET", None),
        (("runs", "a-run", "events"), "GET", None),
        (("runs", "stream"), "GET", None),
        (("runs", "a-run", "stop"), "POST", "{}"),
        (("runs",), "POST", "{}"),
        (("notebooks",), "POST", '{"kind": "dashboard"}'),
    ):
        code, _ = await _error(jp_fetch, *path, method=method, body=body, headers={"Authorization": ""})
        assert code == 403, (path, method, code)
    assert not list(jp_root_dir.glob("*.ipynb"))


async def test_a_missing_run_is_404_and_paths_outside_the_runs_directory_are_refused(
    jp_fetch, jp_root_dir, http_server_client, jp_auth_header, jp_base_url
):
    _fake_run(jp_root_dir / "runs", "a-run")
    (jp_root_dir / "secret").mkdir()
    save_config(RunConfig(), jp_root_dir / "secret" / "config.json")
    (jp_root_dir / "runs" / "link").symlink_to(jp_root_dir / "secret")
    code, body = await _error(jp_fetch, "runs", "nope")
    assert code == 404 and "no run 'nope'" in body["message"]

    async def raw(path: str, method: str = "GET") -> tuple[int, dict]:
        # the path exactly as written (jp_fetch would escape it): an encoded '/' or '..' reaches the route
        resp = await http_server_client.fetch(
            jp_base_url + "workbench/api/runs/" + path,
            method=method,
            headers=jp_auth_header,
            raise_error=False,
            body="{}" if method == "POST" else None,
        )
        return resp.code, json.loads(resp.body or b"{}")

    for name in ("..%2Fsecret", "%2E%2E", "link", "..%5Csecret"):
        for suffix in ("", "/events", "/events/stream"):
            code, body = await raw(name + suffix)
            assert code == 400 and "run" in body["message"], (name + suffix, code, body)
        code, body = await raw(name + "/stop", "POST")
        assert code == 400, (name, code, body)


async def test_events_from_an_offset_and_by_type(jp_fetch, jp_root_dir):
    run = _fake_run(jp_root_dir / "runs", "a-run")
    code, first = await _json(jp_fetch, "runs", "a-run", "events", params={"offset": 0})
    types = [e["type"] for e in first["events"]]
    assert types == ["run_started", "step", "step", "step", "overflow", "checkpoint", "run_finished"]
    assert first["offset"] == (run / "events.jsonl").stat().st_size
    # from the offset of the third line on: exactly the events after it
    lines = (run / "events.jsonl").read_bytes().splitlines(keepends=True)
    offset = sum(len(x) for x in lines[:2])
    _, rest = await _json(jp_fetch, "runs", "a-run", "events", params={"offset": offset})
    assert [e["type"] for e in rest["events"]] == types[2:] and rest["offset"] == first["offset"]
    _, steps = await _json(jp_fetch, "runs", "a-run", "events", params={"type": "step,overflow"})
    assert [e.get("step") for e in steps["events"]] == [1, 2, 3, 2]
    _, none = await _json(jp_fetch, "runs", "a-run", "events", params={"offset": first["offset"]})
    assert none == {"events": [], "offset": first["offset"]}
    for bad in ("-1", "x"):
        code, body = await _error(jp_fetch, "runs", "a-run", "events", params={"offset": bad})
        assert code == 400 and "offset" in body["message"]


async def test_bad_launch_requests_are_4xx_naming_the_field(jp_fetch, jp_root_dir):
    code, body = await _error(jp_fetch, "runs", method="POST", body="not json")
    assert code == 400 and "not JSON" in body["message"]
    code, body = await _error(
        jp_fetch, "runs", method="POST", body=json.dumps({"overrides": {"precision.mode": "fp8", "lora.r": 0}})
    )
    assert code == 400 and {p["field"] for p in body["problems"]} == {"precision.mode", "lora.r"}
    _fake_run(jp_root_dir / "runs", "done")
    code, body = await _error(jp_fetch, "runs", "done", "stop", method="POST", body="{}")
    assert code == 409 and "not running (finished)" in body["message"]
    code, body = await _error(jp_fetch, "notebooks", method="POST", body=json.dumps({"kind": "monitor", "runs": []}))
    assert code == 400 and "1 run name" in body["message"]
    code, body = await _error(
        jp_fetch, "notebooks", method="POST", body=json.dumps({"kind": "monitor", "runs": ["nope"]})
    )
    assert code == 404


async def test_notebooks_are_created_next_to_the_runs_and_never_overwrite(jp_fetch, jp_root_dir):
    _fake_run(jp_root_dir / "runs", "a")
    _fake_run(jp_root_dir / "runs", "b")
    paths = []
    (jp_root_dir / "workbench-dashboard.ipynb").write_text("a notebook of the user's")
    for kind, runs in (
        ("finetune", []),
        ("finetune", []),
        ("monitor", ["a"]),
        ("compare", ["a", "b"]),
        ("monitor", ["a"]),
        ("dashboard", []),
    ):
        code, body = await _json(jp_fetch, "notebooks", method="POST", body=json.dumps({"kind": kind, "runs": runs}))
        assert code == 201
        paths.append(body["path"])
    # a fine-tune notebook is new each time; a monitor, a comparison or the dashboard opens the one already there
    assert paths == [
        "fine-tune.ipynb",
        "fine-tune-1.ipynb",
        "monitor-a.ipynb",
        "compare-a-vs-b.ipynb",
        "monitor-a.ipynb",
        "workbench-dashboard.ipynb",
    ]
    assert (jp_root_dir / "workbench-dashboard.ipynb").read_text() == "a notebook of the user's"
    (jp_root_dir / "workbench-dashboard.ipynb").unlink()
    paths.remove("workbench-dashboard.ipynb")
    code, body = await _json(jp_fetch, "notebooks", method="POST", body=json.dumps({"kind": "dashboard"}))
    paths.append(body["path"])
    sources = {p: "\n".join(c.source for c in nbformat.read(jp_root_dir / p, as_version=4).cells) for p in paths}
    assert 'RUNS_DIR = "runs"' in sources["fine-tune.ipynb"]
    assert 'monitor.attach("runs/a")' in sources["monitor-a.ipynb"]
    assert 'runs.compare(["a", "b"])' in sources["compare-a-vs-b.ipynb"]
    assert 'Workbench(runs_dir="runs")' in sources["workbench-dashboard.ipynb"]
    for p in set(paths):
        nbformat.validate(nbformat.read(jp_root_dir / p, as_version=4))


async def test_no_chat_server_is_a_503_saying_how_to_start_one(jp_fetch, jp_serverapp):
    jp_serverapp.web_app.settings["workbench"]["chat_url"] = "http://127.0.0.1:9/v1"  # the discard port: refused
    code, body = await _error(jp_fetch, "models")
    assert code == 503 and "workbench serve" in body["message"]


async def _read_stream(jp_fetch, path: list, until, timeout: float = 240) -> list[tuple[str, dict]]:
    """Server-sent events of ``path`` until ``until(events)`` says enough (the stream is then dropped)."""
    got: list = []
    buffer = [b""]
    done = asyncio.Event()

    def on_chunk(chunk: bytes) -> None:
        buffer[0] += chunk
        while b"\n\n" in buffer[0]:
            block, buffer[0] = buffer[0].split(b"\n\n", 1)
            fields = dict(line.split(": ", 1) for line in block.decode().splitlines() if not line.startswith(":"))
            if "event" in fields:
                got.append((fields["event"], json.loads(fields["data"])))
        if until(got):
            done.set()
            raise _Enough

    fetch = asyncio.ensure_future(jp_fetch(*path, streaming_callback=on_chunk, request_timeout=timeout))
    waiter = asyncio.ensure_future(done.wait())
    await asyncio.wait([fetch, waiter], timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    fetch.cancel()
    waiter.cancel()
    assert until(got), f"the stream ended with {got}"
    return got


class _Enough(Exception):
    pass


async def test_a_tiny_run_launched_streamed_and_stopped_through_the_routes(jp_fetch, jp_root_dir):
    runs = jp_root_dir / "runs"
    overrides = {
        k: v for k, v in tiny_run_overrides(runs, **{"schedule.max_steps": 100000}).items() if k != "output.runs_dir"
    }  # the server puts the run in its own runs directory
    code, body = await _json(jp_fetch, "runs", method="POST", body=json.dumps({"overrides": overrides}))
    assert code == 201
    name = body["name"]
    assert (runs / name / "config.json").is_file()
    try:
        # the runs stream pushes the row as steps are logged
        got = await _read_stream(
            jp_fetch,
            ["workbench", "api", "runs", "stream"],
            lambda ev: any(r["name"] == name and r["step"] >= 2 for _, d in ev for r in d["runs"]),
        )
        assert all(kind == "runs" for kind, _ in got)
        assert [r for r in got[-1][1]["runs"] if r["name"] == name][0]["status"] == "running"
        code, body = await _json(jp_fetch, "runs", name, "stop", method="POST", body="{}")
        assert (code, body["status"]) == (202, "stopping")
        # the events stream of the run ends with its status once the worker has stopped
        events = await _read_stream(
            jp_fetch, ["workbench", "api", "runs", name, "events", "stream"], lambda ev: bool(ev) and ev[-1][0] == "end"
        )
    finally:
        from workbench.runs import attach

        if attach(runs / name).is_running():  # never leave a 100000-step worker behind a failed assertion
            attach(runs / name).stop(timeout=60)
    assert events[-1][1]["status"] == "stopped"
    logged = [e for kind, d in events if kind == "events" for e in d["events"]]
    end = logged[-1]
    assert end["type"] == "run_finished" and end["stopped"]
    saved = [e for e in logged if e["type"] == "checkpoint" and e["kind"] == "resumable"]
    assert saved and saved[-1]["step"] == end["step"] and Path(saved[-1]["path"]).is_dir()
    _, rows = await _json(jp_fetch, "runs")
    assert [(r["name"], r["status"]) for r in rows["runs"]] == [(name, "stopped")]
