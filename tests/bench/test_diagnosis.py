"""``python -m workbench.bench.diagnosis`` runs through the real engine (``engine_session``: a ``SteppedRun``)
and prints its figures: two steps per condition on tiny-glm4."""

from __future__ import annotations

import re

from workbench.bench.diagnosis import main


def test_the_diagnosis_benchmark_runs_two_steps_per_condition_and_prints_its_figures(capsys):
    assert (
        main(["--model", "tiny-glm4", "--blocks", "1", "--steps", "2", "--warmup", "0", "--batch", "2", "--seq", "64"])
        == 0
    )
    out = capsys.readouterr().out
    medians = {
        m[0]: float(m[1]) for m in re.findall(r"^\s+(off|on|sampled)\s+median ([\d.]+) CPU-s/step .*n=2\)$", out, re.M)
    }
    assert set(medians) == {"off", "on", "sampled"} and all(v > 0 for v in medians.values()), out
    # the sampled condition did sample: the engine's diagnosis observer logged one coverage report per sampled step
    assert "coverage reports in the run's log: 2 (one per sampled step: 2)" in out, out
    census_ms = float(re.search(r"census \(parameter_census \+ event\): ([\d.]+) ms", out).group(1))
    replay_s = float(re.search(r"one overflow replay .*: ([\d.]+) s = ", out).group(1))
    assert census_ms > 0 and replay_s > 0, out
    assert re.search(r"^OVERHEAD at coverage_every=50: [+-][\d.]+% of step time", out, re.M), out


def test_a_driver_of_the_steps_gets_the_runs_narrow_interface_not_the_engine():
    """Issue 52: the private engine was handed to this benchmark, which reached into it (train_step, train_examples).
    engine_session hands out a SteppedRun: these names, nothing else."""
    import inspect

    import workbench.bench.diagnosis as bench
    from workbench.engine.run import SteppedRun

    public = {name for name in dir(SteppedRun) if not name.startswith("_")}
    assert public == {"run_dir", "model", "view", "train_rows", "observers", "step", "emit_census"}
    source = inspect.getsource(bench)
    assert "_Engine" not in source and "._engine" not in source
