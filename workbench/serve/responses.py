"""Decoder events (``TokenEvent``) -> OpenAI objects: a chat or text completion whole, or its stream chunks, and their usage."""

from __future__ import annotations

import time
import uuid

from . import protocol as P
from .batcher import TokenEvent
from .logprobs import TokenNames, all_logprobs, chat_logprobs, text_logprobs
from .reasoning import ReasoningParser


def usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def merge_choices(objects: list[dict]) -> dict:
    """The n single-choice responses as one: their choices in order, usage summed over the completions."""
    merged = dict(objects[0])
    merged["choices"] = [c for obj in objects for c in obj["choices"]]
    completion = sum(obj["usage"]["completion_tokens"] for obj in objects)
    merged["usage"] = usage(objects[0]["usage"]["prompt_tokens"], completion)
    return merged


class _Formatter:
    """What a chat and a text completion response share: the id, time, model and choice index, token names for
    log-probabilities, and the usage chunk that ends a stream."""

    id_prefix = ""
    chunk_object = ""

    def __init__(self, body: P.SamplingFields, tokenizer, index: int):
        self.id = f"{self.id_prefix}-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.model = body.model
        self.index = index
        self.names = TokenNames(tokenizer, body.return_tokens_as_token_ids)
        self.include_usage = bool(body.stream_options and body.stream_options.include_usage)

    def usage_chunk(self, usage: dict) -> dict:
        return {
            "id": self.id,
            "object": self.chunk_object,
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": usage,
        }


class ChatFormatter(_Formatter):
    id_prefix = "chatcmpl"
    chunk_object = "chat.completion.chunk"

    def __init__(
        self,
        body: P.ChatCompletionRequest,
        starts_in_reasoning: bool,
        tokenizer,
        index: int = 0,
        split_by_default: bool = True,
    ):
        super().__init__(body, tokenizer, index)
        self.split = split_by_default if body.return_reasoning is None else body.return_reasoning
        self.parser = ReasoningParser(starts_in_reasoning) if self.split else None
        # inline mode with a template that pre-opens <think>: give the client the tag the model never wrote
        self._inline_prefix = "<think>" if (starts_in_reasoning and not self.split) else ""

    def _chunk(self, delta: dict, finish_reason: str | None = None, logprobs: dict | None = None) -> dict:
        chunk = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": self.index, "delta": delta, "logprobs": logprobs, "finish_reason": finish_reason}],
        }
        if self.include_usage:
            chunk["usage"] = None
        return chunk

    def _parts(self, text: str, final: bool) -> tuple[str, str]:
        if not self.split:
            out, self._inline_prefix = self._inline_prefix + text, ""
            return "", out
        part = self.parser.feed(text)
        reasoning, content = part.reasoning, part.content
        if final:
            rest = self.parser.flush()
            reasoning, content = reasoning + rest.reasoning, content + rest.content
        return reasoning, content

    def start(self) -> list[dict]:
        return [self._chunk({"role": "assistant", "content": ""})]

    def delta(self, event: TokenEvent) -> list[dict]:
        final = event.finish_reason is not None
        reasoning, content = self._parts(event.text, final)
        logprobs = chat_logprobs(self.names, event.logprobs) if event.logprobs else None
        chunks = []
        if reasoning:  # the tokens' logprobs go with the first chunk their text appears in
            chunks.append(self._chunk({"reasoning_content": reasoning, "reasoning": reasoning}, logprobs=logprobs))
            logprobs = None
        if content:
            chunks.append(self._chunk({"content": content}, logprobs=logprobs))
            logprobs = None
        if final:
            chunks.append(self._chunk({}, event.finish_reason, logprobs=logprobs))
        return chunks

    def complete(self, events: list[TokenEvent]) -> dict:
        reasoning, content = self._parts("".join(e.text for e in events), final=True)
        last = events[-1]
        message: dict = {"role": "assistant", "content": content}
        if reasoning:
            message["reasoning_content"] = message["reasoning"] = reasoning
        entries = all_logprobs(events)
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": self.index,
                    "message": message,
                    "logprobs": chat_logprobs(self.names, entries),
                    "finish_reason": last.finish_reason,
                }
            ],
            "usage": usage(last.prompt_tokens, last.completion_tokens),
        }


class TextFormatter(_Formatter):
    id_prefix = "cmpl"
    chunk_object = "text_completion"

    def __init__(self, body: P.CompletionRequest, tokenizer, index: int = 0):
        super().__init__(body, tokenizer, index)
        self._offset = 0  # characters streamed so far (text_offset of the next token)

    def _obj(self, text: str, finish_reason: str | None, logprobs: dict | None = None) -> dict:
        obj = {
            "id": self.id,
            "object": "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": self.index, "text": text, "logprobs": logprobs, "finish_reason": finish_reason}],
        }
        if self.include_usage:
            obj["usage"] = None
        return obj

    def start(self) -> list[dict]:
        return []

    def delta(self, event: TokenEvent) -> list[dict]:
        out = []
        logprobs = text_logprobs(self.names, event.logprobs, self._offset) if event.logprobs else None
        if event.text:
            out.append(self._obj(event.text, None, logprobs))
            self._offset += len(event.text)
            logprobs = None
        if event.finish_reason is not None:
            out.append(self._obj("", event.finish_reason, logprobs))
        return out

    def complete(self, events: list[TokenEvent]) -> dict:
        last = events[-1]
        obj = self._obj(
            "".join(e.text for e in events), last.finish_reason, text_logprobs(self.names, all_logprobs(events))
        )
        obj["usage"] = usage(last.prompt_tokens, last.completion_tokens)
        return obj
