"""Run a task set against served models: ``evaluate(task, models, server=URL)``.

Every (model, thinking mode, example) request goes to the server at once through a thread pool of
``concurrency`` workers, so the server decodes them together in its batch; greedy at temperature 0 (the
server's batching does not change greedy output), ``seed`` for sampled runs. The report is stored in the
run directory of each evaluated adapter (``eval_results.json``, one entry per task), where the runs panel
reads it.

Each row's images go inline as base64 data: URLs (``load_examples`` reads them; ``chat_request`` builds the body),
so screenshot tasks work against any OpenAI-compatible server started with its safe defaults. A request that
fails is never scored: the metrics are over the answered rows only (``n``), and each model's entry counts the
``failed`` requests and keeps the first distinct reasons (``errors``).
"""
from __future__ import annotations

import contextlib
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

from ..runs import base_model, run_dir_of
from ..runs.results import served_run_dir, write_results
from ..serve.remote import ServerClient, ServerUnreachable, chat_request
from .registry import get_task
from .tasks import Reply, Task, load_examples

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
        out = {"task": self.task, "data": self.data, "server": self.server, "settings": self.settings,
               "wall_s": self.wall_s, "metrics": self.metrics, "written": self.written}
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


def evaluate(task: str | Task, models: Optional[Iterable[str]] = None, *, server: Any = None,
             base: Optional[str] = None, runs: Iterable[str] = (), data: Optional[str | Path] = None,
             limit: Optional[int] = None, enable_thinking: Optional[str] = None, temperature: float = 0.0,
             seed: Optional[int] = None, max_tokens: int = 96, concurrency: int = 8, system_prompt: Optional[str] = None,
             api_key: Optional[str] = None, write: bool = True, progress: bool = True, timeout: float = 600.0) -> EvalReport:
    """Score ``models`` (default: every served id) of ``server`` (a URL or a ServerHandle) on ``task``.

    Without ``server``, one is started here for ``base`` (default: the runs' base model) with the adapters of
    ``runs`` and stopped afterwards. ``data`` replaces the task's default JSONL; ``limit`` keeps its first rows.
    ``write``: store the report in each evaluated adapter's run directory. A task measured on the model itself
    (``heldout_loss``) takes ``base`` / ``runs`` and no server: the models are loaded in this process, and its data
    defaults to the runs' own ``data.eval`` (their eval loss), the task's file only without runs.
    """
    task = get_task(task) if isinstance(task, str) else task
    data_path = Path(data) if data is not None else task.default_data
    if data_path is None:
        raise EvalError(f"task {task.name!r} has no default data: give data=FILE")
    if concurrency < 1 or max_tokens < 1 or (limit is not None and limit < 1):
        raise EvalError("concurrency, max_tokens and limit must be at least 1")
    runs = [str(r) for r in runs]
    if getattr(task, "needs_model", False):
        if server is not None:
            raise EvalError(f"task {task.name!r} is measured on the model itself, not through a server: give the "
                            "runs (--run runs/NAME) and/or the base model (--base MODEL) instead of --server")
        return _measure_in_process(task, models, base, runs, data, limit, system_prompt, write)
    examples = load_examples(data_path, limit, system_prompt)
    modes = thinking_modes(enable_thinking)
    if server is None:
        return _with_own_server(task, models, base, runs, data_path, limit, enable_thinking, temperature, seed,
                                max_tokens, concurrency, system_prompt, write, progress, timeout)
    url = getattr(server, "url", server)
    api_key = api_key or getattr(server, "api_key", None)
    client = ServerClient(url, api_key, timeout)
    try:
        cards = client.models()
    except ServerUnreachable as err:
        raise EvalError(str(err)) from None
    models = list(dict.fromkeys(models)) if models else list(cards)
    missing = [m for m in models if m not in cards]
    if missing:
        raise EvalError(f"model id(s) {', '.join(map(repr, missing))} not served at {client.base}; "
                        f"served: {', '.join(cards)}")
    jobs = [(m, mode, ex) for m in models for mode in modes for ex in examples]

    def ask(job) -> Reply:
        model, mode, ex = job
        c = client.chat(chat_request(model, ex.messages, enable_thinking=THINKING_MODES[mode], seed=seed,
                                     temperature=temperature, max_tokens=max_tokens))
        return Reply(c.content, c.reasoning, c.finish_reason, c.error)

    start = time.monotonic()
    bar = _progress(len(jobs), f"eval {task.name}", progress)
    try:
        with ThreadPoolExecutor(concurrency) as pool:
            replies = []
            for reply in pool.map(ask, jobs):
                replies.append(reply)
                bar.update(1)
    finally:
        bar.close()
        client.http.close()
    wall = time.monotonic() - start
    records: dict[str, dict[str, list[dict]]] = {}
    for (model, mode, ex), reply in zip(jobs, replies):
        verdict = None if reply.error else task.score(ex, reply)  # no answer: nothing to score
        records.setdefault(model, {}).setdefault(mode, []).append(
            {"index": ex.index, "reference": ex.reference, "answer": reply.content, "reasoning": reply.reasoning,
             "error": reply.error, "verdict": verdict})
    metrics = {m: {mode: summarize_answered(task, recs) for mode, recs in by_mode.items()}
               for m, by_mode in records.items()}
    report = EvalReport(task.name, str(data_path), client.base,
                        {"temperature": temperature, "seed": seed, "max_tokens": max_tokens, "limit": limit,
                         "n": len(examples), "concurrency": concurrency, "enable_thinking": enable_thinking,
                         "models": models, "base": next((i for i, c in cards.items() if not c.get("parent")), None)},
                        round(wall, 3), metrics, records)
    if write:
        for model in models:
            run_dir = served_run_dir(cards[model])
            if run_dir is not None:
                report.written.append(str(write_results(run_dir, report, model)))
    return report


