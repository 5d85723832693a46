"""data_samples/phone_episodes/: the committed rows are what the generator writes today (so a change to the phone
or the runtime format shows here), and they pass the data linter."""
from __future__ import annotations

import subprocess
import sys

from ..conftest import SAMPLES


def test_phone_episodes_are_current_and_clean():
    res = subprocess.run([sys.executable, str(SAMPLES / "make_phone_episodes.py"), "--check"], capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "phone_episodes: ok" in res.stdout
