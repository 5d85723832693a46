"""data_samples/phone_episodes/, phone_episodes_tree/ and own_app/: the committed rows are what the generator writes today
(so a change to the phone, its fresh phones or the runtime format shows here), and they pass the data linter."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ..conftest import SAMPLES


@pytest.mark.parametrize("observation, folder", [("screenshot", "phone_episodes"), ("ui_tree", "phone_episodes_tree")])
def test_phone_episodes_are_current_and_clean(observation, folder):
    res = subprocess.run(
        [sys.executable, str(SAMPLES / "make_phone_episodes.py"), "--check", "--observation", observation],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"{folder}: ok" in res.stdout


def test_own_app_demonstrations_are_current_and_clean():
    """data_samples/own_app/: the demonstrations recorded through the Demonstrator and their rows, as a fresh recording
    writes them today (a change to the recorder, the phone or the runtime format shows here)."""
    res = subprocess.run(
        [sys.executable, str(SAMPLES / "make_own_app.py"), "--check"], capture_output=True, text=True, timeout=600
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert "own_app: ok" in res.stdout


def test_the_9b_recipes_rows_are_current_and_clean():
    """data_samples/phone_episodes_1080/: the oracle's episodes at 1080x2400 with the runtime's Chinese prompt, as a
    fresh recording writes them today."""
    res = subprocess.run(
        [sys.executable, str(SAMPLES / "make_phone_episodes_1080.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert "phone_episodes_1080: ok" in res.stdout
