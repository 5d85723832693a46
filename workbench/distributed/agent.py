"""The launcher process of a distributed run: torchrun, plus the run's failure report.

``python -m workbench.distributed.agent RUN_DIR [CONFIG]`` reads ``RUN_DIR/config.json`` (or CONFIG: nodes other
than 0 pass their own, which differs in node_rank) and runs exactly
what ``torchrun --nproc_per_node N --nnodes M [--node_rank R --master_addr A --master_port P |
--standalone] -m workbench.training RUN_DIR`` runs (torch.distributed.run's own entry point).
torchrun tears the job down when any rank fails; this wrapper then writes the one ``run_failed``
event naming the rank that failed first and how.
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from .context import AGENT_ENV
from .faults import FAILURES_DIR, failure_event

DEFAULT_MULTINODE_PORT = 29500


def torchrun_args(sharding, run_dir: str | Path) -> list[str]:
    """torchrun's command-line arguments for this run (also what a user would type by hand)."""
    sh = sharding
    args = ["--nproc_per_node", str(sh.nproc_per_node), "--nnodes", str(sh.nnodes), "--max_restarts", "0"]
    if sh.nnodes == 1 and sh.master_port is None:
        args.append("--standalone")  # rendezvous on a free local port: several runs may share a machine
    else:
        args += ["--node_rank", str(sh.node_rank), "--master_addr", sh.master_addr,
                 "--master_port", str(sh.master_port or DEFAULT_MULTINODE_PORT)]
    return args + ["-m", "workbench.training", str(run_dir)]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    run_dir = Path(argv[0])
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    from ..config import load_config
    from ..events import EventWriter
    from ..runs.layout import CONFIG_FILE, EVENTS_FILE

    cfg = load_config(argv[1] if len(argv) > 1 else run_dir / CONFIG_FILE)  # other nodes: their own node_rank
    os.environ[AGENT_ENV] = "1"
    if cfg.sharding.node_rank == 0:
        shutil.rmtree(run_dir / FAILURES_DIR, ignore_errors=True)  # records of an earlier attempt in this directory
    try:
        run(parse_args(torchrun_args(cfg.sharding, run_dir)))
    except ChildFailedError as err:
        event = failure_event(run_dir, err.failures)
    except BaseException as err:  # noqa: BLE001 - SIGTERM (SignalException), rendezvous errors
        event = failure_event(run_dir)
        if event.rank == -1:
            from ..events import RunFailed

            event = RunFailed(step=event.step, error=f"launcher: {type(err).__name__}: {err}",
                              error_type=type(err).__name__, rank=-1)
    else:
        return 0
    writer = EventWriter(run_dir / EVENTS_FILE, rank=event.rank)
    writer.emit(event)
    writer.close()
    print(f"run failed: {event.error}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    from ..user_output import hide_third_party_deprecations

    hide_third_party_deprecations()  # worker.log is the user's output too
    sys.exit(main())
