"""The training engine: AMP + gradient accumulation + LoRA, observed through events, in one process
or as one rank of a torchrun job (DDP, FSDP, DeepSpeed: ``workbench.distributed``).

The step itself reads top to bottom like nanoGPT's: accumulate token-normalised losses over the
window, then one optimizer step (unscale -> clip -> step -> update) that the strategy performs.
Everything else here is bookkeeping: events, checkpoints, eval, progress. Rank 0 writes the run's
events; every rank writes its own memory and overflow events.
"""
from __future__ import annotations

import math
import os
import platform
import re
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Optional

import torch

from .. import __version__
from ..config import ConfigError, RunConfig, config_to_dict, save_config
from ..data import collate, load_examples, micro_batch_indices
from ..events import (
    Census, Checkpoint, Eval, EventWriter, Memory, Overflow, PlanPrediction, RunFailed, RunFinished, RunStarted, Step,
)
from ..models import apply_lora, enable_gradient_checkpointing, load_base_model
from ..plan import MEASURED_NAMES, measure_model_state, predict_for_run
from ..precision import (
    PrecisionPolicy, count_target_tokens, resolve_device, resolve_precision, token_loss_sum, window_loss_divisor,
)
from . import memory
from .census import parameter_census
from .checkpoint import (
    TrainState, list_checkpoints, load_checkpoint, load_sharded_checkpoint, rng_state, save_checkpoint,
    save_sharded_checkpoint,
)
from .observers import default_observers
from .schedule import lr_factor

STOP_FILE = "STOP"  # created by RunHandle.stop(); polled between optimizer steps


@dataclass
class RunResult:
    run_dir: Path
    step: int
    losses: list = field(default_factory=list)  # per optimizer step, this process only
    eval_losses: list = field(default_factory=list)  # (step, loss)
    adapter_path: Optional[Path] = None
    stopped: bool = False
    stop_reason: Optional[str] = None  # why an observer or a stop request ended the run early
    skipped_steps: int = 0


def new_run_dir(cfg: RunConfig) -> Path:
    name = cfg.output.run_name or datetime.now().strftime("%Y%m%d-%H%M%S-%f")[:-3]
    run_dir = Path(cfg.output.runs_dir) / name
    # The schema refuses path-like names; this also catches a symlink inside runs_dir pointing elsewhere.
    if run_dir.resolve().parent != Path(cfg.output.runs_dir).resolve():
        raise ConfigError([("output.run_name", f"{name!r}: the run directory {run_dir} resolves to "
                            f"{run_dir.resolve()}, outside output.runs_dir: use another name")])
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:  # runs_dir is (under) a file, or not writable
        raise ConfigError([("output.runs_dir", f"cannot create {run_dir}: {err.strerror}")]) from None
    return run_dir


