"""The launcher process of a distributed run: torchrun, plus the run's failure report.

``python -m workbench.distributed.launcher RUN_DIR CONFIG WORKER`` reads CONFIG (``RUN_DIR/config.json``; nodes other
than 0 pass their own, which differs in node_rank) and runs exactly
what ``torchrun --nproc_per_node N --nnodes M [--node_rank R --master_addr A --master_port P |
--standalone] -m WORKER RUN_DIR`` runs (torch.distributed.run's own entry point). The launcher names the
worker module (``workbench.training``): a layer below it, this module does not.
torchrun tears the job down when any rank fails; this wrapper then writes the one ``run_failed``
event naming the rank that failed first and how.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from .context import TORCHRUN_LAUNCHER_ENV
from .faults import FAILURES_DIR, failure_event

DEFAULT_MULTINODE_PORT = 29500


def torchrun_args(sharding, worker: str, run_dir: str | Path) -> list[str]:
    """torchrun's command-line arguments for this run, each rank running module ``worker`` (also what a user would
    type by hand)."""
    sh = sharding
    args = ["--nproc_per_node", str(sh.nproc_per_node), "--nnodes", str(sh.nnodes), "--max_restarts", "0"]
    if sh.nnodes == 1 and sh.master_port is None:
        args.append("--standalone")  # rendezvous on a free local port: several runs may share a machine
    else:
        args += [
            "--node_rank",
            str(sh.node_rank),
            "--master_addr",
            sh.master_addr,
            "--master_port",
            str(sh.master_port or DEFAULT_MULTINODE_PORT),
        ]
    return args + ["-m", worker, str(run_dir)]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    run_dir = Path(argv[0])
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    from ..config import load_config
    from ..events import EventWriter
    from ..runs.layout import EVENTS_FILE

    config_file, worker = argv[1:]
    cfg = load_config(config_file)  # other nodes: their own node_rank
    os.environ[TORCHRUN_LAUNCHER_ENV] = "1"
    if cfg.sharding.node_rank == 0:
        shutil.rmtree(run_dir / FAILURES_DIR, ignore_errors=True)  # records of an earlier attempt in this directory
    try:
        run(parse_args(torchrun_args(cfg.sharding, worker, run_dir)))
    except ChildFailedError as err:
        event = failure_event(run_dir, err.failures)
    except BaseException as err:  # noqa: BLE001 - SIGTERM (SignalException), rendezvous errors
        event = failure_event(run_dir)
        if event.rank == -1:
            from ..events import RunFailed

            event = RunFailed(
                step=event.step, error=f"launcher: {type(err).__name__}: {err}", error_type=type(err).__name__, rank=-1
            )
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
