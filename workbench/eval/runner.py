"""Run a task set against served models: ``evaluate(task, models, server=URL)``.

Every (model, thinking mode, example) request goes to the server at once through a thread pool of
``concurrency`` workers, so the server decodes them together in its batch; greedy at temperature 0 (the
server's batching does not change greedy output), ``seed`` for sampled runs. The report is stored in the
run directory of each evaluated adapter (``eval_results.json``, one entry per task), where the runs panel
reads it.

Each row's images go inline as base64 data: URLs (``load_eval_examples`` reads them; ``chat_request`` builds the body),
so screenshot tasks work against any OpenAI-compatible server started with its safe defaults. A request that
fails is never scored: the metrics are over the answered rows only (``n``), and each model's entry counts the
``failed`` requests and keeps the first distinct reasons (``errors``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..runs import base_model, run_dir_of, trained_at
from ..runs.layout import ADAPTER_DIR, MODEL_DIR, TrainedWeights
from ..runs.results import served_run_dir, write_results
from ..serve.remote import ModelReply, ServerClient, ServerUnreachable, chat_request
from .registry import get_task
from .task_protocol import Task, load_eval_examples

THINKING_MODES = {"default": None, "on": True, "off": False}  # mode name -> the request's enable_thinking
MAX_REASONS = 3  # distinct failure reasons kept per model and mode


class EvalError(ValueError):
    """A problem with what was asked to evaluate (server unreachable, model not served, bad option)."""


@dataclass
class EvalReport:
    task: str
    data: str
    server: str
    settings: dict
    wall_s: float
    # model id -> thinking mode -> the task's metrics over the answered rows (n), plus failed and errors
    metrics: dict[str, dict[str, dict]]
    # model id -> thinking mode -> one record per example: index, answer, reasoning, verdict
    records: dict[str, dict[str, list[dict]]] = field(default_factory=dict)
    written: list[str] = field(default_factory=list)  # the eval_results.json files written

    @property
    def failed(self) -> int:
        """Requests that got no answer, over every model and mode."""
        return sum(m.get("failed", 0) for by_mode in self.metrics.values() for m in by_mode.values())

    def to_dict(self, records: bool = True) -> dict:
        out = {
            "task": self.task,
            "data": self.data,
            "server": self.server,
            "settings": self.settings,
            "wall_s": self.wall_s,
            "metrics": self.metrics,
            "written": self.written,
        }
        if records:
            out["records"] = self.records
        return out


def thinking_modes(enable_thinking: str | None) -> list[str]:
    """``on``, ``off``, ``both`` (on and off) or None (the chat template's default)."""
    if enable_thinking is None:
        return ["default"]
    if enable_thinking == "both":
        return ["on", "off"]
    if enable_thinking not in ("on", "off"):
        raise EvalError(f"enable_thinking is on, off or both, got {enable_thinking!r}")
    return [enable_thinking]


def evaluate(
    task: str | Task,
    models: Iterable[str] | None = None,
    *,
    server: Any = None,
    base: str | None = None,
    runs: Iterable[str] = (),
    data: str | Path | None = None,
    limit: int | None = None,
    enable_thinking: str | None = None,
    temperature: float = 0.0,
    seed: int | None = None,
    max_tokens: int = 96,
    concurrency: int = 8,
    system_prompt: str | None = None,
    api_key: str | None = None,
    write: bool = True,
    progress: bool = True,
    timeout: float = 600.0,
    device: str = "auto",
    dtype: str = "auto",
) -> EvalReport:
    """Score served models on an eval task. Without ``server``, one is started here for ``base`` with the adapters
    of ``runs`` (and one per full fine-tune or export among them, under the run's name), all stopped afterwards; a
    task measured on the model itself (``heldout_loss``) loads ``base`` / ``runs`` in this process instead.

    Args:
        task: an eval task's name (``workbench eval --task``) or a ``Task``.
        models: the served ids to score (default: every one).
        server: a URL or a ServerHandle, or a list of them.
        base: the id the report compares with (default: the first served model that is no adapter; without a
            server, the runs' base model).
        runs: run directories to serve and score.
        data: a JSONL file in place of the task's default data (``heldout_loss``: the runs' ``data.eval``).
        limit: score only the first rows.
        enable_thinking, temperature, seed, max_tokens, system_prompt: the requests' settings.
        concurrency: requests in flight; timeout: seconds one may take; api_key: the server's key.
        write: store the report in each evaluated adapter's run directory (``eval_results.json``).
        progress: show a progress bar.
        device, dtype: where the models started here answer and in what (``serve.registry.placement``: auto is the
            GPU when one is visible, in the dtype training's precision auto picks there).

    Returns:
        The ``EvalReport`` (metrics per model and thinking mode); EvalError for what cannot be evaluated.
    """
    task = get_task(task) if isinstance(task, str) else task
    data_path = _checked_data_path(task, data, concurrency, max_tokens, limit)
    runs = [str(r) for r in runs]
    if getattr(task, "needs_model", False):
        if server is not None:
            raise EvalError(
                f"task {task.name!r} is measured on the model itself, not through a server: give the "
                "runs (--run runs/NAME) and/or the base model (--base MODEL) instead of --server"
            )
        return _measure_in_process(
            task, models, base, runs, data, limit, system_prompt, write, {"device": device, "dtype": dtype}
        )
    questions = _Questions.read(task, data_path, limit, system_prompt, enable_thinking, temperature, seed, max_tokens)
    with contextlib.ExitStack() as stack:
        if server is None:  # ours, for the base and the runs, stopped afterwards (their handles carry their key)
            models, base, server = _start_own_servers(stack, models, base, runs, concurrency, device, dtype)
            api_key = None
        servers = list(server) if isinstance(server, (list, tuple)) else [server]
        clients = [
            ServerClient(getattr(srv, "url", srv), api_key or getattr(srv, "api_key", None), timeout) for srv in servers
        ]
        try:
            return _ask_served(questions, models, clients, base, concurrency, write, progress)
        finally:
            for client in clients:
                client.close()


def _checked_data_path(task: Task, data, concurrency: int, max_tokens: int, limit: int | None) -> Path:
    """The file the task is scored on (``data``, else the task's default), once the numbers are known to be valid."""
    data_path = Path(data) if data is not None else task.default_data
    if data_path is None:
        raise EvalError(f"task {task.name!r} has no default data: give data=FILE")
    if concurrency < 1 or max_tokens < 1 or (limit is not None and limit < 1):
        raise EvalError("concurrency, max_tokens and limit must be at least 1")
    return data_path


@dataclass(frozen=True)
class _Questions:
    """What each served model is asked: the task's examples (read from ``data_path``, the first ``limit``) in each
    thinking mode, with the requests' settings."""

    task: Task
    data_path: Path
    examples: list
    modes: list[str]
    limit: int | None
    enable_thinking: str | None
    temperature: float
    seed: int | None
    max_tokens: int

    @classmethod
    def read(cls, task: Task, data_path: Path, limit, system_prompt, enable_thinking, temperature, seed, max_tokens):
        """The first ``limit`` examples of ``data_path`` (rendered with ``system_prompt``), in the thinking modes
        ``enable_thinking`` names (EvalError for one it does not)."""
        examples = load_eval_examples(data_path, limit, system_prompt)
        modes = thinking_modes(enable_thinking)
        return cls(task, data_path, examples, modes, limit, enable_thinking, temperature, seed, max_tokens)

    def request(self, model: str, mode: str, example) -> dict:
        """The chat request asking ``model`` one example in one thinking mode."""
        return chat_request(
            model,
            example.messages,
            enable_thinking=THINKING_MODES[mode],
            seed=self.seed,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
        )

    def settings(self, models: list[str], base: str | None, concurrency: int) -> dict:
        """The report's settings: how the models were asked, which were, and the one they are compared with."""
        return {
            "temperature": self.temperature,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
            "limit": self.limit,
            "n": len(self.examples),
            "concurrency": concurrency,
            "enable_thinking": self.enable_thinking,
            "models": models,
            "base": base,
            **({"rules": self.task.rules} if getattr(self.task, "rules", None) else {}),  # its matching rules
        }


def _ask_served(
    questions: _Questions, models, clients: list[ServerClient], base, concurrency: int, write: bool, progress: bool
) -> EvalReport:
    """Every (model, mode, example) asked of the server serving that model, scored, stored."""
    served = _served_models(clients)
    models = list(dict.fromkeys(models)) if models else list(served)
    missing = [m for m in models if m not in served]
    if missing:
        raise EvalError(
            f"model id(s) {', '.join(map(repr, missing))} not served at "
            f"{', '.join(c.base for c in clients)}; served: {', '.join(served)}"
        )
    if base not in served:  # the base the report compares with: the first served model that is no adapter
        base = next((i for i, (_, c) in served.items() if not c.get("parent")), None)
    jobs = [(m, mode, ex) for m in models for mode in questions.modes for ex in questions.examples]
    start = time.monotonic()
    replies = _ask_all(questions, jobs, served, concurrency, progress)
    wall = time.monotonic() - start
    records = _scored_records(questions.task, jobs, replies)
    metrics = {
        m: {mode: summarize_answered(questions.task, recs) for mode, recs in by_mode.items()}
        for m, by_mode in records.items()
    }
    report = EvalReport(
        questions.task.name,
        str(questions.data_path),
        " ".join(dict.fromkeys(served[m][0].base for m in models)),
        questions.settings(models, base, concurrency),
        round(wall, 3),
        metrics,
        records,
    )
    if write:
        for model in models:
            run_dir = served_run_dir(served[model][1])
            if run_dir is not None:
                report.written.append(str(write_results(run_dir, report, model)))
    return report


def _served_models(clients: list[ServerClient]) -> dict[str, tuple[ServerClient, dict]]:
    """Model id -> the client of the first server serving it and the model's card."""
    served: dict[str, tuple[ServerClient, dict]] = {}
    for client in clients:
        try:
            cards = client.models()
        except ServerUnreachable as err:
            raise EvalError(str(err)) from None
        for model_id, card in cards.items():
            served.setdefault(model_id, (client, card))
    return served


def _ask_all(questions: _Questions, jobs: list, served: dict, concurrency: int, progress: bool) -> list[ModelReply]:
    """Each (model, mode, example) job's reply, in order, from the server serving its model: ``concurrency``
    requests in flight at once, so the server decodes them together in its batch."""

    def ask(job) -> ModelReply:
        model, mode, ex = job
        return served[model][0].chat(questions.request(model, mode, ex))

    bar = _progress(len(jobs), f"eval {questions.task.name}", progress)
    try:
        with ThreadPoolExecutor(concurrency) as pool:
            replies = []
            for reply in pool.map(ask, jobs):
                replies.append(reply)
                bar.update(1)
    finally:
        bar.close()
    return replies


def _scored_records(task: Task, jobs: list, replies: list[ModelReply]) -> dict[str, dict[str, list[dict]]]:
    """Model id -> thinking mode -> one record per example: its reference, the reply and the task's verdict (None
    for a request that got no answer: nothing to score)."""
    records: dict[str, dict[str, list[dict]]] = {}
    for (model, mode, ex), reply in zip(jobs, replies):
        verdict = None if reply.error else task.score(ex, reply)  # no answer: nothing to score
        records.setdefault(model, {}).setdefault(mode, []).append(
            {
                "index": ex.index,
                "reference": ex.reference,
                "answer": reply.content,
                "reasoning": reply.reasoning,
                "error": reply.error,
                "verdict": verdict,
            }
        )
    return records


def summarize_answered(task: Task, records: list[dict]) -> dict:
    """The task's metrics over the answered records only (``n`` of them), then how many requests ``failed`` and
    the first distinct reasons (``errors``): a request that failed is no wrong answer, and no score hides it."""
    failed = [r["error"] for r in records if r["error"]]
    return {
        **task.summarize([r["verdict"] for r in records if not r["error"]]),
        "failed": len(failed),
        "errors": list(dict.fromkeys(failed))[:MAX_REASONS],
    }


def _start_own_servers(
    stack: contextlib.ExitStack, models, base: str | None, runs: list[str], concurrency: int, device: str, dtype: str
) -> tuple[list[str], str, list]:
    """One server for the base with the runs' adapters, and one per full fine-tune or merged/exported model
    (served under its run's name, as its adapter would be): base and tuned side by side either way. Each is stopped
    as ``stack`` closes. Returns the ids to score (default: every one), the base and the servers' handles."""
    from ..serve import start_server
    from ..serve.config import default_adapter_id

    base = _base_of(runs, base)
    adapters, full = _served_parts(runs)
    placed = {"device": device, "dtype": dtype}
    servers = [
        stack.enter_context(
            start_server(base, runs=adapters, max_batch=max(concurrency, 1), log_level="warning", **placed)
        )
    ]
    for model_id, path in full.items():
        servers.append(
            stack.enter_context(
                start_server(str(path), model_id=model_id, max_batch=max(concurrency, 1), log_level="warning", **placed)
            )
        )
    wanted = list(models) if models else [base, *(default_adapter_id(r) for r in adapters), *full]
    return wanted, base, servers


def _served_parts(runs: list[str]) -> tuple[list[str], dict[str, Path]]:
    """The runs split by what they trained (``runs.layout.trained_at``): those served as adapters on the base, and
    model directories (a full fine-tune's model/, a merged model, an export) by the id each is served as: the run's
    name for its model/, RUN-NAME for its merged/ or exports/NAME. EvalError for a run that saved nothing yet."""
    adapters, full = [], {}
    for path in runs:
        found = trained_at(path)
        if found is None or found.weights is None:
            raise EvalError(
                f"{path!r} holds no trained weights yet (no {ADAPTER_DIR}/ or {MODEL_DIR}/: they are saved "
                "at the run's end), nor is it a model directory: evaluate it once it has finished"
            )
        if found.weights.kind == "adapter":
            adapters.append(path)
            continue
        weights, run_dir = found.weights.path, found.run_dir
        model_id = (
            weights.name
            if run_dir is None
            else run_dir.name
            if weights.parent == run_dir and weights.name == MODEL_DIR
            else f"{run_dir.name}-{weights.name}"
        )
        if model_id in full:
            raise EvalError(
                f"{path!r} would be served as {model_id!r}, as {str(full[model_id])!r} is: evaluate them one at a time"
            )
        full[model_id] = weights
    return adapters, full


def _base_of(runs: list[str], base: str | None) -> str:
    """``base``, or the one base model the runs (run directories, their adapter/ or model/ folders, merged models
    or exports) fine-tuned."""
    if base is None:
        bases = {base_model(d) for d in map(run_dir_of, runs) if d is not None}
        if len(bases) != 1:
            raise EvalError("give base=MODEL (--base): it cannot be read from the runs' configs")
        base = bases.pop()
    return base


def _measure_in_process(task, models, base, runs, data, limit, system_prompt, write, placed: dict) -> EvalReport:
    """A task measured on the models themselves (held-out loss): the base loaded once here, each run's adapter
    put on it in turn (peft, never merged) and the base measured with the adapters disabled; a full fine-tune's or
    merged model is loaded on its own after them. Ids as a server
    started for the same runs would name them, so the report reads like a served one. Unless given, the data,
    truncation, system prompt and batch size are the runs' own (their eval's), so an adapter's loss is its run's
    eval loss."""
    from ..runs import run_config
    from ..serve.config import default_adapter_id, inspect_adapter
    from ..serve.registry import placement

    base = _base_of(runs, base)
    adapter_runs, full = _served_parts(runs)
    adapters = {default_adapter_id(r): inspect_adapter(r) for r in adapter_runs}
    wanted = list(dict.fromkeys(models)) if models else [base, *adapters, *full]
    unknown = [m for m in wanted if m != base and m not in adapters and m not in full]
    if unknown:
        raise EvalError(
            f"model id(s) {', '.join(map(repr, unknown))} are neither the base {base!r} nor a run's "
            f"adapter or model ({', '.join([*adapters, *full]) or 'no --run given'})"
        )
    full_runs = {model_id: run_dir_of(path) for model_id, path in full.items()}
    configs = [found.run for found in adapters.values() if found.run is not None]
    configs += [run_config(d) for d in full_runs.values() if d is not None]

    data_path, system_prompt = _runs_data(task, configs, data, system_prompt)
    placed = {**placed, "dtype": placement(placed["device"], placed["dtype"], configs)[1]}
    start = time.monotonic()
    loaded = _base_with_adapters(base, adapters, placed)
    model, metrics = loaded.model, {}
    # truncated and batched as the runs' eval was (data.max_length, micro_batch_size)
    max_length = max({c.data.max_length for c in configs}, default=512)
    batch_size = max({c.schedule.micro_batch_size for c in configs}, default=8)

    def measure(m, on=loaded) -> dict:
        return task.measure(
            m,
            on.tokenizer,
            data_path,
            limit=limit,
            max_length=max_length,
            batch_size=batch_size,
            system_prompt=system_prompt,
            processor=on.processor,
        )

    for model_id in wanted:
        if model_id in full:
            own = _full_model(full[model_id], full_runs[model_id], placed)
            metrics[model_id] = {"default": measure(own.model, own)}
            del own
        elif model_id == base:
            with model.disable_adapter() if adapters else contextlib.nullcontext():
                metrics[model_id] = {"default": measure(model)}
        else:
            model.set_adapter(model_id)
            metrics[model_id] = {"default": measure(model)}
    n = next(iter(metrics.values()))["default"]["n"]
    report = EvalReport(
        task.name,
        str(data_path),
        "in-process",
        {"limit": limit, "n": n, "max_length": max_length, "models": wanted, "base": base},
        round(time.monotonic() - start, 3),
        metrics,
    )
    if write:
        for model_id in wanted:
            run_dir = (
                served_run_dir({"parent": base, "root": str(adapters[model_id].dir)})
                if model_id in adapters
                else full_runs.get(model_id)
            )
            if run_dir is not None:
                report.written.append(str(write_results(run_dir, report, model_id)))
    return report


def _runs_data(task, configs: list, data, system_prompt) -> tuple[Path, str | None]:
    """The held-out file and system prompt to measure with: those given, else the runs' own (their data.eval and
    data.system_prompt, which must agree), else the task's default file."""

    def runs_agree(read, what: str, fallback):
        values = {read(c) for c in configs}
        if len(values) > 1:
            raise EvalError(
                f"the runs differ in {what} ({', '.join(sorted(map(str, values)))}): evaluate them one at a "
                "time, or give it (--data FILE, --system-prompt TEXT)"
            )
        return values.pop() if values else fallback

    if data is None:
        data = runs_agree(lambda c: c.data.eval, "data.eval", None)
        if data is not None and not Path(data).is_file():
            raise EvalError(
                f"the run's held-out set {data!r} (its data.eval) is not found here: give the file (--data FILE)"
            )
        data = data or task.default_data
    if system_prompt is None:
        system_prompt = runs_agree(lambda c: c.data.system_prompt, "data.system_prompt", None)
    return Path(data), system_prompt


def _base_with_adapters(base: str, adapters: dict, placed: dict):
    """``base`` built as the runs of ``adapters`` trained on it (``models.build_run_model``: a code-built base drawn
    from their seed), each run's adapter on it under its id (peft, unmerged; the first one active), on the device
    and in the dtype ``placed`` names (``_placed``)."""
    from ..models import peft_deprecation_hidden, shared_base

    try:
        cfg = shared_base(base, [found.run for found in adapters.values() if found.run is not None])
    except ValueError as err:
        raise EvalError(f"the runs need different base models: {err}") from None
    items = list(adapters.items())
    first = TrainedWeights("adapter", items[0][1].dir) if items else None
    loaded = _placed(cfg, placed, first, items[0][0] if items else "default")
    with peft_deprecation_hidden():
        for name, found in items[1:]:
            loaded.model.load_adapter(str(found.dir), adapter_name=name)
    loaded.model.eval()
    return loaded


def _full_model(weights: Path, run_dir: Path | None, placed: dict):
    """A full fine-tune's model/, a merged model or an export, with its run's model options when it has a run."""
    from ..models import base_config
    from ..runs import run_config

    cfg = run_config(run_dir) if run_dir is not None else base_config(str(weights))
    return _placed(cfg, placed, TrainedWeights("model", weights))


def _placed(cfg, placed: dict, weights: TrainedWeights | None, adapter_name: str = "default"):
    """``models.build_run_model`` on ``placed["device"]`` in ``placed["dtype"]`` as a server places a model
    (``serve.registry.placement``), refused first when the planner says it does not fit there."""
    from ..dtypes import DTYPE_BY_NAME
    from ..models import build_run_model
    from ..serve.registry import placement, refuse_what_does_not_fit

    device, dtype = placement(placed["device"], placed["dtype"])
    source = str(weights.path) if weights is not None and weights.kind == "model" else cfg.model.source
    refuse_what_does_not_fit(source, dtype, device, cfg.quantization)
    loaded = build_run_model(cfg, DTYPE_BY_NAME[dtype], weights, adapter_name, device=device)
    loaded.model.to(device)
    return loaded


def _progress(total: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="answer", disable=not enabled, leave=False)