def _hardware(device: torch.device) -> dict:
    hw = {"device": str(device), "platform": platform.platform(), "cpu_count": os.cpu_count(),
          "torch_threads": torch.get_num_threads()}
    if device.type == "cuda":
        hw["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return hw


def _versions() -> dict:
    import peft
    import transformers

    return {"workbench": __version__, "python": sys.version.split()[0], "torch": torch.__version__,
            "transformers": transformers.__version__, "peft": peft.__version__}


class _Engine:
    def __init__(self, cfg: RunConfig, run_dir: Path, writer: EventWriter, ctx=None):
        from ..distributed.context import DistContext

        self.cfg, self.run_dir, self.writer = cfg, run_dir, writer
        self.ctx = ctx or DistContext()
        self.ckpt_root = run_dir / "checkpoints"
        self.state = TrainState(step=0, micro_batches=0)
        self.result = RunResult(run_dir=run_dir, step=0)
        self.observers = default_observers(cfg)
        # For the emergency checkpoint: weights, optimizer and data position agree with ``state`` except while
        # an optimizer update is being applied; the RNG is snapshotted as each step completes, so a run resumed
        # from it redraws the interrupted step's dropout exactly.
        self._consistent = True
        self._rng_after_step: Optional[dict] = None
        self._saved_step, self._saved_path = 0, None  # the newest resumable checkpoint (or the resumed one)

    # ---- set-up ---------------------------------------------------------------------------------
    def setup(self) -> None:
        cfg = self.cfg
        from ..distributed.context import rank_device
        from ..distributed.strategies import make_strategy

        self.device = rank_device(resolve_device(cfg.device), self.ctx)
        self.policy: PrecisionPolicy = resolve_precision(cfg, self.device)
        torch.manual_seed(cfg.schedule.seed)
        loaded = load_base_model(cfg.model, self.policy, seed=cfg.schedule.seed)
        self.tokenizer = loaded.tokenizer
        model = apply_lora(loaded, cfg.lora, self.policy)
        if cfg.model.gradient_checkpointing:
            enable_gradient_checkpointing(model)
        model.config.use_cache = False
        model = model.to(self.device)
        model.train()
        d = cfg.data
        self.train_examples, self.train_stats = load_examples(d.train, self.tokenizer, d.max_length, d.format,
                                                              d.skip_bad_rows, d.system_prompt)
        self.eval_examples, self.eval_stats = ([], None)
        if d.eval:
            self.eval_examples, self.eval_stats = load_examples(d.eval, self.tokenizer, d.max_length, d.format,
                                                                d.skip_bad_rows, d.system_prompt)
        s = cfg.schedule
        self.strategy = make_strategy(cfg, self.ctx, self.policy, self.device)
        self.strategy.prepare(model, lambda params: torch.optim.AdamW(params, lr=s.learning_rate,
                                                                       weight_decay=s.weight_decay, foreach=True))
        self.model = self.strategy.model  # forward goes through the wrapper (DDP, FSDP root, DeepSpeed engine)
        self.named_trainable = self.strategy.named_trainable
        self.optimizer = self.strategy.optimizer
        self.scaler = self.strategy.scaler
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda k: lr_factor(k, s.resolved_warmup_steps, s.max_steps, s.min_lr_ratio))
        if cfg.checkpointing.resume_from:
            self._resume(cfg.checkpointing.resume_from)
        for o in self.observers:
            o.setup(self)

    def _resume(self, where: str) -> None:
        path = Path(where)
        if where == "latest":
            found = list_checkpoints(self.ckpt_root)
            if not found:
                raise FileNotFoundError(f"checkpointing.resume_from=latest but {self.ckpt_root} holds no checkpoint")
            path = found[-1]
        elif not (path / "state.json").is_file():
            raise FileNotFoundError(f"checkpointing.resume_from={where!r} is not a checkpoint directory "
                                    f"(expected {path}/state.json)")
        if self.strategy.name == "none":
            self.state = load_checkpoint(path, self.model, self.optimizer, self.scheduler, self.scaler)
        else:
            self.state = load_sharded_checkpoint(path, self.strategy, self.scheduler)
        self._saved_step, self._saved_path = self.state.step, path

    # ---- events -------------------------------------------------------------------------------
    def emit_run(self, event) -> None:
        """A run-level event: written once, by rank 0."""
        if self.ctx.is_main:
            self.writer.emit(event)

    def emit_census(self) -> None:
        rows, totals = parameter_census(self.strategy.module)
        self.emit_run(Census(step=self.state.step, rows=rows, totals=totals))

    def measure_state(self) -> dict:
        return self.strategy.measure_state()

    def emit_memory(self, state: dict) -> None:
        self.writer.emit(Memory(step=self.state.step, devices=memory.device_memory(), host_rss=memory.host_rss(),
                                **{field: state[category] for category, field in MEASURED_NAMES.items()}))

    def emit_plan(self) -> None:
        if not self.ctx.is_main:
            return
        try:
            plan = predict_for_run(self.cfg, self.policy, self.ctx.world_size, **self.strategy.plan_setting()).to_dict()
        except Exception as err:  # noqa: BLE001 - a planner gap must not stop a training run
            plan = {"error": f"{type(err).__name__}: {err}"}
        self.emit_run(PlanPrediction(step=self.state.step, plan=plan))

    # ---- the step -----------------------------------------------------------------------------
    def _forward_loss_sum(self, batch: dict) -> torch.Tensor:
        with self.policy.autocast():
            logits = self.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        return token_loss_sum(logits, batch["labels"])

    def train_step(self, stream, measure: bool = False) -> tuple[float, int, int, object, Optional[dict]]:
        """One optimizer step over ``grad_accum_steps`` micro-batches. Returns the mean token loss,
        target tokens, processed tokens, the StepOutcome and (if ``measure``) the model-state bytes
        with gradients still allocated."""
        batches = []
        local_tokens = processed = 0
        mbs, rank = self.cfg.schedule.micro_batch_size, self.ctx.rank
        for _ in range(self.cfg.schedule.grad_accum_steps):
            idx = next(stream)[rank * mbs:(rank + 1) * mbs]  # this rank's slice of the global micro-batch
            batch = collate([self.train_examples[i] for i in idx], self.tokenizer.pad_token_id)
            # counted on the host copy: no device round trip per micro-batch
            local_tokens += count_target_tokens(batch["labels"])
            processed += int(batch["attention_mask"].sum())
            batches.append({k: v.to(self.device) for k, v in batch.items()})
        window_tokens = int(self.ctx.sum([local_tokens])[0])
        divisor = window_loss_divisor(window_tokens, self.ctx.world_size)
        parts = []
        for i, batch in enumerate(batches):
            with self.strategy.accumulating(last=i == len(batches) - 1):
                part = self._forward_loss_sum(batch)
                self.strategy.backward(part / divisor)
            parts.append(part.detach())
        loss_sum = float(torch.stack(parts).double().sum())  # one device sync for the window, not one per micro-batch
        state = self.measure_state() if measure else None
        for o in self.observers:
            o.before_optimizer_step(self, self.state.step + 1)
        self._consistent = False  # until the run loop has recorded this update in ``state``
        outcome = self.strategy.step(self.cfg.precision.max_grad_norm)
        with warnings.catch_warnings():
            # A skipped first fp16 step makes torch warn that the schedule ran before the optimizer;
            # the schedule counts optimizer steps attempted, skipped ones included, by design.
            warnings.filterwarnings("ignore", message=re.escape("Detected call of `lr_scheduler.step()`"))
            self.scheduler.step()
        loss_sum, processed = self.ctx.sum([loss_sum, processed])
        return loss_sum / window_tokens, window_tokens, int(processed), outcome, state

    @torch.no_grad()
    def evaluate(self) -> Optional[float]:
        if not self.eval_examples:
            return None
        self.model.eval()
        total, tokens = 0.0, 0
        mbs, ws = self.cfg.schedule.micro_batch_size, self.ctx.world_size
        mine = self.eval_examples[self.ctx.rank::ws]
        # Every rank runs the same number of forwards (sharded models gather parameters collectively);
        # a rank out of examples repeats one and discards the result.
        for i in range(0, -(-len(self.eval_examples) // ws), mbs):
            chunk = mine[i:i + mbs]
            batch = {k: v.to(self.device) for k, v in
                     collate(chunk or self.eval_examples[:1], self.tokenizer.pad_token_id).items()}
            part = float(self._forward_loss_sum(batch))
            if chunk:
                total += part
                tokens += count_target_tokens(batch["labels"])
        self.model.train()
        total, tokens = self.ctx.sum([total, tokens])
        tokens = int(tokens)
        loss = total / tokens
        self.emit_run(Eval(step=self.state.step, loss=loss, tokens=tokens))
        self.result.eval_losses.append((self.state.step, loss))
        return loss

    def checkpoint(self) -> Path:
        keep = self.cfg.checkpointing.keep_last
        if self.strategy.name == "none":
            path = save_checkpoint(self.ckpt_root, self.state, self.model, self.optimizer, self.scheduler, self.scaler, keep)
        else:
            path = save_sharded_checkpoint(self.ckpt_root, self.state, self.strategy, self.scheduler, keep)
        self.emit_run(Checkpoint(step=self.state.step, path=str(path), kind="resumable"))
        self._saved_step, self._saved_path = self.state.step, path
        return path

    # ---- the loop -----------------------------------------------------------------------------
    def run(self) -> RunResult:
        cfg, s, out = self.cfg, self.cfg.schedule, self.cfg.output
        t_start = time.time()
        start_step = self.state.step
        self.emit_run(RunStarted(
            run_dir=str(self.run_dir), config=config_to_dict(cfg), hardware=_hardware(self.device), versions=_versions(),
            precision=self.policy.to_dict(), total_steps=s.max_steps, start_step=start_step,
            data={"train": self.train_stats.to_dict(), "eval": self.eval_stats.to_dict() if self.eval_stats else None}))
        self.emit_plan()
        self.emit_census()
        self.emit_memory(self.measure_state())
        stream = micro_batch_indices(len(self.train_examples), s.micro_batch_size * self.ctx.world_size, s.seed,
                                    self.state.micro_batches)  # global micro-batches; each rank slices its own
        one_process = self.strategy.name == "none"
        self._rng_after_step = rng_state() if one_process else None
        bar = None
        if out.progress_bar and self.ctx.is_main:
            from tqdm.auto import tqdm

            bar = tqdm(total=s.max_steps, initial=start_step, desc="train", unit="step", dynamic_ncols=True, file=sys.stderr)
        avg_step_time = None
        stop_file = self.run_dir / STOP_FILE
        try:
            while self.state.step < s.max_steps:
                if self.ctx.any(self.ctx.is_main and stop_file.exists()):  # one verdict for every rank
                    self.result.stopped = True
                    self.result.stop_reason = "stop requested"
                    break
                t0 = time.perf_counter()
                lr = self.optimizer.param_groups[0]["lr"]
                measure = (self.state.step + 1) % out.memory_every == 0
                loss, target_tokens, processed, outcome, state = self.train_step(stream, measure)
                dt = time.perf_counter() - t0
                self.state.step += 1
                self.state.micro_batches += s.grad_accum_steps
                self.state.tokens += target_tokens
                self.state.last_loss = loss
                self._consistent = True
                if one_process:  # only the one-process emergency checkpoint reads it
                    self._rng_after_step = rng_state()
                self.result.losses.append(loss)
                self.result.skipped_steps += outcome.skipped
                avg_step_time = dt if avg_step_time is None else 0.9 * avg_step_time + 0.1 * dt
                step = self.state.step
                if outcome.skipped:
                    self.writer.emit(Overflow(step=step, scale_before=outcome.scale_before, scale_after=outcome.scale_after,
                                              nonfinite_params=outcome.nonfinite_params, nonfinite_count=outcome.nonfinite_count))
                if step % out.log_every == 0 or outcome.skipped or step == s.max_steps:
                    self.emit_run(Step(step=step, loss=loss, lr=lr, grad_norm=outcome.grad_norm,
                                          loss_scale=outcome.scale_after, skipped=outcome.skipped, tokens=target_tokens,
                                          tokens_per_s=processed / dt, step_time_s=dt,
                                          eta_s=avg_step_time * (s.max_steps - step)))
                if state is not None:
                    self.emit_memory(state)
                if out.census_every and step % out.census_every == 0:
                    self.emit_census()
                stop_reasons = [r for o in self.observers if (r := o.after_step(self, step, outcome, loss))]
                if self.ctx.any(bool(stop_reasons)):
                    stop_reasons = stop_reasons or ["stopped by another rank's observer"]
                    self.result.stopped = True
                    self.result.stop_reason = "; ".join(stop_reasons)
                    break
                if s.eval_every and step % s.eval_every == 0 and step < s.max_steps:
                    self.evaluate()
                if cfg.checkpointing.every_steps and step % cfg.checkpointing.every_steps == 0 and step < s.max_steps:
                    self.checkpoint()
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(loss=f"{loss:.4f}", **({"scale": f"{outcome.scale_after:g}"} if self.scaler else {}))
        finally:
            if bar is not None:
                bar.close()
        self.result.step = self.state.step
        if not self.result.stopped:
            self.evaluate()
        self.checkpoint()
        self.emit_census()
        self.emit_memory(self.measure_state())
        for o in self.observers:
            o.finish(self)
        self.result.adapter_path = self.save_final()
        self.emit_run(RunFinished(step=self.state.step, final_loss=self.state.last_loss,
                                     adapter_path=str(self.result.adapter_path) if self.result.adapter_path else None,
                                     wall_s=time.time() - t_start, stopped=self.result.stopped,
                                     stop_reason=self.result.stop_reason))
        return self.result

    def emergency_checkpoint(self) -> Optional[Path]:
        """After a failure (an exception, Ctrl-C, the SIGTERM of a stop that timed out) in a
        one-process run: save the last completed step unless it is saved already, so that
        ``resume_from=latest`` loses nothing. Returns the checkpoint holding that step (possibly an
        earlier periodic one), or None. Sharded runs are left alone: saving needs every rank, and
        after a failure some may be gone."""
        if self.strategy_name() != "none" or not self._consistent or self.state.step == 0:
            return None
        if self.state.step == self._saved_step:
            return self._saved_path
        try:
            path = save_checkpoint(self.ckpt_root, self.state, self.model, self.optimizer, self.scheduler, self.scaler,
                                   self.cfg.checkpointing.keep_last, rng=self._rng_after_step)
        except Exception:  # noqa: BLE001 - the original failure is what gets reported
            return None
        self.writer.emit(Checkpoint(step=self.state.step, path=str(path), kind="emergency"))
        self._saved_step, self._saved_path = self.state.step, path
        return path

    def strategy_name(self) -> Optional[str]:
        strategy = getattr(self, "strategy", None)  # None when set-up failed before the model was ready
        return strategy.name if strategy is not None else None

    def save_final(self) -> Path:
        """The adapter in peft format (or the full model), with the tokenizer, ready to serve."""
        target = self.run_dir / ("adapter" if self.cfg.lora.enabled else "model")
        self.strategy.save_pretrained(target)
        self.ctx.barrier()
        if not self.ctx.is_main:
            return target
        self.tokenizer.save_pretrained(target)
        self.emit_run(Checkpoint(step=self.state.step, path=str(target), kind="adapter" if self.cfg.lora.enabled else "model"))
        if self.cfg.lora.enabled and self.cfg.checkpointing.merge_adapter:  # none or ddp: the full model is here
            merged = self.run_dir / "merged"
            self.strategy.module.merge_and_unload().save_pretrained(merged)
            self.tokenizer.save_pretrained(merged)
            self.writer.emit(Checkpoint(step=self.state.step, path=str(merged), kind="merged"))
        return target


def refuse_existing_run(cfg: RunConfig, run_dir: Path) -> None:
    """A run directory that already holds a run is only reused to continue it."""
    if (run_dir / "events.jsonl").exists() and not cfg.checkpointing.resume_from:
        raise ConfigError([("output.run_name", f"{run_dir} already holds a run: choose another name, or continue it "
                            "with checkpointing.resume_from=latest")])


def _prepare_run_dir(cfg: RunConfig, run_dir: Path) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    refuse_existing_run(cfg, run_dir)
    save_config(cfg, run_dir / "config.json")
    (run_dir / STOP_FILE).unlink(missing_ok=True)


def train(cfg: RunConfig, run_dir: str | Path | None = None) -> RunResult:
    """Run a fine-tune in this process (or as this rank of a torchrun job, for a distributed
    ``sharding.strategy``). Events go to ``<run_dir>/events.jsonl``; any failure is logged as
    ``run_failed`` (with the error) before it propagates."""
    if cfg.sharding.distributed:
        return _train_rank(cfg, run_dir)
    run_dir = Path(run_dir) if run_dir else new_run_dir(cfg)
    _prepare_run_dir(cfg, run_dir)
    with EventWriter(run_dir / "events.jsonl") as writer:
        engine = _Engine(cfg, run_dir, writer)
        try:
            engine.setup()
            return engine.run()
        except BaseException as err:  # noqa: BLE001 - logged, then re-raised unchanged
            saved = engine.emergency_checkpoint()
            writer.emit(RunFailed(step=engine.state.step, error=str(err) or type(err).__name__,
                                  error_type=type(err).__name__, traceback=traceback.format_exc(limit=20),
                                  checkpoint=str(saved) if saved else None))
            raise


def _train_rank(cfg: RunConfig, run_dir: str | Path | None) -> RunResult:
    """One rank of a distributed run. Under the workbench launcher a failing rank records its error
    for the launcher, which writes the single run_failed naming the rank that failed first."""
    from ..distributed.context import init_distributed, shutdown
    from ..distributed.eventlog import SharedEventWriter
    from ..distributed.faults import record_failure

    ctx = init_distributed(cfg.sharding, resolve_device(cfg.device).type)
    # Rank 0 names the run directory and checks it; every rank gets the same verdict (no rank left waiting).
    verdict = None
    if ctx.is_main:
        run_dir = Path(run_dir) if run_dir else new_run_dir(cfg)
        try:
            _prepare_run_dir(cfg, run_dir)
        except ConfigError as err:
            verdict = err.problems
    run_dir, verdict = ctx.broadcast_object((str(run_dir), verdict))
    run_dir = Path(run_dir)
    if verdict:
        shutdown(ctx)
        raise ConfigError(verdict)
    run_dir.mkdir(parents=True, exist_ok=True)  # other nodes: the shared run directory may not be visible yet
    writer = SharedEventWriter(run_dir / "events.jsonl", rank=ctx.rank)
    engine = _Engine(cfg, run_dir, writer, ctx)
    try:
        engine.setup()
        result = engine.run()
    except BaseException as err:  # noqa: BLE001 - logged, then re-raised unchanged
        if ctx.under_agent:
            record_failure(run_dir, ctx.rank, engine.state.step, err)
        else:
            writer.emit(RunFailed(step=engine.state.step, error=str(err) or type(err).__name__,
                                  error_type=type(err).__name__, traceback=traceback.format_exc(limit=20)))
        writer.close()
        raise  # the process group is left to torchrun's teardown: peers may be gone
    writer.close()
    if hasattr(engine, "strategy"):
        engine.strategy.close()
    shutdown(ctx)
    return result
