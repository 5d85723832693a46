"""A run as every entry point starts it: the engine plus the instruments its config asks for.

This is where they are composed (the engine imports no instrument): ``workbench.train``, the CLI,
the demo and the worker process (``python -m workbench.training RUN_DIR``, what ``launch`` and each
torchrun rank run) all come through here.
"""
from __future__ import annotations

import signal
import sys
from pathlib import Path

from .config import RunConfig, load_config
from .diagnosis import observers_for
from .engine.run import RunResult, run_engine
from .eval.observer import task_observers
from .rewards import scorer_for
from .runs.layout import CONFIG_FILE


def train(cfg: RunConfig, run_dir: str | Path | None = None) -> RunResult:
    """Fine-tune ``cfg`` in this process (or as this rank of a torchrun job): see ``workbench.engine.run_engine``."""
    return run_engine(cfg, run_dir, observers=observers_for(cfg) + task_observers(cfg), scorer=scorer_for(cfg))


def _sigterm(signum, frame):
    raise KeyboardInterrupt("terminated by SIGTERM")


def worker_main(argv: list[str] | None = None) -> int:
    """The worker process of a launched run: trains ``RUN_DIR/config.json`` into RUN_DIR."""
    argv = sys.argv[1:] if argv is None else argv
    run_dir = Path(argv[0])
    signal.signal(signal.SIGTERM, _sigterm)  # a stop that timed out: save the emergency checkpoint, then exit
    cfg = load_config(run_dir / CONFIG_FILE)
    try:
        train(cfg, run_dir)
    except BaseException as err:  # noqa: BLE001 - train() already logged run_failed
        print(f"run failed: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    from .user_output import hide_third_party_deprecations

    hide_third_party_deprecations()  # worker.log is the user's output too
    sys.exit(worker_main())
