"""The ADB backend through the real adbutils client against a stand-in of the ADB server's socket protocol: the
exact device command of each action, pixel conversion from the grid, the current app, and the errors a user sees.
(No phone is attached here: the commands are what a phone would receive.)"""

from __future__ import annotations

import base64
import socket

import pytest

from workbench.phone.actions import parse_action
from workbench.phone.adb import ADB_KEYBOARD, AdbPhone, DeviceError
from workbench.phone.env import PhoneEnv
from workbench.phone.tasks import TASKS

from .adb_standin import AdbStandIn

SERIAL = "emulator-5554"


@pytest.fixture
def standin():
    with AdbStandIn(serials=[SERIAL, "R58M123"]) as server:
        yield server


def phone_on(server, **kw) -> AdbPhone:
    return AdbPhone(SERIAL, port=server.port, settle_s=0, **kw)


@pytest.mark.parametrize(
    "action, commands",
    [
        ('do(action="Tap", element=[500,500])', ["input tap 540 1200"]),
        ('do(action="Tap", element=[999,999])', ["input tap 1078 2397"]),  # int(v / 1000 * size): inside the screen
        ('do(action="Double Tap", element=[100,200])', ["input tap 108 480", "input tap 108 480"]),
        ('do(action="Long Press", element=[250,750])', ["input swipe 270 1800 270 1800 3000"]),
        ('do(action="Swipe", start=[500,800], end=[500,300])', ["input swipe 540 1920 540 720 1000"]),
        ('do(action="Back")', ["input keyevent 4"]),
        ('do(action="Home")', ["input keyevent KEYCODE_HOME"]),
        (
            'do(action="Launch", app="Settings")',
            ["monkey -p com.android.settings -c android.intent.category.LAUNCHER 1"],
        ),
        (
            'do(action="Launch", app="Settings")',
            ["monkey -p com.android.settings -c android.intent.category.LAUNCHER 1"],
        ),
        ('do(action="Launch", app="微信")', ["monkey -p com.tencent.mm -c android.intent.category.LAUNCHER 1"]),
        ('do(action="Wait", duration="0 seconds")', []),
    ],
)
def test_each_action_sends_its_device_command(standin, action, commands):
    phone = phone_on(standin)
    before = len(standin.commands)
    outcome = phone.execute(parse_action(action))
    assert outcome.valid
    assert standin.shell_commands()[before:] == commands
    assert {s for s, _ in standin.commands} == {SERIAL}  # never the other attached phone


def test_type_goes_through_the_adb_keyboard_and_restores_the_ime(standin):
    phone = phone_on(standin)
    before = len(standin.commands)
    phone.execute(parse_action('do(action="Type", text="你好, world")'))
    encoded = base64.b64encode("你好, world".encode()).decode()
    assert standin.shell_commands()[before:] == [
        "settings get secure default_input_method",
        f"ime set {ADB_KEYBOARD}",
        "am broadcast -a ADB_CLEAR_TEXT",
        f"am broadcast -a ADB_INPUT_B64 --es msg {encoded}",
        "ime set com.google.android.inputmethod.latin/.LatinIME",
    ]


def test_screenshot_current_app_and_pixel_size_come_from_the_device(standin):
    standin.outputs["wm size"] = "Physical size: 720x1600\n"
    phone = phone_on(standin)
    assert phone.size == (720, 1600)
    assert phone.screenshot().size == (1080, 2400)  # the screencap's own size wins from then on
    assert phone.size == (1080, 2400)
    assert phone.current_app() == "AndroidSystemSettings"  # Open-AutoGLM's first name for the package
    standin.outputs["dumpsys window"] = "  mCurrentFocus=Window{1 u0 com.example.unknown/.Main}\n"
    assert phone.current_app() == "System Home"  # an unknown package, as Open-AutoGLM reports it
    assert {"screencap -p", "dumpsys window"} <= set(standin.shell_commands())


def test_unknown_app_is_an_invalid_action_and_sends_nothing(standin):
    phone = phone_on(standin)
    before = len(standin.commands)
    outcome = phone.execute(parse_action('do(action="Launch", app="NoSuchApp")'))
    assert not outcome.valid and "NoSuchApp" in outcome.effect
    assert standin.shell_commands()[before:] == []


def test_an_episode_runs_on_the_adb_phone_through_the_gym_interface(standin):
    env = PhoneEnv(phone_on(standin), max_steps=5)
    obs, info = env.reset(options={"task": TASKS[0]})
    assert obs["screenshot"].shape == (2400, 1080, 3) and obs["current_app"] == "AndroidSystemSettings"
    assert standin.shell_commands()[-3:] == ["input keyevent KEYCODE_HOME", "screencap -p", "dumpsys window"]
    obs, reward, terminated, truncated, info = env.step('<think>done</think>\n<answer>finish(message="ok")')
    assert terminated and reward == 0.0 and info["checks"] is None  # a real phone's state is not read


def test_a_serial_that_is_not_attached_names_the_attached_ones(standin):
    with pytest.raises(DeviceError, match=r"'ZX1G22' is not attached; attached devices: emulator-5554, R58M123"):
        AdbPhone("ZX1G22", port=standin.port)


def test_no_adb_server_says_how_to_start_one():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(DeviceError, match=rf"no ADB server answers at 127.0.0.1:{port}.*adb start-server"):
        AdbPhone(SERIAL, port=port)


def test_without_adbutils_the_error_names_the_phone_extra_and_its_install(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "adbutils", None)  # as if the optional package were not installed
    with pytest.raises(DeviceError) as err:
        AdbPhone("emulator-5554")
    assert "pip install 'adbutils" in str(err.value) and "'.[phone]'" in str(err.value) and "\n" not in str(err.value)
