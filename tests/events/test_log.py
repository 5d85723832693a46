import json

from workbench.events import EventWriter, Overflow, Step, read_events


def _step(n, **kw):
    base = dict(
        step=n,
        loss=1.0,
        lr=0.1,
        grad_norm=1.0,
        loss_scale=None,
        skipped=False,
        tokens=3,
        tokens_per_s=1.0,
        step_time_s=0.1,
        eta_s=0.0,
    )
    base.update(kw)
    return Step(**base)


def test_tail_from_offset_ignores_a_partial_last_line(tmp_path):
    path = tmp_path / "events.jsonl"
    with EventWriter(path, rank=1) as w:
        w.emit(_step(1))
        events, off = read_events(path)
        assert [e.step for e in events] == [1] and events[0].rank == 1
        w.emit(_step(2))
    with open(path, "a") as fh:
        fh.write('{"type": "step", "v": 1, "ste')  # a writer caught mid-line
    events, off2 = read_events(path, off)
    assert [e.step for e in events] == [2]
    assert read_events(path, off2) == ([], off2)
    with open(path, "a") as fh:
        fh.write('p": 3}\n')
    events, _ = read_events(path, off2, typed=False)
    assert events == [{"type": "step", "v": 1, "step": 3}]


def test_nonfinite_numbers_stay_valid_json_and_unknown_types_pass_through(tmp_path):
    path = tmp_path / "events.jsonl"
    with EventWriter(path) as w:
        w.emit(_step(1, grad_norm=float("inf"), skipped=True))
        w.emit(Overflow(step=1, scale_before=4.0, scale_after=2.0, nonfinite_params=["a"], nonfinite_count=1))
    with open(path, "a") as fh:
        fh.write(json.dumps({"type": "from_the_future", "v": 9, "x": 1}) + "\n")
    lines = path.read_text().splitlines()

    def no_bare_constant(name):  # json.loads accepts Infinity/NaN unless told otherwise
        raise AssertionError(f"bare {name} in the log: not JSON")

    assert all(json.loads(line, parse_constant=no_bare_constant) for line in lines)
    events, _ = read_events(path)
    assert events[0].grad_norm == "inf" and events[1].scale_after == 2.0
    assert events[2] == {"type": "from_the_future", "v": 9, "x": 1}


def test_missing_log_reads_empty(tmp_path):
    assert read_events(tmp_path / "none.jsonl", 5) == ([], 5)


def test_numbers_read_back_as_the_writer_wrote_them(tmp_path):
    """inf/nan go to the log as strings; ``number`` reads them back, ``finite_number`` makes them gaps (what the
    exporters, the runs table and the monitor read)."""
    import math

    from workbench.events import EventWriter, Step, finite_number, iter_events, number

    w = EventWriter(tmp_path / "events.jsonl")
    w.emit(
        Step(
            step=1,
            loss=float("nan"),
            lr=1e-3,
            grad_norm=float("inf"),
            loss_scale=None,
            skipped=True,
            tokens=4,
            tokens_per_s=1.0,
            step_time_s=1.0,
            eta_s=0.0,
        )
    )
    w.close()
    [e] = iter_events(tmp_path / "events.jsonl", typed=False)
    assert number(e["grad_norm"]) == math.inf and finite_number(e["grad_norm"]) is None
    assert math.isnan(number(e["loss"])) and finite_number(e["loss"]) is None
    assert finite_number(e["lr"]) == 1e-3 and number(e["loss_scale"]) is None
    assert number(True) is None and number("abc") is None


def _diagnosis(step):
    from workbench.events.schema import Diagnosis

    return Diagnosis(step=step, kind="scale_collapse", cause="loss scale fell", fix="precision.mode=bf16", module="m")


def test_the_index_names_every_rare_event_and_an_anchor_step_every_anchor_bytes(tmp_path, monkeypatch):
    from workbench.events import log as events_log
    from workbench.events.log import index_path
    from workbench.events.reader import read_index

    monkeypatch.setattr(events_log, "ANCHOR_BYTES", 2000)
    path = tmp_path / "events.jsonl"
    with EventWriter(path) as w:
        for n in range(1, 101):
            w.emit(_step(n, skipped=n == 40))
            if n == 70:
                w.emit(_diagnosis(n))
    entries = read_index(path)
    data = path.read_bytes()
    for e in entries:  # each entry's offset is the start of its own line
        line = json.loads(data[e["offset"] : data.index(b"\n", e["offset"])])
        assert (line["type"], line["step"]) == (e["type"], e["step"]) and (
            e["offset"] == 0 or data[e["offset"] - 1] == 10
        )
    assert [e["step"] for e in entries if e["type"] == "diagnosis"] == [70]
    steps = [e for e in entries if e["type"] == "step"]
    assert 40 in [e["step"] for e in steps]  # the skipped step, whatever the anchors
    anchors = [e["offset"] for e in steps if e["step"] != 40]  # the first step, then one each 2000 bytes or more
    assert anchors[0] == 0 and all(b - a >= 2000 for a, b in zip(anchors, anchors[1:]))
    assert len(data) // 2000 - 1 <= len(anchors) - 1 <= len(data) // 2000 + 1
    assert index_path(path).stat().st_size < len(data) / 5


def test_a_log_an_older_writer_began_gets_no_index_and_a_torn_index_line_is_ended(tmp_path):
    from workbench.events.log import index_path
    from workbench.events.reader import read_index

    old = tmp_path / "old.jsonl"
    old.write_text(json.dumps({"type": "step", "step": 1, "loss": 1.0}) + "\n")  # no index beside it
    with EventWriter(old) as w:
        w.emit(_diagnosis(2))
    assert read_index(old) is None and not index_path(old).exists()

    path = tmp_path / "events.jsonl"
    with EventWriter(path) as w:
        w.emit(_diagnosis(1))
    with open(index_path(path), "ab") as fh:
        fh.write(b'{"offset": 99, "ty')  # a writer that crashed mid-line
    with EventWriter(path) as w:  # (a resumed run's writer)
        w.emit(_diagnosis(2))
    assert [e["step"] for e in read_index(path)] == [1, 2]
