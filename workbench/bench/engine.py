"""Steps/s of the workbench engine (all events on) vs a bare hand-written AMP loop vs transformers'
Trainer, on the same model, data, LoRA config and precision.

    python -m workbench.bench.engine [--model smollm2-135m-instruct] [--precision bf16] [--steps 20]

Each contender runs in its own subprocess (one at a time, so they do not share the 2 cores), does
the same number of warm-up steps, then is timed over ``--steps`` optimizer steps. Micro-batches are
identical: the same tokenized examples in the same order, padded the same way.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from . import run_child

SAMPLES = Path(__file__).resolve().parents[2] / "data_samples"


def _config(args, runs_dir: str):
    from ..config import load_config

    return load_config(
        None,
        {
            "model.source": args.model,
            "precision.mode": args.precision,
            "data.train": str(SAMPLES / "identity" / "train.jsonl"),
            "data.eval": None,
            "data.max_length": args.max_length,
            "schedule.max_steps": args.warmup + args.steps,
            "schedule.micro_batch_size": args.micro_batch,
            "schedule.grad_accum_steps": args.accum,
            "schedule.warmup_steps": 0,
            "lora.dropout": 0.0,
            "output.runs_dir": runs_dir,
            "output.progress_bar": False,
            "output.memory_every": 1,
            "output.log_every": 1,
            "schedule.learning_rate": 2e-4,
        },
    )  # one number for the engine, the bare loop and the Trainer alike


def _prepared(cfg):
    """Model with LoRA, tokenized examples and the precision policy, built as the engine builds them."""
    from ..data import load_training_examples
    from ..engine.build import build_model
    from ..hardware import resolve_device
    from ..precision import resolve_precision

    device = resolve_device(cfg.device)
    precision = resolve_precision(cfg, device)
    built = build_model(cfg, precision, device)
    examples, _ = load_training_examples(cfg.data.train, built.tokenizer, cfg.data.max_length)
    return built.model, built.tokenizer, examples, precision


def _batches(cfg, examples, tokenizer, n_steps):
    from ..data import collate, micro_batch_indices

    s = cfg.schedule
    stream = micro_batch_indices(len(examples), s.micro_batch_size, s.seed)
    return [
        [collate([examples[i] for i in next(stream)], tokenizer.pad_token_id) for _ in range(s.grad_accum_steps)]
        for _ in range(n_steps)
    ]


def run_engine(args) -> dict:
    from ..events import iter_events
    from ..runs.layout import EVENTS_FILE
    from ..training import train

    with tempfile.TemporaryDirectory() as tmp:
        result = train(_config(args, tmp))
        steps = [e for e in iter_events(result.run_dir / EVENTS_FILE) if e.type == "step"]
        n_events = sum(1 for _ in iter_events(result.run_dir / EVENTS_FILE))
    timed = steps[args.warmup :]
    # Wall time between step events includes the per-step event and memory bookkeeping.
    elapsed = timed[-1].time - steps[args.warmup - 1].time
    return {"steps_per_s": len(timed) / elapsed, "events": n_events}


def run_bare(args) -> dict:
    """The nanoGPT-style loop, written out by hand: no events, no checkpoints, no progress. Its forward is the
    engine's (``workbench.forward``), so the two differ only in what the engine does around the step."""
    import torch

    from ..engine.step import build_optimizer
    from ..forward import batch_loss_sum
    from ..precision import count_target_tokens, window_loss_divisor

    cfg = _config(args, tempfile.gettempdir())
    model, tok, examples, precision = _prepared(cfg)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = build_optimizer(params, cfg.schedule)
    scaler = precision.make_grad_scaler()
    batches = _batches(cfg, examples, tok, args.warmup + args.steps)
    t0 = None
    for k, window in enumerate(batches):
        if k == args.warmup:
            t0 = time.perf_counter()
        divisor = window_loss_divisor(sum(count_target_tokens(b["labels"]) for b in window))
        for b in window:
            loss = batch_loss_sum(model, b, precision.autocast, cfg.memory) / divisor
            (scaler.scale(loss) if scaler else loss).backward()
        if scaler:
            scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        if scaler:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        opt.zero_grad(set_to_none=True)
    return {"steps_per_s": args.steps / (time.perf_counter() - t0)}


def run_trainer(args) -> dict:
    """transformers.Trainer with the same model, LoRA, precision, batches and clipping."""
    import torch
    from transformers import Trainer, TrainerCallback, TrainingArguments

    cfg = _config(args, tempfile.gettempdir())
    model, tok, examples, precision = _prepared(cfg)
    flat = [b for window in _batches(cfg, examples, tok, args.warmup + args.steps) for b in window]

    class Fixed(torch.utils.data.Dataset):  # pre-collated micro-batches, served in order
        def __len__(self):
            return len(flat)

        def __getitem__(self, i):
            return flat[i]

    times = []

    class Clock(TrainerCallback):
        def on_step_end(self, *a, **k):
            times.append(time.perf_counter())

    with tempfile.TemporaryDirectory() as tmp:
        targs = TrainingArguments(
            output_dir=tmp,
            per_device_train_batch_size=1,
            gradient_accumulation_steps=cfg.schedule.grad_accum_steps,
            max_steps=args.warmup + args.steps,
            learning_rate=cfg.schedule.learning_rate,
            lr_scheduler_type="constant",
            max_grad_norm=1.0,
            bf16=precision.mode == "bf16",
            fp16=precision.mode == "fp16",
            use_cpu=precision.device_type == "cpu",
            logging_strategy="no",
            save_strategy="no",
            report_to=[],
            dataloader_num_workers=0,
            remove_unused_columns=False,
            disable_tqdm=True,
            average_tokens_across_devices=False,
        )
        trainer = Trainer(
            model=model, args=targs, train_dataset=Fixed(), data_collator=lambda items: items[0], callbacks=[Clock()]
        )
        trainer.train()
    return {"steps_per_s": args.steps / (times[-1] - times[args.warmup - 1])}


RUNNERS = {"engine": run_engine, "bare": run_bare, "trainer": run_trainer}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument("--precision", default="auto", help="precision.mode (auto: fp32 on CPUs without native bf16)")
    p.add_argument("--steps", type=int, default=20, help="timed optimizer steps")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--accum", type=int, default=2)
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--repeats", type=int, default=1, help="runs per contender (interleaved); the median counts")
    p.add_argument("--only", choices=list(RUNNERS), help=argparse.SUPPRESS)  # child-process mode
    args = p.parse_args(argv)
    if args.only:
        print("RESULT " + json.dumps(RUNNERS[args.only](args)), flush=True)
        return 0
    passthrough = [a for a in (argv if argv is not None else sys.argv[1:])]
    results: dict = {name: [] for name in RUNNERS}
    for _ in range(args.repeats):
        for name in RUNNERS:
            got = run_child("workbench.bench.engine", passthrough, name)
            if got is None:
                return 1
            results[name].append(got["steps_per_s"])
            print(f"  {name:<8} {results[name][-1]:.3f} steps/s", flush=True)
    med = {k: sorted(v)[len(v) // 2] for k, v in results.items()}
    print(
        f"model {args.model}, {args.precision}, micro-batch {args.micro_batch} x accum {args.accum}, "
        f"max_length {args.max_length}, {args.steps} timed steps, median of {args.repeats}"
    )
    for k, v in med.items():
        print(f"{k:<8} {v:.3f} steps/s")
    print(f"engine / bare    = {med['engine'] / med['bare']:.3f}  (target >= 0.97)")
    print(f"engine / Trainer = {med['engine'] / med['trainer']:.3f}  (target > 1)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
