"""An export in a child process (``workbench export --json --progress``, run as ``python -m workbench.export.job``:
the job and its child are one module, which names no higher layer), watched without waiting on it.

``ExportJob(run_dir, spec).start()`` returns at once; ``poll()`` reads what the child has printed so far
(its phase, and at the end its manifest or error) from files, never a pipe that could fill up, so a
notebook can poll it from its event loop while the kernel stays free. Plain Python, no widgets: the runs
panel's Export section draws it, a script can ``wait()`` on it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..runs.layout import exports_dir
from .exporter import MANIFEST, PHASES
from .parity import ParityGate
from .targets import TargetSpec

PHASE_LINE = re.compile(r"^workbench export: \[(\d+)/(\d+)\] (.*)$")


@dataclass
class ExportJobState:
    status: str = "starting"  # starting | running | passed | failed (its parity gate) | error | cancelled
    phase: int = 0  # the phase started last (1..len(PHASES)); 0 before the first
    phase_name: str = ""
    manifest: dict | None = None  # the export's manifest: passed, or failed with its figures
    message: str = ""  # the CLI's error (bad input) or failure line
    path: Path | None = None  # where the export is (OUT, or OUT.failed)
    seconds: float = 0.0
    log: list = field(default_factory=list)  # the child's stderr lines

    @property
    def done(self) -> bool:
        return self.status in ("passed", "failed", "error", "cancelled")

    @property
    def fraction(self) -> float:
        """Share of the phases finished (1.0 once done)."""
        return 1.0 if self.done else max(self.phase - 1, 0) / len(PHASES)


class ExportJob:
    """One ``workbench export`` of ``run_dir`` as ``spec`` into ``out`` (default RUN/exports/<spec.name>), with
    the target's default parity gate or ``gate``."""

    def __init__(
        self,
        run_dir: str | Path,
        spec: TargetSpec,
        out: str | Path | None = None,
        *,
        overwrite: bool = False,
        max_examples: int | None = None,
        gate: ParityGate | None = None,
    ):
        self.run_dir = Path(run_dir)
        self.spec = spec
        self.out = Path(out) if out else exports_dir(self.run_dir) / spec.name
        self.overwrite = overwrite
        self.max_examples = max_examples
        self.gate = gate  # None: the target's default gate
        self.state = ExportJobState()
        self._process: subprocess.Popen | None = None
        self._files: tempfile.TemporaryDirectory | None = None
        self._t0 = 0.0

    def command(self) -> list[str]:
        cmd = [
            sys.executable,
            "-m",
            "workbench.export.job",
            str(self.run_dir),
            "--target",
            self.spec.target,
            "--out",
            str(self.out),
            "--json",
            "--progress",
        ]
        if self.spec.target == "merged":
            cmd += ["--dtype", self.spec.dtype]
        if self.spec.target == "int8":
            cmd += ["--int8-mode", self.spec.int8_mode]
        if self.spec.target == "gguf":
            cmd += ["--quant", self.spec.quant]
        if self.max_examples:
            cmd += ["--max-examples", str(self.max_examples)]
        if self.gate is not None:
            cmd += [
                "--max-logit-diff",
                repr(self.gate.max_logit_diff),
                "--min-agreement",
                repr(self.gate.min_agreement),
                "--max-loss-increase",
                repr(self.gate.max_loss_increase),
            ]
        return cmd + (["--force"] if self.overwrite else [])

    def start(self) -> ExportJob:
        self._files = tempfile.TemporaryDirectory(prefix="workbench-export-job-")
        out, err = (open(Path(self._files.name) / name, "wb") for name in ("stdout", "stderr"))
        with out, err:  # the child keeps its own handles
            self._process = subprocess.Popen(
                self.command(),
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        self._t0 = time.monotonic()
        self.state = ExportJobState(status="running")
        return self

    def _read(self, name: str) -> str:
        return (Path(self._files.name) / name).read_text(errors="replace") if self._files else ""

    def poll(self) -> ExportJobState:
        """The job's state now (reads the child's output so far; the result once it has exited)."""
        s = self.state
        if self._process is None or s.done:
            return s
        s.seconds = time.monotonic() - self._t0
        s.log = self._read("stderr").splitlines()
        for line in s.log:
            if m := PHASE_LINE.match(line):
                s.phase, s.phase_name = int(m.group(1)), m.group(3)
        rc = self._process.poll()
        if rc is not None:
            self._finish(rc)
        return s

    def _finish(self, rc: int) -> None:
        s = self.state
        messages = [
            line.removeprefix("workbench export: ")
            for line in s.log
            if line.startswith("workbench export: ") and not PHASE_LINE.match(line)
        ]
        if rc == 0:
            s.status, s.path = "passed", self.out
            s.manifest = json.loads(self._read("stdout"))
        elif rc == 1 and (failed := self.out.with_name(self.out.name + ".failed") / MANIFEST).is_file():
            s.status, s.path = "failed", failed.parent  # the figures that missed the gate are in its manifest
            s.manifest = json.loads(failed.read_text())
            s.message = messages[0] if messages else "failed its parity gate"
        elif s.status != "cancelled":
            s.status = "error"
            s.message = (
                messages[-1].removeprefix("error: ")
                if messages
                else "\n".join(s.log[-20:]) or f"workbench export exited with code {rc}"
            )
        if self._files is not None:
            self._files.cleanup()
            self._files = None

    def cancel(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self.state.status = "cancelled"
            self._process.terminate()
            self._process.wait(30)
            self.state.message = "cancelled"
            self._finish(self._process.returncode)

    def wait(self, timeout: float | None = None, interval: float = 0.2) -> ExportJobState:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.poll().done:
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"export still running after {timeout} s")
            time.sleep(interval)
        return self.state


def main(argv: list[str] | None = None) -> int:
    """The job's child process: ``workbench export`` with the same parser and exit codes."""
    from .cli import add_parser, run

    export = add_parser(argparse.ArgumentParser(prog="workbench").add_subparsers())
    return run(export.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
