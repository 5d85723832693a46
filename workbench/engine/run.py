"""The training engine: AMP + gradient accumulation + LoRA, observed through events, in one process
or as one rank of a torchrun job (DDP, FSDP, DeepSpeed: ``workbench.distributed``).

The step itself reads top to bottom like nanoGPT's, in ``_Engine.train_step``: the training method's window
(``STEP_TYPES``: SFT's, GRPO's or DPO's forward and backward of every micro-batch), then one optimizer step (unscale ->
clip -> step -> update) that the strategy performs; ``engine/step.py`` lists the parts and where each lives.
Everything else here is bookkeeping: events, checkpoints, eval, progress. Rank 0 writes the run's
events; every rank writes its own memory and overflow events.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import sys
import time
import traceback
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..config import ConfigError, RunConfig, config_to_dict, replace, save_config
from ..data import collate, load_training_examples, micro_batch_indices, sequences
from ..distributed.context import DistContext
from ..events import (
    Census,
    Checkpoint,
    Eval,
    EventWriter,
    Memory,
    Overflow,
    PlanPrediction,
    RunFailed,
    RunFinished,
    RunStarted,
    Step,
)
from ..events.schema import BaseQuantized, PrecisionRules, QatConverted
from ..forward import batch_logits, heldout_loss, on_device
from ..hardware import describe_hardware, resolve_device
from ..models import merged_model
from ..models.processor import save_processor_files
from ..plan import MEASURED_NAMES, predict_for_run
from ..plan.arch import resolved_learning_rate
from ..precision import PrecisionPolicy, resolve_precision
from ..runs.layout import (
    ADAPTER_DIR,
    CHECKPOINTS_DIR,
    CONFIG_FILE,
    EVENTS_FILE,
    FOREGROUND_PID,
    LAUNCHED_ENV,
    MERGED_DIR,
    MODEL_DIR,
    STOP_FILE,
    new_run_dir,
    refuse_existing_run,
)
from . import memory
from .build import build_model
from .census import parameter_census
from .checkpoint import TrainState, list_checkpoints, load_checkpoint, rng_state, save_checkpoint
from .dpo import DpoStep
from .environment import versions
from .grpo import GrpoStep, RolloutScorer
from .observers import Observer, RunView
from .schedule import lr_factor
from .sft import SftStep
from .step import StepResult, Trainee, TrainingStep, build_optimizer

# training.method -> its step type (``engine.step.TrainingStep``): a new method is a class here, nothing else.
STEP_TYPES: dict[str, type[TrainingStep]] = {"sft": SftStep, "grpo": GrpoStep, "dpo": DpoStep}


@dataclass
class RunResult:
    run_dir: Path
    step: int
    losses: list = field(default_factory=list)  # per optimizer step, this process only
    eval_losses: list = field(default_factory=list)  # (step, loss)
    adapter_path: Path | None = None
    stopped: bool = False
    stop_reason: str | None = None  # why an observer or a stop request ended the run early
    skipped_steps: int = 0


class _Counted:
    """A step's view of the data stream, counting the micro-batches it takes: grad_accum_steps for SFT, more for a
    GRPO step that drew again (rl.max_draws); the engine's saved stream position follows what was taken."""

    def __init__(self, stream):
        self.stream, self.count = stream, 0

    def __iter__(self):
        return self

    def __next__(self):
        item = next(self.stream)
        self.count += 1
        return item


