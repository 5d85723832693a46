"""The one-process training engine: AMP + gradient accumulation + LoRA, observed through events.

The step itself reads top to bottom like nanoGPT's: accumulate token-normalised losses over the
window, then one ``optimizer_step`` (unscale -> clip -> step -> update). Everything else here is
bookkeeping: events, checkpoints, eval, progress.
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
from ..plan import measure_model_state, predict_for_run
from ..precision import (
    PrecisionPolicy, count_target_tokens, optimizer_step, resolve_device, resolve_precision, token_loss_sum,
    window_loss_divisor,
)
from . import memory
from .census import parameter_census
from .checkpoint import TrainState, list_checkpoints, load_checkpoint, save_checkpoint
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
    run_dir.mkdir(parents=True, exist_ok=True)
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
    def __init__(self, cfg: RunConfig, run_dir: Path, writer: EventWriter):
        self.cfg, self.run_dir, self.writer = cfg, run_dir, writer
        self.ckpt_root = run_dir / "checkpoints"
        self.state = TrainState(step=0, micro_batches=0)
        self.result = RunResult(run_dir=run_dir, step=0)
        self.observers = default_observers(cfg)

    # ---- set-up ---------------------------------------------------------------------------------
    def setup(self) -> None:
        cfg = self.cfg
        self.device = resolve_device(cfg.device)
        self.policy: PrecisionPolicy = resolve_precision(cfg, self.device)
        torch.manual_seed(cfg.schedule.seed)
        loaded = load_base_model(cfg.model, self.policy, seed=cfg.schedule.seed)
        self.tokenizer = loaded.tokenizer
        model = apply_lora(loaded, cfg.lora, self.policy)
        if cfg.model.gradient_checkpointing:
            enable_gradient_checkpointing(model)
        model.config.use_cache = False
        self.model = model.to(self.device)
        self.model.train()
        self.named_trainable = [(n, p) for n, p in self.model.named_parameters() if p.requires_grad]
        d = cfg.data
        self.train_examples, self.train_stats = load_examples(d.train, self.tokenizer, d.max_length, d.format,
                                                              d.skip_bad_rows, d.system_prompt)
        self.eval_examples, self.eval_stats = ([], None)
        if d.eval:
            self.eval_examples, self.eval_stats = load_examples(d.eval, self.tokenizer, d.max_length, d.format,
                                                                d.skip_bad_rows, d.system_prompt)
        s = cfg.schedule
        self.optimizer = torch.optim.AdamW([p for _, p in self.named_trainable], lr=s.learning_rate,
                                           weight_decay=s.weight_decay, foreach=True)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda k: lr_factor(k, s.resolved_warmup_steps, s.max_steps, s.min_lr_ratio))
        self.scaler = self.policy.make_grad_scaler()
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
        self.state = load_checkpoint(path, self.model, self.optimizer, self.scheduler, self.scaler)

    # ---- events -------------------------------------------------------------------------------
    def emit_census(self) -> None:
        rows, totals = parameter_census(self.model)
        self.writer.emit(Census(step=self.state.step, rows=rows, totals=totals))

    def measure_state(self) -> dict:
        return measure_model_state(self.model, self.optimizer)

    def emit_memory(self, state: dict) -> None:
        self.writer.emit(Memory(step=self.state.step, devices=memory.device_memory(), host_rss=memory.host_rss(),
                                params_bytes=state["weights"], grads_bytes=state["gradients"],
                                optimizer_bytes=state["optimizer_state"], master_weights_bytes=state["master_weights"]))

    def emit_plan(self) -> None:
        try:
            plan = predict_for_run(self.cfg, self.policy).to_dict()
        except Exception as err:  # noqa: BLE001 - a planner gap must not stop a training run
            plan = {"error": f"{type(err).__name__}: {err}"}
        self.writer.emit(PlanPrediction(step=self.state.step, plan=plan))

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
        for _ in range(self.cfg.schedule.grad_accum_steps):
            idx = next(stream)
            batches.append({k: v.to(self.device) for k, v in
                            collate([self.train_examples[i] for i in idx], self.tokenizer.pad_token_id).items()})
        window_tokens = sum(count_target_tokens(b["labels"]) for b in batches)
        divisor = window_loss_divisor(window_tokens)
        loss_sum = 0.0
        for batch in batches:
            part = self._forward_loss_sum(batch)
            loss = part / divisor
            (self.scaler.scale(loss) if self.scaler is not None else loss).backward()
            loss_sum += float(part.detach())
        state = self.measure_state() if measure else None
        for o in self.observers:
            o.before_optimizer_step(self, self.state.step + 1)
        outcome = optimizer_step(self.optimizer, self.named_trainable, self.scaler, self.cfg.precision.max_grad_norm)
        with warnings.catch_warnings():
            # A skipped first fp16 step makes torch warn that the schedule ran before the optimizer;
            # the schedule counts optimizer steps attempted, skipped ones included, by design.
            warnings.filterwarnings("ignore", message=re.escape("Detected call of `lr_scheduler.step()`"))
            self.scheduler.step()
        processed = sum(int(b["attention_mask"].sum()) for b in batches)
        return loss_sum / window_tokens, window_tokens, processed, outcome, state

    @torch.no_grad()
    def evaluate(self) -> Optional[float]:
        if not self.eval_examples:
            return None
        self.model.eval()
        total, tokens = 0.0, 0
        mbs = self.cfg.schedule.micro_batch_size
        for i in range(0, len(self.eval_examples), mbs):
            batch = {k: v.to(self.device) for k, v in collate(self.eval_examples[i:i + mbs], self.tokenizer.pad_token_id).items()}
            total += float(self._forward_loss_sum(batch))
            tokens += count_target_tokens(batch["labels"])
        self.model.train()
        loss = total / tokens
        self.writer.emit(Eval(step=self.state.step, loss=loss, tokens=tokens))
        self.result.eval_losses.append((self.state.step, loss))
        return loss

    def checkpoint(self) -> Path:
        path = save_checkpoint(self.ckpt_root, self.state, self.model, self.optimizer, self.scheduler, self.scaler,
                               self.cfg.checkpointing.keep_last)
        self.writer.emit(Checkpoint(step=self.state.step, path=str(path), kind="resumable"))
        return path

    # ---- the loop -----------------------------------------------------------------------------
    def run(self) -> RunResult:
        cfg, s, out = self.cfg, self.cfg.schedule, self.cfg.output
        t_start = time.time()
        start_step = self.state.step
        self.writer.emit(RunStarted(
            run_dir=str(self.run_dir), config=config_to_dict(cfg), hardware=_hardware(self.device), versions=_versions(),
            precision=self.policy.to_dict(), total_steps=s.max_steps, start_step=start_step,
            data={"train": self.train_stats.to_dict(), "eval": self.eval_stats.to_dict() if self.eval_stats else None}))
        self.emit_plan()
        self.emit_census()
        self.emit_memory(self.measure_state())
        stream = micro_batch_indices(len(self.train_examples), s.micro_batch_size, s.seed, self.state.micro_batches)
        bar = None
        if out.progress_bar:
            from tqdm.auto import tqdm

            bar = tqdm(total=s.max_steps, initial=start_step, desc="train", unit="step", dynamic_ncols=True, file=sys.stderr)
        avg_step_time = None
        stop_file = self.run_dir / STOP_FILE
        try:
            while self.state.step < s.max_steps:
                if stop_file.exists():
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
                self.result.losses.append(loss)
                self.result.skipped_steps += outcome.skipped
                avg_step_time = dt if avg_step_time is None else 0.9 * avg_step_time + 0.1 * dt
                step = self.state.step
                if outcome.skipped:
                    self.writer.emit(Overflow(step=step, scale_before=outcome.scale_before, scale_after=outcome.scale_after,
                                              nonfinite_params=outcome.nonfinite_params, nonfinite_count=outcome.nonfinite_count))
                if step % out.log_every == 0 or outcome.skipped or step == s.max_steps:
                    self.writer.emit(Step(step=step, loss=loss, lr=lr, grad_norm=outcome.grad_norm,
                                          loss_scale=outcome.scale_after, skipped=outcome.skipped, tokens=target_tokens,
                                          tokens_per_s=processed / dt, step_time_s=dt,
                                          eta_s=avg_step_time * (s.max_steps - step)))
                if state is not None:
                    self.emit_memory(state)
                if out.census_every and step % out.census_every == 0:
                    self.emit_census()
                stop_reasons = [r for o in self.observers if (r := o.after_step(self, step, outcome, loss))]
                if stop_reasons:
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
        self.writer.emit(RunFinished(step=self.state.step, final_loss=self.state.last_loss,
                                     adapter_path=str(self.result.adapter_path) if self.result.adapter_path else None,
                                     wall_s=time.time() - t_start, stopped=self.result.stopped,
                                     stop_reason=self.result.stop_reason))
        return self.result

    def save_final(self) -> Path:
        """The adapter in peft format (or the full model), with the tokenizer, ready to serve."""
        target = self.run_dir / ("adapter" if self.cfg.lora.enabled else "model")
        self.model.save_pretrained(target)
        self.tokenizer.save_pretrained(target)
        self.writer.emit(Checkpoint(step=self.state.step, path=str(target), kind="adapter" if self.cfg.lora.enabled else "model"))
        if self.cfg.lora.enabled and self.cfg.checkpointing.merge_adapter:
            merged = self.run_dir / "merged"
            self.model.merge_and_unload().save_pretrained(merged)
            self.tokenizer.save_pretrained(merged)
            self.writer.emit(Checkpoint(step=self.state.step, path=str(merged), kind="merged"))
        return target


def train(cfg: RunConfig, run_dir: str | Path | None = None) -> RunResult:
    """Run a fine-tune in this process. Events go to ``<run_dir>/events.jsonl``; any failure is
    logged as ``run_failed`` (with the error) before it propagates."""
    run_dir = Path(run_dir) if run_dir else new_run_dir(cfg)
    run_dir.mkdir(parents=True, exist_ok=True)
    if (run_dir / "events.jsonl").exists() and not cfg.checkpointing.resume_from:
        raise ConfigError([("output.run_name", f"{run_dir} already holds a run: choose another name, or continue it "
                            "with checkpointing.resume_from=latest")])
    save_config(cfg, run_dir / "config.json")
    (run_dir / STOP_FILE).unlink(missing_ok=True)
    with EventWriter(run_dir / "events.jsonl") as writer:
        engine = _Engine(cfg, run_dir, writer)
        try:
            engine.setup()
            return engine.run()
        except BaseException as err:  # noqa: BLE001 - logged, then re-raised unchanged
            writer.emit(RunFailed(step=engine.state.step, error=str(err) or type(err).__name__,
                                  error_type=type(err).__name__, traceback=traceback.format_exc(limit=20)))
            raise
