"""Split generated text into reasoning and answer, incrementally.

Thinking models write ``<think>reasoning</think>answer``; GLM-4.1V (AutoGLM-Phone) additionally wraps the
answer in ``<answer>...</answer>``. Tags may arrive split across stream chunks, so any suffix that could
still become a tag is held back until the next chunk decides it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .text import partial_suffix_len

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"
_TAGS = [THINK_OPEN, THINK_CLOSE, ANSWER_OPEN, ANSWER_CLOSE]


@dataclass
class Split:
    reasoning: str = ""
    content: str = ""

    def __bool__(self) -> bool:
        return bool(self.reasoning or self.content)


class ReasoningParser:
    """Feed text deltas, get (reasoning delta, content delta).

    ``in_reasoning``: start inside a think block, for chat templates whose generation prompt
    already opens ``<think>`` (the model then only writes the closing tag).
    """

    def __init__(self, in_reasoning: bool = False):
        self.in_reasoning = in_reasoning
        self._buf = ""

    def feed(self, delta: str) -> Split:
        self._buf += delta
        out = Split()
        while True:
            hits = [(self._buf.find(t), t) for t in _TAGS]
            hits = [(i, t) for i, t in hits if i >= 0]
            if not hits:
                break
            i, tag = min(hits)
            self._emit(out, self._buf[:i])
            self._buf = self._buf[i + len(tag) :]
            if tag == THINK_OPEN:
                self.in_reasoning = True
            elif tag == THINK_CLOSE:
                self.in_reasoning = False
            # <answer> / </answer> only mark the answer: dropped from the content.
        keep = partial_suffix_len(self._buf, _TAGS)
        cut = len(self._buf) - keep
        self._emit(out, self._buf[:cut])
        self._buf = self._buf[cut:]
        return out

    def flush(self) -> Split:
        out = Split()
        self._emit(out, self._buf)
        self._buf = ""
        return out

    def _emit(self, out: Split, text: str) -> None:
        if self.in_reasoning:
            out.reasoning += text
        else:
            out.content += text


def split_reasoning(text: str, in_reasoning: bool = False) -> Split:
    parser = ReasoningParser(in_reasoning)
    a, b = parser.feed(text), parser.flush()
    return Split(a.reasoning + b.reasoning, a.content + b.content)


def prompt_opens_think(prompt_text: str) -> bool:
    """True when the rendered prompt leaves a think block open for the model to continue."""
    return prompt_text.rstrip().endswith(THINK_OPEN)
