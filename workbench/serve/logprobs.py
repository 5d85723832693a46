"""Log-probabilities in OpenAI's two shapes: the chat ``logprobs`` object and the legacy completions one."""

from __future__ import annotations

from .batcher import TokenEvent


class TokenNames:
    """How logprobs name a token: its text, or 'token_id:ID' (return_tokens_as_token_ids)."""

    def __init__(self, tokenizer, as_ids: bool):
        self.tokenizer, self.as_ids = tokenizer, as_ids

    def __call__(self, token: int) -> str:
        return f"token_id:{token}" if self.as_ids else self.tokenizer.decode([token])


def chat_logprobs(name: TokenNames, entries) -> dict | None:
    """OpenAI's chat ``logprobs`` object for some generated tokens; None when they were not asked for."""
    if entries is None:
        return None

    def item(token: int, logprob: float) -> dict:
        text = name(token)
        return {"token": text, "logprob": logprob, "bytes": list(text.encode("utf-8"))}

    return {
        "content": [{**item(e.token, e.logprob), "top_logprobs": [item(t, lp) for t, lp in e.top]} for e in entries]
    }


def text_logprobs(name: TokenNames, entries, offset: int = 0) -> dict | None:
    """The legacy completions ``logprobs`` object (tokens, token_logprobs, top_logprobs, text_offset)."""
    if entries is None:
        return None
    tokens = [name(e.token) for e in entries]
    offsets, at = [], offset
    for text in tokens:
        offsets.append(at)
        at += len(text)
    return {
        "tokens": tokens,
        "token_logprobs": [e.logprob for e in entries],
        "top_logprobs": [{name(t): lp for t, lp in e.top} for e in entries],
        "text_offset": offsets,
    }


def all_logprobs(events: list[TokenEvent]) -> list | None:
    """Every token's log-probability entry of a finished generation (None when none were asked for)."""
    return None if events[-1].logprobs is None else [t for e in events for t in e.logprobs or []]
