"""A person's demonstrations (workbench.agent.demonstrate): clicks on a phone become an episode in the store and rows
through the one recorder of rows, judged by the task's checks on the simulated phone; undo puts the phone back; a
model's failed episode is continued from a step with the phone in that step's state, its earlier steps context only;
the same API drives a real phone over the ADB bridge (the stand-in ADB server), where nothing is judged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench.agent import OraclePolicy, run_episodes, sim_devices
from workbench.agent.demonstrate import DemonstrationError, Demonstrator
from workbench.agent.store import EpisodeWriter, read_episodes
from workbench.data.check import check_file
from workbench.phone.actions import Action
from workbench.phone.sim import SimPhone
from workbench.phone.tasks import select_tasks

from ..phone.adb_standin import AdbStandIn

SIZE = (112, 252)
DUMP = Path(__file__).parents[1] / "phone" / "data" / "uiautomator_settings.xml"


def _centre(box) -> tuple[int, int]:
    return (box[0] + box[2]) // 2, (box[1] + box[3]) // 2


def test_clicks_become_an_episode_and_rows_the_data_linter_accepts(tmp_path):
    phone = SimPhone(SIZE)
    rec = Demonstrator(tmp_path / "demos", phone)
    rec.start("Turn off Wi-Fi")  # a built-in task's instruction: its start state, judged at the end
    settings = phone.screen().elements["Settings"]
    first = rec.tap(settings[0] + 10, settings[1] + 10, "Settings holds Wi-Fi.")
    assert first.element == "Settings" and first.target_box == list(settings) and first.current_app == "System Home"
    assert first.answer == f'do(action="Tap", element=[{settings[0] + 10},{settings[1] + 10}])'
    wifi = phone.screen().elements["Wi-Fi"]
    step = rec.tap(*_centre(wifi))  # no thought: the reasoning says what was done
    assert step.reasoning == 'Tap "Wi-Fi".' and step.effect == "turned Wi-Fi off"
    episode = rec.finish("Wi-Fi is off.")
    assert episode.success is True and episode.checks == {"wifi_off": True, "nothing_else_changed": True}
    assert [e.model for e in read_episodes(tmp_path / "demos")] == ["demonstration"]
    result = rec.write_rows(tmp_path / "rows.jsonl")
    rows = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert result.rows == 3 and [r["meta"]["step"] for r in rows] == [1, 2, 3]
    assert rows[1]["meta"]["target_box"] == list(wifi) and rows[1]["meta"]["current_app"] == "AndroidSystemSettings"
    assert rows[0]["messages"][-1]["content"].startswith("<think>Settings holds Wi-Fi.</think>")
    assert check_file(tmp_path / "rows.jsonl").problems == []


def test_undo_puts_the_simulated_phone_back_and_a_failed_check_is_kept_out_of_the_rows(tmp_path):
    phone = SimPhone(SIZE)
    rec = Demonstrator(tmp_path, phone)
    rec.start("toggle_setting/wifi-off")  # a task id works too
    rec.launch("Settings")
    before = rec.screen.png
    rec.tap(*_centre(phone.screen().elements["Location"]))  # the wrong row
    assert phone.state.toggles["location"] is False
    undone = rec.undo()
    assert undone.element == "Location" and len(rec.steps) == 1
    assert phone.state.toggles["location"] is True and rec.screen.png == before  # as before the tap
    rec.tap(*_centre(phone.screen().elements["Bluetooth"]))  # another wrong row, kept this time
    assert rec.finish("Done.").success is False and "checks do not hold" in rec.notes[0]
    rec.start("Turn off Wi-Fi")
    rec.launch("Settings")
    rec.tap(*_centre(phone.screen().elements["Wi-Fi"]))
    rec.finish("Wi-Fi is off.")
    assert [e.success for e in rec.demonstrations()] == [False, True]
    assert rec.write_rows(tmp_path / "rows.jsonl").episodes == 1  # the failed one is left out


def test_a_free_text_task_is_not_judged_and_needs_a_started_demonstration(tmp_path):
    rec = Demonstrator(tmp_path, SimPhone(SIZE))
    with pytest.raises(DemonstrationError, match="start one"):
        rec.back()
    with pytest.raises(DemonstrationError, match="type the task"):
        rec.start("  ")
    episode = rec.start("Open my banking app and check the balance")
    assert episode.task == "own/open-my-banking-app-and-check-the-balance" and episode.template == "own"
    rec.launch("Wallet")
    assert rec.finish("The balance is shown.").success is None
    assert rec.write_rows(tmp_path / "rows.jsonl").rows == 2  # not judged: recorded as demonstrated


def test_a_correction_continues_a_failed_episode_from_the_step_it_got_wrong(tmp_path):
    task = select_tasks("toggle_setting/wifi-off")[0]
    oracle = task.oracle()

    def wrong(conversations):  # launches Settings as the oracle does, then taps Bluetooth and finishes
        from workbench.phone.actions import format_action
        from workbench.phone.conversation import assistant_target
        from workbench.serve.remote import ModelReply

        done = sum(m["role"] == "assistant" for m in conversations[0])
        action = [oracle[0].action, Action("Tap", {"element": [500, 287]}), Action("finish", {"message": "ok"})][done]
        return [ModelReply(assistant_target("model", format_action(action)))]

    wrong.name = "model"
    episodes = run_episodes([task], wrong, sim_devices(SIZE))
    assert episodes[0].success is False
    writer = EpisodeWriter(tmp_path / "played")
    writer.write(episodes[0])
    writer.close()
    stored = read_episodes(tmp_path / "played")[0]  # as the episodes view reads it: screenshots on disk

    phone = SimPhone((1080, 2400))  # the stored screens' size is taken from them
    rec = Demonstrator(tmp_path / "fixed", phone)
    with pytest.raises(DemonstrationError, match="give the folder"):
        rec.correct(stored, 2)
    episode = rec.correct(stored, 2, tmp_path / "played")
    assert phone.size == SIZE and phone.current_app() == "AndroidSystemSettings" and episode.context_steps == 1
    assert rec.screen.png == (tmp_path / "played" / stored.steps[1].screenshot).read_bytes()  # step 2's screen
    with pytest.raises(DemonstrationError, match="the model's"):
        rec.undo()
    rec.tap(*_centre(phone.screen().elements["Wi-Fi"]), "Wi-Fi, not Bluetooth.")
    assert rec.finish("Wi-Fi is off.").success is True
    rec.write_rows(tmp_path / "rows.jsonl")
    rows = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert [r["meta"]["step"] for r in rows] == [2, 3]  # the model's step 1 is context only, its step 2 gone
    context = [m["content"] for m in rows[0]["messages"] if m["role"] == "assistant"]
    # the model's turn as the runtime keeps a reply it cut at do(action= (its thinking holds the reply's tags),
    # then the person's turn as AutoGLM-Phone writes one
    assert context == [
        '<think><think>model</think>\n<answer></think><answer>do(action="Launch", app="Settings")</answer>',
        '<think>Wi-Fi, not Bluetooth.</think>\n<answer>do(action="Tap", element=[500,192])',
    ]
    assert [m.get("weight") for m in rows[0]["messages"] if m["role"] == "assistant"] == [0, 1]
    assert check_file(tmp_path / "rows.jsonl").problems == []


def test_a_correction_refuses_a_phone_that_does_not_reach_the_stored_screen(tmp_path):
    task = select_tasks("toggle_setting/wifi-off")[0]
    episode = run_episodes([task], OraclePolicy([task]), sim_devices(SIZE))[0]
    episode.steps[1].png = episode.steps[0].png  # as if the simulator had drawn step 2 otherwise back then
    with pytest.raises(DemonstrationError, match="does not show step 2's stored screen"):
        Demonstrator(tmp_path, SimPhone(SIZE)).correct(episode, 3)


def test_a_real_phone_over_adb_records_the_element_from_its_tree_and_is_not_judged(tmp_path):
    from workbench.phone.adb import AdbPhone

    with AdbStandIn(serials=["emulator-5554"]) as adb:
        adb.outputs["cat"] = DUMP.read_text(encoding="utf-8")  # `cat /sdcard/window_dump.xml`: uiautomator's dump
        phone = AdbPhone("emulator-5554", port=adb.port, settle_s=0)
        rec = Demonstrator(tmp_path, phone)
        rec.start("Turn on dark theme")
        assert adb.shell_commands()[-1] != "input keyevent KEYCODE_HOME"  # the phone stays where the person put it
        step = rec.tap(480, 440, "Dark theme is under Display.")  # Display [0,386][999,474]
        assert "input tap 518 1056" in adb.shell_commands()
        assert step.element == "Display" and step.target_box == [0, 386, 999, 474]
        rec.back()
        assert adb.shell_commands()[-1] == "input keyevent 4"
        undone = rec.undo()
        assert undone.answer == 'do(action="Back")' and "by hand" in rec.notes[0]
        episode = rec.finish("Dark theme is on.")
    assert episode.success is None and episode.checks is None
    assert rec.write_rows(tmp_path / "rows.jsonl", "both").rows == 2  # not judged: recorded as demonstrated
    rows = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert [r["meta"]["target_box"] for r in rows] == [[0, 386, 999, 474], None]
    assert 'Display "Dark theme' in rows[0]["messages"][-2]["content"][-1]["text"]  # the tree in the latest turn
    assert check_file(tmp_path / "rows.jsonl").problems == []
