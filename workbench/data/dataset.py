"""Load a JSONL file into tokenized examples; deterministic, resumable micro-batch stream."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..config import ConfigError
from ..config.files import UnreadableFile, jsonl_lines
from ..image_io import resolve_images
from ..phone.uitree import shuffled_layout
from .formats import DataError, detect_format, preference_sides, row_to_messages
from .multimodal import encode_chat, has_images, vision_batch
from .tokenize import IGNORE_INDEX, TokenizedExample, tokenize_messages


@dataclass
class DataStats:
    path: str
    rows: int = 0
    examples: int = 0
    truncated: int = 0
    skipped_bad: int = 0
    dropped_no_target: int = 0  # rows whose assistant tokens were all cut by truncation
    bad_rows: list = field(default_factory=list)  # "file:line: reason" of skipped rows (first 20)
    target_tokens: int = 0
    images: int = 0  # images in the kept examples
    image_tokens: int = 0  # their tokens (context, never targets)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class TokenizedPair:
    """A preference pair tokenized (``training.method: dpo``): its prompt with the chosen reply and with the rejected
    one, each tokenized as an SFT row is (the same chat template, images and assistant-only labels), so the two
    sequences share the prompt's tokens and differ in the reply they are trained on."""

    chosen: TokenizedExample
    rejected: TokenizedExample

    @property
    def target_tokens(self) -> int:
        return self.chosen.target_tokens + self.rejected.target_tokens

    @property
    def truncated(self) -> bool:
        return self.chosen.truncated or self.rejected.truncated


def sequences(examples) -> list[TokenizedExample]:
    """The tokenized sequences of training examples: rows as they are, each pair's chosen and rejected sides (what
    is collated, replayed and counted alike for every method)."""
    out = []
    for e in examples:
        out += [e.chosen, e.rejected] if isinstance(e, TokenizedPair) else [e]
    return out


def load_training_examples(
    path: str | Path,
    tokenizer,
    max_length: int,
    fmt: str = "auto",
    skip_bad_rows: bool = False,
    system_prompt: str | None = None,
    processor=None,
    ui_tree_layouts: str = "as_recorded",
    seed: int = 0,
    pairs: bool = False,
) -> tuple[list, DataStats]:
    """Tokenized examples of a JSONL file. A bad row raises DataError (file:line) unless skipped and counted.
    With a vision ``processor`` (``LoadedModel.processor``) rows may hold images, read relative to the file.
    ``ui_tree_layouts="shuffled"``: ui_tree rows through ``phone.uitree.shuffled_layout``, seeded by ``seed`` and
    the line number (the same rows each run of one seed). ``pairs``: the file holds preference pairs (TRL's
    conversational format, ``formats.preference_sides``), each a ``TokenizedPair``; a row that is no pair is a
    ConfigError naming data.train (the method reads a file of another kind), a pair a side of which truncation left
    without assistant tokens is dropped and counted."""
    path = str(path)
    base_dir = Path(path).parent
    stats = DataStats(path)
    examples: list = []
    try:
        for line in jsonl_lines(path):
            lineno, row = line.number, line.value
            stats.rows += 1
            if pairs and isinstance(row, dict):
                _refuse_a_row_that_is_no_pair(path, lineno, row)
            try:
                if line.error is not None:
                    raise ValueError(line.error)
                if ui_tree_layouts == "shuffled" and isinstance(row, dict):
                    row = shuffled_layout(row, random.Random(f"{seed}:{lineno}"))
                if pairs:
                    ex = TokenizedPair(
                        *(
                            _encode(side, tokenizer, processor, max_length, base_dir)
                            for side in preference_sides(row, system_prompt)
                        )
                    )
                else:
                    ex = _encode(row_to_messages(row, fmt, system_prompt), tokenizer, processor, max_length, base_dir)
            except (ValueError, TypeError) as err:
                if not skip_bad_rows:
                    raise DataError(path, lineno, f"{err} (set data.skip_bad_rows=true to skip such rows)") from None
                stats.skipped_bad += 1
                if len(stats.bad_rows) < 20:
                    stats.bad_rows.append(f"{path}:{lineno}: {err}")
                continue
            if any(seq.target_tokens == 0 for seq in sequences([ex])):
                stats.dropped_no_target += 1
                continue
            _count(stats, ex)
            examples.append(ex)
    except UnreadableFile as err:
        raise DataError(path, err.line, err.reason) from None
    stats.examples = len(examples)
    if not examples:
        raise DataError(
            path,
            None,
            f"no usable examples ({stats.rows} rows, {stats.skipped_bad} bad, "
            f"{stats.dropped_no_target} with no assistant tokens left after truncation to "
            f"data.max_length): add rows or raise data.max_length",
        )
    return examples, stats


