"""Incremental detokenization, stop strings and reasoning splitting, at every chunk boundary."""

from __future__ import annotations

import pytest

from workbench.models.tiny import byte_tokenizer
from workbench.serve.reasoning import ReasoningParser, prompt_opens_think, split_reasoning
from workbench.serve.text import IncrementalDetokenizer, StopStringMatcher, partial_suffix_len


def test_detokenizer_never_emits_broken_utf8():
    tok = byte_tokenizer()
    text = "答案是：巴黎。Paris 🇫🇷!"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert len(ids) > len(text)  # multi-byte characters span several tokens
    detok = IncrementalDetokenizer(tok)
    deltas = [detok.add(i) for i in ids] + [detok.flush()]
    assert "".join(deltas) == text
    assert not any("\ufffd" in d for d in deltas)


def test_a_generation_cut_inside_a_character_ends_before_it():
    """max_tokens can end an answer between the bytes of one character: the answer stops before that character
    (as vLLM's do), never with U+FFFD."""
    tok = byte_tokenizer()
    ids = tok("巴黎", add_special_tokens=False)["input_ids"]
    assert len(ids) == 6  # two characters of three bytes each
    detok = IncrementalDetokenizer(tok)
    deltas = [detok.add(i) for i in ids[:5]] + [detok.flush()]  # cut after the 2nd byte of the 2nd character
    assert "".join(deltas) == "巴"


def test_detokenizer_keeps_spaces_of_sentencepiece_style_tokens(small_model):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(small_model)
    text = "The capital of France is Paris. 北京是中国的首都。"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    detok = IncrementalDetokenizer(tok)
    assert "".join([detok.add(i) for i in ids] + [detok.flush()]) == text


def test_partial_suffix():
    assert partial_suffix_len("hello wor", ["world"]) == 3
    assert partial_suffix_len("hello", ["world"]) == 0
    assert partial_suffix_len("ab</th", ["</think>", "<answer>"]) == 4


def _feed_all(matcher, pieces):
    out, stopped = [], False
    for p in pieces:
        text, stopped = matcher.push(p)
        out.append(text)
        if stopped:
            break
    if not stopped:
        out.append(matcher.flush())
    return out, stopped


@pytest.mark.parametrize("cut", range(1, 22))
def test_stop_string_spanning_chunks_is_cut_and_never_leaks(cut):
    text = "The answer is 42.\nUser: more"
    pieces = [text[:cut], text[cut:]]
    out, stopped = _feed_all(StopStringMatcher(["\nUser:"]), pieces)
    assert stopped
    assert "".join(out) == "The answer is 42."
    assert not any("\n" in o for o in out)  # not even the first character of the stop string


def test_held_back_prefix_is_released_when_it_does_not_become_a_stop():
    m = StopStringMatcher(["STOP"])
    assert m.push("go ST") == ("go ", False)
    assert m.push("ILL") == ("STILL", False)
    assert m.flush() == ""
    m = StopStringMatcher(["STOP"])
    assert m.push("end ST") == ("end ", False)
    assert m.flush() == "ST"  # generation ended: the held text was real output


def test_earliest_of_several_stops_wins():
    m = StopStringMatcher(["bb", "a"])
    assert m.push("xxbbya") == ("xx", True)


GLM_OUTPUT = "<think>The user wants the capital.\nIt is Paris.</think><answer>Paris is the capital.</answer>"


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 11])
def test_reasoning_split_independent_of_chunking(size):
    parser = ReasoningParser()
    reasoning = content = ""
    for i in range(0, len(GLM_OUTPUT), size):
        part = parser.feed(GLM_OUTPUT[i : i + size])
        assert "<" not in part.content and "<" not in part.reasoning, "a partial tag leaked"
        reasoning += part.reasoning
        content += part.content
    rest = parser.flush()
    reasoning, content = reasoning + rest.reasoning, content + rest.content
    assert reasoning == "The user wants the capital.\nIt is Paris."
    assert content == "Paris is the capital."


def test_reasoning_every_two_way_split():
    text = "<think>r1</think>c1 <b>bold</b>"
    for cut in range(len(text) + 1):
        parser = ReasoningParser()
        a, b, c = parser.feed(text[:cut]), parser.feed(text[cut:]), parser.flush()
        assert a.reasoning + b.reasoning + c.reasoning == "r1"
        assert a.content + b.content + c.content == "c1 <b>bold</b>"  # other tags pass through


def test_no_tags_is_all_content_and_open_template_starts_in_reasoning():
    assert split_reasoning("just an answer").content == "just an answer"
    s = split_reasoning("thinking...</think>answer", in_reasoning=True)
    assert (s.reasoning, s.content) == ("thinking...", "answer")
    assert prompt_opens_think("<|assistant|>\n<think>\n")
    assert not prompt_opens_think("<|assistant|>\n<think></think>\n")


def test_unclosed_think_is_reasoning():
    s = split_reasoning("<think>still going when max_tokens hit")
    assert s.reasoning == "still going when max_tokens hit" and s.content == ""