class _Engine:
    def __init__(
        self,
        cfg: RunConfig,
        run_dir: Path,
        writer: EventWriter,
        ctx: DistContext,
        observers: Sequence[Observer] = (),
        scorer: RolloutScorer | None = None,
    ):
        self.cfg, self.run_dir, self.writer, self.ctx = cfg, run_dir, writer, ctx
        self.scorer = scorer  # GRPO's rollout scorer (training.method grpo), composed by workbench.training
        self.step_type: TrainingStep | None = None  # the training method's window: SftStep, GrpoStep, DpoStep
        self.ckpt_root = run_dir / CHECKPOINTS_DIR
        self.state = TrainState(step=0, micro_batches=0)
        self.result = RunResult(run_dir=run_dir, step=0)
        self.observers: list[Observer] = list(observers)
        self.strategy = None  # until set-up has built the model
        # For the emergency checkpoint: weights, optimizer and data position agree with ``state`` except while
        # an optimizer update is being applied; the RNG is snapshotted as each step completes, so a run resumed
        # from it redraws the interrupted step's dropout exactly.
        self._consistent = True
        self._rng_after_step: dict | None = None
        self._saved_step, self._saved_path = 0, None  # the newest resumable checkpoint (or the resumed one)
        self._avg_step_time: float | None = None  # seconds per step, smoothed (the ETA)
        self._peak_grads_bytes = 0  # the last step's gradients, between backward and the optimizer step (its peak)

    # ---- set-up ---------------------------------------------------------------------------------
    def setup(self) -> None:
        cfg = self.cfg
        from ..distributed.context import rank_device
        from ..distributed.strategies import make_strategy

        self.device = rank_device(resolve_device(cfg.device), self.ctx)
        self.precision: PrecisionPolicy = resolve_precision(cfg, self.device)  # the one resolution of the run
        built = build_model(cfg, self.precision, self.device)
        if cfg.schedule.learning_rate is None:  # resolved once, here; every later reader sees the number
            cfg = self.cfg = replace(cfg, **{"schedule.learning_rate": resolved_learning_rate(cfg, self.precision)})
        self.tokenizer = built.tokenizer
        self.processor = built.processor
        self.rule_reports = built.rules.reports
        self.quantized_base = built.quantized
        d = cfg.data
        step_type = STEP_TYPES[cfg.training.method]
        self.train_examples, self.train_stats = load_training_examples(
            d.train,
            self.tokenizer,
            d.max_length,
            d.format,
            d.skip_bad_rows,
            d.system_prompt,
            self.processor,
            d.ui_tree_layouts,
            cfg.schedule.seed,
            pairs=step_type.reads_pairs,
        )
        self.eval_examples, self.eval_stats = ([], None)
        if d.eval:
            self.eval_examples, self.eval_stats = load_training_examples(
                d.eval, self.tokenizer, d.max_length, d.format, d.skip_bad_rows, d.system_prompt, self.processor
            )
        s = cfg.schedule
        self.strategy = make_strategy(cfg, self.ctx, self.precision, self.device)
        self.strategy.prepare(built.model, lambda params: build_optimizer(params, s), built.rules.fp32_modules)
        self.model = self.strategy.model  # forward goes through the wrapper (DDP, FSDP root, DeepSpeed engine)
        self.optimizer = self.strategy.optimizer
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda k: lr_factor(k, s.resolved_warmup_steps, s.max_steps, s.min_lr_ratio)
        )
        trainee = Trainee(
            module=self.strategy.module,
            forward=self.model,
            tokenizer=self.tokenizer,
            processor=self.processor,
            precision=self.precision,
            device=self.device,
            world=self.ctx,
            accumulating=lambda last: self.strategy.accumulating(last=last),
            backward=self.strategy.backward,
        )
        self.step_type = step_type.for_run(cfg, trainee, self.train_examples, self.scorer)
        if cfg.checkpointing.resume_from:
            self._resume(cfg.checkpointing.resume_from)
            self.step_type.restore(self.state.extra)
        self.view = RunView(
            cfg=cfg,
            model=self.model,
            named_trainable=tuple(self.strategy.named_trainable),
            precision=self.precision,
            rank=self.ctx.rank,
            world_size=self.ctx.world_size,
            start_step=self.state.step,
            train_examples=sequences(self.train_examples),
            emit=self.writer.emit,
            zero_grad=lambda: self.optimizer.zero_grad(set_to_none=True),
            tokenizer=self.tokenizer,
            processor=self.processor,
        )
        for o in self.observers:
            o.setup(self.view)

    def _resume(self, where: str) -> None:
        path = Path(where)
        if where == "latest":
            found = list_checkpoints(self.ckpt_root)
            if not found:
                raise ConfigError(
                    [
                        (
                            "checkpointing.resume_from",
                            f"latest, but {self.ckpt_root} holds no checkpoint: "
                            "start the run without resume_from, or name a checkpoint directory",
                        )
                    ]
                )
            path = found[-1]
        elif not (path / "state.json").is_file():
            raise ConfigError(
                [
                    (
                        "checkpointing.resume_from",
                        f"{where!r} is not a checkpoint directory (expected "
                        f"{path}/state.json): name a checkpoints/step-NNNNNNN directory, or latest",
                    )
                ]
            )
        self.state = load_checkpoint(path, self.strategy, self.scheduler)
        self._saved_step, self._saved_path = self.state.step, path

    # ---- events -------------------------------------------------------------------------------
    def emit_run(self, event) -> None:
        """A run-level event: written once, by rank 0."""
        if self.ctx.is_main:
            self.writer.emit(event)

    def emit_census(self) -> None:
        rows, totals = parameter_census(self.strategy.module)
        self.emit_run(Census(step=self.state.step, rows=rows, totals=totals))

    def emit_memory(self, state: dict) -> None:
        # Gradients exist only between backward and the optimizer step; every memory event carries the bytes
        # they held at the step's peak, not the none left after zero_grad(set_to_none).
        state = {**state, "gradients": max(state["gradients"], self._peak_grads_bytes)}
        self.writer.emit(
            Memory(
                step=self.state.step,
                devices=memory.device_memory(),
                host_rss=memory.host_rss(),
                **{field: state[category] for category, field in MEASURED_NAMES.items()},
            )
        )

    def emit_plan(self) -> None:
        if not self.ctx.is_main:
            return
        try:
            plan = predict_for_run(self.cfg, self.precision, self.ctx.world_size).to_dict()
        except Exception as err:  # noqa: BLE001 - a planner gap must not stop a training run
            plan = {"error": f"{type(err).__name__}: {err}"}
        self.emit_run(PlanPrediction(step=self.state.step, plan=plan))

    # ---- the step -----------------------------------------------------------------------------
    def train_step(self, stream: Iterator, measure: bool = False) -> StepResult:
        """One optimizer step, whole (``engine/step.py`` says where each part lives): the training method's window
        of ``grad_accum_steps`` micro-batches (forward, loss, backward), the observers before the update, the
        strategy's optimizer step (unscale -> clip -> step -> update), the schedule; the loss over all ranks.
        ``measure``: the result carries the model-state bytes with gradients still allocated."""
        window = self.step_type.accumulate(stream, self.state.step + 1)
        state = self.measure_peak_state(measure)
        for o in self.observers:
            o.before_optimizer_step(self.view, self.state.step + 1)
        self._consistent = False  # until the run loop has recorded this update in ``state``
        outcome = self.strategy.step(self.cfg.precision.max_grad_norm)
        self.scheduler_step()
        loss_sum, processed = self.ctx.sum([window.loss_sum, window.processed_tokens])
        return StepResult(
            loss_sum / max(window.divisor, 1), window.target_tokens, int(processed), outcome, state, window.events
        )

    def measure_peak_state(self, measure: bool) -> dict | None:
        """Called after a step's backward, before its optimizer step: records the gradients' bytes at the step's
        peak (a walk over the parameters, negligible next to a step) and returns the whole model state if
        ``measure``."""
        state = self.strategy.measure_state()
        self._peak_grads_bytes = state["gradients"]
        return state if measure else None

    def scheduler_step(self) -> None:
        with warnings.catch_warnings():
            # A skipped first fp16 step makes torch warn that the schedule ran before the optimizer;
            # the schedule counts optimizer steps attempted, skipped ones included, by design.
            warnings.filterwarnings("ignore", message=re.escape("Detected call of `lr_scheduler.step()`"))
            self.scheduler.step()

    def evaluate(self) -> float | None:
        if not self.eval_examples:
            return None
        measured = heldout_loss(
            self.model,
            self.eval_examples,
            self.tokenizer.pad_token_id,
            batch_size=self.cfg.schedule.micro_batch_size,
            autocast=self.precision.autocast,
            device=self.device,
            rank=self.ctx.rank,
            world_size=self.ctx.world_size,
            reduce=self.ctx.sum,
            memory=self.cfg.memory,
        )
        self.emit_run(Eval(step=self.state.step, loss=measured.loss, tokens=measured.tokens))
        self.result.eval_losses.append((self.state.step, measured.loss))
        return measured.loss

    def checkpoint(self) -> Path:
        path = save_checkpoint(
            self.ckpt_root, self.state, self.strategy, self.scheduler, self.cfg.checkpointing.keep_last
        )
        self.emit_run(Checkpoint(step=self.state.step, path=str(path), kind="resumable"))
        self._saved_step, self._saved_path = self.state.step, path
        return path

    def advance(self, stream: Iterator) -> StepResult:
        """One optimizer step of the run (``train_step``) and everything that goes with it: the step's events,
        memory and census when due, the observers' after_step. Returns the step's result with the reasons this
        rank's observers gave to stop (the run loop, and benchmarks that drive the steps themselves)."""
        s, out = self.cfg.schedule, self.cfg.output
        t0 = time.perf_counter()
        lr = self.optimizer.param_groups[0]["lr"]
        measure = (self.state.step + 1) % out.memory_every == 0
        taken = _Counted(stream)
        result = self.train_step(taken, measure)
        loss, outcome = result.loss, result.outcome
        dt = time.perf_counter() - t0
        self.state.step += 1
        self.state.micro_batches += taken.count  # the stream's position, for an exact resume
        self.state.tokens += result.target_tokens
        self.state.last_loss = loss
        self.state.extra = self.step_type.resume_state()
        self._consistent = True
        if self.strategy.can_save_alone:  # only the emergency checkpoint reads the RNG snapshot
            self._rng_after_step = rng_state()
        self.result.losses.append(loss)
        self.result.skipped_steps += outcome.skipped
        self._avg_step_time = dt if self._avg_step_time is None else 0.9 * self._avg_step_time + 0.1 * dt
        step = self.state.step
        if outcome.skipped:
            self.writer.emit(
                Overflow(
                    step=step,
                    scale_before=outcome.scale_before,
                    scale_after=outcome.scale_after,
                    nonfinite_params=outcome.nonfinite_params,
                    nonfinite_count=outcome.nonfinite_count,
                )
            )
        if step % out.log_every == 0 or outcome.skipped or step == s.max_steps:
            self.emit_run(
                Step(
                    step=step,
                    loss=loss,
                    lr=lr,
                    grad_norm=outcome.grad_norm,
                    loss_scale=outcome.scale_after,
                    skipped=outcome.skipped,
                    tokens=result.target_tokens,
                    tokens_per_s=result.processed_tokens / dt,
                    step_time_s=dt,
                    eta_s=self._avg_step_time * (s.max_steps - step),
                )
            )
        for event in result.events:  # the method's own (GRPO's rollout and policy mismatch)
            self.emit_run(dataclasses.replace(event, step=step))
        if result.model_state is not None:
            self.emit_memory(result.model_state)
        if out.census_every and step % out.census_every == 0:
            self.emit_census()
        stop_reasons = tuple(r for o in self.observers if (r := o.after_step(self.view, step, outcome, loss)))
        return dataclasses.replace(result, stop_reasons=stop_reasons)

    # ---- the loop -----------------------------------------------------------------------------
    def run(self) -> RunResult:
        cfg, s, out = self.cfg, self.cfg.schedule, self.cfg.output
        t_start = time.time()
        start_step = self.state.step
        self._emit_start(start_step)
        stream = micro_batch_indices(
            self.step_type.rows, s.micro_batch_size * self.ctx.world_size, s.seed, self.state.micro_batches
        )  # global micro-batches; each rank slices its own
        self._rng_after_step = rng_state() if self.strategy.can_save_alone else None
        bar = None
        if out.progress_bar and self.ctx.is_main:
            from tqdm.auto import tqdm

            bar = tqdm(
                total=s.max_steps, initial=start_step, desc="train", unit="step", dynamic_ncols=True, file=sys.stderr
            )
        stop_file = self.run_dir / STOP_FILE
        try:
            while self.state.step < s.max_steps:
                if self.ctx.any(self.ctx.is_main and stop_file.exists()):  # one verdict for every rank
                    self.result.stopped = True
                    self.result.stop_reason = "stop requested"
                    break
                taken = self.advance(stream)
                step = self.state.step
                if self.ctx.any(bool(taken.stop_reasons)):
                    stop_reasons = taken.stop_reasons or ["stopped by another rank's observer"]
                    self.result.stopped = True
                    self.result.stop_reason = "; ".join(stop_reasons)
                    break
                if s.eval_loss_every and step % s.eval_loss_every == 0 and step < s.max_steps:
                    self.evaluate()
                if cfg.checkpointing.every_steps and step % cfg.checkpointing.every_steps == 0 and step < s.max_steps:
                    self.checkpoint()
                if bar is not None:
                    bar.update(1)
                    scale = taken.outcome.scale_after
                    bar.set_postfix(loss=f"{taken.loss:.4f}", **({"scale": f"{scale:g}"} if scale is not None else {}))
        finally:
            if bar is not None:
                bar.close()
        self.result.step = self.state.step
        if not self.result.stopped:
            self.evaluate()
        self.checkpoint()
        self.emit_census()
        self.emit_memory(self.strategy.measure_state())
        for o in self.observers:
            o.finish(self.view)
        self.result.adapter_path = self.save_final()
        if cfg.quantization.qat:
            self.convert_qat()
        self.emit_run(
            RunFinished(
                step=self.state.step,
                final_loss=self.state.last_loss,
                adapter_path=str(self.result.adapter_path) if self.result.adapter_path else None,
                wall_s=time.time() - t_start,
                stopped=self.result.stopped,
                stop_reason=self.result.stop_reason,
            )
        )
        return self.result

    def _emit_start(self, start_step: int) -> None:
        """The run's first events: run_started, the precision rules, the quantized base, the plan, the census and
        the model state's memory."""
        cfg, s = self.cfg, self.cfg.schedule
        self.emit_run(
            RunStarted(
                run_dir=str(self.run_dir),
                config=config_to_dict(cfg),
                hardware=describe_hardware(self.device),
                versions=versions(),
                precision=self.precision.to_dict(),
                total_steps=s.max_steps,
                start_step=start_step,
                data={
                    "train": self.train_stats.to_dict(),
                    "eval": self.eval_stats.to_dict() if self.eval_stats else None,
                },
            )
        )
        if self.rule_reports:
            self.emit_run(PrecisionRules(step=start_step, rules=self.rule_reports))
        if self.quantized_base is not None:
            self.emit_run(BaseQuantized(step=start_step, **self.quantized_base.to_dict()))
        self.emit_plan()
        self.emit_census()
        self.emit_memory(self.strategy.measure_state())

    def convert_qat(self) -> None:
        """Quantization-aware training's last step (after the adapter is saved): real quantized weights replace
        the fake quantizers, checked against the fake-quantized model on one batch (held-out when there is one)."""
        from ..precision.qat import convert_and_compare

        examples = (self.eval_examples or self.train_examples)[: self.cfg.schedule.micro_batch_size]
        batch = on_device(collate(examples, self.tokenizer.pad_token_id), self.device)
        module = self.strategy.module
        figures = convert_and_compare(
            module,
            self.cfg.quantization.qat,
            lambda: batch_logits(module, batch, self.precision.autocast),
            batch["attention_mask"],
        )
        self.emit_run(QatConverted(step=self.state.step, scheme=self.cfg.quantization.qat, **figures))
        self.emit_census()

    def emergency_checkpoint(self) -> tuple[Path | None, str | None]:
        """After a failure (an exception, Ctrl-C, the SIGTERM of a stop that timed out): save the last
        completed step unless it is saved already, so that ``resume_from=latest`` loses nothing. Returns
        the newest checkpoint to resume from (that step's, or an earlier periodic one where it cannot be
        saved, or None) and, when saving it failed, why. Only strategies whose rank 0 holds the whole state
        save here (one process, DDP), without their peers, which may be gone; sharded strategies (FSDP,
        DeepSpeed) would need every rank. Nor is a step saved while its optimizer update was being applied
        (weights half-updated)."""
        if self.strategy is None or self.state.step == 0:
            return None, None
        if self.state.step == self._saved_step or not (self.strategy.can_save_alone and self._consistent):
            return self._saved_path, None
        if not self.ctx.is_main:
            return None, None
        try:
            path = save_checkpoint(
                self.ckpt_root,
                self.state,
                self.strategy,
                self.scheduler,
                self.cfg.checkpointing.keep_last,
                rng=self._rng_after_step,
                alone=True,
            )
        except BaseException as err:  # noqa: BLE001 - reported in run_failed; the run's own failure is what propagates
            earlier = self._saved_path if self._saved_path is not None and self._saved_path.is_dir() else None
            return earlier, f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
        self.writer.emit(Checkpoint(step=self.state.step, path=str(path), kind="emergency"))
        self._saved_step, self._saved_path = self.state.step, path
        return path, None

    def close(self) -> None:
        if self.strategy is not None:
            self.strategy.close()

    def save_inputs_side(self, directory: Path) -> None:
        """The tokenizer with its chat template and a vision-language model's processor files: a model directory
        that transformers, vLLM or another server loads alone."""
        self.tokenizer.save_pretrained(directory)
        if self.processor is not None:
            save_processor_files(self.processor, directory)

    def save_final(self) -> Path:
        """The adapter in peft format (or the full model), with the tokenizer, ready to serve."""
        target = self.run_dir / (ADAPTER_DIR if self.cfg.lora.enabled else MODEL_DIR)
        self.strategy.save_pretrained(target)
        self.ctx.barrier()
        if not self.ctx.is_main:
            return target
        self.save_inputs_side(target)
        self.emit_run(
            Checkpoint(step=self.state.step, path=str(target), kind="adapter" if self.cfg.lora.enabled else "model")
        )
        if self.cfg.lora.enabled and self.cfg.checkpointing.merge_adapter:  # none or ddp: the full model is here
            merged = self.run_dir / MERGED_DIR
            merged_model(self.strategy.module, target, self.precision.base_dtype).save_pretrained(merged)
            self.save_inputs_side(merged)
            self.writer.emit(Checkpoint(step=self.state.step, path=str(merged), kind="merged"))
        return target