def _refuse_a_row_that_is_no_pair(path: str, lineno: int, row: dict) -> None:
    """ConfigError naming data.train when training.method dpo is given a row that is not a preference pair."""
    if (kind := detect_format(row)) != "preference":
        raise ConfigError(
            [
                (
                    "data.train",
                    f"{path}:{lineno} is a {kind} row, not a preference pair (prompt, "
                    "chosen, rejected): training.method dpo trains on pairs such as `workbench agent "
                    "dagger`'s pairs.jsonl; train rows like this one with training.method sft",
                )
            ]
        )


def _count(stats: DataStats, ex) -> None:
    """A kept example's tokens, truncation and images into ``stats`` (a pair: both its sides)."""
    stats.truncated += ex.truncated
    stats.target_tokens += ex.target_tokens
    for seq in sequences([ex]):
        if seq.vision is not None:
            stats.images += len(seq.vision.images)
            stats.image_tokens += seq.vision.image_tokens


def _encode(messages: list[dict], tokenizer, processor, max_length: int, base_dir: Path) -> TokenizedExample:
    if processor is None:
        if has_images(messages):
            raise ValueError(
                "the row holds images, but the model is text-only: use a vision-language model "
                "(e.g. tiny-glm4v, autoglm-phone-9b) or remove the images"
            )
        return tokenize_messages(tokenizer, messages, max_length)
    return encode_chat(processor, resolve_images(messages, base_dir), max_length)


def micro_batch_indices(num_examples: int, micro_batch_size: int, seed: int, start: int = 0) -> Iterator[list[int]]:
    """Endless micro-batches of example indices, from micro-batch number ``start``.

    The stream is the concatenation of per-epoch permutations (seeded by seed and epoch), so the
    k-th micro-batch is the same whatever the accumulation split, and resuming at ``start`` continues
    the exact sequence.
    """
    k = start
    cache_epoch, perm = -1, None
    while True:
        idx = []
        for pos in range(k * micro_batch_size, (k + 1) * micro_batch_size):
            epoch, offset = divmod(pos, num_examples)
            if epoch != cache_epoch:
                g = torch.Generator().manual_seed(seed * 100_003 + epoch)
                perm = torch.randperm(num_examples, generator=g).tolist()
                cache_epoch = epoch
            idx.append(perm[offset])
        yield idx
        k += 1


def model_inputs(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """What the model's forward takes from a collated batch: every key but the labels (the loss is the engine's)."""
    return {k: v for k, v in batch.items() if k != "labels"}


def collate(examples: list[TokenizedExample], pad_token_id: int) -> dict[str, torch.Tensor]:
    """Right-pad to the longest example in the micro-batch (dynamic padding). Rows with images add their
    pixel values, grids and token types (``vision_batch``): the model takes every key but labels."""
    width = max(len(e.input_ids) for e in examples)
    ids = torch.full((len(examples), width), pad_token_id, dtype=torch.long)
    labels = torch.full((len(examples), width), IGNORE_INDEX, dtype=torch.long)
    mask = torch.zeros((len(examples), width), dtype=torch.long)
    for i, e in enumerate(examples):
        n = len(e.input_ids)
        ids[i, :n] = torch.tensor(e.input_ids)
        labels[i, :n] = torch.tensor(e.labels)
        mask[i, :n] = 1
    batch = {"input_ids": ids, "attention_mask": mask, "labels": labels}
    visions = [e.vision for e in examples if e.vision is not None]
    if visions:
        batch.update(vision_batch(ids, visions))
    return batch
