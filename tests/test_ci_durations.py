"""The wall times that .ci/run's comments and docs/development.md cite as ``[STEP: N s]`` stay within 25% of the
last measured ones: .ci/durations.json, a copy of the test-artifacts/ci-durations.json that every .ci/run writes (each
step's wall time). After a CI run, copy that file over .ci/durations.json; this test then names each figure gone
stale."""
import json
import re

import pytest

from tests.conftest import REPO

CITED = re.compile(r"\[([a-z_]+): (\d+) s\]")
TOLERANCE = 0.25


def measured() -> dict:
    return json.loads((REPO / ".ci" / "durations.json").read_text(encoding="utf-8"))


def test_every_step_of_ci_is_measured_and_cited():
    run = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    steps = set(re.findall(r"^\s*step (\w+) ", run, re.M))
    assert steps == set(measured()), "every step .ci/run times has a measured time in .ci/durations.json, and only those"
    assert steps <= {name for name, _ in CITED.findall(run)}, "each step's comment cites its time as [STEP: N s]"


@pytest.mark.parametrize("doc", [".ci/run", "docs/development.md"])
def test_cited_durations_are_within_25_percent_of_the_measured_ones(doc):
    times, text = measured(), (REPO / doc).read_text(encoding="utf-8")
    cited = CITED.findall(text)
    assert cited, f"{doc} cites no CI step time"
    stale = [f"[{name}: {seconds} s] (measured {times.get(name)} s)" for name, seconds in cited
             if name not in times or abs(int(seconds) - times[name]) > TOLERANCE * times[name]]
    assert not stale, f"{doc}: stale CI times, copy the measured ones from .ci/durations.json: {stale}"
