"""The event log shared by every rank of a run.

Decision: one file, ``events.jsonl``, that every rank appends to. Each event is written with a
single ``write(2)`` on an ``O_APPEND`` descriptor: on Linux a regular-file write holds the inode
lock for its whole length, so concurrent lines never interleave, whatever their size (Python's
text buffering could split a long line into several writes; this writer never does). Readers stay
unchanged. Multi-node runs need the run directory on a shared local-semantics filesystem; NFS does
not make O_APPEND atomic across hosts (docs/distributed.md).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from ..events import EventWriter
from ..events.log import _clean


class SharedEventWriter(EventWriter):
    def __init__(self, path: str | Path, rank: int = 0):
        self.path = Path(path)
        self.rank = rank
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def emit(self, event) -> None:
        d = event.to_dict()
        d["rank"] = self.rank
        line = (json.dumps(_clean(d), ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
        written = os.write(self._fd, line)
        if written != len(line):  # a full disk; never leave half a line for readers to choke on
            raise OSError(f"short write to {self.path}: {written} of {len(line)} bytes")

    def close(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None
