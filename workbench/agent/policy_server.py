"""Any policy behind an OpenAI-compatible chat-completions endpoint: ``PolicyServer(OraclePolicy(tasks))`` answers
each conversation with the task oracle's reply, so that a runtime (Open-AutoGLM's ``main.py``, its ``PhoneAgent``)
can be run end to end on the simulated phone with no model. ``/v1/models`` lists the policy's name;
``/v1/chat/completions`` answers a conversation, streamed (``stream: true``, as Open-AutoGLM's client asks) or not.
Every conversation received is kept (``received``), as the runtime sent it.
"""

from __future__ import annotations

import json
import threading
import time

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from .policy import Policy


class PolicyServer:
    """``start()`` it in a background thread (port 0: any free one), point a client at ``base_url``, ``stop()``."""

    def __init__(self, policy: Policy, host: str = "127.0.0.1", port: int = 0):
        self.policy, self.host, self.port = policy, host, port
        self.received: list[list[dict]] = []
        self._lock = threading.Lock()
        self._server = self._thread = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def _app(self) -> FastAPI:
        app = FastAPI()

        @app.get("/v1/models")
        def models():
            return {"object": "list", "data": [{"id": self.policy.name, "object": "model", "owned_by": "workbench"}]}

        @app.post("/v1/chat/completions")
        async def chat(request: Request):
            body = await request.json()
            messages = body.get("messages") or []
            with self._lock:  # one conversation at a time: a policy (the oracle) need not be thread-safe
                self.received.append(messages)
                (reply,) = self.policy([messages])
            if reply.error:
                return JSONResponse({"error": {"message": reply.error, "type": "invalid_request_error"}}, 400)
            created, name = int(time.time()), body.get("model") or self.policy.name
            if not body.get("stream"):
                return {
                    "id": "chatcmpl-policy",
                    "object": "chat.completion",
                    "created": created,
                    "model": name,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": reply.content},
                            "finish_reason": "stop",
                        }
                    ],
                }

            def chunk(delta: dict, finish: str | None = None) -> str:
                return (
                    "data: "
                    + json.dumps(
                        {
                            "id": "chatcmpl-policy",
                            "object": "chat.completion.chunk",
                            "created": created,
                            "model": name,
                            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                        },
                        ensure_ascii=False,
                    )
                    + "\n\n"
                )

            def stream():
                yield chunk({"role": "assistant", "content": ""})
                for start in range(0, len(reply.content), 16):  # in pieces, as a model streams
                    yield chunk({"content": reply.content[start : start + 16]})
                yield chunk({}, "stop")
                yield "data: [DONE]\n\n"

            return StreamingResponse(stream(), media_type="text/event-stream")

        return app

    def start(self) -> PolicyServer:
        import socket

        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        self._server = uvicorn.Server(
            uvicorn.Config(self._app(), log_level="warning", access_log=False, lifespan="off")
        )
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True, name="policy-server"
        )
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"the policy server did not start on {self.host}:{self.port}")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)

    def __enter__(self) -> PolicyServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
