"""The CI step times stay true. ``.ci/run`` ends by comparing each step's measured wall time with .ci/durations.json
(``.ci/durations.py``) and, on the CPU class the file's times were measured on, fails when one is off by more than its
margin; the figures docs/development.md and .ci/run's comments cite as ``[STEP: N s]`` stay within 25% of that file.
After a change that moves a step's time, copy test-artifacts/ci-durations.json (what the run measured) into
.ci/durations.json's steps and update the figures."""

import importlib.util
import json
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO

CITED = re.compile(r"\[([a-z_]+): (\d+) s\]")
_spec = importlib.util.spec_from_file_location("ci_durations", REPO / ".ci" / "durations.py")
ci_durations = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ci_durations)
TOLERANCE = ci_durations.MARGIN


def stated() -> dict:
    return json.loads((REPO / ".ci" / "durations.json").read_text(encoding="utf-8"))


def measured() -> dict:
    """Every stated step's time: CI's, the parts timed inside them, the nightly ones."""
    return ci_durations.stated_steps(stated())


HERE = ci_durations.cpu_class()  # this machine's class: the stated times are held on it
ELSEWHERE = "avx2" if HERE != "avx2" else "avx512_bf16"


def _listed(run: str, name: str) -> list[str]:
    return re.search(rf'^{name}="([\w ]+)"$', run, re.M).group(1).split()


def test_every_step_of_ci_is_measured_and_cited():
    run, times = (REPO / ".ci" / "run").read_text(encoding="utf-8"), stated()
    top = re.findall(r"^run_step (\w+) ", run, re.M)
    inside = re.findall(r"^\s+step (\w+) ", run, re.M)  # called within a step's function
    assert set(top) | set(inside) == set(measured()), (
        "every step .ci/run times has a stated time in .ci/durations.json, and only those"
    )
    assert _listed(run, "CI_STEPS") == list(times["steps"]) == [n for n in top if n in times["steps"]], (
        "CI_STEPS, in order: .ci/durations.json's steps"
    )
    assert _listed(run, "NIGHTLY_STEPS") == list(times["nightly"]) and set(inside) == set(times["inside"])
    assert set(top) | set(inside) <= {name for name, _ in CITED.findall(run)}, "each step's comment cites [STEP: N s]"
    assert set(times["estimated"]) <= set(measured())


def test_cis_stated_steps_with_the_announced_ones_fit_the_limit():
    """CI's steps (their parts timed inside them counted once) and the budget of every step announced but not yet in
    .ci/run sum to at most LIMIT_S: room left below CI's 90 minutes."""
    times = stated()
    total = ci_durations.ci_total(times)
    assert total == sum(times["steps"].values()) + sum(
        t for n, t in ci_durations.RESERVED.items() if n not in times["steps"]
    )
    assert total <= ci_durations.LIMIT_S, f"CI's stated steps take {total} s, more than {ci_durations.LIMIT_S} s"
    more = ci_durations.LIMIT_S - total + 1  # a step that takes one second more than the room left
    assert ci_durations.ci_total({**times, "steps": {**times["steps"], "more": more}}) > ci_durations.LIMIT_S


@pytest.mark.parametrize("doc", [".ci/run", "docs/development.md"])
def test_cited_durations_are_within_25_percent_of_the_measured_ones(doc):
    times, text = measured(), (REPO / doc).read_text(encoding="utf-8")
    cited = CITED.findall(text)
    assert cited, f"{doc} cites no CI step time"
    stale = [
        f"[{name}: {seconds} s] (measured {times.get(name)} s)"
        for name, seconds in cited
        if name not in times or abs(int(seconds) - times[name]) > TOLERANCE * times[name]
    ]
    assert not stale, f"{doc}: stale CI times, copy the measured ones from .ci/durations.json: {stale}"


def _ci_functions() -> str:
    """.ci/run's own ``step``, ``not_run`` and ``run_step`` functions, as the run defines them."""
    run = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    return "\n".join(
        re.search(rf"^{name}\(\) {{\n.*?^}}\n", run, re.M | re.S).group(0) for name in ("step", "not_run", "run_step")
    )


