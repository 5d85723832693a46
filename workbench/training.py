"""A run as every entry point starts it: the engine plus the instruments its config asks for.

This is where they are composed (the engine imports no instrument): ``workbench.train``, the CLI,
the demo and the worker process (``python -m workbench.training RUN_DIR``, what ``launch`` and each
torchrun rank run) all come through here. ``launch`` lives here, next to the worker it starts: the
launcher and its child process are one module, so no lower layer names a higher one's entry point.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from .config import RunConfig, load_config, replace, save_config
from .diagnosis import observers_for
from .engine.run import RunResult, run_engine
from .eval.observer import task_observers
from .rewards import scorer_for
from .runs.handle import RunHandle
from .runs.layout import CONFIG_FILE, LAUNCHED_ENV, new_run_dir, refuse_existing_run

WORKER = "workbench.training"  # this module: what the worker process and each torchrun rank run


def train(cfg: RunConfig, run_dir: str | Path | None = None) -> RunResult:
    """Fine-tune ``cfg`` in this process (or as this rank of a torchrun job), with the instruments its config asks
    for and, for GRPO, the rewards of ``rl.rewards`` (``workbench.engine.run_engine`` is the bare loop).

    Args:
        cfg: the run's configuration (``config.load_config``, or ``config.assemble.assemble`` of a command's inputs).
        run_dir: where the run goes (default: a new directory under ``output.runs_dir``).

    Returns:
        The ``RunResult``: losses, eval losses, the adapter's path, whether it stopped early. Everything it did is in
        the run directory's ``events.jsonl``. ConfigError or DataError, naming the field or file:line, before any step.
    """
    return run_engine(cfg, run_dir, observers=observers_for(cfg) + task_observers(cfg), scorer=scorer_for(cfg))


def ranks_env(cfg: RunConfig) -> dict[str, str]:
    """What the processes of a distributed run need to load its model without each downloading it: a hub model is
    fetched once here, and its ranks read the cache offline (``HF_HUB_OFFLINE``)."""
    from .models import fetch_hub_weights

    if cfg.sharding.distributed and fetch_hub_weights(cfg.model.source):
        return {"HF_HUB_OFFLINE": "1"}
    return {}


def launch(cfg: RunConfig, run_dir: str | Path | None = None, env: dict[str, str] | None = None) -> RunHandle:
    """Start ``cfg`` in a new worker process (a distributed ``sharding.strategy``: torchrun with its
    ranks); returns at once. The handle (``workbench.runs.RunHandle``) gives status, stop, wait and events;
    a notebook kernel stays responsive because training never runs inside it. ``env``: variables set for the worker
    on top of this process's."""
    cfg = replace(cfg, **{"output.progress_bar": False})  # the worker logs to a file, not a terminal
    run_dir = Path(run_dir) if run_dir else new_run_dir(cfg)
    run_dir.mkdir(parents=True, exist_ok=True)
    node = cfg.sharding.node_rank
    # Nodes other than 0 join a run directory that node 0 owns (shared filesystem): their own config and log.
    suffix = f"-node{node}" if node else ""
    if cfg.sharding.distributed:
        # torchrun (through the workbench launcher, which reports a failed rank) starts the ranks.
        if not node:
            refuse_existing_run(cfg, run_dir)
        config_path = run_dir / f"config{suffix}.json"
        command = [sys.executable, "-m", "workbench.distributed.launcher", str(run_dir), str(config_path), WORKER]
    else:
        config_path = run_dir / CONFIG_FILE
        command = [sys.executable, "-m", WORKER, str(run_dir)]
    save_config(cfg, config_path)
    env = {**(env or {}), **ranks_env(cfg)}
    log = open(run_dir / f"worker{suffix}.log", "ab")
    # A new session: stop() can signal the launcher and every rank it started as one process group.
    proc = subprocess.Popen(
        command,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        cwd=os.getcwd(),
        env={**os.environ, **(env or {}), LAUNCHED_ENV: "1"},
    )
    log.close()
    (run_dir / f"worker{suffix}.pid").write_text(str(proc.pid))
    return RunHandle(run_dir, proc)


def train_to_end(cfg: RunConfig, threads: int | None = None) -> tuple[Path, str]:
    """Train ``cfg`` to its end in a worker process (``launch``; torchrun and its ranks for a distributed
    ``sharding.strategy``) and wait for it; (run directory, status: finished | stopped | failed). The caller's memory
    stays its own: a run that trained in the caller's process would leave its peak there (a bench that trained GRPO
    in-process held 12 GB after it and was killed for memory when the next run's two ranks started). ``threads``: the
    worker's torch threads (OMP_NUM_THREADS) for a run of one process; torchrun gives each rank one. Interrupted, the
    run is stopped (it saves a checkpoint) before the interrupt goes on."""
    handle = launch(cfg, env=None if threads is None or cfg.sharding.distributed else {"OMP_NUM_THREADS": str(threads)})
    try:
        return handle.run_dir, handle.wait()
    except BaseException:
        handle.stop()
        raise


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
