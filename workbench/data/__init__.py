"""Training data: row formats, chat-template tokenization with assistant-only loss, batching."""

from .dataset import (
    DataStats,
    TokenizedPair,
    collate,
    load_training_examples,
    micro_batch_indices,
    model_inputs,
    sequences,
)
from .formats import DataError, detect_format, row_to_messages
from .tokenize import IGNORE_INDEX, TokenizedExample, tokenize_messages

__all__ = [
    "DataStats",
    "TokenizedPair",
    "sequences",
    "collate",
    "load_training_examples",
    "micro_batch_indices",
    "model_inputs",
    "DataError",
    "detect_format",
    "row_to_messages",
    "IGNORE_INDEX",
    "TokenizedExample",
    "tokenize_messages",
]
