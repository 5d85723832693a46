"""The recorder panel without a browser: what the screen widget sends on a click, hold or drag becomes the step the
Demonstrator records, buttons do the rest, problems show in red; and the episodes view opens a failed episode's step
in the panel with the phone in that step's state. (tests/ui/test_browser.py clicks the same panel in Chromium.)"""

from __future__ import annotations

import base64
import io
import json

from PIL import Image

from workbench.agent import run_episodes, sim_devices
from workbench.agent.store import EpisodeWriter, read_episodes
from workbench.phone.conversation import assistant_target
from workbench.phone.tasks import select_tasks
from workbench.serve.remote import ModelReply
from workbench.ui.episodes_panel import EpisodeReplay
from workbench.ui.recorder_panel import PhoneScreen, RecorderPanel

SIZE = (112, 252)


def _centre(box):
    return [(box[0] + box[2]) // 2, (box[1] + box[3]) // 2]


def shown(screen: PhoneScreen) -> Image.Image:
    return Image.open(io.BytesIO(base64.b64decode(screen.src.split(",", 1)[1])))


def test_clicks_holds_drags_and_buttons_record_a_demonstration(tmp_path):
    panel = RecorderPanel(tmp_path / "demos", size=SIZE)
    phone = panel.demonstrator.device
    assert shown(panel.screen).size == SIZE and "Start" in panel.status.value
    panel.screen.gesture({"gesture": "click", "point": [500, 500]})  # before Start: says what to do
    assert "start one" in panel.status.value and "#c62828" in panel.status.value
    panel.task.value = "Turn off Wi-Fi"
    panel.start_button.click()
    assert "recording <b>Turn off Wi-Fi</b>: step 1 on System Home" in panel.status.value
    panel.thought.value = "Settings holds Wi-Fi."
    panel.screen.gesture({"gesture": "click", "point": _centre(phone.screen().elements["Settings"])})
    assert (
        phone.current_app() == "AndroidSystemSettings" and panel.thought.value == ""
    )  # the thought went with the step
    panel.screen.gesture({"gesture": "swipe", "start": [500, 800], "end": [500, 300]})  # nothing scrolls here
    assert "the phone did nothing: nothing scrolls here" in panel.status.value
    panel.undo_button.click()
    panel.click_as.value = "Long Press"  # a click is then a Long Press: recorded as one, and a held row flips nothing
    panel.screen.gesture({"gesture": "click", "point": _centre(phone.screen().elements["Wi-Fi"])})
    assert "<code>do(action=&quot;Long Press&quot;, element=[" in panel.steps_view.value.split("<li")[-1]
    assert " on Wi-Fi" in panel.steps_view.value.split("<li")[-1] and phone.state.toggles["wifi"] is True
    panel.undo_button.click()
    panel.click_as.value = "Tap"
    before = panel.screen.src
    panel.screen.gesture({"gesture": "click", "point": _centre(phone.screen().elements["Wi-Fi"])})
    assert "on Wi-Fi" in panel.steps_view.value and panel.screen.src != before  # the switch redrawn off
    panel.finish_button.click()  # no message yet
    assert "finish takes a message" in panel.status.value
    panel.message.value = "Wi-Fi is off."
    panel.finish_button.click()
    assert "saved demonstration 1 (toggle_setting/wifi-off, 3 steps; its task&#x27;s checks hold)" in panel.status.value
    episode = read_episodes(tmp_path / "demos")[0]
    assert [s.answer.split(",")[0] for s in episode.steps] == [
        'do(action="Tap"',
        'do(action="Tap"',
        'finish(message="Wi-Fi is off.")',
    ]
    assert episode.steps[0].reasoning == "Settings holds Wi-Fi." and episode.success
    panel.rows_button.click()
    assert "3 training rows from 1 demonstrations" in panel.status.value
    assert len((tmp_path / "demos" / "rows.jsonl").read_text().splitlines()) == 3


def test_a_hold_is_a_long_press_and_the_buttons_type_launch_and_go_back(tmp_path):
    panel = RecorderPanel(tmp_path, size=SIZE)
    phone = panel.demonstrator.device
    panel.task.value = "Add Mom to favorites, then tell her"
    panel.start_button.click()
    panel.app.value = "Contacts"
    panel.launch_button.click()
    panel.screen.gesture({"gesture": "long_press", "point": _centre(phone.screen().elements["Alice Chen"])})
    assert phone.menu is not None and "Long Press" in panel.steps_view.value
    panel.back_button.click()
    panel.swipes["up"].click()
    assert phone.stack[-1].scroll > 0
    panel.text.value = "hi"
    panel.type_button.click()  # no field focused: the phone did nothing, and it is still recorded
    assert "no text field is focused" in panel.status.value
    panel.home_button.click()
    panel.wait_button.click()
    answers = [s.answer for s in panel.demonstrator.steps]
    assert answers[0] == 'do(action="Launch", app="Contacts")' and answers[2:] == [
        'do(action="Back")',
        'do(action="Swipe", start=[500,700], end=[500,300])',
        'do(action="Type", text="hi")',
        'do(action="Home")',
        'do(action="Wait", duration="1 seconds")',
    ]
    panel.discard_button.click()
    assert not panel.demonstrator.recording and not (tmp_path / "episodes.jsonl").exists()


class TapsBluetooth:
    """Launches Settings, then taps Bluetooth for the Wi-Fi task and finishes: a failed episode."""

    name = "model"

    def __call__(self, conversations):
        actions = ['do(action="Launch", app="Settings")', 'do(action="Tap", element=[500,287])', 'finish(message="ok")']
        return [
            ModelReply(assistant_target("m", actions[sum(m["role"] == "assistant" for m in c)])) for c in conversations
        ]


def test_the_episodes_view_opens_a_failed_step_in_the_recorder_with_the_phone_in_its_state(tmp_path):
    writer = EpisodeWriter(tmp_path / "played")
    for episode in run_episodes(select_tasks("toggle_setting/wifi-off"), TapsBluetooth(), sim_devices(SIZE)):
        writer.write(episode)
    writer.close()
    replay = EpisodeReplay(tmp_path / "played", corrections=tmp_path / "fixed")
    assert replay.correct_button.layout.display is None  # a failed episode's step
    replay.slider.value = 4  # the end: nothing to correct from
    assert replay.correct_button.layout.display == "none"
    replay.slider.value = 2
    replay.correct_button.click()
    panel = replay.correction.children[0]
    assert isinstance(panel, RecorderPanel) and "correcting model" in panel.status.value
    assert panel.screen.src.endswith(
        base64.b64encode(
            (tmp_path / "played" / read_episodes(tmp_path / "played")[0].steps[1].screenshot).read_bytes()
        ).decode()
    )
    assert "(the model's)" in panel.steps_view.value  # step 1, kept as context
    phone = panel.demonstrator.device
    panel.screen.gesture({"gesture": "click", "point": _centre(phone.screen().elements["Wi-Fi"])})
    panel.message.value = "Wi-Fi is off."
    panel.finish_button.click()
    assert "checks hold" in panel.status.value
    rows = [json.loads(line) for line in open(panel.write_rows().path)]
    assert [r["meta"]["step"] for r in rows] == [2, 3]


def test_the_panel_drives_a_real_phone_through_the_adb_bridge(tmp_path):
    """device="adb:SERIAL": the stand-in ADB server's phone on the screen, a click sent as its device command, the app
    list the bridge's packages; nothing is judged."""
    from ..phone.adb_standin import AdbStandIn

    with AdbStandIn(serials=["emulator-5554"]) as adb:
        panel = RecorderPanel(tmp_path, device="adb:emulator-5554", adb_port=adb.port)
        panel.demonstrator.device.settle_s = 0
        assert "the phone emulator-5554" in panel.children[0].value and shown(panel.screen).size == (1080, 2400)
        assert "Settings" in panel.app.options and not panel.task.options  # no simulator tasks to pick
        panel.task.value = "Check the battery level"
        panel.start_button.click()
        panel.screen.gesture({"gesture": "click", "point": [500, 500]})
        panel.screen.gesture({"gesture": "swipe", "start": [500, 800], "end": [500, 300]})
        sent = [c for c in adb.shell_commands() if c.startswith("input ")]
        assert sent == ["input tap 540 1200", "input swipe 540 1920 540 720 1000"]
        panel.message.value = "Battery at 80%."
        panel.finish_button.click()
        assert "3 steps; not judged" in panel.status.value
