"""``evaluate_agent``: the tasks' episodes of each served model (or of the oracle) on the simulated phone or a real
one, stored, summarised and written where the runs panel reads them.

Each model's episodes go to a folder (``workbench.agent.store``): an adapter served from a run directory keeps
them in ``RUN_DIR/episodes/<stamp>/`` and gets the report (every evaluated model's metrics, under the task name
``phone_agent``) in its ``eval_results.json``, next to its single-step task metrics; a base model, another
server's model and the oracle write under ``out`` (default ``runs/episodes/<stamp>/<model>``).
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config.names import EPISODE_TASK
from ..phone.conversation import DEFAULT_LANG, MAX_STEPS, REPEAT_LIMIT
from ..phone.sim import PHONE_SIZE
from ..phone.tasks import PhoneTask
from ..runs.layout import EPISODES_DIR
from ..runs.results import served_run_dir, write_results
from ..serve.remote import ServerClient, ServerUnreachable
from .judging import Contestant, judge
from .policy import OraclePolicy, ServedPolicy
from .runner import sim_devices
from .store import folder_name

TASK_NAME = EPISODE_TASK  # the task name of episode metrics in eval_results.json and the runs panel


class AgentError(ValueError):
    """A problem with what was asked to run (server unreachable, model not served, bad option)."""


@dataclass
class AgentReport:
    task: str
    data: str  # which tasks
    server: str
    settings: dict
    wall_s: float
    metrics: dict[str, dict[str, dict]]  # model id -> "default" -> metrics (the shape eval reports have)
    episodes: dict[str, str] = field(default_factory=dict)  # model id -> its episodes folder
    records: dict[str, list[dict]] = field(default_factory=dict)  # model id -> one line per episode
    written: list[str] = field(default_factory=list)  # the eval_results.json files written

    def to_dict(self, records: bool = True) -> dict:
        out = {
            "task": self.task,
            "data": self.data,
            "server": self.server,
            "settings": self.settings,
            "wall_s": self.wall_s,
            "metrics": self.metrics,
            "episodes": self.episodes,
            "written": self.written,
        }
        if records:
            out["records"] = self.records
        return out


def parse_device(spec: str) -> tuple[str, str | None]:
    """``sim`` or ``adb:SERIAL`` -> (kind, serial); ValueError saying what is accepted."""
    if spec == "sim":
        return "sim", None
    if spec.startswith("adb:") and spec[4:].strip():
        return "adb", spec[4:].strip()
    raise ValueError(f"{spec!r}: give sim (the simulated phone) or adb:SERIAL (a phone `adb devices` lists)")


def evaluate_agent(
    tasks: Sequence[PhoneTask],
    models: Iterable[str] | None = None,
    *,
    server: Any = None,
    oracle: bool = False,
    device: str = "sim",
    size: tuple[int, int] = PHONE_SIZE,
    max_steps: int = MAX_STEPS,
    concurrency: int = 8,
    out: str | Path | None = None,
    runs_dir: str | Path = "runs",
    write: bool = True,
    max_tokens: int = 512,
    temperature: float = 0.0,
    seed: int | None = None,
    api_key: str | None = None,
    adb_host: str = "127.0.0.1",
    adb_port: int = 5037,
    date: datetime.date | None = None,
    screens: bool = True,
    progress: bool = True,
    timeout: float = 600.0,
    observation: str = "screenshot",
    repeat_limit: int = REPEAT_LIMIT,
    lang: str = DEFAULT_LANG,
) -> AgentReport:
    """Play ``tasks`` once per served model (or once with their oracle solutions), store and judge the episodes.

    Args:
        tasks: the phone tasks (``phone.tasks.select_tasks``).
        models: the served ids to play (default: every one); server: a URL or a ServerHandle.
        oracle: play the tasks' oracle solutions instead of a model.
        device: ``sim`` or ``adb:SERIAL``; size: the simulated phone's pixels; adb_host, adb_port: the ADB server.
        max_steps, repeat_limit, observation, lang: as ``run_episodes`` takes them.
        concurrency: episodes at once; timeout: seconds a request may take; api_key: the server's key.
        max_tokens, temperature, seed: the requests' settings.
        out: where episodes of models served from no run go (default ``runs_dir/episodes/<stamp>``).
        runs_dir: the runs directory; write: add the report to each evaluated run's ``eval_results.json``.
        date: the date in the system prompt (default: today); screens: store each step's screenshot.
        progress: show a progress bar.

    Returns:
        The ``AgentReport`` (metrics per model, their episode folders); AgentError for what cannot run.
    """
    kind, serial = _checked_device(device, oracle, server, max_steps, concurrency, tasks)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = Path(out) if out is not None else Path(runs_dir) / EPISODES_DIR / stamp
    devices = _devices(kind, serial, size, adb_host, adb_port)
    players = _players(tasks, models, server, oracle, api_key, timeout, temperature, max_tokens, seed, concurrency)
    settings = {
        "tasks": len(tasks),
        "device": device,
        "size": list(size) if kind == "sim" else None,
        "max_steps": max_steps,
        "repeat_limit": repeat_limit,
        "concurrency": concurrency,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "seed": seed,
        "observation": observation,
        "lang": lang,
        "models": [p.name for p in players.policies],
        "base": players.base(),
        "n": len(tasks),
    }
    report = AgentReport(TASK_NAME, ",".join(sorted({t.split for t in tasks})), players.server, settings, 0.0, {})
    start = time.monotonic()
    contestants = players.contestants(stamp, out)
    try:
        _judge_into(report, contestants, tasks, devices, settings, screens, progress, date)
    finally:
        players.close()  # the policies a failure left unplayed, and the client
    report.wall_s = round(time.monotonic() - start, 3)
    if write:
        players.write_results(report)
    return report


# the options of the episode loop (``run_episodes``) that the report's settings record as they were given
_RUN_OPTIONS = ("max_steps", "concurrency", "observation", "repeat_limit", "lang")


def _judge_into(
    report: AgentReport, contestants: list[Contestant], tasks, devices, settings: dict, screens, progress, date
) -> None:
    """Each contestant's episodes played and judged (``judge``, the episode loop's options read from ``settings``);
    their metrics, episode folders and one record per episode put in ``report``."""
    run_options = {name: settings[name] for name in _RUN_OPTIONS}
    for judged in judge(
        contestants, tasks, devices, settings, screens=screens, progress=progress, date=date, **run_options
    ):
        report.metrics[judged.name] = {"default": judged.metrics}
        report.episodes[judged.name] = str(judged.folder)
        report.records[judged.name] = judged.records


@dataclass
class _Players:
    """Who plays the tasks: the oracle, or each wanted model of a server through one client (with the server's model
    cards by id, which say the base model and the run directory each adapter is served from)."""

    policies: list
    client: ServerClient | None = None
    cards: dict = field(default_factory=dict)

    @property
    def server(self) -> str:
        """The address the report names: the server's, or ``oracle``."""
        return self.client.base if self.client else "oracle"

    def base(self) -> str | None:
        """The first served model that is no adapter (None for the oracle)."""
        return next((i for i, c in self.cards.items() if not c.get("parent")), None)

    def contestants(self, stamp: str, out: Path) -> list[Contestant]:
        """One per policy, its episodes in ``RUN_DIR/episodes/<stamp>`` of the run it is served from, else in
        ``out/<model>``."""
        contestants = []
        for policy in self.policies:
            run_dir = served_run_dir(self.cards.get(policy.name, {}))
            folder = run_dir / EPISODES_DIR / stamp if run_dir is not None else out / folder_name(policy.name)
            contestants.append(Contestant(policy.name, folder, lambda p=policy: p))
        return contestants

    def close(self) -> None:
        for policy in self.policies:
            getattr(policy, "close", lambda: None)()
        if self.client is not None:
            self.client.close()

    def write_results(self, report: AgentReport) -> None:
        """``report`` added to the ``eval_results.json`` of each judged model served from a run directory, each file
        named in ``report.written`` as it is written (the next file's copy of the report lists it)."""
        for model in report.metrics:
            run_dir = served_run_dir(self.cards.get(model, {}))
            if run_dir is not None:
                report.written.append(str(write_results(run_dir, report, model)))


