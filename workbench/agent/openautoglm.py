"""Open-AutoGLM's own agent loop on the simulated phone: ``phone_agent.PhoneAgent.run(task)`` from its package
(``phone-agent``; ``pip install --ignore-requires-python phone-agent==0.1.1``, which ``scripts/setup.sh --test``
does), its model client pointed at any OpenAI-compatible server, its device interface answered by a ``SimPhone``:
swapped in through its own device factory (``phone_agent.device_factory``: the factory's device module, which is
``phone_agent.adb`` on a phone, is ``SimDevice`` here). None of its files is changed; its timing delays are set to 0
through its own timing configuration, and the clock its action handler sleeps on for a ``Wait`` is the simulated
phone's (``_PhoneClock``: the phone waits that long, a slow app loads, and no time passes). The loop, the prompt, the history, the reply parsing and the action handler are
all the runtime's: it judges whether what workbench trains runs in the runtime unchanged.

``SimDevice`` answers as the runtime's adb code would on a phone showing the simulator's screens: a screenshot at the
simulator's size, the current app named from the focused package by the runtime's own app table (its first name whose
package is in the focused window's line, else "System Home"), Launch only for a name in that table. Gestures come in
pixels of the touch screen the screenshot reports (``touch_size``, 1080x2400 by default, whatever the image's size: a
phone whose screenshots are sent scaled down), turned back into the 0-999 grid exactly (at 1000 pixels or more each
way the runtime's ``int(v / 1000 * size)`` loses nothing), so the runtime's gestures land where the workbench's
runner puts the same actions.

``run_in_runtime(task, base_url, model)`` plays one task and judges its final state with the task's checks, as the
workbench's runner does: success is a parsed ``finish`` with every check holding.
"""

from __future__ import annotations

import base64
import contextlib
import io
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..image_io import png_bytes
from ..phone.actions import Action, format_action
from ..phone.conversation import DEFAULT_LANG, MAX_STEPS
from ..phone.openautoglm import TOUCH_SIZE, grid_point
from ..phone.sim import PHONE_SIZE, SimPhone, app_package
from ..phone.state import PhoneState
from ..phone.tasks import PhoneTask

INSTALL = "pip install --ignore-requires-python phone-agent==0.1.1"


def _runtime():
    try:
        import phone_agent  # noqa: F401
    except ImportError:
        raise RuntimeError(f"Open-AutoGLM's runtime (package phone-agent) is not installed: {INSTALL}") from None
    import phone_agent.config.apps
    import phone_agent.config.timing
    import phone_agent.device_factory

    return phone_agent


class SimDevice:
    """The functions of the runtime's device module (``phone_agent.adb``: screenshot, current app, gestures, keys,
    launch, the ADB keyboard) on a simulated phone. ``executed``: each action it carried out, as an ``Action``."""

    def __init__(self, phone: SimPhone, touch_size: tuple[int, int] = TOUCH_SIZE):
        self.phone, self.touch_size = phone, touch_size
        self.executed: list[Action] = []
        self.table = _runtime().config.apps.APP_PACKAGES

    def _do(self, action: Action) -> None:
        self.executed.append(action)
        self.phone.execute(action)

    def _point(self, x: int, y: int) -> list[int]:
        width, height = self.touch_size
        return [grid_point(x, width), grid_point(y, height)]

    # -- what the runtime reads -----------------------------------------------------------------------------------
    def get_screenshot(self, device_id: str | None = None, timeout: int = 10):
        from phone_agent.adb.screenshot import Screenshot

        png = png_bytes(self.phone.screenshot())
        return Screenshot(base64.b64encode(png).decode("utf-8"), *self.touch_size)

    def get_current_app(self, device_id: str | None = None) -> str:
        package = self.phone.focused_package()
        line = f"mCurrentFocus=Window{{4c1d u0 {package}/{package}.MainActivity}}"
        return next((name for name, p in self.table.items() if p in line), "System Home")

    # -- what it does -------------------------------------------------------------------------------------------
    def tap(self, x: int, y: int, device_id: str | None = None, delay: float | None = None) -> None:
        self._do(Action("Tap", {"element": self._point(x, y)}))

    def double_tap(self, x: int, y: int, device_id: str | None = None, delay: float | None = None) -> None:
        self._do(Action("Double Tap", {"element": self._point(x, y)}))

    def long_press(
        self, x: int, y: int, duration_ms: int = 3000, device_id: str | None = None, delay: float | None = None
    ) -> None:
        self._do(Action("Long Press", {"element": self._point(x, y)}))

    def swipe(
        self,
        start_x: int,
        start_y: int,
        end_x: int,
        end_y: int,
        duration_ms: int | None = None,
        device_id: str | None = None,
        delay: float | None = None,
    ) -> None:
        self._do(Action("Swipe", {"start": self._point(start_x, start_y), "end": self._point(end_x, end_y)}))

    def back(self, device_id: str | None = None, delay: float | None = None) -> None:
        self._do(Action("Back"))

    def home(self, device_id: str | None = None, delay: float | None = None) -> None:
        self._do(Action("Home"))

    def launch_app(self, app_name: str, device_id: str | None = None, delay: float | None = None) -> bool:
        """As the runtime's adb code: False for a name outside its table; else the package is started (a package the
        phone does not have starts nothing, and the call still says True, as ``monkey`` does)."""
        if app_name not in self.table:
            return False
        self.executed.append(Action("Launch", {"app": app_name}))
        app = next((a for a in self.phone.state.contents.apps if app_package(a) == self.table[app_name]), None)
        if app is not None:
            self.phone.open_app(app)
        return True

    def wait(self, seconds: float) -> None:
        """Time passing on the phone (the runtime's Wait sleeps on its clock: ``_PhoneClock``)."""
        self._do(Action("Wait", {"duration": f"{seconds:g} seconds"}))

    def type_text(self, text: str, device_id: str | None = None) -> None:
        self._do(Action("Type", {"text": text}))

    def clear_text(self, device_id: str | None = None) -> None:
        """The ADB keyboard's clear: the simulator's Type replaces the field's text already."""

    def detect_and_set_adb_keyboard(self, device_id: str | None = None) -> str:
        return "com.android.adbkeyboard/.AdbIME"

    def restore_keyboard(self, ime: str, device_id: str | None = None) -> None:
        """Nothing to restore: the simulator has one keyboard."""


