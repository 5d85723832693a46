#!/usr/bin/env python3
"""Build and check data_samples/identity/pairs.jsonl: preference pairs for ``training.method dpo`` (TRL's
conversational preference format, as ``workbench agent dagger`` writes its pairs.jsonl), from the single-turn English
rows of identity/train.jsonl: the PhoneMate answer chosen, the base model's own identity (SmolLM2-Instruct's
default persona) rejected.

    python3 data_samples/make_preference_pairs.py          # rewrite identity/pairs.jsonl, then check
    python3 data_samples/make_preference_pairs.py --check  # only check it

Deterministic: standard library only, the rows in file order.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROWS = HERE / "identity" / "train.jsonl"
OUT = HERE / "identity" / "pairs.jsonl"
PAIRS = 16
REJECTED = "I am SmolLM, an AI assistant trained by Hugging Face."


def pairs() -> list[dict]:
    out = []
    for line in ROWS.read_text(encoding="utf-8").splitlines():
        messages = json.loads(line)["messages"]
        if len(messages) != 2 or messages[0]["role"] != "user" or not messages[0]["content"].isascii():
            continue  # single-turn English rows only
        out.append(
            {
                "prompt": messages[:1],
                "chosen": [messages[1]],
                "rejected": [{"role": "assistant", "content": REJECTED}],
                "meta": {"kind": "other", "source": "identity/train.jsonl"},
            }
        )
        if len(out) == PAIRS:
            break
    return out


def check() -> list[str]:
    problems = []
    rows = [json.loads(line) for line in OUT.read_text(encoding="utf-8").splitlines()]
    if rows != pairs():
        problems.append(f"{OUT}: not what this script writes: run it without --check")
    for i, row in enumerate(rows, start=1):
        if row["chosen"][0]["content"] == row["rejected"][0]["content"]:
            problems.append(f"{OUT}:{i}: chosen and rejected are the same reply")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check the file on disk")
    if not parser.parse_args().check:
        OUT.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs()), encoding="utf-8")
    problems = check()
    print("\n".join(problems) or f"{OUT.relative_to(HERE)}: {PAIRS} pairs, ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
