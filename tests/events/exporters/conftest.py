from pathlib import Path

import pytest

from .sample_logs import fp16_run_events, write_run


@pytest.fixture
def fp16_run(tmp_path) -> Path:
    """RUN_DIR of the hand-written fp16 run's log."""
    return write_run(tmp_path / "runs" / "fp16-run", fp16_run_events())