@dataclass
class RuntimeEpisode:
    """One task played by the runtime's loop: how it ended (``finish``, ``parse_failure``: a reply its parser
    rejected, which it turns into finish; ``step_limit``; ``error``: the model request failed), what it returned,
    the actions it executed, its conversation at the end (``context``), and the task's verdict on the final state."""

    task: str
    end: str
    message: str
    success: bool
    checks: dict
    actions: list[str] = field(default_factory=list)
    context: list[dict] = field(default_factory=list)
    final_state: PhoneState | None = None
    final_app: str = ""


def _ending(returned: str, context: list[dict]) -> str:
    from phone_agent.actions.handler import parse_action as runtime_parse

    def parse_action(text: str) -> dict:
        with contextlib.redirect_stdout(io.StringIO()):  # it prints what it parses
            return runtime_parse(text)

    if returned == "Max steps reached":
        return "step_limit"
    if returned.startswith("Model error:") or not context or context[-1]["role"] != "assistant":
        return "error"
    kept = context[-1]["content"]
    action_text = kept[kept.rfind("<answer>") + len("<answer>") : -len("</answer>")]
    try:
        return "finish" if parse_action(action_text).get("_metadata") == "finish" else "step_limit"
    except ValueError:
        return "parse_failure"


class _PhoneClock:
    """The clock the runtime's action handler sleeps on (its module's ``time``), on the simulated phone: a sleep
    is the phone waiting that long (a ``Wait``: a slow app loads meanwhile) and takes no time. Its own delays are 0
    (``_runtime_on`` sets them so), so only its ``Wait`` action moves the phone's clock, as in the workbench's runner."""

    def __init__(self, device: SimDevice):
        self.device = device

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.device.wait(seconds)


@contextlib.contextmanager
def _runtime_on(phone: SimPhone):
    """The runtime's device factory answering with ``phone`` (its delays 0, its Wait the phone's) for the duration."""
    runtime = _runtime()
    import phone_agent.actions.handler as handler

    df, timing = runtime.device_factory, runtime.config.timing
    saved = df._device_factory, timing.TIMING_CONFIG.action, timing.TIMING_CONFIG.device, handler.time
    df.set_device_type(df.DeviceType.ADB)
    device = SimDevice(phone)
    df.get_device_factory()._module = device  # the factory's device module: phone_agent.adb on a phone
    timing.update_timing_config(
        action=timing.ActionTimingConfig(0, 0, 0, 0), device=timing.DeviceTimingConfig(0, 0, 0, 0, 0, 0, 0, 0)
    )
    handler.time = _PhoneClock(device)
    try:
        yield device
    finally:
        df._device_factory = saved[0]
        timing.update_timing_config(action=saved[1], device=saved[2])
        handler.time = saved[3]


