"""Export a run's event log to one CSV per event type (for spreadsheets, pandas, other dashboards).

    python extensions/export_csv.py runs/NAME [--out DIR]

An example of the extension contract: extensions read ``events.jsonl`` through
``workbench.events.read_events`` and never import the engine. Nested fields (census rows, memory
devices, configs) are written as JSON strings in their column.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from collections import defaultdict
from pathlib import Path

from workbench.events import read_events


def export(run_dir: str | Path, out_dir: str | Path | None = None) -> dict[str, Path]:
    run_dir = Path(run_dir)
    out_dir = Path(out_dir) if out_dir else run_dir / "csv"
    events, _ = read_events(run_dir / "events.jsonl", typed=False)
    by_type: dict[str, list[dict]] = defaultdict(list)
    for e in events:
        by_type[e.get("type", "unknown")].append(e)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {}
    for kind, rows in by_type.items():
        columns = list(dict.fromkeys(k for r in rows for k in r))
        path = out_dir / f"{kind}.csv"
        with open(path, "w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=columns)
            w.writeheader()
            for r in rows:
                w.writerow({k: json.dumps(v, ensure_ascii=False) if isinstance(v, (dict, list)) else v for k, v in r.items()})
        written[kind] = path
    return written


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir")
    p.add_argument("--out", help="output folder (default: RUN_DIR/csv)")
    args = p.parse_args(argv)
    if not (Path(args.run_dir) / "events.jsonl").is_file():
        print(f"error: {args.run_dir} has no events.jsonl", file=sys.stderr)
        return 2
    for kind, path in sorted(export(args.run_dir, args.out).items()):
        print(f"{kind:<14} {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
