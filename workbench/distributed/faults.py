"""Which rank brought a distributed run down, and why.

When one rank dies the others fail too, a moment later: a collective loses its peer, or torchrun
terminates them. Each rank that can still run Python records its error and how it failed
(``failures/rank-N.json``); a rank killed outright records nothing. The launcher combines these
with torchrun's exit codes and signals and names the first *own* failure as the cause: an
exception or a kill beats "lost a peer", which beats "terminated by the launcher".
"""

from __future__ import annotations

import json
import os
import signal
import time
import traceback
from pathlib import Path

from ..events import RunFailed, read_events
from ..runs.layout import EVENTS_FILE

FAILURES_DIR = "failures"
# Messages a rank sees when a *peer* vanished (gloo, NCCL, torch's store): symptoms, not causes.
PEER_LOST = (
    "connection closed by peer",
    "connection reset by peer",
    "broken pipe",
    "communicator was aborted",
    "socket timeout",
    "read error",
    "connection refused",
    "timed out",
    "nccl error",
)
_PRIORITY = {"error": 0, "killed": 0, "exited": 0, "peer": 1, "terminated": 2}


def classify(err: BaseException) -> str:
    """error (this rank's own fault) | peer (a collective lost another rank) | terminated (told to stop)."""
    if isinstance(err, KeyboardInterrupt):
        return "terminated"
    import torch.distributed as dist

    text = f"{type(err).__name__}: {err}".lower()
    comm_types = tuple(
        t
        for t in (
            getattr(dist, "DistBackendError", None),
            getattr(dist, "DistNetworkError", None),
            getattr(dist, "DistStoreError", None),
        )
        if t is not None
    )
    if isinstance(err, comm_types) or (isinstance(err, RuntimeError) and any(p in text for p in PEER_LOST)):
        return "peer"
    return "error"


def record_failure(
    run_dir: Path,
    rank: int,
    step: int,
    err: BaseException,
    checkpoint: Path | None = None,
    checkpoint_error: str | None = None,
) -> None:
    """``checkpoint``: the emergency checkpoint this rank saved (or the newest one holding its step);
    ``checkpoint_error``: why saving the emergency checkpoint failed."""
    folder = Path(run_dir) / FAILURES_DIR
    folder.mkdir(parents=True, exist_ok=True)
    record = {
        "rank": rank,
        "step": step,
        "time": time.time(),
        "cause": classify(err),
        "error_type": type(err).__name__,
        "error": str(err) or type(err).__name__,
        "traceback": traceback.format_exc(limit=20),
        "pid": os.getpid(),
        "checkpoint": str(checkpoint) if checkpoint else None,
        "checkpoint_error": checkpoint_error,
    }
    tmp = folder / f".rank-{rank}.json.tmp"
    tmp.write_text(json.dumps(record) + "\n")
    tmp.rename(folder / f"rank-{rank}.json")


def read_failures(run_dir: Path) -> dict[int, dict]:
    folder = Path(run_dir) / FAILURES_DIR
    out = {}
    for f in sorted(folder.glob("rank-*.json")) if folder.is_dir() else []:
        try:
            rec = json.loads(f.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        out[int(rec["rank"])] = rec
    return out


def _signal_name(exitcode: int) -> str | None:
    if exitcode is not None and exitcode < 0:
        try:
            return signal.Signals(-exitcode).name
        except ValueError:
            return f"signal {-exitcode}"
    return None


def _last_step(run_dir: Path) -> int:
    events, _ = read_events(Path(run_dir) / EVENTS_FILE, typed=False)
    steps = [e["step"] for e in events if e.get("type") == "step"]
    return steps[-1] if steps else 0


def failure_event(run_dir: Path, process_failures: dict | None = None) -> RunFailed:
    """The run_failed event naming the root-cause rank. ``process_failures``: torchrun's
    ``ChildFailedError.failures`` (global rank -> ProcessFailure)."""
    records = read_failures(run_dir)
    process_failures = process_failures or {}
    candidates = []
    for rank in sorted(set(records) | set(process_failures)):
        rec, pf = records.get(rank), process_failures.get(rank)
        sig = _signal_name(pf.exitcode) if pf is not None else None
        if rec is not None:
            cause, when = rec["cause"], rec["time"]
        else:  # no Python-level record: killed (SIGKILL, OOM killer) or died in native code
            cause, when = ("killed" if sig else "exited"), (pf.timestamp if pf is not None else time.time())
        candidates.append((_PRIORITY[cause], when, rank, cause, rec, pf, sig))
    if not candidates:
        return RunFailed(
            step=_last_step(run_dir),
            error="the distributed run failed but no rank reported why (see worker.log)",
            error_type="RunFailed",
            rank=-1,
        )
    candidates.sort(key=lambda c: c[:3])
    _, _, rank, cause, rec, pf, sig = candidates[0]
    where = f"rank {rank}" + (f" (local rank {pf.local_rank}, pid {pf.pid})" if pf is not None else "")
    if rec is not None and cause != "peer" and cause != "terminated":
        error = f"{where} failed: {rec['error_type']}: {rec['error']}"
        error_type, tb, step = rec["error_type"], rec["traceback"], rec["step"]
    elif cause == "killed":
        error = f"{where} was killed by {sig} (exit code {pf.exitcode})"
        error_type, tb, step = "RankKilled", "", _last_step(run_dir)
    elif cause == "exited":
        code = pf.exitcode if pf is not None else "unknown"
        error = f"{where} exited with code {code} without a Python error (native crash or os._exit)"
        error_type, tb, step = "RankExited", "", _last_step(run_dir)
    else:  # every rank only saw the others go: report the earliest
        error = f"{where} lost its peers: {rec['error_type']}: {rec['error']}"
        error_type, tb, step = rec["error_type"], rec["traceback"], rec["step"]
    others = [f"rank {c[2]}: {c[3]}" for c in candidates[1:]]
    if others:
        error += " | then " + ", ".join(others)
    saved = next((r["checkpoint"] for r in records.values() if r.get("checkpoint")), None)  # rank 0's, if any
    saving = next((r["checkpoint_error"] for r in records.values() if r.get("checkpoint_error")), None)
    return RunFailed(
        step=step,
        error=error,
        error_type=error_type,
        traceback=tb,
        rank=rank,
        checkpoint=saved,
        checkpoint_error=saving,
    )
