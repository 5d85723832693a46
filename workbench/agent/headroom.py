"""pass@1 against pass@k, per task, of a start model (``workbench agent headroom``): the headroom reinforcement
learning can sharpen.

The model plays every task ``k`` times, each reply sampled at ``temperature`` (a seed a sample: they repeat), and once
greedily (what an evaluation measures). Per task, with c of its n = k samples successful: pass@1 = c / n, and pass@k
by Chen et al.'s unbiased estimator 1 - C(n - c, k) / C(n, k) (with n = k: whether any sample succeeded). RL with a
verifiable reward raises pass@1 towards the start's pass@k and rarely beyond it (Yue et al., 2025): a task the start
finishes sometimes (0 < c < n) is one it can sharpen; one it never finishes in k samples gives its reward nothing to
learn from; one it always finishes has nothing left to gain. The episodes of every sample are stored
(``agent.judging.play_to_folder``), and the table's rows are ``TaskHeadroom``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from ..stats import mean, rate
from ..user_output import text_table
from .episode import Episode


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that at least one of ``k`` samples drawn from ``n`` (``c`` of them successes) succeeds: Chen et
    al.'s unbiased estimator of pass@k from n >= k samples."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (got n={n}, c={c}, k={k})")
    return 1.0 if n - c < k else 1.0 - math.comb(n - c, k) / math.comb(n, k)


@dataclass
class TaskHeadroom:
    task: str
    split: str
    samples: int  # n
    successes: int  # c
    greedy: bool | None  # the greedy episode's success (None: not played)
    pass_1: float
    pass_k: float

    @property
    def sharpenable(self) -> bool:
        """Finished sometimes, not always: what RL's reward can tell apart."""
        return 0 < self.successes < self.samples


def task_headroom(samples: Sequence[Sequence[Episode]], greedy: Sequence[Episode] | None = None) -> list[TaskHeadroom]:
    """Per task, its pass@1 and pass@k from ``samples`` (k runs over the same tasks, in the same order) and its
    greedy episode's success."""
    k = len(samples)
    if not k or any([e.task for e in run] != [e.task for e in samples[0]] for run in samples):
        raise ValueError("the samples must be runs of the same tasks, in the same order")
    out = []
    for i, first in enumerate(samples[0]):
        c = sum(bool(run[i].success) for run in samples)
        out.append(
            TaskHeadroom(
                first.task,
                first.split,
                k,
                c,
                None if greedy is None else bool(greedy[i].success),
                c / k,
                pass_at_k(k, c, k),
            )
        )
    return out


def summarize_headroom(rows: Sequence[TaskHeadroom]) -> dict:
    """The means over the tasks, and how many tasks RL can sharpen, never succeed, always succeed."""
    n = len(rows)
    return {
        "tasks": n,
        "k": rows[0].samples if rows else 0,
        "greedy_success": rate(r.greedy for r in rows),
        "pass_1": mean(r.pass_1 for r in rows),
        "pass_k": mean(r.pass_k for r in rows),
        "sharpenable": sum(r.sharpenable for r in rows),
        "never": sum(r.successes == 0 for r in rows),
        "always": sum(r.successes == r.samples for r in rows),
    }


def format_headroom(rows: Sequence[TaskHeadroom], summary: dict) -> str:
    """A row per task (greedy, c of k, pass@1, pass@k, whether RL can sharpen it), then the means."""
    k = summary["k"]
    table = [["task", "greedy", f"c/{k}", "pass@1", f"pass@{k}", "RL can sharpen"]]
    for r in rows:
        table.append(
            [
                r.task,
                "-" if r.greedy is None else ("yes" if r.greedy else "no"),
                str(r.successes),
                f"{r.pass_1:.3f}",
                f"{r.pass_k:.3f}",
                "yes" if r.sharpenable else "",
            ]
        )
    lines = text_table(table)
    greedy = summary["greedy_success"]
    lines.append(
        f"\n{summary['tasks']} tasks: greedy {'-' if greedy is None else f'{greedy:.3f}'}, "
        f"pass@1 {summary['pass_1']:.3f}, pass@{k} {summary['pass_k']:.3f}; RL can sharpen "
        f"{summary['sharpenable']} (finished sometimes), {summary['never']} never finished in {k} samples, "
        f"{summary['always']} always"
    )
    return "\n".join(lines)


def measure_headroom(
    tasks: Sequence,
    policy_at: Callable[[float], object],
    k: int,
    folder: Path,
    devices,
    settings: dict,
    *,
    seed: int = 0,
    temperature: float = 1.0,
    progress: bool = True,
    **run_options,
) -> tuple[list[TaskHeadroom], dict]:
    """``k`` sampled runs (``policy_at(temperature)``, torch seeded ``seed + i`` before run i) and one greedy run
    (``policy_at(0.0)``) of ``tasks``, each stored in ``folder/sample-I`` / ``folder/greedy``
    (``agent.judging.play_to_folder``); the table's rows and its summary."""
    import torch

    from .judging import play_to_folder

    runs = []
    for i in range(k):
        torch.manual_seed(seed + i)
        episodes, _ = play_to_folder(
            policy_at(temperature),
            tasks,
            devices,
            folder / f"sample-{i + 1}",
            {**settings, "temperature": temperature, "seed": seed + i},
            progress=progress,
            **run_options,
        )
        runs.append(episodes)
    greedy, _ = play_to_folder(
        policy_at(0.0),
        tasks,
        devices,
        folder / "greedy",
        {**settings, "temperature": 0.0},
        progress=progress,
        **run_options,
    )
    rows = task_headroom(runs, greedy)
    return rows, summarize_headroom(rows)


def headroom_record(rows: Sequence[TaskHeadroom], summary: dict, settings: dict) -> dict:
    """What ``workbench agent headroom`` writes beside the episodes (headroom.json)."""
    return {"settings": settings, "summary": summary, "tasks": [asdict(r) for r in rows]}
