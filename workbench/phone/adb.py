"""A real Android phone over ADB, with the simulated phone's interface (``PhoneEnv(AdbPhone(serial))``).

Through ``adbutils`` (the optional extra ``phone``: ``pip install -e '.[phone]'`` in the checkout) and a running ADB server
(``adb start-server``; default 127.0.0.1:5037). Each action is the device command AutoGLM's runtime sends:

- screenshot: ``screencap -p``; current app: the focused window's line of ``dumpsys window`` named by Open-AutoGLM's
  app table (``phone.openautoglm.current_app_name``: its first name whose package is in the line, else "System
  Home"), as its runtime names it;
- Tap ``input tap X Y`` (pixels: ``int(v / 1000 * size)`` of the last screenshot's size), Double Tap twice that,
  Long Press ``input swipe X Y X Y 3000``, Swipe ``input swipe X1 Y1 X2 Y2 1000``;
- Type: through the ADB Keyboard app (it must be installed on the phone: github.com/senzhk/ADBKeyBoard) so any
  text, Chinese included, arrives: switch to it (``ime set``), ``am broadcast -a ADB_CLEAR_TEXT``, ``am broadcast
  -a ADB_INPUT_B64 --es msg <base64>``, switch back;
- Back ``input keyevent 4``, Home ``input keyevent KEYCODE_HOME``, Launch ``monkey -p PACKAGE -c
  android.intent.category.LAUNCHER 1`` for the package the table gives the name (none: nothing happens, as in the
  runtime); Wait sleeps.

Tested against a stand-in of the ADB server's socket protocol driven by the real adbutils client (the exact
commands above); it has not been run against a phone here. A real phone's state cannot be read, so episodes on
it have no final-state checks (``judges_state`` is False).
"""

from __future__ import annotations

import base64
import re
import socket
import time

from PIL import Image

from ..config.packages import missing_package
from ..image_io import image_from_bytes
from .actions import Action, to_pixels
from .openautoglm import APP_PACKAGES, HOME, current_app_name
from .sim import Outcome
from .uitree import compress_uiautomator

UI_DUMP_PATH = "/sdcard/window_dump.xml"  # uiautomator's own default file

ADB_KEYBOARD = "com.android.adbkeyboard/.AdbIME"
LONG_PRESS_MS = 3000
SWIPE_MS = 1000


class DeviceError(ValueError):
    """The phone cannot be used: no ADB server, serial not attached, adbutils missing. Says what to do."""


