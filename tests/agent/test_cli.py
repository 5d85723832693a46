"""``workbench agent run|record`` as a user runs them: the oracle through the CLI, its report, the records it writes,
and one clear line per bad input (all of them at once), exit code 2."""

from __future__ import annotations

import json

import pytest

from workbench.cli.main import main
from workbench.phone.conversation import FORMAT_NAME, runtime_problems
from workbench.phone.tasks import select_tasks


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_oracle_run_shows_every_task_solvable(capsys, tmp_path):
    code, out, err = run_cli(
        capsys, "agent", "run", "--oracle", "--tasks", "heldout", "--size", "112x252", "--out", str(tmp_path), "--json"
    )
    assert code == 0, err
    report = json.loads(out)
    metrics = report["metrics"]["oracle"]["default"]
    assert metrics["n"] == len(select_tasks("heldout")) and metrics["success_rate"] == 1.0
    assert metrics["end_reasons"] == {"finish": metrics["n"]} and metrics["invalid_action_rate"] == 0.0
    assert all(r["success"] for r in report["records"]["oracle"])
    assert report["episodes"]["oracle"] == str(tmp_path / "oracle")
    code, out, _ = run_cli(
        capsys,
        "agent",
        "run",
        "--oracle",
        "--tasks",
        "open_app/settings",
        "--size",
        "112x252",
        "--out",
        str(tmp_path / "table"),
    )
    assert code == 0 and out.splitlines()[1].split()[:3] == ["oracle", "1", "1.000"]
    code, out, _ = run_cli(
        capsys,
        "agent",
        "run",
        "--oracle",
        "--tasks",
        "heldout,combos",
        "--size",
        "112x252",
        "--out",
        str(tmp_path / "both"),
    )
    n_held, n_combos = len(select_tasks("heldout")), len(select_tasks("combos"))
    assert code == 0 and f"by split: combos 1.000 of {n_combos}, heldout 1.000 of {n_held}" in out


def test_bad_options_are_all_reported_at_once(capsys):
    code, _, err = run_cli(
        capsys,
        "agent",
        "run",
        "--tasks",
        "nope",
        "--max-steps",
        "0",
        "--concurrency",
        "0",
        "--device",
        "usb",
        "--size",
        "10x10",
    )
    assert code == 2
    assert err.startswith("workbench agent: error: 6 problems:")
    for flag in (
        "--server/--oracle",
        "--tasks: unknown tasks 'nope'",
        "--device: 'usb'",
        "--size: '10x10'",
        "--max-steps: must be at least 1 (got 0)",
        "--concurrency: must be at least 1 (got 0)",
    ):
        assert f"  - {flag}" in err
    code, _, err = run_cli(
        capsys, "agent", "run", "--server", "http://127.0.0.1:9", "--device", "adb:X", "--concurrency", "2"
    )
    assert code == 2 and "--concurrency: one phone runs one episode at a time" in err


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--server", "http://127.0.0.1:9"],
            "workbench agent: error: cannot reach the server at http://127.0.0.1:9/v1",
        ),
        (["--oracle", "--device", "adb:ZX1"], "run --oracle on --device sim"),
        (
            ["--server", "http://127.0.0.1:9", "--device", "adb:ZX1", "--concurrency", "1", "--adb-port", "9"],
            "no ADB server answers at 127.0.0.1:9",
        ),
    ],
)
def test_what_cannot_be_reached_is_one_clear_line(capsys, argv, message):
    code, _, err = run_cli(capsys, "agent", "run", *argv)
    assert code == 2 and message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_bad_task_file_names_file_and_line(capsys, tmp_path):
    tasks = tmp_path / "mine.jsonl"
    tasks.write_text('{"template": "open_app", "app": "Joplin"}\n{"template": "open_app", "app": "Nope"}\n')
    code, _, err = run_cli(capsys, "agent", "run", "--oracle", "--tasks", str(tasks))
    assert code == 2 and f"--tasks: {tasks}:2: unknown app 'Nope'; known: Settings" in err


