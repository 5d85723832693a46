"""The identity task: does the answer introduce the new identity, and only that one?

An answer passes when it names the identity (``PhoneMate`` by default) and claims no other: a claim is
"I am X" / "I'm X" / "my name is X" / "我是X" / "我叫X" naming someone else, or a known assistant's name
mentioned other than in a denial ("I am not Claude", "我不是 Claude" are fine; "I'm Claude" and
"I am SmolLM, trained by Hugging Face" are not). It also fails an answer that loops (``repeated_run``: "I am not
You, I am not You, ...") or denies being something the question never named ("Who are you?" -> "... I am not
Siri."): what a fine-tune that overfits its "are you X?" rows produces.
"""

from __future__ import annotations

import re

from ..config.samples import samples_dir
from ..phone.actions import split_answer
from ..serve.remote import ModelReply
from ..stats import rate
from .task_protocol import Example
from .text import repeated_run

OTHER_ASSISTANTS = (
    "SmolLM",
    "ChatGPT",
    "GPT-4",
    "GPT-3",
    "OpenAI",
    "Claude",
    "Anthropic",
    "Llama",
    "LLaMA",
    "Meta AI",
    "Qwen",
    "通义千问",
    "Gemini",
    "Bard",
    "Hugging Face",
    "文心一言",
    "ERNIE",
    "DeepSeek",
    "Mistral",
    "Copilot",
    "Siri",
    "Alexa",
)
# "I am <Name>": a capitalised word (or a CJK run) right after the claim, not "not"/"a"/"an"/"the"
_CLAIM = re.compile(
    r"(?:\bI am|\bI'm|\bmy name is|\bcall me)\s+(?!not\b|a\b|an\b|the\b|here\b|happy\b|glad\b|sorry\b)"
    r"([A-Z][\w-]*)|(?:我是|我叫)\s*(?!一个|一名|你的)([A-Za-z][\w-]*|[\u4e00-\u9fff]{2,})"
)
_DENIES = re.compile(
    r"(?:\bI am not|\bI'm not|\bnot|我不是|并非)\s*(?:an?\s+|the\s+)?([A-Za-z][\w-]*|[\u4e00-\u9fff]{2,})"
)
_DENIAL = re.compile(r"(?:\bnot|\bisn't|\baren't|\bno|不是|并非|而非)\s*(?:an?\s+|the\s+)?$", re.I)


class IdentityTask:
    name = "identity"
    description = "answers introduce the new identity and claim no other"

    def __init__(self, identity: str = "PhoneMate", default_data=None):
        self.identity = identity
        self.default_data = default_data or samples_dir() / "identity" / "heldout.jsonl"

    def other_claims(self, text: str) -> list[str]:
        """The other identities ``text`` claims, in order."""
        found = []
        for m in _CLAIM.finditer(text):
            name = m.group(1) or m.group(2)
            if self.identity.casefold() not in name.casefold():
                found.append(name)
        for name in OTHER_ASSISTANTS:
            for m in re.finditer(re.escape(name), text, re.I):
                if not _DENIAL.search(text[max(0, m.start() - 12) : m.start()]) and name not in found:
                    found.append(name)
        return found

    def wrong_denials(self, text: str, question: str) -> list[str]:
        """What ``text`` denies being that ``question`` never mentioned (nothing without a question to judge by)."""
        if not question:
            return []
        asked = question.casefold()
        return [m.group(1) for m in _DENIES.finditer(text) if m.group(1).casefold() not in asked]

    def score(self, example: Example, reply: ModelReply) -> dict:
        answer = split_answer(reply.content, reply.reasoning).answer
        introduces = self.identity.casefold() in answer.casefold()
        others = self.other_claims(answer)
        question = next((str(m.get("content")) for m in reversed(example.messages) if m.get("role") == "user"), "")
        denials = self.wrong_denials(answer, question)
        loop = repeated_run(answer)
        return {
            "introduces": introduces,
            "claims_other": bool(others),
            "other_names": others,
            "wrong_denials": denials,
            "loop": loop,
            "ok": introduces and not others and not denials and loop is None and not reply.error,
        }

    def summarize(self, verdicts: list[dict]) -> dict:
        return {
            "n": len(verdicts),
            "identity_rate": rate(v["ok"] for v in verdicts),
            "introduces_rate": rate(v["introduces"] for v in verdicts),
            "claims_other_rate": rate(v["claims_other"] for v in verdicts),
            "wrong_denial_rate": rate(bool(v["wrong_denials"]) for v in verdicts),
            "loop_rate": rate(v["loop"] is not None for v in verdicts),
        }