class AdbPhone:
    judges_state = False  # a real phone's app data cannot be read: no final-state checks

    def __init__(
        self,
        serial: str,
        host: str = "127.0.0.1",
        port: int = 5037,
        settle_s: float = 1.0,
        packages: dict[str, str] | None = None,
    ):
        """``settle_s``: seconds to let the phone redraw after each action before the next screenshot. ``packages``:
        the app table (name -> package, the first name of a package naming it), Open-AutoGLM's by default."""
        try:
            import adbutils
        except ImportError:
            raise DeviceError(
                f"the ADB backend (a real phone) needs the phone extra: "
                f"{missing_package('adbutils') or 'adbutils does not import: pip install -U adbutils'}"
            ) from None
        # adbutils starts a local adb server itself when none answers; a server that is not there is the user's to
        # start (or the host/port is wrong), so check before handing over.
        try:
            socket.create_connection((host, port), timeout=2).close()
        except OSError as err:
            raise DeviceError(
                f"no ADB server answers at {host}:{port} ({err.strerror or err}): start one with "
                "`adb start-server`, or give the right host and port"
            ) from None
        client = adbutils.AdbClient(host=host, port=port)
        try:
            attached = [info.serial for info in client.list() if info.state == "device"]
        except (adbutils.AdbError, OSError) as err:
            raise DeviceError(f"the ADB server at {host}:{port} did not list its devices: {err}") from None
        if serial not in attached:
            listed = ", ".join(attached) if attached else "none (is USB debugging on and the phone authorised?)"
            raise DeviceError(f"ADB serial {serial!r} is not attached; attached devices: {listed}")
        self.serial = serial
        self.device = client.device(serial)
        self.settle_s = settle_s
        self.packages = dict(APP_PACKAGES if packages is None else packages)
        self.size = self._screen_size()

    def _shell(self, command: str) -> str:
        return self.device.shell(command)

    def _screen_size(self) -> tuple[int, int]:
        match = re.search(r"(\d+)x(\d+)", self._shell("wm size"))
        return (int(match.group(1)), int(match.group(2))) if match else (1080, 2400)

    # ---- the device interface -------------------------------------------------------------------------------
    def reset(self, state=None) -> None:
        """Go to the home screen. A task's starting state cannot be set on a real phone: set it up by hand."""
        self._shell("input keyevent KEYCODE_HOME")
        time.sleep(self.settle_s)

    def screenshot(self) -> Image.Image:
        png = self.device.shell("screencap -p", encoding=None)
        image = image_from_bytes(png)
        self.size = image.size
        return image

    def ui_tree(self) -> str:
        """The screen's compact tree: ``uiautomator dump`` to a file on the phone, read back, compressed
        (``workbench.phone.uitree.compress_uiautomator``) onto the 0-999 grid of the current screen size."""
        self._shell(f"uiautomator dump {UI_DUMP_PATH}")
        return compress_uiautomator(self._shell(f"cat {UI_DUMP_PATH}"), *self.size)

    def current_app(self) -> str:
        for line in self._shell("dumpsys window").splitlines():
            if "mCurrentFocus" in line or "mFocusedApp" in line:
                name = current_app_name(line, self.packages)
                if name != HOME:
                    return name
        return HOME

    def execute(self, action: Action) -> Outcome:
        width, height = self.size
        kind = action.type
        if kind in ("Tap", "Double Tap", "Long Press"):
            x, y = to_pixels(action.args["element"], width, height)
            commands = {
                "Tap": [f"input tap {x} {y}"],
                "Double Tap": [f"input tap {x} {y}"] * 2,
                "Long Press": [f"input swipe {x} {y} {x} {y} {LONG_PRESS_MS}"],
            }[kind]
        elif kind == "Swipe":
            (x1, y1), (x2, y2) = (to_pixels(action.args[k], width, height) for k in ("start", "end"))
            commands = [f"input swipe {x1} {y1} {x2} {y2} {SWIPE_MS}"]
        elif kind == "Type":
            return self._type(action.args["text"])
        elif kind == "Back":
            commands = ["input keyevent 4"]
        elif kind == "Home":
            commands = ["input keyevent KEYCODE_HOME"]
        elif kind == "Launch":
            package = self.packages.get(action.args["app"])
            if package is None:
                return Outcome(False, f"App not found: {action.args['app']} (not a name of the app table)")
            commands = [f"monkey -p {package} -c android.intent.category.LAUNCHER 1"]
        elif kind == "Wait":
            seconds = re.search(r"\d+(?:\.\d+)?", action.args["duration"])
            time.sleep(min(10.0, float(seconds.group())) if seconds else 1.0)
            return Outcome(True, "waited")
        else:
            return Outcome(True, "finished")
        for command in commands:
            self._shell(command)
        time.sleep(self.settle_s)
        return Outcome(True, "sent " + "; ".join(commands))

    def _type(self, text: str) -> Outcome:
        previous = self._shell("settings get secure default_input_method").strip()
        commands = [] if previous == ADB_KEYBOARD else [f"ime set {ADB_KEYBOARD}"]
        encoded = base64.b64encode(text.encode("utf-8")).decode("ascii")
        commands += ["am broadcast -a ADB_CLEAR_TEXT", f"am broadcast -a ADB_INPUT_B64 --es msg {encoded}"]
        if previous and previous != ADB_KEYBOARD:
            commands.append(f"ime set {previous}")
        for command in commands:
            self._shell(command)
        time.sleep(self.settle_s)
        return Outcome(True, f"typed {text!r} through the ADB keyboard")
