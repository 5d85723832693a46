"""Entry point of a training worker process: ``python -m workbench.engine.worker RUN_DIR``."""
from __future__ import annotations

import signal
import sys
from pathlib import Path

from ..config import load_config
from .run import train


def _sigterm(signum, frame):
    raise KeyboardInterrupt("terminated by SIGTERM")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    run_dir = Path(argv[0])
    signal.signal(signal.SIGTERM, _sigterm)
    cfg = load_config(run_dir / "config.json")
    try:
        train(cfg, run_dir)
    except BaseException as err:  # noqa: BLE001 - train() already logged run_failed
        print(f"run failed: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    from ..user_output import hide_third_party_deprecations

    hide_third_party_deprecations()  # worker.log is the user's output too
    sys.exit(main())