def _players(
    tasks, models, server, oracle: bool, api_key, timeout: float, temperature, max_tokens, seed, concurrency
) -> _Players:
    """The oracle of ``tasks``, or a policy per wanted model of ``server`` (a URL or a ServerHandle, its key unless
    ``api_key`` is given), each sending requests with these settings."""
    if oracle:
        return _Players([OraclePolicy(tasks)])
    client = ServerClient(getattr(server, "url", server), api_key or getattr(server, "api_key", None), timeout)
    cards, wanted = _served_models(client, models)
    policies = [
        ServedPolicy(client, m, temperature=temperature, max_tokens=max_tokens, seed=seed, concurrency=concurrency)
        for m in wanted
    ]
    return _Players(policies, client, cards)


def _checked_device(
    device: str, oracle: bool, server: Any, max_steps: int, concurrency: int, tasks: Sequence[PhoneTask]
) -> tuple[str, str | None]:
    """The device's kind and serial, once the options are known to fit together (AgentError naming the fix)."""
    if oracle == (server is not None):
        raise AgentError("give a server (and its model ids) or oracle=True, not both or neither")
    kind, serial = parse_device(device)
    if kind == "adb" and oracle:
        raise AgentError("the oracle's actions are the simulated phone's: run --oracle on --device sim")
    if kind == "adb" and concurrency != 1:
        raise AgentError(f"one phone runs one episode at a time: give concurrency 1 with {device} (got {concurrency})")
    if max_steps < 1 or concurrency < 1:
        raise AgentError("max_steps and concurrency must be at least 1")
    if not tasks:
        raise AgentError("no tasks to run")
    free = [t.id for t in tasks if t.free_form]
    if free and (kind != "adb" or oracle):
        raise AgentError(
            f"{len(free)} free-form task(s) ({free[0]}, ...): your own instructions have no simulated "
            "start state, checks or oracle; run them with a model on a phone (--device adb:SERIAL), where "
            "the episodes are stored for you to judge (and `workbench agent record --episodes DIR` makes "
            "rows of the ones you keep)"
        )
    return kind, serial


def _devices(kind: str, serial: str | None, size: tuple[int, int], adb_host: str, adb_port: int):
    """A factory of phones for the episodes: simulated ones, or the one real phone reused episode after episode."""
    if kind != "adb":
        return sim_devices(size)
    from ..phone.adb import AdbPhone

    phone = AdbPhone(serial, host=adb_host, port=adb_port)
    return lambda: phone


def _served_models(client: ServerClient, models: Iterable[str] | None) -> tuple[dict, list[str]]:
    """The server's model cards and the ids to play (default: every served one); AgentError, client closed, when
    the server cannot answer or a wanted id is not served."""
    try:
        cards = client.models()
    except ServerUnreachable as err:
        client.close()
        raise AgentError(str(err)) from None
    wanted = list(dict.fromkeys(models)) if models else list(cards)
    if not wanted:
        client.close()
        raise AgentError(
            f"the server at {client.base} serves no model yet (still loading?): try again, or name one with --model"
        )
    missing = [m for m in wanted if m not in cards]
    if missing:
        client.close()
        raise AgentError(
            f"model id(s) {', '.join(map(repr, missing))} not served at {client.base}; served: {', '.join(cards)}"
        )
    return cards, wanted
