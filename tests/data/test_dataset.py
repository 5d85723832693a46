import json

import pytest
import torch

from tests.conftest import SAMPLES, write_jsonl
from workbench.data import (
    IGNORE_INDEX,
    DataError,
    collate,
    load_training_examples,
    micro_batch_indices,
    tokenize_messages,
)
from workbench.models.tiny import byte_tokenizer

TOK = byte_tokenizer()
GOOD = json.dumps({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]})

# (bad line, words the reason must contain)
BAD_ROWS = [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "JSON object"),
    (json.dumps({"text": "no known keys"}), "unknown row format"),
    (json.dumps({"messages": []}), "non-empty list"),
    (json.dumps({"messages": "hi"}), "non-empty list"),
    (json.dumps({"messages": [{"role": "robot", "content": "x"}]}), "messages[0].role"),
    (
        json.dumps({"messages": [{"role": "user", "content": 3}, {"role": "assistant", "content": "a"}]}),
        "messages[0].content must be a string",
    ),
    (json.dumps({"messages": [{"role": "user", "content": "q"}]}), "no assistant message"),
    (
        json.dumps(
            {
                "messages": [
                    {"role": "user", "content": "q"},
                    {"role": "assistant", "content": "a"},
                    {"role": "user", "content": "again"},
                ]
            }
        ),
        "last message must be the assistant",
    ),
    (
        json.dumps(
            {
                "messages": [
                    {"role": "user", "content": "q"},
                    {"role": "system", "content": "s"},
                    {"role": "assistant", "content": "a"},
                ]
            }
        ),
        "only the first message",
    ),
    (json.dumps({"messages": ["just a string"]}), "messages[0] is str"),
    (json.dumps({"instruction": "", "output": "x"}), "'instruction' must be a non-empty string"),
    (json.dumps({"instruction": "do it", "output": ""}), "'output' must be a non-empty string"),
    (json.dumps({"instruction": "do it", "input": 5, "output": "ok"}), "'input' must be a string"),
]


@pytest.mark.parametrize("line,reason", BAD_ROWS, ids=[r for _, r in BAD_ROWS])
def test_bad_row_stops_with_file_and_line(tmp_path, line, reason):
    path = write_jsonl(tmp_path / "d.jsonl", [GOOD, "", GOOD, line, GOOD])
    with pytest.raises(DataError) as exc:
        load_training_examples(path, TOK, 64)
    assert str(exc.value).startswith(f"{path}:4: ")  # blank lines still count as lines
    assert reason in str(exc.value) and "skip_bad_rows" in str(exc.value)


def test_bad_rows_can_be_skipped_and_counted(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", [GOOD] + [line for line, _ in BAD_ROWS] + [GOOD])
    examples, stats = load_training_examples(path, TOK, 64, skip_bad_rows=True)
    assert len(examples) == stats.examples == 2
    assert stats.skipped_bad == len(BAD_ROWS) and stats.bad_rows[0].startswith(f"{path}:2:")


def test_missing_file_and_all_truncated(tmp_path):
    with pytest.raises(DataError, match="none.jsonl: file not found"):
        load_training_examples(tmp_path / "none.jsonl", TOK, 64)
    long_prompt = json.dumps(
        {"messages": [{"role": "user", "content": "x" * 100}, {"role": "assistant", "content": "y"}]}
    )
    with pytest.raises(DataError, match="no usable examples.*max_length"):
        load_training_examples(write_jsonl(tmp_path / "d.jsonl", [long_prompt]), TOK, 32)


def test_loss_only_on_assistant_tokens_and_turn_end():
    msgs = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "Q1"},
        {"role": "assistant", "content": "A1"},
        {"role": "user", "content": "Q2"},
        {"role": "assistant", "content": "A2"},
    ]
    ex = tokenize_messages(TOK, msgs, 512)
    trained = TOK.decode([t for t in ex.labels if t != IGNORE_INDEX])
    assert trained == "A1<|endoftext|>A2<|endoftext|>"  # the newline after the tag is prompt
    assert TOK.decode(ex.input_ids) == TOK.apply_chat_template(msgs, tokenize=False)


def test_instruction_rows_and_truncation_count(tmp_path):
    rows = [
        json.dumps(
            {"instruction": "Open WeChat", "input": "Screen: home", "output": 'do(action="Launch", app="WeChat")'}
        ),
        json.dumps({"instruction": "Say hi " * 30, "output": "hi " * 40}),
    ]
    examples, stats = load_training_examples(write_jsonl(tmp_path / "d.jsonl", rows), TOK, 260)
    assert stats.truncated == 1 and all(len(e.input_ids) <= 260 for e in examples)
    first = TOK.decode(examples[0].input_ids)
    assert "Open WeChat\n\nScreen: home" in first and first.endswith('do(action="Launch", app="WeChat")<|endoftext|>')


