"""REST and server-sent-event routes under ``/workbench/api/``; every route needs the server's token or login.

GET  runs                         every run: status, step/total, last loss, loss scale, overflows, loss curve
GET  runs/stream                  the same list, pushed (text/event-stream) whenever a run changes
POST runs                         launch {"config": {sections}, "overrides": {dotted: value}} -> 201 {"name"}
GET  runs/NAME                    one run, with its config.json
GET  runs/NAME/events?offset=N    its events from byte offset N (&type=step,overflow) -> {"events", "offset"}
GET  runs/NAME/events/stream      the same, pushed as they are written, until the run ends
POST runs/NAME/stop               ask it to stop after the current step (it saves a checkpoint) -> 202
GET  models                       the chat server's model ids (503 when none answers)
POST notebooks                    {"kind": "finetune"|"dashboard"|"monitor"|"compare", "runs": [...]} -> {"path"}
                                  (a new fine-tune notebook each time; the others are reused once made)
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import tornado.web
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from tornado.iostream import StreamClosedError

from . import notebooks
from .runs import RunsDirectory, RunsError

RUN = r"(?P<name>[^/]+)"


class BaseHandler(APIHandler):
    @property
    def runs(self) -> RunsDirectory:
        return self.settings["workbench_runs"]

    @property
    def wb_settings(self) -> dict:
        return self.settings["workbench"]

    async def call(self, fn: Callable, *args) -> Any:
        """Run ``fn`` (file reads, process checks) off the event loop; a RunsError becomes its HTTP answer."""
        try:
            return await asyncio.get_running_loop().run_in_executor(None, fn, *args)
        except RunsError as err:
            self.answer_error(err)
            return None

    def answer_error(self, err: RunsError) -> None:
        self.set_status(err.status)
        self.finish(json.dumps({"message": err.message, "problems": err.problems}))

    def body(self) -> dict:
        try:
            data = json.loads(self.request.body or b"{}")
        except ValueError as err:
            raise RunsError(400, f"the request body is not JSON: {err}") from None
        if not isinstance(data, dict):
            raise RunsError(400, "the request body must be a JSON object")
        return data


class SSEHandler(BaseHandler):
    """A text/event-stream response: ``send`` one event; ``loop`` polls until the client goes or the stream ends."""

    def prepare_stream(self) -> None:
        self.set_header("Content-Type", "text/event-stream")
        self.set_header("Cache-Control", "no-cache")
        self.set_header("X-Accel-Buffering", "no")

    async def send(self, event: str, data: Any) -> None:
        self.write(f"event: {event}\ndata: {json.dumps(data)}\n\n")
        await self.flush()

    async def loop(self, tick: Callable[[], Awaitable[bool]]) -> None:
        """Call ``tick`` (True: it sent something) every poll interval until the client disconnects or ``tick`` raises
        _StreamEnded; a comment line after 15 quiet seconds keeps proxies from closing the stream."""
        quiet_since = time.monotonic()
        try:
            while not self.request.connection.stream.closed():
                if await tick():
                    quiet_since = time.monotonic()
                if time.monotonic() - quiet_since > 15:
                    self.write(": keep-alive\n\n")
                    await self.flush()
                    quiet_since = time.monotonic()
                await asyncio.sleep(self.wb_settings["poll_interval"])
        except (StreamClosedError, _StreamEnded):
            pass


class _StreamEnded(Exception):
    pass


class RunsHandler(BaseHandler):
    @tornado.web.authenticated
    async def get(self):
        rows = await self.call(self.runs.rows)
        if rows is not None:
            self.finish(json.dumps({"runs_dir": str(self.runs.root), "runs": rows}))

    @tornado.web.authenticated
    async def post(self):
        try:
            data = self.body()
        except RunsError as err:
            return self.answer_error(err)
        name = await self.call(self.runs.launch, data.get("config"), data.get("overrides", {}))
        if name is not None:
            self.set_status(201)
            self.finish(json.dumps({"name": name}))


class RunsStreamHandler(SSEHandler):
    @tornado.web.authenticated
    async def get(self):
        self.prepare_stream()
        last: dict = {"signature": None, "rows": None, "at": 0.0}

        loop = asyncio.get_running_loop()

        async def tick() -> bool:
            signature = await loop.run_in_executor(None, self.runs.signature)
            # a log that grew, a run that appeared, or every 2 s (a worker that died silently changes no file)
            if signature == last["signature"] and time.monotonic() - last["at"] < 2:
                return False
            rows = await loop.run_in_executor(None, self.runs.rows)
            last.update(signature=signature, at=time.monotonic())
            if rows == last["rows"]:
                return False
            last["rows"] = rows
            await self.send("runs", {"runs_dir": str(self.runs.root), "runs": rows, "time": time.time()})
            return True

        await self.loop(tick)


class RunHandler(BaseHandler):
    @tornado.web.authenticated
    async def get(self, name: str):
        detail = await self.call(self.runs.detail, name)
        if detail is not None:
            self.finish(json.dumps(detail))


def _offset_and_types(handler: BaseHandler) -> tuple[int, set]:
    raw = handler.get_query_argument("offset", "0")
    try:
        offset = int(raw)
    except ValueError:
        raise RunsError(400, f"offset must be an integer byte offset (got {raw!r})") from None
    types = {t for t in handler.get_query_argument("type", "").split(",") if t}
    return offset, types


class EventsHandler(BaseHandler):
    @tornado.web.authenticated
    async def get(self, name: str):
        try:
            offset, types = _offset_and_types(self)
        except RunsError as err:
            return self.answer_error(err)
        got = await self.call(self.runs.events, name, offset, types)
        if got is not None:
            self.finish(json.dumps({"events": got[0], "offset": got[1]}))


class EventsStreamHandler(SSEHandler):
    @tornado.web.authenticated
    async def get(self, name: str):
        try:
            offset, types = _offset_and_types(self)
            self.runs.run_dir(name)
        except RunsError as err:
            return self.answer_error(err)
        self.prepare_stream()
        state = {"offset": offset}
        loop = asyncio.get_running_loop()

        async def tick() -> bool:
            events, state["offset"] = await loop.run_in_executor(None, self.runs.events, name, state["offset"], types)
            if events:
                await self.send("events", {"events": events, "offset": state["offset"]})
                return True
            status = await loop.run_in_executor(None, lambda: self.runs.handle(name).status())
            if status != "running":
                # one more read: the final events may have landed between the read and the status check
                events, state["offset"] = await loop.run_in_executor(
                    None, self.runs.events, name, state["offset"], types
                )
                if events:
                    await self.send("events", {"events": events, "offset": state["offset"]})
                await self.send("end", {"status": status, "offset": state["offset"]})
                raise _StreamEnded
            return False

        await self.loop(tick)


class StopHandler(BaseHandler):
    @tornado.web.authenticated
    async def post(self, name: str):
        handle = await self.call(self.runs.handle, name)
        if handle is None:
            return
        status = await self.call(handle.status)
        if status != "running":
            return self.answer_error(RunsError(409, f"run {name!r} is not running ({status})"))
        # The worker stops after its current step and saves a checkpoint; the stream shows the outcome.
        asyncio.get_running_loop().run_in_executor(None, handle.stop)
        self.set_status(202)
        self.finish(json.dumps({"name": name, "status": "stopping"}))


class ModelsHandler(BaseHandler):
    @tornado.web.authenticated
    async def get(self):
        from workbench.serve.client import served_models

        url = self.wb_settings["chat_url"]
        try:
            models = await asyncio.get_running_loop().run_in_executor(
                None, lambda: served_models(base_url=url, api_key=self.wb_settings["chat_api_key"] or None)
            )
        except Exception as err:  # noqa: BLE001 - ServerUnreachable, or anything else on the way
            return self.answer_error(
                RunsError(
                    503,
                    f"no chat server answers at {url} ({type(err).__name__}): start "
                    "one with `workbench serve`, or set WorkbenchExtension.chat_url",
                )
            )
        self.finish(json.dumps({"url": url, "models": models}))


class NotebooksHandler(BaseHandler):
    @tornado.web.authenticated
    async def post(self):
        try:
            data = self.body()
            kind, runs = data.get("kind"), data.get("runs") or []
            if kind not in notebooks.KINDS:
                raise RunsError(400, f"kind must be one of {', '.join(notebooks.KINDS)} (got {kind!r})")
            wanted = {"monitor": 1, "compare": 2}.get(kind, 0)
            if not isinstance(runs, list) or len(runs) != wanted:
                raise RunsError(400, f"a {kind} notebook takes {wanted} run name(s) in 'runs' (got {runs!r})")
            for name in runs:
                self.runs.run_dir(name)
        except RunsError as err:
            return self.answer_error(err)
        root = Path(self.settings["server_root_dir"]).expanduser()
        nb = notebooks.build(
            kind, notebooks.runs_dir_for(root, self.runs.root), runs, self.wb_settings["template"] or None
        )
        stem = {
            "finetune": "fine-tune",
            "dashboard": "workbench-dashboard",
            "monitor": f"monitor-{runs[0] if runs else ''}",
            "compare": "compare-" + "-vs-".join(runs),
        }[kind]
        # a fine-tune notebook is new each time; the dashboard, a run's monitor or a comparison opens the one made before
        path = notebooks.write_new(root, root, stem, nb, reuse=kind != "finetune")
        self.set_status(201)
        self.finish(json.dumps({"path": path.as_posix()}))


def setup_handlers(web_app, runs: RunsDirectory, settings: dict) -> None:
    base = url_path_join(web_app.settings["base_url"], "workbench", "api")
    web_app.settings["workbench_runs"] = runs
    web_app.settings["workbench"] = settings
    web_app.add_handlers(
        ".*$",
        [
            (url_path_join(base, "runs"), RunsHandler),
            (url_path_join(base, "runs", "stream"), RunsStreamHandler),
            (url_path_join(base, "runs", RUN), RunHandler),
            (url_path_join(base, "runs", RUN, "events"), EventsHandler),
            (url_path_join(base, "runs", RUN, "events", "stream"), EventsStreamHandler),
            (url_path_join(base, "runs", RUN, "stop"), StopHandler),
            (url_path_join(base, "models"), ModelsHandler),
            (url_path_join(base, "notebooks"), NotebooksHandler),
        ],
    )
