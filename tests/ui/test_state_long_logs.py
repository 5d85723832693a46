"""A long log's state without reading it whole (issue 25): its overview from the writer's index, a zoomed window at
full resolution, and the logs that have no usable index (an older writer's, a stale one) read whole, to the same
rare events."""

import json

import pytest

from workbench.bench.long_run import OVERFLOW_EVERY, write_log
from workbench.events import EventWriter, finite_number, read_events, reader
from workbench.events import log as events_log
from workbench.events.log import index_path
from workbench.events.schema import Diagnosis
from workbench.ui.run_log import ChartZoom, EventTail, catch_up, load_run_state, load_window, relayout_x_range
from workbench.ui.run_state import RECENT_STEPS, RunState

STEPS = 4000  # ~1 MB of log: "long" once the thresholds below are scaled down with it


@pytest.fixture
def small_thresholds(monkeypatch):
    monkeypatch.setattr(reader, "SAMPLE_ABOVE_BYTES", 64 << 10)
    monkeypatch.setattr(reader, "SAMPLE_WINDOWS", 100)
    monkeypatch.setattr(reader, "WINDOW_BYTES", 1024)
    monkeypatch.setattr(reader, "ZOOM_FULL_BYTES", 128 << 10)
    monkeypatch.setattr(events_log, "ANCHOR_BYTES", 16 << 10)


def _long_run(tmp_path, steps=STEPS):
    run = tmp_path / "long"
    write_log(run, steps, total_steps=2 * steps)
    with EventWriter(run / "events.jsonl") as w:
        w.emit(
            Diagnosis(step=123, kind="scale_collapse", cause="loss scale fell", fix="precision.mode=bf16", module="m")
        )
    write_log(run, 300, start=steps + 1)  # the diagnosis lies far before the tail
    return run, run / "events.jsonl"


def _losses(log) -> dict:
    """step -> loss as logged (the last time a step was logged: a resumed run logs steps again)."""
    return {
        e["step"]: finite_number(e["loss"])
        for e in read_events(log, 0, typed=False)[0]
        if e["type"] == "step" and not e.get("rank")
    }


def _every_event(log) -> RunState:
    state = RunState()
    state.apply(read_events(log, 0, typed=False)[0])
    return state


def _markers(state):
    return (state.skipped_steps, [o["step"] for o in state.overflows], [(a.kind, a.step) for a in state.alerts])


def test_a_long_indexed_log_is_caught_up_from_its_index_a_sample_and_its_tail(tmp_path, small_thresholds):
    run, log = _long_run(tmp_path)
    overview = reader.read_overview(log, RECENT_STEPS)
    assert overview is not None and overview.sampled and overview.bytes_read < log.stat().st_size / 3
    fast, tail = RunState(), EventTail(log, typed=False)
    catch_up(fast, tail)
    whole = _every_event(log)
    assert tail.offset == log.stat().st_size
    # every overflow, skipped step and alert, from the thinned part too
    assert _markers(fast) == _markers(whole) and ("diagnosis", 123) in _markers(fast)[2]
    assert len(_markers(fast)[0]) == (STEPS + 300) // OVERFLOW_EVERY
    # the newest steps exact, the older ones a sample spread over the whole run
    last = whole.loss.x[-1]
    recent = [(x, y) for x, y in zip(whole.loss.x, whole.loss.y) if x > last - RECENT_STEPS]
    assert [(x, y) for x, y in zip(fast.loss.x, fast.loss.y) if x > last - RECENT_STEPS] == recent
    older = [x for x in fast.loss.x if x <= last - 3 * RECENT_STEPS]  # (before the tail, which is read exactly)
    assert older[0] < 100 and max(b - a for a, b in zip(older, older[1:])) < 3 * STEPS / 100 and len(older) < 200
    truth = _losses(log)
    assert all(truth[x] == y for x, y in zip(fast.loss.x, fast.loss.y))  # sampled points are the log's own
    assert set(fast.memory_series) == set(whole.memory_series) and len(fast.memory_series["rank0 host RSS"]) > 50
    assert (fast.step, fast.total_steps, fast.status, fast.precision, fast.eta_s) == (
        whole.step,
        whole.total_steps,
        whole.status,
        whole.precision,
        whole.eta_s,
    )
    write_log(run, 5, start=STEPS + 301)  # and it follows the run from there
    fast.apply(tail.poll())
    assert fast.step == STEPS + 305 and fast.loss.x[-5:] == list(range(STEPS + 301, STEPS + 306))


def test_an_older_writers_log_without_an_index_is_read_whole_to_the_same_state(tmp_path, small_thresholds):
    run, log = _long_run(tmp_path)
    index_path(log).unlink()
    assert reader.read_overview(log, RECENT_STEPS) is None
    state = load_run_state(run)
    whole = _every_event(log)
    assert _markers(state) == _markers(whole) and (state.loss.x, state.loss.y) == (whole.loss.x, whole.loss.y)
    # a zoomed window too, the slow way
    assert load_window(log, 1000, 1200).loss.x == list(range(1000, 1201))


