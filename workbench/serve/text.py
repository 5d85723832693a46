"""Token -> text, incrementally: UTF-8 safe detokenization and stop strings that never leak."""

from __future__ import annotations

from ..forward.generate import without_cut_character


class IncrementalDetokenizer:
    """Turns a growing list of token ids into text deltas.

    Decoding one token at a time breaks multi-byte characters (a Chinese character can span two
    byte-level tokens) and loses the spaces that SentencePiece-style tokenizers attach to the next
    token; so each step decodes a short window and emits only what is new and complete.
    """

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self._prefix_offset = 0  # start of the window that is re-decoded for context
        self._read_offset = 0  # tokens before this one have been emitted

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def add(self, token_id: int) -> str:
        self.ids.append(token_id)
        prefix_text = self._decode(self.ids[self._prefix_offset : self._read_offset])
        new_text = self._decode(self.ids[self._prefix_offset :])
        # A trailing U+FFFD means an incomplete UTF-8 sequence: wait for the next token.
        if len(new_text) > len(prefix_text) and not new_text.endswith("\ufffd"):
            delta = new_text[len(prefix_text) :]
            self._prefix_offset = self._read_offset
            self._read_offset = len(self.ids)
            return delta
        return ""

    def flush(self) -> str:
        """Whatever is still held back. A generation cut inside a multi-byte character (max_tokens reached) ends
        before it, as vLLM's answers and our in-process ones do (``without_cut_character``; measured: the same
        greedy answers from both engines but for that last character)."""
        if self._read_offset >= len(self.ids):
            return ""
        prefix_text = self._decode(self.ids[self._prefix_offset : self._read_offset])
        new_text = self._decode(self.ids[self._prefix_offset :])
        self._prefix_offset = self._read_offset = len(self.ids)
        return without_cut_character(new_text[len(prefix_text) :])


def partial_suffix_len(text: str, markers: list[str]) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of one of ``markers``:
    the text that must be held back because the next chunk might complete a marker."""
    best = 0
    for m in markers:
        for k in range(min(len(m) - 1, len(text)), best, -1):
            if text.endswith(m[:k]):
                best = k
                break
    return best


class StopStringMatcher:
    """Accumulates text and releases only what cannot be part of a stop string.

    ``push`` returns (text safe to emit, stopped). When a stop string completes, even across
    token boundaries, the text before it is released and the stop string itself never is.
    """

    def __init__(self, stops: list[str]):
        self.stops = [s for s in stops if s]
        self._pending = ""

    def push(self, delta: str) -> tuple[str, bool]:
        if not self.stops:
            return delta, False
        self._pending += delta
        hits = [i for i in (self._pending.find(s) for s in self.stops) if i >= 0]
        if hits:
            out = self._pending[: min(hits)]
            self._pending = ""
            return out, True
        keep = partial_suffix_len(self._pending, self.stops)
        cut = len(self._pending) - keep
        out, self._pending = self._pending[:cut], self._pending[cut:]
        return out, False

    def flush(self) -> str:
        out, self._pending = self._pending, ""
        return out
