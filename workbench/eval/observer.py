"""Task metrics while a run trains (config ``eval.tasks``): an engine observer, composed by workbench.training.

Every ``eval.every`` steps and once at the end, on the main rank, each task is scored on the model being
trained: answer-scoring tasks on greedy answers generated here (no server; the run's autocast), the held-out
loss task on the run's own ``data.eval`` (the engine's eval loss, measured by the same function). Each result is one ``eval_task`` event, which the monitor plots next to the
eval loss.
"""

from __future__ import annotations

import time
from pathlib import Path

from ..engine.observers import Observer, RunView
from ..events.schema import EvalTask
from ..forward.generate import greedy_replies
from ..image_io import resolve_images
from ..serve.remote import ModelReply
from .registry import get_task
from .task_protocol import Example, load_eval_examples


class TaskEvalObserver(Observer):
    def __init__(self, cfg):
        self.section = cfg.eval
        self.data = cfg.data
        self.tasks = [get_task(name) for name in self.section.tasks]
        self._examples: dict[str, list[Example]] = {}
        self._last_step = None  # the step last scored
        self._step = 0  # the step last completed

    def setup(self, run: RunView) -> None:
        self._step = run.start_step
        for task in self.tasks:
            if not getattr(task, "needs_model", False):  # read once; a bad file fails the run at its start
                self._examples[task.name] = load_eval_examples(
                    task.default_data, self.section.limit, self.data.system_prompt
                )

    def after_step(self, run: RunView, step: int, outcome, loss: float):
        self._step = step
        if self.section.every and step % self.section.every == 0 and step < run.cfg.schedule.max_steps:
            self.score(run, step)
        return None

    def finish(self, run: RunView) -> None:
        if self._last_step != self._step:
            self.score(run, self._step)

    def score(self, run: RunView, step: int) -> list[EvalTask]:
        """Score every task on the model as it is now; emits (and returns) one event per task."""
        self._last_step = step
        if run.rank != 0:
            return []
        model = getattr(run.model, "module", run.model)  # DDP: generate on the wrapped model
        events = []
        for task in self.tasks:
            t0 = time.perf_counter()
            if getattr(task, "needs_model", False):
                # The run's own held-out set, whole and batched as the engine's eval batches it: the same number as
                # the run's eval loss (eval.limit bounds the answers generated, not this one forward per batch).
                # A run without data.eval has no eval loss to match; the task's own file stands in.
                own = self.data.eval is not None
                metrics = task.measure(
                    model,
                    run.tokenizer,
                    Path(self.data.eval if own else task.default_data),
                    limit=None if own else self.section.limit,
                    max_length=self.data.max_length,
                    batch_size=run.cfg.schedule.micro_batch_size,
                    system_prompt=self.data.system_prompt,
                    autocast=run.precision.autocast,
                    processor=run.processor,
                )
            else:
                examples = self._examples[task.name]
                # screenshot rows: their inline images decoded for the run's processor (no server here)
                answers = greedy_replies(
                    model,
                    run.tokenizer,
                    [resolve_images(ex.messages) for ex in examples],
                    self.section.max_new_tokens,
                    processor=run.processor,
                    autocast=run.precision.autocast,
                )
                metrics = task.summarize([task.score(ex, ModelReply(a)) for ex, a in zip(examples, answers)])
            event = EvalTask(step=step, task=task.name, metrics=metrics, wall_s=time.perf_counter() - t0)
            run.emit(event)
            events.append(event)
        return events


def task_observers(cfg) -> list[Observer]:
    """The task-metric observer a run's config asks for (none without ``eval.tasks``)."""
    return [TaskEvalObserver(cfg)] if cfg.eval.tasks else []
