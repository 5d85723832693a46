"""What reaches the user's terminal (or a worker's log): tables of text, the one way (``text_table``,
``table_cell``); and no noise: third-party deprecation notices are for those libraries' maintainers, not for
someone fine-tuning a model, so the command-line entry points hide them. Library use (notebooks, the Python API,
the test suite) keeps Python's own warning filters: there they stay visible to the developers who can act on them."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Collection, Sequence
from typing import Any


def table_cell(value: Any) -> str:
    """A value as a table shows it: ``-`` for None, a float to 3 decimals, anything else as ``str``."""
    return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def text_table(rows: Sequence[Sequence[str]], right: Collection[int] = (), indent: str = "") -> list[str]:
    """``rows`` (the header first, every cell a string) as lines of columns two spaces apart, each as wide as its
    widest cell: left-aligned, or right-aligned for the column indices in ``right``; ``indent`` before each line,
    trailing spaces dropped."""
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        (
            indent
            + "  ".join(cell.rjust(w) if i in right else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths)))
        ).rstrip()
        for row in rows
    ]


DEPRECATIONS = (DeprecationWarning, PendingDeprecationWarning, FutureWarning)


def hide_third_party_deprecations() -> None:
    """Ignore deprecation warnings raised from modules outside ``workbench`` (ours still show)."""
    for category in DEPRECATIONS:
        warnings.filterwarnings("ignore", category=category, module=r"(?!workbench(\.|$))")


class _ImportChatter(logging.Filter):
    """Log lines third-party imports emit on every model load, for those libraries' maintainers: transformers
    imports torchao (installed with the export and test extras) as it loads any model class; torchao logs each
    compiled kernel it cannot load on this machine, and torch warns about torchao's pytree registrations;
    accelerate (imported by peft) imports DeepSpeed where it is installed, whose logger tells stdout, not
    stderr, that it found no GPU: a line that broke ``workbench export --json``'s output. bitsandbytes (a quantized
    base) warns on a CPU with AVX512-BF16 that it failed to load an optional faster kernel from the hub, and its int8
    layer logs on every matmul of an evaluation that it casts its input to fp16 (LLM.int8 always does)."""

    NOISE = (
        "Skipping import of cpp extensions",
        "Failed to load ",
        "Calling register_constant() on Enum subclasses",
        "Setting accelerator to CPU",
        "MatMul8bitLt: inputs will be cast",
    )

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(n in message for n in self.NOISE)


_IMPORT_CHATTER = _ImportChatter()


def hide_import_chatter() -> None:
    """Drop those lines (only those) wherever workbench loads models: the CLI, workers, notebooks, the server.
    A filter on those loggers: no import, nothing else of theirs is hidden; adding it again is a no-op."""
    for name in (
        "torchao",
        "torch.utils._pytree",
        "DeepSpeed",
        "bitsandbytes.backends.cpu.ops",
        "bitsandbytes.autograd._functions",
    ):
        logging.getLogger(name).addFilter(_IMPORT_CHATTER)
