"""One CSV per event type (for spreadsheets, pandas, other dashboards): ``RUN_DIR/csv/step.csv`` ...

Columns are the union of the fields of that type's events; nested fields (census rows, memory devices,
configs) are JSON strings in their column.
"""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path


class CsvExporter:
    description = "one CSV file per event type"
    default_dir = "csv"

    def __init__(self, out_dir: Path):
        self.out_dir = Path(out_dir)
        self.rows: dict[str, list[dict]] = defaultdict(list)
        self._changed: set[str] = set()

    @property
    def files(self) -> dict[str, Path]:
        return {kind: self.out_dir / f"{kind}.csv" for kind in self.rows}

    def write(self, events: list[dict]) -> None:
        for e in events:
            kind = e.get("type", "unknown")
            self.rows[kind].append(e)
            self._changed.add(kind)

    def flush(self) -> None:
        # A file is rewritten whole when its type got events: a field first seen late becomes a column.
        for kind in sorted(self._changed):
            rows = self.rows[kind]
            columns = list(dict.fromkeys(k for r in rows for k in r))
            with open(self.out_dir / f"{kind}.csv", "w", newline="", encoding="utf-8") as fh:
                writer = csv.DictWriter(fh, fieldnames=columns)
                writer.writeheader()
                for r in rows:
                    writer.writerow(
                        {
                            k: json.dumps(v, ensure_ascii=False) if isinstance(v, (dict, list)) else v
                            for k, v in r.items()
                        }
                    )
        self._changed.clear()

    def close(self) -> None:
        self.flush()
