"""The fair baselines of an RL recipe (a recipe's ``baselines``): what else its start becomes in the same wall time.

A method over an SFT start (GRPO) claims more than "better than the start": it must beat what the same compute buys
otherwise (DigiRL, arXiv 2406.11896: filtered behaviour cloning on the agent's own successes is a strong baseline).
From the start model the recipe's run started from, for the wall time its own training took:

* ``sft_continued``: the start recipe's training continued (its data, its settings) for as many steps as that wall
  time holds at the start run's own fastest step (a busy machine only slows a step: a start trained beside other
  jobs had a median of 24.3 s a step where the same recipe alone takes 10.9 s, which halved its baseline's steps);
* ``filtered_bc``: the start model plays the recipe's RL tasks (rl.tasks, as rl.observation shows them, greedy, up to
  rl.episode_max_steps steps, through the one judge: played once per start, its replay key), its successful
  episodes become training rows (``agent.record``), and the start recipe's training runs on them for what is left of
  the wall time after the playing.

Each is then judged with the recipe's model and the start on the same episodes (``bench.recipes``), and a paired
count against the start says which tasks each won or lost.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from ..user_output import text_table

LABELS = {
    "base": "SFT start",
    "sft_continued": "SFT continued",
    "filtered_bc": "filtered BC",
    "tuned": "RL (the recipe)",
}


@dataclass
class Baseline:
    role: str  # sft_continued | filtered_bc
    run_dir: Path | None  # None: not trained (say why in note)
    train_s: float = 0.0
    steps: int = 0
    note: str = ""


@dataclass
class Comparison:
    """One evaluation's models side by side: per role its success (of n) and, against the start, the tasks only it
    finished, only the start finished, and the sign test's p."""

    label: str
    rows: list[dict] = field(default_factory=list)  # {role, success, n, only, only_start, p}


def fastest_step_s(run_dir: Path) -> float:
    """The wall time of a run's fastest optimizer step (its step events): the machine's speed for that training,
    which other jobs on the machine can only slow."""
    from ..events import iter_events
    from ..runs.layout import EVENTS_FILE

    times = [e.step_time_s for e in iter_events(run_dir / EVENTS_FILE) if getattr(e, "type", None) == "step"]
    if not times:
        raise RuntimeError(f"{run_dir} logged no step: the baselines need the start run's step time")
    return min(times)


def train_baselines(
    recipe, start, start_run: Path, start_model: Path, wall_s: float, run_dir: Path, train, progress: bool
) -> list[Baseline]:
    """``recipe``'s baselines, each trained from ``start_model`` by its ``start`` recipe for ``wall_s`` (the recipe's
    own training time) with ``train(cfg) -> run_dir`` beside ``run_dir`` (the recipe's run, which keeps the filtered
    BC's episodes and rows); ``start_run``: the run that trained the start (its fastest step)."""
    step_s = fastest_step_s(start_run)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    common = {"model.source": str(start_model), "output.runs_dir": str(run_dir.parent), "output.progress_bar": progress}
    out = []
    for role in recipe.baselines:
        t0 = time.monotonic()
        overrides, note = dict(common), ""
        if role == "filtered_bc":
            rows, note = own_successes(recipe, start_model, run_dir, progress)
            if rows is None:
                out.append(Baseline(role, None, note=note))
                continue
            overrides["data.train"] = str(rows)
        spent = time.monotonic() - t0
        steps = round((wall_s - spent) / step_s)
        if role == "filtered_bc" and steps < 1:  # one step with no warmup only perturbs it (2026-12-06: 1 of 24 tasks)
            out.append(
                Baseline(
                    role,
                    None,
                    spent,
                    note=f"{note}; playing them took {spent:.0f} s of the {wall_s:.0f} s: no time left to train",
                )
            )
            continue
        steps = max(1, steps)
        print(
            f"[recipes] {recipe.name}: baseline {LABELS[role]}, {steps} steps of {start.name} from its model "
            f"({wall_s:.0f} s at {step_s:.1f} s a step{'; ' + note if note else ''})",
            flush=True,
        )
        cfg = start.run_config(
            {
                **overrides,
                "schedule.max_steps": steps,
                "output.run_name": f"{recipe.name}-{role.replace('_', '-')}-{stamp}",
            }
        )
        trained = train(cfg)
        out.append(Baseline(role, trained, time.monotonic() - t0, steps, note))
    return out


def own_successes(recipe, start_model: Path, run_dir: Path, progress: bool) -> tuple[Path | None, str]:
    """The start model's successful episodes of the recipe's RL tasks as training rows (a JSONL in ``run_dir``), and
    a note saying how many; (None, why) when none succeeded."""
    import datetime

    from ..agent import Contestant, judge, sim_devices
    from ..agent.judging import in_process
    from ..agent.record import record_rows
    from ..agent.store import replay_key, replay_numerics
    from ..hardware import resolve_device
    from ..models import load_for_inference
    from ..phone.screen import parse_size
    from ..phone.tasks import select_tasks
    from ..runs.layout import EPISODES_DIR

    rl = recipe.run_config({"model.source": str(start_model)}).rl
    tasks = select_tasks(rl.tasks)
    device = resolve_device("auto")
    settings = {
        "tasks": rl.tasks,
        "n": len(tasks),
        "observation": rl.observation,
        "max_steps": rl.episode_max_steps,
        "max_tokens": rl.max_new_tokens,
        "date": rl.date,
    }
    key = replay_key(start_model, settings, [repr(t) for t in tasks], replay_numerics(device))
    contestant = Contestant(
        "start",
        run_dir / EPISODES_DIR / "rl-tasks-start",
        in_process("start", lambda: load_for_inference(str(start_model), device=device), rl.max_new_tokens),
        model=str(start_model),
        replay_key=key,
    )
    [played] = judge(
        [contestant],
        tasks,
        sim_devices(parse_size(rl.screen_size)),
        settings,
        replays=run_dir.parent,
        progress=progress,
        max_steps=rl.episode_max_steps,
        observation=rl.observation,
        date=datetime.date.fromisoformat(rl.date) if rl.date else None,
    )
    won = sum(bool(e.success) for e in played.episodes)
    if not won:
        return None, f"the start finished none of the {len(tasks)} RL tasks: nothing to clone"
    recorded = record_rows(played.episodes, run_dir / "filtered_bc" / "train.jsonl", observation=rl.observation)
    return Path(recorded.path), f"{recorded.rows} rows of the {won} of {len(tasks)} RL tasks the start finished"


def comparison_lines(recipe_name: str, comparisons: list[Comparison], baselines: list[Baseline]) -> list[str]:
    """One table: a row per model, per evaluation its success and the paired count against the start."""
    if not comparisons:
        return []
    roles = [r["role"] for r in comparisons[0].rows]
    header = ["model", *(f"{c.label}: success, only it / only start (sign p)" for c in comparisons)]
    table = [header]
    for role in roles:
        cells = [LABELS.get(role, role)]
        for c in comparisons:
            r = next(x for x in c.rows if x["role"] == role)
            paired = "-" if role == "base" else f"{r['only']} / {r['only_start']} (p {r['p']:.2g})"
            cells.append(f"{r['success']}/{r['n']}  {paired}")
        table.append(cells)
    lines = [f"{recipe_name}: the same start, the same episodes, the same wall time"]
    lines += text_table(table, indent="  ")
    lines += [
        f"  {LABELS[b.role]}: {b.steps} steps in {b.train_s:.0f} s" + (f"; {b.note}" if b.note else "")
        if b.run_dir is not None
        else f"  {LABELS[b.role]}: not trained ({b.note})"
        for b in baselines
    ]
    return lines
