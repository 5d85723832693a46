"""Reasoning end to end, on a scripted model whose output is known: "<think>abc</think>XYZ", with the
closing tag arriving one byte per stream chunk."""

from __future__ import annotations

import pytest

MODEL = "scripted"
MSG = [{"role": "user", "content": "why?"}]


@pytest.fixture(scope="module")
def client(scripted_server):
    return scripted_server.openai_client(max_retries=0)


def _stream(client, **kw):
    chunks = [c for c in client.chat.completions.create(model=MODEL, messages=MSG, stream=True, **kw) if c.choices]
    deltas = [c.choices[0].delta.model_dump() for c in chunks]
    reasoning = "".join(d.get("reasoning_content") or "" for d in deltas)
    content = "".join(d.get("content") or "" for d in deltas)
    return reasoning, content, deltas


def test_non_streamed_split(client):
    m = client.chat.completions.create(model=MODEL, messages=MSG).choices[0].message.model_dump()
    assert (m["reasoning_content"], m["reasoning"], m["content"]) == ("abc", "abc", "XYZ")


def test_streamed_split_with_tag_spanning_chunks(client):
    reasoning, content, deltas = _stream(client)
    assert (reasoning, content) == ("abc", "XYZ")
    for d in deltas:  # no fragment of "</think>" leaks into either field
        assert "<" not in (d.get("content") or "") + (d.get("reasoning_content") or "")
        assert d.get("reasoning") == d.get("reasoning_content")


def test_return_reasoning_false_is_inline(client):
    r = client.chat.completions.create(model=MODEL, messages=MSG, extra_body={"return_reasoning": False})
    m = r.choices[0].message.model_dump()
    assert m["content"] == "<think>abc</think>XYZ" and m.get("reasoning_content") is None
    assert _stream(client, extra_body={"return_reasoning": False})[1] == "<think>abc</think>XYZ"


@pytest.mark.parametrize("via", ["top_level", "chat_template_kwargs"])
def test_enable_thinking_reaches_the_template(client, via):
    extra = {"enable_thinking": False} if via == "top_level" else {"chat_template_kwargs": {"enable_thinking": False}}
    r = client.chat.completions.create(model=MODEL, messages=MSG, extra_body=extra)
    m = r.choices[0].message.model_dump()
    assert m["content"] == "Q" and m.get("reasoning_content") is None
    on = client.chat.completions.create(model=MODEL, messages=MSG, extra_body={"enable_thinking": True})
    assert on.choices[0].message.content == "XYZ"


def test_stop_string_spanning_tokens_in_chat_stream(client):
    # "bc" spans two tokens inside the reasoning: generation stops there, nothing of it leaks
    reasoning, content, deltas = _stream(client, stop=["bc"])
    assert (reasoning, content) == ("a", "")
    reasoning, content, _ = _stream(client, stop="YZ")
    assert (reasoning, content) == ("abc", "X")


def test_langchain_keeps_reasoning_where_chatopenai_drops_it(scripted_server):
    from langchain_openai import ChatOpenAI

    from workbench.serve.client import chat_model

    plain = ChatOpenAI(model=MODEL, base_url=scripted_server.base_url, api_key="EMPTY", max_retries=0)
    assert plain.invoke("why?").content == "XYZ"
    assert "reasoning_content" not in plain.invoke("why?").additional_kwargs  # the gap the helper closes
    keeper = chat_model(MODEL, server=scripted_server)
    msg = keeper.invoke("why?")
    assert (msg.content, msg.additional_kwargs["reasoning_content"]) == ("XYZ", "abc")
    streamed = None
    for chunk in keeper.stream("why?"):
        streamed = chunk if streamed is None else streamed + chunk
    assert (streamed.content, streamed.additional_kwargs["reasoning_content"]) == ("XYZ", "abc")
    off = chat_model(MODEL, server=scripted_server, enable_thinking=False).invoke("why?")
    assert off.content == "Q" and "reasoning_content" not in off.additional_kwargs


def test_a_chat_model_streams_in_every_new_event_loop(scripted_server):
    """A panel asked twice from a script runs two event loops (asyncio.run each): langchain-openai's process-wide
    async client stayed bound to the first, closed loop and the second request failed ("Event loop is closed")."""
    import asyncio

    from workbench.serve.client import chat_model

    async def ask():
        return [chunk.content async for chunk in chat_model(MODEL, server=scripted_server).astream("why?")]

    assert "".join(asyncio.run(ask())) == "".join(asyncio.run(ask())) == "XYZ"


def test_chat_and_compare_helpers_plain_output(scripted_server):
    import io

    from workbench.serve.client import chat, compare

    out = io.StringIO()
    reply = chat(MODEL, "why?", server=scripted_server, out=out)
    assert (reply.reasoning, reply.content) == ("abc", "XYZ")
    assert out.getvalue() == "[thinking] abc\n[answer] XYZ\n"
    out = io.StringIO()
    replies = compare("why?", server=scripted_server, out=out, html_output=False)  # models: all served
    assert list(replies) == [MODEL] and replies[MODEL].content == "XYZ"
    assert f"=== {MODEL}" in out.getvalue() and "XYZ" in out.getvalue()


def test_compare_html_display_updates(scripted_server, monkeypatch):
    import IPython.display as ipd

    from workbench.serve.client import compare

    shown = []

    class Handle:
        def update(self, obj):
            shown.append(obj.data)

    monkeypatch.setattr(ipd, "display", lambda obj, display_id=None: shown.append(obj.data) or Handle())
    replies = compare("why?", models=[MODEL, MODEL], server=scripted_server, html_output=True, refresh_s=0.01)
    assert replies[MODEL].content == "XYZ"  # a repeated id is asked once, not streamed twice into one reply
    assert shown and shown[-1].count("<td") == 1 and ">XYZ<" in shown[-1] and ">abc<" in shown[-1]