def _run_ci(tmp_path, stated: dict, script: str, measured_on: str = HERE) -> subprocess.CompletedProcess:
    """``script`` run with .ci/run's step functions in ``tmp_path``, then .ci/run's last command (the comparison
    with ``stated``, as .ci/durations.json states times measured on the CPU class ``measured_on``)."""
    (tmp_path / "stated.json").write_text(json.dumps({"measured_on": measured_on, "steps": stated}))
    last = (REPO / ".ci" / "run").read_text(encoding="utf-8").rstrip().splitlines()[-1]
    assert last.startswith("python3 .ci/durations.py test-artifacts/ci-durations.json .ci/durations.json"), last
    check = last.replace("python3 .ci/durations.py", f"{sys.executable} {REPO / '.ci' / 'durations.py'}").replace(
        ".ci/durations.json", str(tmp_path / "stated.json")
    )
    setup = "set -euo pipefail\nmkdir -p test-artifacts/ci-durations test-artifacts/ci-not-run\n"
    return subprocess.run(
        ["bash", "-c", setup + _ci_functions() + script + "\n" + check],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_run_whose_steps_take_their_stated_times_passes(tmp_path):
    done = _run_ci(tmp_path, {"quick": 1, "skipped": 2000}, "step quick true\nstep skipped not_run skipped 'no bf16'")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads((tmp_path / "test-artifacts" / "ci-durations.json").read_text()) == {"quick": 0, "skipped": 0}
    assert "[ci] durations: skipped 0 s (stated 2000 s): not run here" in done.stdout


def test_a_step_off_its_stated_time_by_more_than_the_margin_fails_the_run_and_names_it(tmp_path):
    done = _run_ci(tmp_path, {"quick": 1, "suite": 600}, "step quick true\nstep suite true")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "  - suite: measured 0 s, stated 600 s (off by -600 s, more than 150 s)" in done.stdout
    assert "quick" not in done.stdout.split("off .ci/durations.json")[1]  # 1 s off: within the 90 s slack
    assert "copy test-artifacts/ci-durations.json into .ci/durations.json" in done.stdout
    # a step the file does not state, or one it states that did not run, is off too
    done = _run_ci(tmp_path, {"quick": 1, "gone": 100}, "step quick true\nstep new true")
    assert done.returncode == 1 and "  - gone: stated 100 s" in done.stdout and "  - new: measured 0 s" in done.stdout


def test_on_another_cpu_class_the_times_are_printed_not_held_but_the_steps_must_still_match(tmp_path):
    done = _run_ci(tmp_path, {"quick": 1, "suite": 600}, "step quick true\nstep suite true", measured_on=ELSEWHERE)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"the stated times were measured on {ELSEWHERE}: compared, not held" in done.stdout
    assert "  - suite: measured 0 s, stated 600 s" in done.stdout  # still printed
    done = _run_ci(tmp_path, {"quick": 1, "gone": 100}, "step quick true", measured_on=ELSEWHERE)
    assert done.returncode == 1 and "  - gone: stated 100 s" in done.stdout


def test_the_cpu_class_is_the_best_its_flags_name(tmp_path):
    for flags, expected in [
        ("fpu avx2 avx512f avx512_bf16 amx_bf16", "amx_bf16"),
        ("avx2 avx512_bf16", "avx512_bf16"),
        ("sse4_2 avx2", "avx2"),
        ("sse4_2", "other"),
    ]:
        (tmp_path / "cpuinfo").write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
        assert ci_durations.cpu_class(str(tmp_path / "cpuinfo")) == expected
    assert ci_durations.cpu_class(str(tmp_path / "missing")) == "other"


def test_the_margin_is_a_quarter_or_90_seconds_whichever_is_more_unless_a_step_states_its_own():
    off = ci_durations.off_steps
    assert off({"suite": 750}, {"suite": 603}) == {} and list(off({"suite": 760}, {"suite": 603})) == ["suite"]
    assert off({"system": 5}, {"system": 90}) == {} and list(off({"vllm": 585}, {"vllm": 131})) == ["vllm"]
    assert off({"agent": 0}, {"agent": 2807}, not_run=["agent"]) == {}
    assert off({"agent": 1872}, {"agent": 2807}) == {}  # its own margin: the seeds' spread


def test_a_run_of_named_steps_runs_those_alone_and_compares_only_them(tmp_path):
    """`bash .ci/run STEP ...` (how each step is timed alone): the steps not named are not run and not compared."""
    script = 'SELECTED="quick"\nrun_step quick true\nrun_step other false\nrun_step recipes_and_demo false'
    done = _run_ci(tmp_path, {"quick": 1, "other": 2000, "recipes_and_demo": 700, "demo": 100}, script)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads((tmp_path / "test-artifacts" / "ci-durations.json").read_text()) == {"quick": 0}
    assert sorted(p.name for p in (tmp_path / "test-artifacts" / "ci-not-run").iterdir()) == [
        "bench",
        "demo",
        "other",
        "recipes_and_demo",
    ]


def test_the_run_refuses_a_step_it_does_not_have(tmp_path):
    done = subprocess.run(
        ["bash", str(REPO / ".ci" / "run"), "no_such_step"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "unknown step no_such_step" in done.stdout, done.stdout + done.stderr