def test_sample_sets_load_in_both_forms():
    for name in ("identity", "phone_actions"):
        for split in ("train", "heldout"):
            examples, stats = load_training_examples(SAMPLES / name / f"{split}.jsonl", TOK, 512)
            assert stats.skipped_bad == 0 and stats.examples == stats.rows > 10


def test_micro_batch_stream_is_split_invariant_and_resumable():
    a = micro_batch_indices(10, 4, seed=3)
    b = micro_batch_indices(10, 2, seed=3)
    first_a = [next(a) for _ in range(5)]
    first_b = [next(b) for _ in range(10)]
    assert sum(first_a, []) == sum(first_b, [])  # the same examples, whatever the accumulation split
    assert sorted(sum(first_a, [])[:10]) == list(range(10))  # an epoch is a permutation
    resumed = micro_batch_indices(10, 4, seed=3, start=3)
    assert [next(resumed) for _ in range(2)] == first_a[3:5]
    assert sum(first_a, [])[10:20] != sum(first_a, [])[:10]  # each epoch reshuffles


def test_collate_pads_dynamically_and_masks_padding():
    exs = [
        tokenize_messages(TOK, [{"role": "user", "content": u}, {"role": "assistant", "content": "ok"}], 64)
        for u in ("a", "a much longer question")
    ]
    batch = collate(exs, TOK.pad_token_id)
    width = max(len(e.input_ids) for e in exs)
    assert batch["input_ids"].shape == (2, width)
    short = len(exs[0].input_ids)
    assert batch["attention_mask"][0].sum() == short and (batch["labels"][0, short:] == IGNORE_INDEX).all()
    assert torch.equal(batch["input_ids"][1], torch.tensor(exs[1].input_ids))


def test_a_line_that_is_not_utf8_is_a_bad_row_naming_file_and_line(tmp_path):
    path = tmp_path / "latin1.jsonl"
    latin1 = json.dumps(
        {"messages": [{"role": "user", "content": "café"}, {"role": "assistant", "content": "oui"}]}, ensure_ascii=False
    ).encode("latin-1")
    path.write_bytes(GOOD.encode() + b"\n" + latin1 + b"\n" + GOOD.encode() + b"\n")
    with pytest.raises(DataError) as exc:
        load_training_examples(path, TOK, 64)
    assert str(exc.value).startswith(f"{path}:2: not UTF-8 text (byte 0xe9 at column ")
    assert "save the file as UTF-8" in str(exc.value)
    examples, stats = load_training_examples(path, TOK, 64, skip_bad_rows=True)  # skipped and counted like any bad row
    assert len(examples) == 2 and stats.skipped_bad == 1 and "not UTF-8" in stats.bad_rows[0]


def test_random_bytes_directories_and_bom_files(tmp_path):
    noise = tmp_path / "noise.jsonl"
    noise.write_bytes(bytes(range(128, 256)) * 4)
    with pytest.raises(DataError, match=r"noise.jsonl:1: not UTF-8 text \(byte 0x80 at column 1\)"):
        load_training_examples(noise, TOK, 64)
    with pytest.raises(DataError, match=r"is a directory, not a file"):
        load_training_examples(tmp_path, TOK, 64)
    bom = tmp_path / "bom.jsonl"  # as Windows editors save UTF-8: the byte-order mark is not part of the JSON
    bom.write_bytes(b"\xef\xbb\xbf" + GOOD.encode() + b"\n" + GOOD.encode() + b"\n")
    examples, stats = load_training_examples(bom, TOK, 64)
    assert len(examples) == 2 and stats.skipped_bad == 0
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"\n\n")
    with pytest.raises(DataError, match=r"no usable examples \(0 rows"):
        load_training_examples(empty, TOK, 64)


def test_ui_tree_rows_load_with_shuffled_layouts_the_same_for_one_seed(tmp_path):
    rows = (SAMPLES / "phone_episodes_tree" / "train.jsonl").read_text(encoding="utf-8").splitlines()[:12]
    path = write_jsonl(tmp_path / "tree.jsonl", rows)
    recorded, _ = load_training_examples(path, TOK, 4096)
    shuffled, _ = load_training_examples(path, TOK, 4096, ui_tree_layouts="shuffled", seed=0)
    again, _ = load_training_examples(path, TOK, 4096, ui_tree_layouts="shuffled", seed=0)
    other, _ = load_training_examples(path, TOK, 4096, ui_tree_layouts="shuffled", seed=1)
    ids = lambda examples: [e.input_ids for e in examples]  # noqa: E731
    assert ids(shuffled) == ids(again) and ids(shuffled) != ids(recorded) and ids(shuffled) != ids(other)
    # a tap the layout moved: its label (what the model learns to say) is the new point
    labels = lambda e: TOK.decode([t for t in e.labels if t != IGNORE_INDEX])  # noqa: E731
    assert sum(labels(a) != labels(b) for a, b in zip(recorded, shuffled)) >= 3
