"""Run the engine in its own process; the handle it returns (``workbench.runs.RunHandle``) gives status,
stop, wait and events. The notebook kernel stays responsive because training never runs inside it."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ..config import RunConfig, replace, save_config
from ..runs.handle import RunHandle
from ..runs.layout import CONFIG_FILE, LAUNCHED_ENV, new_run_dir, refuse_existing_run


def launch(cfg: RunConfig, run_dir: str | Path | None = None) -> RunHandle:
    """Start ``cfg`` in a new worker process (a distributed ``sharding.strategy``: torchrun with its
    ranks); returns at once."""
    cfg = replace(cfg, **{"output.progress_bar": False})  # the worker logs to a file, not a terminal
    run_dir = Path(run_dir) if run_dir else new_run_dir(cfg)
    run_dir.mkdir(parents=True, exist_ok=True)
    node = cfg.sharding.node_rank
    # Nodes other than 0 join a run directory that node 0 owns (shared filesystem): their own config and log.
    suffix = f"-node{node}" if node else ""
    if cfg.sharding.distributed:
        # torchrun (through the workbench agent, which reports a failed rank) starts the ranks.
        if not node:
            refuse_existing_run(cfg, run_dir)
        config_path = run_dir / f"config{suffix}.json"
        command = [sys.executable, "-m", "workbench.distributed.agent", str(run_dir), str(config_path)]
    else:
        config_path = run_dir / CONFIG_FILE
        command = [sys.executable, "-m", "workbench.training", str(run_dir)]
    save_config(cfg, config_path)
    log = open(run_dir / f"worker{suffix}.log", "ab")
    # A new session: stop() can signal the launcher and every rank it started as one process group.
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=os.getcwd(),
                            env={**os.environ, LAUNCHED_ENV: "1"})
    log.close()
    (run_dir / f"worker{suffix}.pid").write_text(str(proc.pid))
    return RunHandle(run_dir, proc)