def run_in_runtime(
    task: PhoneTask,
    base_url: str,
    model: str,
    *,
    lang: str = DEFAULT_LANG,
    max_steps: int = MAX_STEPS,
    size: tuple[int, int] = PHONE_SIZE,
    max_tokens: int = 3000,
    api_key: str = "EMPTY",
    quiet: bool = True,
) -> RuntimeEpisode:
    """Play ``task`` with Open-AutoGLM's ``PhoneAgent`` (its ``--lang`` ``lang``, ``max_steps``; its client's
    sampling: greedy, ``max_tokens`` a reply, 3000 as it ships) against the server at ``base_url`` serving ``model``,
    on a simulated phone whose screenshots are ``size`` pixels."""
    runtime = _runtime()
    from phone_agent.agent import AgentConfig
    from phone_agent.model import ModelConfig

    phone = SimPhone(size)
    start = task.initial_state()
    phone.reset(start)
    with _runtime_on(phone) as device:
        # a user who confirms every sensitive tap and has nothing to take over (its defaults ask on the console)
        agent = runtime.PhoneAgent(
            ModelConfig(base_url=base_url, api_key=api_key, model_name=model, lang=lang, max_tokens=max_tokens),
            AgentConfig(max_steps=max_steps, lang=lang, verbose=not quiet),
            confirmation_callback=lambda message: True,
            takeover_callback=lambda message: None,
        )
        out = io.StringIO()
        with contextlib.redirect_stdout(out) if quiet else contextlib.nullcontext():
            returned = agent.run(task.instruction)
    end = _ending(returned, agent.context)
    checks = task.check(phone, start)
    return RuntimeEpisode(
        task.id,
        end,
        returned,
        end == "finish" and all(checks.values()),
        checks,
        [format_action(a) for a in device.executed],
        agent.context,
        phone.state.copy(),
        phone.current_app(),
    )


def run_tasks_in_runtime(tasks: Sequence[PhoneTask], base_url: str, model: str, **options) -> list[RuntimeEpisode]:
    """``run_in_runtime`` for each task in turn (the runtime's loop plays one phone at a time)."""
    return [run_in_runtime(task, base_url, model, **options) for task in tasks]


@dataclass
class LoopAgreement:
    """One task played by the runtime's loop and by the workbench's runner against the same served model."""

    task: str
    runtime: RuntimeEpisode
    runner: object  # the runner's agent.Episode

    @property
    def same(self) -> bool:
        """Both ended alike (how, success, the final-state checks, the app on screen)."""
        r, w = self.runtime, self.runner
        return (r.end, r.success, r.checks, r.final_app) == (w.end_reason, bool(w.success), w.checks, w.final_app)


def compare_loops(
    tasks: Sequence[PhoneTask],
    base_url: str,
    model: str,
    *,
    lang: str = DEFAULT_LANG,
    max_steps: int = 20,
    size: tuple[int, int] = PHONE_SIZE,
    max_tokens: int = 256,
    progress: bool = False,
) -> list[LoopAgreement]:
    """Each task played by Open-AutoGLM's ``PhoneAgent`` and by ``agent.run_episodes`` against ``model`` at
    ``base_url``, the runner asking with the runtime's own sampling (``RUNTIME_SAMPLING``) and both on the same step
    limit, with no stop on repeats (the runtime has none): where the model is deterministic, both must end alike."""
    from ..serve.remote import ServerClient
    from .policy import RUNTIME_SAMPLING, ServedPolicy
    from .runner import run_episodes, sim_devices

    client = ServerClient(base_url.removesuffix("/v1"))
    policy = ServedPolicy(client, model, max_tokens=max_tokens, concurrency=1, **RUNTIME_SAMPLING)
    out = []
    try:
        for n, task in enumerate(tasks, 1):
            theirs = run_in_runtime(
                task, base_url, model, lang=lang, max_steps=max_steps, size=size, max_tokens=max_tokens
            )
            (ours,) = run_episodes(
                [task], policy, sim_devices(size), max_steps=max_steps, concurrency=1, repeat_limit=0, lang=lang
            )
            out.append(LoopAgreement(task.id, theirs, ours))
            if progress:
                print(
                    f"[{n}/{len(tasks)}] {task.id}: runtime {theirs.end} {theirs.success}, runner "
                    f"{ours.end_reason} {ours.success}{'' if out[-1].same else '  DIFFERENT'}",
                    flush=True,
                )
    finally:
        policy.close()
        client.close()
    return out
