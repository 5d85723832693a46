"""Judge-free metrics of free-form answers against the reference: normalised exact match and token F1.

Normalisation (as SQuAD's): case folded, punctuation and the articles a/an/the dropped, spaces collapsed.
Tokens are words, and each CJK character is a token of its own (Chinese has no spaces between words).
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter

from ..config.samples import samples_dir
from ..phone.actions import split_answer
from ..serve.remote import ModelReply
from ..stats import mean
from .task_protocol import Example

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_TOKEN = re.compile(
    r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[^\s\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+"
)


def normalize(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    text = "".join(" " if unicodedata.category(c).startswith("P") or c in string.punctuation else c for c in text)
    return " ".join(_ARTICLES.sub(" ", text).split())


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(normalize(text))


def repeated_run(text: str, times: int = 3, sentence: int = 8) -> str | None:
    """The first degenerate repetition in ``text`` (a decoding loop), or None: an n-gram of tokens repeated
    ``times`` times in a row ("I am not You, I am not You, I am not You"), or a run of ``sentence`` tokens said twice
    (a sentence repeated, the second time perhaps cut off by the length limit)."""
    toks = tokens(text)
    for n in range(1, len(toks) // times + 1):
        for start in range(len(toks) - times * n + 1):
            gram = toks[start : start + n]
            if all(toks[start + k * n : start + (k + 1) * n] == gram for k in range(1, times)):
                return " ".join(gram)
    seen: dict[tuple, int] = {}
    for start in range(len(toks) - sentence + 1):
        gram = tuple(toks[start : start + sentence])
        if gram in seen and start - seen[gram] >= sentence:
            return " ".join(gram)
        seen.setdefault(gram, start)
    return None


def token_f1(prediction: str, reference: str) -> float:
    pred, ref = tokens(prediction), tokens(reference)
    if not pred or not ref:
        return float(pred == ref)
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def exact_match(prediction: str, reference: str) -> bool:
    return normalize(prediction) == normalize(reference)


class TextMatchTask:
    name = "text"
    description = "free-form answers vs the reference: normalised exact match and token F1 (no judge model)"

    def __init__(self, default_data=None):
        self.default_data = default_data or samples_dir() / "identity" / "heldout.jsonl"

    def score(self, example: Example, reply: ModelReply) -> dict:
        answer = split_answer(reply.content, reply.reasoning).answer
        reference = split_answer(example.reference).answer
        return {"exact": exact_match(answer, reference), "f1": token_f1(answer, reference)}

    def summarize(self, verdicts: list[dict]) -> dict:
        return {
            "n": len(verdicts),
            "exact_match": mean(v["exact"] for v in verdicts),
            "token_f1": mean(v["f1"] for v in verdicts),
        }


__all__ = ["TextMatchTask", "exact_match", "normalize", "repeated_run", "token_f1", "tokens"]