def test_record_oracle_episodes_as_runtime_format_rows(capsys, tmp_path):
    out = tmp_path / "rows" / "train.jsonl"
    code, stdout, err = run_cli(
        capsys,
        "agent",
        "record",
        "--oracle",
        "--tasks",
        "toggle_setting/wifi-off,open_app/reddit",
        "--size",
        "112x252",
        "--date",
        "2026-12-01",
        "--out",
        str(out),
    )
    assert code == 0, err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 3 + 3 and stdout.startswith("6 rows from 2 episodes (0 unsuccessful skipped)")
    for row in rows:
        assert runtime_problems(row["messages"]) == []
        assert row["meta"]["format"] == FORMAT_NAME and row["messages"][0]["content"].startswith(
            "The current date: 2026-12-01, Tuesday"
        )
        image = row["messages"][-2]["content"][0]["image_url"]["url"]
        assert (out.parent / image).is_file()
    tap = rows[1]  # Wi-Fi's switch: the tapped element's box comes with the row
    assert tap["meta"]["step"] == 2 and tap["meta"]["target_box"] == [30, 150, 970, 235]
    assert len(tap["messages"]) == 5 and "image_url" not in json.dumps(tap["messages"][1])
    code, _, err = run_cli(capsys, "agent", "record", "--out", "x.txt", "--date", "tomorrow")
    assert code == 2 and "3 problems" in err and "--out: 'x.txt': give a .jsonl file name" in err


def test_record_a_stored_run_keeps_only_its_successful_episodes(capsys, tmp_path):
    run_cli(
        capsys,
        "agent",
        "run",
        "--oracle",
        "--tasks",
        "open_app/settings,open_app/reddit",
        "--size",
        "112x252",
        "--out",
        str(tmp_path / "eps"),
    )
    folder = tmp_path / "eps" / "oracle"
    lines = (folder / "episodes.jsonl").read_text().splitlines()
    failed = json.loads(lines[1])
    failed["success"] = False
    (folder / "episodes.jsonl").write_text(lines[0] + "\n" + json.dumps(failed) + "\n")
    code, stdout, _ = run_cli(capsys, "agent", "record", "--episodes", str(folder), "--out", str(tmp_path / "r.jsonl"))
    assert code == 0 and stdout.startswith("2 rows from 1 episodes (1 unsuccessful skipped)")
    code, stdout, _ = run_cli(
        capsys, "agent", "record", "--episodes", str(folder), "--all", "--out", str(tmp_path / "r.jsonl")
    )
    assert stdout.startswith("5 rows from 2 episodes")
    code, _, err = run_cli(capsys, "agent", "record", "--episodes", str(tmp_path), "--out", str(tmp_path / "r.jsonl"))
    assert code == 2 and "holds no episodes.jsonl" in err


def test_an_adb_serial_that_is_not_attached_is_one_line(capsys):
    from ..phone.adb_standin import AdbStandIn

    with AdbStandIn(serials=["emulator-5554"]) as adb:
        code, _, err = run_cli(
            capsys,
            "agent",
            "run",
            "--server",
            "http://127.0.0.1:9",
            "--device",
            "adb:R58M123",
            "--adb-port",
            str(adb.port),
        )
    assert code == 2 and err.strip() == (
        "workbench agent: error: ADB serial 'R58M123' is not attached; attached devices: emulator-5554"
    )


def test_episodes_stored_without_screens_cannot_be_recorded_and_say_why(capsys, tmp_path):
    run_cli(
        capsys,
        "agent",
        "run",
        "--oracle",
        "--tasks",
        "open_app/settings",
        "--size",
        "112x252",
        "--no-screens",
        "--out",
        str(tmp_path),
    )
    assert not (tmp_path / "oracle" / "screens").exists()
    code, _, err = run_cli(
        capsys, "agent", "record", "--episodes", str(tmp_path / "oracle"), "--out", str(tmp_path / "r.jsonl")
    )
    assert code == 2 and "has no screenshot to record (was the run stored with --no-screens?)" in err


def test_record_ui_tree_rows_hold_no_image_and_pass_data_check_in_their_mode(capsys, tmp_path):
    out = tmp_path / "tree" / "train.jsonl"
    code, stdout, err = run_cli(
        capsys,
        "agent",
        "record",
        "--oracle",
        "--tasks",
        "toggle_setting/wifi-off",
        "--observation",
        "ui_tree",
        "--date",
        "2026-12-01",
        "--out",
        str(out),
    )
    assert code == 0, err
    assert stdout.startswith("3 rows from 1 episodes") and "0 images" in stdout
    assert not (out.parent / "images").exists()
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["meta"]["observation"] for r in rows} == {"ui_tree"}
    assert 'Wi-Fi "On" [30,150][970,235] tap [500,192]' in rows[1]["messages"][-2]["content"]
    assert run_cli(capsys, "data", "check", str(out))[0] == 0
    rows[1]["meta"]["observation"] = "screenshot"  # a row that claims another mode than it shows
    out.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    code, stdout, err = run_cli(capsys, "data", "check", str(out))
    # the system prompt says what the model sees: a ui_tree row claimed as a screenshot one has the wrong prompt
    assert (
        code == 1
        and "train.jsonl:2: runtime format: the system prompt is not Open-AutoGLM's (en, observation screenshot)"
        in stdout + err
    )
