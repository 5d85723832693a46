"""Re-attaching to a live run from another process (a restarted kernel, a second terminal) and stopping it."""

import json
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import REPO
from workbench.runs import attach
from workbench.training import launch

# A new Python process that knows only the run directory: attach, read the status, stop, report.
ATTACH_AND_STOP = """
import json, sys
from workbench.runs import attach
handle = attach(sys.argv[1])
before = handle.status()
after = handle.stop(timeout=120)
print(json.dumps({"pid": handle.pid, "before": before, "after": after}))
"""


def _wait_for_steps(handle, n: int, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sum(e.type == "step" for e in handle.events()[0]) >= n:
            return
        assert handle.is_running(), f"the run ended before step {n}: {handle.status()}"
        time.sleep(0.2)
    raise TimeoutError(f"no step {n} in {timeout} s")


def test_a_new_process_attaches_to_a_live_run_and_stops_it(make_cfg):
    handle = launch(make_cfg(**{"schedule.max_steps": 100000}))
    try:
        _wait_for_steps(handle, 2)
        out = subprocess.run(
            [sys.executable, "-c", ATTACH_AND_STOP, str(handle.run_dir)],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=240,
        )
        assert out.returncode == 0, out.stderr[-2000:]
        seen = json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        if handle.is_running():  # never leave a 100000-step worker behind a failed assertion
            handle.stop(timeout=60)
    assert seen == {"pid": handle.pid, "before": "running", "after": "stopped"}
    assert handle.wait(timeout=30) == "stopped" and attach(handle.run_dir).status() == "stopped"
    events, _ = handle.events()
    end = events[-1]
    assert end.type == "run_finished" and end.stopped and end.stop_reason == "stop requested"
    saved = [e for e in events if e.type == "checkpoint" and e.kind == "resumable"]
    assert saved and saved[-1].step == end.step and Path(saved[-1].path).is_dir()
