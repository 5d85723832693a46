"""Each recipe trained and evaluated as a user would run it, its figures against the ones it expects.

    python -m workbench.bench.recipes [NAME ...] [--set KEY=VALUE ...] [--runs-dir DIR] [--json FILE] [--start-run DIR]
    python -m workbench.bench.recipes NAME --run DIR    # judge a run of NAME trained earlier (no training)
    python -m workbench.bench.recipes NAME --baselines dagger dpo   # only these of NAME's baselines
    python -m workbench.bench.recipes --readme README.md   # rewrite the README's results table from the recipes

For every recipe named (default: all), on this machine: skip it, saying why, when its requirements are not met
(GPUs, memory); else train its configuration in this process (``workbench train --recipe NAME``), score the run
with each task of its evaluation through ``workbench eval``'s machinery (a server started for the base model and
the run's adapter; the held-out loss on the model itself) and print one table: per metric the base model's and
the fine-tuned model's figure against the expected one and its tolerance. Exit status 1 when a judged figure falls
outside its tolerance. A recipe that ``starts_from`` another trains that one first (no evaluation: its figures are
its own bench's) and starts from its model; the base model of its evaluation is then that starting model (SFT vs
SFT + GRPO); ``--run DIR`` judges a run of the recipe trained earlier (``workbench train --recipe NAME``),
without training: its figures are judged when its configuration is the recipe's (output.* aside); ``--start-run DIR`` reuses a run of the starting recipe instead, and so does a start named in the same
command (it runs first; its run, judged by its own figures, is then the other's start). ``--set`` changes the recipe (e.g. ``--set schedule.learning_rate=2e-4``): its figures
are then printed but not judged, unless only output.* was changed. Wall times are printed with the load average:
on a shared machine they are not the recipe's (its expected wall time is in measured_on).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..config import ConfigError
from ..config.loading import split_override
from ..config.names import EPISODE_TASK
from ..config.recipes import EDGE, Evaluation, Figure, Recipe, all_recipes, load_recipe
from ..runs.layout import existing_run_dir
from ..user_output import text_table
from .baselines import comparison_lines

README_BEGIN = "<!-- recipes table: python -m workbench.bench.recipes --readme README.md -->"
README_END = "<!-- end of the recipes table -->"


@dataclass
class Measured:
    task: str
    metric: str
    value: float | None  # the fine-tuned model's
    base: float | None
    expected: Figure | None
    verdict: str  # ok | OUTSIDE | not judged (...)


@dataclass
class Outcome:
    recipe: Recipe
    skipped: str | None = None
    run_dir: Path | None = None
    rows: list[Measured] = field(default_factory=list)
    train_s: float = 0.0
    eval_s: float = 0.0
    cpu_s: float = 0.0  # this process's CPU time for both (the server's threads included)
    machine: str = ""  # device/precision the run resolved to, and the torch threads
    notes: list[str] = field(default_factory=list)
    baselines: list = field(default_factory=list)  # bench.baselines.Baseline: the recipe's baselines, trained here
    comparisons: list = field(default_factory=list)  # bench.baselines.Comparison: per episode evaluation, every model

    @property
    def failed(self) -> bool:
        return any(r.verdict == "OUTSIDE" for r in self.rows)


def judge(value: float | None, base: float | None, expected: Figure | None, unjudged: str | None = None) -> str:
    """ok | OUTSIDE for a figure judged; ``unjudged``: why it is not (--set, a run that is not the recipe's)."""
    if expected is None:
        return "no expected figure"
    if unjudged:
        return f"not judged ({unjudged})"
    ok = expected.value is None or (expected.holds(value, expected.value) and expected.holds(base, expected.base))
    if expected.above_base_by is not None:  # strictly more than the spread: a tie with the start is no gain
        ok = ok and value is not None and base is not None and value - base > expected.above_base_by + EDGE
    return "ok" if ok else "OUTSIDE"


def _scalars(metrics: dict) -> dict:
    return {
        k: v
        for k, v in metrics.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in ("n", "failed")
    }


EPISODE_SCREEN = (112, 252)  # the simulated phone's pixels in episode evaluations: a ui_tree model never sees them


def evaluate_episodes(
    evaluation: Evaluation, run_dir: Path, progress: bool, baselines: tuple = (), comparisons: list | None = None
) -> tuple[dict, dict]:
    """(fine-tuned metrics, base metrics) of an episode evaluation (task phone_agent): every task of
    ``evaluation.data`` played to its end on the simulated phone by the run's own weights (model/, or its adapter
    merged) and by its base, in this process (greedy, on the GPU when one is visible; 8 conversations a batch on a
    CPU, 48 on a GPU: the 31 held-out tasks took 17 min a model on 2 CPU cores), through the one judge
    (``agent.judging``); each model's episodes are stored in RUN_DIR/episodes/<evaluation>-<tuned|base>/ (replies,
    screens, trees, final checks) to read. A local base's episodes are copied, not played, from a run beside this one
    whose base episodes have the same replay key (``agent.store.replay_key``: the same weights, settings, tasks, code
    and numerics): runs that start from one model (GRPO variants from one SFT) play its episodes once.

    ``baselines`` (``bench.baselines.Baseline``, trained from the same start): judged on the same episodes too, each
    paired with the start; ``comparisons`` gets the evaluation's ``Comparison``; the base metrics returned are then
    the best of the start and the baselines (what a claim over the start must beat)."""
    from ..hardware import resolve_device
    from ..models import load_run_for_inference
    from ..runs.layout import base_model
    from .baselines import LABELS, Comparison

    device, base = resolve_device("auto"), base_model(run_dir)
    trained = [b for b in baselines if b.run_dir is not None]
    judged = judge_models(
        evaluation,
        run_dir,
        [
            ("tuned", run_dir, lambda: load_run_for_inference(run_dir, device=device), None),
            ("base", base, lambda: _load_base(run_dir, base, device), base),
            *((b.role, b.run_dir, lambda d=b.run_dir: load_run_for_inference(d, device=device), None) for b in trained),
        ],
        progress,
    )
    tuned, start = judged[0], judged[1]
    m = tuned.paired_with(start)  # greedy episodes repeat exactly: the tasks that tell the two apart are the spread
    print(
        f"[recipes] {evaluation.label}: of {m['tasks']} tasks, {m['only_a']} finished by the tuned model alone, "
        f"{m['only_b']} by the base alone (sign test p = {m['sign_test_p']:.3g}), {m['both']} by both",
        flush=True,
    )
    if not trained:
        return tuned.metrics, start.metrics
    comparison = Comparison(evaluation.label)
    for j in [start, *judged[2:], tuned]:
        p = j.paired_with(start)
        comparison.rows.append(
            {
                "role": j.name,
                "success": sum(bool(e.success) for e in j.episodes),
                "n": len(j.episodes),
                "only": p["only_a"],
                "only_start": p["only_b"],
                "p": p["sign_test_p"],
                "loop_rate": j.metrics["loop_rate"],
                "false_finish_rate": j.metrics["false_finish_rate"],
            }
        )
    if comparisons is not None:
        comparisons.append(comparison)
    best = max([start, *judged[2:]], key=lambda j: j.metrics["success_rate"] or 0.0)
    print(
        f"[recipes] {evaluation.label}: the best of the start and its baselines is {LABELS[best.name]} "
        f"({best.metrics['success_rate']:.3f}): the recipe's goal is judged against it",
        flush=True,
    )
    return tuned.metrics, best.metrics


def judge_models(evaluation: Evaluation, run_dir: Path, models: list, progress: bool) -> list:
    """Each of ``models`` ((role, source, load, local model directory or None)) judged on ``evaluation``'s tasks
    (``agent.judging``), its episodes in RUN_DIR/episodes/<evaluation>-<role>/; one with a local model directory has a
    replay key, and its episodes are copied from a run beside ``run_dir`` that played them with the same key."""
    import datetime

    from ..agent import Contestant, judge, sim_devices
    from ..agent.judging import in_process
    from ..agent.store import folder_name, replay_key, replay_numerics
    from ..hardware import resolve_device
    from ..phone.tasks import select_tasks
    from ..runs.layout import EPISODES_DIR, run_config

    tasks = select_tasks(evaluation.data)
    date = datetime.date.fromisoformat(evaluation.date) if evaluation.date else None
    settings = {
        "tasks": evaluation.data,
        "n": len(tasks),
        "observation": evaluation.observation,
        "lang": evaluation.lang,
        "max_steps": evaluation.max_steps,
        "max_tokens": evaluation.max_tokens,
        "date": evaluation.date,
    }
    quantized = run_config(run_dir).quantization.base
    if quantized != "none":  # the same files make another base: its episodes are not the 16-bit base's
        settings["quantization.base"] = quantized
    here = replay_numerics(resolve_device("auto"))  # what else decides greedy decoding's numbers
    contestants = [
        Contestant(
            role,
            run_dir / EPISODES_DIR / folder_name(f"{evaluation.label}-{role}"),
            in_process(role, load, evaluation.max_tokens),
            model=str(source),
            replay_key=replay_key(local, settings, [repr(t) for t in tasks], here) if local else None,
        )
        for role, source, load, local in models
    ]

    def said(j) -> None:
        if j.replayed_from is not None:
            print(
                f"[recipes] {evaluation.label} {j.name}: the episodes of {j.replayed_from} (the same weights, "
                "settings, tasks, code and numerics: greedy episodes repeat exactly), not played again",
                flush=True,
            )
        if progress:
            print(
                f"[recipes] {evaluation.label} {j.name}: success {j.metrics['success_rate']:.3f} of {len(tasks)}, "
                f"reached the task's apps {j.metrics['reached_apps_rate']:.3f}, taps quoting a line of the tree "
                f"{_rate_text(j.metrics['quoted_line_rate'])}",
                flush=True,
            )

    return judge(
        contestants,
        tasks,
        sim_devices(EPISODE_SCREEN),
        settings,
        replays=run_dir.parent,
        progress=progress,
        on_judged=said,
        max_steps=evaluation.max_steps,
        date=date,
        observation=evaluation.observation,
        lang=evaluation.lang,
    )


def _load_base(run_dir: Path, base: str, device):
    """The base model a run's episodes are judged against: ``base`` as a model with no run, or, for a run over a
    quantized base (quantization.base), that base built as the run built it."""
    from ..models import build_run_model, load_for_inference
    from ..runs.layout import run_config

    cfg = run_config(run_dir)
    if cfg.quantization.base == "none":
        return load_for_inference(base, device=device)
    loaded = build_run_model(cfg, torch.float32, device=device)
    loaded.model.eval().to(device)
    return loaded


def _rate_text(rate) -> str:
    return "-" if rate is None else f"{rate:.3f}"


def evaluate_run(
    evaluation: Evaluation, run_dir: Path, progress: bool, baselines: tuple = (), comparisons: list | None = None
) -> tuple[dict, dict]:
    """(fine-tuned metrics, base metrics) of one evaluation of a run, as `workbench eval --run RUN` measures them;
    a full fine-tune (model/, no adapter to serve beside its base) as `workbench eval --base RUN/model` and
    `workbench eval --base MODEL`, one server each. Episode evaluations: ``evaluate_episodes`` (with the recipe's
    ``baselines``)."""
    from ..eval.runner import evaluate

    if evaluation.task == EPISODE_TASK:
        return evaluate_episodes(evaluation, run_dir, progress, baselines, comparisons)
    from ..runs.layout import base_model, trained_weights
    from ..serve.config import default_adapter_id

    # float32 weights, as every recipe's figures were measured (dtype auto would serve bf16 on a CPU with native bf16)
    kw = dict(
        data=evaluation.data,
        limit=evaluation.rows,
        max_tokens=evaluation.max_tokens,
        progress=progress,
        dtype="float32",
    )
    weights = trained_weights(run_dir)
    if weights is not None and weights.kind == "model":
        tuned, base = (
            evaluate(evaluation.task, base=str(source), write=False, **kw)
            for source in (weights.path, base_model(run_dir))
        )
        return tuned.metrics[tuned.settings["base"]]["default"], base.metrics[base.settings["base"]]["default"]
    report = evaluate(evaluation.task, runs=[str(run_dir)], **kw)
    tuned = report.metrics[default_adapter_id(run_dir)]["default"]
    if report.failed:  # a figure over fewer rows than the recipe names is no figure to check or copy
        reasons = "; ".join(
            r for by_mode in report.metrics.values() for m in by_mode.values() for r in m.get("errors", [])
        )
        raise RuntimeError(f"{report.failed} request(s) of {evaluation.task} failed: {reasons}")
    return tuned, report.metrics[report.settings["base"]]["default"]


def starting_model(run_dir: Path) -> Path:
    """The whole model a run saved, for a recipe that starts from it: a full fine-tune's model/, else its merged/."""
    from ..runs.layout import whole_model

    model = whole_model(run_dir)
    if model is not None:
        return model
    raise ConfigError([("--start-run", f"{run_dir} saved no whole model (model/ or merged/) to start from")])


@contextlib.contextmanager
def _threads_as_measured(recipe: Recipe):
    """The torch thread count ``recipe``'s figures were measured with (another count can change a greedy answer),
    the previous one restored after."""
    threads = torch.get_num_threads()
    if recipe.measured_on is not None and recipe.measured_on.threads:
        torch.set_num_threads(recipe.measured_on.threads)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _note_machine(recipe: Recipe, run_dir: Path, out: Outcome) -> None:
    """``out.machine``: the device/precision the run resolved to (its run_started event), noted when it is not the
    one the recipe's figures were measured on."""
    from ..events import iter_events
    from ..runs.layout import EVENTS_FILE

    started = next((e for e in iter_events(run_dir / EVENTS_FILE) if e.type == "run_started"), None)
    if started is None:  # a run directory without its log's start (copied by hand): nothing to say
        return
    out.machine = f"{started.precision['device_type']}/{started.precision['mode']}"
    m = recipe.measured_on
    if m is not None and out.machine != f"{m.device}/{m.precision}":
        out.notes.append(
            f"this machine ran {recipe.name} as {out.machine}; its figures were measured as "
            f"{m.device}/{m.precision} ({m.description}): differences are expected"
        )


def _train_start(recipe: Recipe, runs_dir: Path, progress: bool, out: Outcome) -> Path:
    """Train the recipe ``recipe`` starts from (its own config, its own thread count) and return its run."""
    start = load_recipe(recipe.starts_from)
    cfg = start.run_config(
        {
            "output.runs_dir": str(runs_dir),
            "output.progress_bar": progress,
            "output.run_name": f"{start.name}-{time.strftime('%Y%m%d-%H%M%S')}",
        }
    )
    print(f"[recipes] {recipe.name}: first its start, {start.name} ({cfg.schedule.max_steps} steps)", flush=True)
    t0 = time.monotonic()
    with _threads_as_measured(start):
        run_dir = _train(cfg)
    out.notes.append(f"started from recipe {start.name}, trained here in {time.monotonic() - t0:.0f} s: {run_dir}")
    return run_dir


def _train(cfg) -> Path:
    """Train ``cfg`` as ``workbench train --recipe`` does, in a worker process (a recipe of 2 DDP ranks as 2
    processes, not a world of one) with this process's torch thread count, and return its run directory; a failed run
    is an error naming its log."""
    from ..runs.layout import WORKER_LOG
    from ..training import train_to_end

    ranks = f"{cfg.sharding.world_size} ranks under torchrun" if cfg.sharding.distributed else "a worker process"
    print(
        f"[recipes] {ranks}: follow with `workbench events {cfg.output.runs_dir}/{cfg.output.run_name} --follow`",
        flush=True,
    )
    run_dir, status = train_to_end(cfg, threads=torch.get_num_threads())
    if status == "failed":
        raise RuntimeError(f"the run {run_dir} failed: see {run_dir / WORKER_LOG} and its events.jsonl")
    return run_dir


def run_recipe(
    recipe: Recipe, overrides: dict, runs_dir: Path, progress: bool = True, start_run: Path | None = None
) -> Outcome:
    """Train and evaluate ``recipe`` here (or say why this machine cannot). ``start_run``: for a recipe that
    starts from another, a run of that recipe to start from (else it is trained first)."""
    from ..hardware import machine_memory

    out = Outcome(recipe)
    out.skipped = recipe.requirements.unmet(*machine_memory())
    if out.skipped:
        return out
    unjudged = None if all(k.startswith("output.") for k in overrides) else "--set"
    if recipe.starts_from is not None:
        if start_run is not None:
            source = starting_model(start_run)
            out.notes.append(f"started from recipe {recipe.starts_from}'s run {start_run} (--start-run)")
            # measured figures come from the start recipe's own model: another start is another experiment (a goal
            # over the base, above_base_by, is the same claim from any start: still judged)
            start_differs = config_differences(load_recipe(recipe.starts_from), start_run, {})
            if start_differs and recipe.measured_figures:
                out.notes += [
                    f"not judged: the start run differs from recipe {recipe.starts_from} in {d}" for d in start_differs
                ]
                unjudged = "the start run is not its recipe's"
        else:
            start_run = _train_start(recipe, runs_dir, progress, out)
            source = starting_model(start_run)
        overrides = {**overrides, "model.source": str(source)}
    cfg = recipe.run_config(
        {
            **overrides,
            "output.runs_dir": str(runs_dir),
            "output.run_name": f"{recipe.name}-{time.strftime('%Y%m%d-%H%M%S')}",
            "output.progress_bar": overrides.get("output.progress_bar", progress),
        }
    )
    with _threads_as_measured(recipe):
        _train_and_evaluate(recipe, cfg, unjudged, out, progress, start_run)
    return out


def _train_and_evaluate(
    recipe: Recipe, cfg, unjudged: str | None, out: Outcome, progress: bool, start_run: Path | None = None
) -> None:
    cpu0 = _cpu_s()
    ranks = cfg.sharding.world_size if cfg.sharding.distributed else 1
    how = f"{ranks} processes of 1 torch thread" if ranks > 1 else f"{torch.get_num_threads()} torch thread(s)"
    print(f"[recipes] {recipe.name}: training {cfg.model.source}, {cfg.schedule.max_steps} steps, {how}", flush=True)
    t0 = time.monotonic()
    run_dir = _train(cfg)
    out.train_s, out.run_dir = time.monotonic() - t0, run_dir
    _note_machine(recipe, run_dir, out)
    out.machine += f", {how}"
    if recipe.baselines and start_run is not None:  # the same start, the same wall time, another use of it
        from .baselines import train_baselines

        out.baselines = train_baselines(
            recipe,
            load_recipe(recipe.starts_from),
            start_run,
            Path(cfg.model.source),
            out.train_s,
            run_dir,
            _train,
            progress,
        )
        out.notes.append(
            "base (episode evaluations): the best of the start and its baselines, each trained from the "
            "start for this run's training time"
        )
    t0 = time.monotonic()
    out.rows += evaluate_recipe(recipe, run_dir, unjudged, progress, out.baselines, out.comparisons)
    out.eval_s = time.monotonic() - t0
    out.cpu_s = _cpu_s() - cpu0


def config_differences(recipe: Recipe, run_dir: Path, overrides: dict) -> list[str]:
    """The dotted fields where a run's saved configuration differs from what ``recipe`` (with ``overrides``) trains;
    output.* and, for a recipe that starts from another's model, model.source do not count."""
    from ..config.loading import config_to_dict, flat_fields
    from ..runs.layout import run_config

    # compared, not run here: a start recipe of 2 DDP ranks is still its recipe on a machine of one GPU
    wanted = recipe.run_config(
        {**overrides, "model.source": "tiny-glm4"} if recipe.starts_from else overrides, checks=False
    )
    ours, theirs = flat_fields(config_to_dict(wanted)), flat_fields(config_to_dict(run_config(run_dir)))
    ignored = ("output.",) + (("model.source",) if recipe.starts_from else ())
    return [
        f"{k}: run {theirs.get(k)!r}, recipe {ours.get(k)!r}"
        for k in sorted(ours.keys() | theirs.keys())
        if not k.startswith(ignored) and ours.get(k) != theirs.get(k)
    ]


def judge_run(recipe: Recipe, run_dir: Path, overrides: dict, progress: bool = True) -> Outcome:
    """``recipe``'s evaluations on a run of it trained earlier; judged only when the run's configuration is the
    recipe's. The training's wall time is the run's own (first to last event)."""
    from ..events import iter_events
    from ..runs.layout import EVENTS_FILE

    out = Outcome(recipe, run_dir=run_dir)
    differences = config_differences(recipe, run_dir, overrides)
    unjudged = (
        "the run is not the recipe's"
        if differences
        else None
        if all(k.startswith("output.") for k in overrides)
        else "--set"
    )
    out.notes += [f"judged the run {run_dir} (--run), trained earlier"] + [
        f"not judged: the run differs from the recipe in {d}" for d in differences
    ]
    events = list(iter_events(run_dir / EVENTS_FILE))
    out.train_s = events[-1].time - events[0].time if events else 0.0
    _note_machine(recipe, run_dir, out)
    cpu0, t0 = _cpu_s(), time.monotonic()
    with _threads_as_measured(recipe):
        out.machine += f", {torch.get_num_threads()} thread(s) to evaluate"
        out.rows += evaluate_recipe(recipe, run_dir, unjudged, progress)
    out.eval_s, out.cpu_s = time.monotonic() - t0, _cpu_s() - cpu0
    return out


def evaluate_recipe(
    recipe: Recipe,
    run_dir: Path,
    unjudged: str | None = None,
    progress: bool = False,
    baselines: tuple = (),
    comparisons: list | None = None,
) -> list[Measured]:
    """Each evaluation of ``recipe`` on a run of it (trained here or elsewhere, e.g. by `workbench demo`), every
    figure judged against the expected one (with ``baselines``, a base's figure is the best of the start and them)."""
    rows = []
    for i, evaluation in enumerate(recipe.evaluation):
        print(f"[recipes] {recipe.name}: evaluating {evaluation.label}", flush=True)
        tuned, base = evaluate_run(evaluation, run_dir, progress, baselines, comparisons)
        for metric in list(evaluation.figures) or list(_scalars(tuned)):
            if metric not in tuned:
                raise ConfigError(
                    [
                        (
                            f"evaluation[{i}].figures.{metric}",
                            f"task {evaluation.task} reports no {metric!r}: use one of {', '.join(_scalars(tuned))}",
                        )
                    ],
                    f"recipe {recipe.path}",
                )
            expected = evaluation.figures.get(metric)
            rows.append(
                Measured(
                    evaluation.label,
                    metric,
                    tuned[metric],
                    base.get(metric),
                    expected,
                    judge(tuned[metric], base.get(metric), expected, unjudged),
                )
            )
    return rows


def _cpu_s() -> float:
    """CPU seconds of this process and of the children it has waited for (a launched run's ranks, servers)."""
    usages = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(u.ru_utime + u.ru_stime for u in usages)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def format_outcomes(outcomes: list[Outcome], runs_kept: bool = True) -> str:
    """One table, measured vs expected, then each recipe's wall time, machine and notes."""
    table = [["recipe", "task", "metric", "base", "fine-tuned", "expected", "verdict"]]
    for o in outcomes:
        if o.skipped:
            table.append([o.recipe.name, "-", "-", "-", "-", "-", f"skipped: {o.skipped}"])
        for r in o.rows:
            expected = "-" if r.expected is None else r.expected.text()
            table.append([o.recipe.name, r.task, r.metric, _num(r.base), _num(r.value), expected, r.verdict])
    lines = text_table(table)
    for o in outcomes:
        if o.skipped:
            continue
        m = o.recipe.measured_on
        there = (
            f"; measured {m.wall_s:.0f} s wall, {m.cpu_s:.0f} s CPU on {m.description}"
            if m is not None and m.wall_s and m.cpu_s
            else ""
        )
        lines += comparison_lines(o.recipe.name, o.comparisons, o.baselines)
        lines.append(
            f"{o.recipe.name}: train {o.train_s:.0f} s + evaluate {o.eval_s:.0f} s = "
            f"{o.train_s + o.eval_s:.0f} s wall, {o.cpu_s:.0f} s CPU, here as {o.machine}{there}; run: "
            f"{o.run_dir if runs_kept else '(removed: --runs-dir DIR keeps it)'}"
        )
        lines += [f"  note: {n}" for n in o.notes]
    return "\n".join(lines)


def starts_first(recipes: list[Recipe]) -> list[Recipe]:
    """The recipes in their order, except that one another named recipe starts from runs before it: its run is then
    the other's start (``--start-run``) instead of a second training of the same recipe."""
    names = {r.name for r in recipes}
    return sorted(recipes, key=lambda r: r.starts_from in names)


# ---- the README's results table -------------------------------------------------------------------------------


def _rows_of(evaluation: Evaluation) -> str:
    from ..config.files import jsonl_lines
    from ..eval import get_task

    if evaluation.task == EPISODE_TASK:
        from ..phone.tasks import select_tasks

        return (
            f"{len(select_tasks(evaluation.data))} `{evaluation.data}` tasks, whole episodes ({evaluation.observation})"
        )

    data = Path(evaluation.data) if evaluation.data else get_task(evaluation.task).default_data
    total = sum(1 for _ in jsonl_lines(data))
    n = min(total, evaluation.rows or total)
    try:
        shown = Path(data).resolve().relative_to(Path(data).resolve().parents[2])  # data_samples/SET/FILE
    except ValueError:
        shown = Path(data).name
    return f"{n} rows of `{str(shown).replace(os.sep, '/')}`"


def readme_table(recipes: list[Recipe]) -> str:
    """The README's results table: each recipe's expected figures, where they were measured, the command."""
    lines = [
        README_BEGIN,
        "",
        "| recipe | judged by | fine-tuned (base model) | tolerance | measured on | bench time there |",
        "|---|---|---|---|---|---|",
    ]
    for r in recipes:
        if not r.evaluation or not r.figures:
            why = (
                f"needs {r.requirements.describe()}: not measured"
                if r.requirements.gpus
                else "no figures: it prints a comparison with its baselines"
                if r.baselines
                else "no figures yet"
            )
            lines.append(f"| `{r.name}` | - | {why} | - | - | - |")
            continue
        m = r.measured_on
        for e in (e for e in r.evaluation if e.figures):  # one without figures: the bench prints it, nothing to list
            figures = "<br>".join(
                f"{metric} "
                + (
                    f"> base + {f.above_base_by:g} (a goal)"
                    if f.value is None
                    else f"**{f.value:.3f}**" + (f" ({f.base:.3f})" if f.base is not None else "")
                )
                for metric, f in e.figures.items()
            )
            tolerances = "<br>".join("-" if f.value is None else f"± {f.tolerance:g}" for f in e.figures.values())
            if m is None:  # goals over the base only: nothing measured yet
                where, took = "not yet reached", "-"
            else:
                took = (
                    " / ".join(
                        f"{what} {seconds / 60:.1f} min"
                        for what, seconds in (("wall", m.wall_s), ("CPU", m.cpu_s))
                        if seconds
                    )
                    or "-"
                )
                threads = f", {m.threads} torch thread{'s' if m.threads > 1 else ''}" if m.threads else ""
                where = f"{m.device}/{m.precision}{threads}: {m.description}"
            lines.append(f"| `{r.name}` | `{e.task}`, {_rows_of(e)} | {figures} | {tolerances} | {where} | {took} |")
    lines += [
        "",
        "Each row: `python -m workbench.bench.recipes NAME` trains the recipe, evaluates it and checks these "
        "figures (exit 1 outside a tolerance); `workbench recipes show NAME` prints the recipe.",
        "",
        README_END,
    ]
    return "\n".join(lines)


def replace_readme_table(text: str, table: str) -> str:
    pattern = re.compile(re.escape(README_BEGIN) + r".*?" + re.escape(README_END), re.S)
    if not pattern.search(text):
        raise ConfigError(
            [
                (
                    "--readme",
                    f"the file has no recipes table: put the two lines\n{README_BEGIN}\n{README_END}\nwhere it goes",
                )
            ]
        )
    return pattern.sub(lambda _: table, text)


# ---- the command --------------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    """The command's options: the recipes to run, and where their runs and figures go."""
    ap = argparse.ArgumentParser(prog="python -m workbench.bench.recipes", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "names", nargs="*", metavar="NAME", help="recipes to run (default: all; `workbench recipes` lists them)"
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change the recipes' configuration (figures are then not judged, unless only output.*)",
    )
    ap.add_argument("--runs-dir", help="keep the runs here (default: a temporary directory, removed afterwards)")
    ap.add_argument("--json", metavar="FILE", help="also write the measured figures as JSON")
    ap.add_argument(
        "--start-run",
        metavar="DIR",
        type=Path,
        help="for recipes that start from another recipe's "
        "model: a run of that recipe to start from (default: train it first)",
    )
    ap.add_argument(
        "--run",
        metavar="DIR",
        type=existing_run_dir,
        help="judge this run of the one recipe named, trained earlier "
        "(`workbench train --recipe NAME`), instead of training it",
    )
    ap.add_argument(
        "--baselines",
        nargs="+",
        metavar="ROLE",
        help="train and judge only these of the recipe's baselines (default: all it names; "
        "each costs its training time and a judging of every evaluation)",
    )
    ap.add_argument(
        "--readme",
        metavar="FILE",
        help="only rewrite FILE's recipes table from the recipes' expected figures (no training)",
    )
    return ap


def only_baselines(recipe: Recipe, roles: list[str]) -> Recipe:
    """``recipe`` with only ``roles`` of its baselines (``--baselines``), in the recipe's order; a role it does not
    name is a ConfigError naming the ones it does."""
    unknown = [r for r in roles if r not in recipe.baselines]
    if unknown:
        named = ", ".join(recipe.baselines) or "none"
        raise ConfigError([("--baselines", f"{recipe.name} has no baseline {', '.join(unknown)} (it names: {named})")])
    return recipe.model_copy(update={"baselines": [b for b in recipe.baselines if b in roles]})


def _outcome_json(outcome) -> dict:
    """One recipe's outcome as ``--json`` writes it: its figures, baselines and comparisons."""
    return {
        "recipe": outcome.recipe.name,
        "skipped": outcome.skipped,
        "machine": outcome.machine,
        "train_s": round(outcome.train_s, 1),
        "eval_s": round(outcome.eval_s, 1),
        "cpu_s": round(outcome.cpu_s, 1),
        "notes": outcome.notes,
        "figures": [
            {"task": r.task, "metric": r.metric, "base": r.base, "value": r.value, "verdict": r.verdict}
            for r in outcome.rows
        ],
        "baselines": [
            {
                "role": b.role,
                "run_dir": str(b.run_dir) if b.run_dir else None,
                "train_s": round(b.train_s, 1),
                "steps": b.steps,
                "note": b.note,
            }
            for b in outcome.baselines
        ],
        "comparisons": [{"evaluation": c.label, "models": c.rows} for c in outcome.comparisons],
    }


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        recipes = [load_recipe(n) for n in args.names] if args.names else all_recipes()
        if args.readme:
            path = Path(args.readme)
            path.write_text(
                replace_readme_table(path.read_text(encoding="utf-8"), readme_table(recipes)), encoding="utf-8"
            )
            print(f"rewrote the recipes table of {path}")
            return 0
        overrides = dict(split_override(o) for o in args.set)
        if args.run is not None:
            if len(recipes) != 1:
                raise ConfigError([("--run", f"judges a run of one recipe: name exactly one (got {len(recipes)})")])
        if args.baselines is not None:
            recipes = [only_baselines(r, args.baselines) for r in recipes]
        for r in recipes:
            # every recipe's problems before the first one trains (a start's model is only known once trained)
            r.run_config({**overrides, "model.source": "tiny-glm4"} if r.starts_from else overrides)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    from ..hardware import cpu_class

    print(
        f"[recipes] load average at start {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores of {cpu_class()}",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        runs_dir = Path(args.runs_dir or tmp)
        outcomes, trained = [], {}
        if args.run is not None:
            outcomes.append(judge_run(recipes[0], args.run, overrides, progress=sys.stderr.isatty()))
            recipes = []
        for recipe in starts_first(recipes):
            start_run = args.start_run or trained.get(recipe.starts_from)  # a start trained here is not trained twice
            outcomes.append(run_recipe(recipe, overrides, runs_dir, progress=sys.stderr.isatty(), start_run=start_run))
            if outcomes[-1].run_dir is not None:
                trained[recipe.name] = outcomes[-1].run_dir
        print(format_outcomes(outcomes, runs_kept=bool(args.runs_dir or args.run)))
        print(
            f"[recipes] load average at end {os.getloadavg()[0]:.1f} (figures are deterministic; wall times are "
            "not, on a shared machine)"
        )
    if args.json:
        Path(args.json).write_text(json.dumps([_outcome_json(o) for o in outcomes], indent=1), encoding="utf-8")
    return 1 if any(o.failed for o in outcomes) else 0


if __name__ == "__main__":
    from ..user_output import hide_third_party_deprecations

    hide_third_party_deprecations()
    sys.exit(main())
