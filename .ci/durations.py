"""Each CI step's measured wall time against .ci/durations.json: exit 1 when one is off by more than the margin.

    python3 .ci/durations.py MEASURED.json [EXPECTED.json] [--not-run NAME ...]

MEASURED.json: what this run of .ci/run measured (test-artifacts/ci-durations.json, each step's seconds);
EXPECTED.json: the times the repository states (.ci/durations.json by default: ``steps``, CI's; ``inside``, the
parts of a CI step timed within it, side by side (recipes_and_demo's demo and bench: not added again); ``nightly``,
those of scripts/nightly.sh; ``estimated``, the figures not yet measured by .ci/run itself; and ``measured_on``, the
CPU class they were measured on), which
docs/development.md and .ci/run's comments cite (tests/test_ci_durations.py holds them to it). ``--not-run``: steps
not selected, or that said they ran nothing on this machine (the agent step on a CPU without native bf16): their time
is not compared.

CI's stated steps, with the budget of each step announced but not yet in .ci/run (``RESERVED``), sum to at most
``LIMIT_S`` (``ci_total``; tests/test_ci_durations.py holds it): CI's hard limit is 90 minutes, and the margin is room
for a slower machine and for growth.

CI's machines are of two classes (2 AVX2 cores; 2 AVX-512 BF16 cores), and a step's time is not comparable across
them (the demo trains in bf16: 139 s with native bf16, 820 s emulated on AVX2). On the class the times were measured
on, a step off by more than its margin fails the run; on another class the comparison is printed and not held. A
step one file has and the other lacks fails the run on any class. Standard library only: it runs with the system's
python3 at the end of .ci/run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

MARGIN = 0.25  # a step may take this fraction more or less than its stated time...
SLACK_S = 90  # ...or this many seconds, whichever is more (system: ~5 s with Chromium and Node there, 90 s without)
# Steps whose time varies more by nature, with their own margin: the agent step judges the episodes the trained model
# plays, so its time follows the model (1,872 s and 2,807 s for seeds 0 and 1 of one recipe).
STEP_MARGINS = {"agent": 0.4}
LIMIT_S = 4500  # the stated CI steps (the nightly ones apart), announced ones included, sum to at most this
RESERVED: dict[str, int] = {}  # steps announced but not yet in .ci/run: their budget counts until they state a time
EXPECTED = Path(__file__).resolve().parent / "durations.json"
FIX = (
    "after a change that moves a step's time: copy test-artifacts/ci-durations.json into .ci/durations.json's "
    "steps (and measured_on: the class printed above) and update the [STEP: N s] figures in .ci/run and "
    "docs/development.md (tests/test_ci_durations.py names the stale ones)"
)


def cpu_class(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The CI machine class of this CPU: amx_bf16, avx512_bf16 or avx2 (the best its flags name), else other."""
    try:
        flags = set(Path(cpuinfo).read_text(encoding="utf-8", errors="replace").split())
    except OSError:
        return "other"
    return next((c for c in ("amx_bf16", "avx512_bf16", "avx2") if c in flags), "other")


def stated_steps(stated: dict) -> dict:
    """Every stated step's time by name: CI's, the parts timed inside them, the nightly ones."""
    return {**stated["steps"], **stated.get("inside", {}), **stated.get("nightly", {})}


def ci_total(stated: dict) -> int:
    """CI's stated time: its steps and the reserved budget of each announced step not stated yet."""
    return sum(stated["steps"].values()) + sum(t for name, t in RESERVED.items() if name not in stated["steps"])


def allowed(name: str, expected: float) -> float:
    """How far step ``name``'s measured time may be from its ``expected`` seconds."""
    return max(STEP_MARGINS.get(name, MARGIN) * expected, SLACK_S)


def off_steps(measured: dict, expected: dict, not_run=()) -> dict[str, str]:
    """{step: why} of each step whose measured time is off its stated one by more than ``allowed`` (or that one of
    the two files lacks), in the stated order; {} when all agree."""
    off = {}
    for name in list(expected) + [n for n in measured if n not in expected]:
        if name in not_run:
            continue
        if name not in measured:
            off[name] = f"stated {expected[name]} s in .ci/durations.json, not measured in this run"
        elif name not in expected:
            off[name] = f"measured {measured[name]} s, no stated time in .ci/durations.json"
        elif abs(measured[name] - expected[name]) > allowed(name, expected[name]):
            off[name] = (
                f"measured {measured[name]} s, stated {expected[name]} s (off by "
                f"{measured[name] - expected[name]:+d} s, more than {allowed(name, expected[name]):.0f} s)"
            )
    return off


def main(argv: list[str]) -> int:
    not_run = argv[argv.index("--not-run") + 1 :] if "--not-run" in argv else []
    files = argv[: argv.index("--not-run")] if "--not-run" in argv else argv
    if not 1 <= len(files) <= 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    measured = json.loads(Path(files[0]).read_text(encoding="utf-8"))
    stated = json.loads(Path(files[1] if len(files) == 2 else EXPECTED).read_text(encoding="utf-8"))
    expected, stated_class, here = stated_steps(stated), stated["measured_on"], cpu_class()
    off = off_steps(measured, expected, not_run)
    unmatched = {n: why for n, why in off.items() if n not in measured or n not in expected}
    held = here == stated_class
    print(
        f"[ci] durations: this CPU is {here}; the stated times were measured on {stated_class}"
        + ("" if held else ": compared, not held")
    )
    estimated = set(stated.get("estimated", []))
    for name, seconds in measured.items():
        state = "not run here" if name in not_run else "OFF" if name in off else "ok"
        guess = " (an estimate: copy the measured time in)" if name in estimated and name not in not_run else ""
        print(f"[ci] durations: {name} {seconds} s (stated {expected.get(name, '-')} s{guess}): {state}")
    print(
        f"[ci] durations: CI's stated steps sum to {ci_total(stated)} s of {LIMIT_S} s (reserved for announced "
        f"steps: {', '.join(f'{n} {t} s' for n, t in RESERVED.items() if n not in stated['steps']) or 'none'})"
    )
    failing = off if held else unmatched
    if off:
        print(
            f"[ci] durations: {len(off)} step(s) off .ci/durations.json by more than their margin ({MARGIN:.0%} or "
            f"{SLACK_S} s, whichever is more; {', '.join(f'{n} {m:.0%}' for n, m in STEP_MARGINS.items())})"
            + ("" if held else f"; held only on {stated_class}, except a step one file lacks")
            + ":"
        )
        for name, why in off.items():
            print(f"  - {name}: {why}")
        print(f"  {FIX}")
    return 1 if failing else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
