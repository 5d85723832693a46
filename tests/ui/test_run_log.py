"""Reading a log into a RunState depends on which fields an event has, never on the order the writer put them in."""

from __future__ import annotations

import json
import random

from workbench.bench.long_run import write_log
from workbench.events.reader import step_of_line
from workbench.runs.layout import EVENTS_FILE
from workbench.ui.run_log import EventTail, catch_up, load_run_state
from workbench.ui.run_state import RunState


def _shuffled_copy(log, out, seed: int, separators=(", ", ": ")) -> None:
    """``log`` rewritten line by line with each event's keys (nested ones too) in a random order."""
    rng = random.Random(seed)

    def shuffle(value):
        if isinstance(value, dict):
            items = [(k, shuffle(v)) for k, v in value.items()]
            rng.shuffle(items)
            return dict(items)
        return [shuffle(v) for v in value] if isinstance(value, list) else value

    lines = [json.dumps(shuffle(json.loads(line)), separators=separators) for line in log.read_text().splitlines()]
    out.mkdir(parents=True, exist_ok=True)
    (out / EVENTS_FILE).write_text("\n".join(lines) + "\n")


def _picture(state: RunState) -> tuple:
    """Everything a view draws from a state."""
    return (
        state.status,
        state.step,
        state.total_steps,
        state.eta_s,
        state.skipped_steps,
        state.overflows,
        [(a.level, a.title, a.step) for a in state.alerts],
        sorted(state.ranks),
        [(s.x, s.y, s.stride, s.seen) for s in state.all_series()],
        state.memory,
    )


def _with_rank1_steps(run) -> None:
    """Each step event followed by a rank-1 copy (the writer's key order kept): what a two-rank run logs."""
    log = run / EVENTS_FILE
    out = []
    for line in log.read_text().splitlines():
        out.append(line)
        event = json.loads(line)
        if event["type"] == "step":
            out.append(json.dumps({**event, "rank": 1, "step": event["step"] + 1}))  # (its own step: must not count)
    log.write_text("\n".join(out) + "\n")


def test_the_same_events_with_shuffled_keys_give_the_same_state(tmp_path):
    run = tmp_path / "written"
    write_log(run, 6000, total_steps=8000)  # long enough that catch_up reads old steps from their bytes alone
    _with_rank1_steps(run)
    expected = _picture(load_run_state(run))
    folded = RunState(run_dir=str(run))
    folded.apply(EventTail(run / EVENTS_FILE, typed=False).poll())
    folded.pending_step_times.clear()
    assert _picture(folded) == expected  # the fast path is exact
    for seed, separators in ((1, (", ", ": ")), (2, (",", ":")), (3, (" ,  ", " :  "))):
        copy = tmp_path / f"shuffled-{seed}"
        _shuffled_copy(run / EVENTS_FILE, copy, seed, separators)
        assert _picture(load_run_state(copy)) == expected, separators


def test_a_step_lines_step_and_rank_are_read_in_any_order_and_anything_else_is_parsed():
    assert step_of_line(b'{"rank": 1, "loss": 2.5, "step": 40, "type": "step"}') == (40, 1)
    assert step_of_line(b'{"step":40,"type":"step"}') == (40, 0)
    assert step_of_line(b'{"type": "step", "step": 40, "skipped": true}') is None  # a skipped step is parsed
    assert step_of_line(b'{"type": "eval", "step": 40}') is None
    assert step_of_line(b'{"type": "note", "text": "\\"type\\": \\"step\\", \\"step\\": 3"}') is None  # in a string
    assert step_of_line(b'{"type": "step", "step": 40, "extra": {"step": 2}}') is None  # nested: parsed


def test_catch_up_reports_a_corrupt_line_once_with_its_number_and_keeps_reading(tmp_path, caplog):
    run = tmp_path / "run"
    write_log(run, 1200)
    log = run / EVENTS_FILE
    lines = log.read_bytes().split(b"\n")
    lines[700] = lines[700][:40]  # a line torn mid-way, and the log going on after it
    log.write_bytes(b"\n".join(lines))
    state, tail = RunState(), EventTail(log, typed=False)
    with caplog.at_level("WARNING", logger="workbench.events"):
        catch_up(state, tail)
        load_run_state(run)
    assert tail.bad_lines == [(701, sum(len(line) + 1 for line in lines[:700]))]
    assert [r.getMessage() for r in caplog.records if "line 701" in r.getMessage()] and len(caplog.records) == 1
    assert state.step == 1200