def summarize_answered(task: Task, records: list[dict]) -> dict:
    """The task's metrics over the answered records only (``n`` of them), then how many requests ``failed`` and
    the first distinct reasons (``errors``): a request that failed is no wrong answer, and no score hides it."""
    failed = [r["error"] for r in records if r["error"]]
    return {**task.summarize([r["verdict"] for r in records if not r["error"]]), "failed": len(failed),
            "errors": list(dict.fromkeys(failed))[:MAX_REASONS]}


def _with_own_server(task, models, base, runs, data_path, limit, enable_thinking, temperature, seed, max_tokens,
                     concurrency, system_prompt, write, progress, timeout) -> EvalReport:
    from ..serve import start_server
    from ..serve.config import default_adapter_id

    base = _base_of(runs, base)
    with start_server(base, runs=runs, max_batch=max(concurrency, 1), log_level="warning") as srv:
        wanted = list(models) if models else [base] + [default_adapter_id(r) for r in runs]
        return evaluate(task, wanted, server=srv, data=data_path, limit=limit, enable_thinking=enable_thinking,
                        temperature=temperature, seed=seed, max_tokens=max_tokens, concurrency=concurrency,
                        system_prompt=system_prompt, write=write, progress=progress, timeout=timeout)


def _base_of(runs: list[str], base: Optional[str]) -> str:
    """``base``, or the one base model the runs (run directories or their adapter/ folders) fine-tuned."""
    if base is None:
        bases = {base_model(d) for d in map(run_dir_of, runs) if d is not None}
        if len(bases) != 1:
            raise EvalError("give base=MODEL (--base): it cannot be read from the runs' configs")
        base = bases.pop()
    return base


def _measure_in_process(task, models, base, runs, data, limit, system_prompt, write) -> EvalReport:
    """A task measured on the models themselves (held-out loss): the base loaded once here, each run's adapter
    put on it in turn (peft, never merged) and the base measured with the adapters disabled. Ids as a server
    started for the same runs would name them, so the report reads like a served one. Unless given, the data,
    truncation, system prompt and batch size are the runs' own (their eval's), so an adapter's loss is its run's
    eval loss."""
    from peft import PeftModel

    from ..models import load_for_inference, peft_deprecation_hidden
    from ..serve.config import default_adapter_id, inspect_adapter

    base = _base_of(runs, base)
    adapters = {default_adapter_id(r): inspect_adapter(r) for r in runs}
    wanted = list(dict.fromkeys(models)) if models else [base, *adapters]
    unknown = [m for m in wanted if m != base and m not in adapters]
    if unknown:
        raise EvalError(f"model id(s) {', '.join(map(repr, unknown))} are neither the base {base!r} nor a run's "
                        f"adapter ({', '.join(adapters) or 'no --run given'})")
    configs = [found.run for found in adapters.values() if found.run is not None]

    def runs_agree(read, what: str, fallback):
        values = {read(c) for c in configs}
        if len(values) > 1:
            raise EvalError(f"the runs differ in {what} ({', '.join(sorted(map(str, values)))}): evaluate them one at a "
                            "time, or give it (--data FILE, --system-prompt TEXT)")
        return values.pop() if values else fallback

    if data is None:
        data = runs_agree(lambda c: c.data.eval, "data.eval", None)
        if data is not None and not Path(data).is_file():
            raise EvalError(f"the run's held-out set {data!r} (its data.eval) is not found here: give the file (--data FILE)")
        data = data or task.default_data
    if system_prompt is None:
        system_prompt = runs_agree(lambda c: c.data.system_prompt, "data.system_prompt", None)
    data_path = Path(data)
    start = time.monotonic()
    loaded = load_for_inference(base)
    model, metrics = loaded.model, {}
    for name, found in adapters.items():
        with peft_deprecation_hidden():
            if model is loaded.model:
                model = PeftModel.from_pretrained(loaded.model, str(found.dir), adapter_name=name)
            else:
                model.load_adapter(str(found.dir), adapter_name=name)
    # truncated and batched as the runs' eval was (data.max_length, micro_batch_size)
    max_length = max({c.data.max_length for c in configs}, default=512)
    batch_size = max({c.schedule.micro_batch_size for c in configs}, default=8)

    def measure(m) -> dict:
        return task.measure(m, loaded.tokenizer, data_path, limit=limit, max_length=max_length, batch_size=batch_size,
                            system_prompt=system_prompt, processor=loaded.processor)

    for model_id in wanted:
        if model_id == base:
            with (model.disable_adapter() if model is not loaded.model else contextlib.nullcontext()):
                metrics[model_id] = {"default": measure(model)}
        else:
            model.set_adapter(model_id)
            metrics[model_id] = {"default": measure(model)}
    n = next(iter(metrics.values()))["default"]["n"]
    report = EvalReport(task.name, str(data_path), "in-process", {"limit": limit, "n": n, "max_length": max_length,
                                                                  "models": wanted, "base": base},
                        round(time.monotonic() - start, 3), metrics)
    if write:
        for model_id in wanted:
            run_dir = served_run_dir({"parent": base, "root": str(adapters[model_id].dir)}) if model_id in adapters else None
            if run_dir is not None:
                report.written.append(str(write_results(run_dir, report, model_id)))
    return report


def _progress(total: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="answer", disable=not enabled, leave=False)