def open_run_dir(cfg: RunConfig, run_dir: str | Path | None, ctx: DistContext) -> Path:
    """Rank 0 names the run directory, checks it and saves the config; every rank gets the same
    verdict (no rank left waiting)."""
    from ..distributed.context import TORCHRUN_LAUNCHER_ENV

    verdict = None
    if ctx.is_main:
        try:
            run_dir = Path(run_dir) if run_dir else new_run_dir(cfg)
            run_dir.mkdir(parents=True, exist_ok=True)
            refuse_existing_run(cfg, run_dir)
            save_config(cfg, run_dir / CONFIG_FILE)
            (run_dir / STOP_FILE).unlink(missing_ok=True)
            if os.environ.get(LAUNCHED_ENV) != "1" and not os.environ.get(TORCHRUN_LAUNCHER_ENV):
                (run_dir / FOREGROUND_PID).write_text(str(os.getpid()))
        except ConfigError as err:
            verdict = err.problems
    run_dir, verdict = ctx.broadcast_object((str(run_dir), verdict))
    if verdict:
        raise ConfigError(verdict)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)  # other nodes: the shared run directory may not be visible yet
    return run_dir


class SteppedRun:
    """A set-up run driven one optimizer step at a time from outside the engine (``engine_session``; e.g.
    ``workbench.bench.diagnosis`` timing its steps under different instruments): the few things such a driver
    reaches, and nothing else of the engine."""

    def __init__(self, engine: _Engine):
        self._engine = engine

    @property
    def run_dir(self) -> Path:
        return self._engine.run_dir

    @property
    def model(self) -> torch.nn.Module:
        """The module the steps run forward through (the strategy's wrapper): what a hook on the batches attaches to."""
        return self._engine.model

    @property
    def view(self) -> RunView:
        """What observers see of the run (``engine.observers.RunView``)."""
        return self._engine.view

    @property
    def train_rows(self) -> int:
        """Rows of the training set (what micro-batch indices index: the prompts of a GRPO run)."""
        return self._engine.step_type.rows

    @property
    def observers(self) -> list[Observer]:
        """The instruments attached to the next steps; a driver may change them between steps."""
        return self._engine.observers

    @observers.setter
    def observers(self, observers) -> None:
        self._engine.observers = list(observers)

    def step(self, batches) -> float:
        """One optimizer step on the micro-batch indices ``batches`` yields, with its events and the observers' calls,
        as the run loop takes it; its mean token loss."""
        return self._engine.advance(batches).loss

    def emit_census(self) -> None:
        """Log the parameter census now (what the run logs at its start and end)."""
        self._engine.emit_census()


