"""What Linux's /proc says of a process: its state and process group (one reader of ``/proc/PID/stat``).

Used where a process may have ended without being reaped yet: a run's worker seen from another process
(``handle.RunHandle``), vLLM's process group waited out on stop (``serve.vllm``). Elsewhere than Linux: nothing known."""

from __future__ import annotations

from pathlib import Path

PROC = Path("/proc")


def _fields(stat_file: Path) -> list[str] | None:
    """The fields after "PID (comm)" of a stat file (comm may hold spaces and parentheses: split at the last ")"),
    or None when the process is gone (or /proc is not there)."""
    try:
        text = stat_file.read_text()
    except OSError:
        return None
    rest = text.rsplit(")", 1)
    return rest[1].split() if len(rest) == 2 else None


def is_zombie(pid: int) -> bool:
    """The process exited but its parent has not reaped it: it still answers ``kill(pid, 0)``."""
    fields = _fields(PROC / str(pid) / "stat")
    return bool(fields) and fields[0] == "Z"


def group_members(group: int) -> list[int]:
    """The live (not zombie) processes of process group ``group``."""
    members = []
    for stat_file in PROC.glob("[0-9]*/stat"):
        fields = _fields(stat_file)
        if fields and len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == group:
            members.append(int(stat_file.parent.name))
    return members