def test_a_short_log_is_read_whole_exactly_index_or_not(tmp_path):
    run = tmp_path / "short"
    write_log(run, 3000)
    assert reader.read_overview(run / "events.jsonl", RECENT_STEPS) is None  # under SAMPLE_ABOVE_BYTES
    state, whole = load_run_state(run), _every_event(run / "events.jsonl")
    for name in ("loss", "lr", "grad_norm", "loss_scale"):
        assert (getattr(state, name).x, getattr(state, name).y) == (getattr(whole, name).x, getattr(whole, name).y)


def test_a_crash_never_costs_a_rare_event_nor_a_wrong_state(tmp_path, small_thresholds):
    run, log = _long_run(tmp_path)
    # a crash between an event's line and its index line: the event is in the log's tail, which is read exactly
    with open(log, "ab") as fh:
        fh.write(
            (json.dumps({"type": "diagnosis", "v": 1, "rank": 0, "step": STEPS + 300, "cause": "late"}) + "\n").encode()
        )
    # a crash mid-way through an index line (and a log line being written)
    with open(index_path(log), "ab") as fh:
        fh.write(b'{"offset": 12')
    with open(log, "ab") as fh:
        fh.write(b'{"type": "step", "rank": 0, "step": 99')
    state, whole = load_run_state(run), _every_event(log)
    assert _markers(state) == _markers(whole) and ("diagnosis", STEPS + 300) in _markers(state)[2]
    # an index that is not this log's (the log replaced): its entries do not match their lines; the log is read whole
    other = tmp_path / "other"
    write_log(other, STEPS + 200)
    log.write_bytes((other / "events.jsonl").read_bytes())
    assert reader.read_overview(log, RECENT_STEPS) is None
    state, whole = load_run_state(run), _every_event(log)
    assert _markers(state) == _markers(whole) and ("diagnosis", 123) not in _markers(state)[2]


def test_a_zoomed_window_has_every_step_of_it_or_a_bounded_sample_and_every_marker(tmp_path, small_thresholds):
    run, log = _long_run(tmp_path)
    truth = _losses(log)
    window = load_window(log, 1900, 2200)
    assert window.loss.x == list(range(1900, 2201)) and all(truth[x] == y for x, y in zip(window.loss.x, window.loss.y))
    assert window.lr.x == window.loss.x and window.skipped_steps == [2 * OVERFLOW_EVERY] == [
        o["step"] for o in window.overflows
    ]
    assert reader.read_window(log, 1900, 2200).bytes_read < log.stat().st_size / 4
    wide = load_window(log, 100, STEPS)  # more bytes than ZOOM_FULL_BYTES: sampled, every marker still there
    assert reader.read_window(log, 100, STEPS).sampled
    assert 50 < len(wide.loss) < 400 and wide.loss.x[0] < 200 and wide.loss.x[-1] > STEPS - 100
    assert wide.skipped_steps == [s for s in range(100, STEPS + 1) if s % OVERFLOW_EVERY == 0]


def test_a_window_of_a_resumed_run_shows_the_steps_it_logged_again(tmp_path, small_thresholds, monkeypatch):
    monkeypatch.setattr(reader, "ZOOM_FULL_BYTES", 1 << 20)
    run = tmp_path / "resumed"
    write_log(run, 2000)
    log = run / "events.jsonl"
    with open(log, "ab") as fh:  # the first segment's steps after 1500 are told apart by their loss
        for step in range(1501, 1511):
            fh.write((json.dumps({"type": "step", "rank": 0, "step": step, "loss": -1.0}) + "\n").encode())
    write_log(run, 1000, start=1501)  # resumed from a checkpoint at step 1500: 1501..2000 logged again
    window = load_window(log, 1400, 1700)
    assert window.loss.x == list(range(1400, 1701)) and -1.0 not in window.loss.y
    truth = _losses(log)
    assert all(truth[x] == y for x, y in zip(window.loss.x, window.loss.y))


def test_chart_zoom_reads_the_window_and_zooms_back_out(tmp_path, small_thresholds):
    run, log = _long_run(tmp_path)
    overview = load_run_state(run)
    zoom = ChartZoom()
    assert zoom.set_range("loss", log, (2000.4, 2100.6), overview) and zoom.zoomed("loss")
    assert zoom.source("loss", overview).loss.x == list(range(2000, 2102)) and zoom.source("lr", overview) is overview
    assert not zoom.set_range("loss", log, (2000.1, 2100.9), overview)  # the same window: nothing to read
    assert zoom.set_range("loss", log, (-50, 2 * STEPS + 50), overview) and not zoom.zoomed("loss")  # the whole run
    zoom.set_range("loss", log, (10, 20), overview)
    assert zoom.set_range("loss", log, None, overview) and zoom.source("loss", overview) is overview


def test_relayout_messages_tell_a_zoom_from_a_reset():
    assert relayout_x_range({"xaxis.range[0]": 3, "xaxis.range[1]": 9.5}) == ("zoom", (3, 9.5))
    assert relayout_x_range({"xaxis.range": [1, 2]}) == ("zoom", (1, 2))
    assert relayout_x_range({"xaxis.autorange": True, "yaxis.autorange": True}) == ("reset", None)
    assert relayout_x_range({"yaxis.range[0]": 1, "yaxis.range[1]": 2}) is None