@contextlib.contextmanager
def engine_session(
    cfg: RunConfig,
    run_dir: str | Path | None = None,
    observers: Sequence[Observer] = (),
    scorer: RolloutScorer | None = None,
) -> Iterator[SteppedRun]:
    """A run set up as ``run_engine`` sets it up, for a driver of its steps (``SteppedRun``); a failure is handled as
    ``_session`` says."""
    with _session(cfg, run_dir, observers, scorer) as engine:
        yield SteppedRun(engine)


@contextlib.contextmanager
def _session(
    cfg: RunConfig,
    run_dir: str | Path | None = None,
    observers: Sequence[Observer] = (),
    scorer: RolloutScorer | None = None,
) -> Iterator[_Engine]:
    """A run's engine, set up (world context, run directory, event log, model, data, strategy, observers), for
    whoever drives it: ``run_engine`` runs its loop, ``engine_session`` hands out its steps. A failure inside saves an
    emergency checkpoint where the strategy can and is logged as ``run_failed`` before it propagates; under the
    workbench launcher a rank records it for the launcher instead, which writes the single run_failed naming the rank
    that failed first."""
    from ..distributed.context import init_distributed, shutdown
    from ..distributed.faults import record_failure

    ctx = init_distributed(cfg.sharding, resolve_device(cfg.device).type if cfg.sharding.distributed else "cpu")
    try:
        run_dir = open_run_dir(cfg, run_dir, ctx)
    except ConfigError:
        shutdown(ctx)
        raise
    writer = EventWriter(run_dir / EVENTS_FILE, rank=ctx.rank)
    engine = _Engine(cfg, run_dir, writer, ctx, observers, scorer)
    try:
        engine.setup()
        yield engine
    except BaseException as err:  # noqa: BLE001 - logged, then re-raised unchanged
        saved, checkpoint_error = engine.emergency_checkpoint()
        if ctx.under_torchrun_launcher:
            record_failure(
                run_dir, ctx.rank, engine.state.step, err, checkpoint=saved, checkpoint_error=checkpoint_error
            )
        else:
            writer.emit(
                RunFailed(
                    step=engine.state.step,
                    error=str(err) or type(err).__name__,
                    error_type=type(err).__name__,
                    traceback=traceback.format_exc(limit=20),
                    checkpoint=str(saved) if saved else None,
                    checkpoint_error=checkpoint_error,
                )
            )
        writer.close()
        raise  # a process group is left to torchrun's teardown: peers may be gone
    writer.close()
    engine.close()
    shutdown(ctx)


def run_engine(
    cfg: RunConfig,
    run_dir: str | Path | None = None,
    observers: Sequence[Observer] = (),
    scorer: RolloutScorer | None = None,
) -> RunResult:
    """Run a fine-tune in this process: one process, or this rank of a torchrun job for a distributed
    ``sharding.strategy`` (without torchrun, a world of one). Events go to the run's event log
    (``runs.layout.EVENTS_FILE``).

    This is the bare engine: ``observers`` are the instruments to attach (``workbench.train`` adds the
    ones the config asks for); ``scorer`` scores GRPO's rollouts (``engine.grpo.RolloutScorer``, for
    ``training.method: grpo``). A failure is handled as ``_session`` says."""
    with _session(cfg, run_dir, observers, scorer) as engine:
        return engine.run()
