"""Memory and speed of the loss heads (``memory.loss_head``) against TRL's SFTTrainer on the same rows.

    python -m workbench.bench.loss_head [--precision bf16] [--steps 2] [--prompt-tokens 2048] [--label-tokens 64]

SmolLM2-135M-Instruct (the packaged model) with LoRA as a run builds it, one row of ``--prompt-tokens`` prompt
tokens followed by ``--label-tokens`` labelled ones (micro-batch 1), ``--precision`` as ``precision.mode``.
Contenders: the workbench step (``forward.batch_loss_sum`` -> ``precision.step``) with the ``full``, ``labels``
and ``chunked`` heads; ``trl``: TRL's ``SFTTrainer`` with its default loss (``nll``, formerly ``chunked_nll``:
ignored positions dropped before the output projection) on the same row and model; ``liger``: Liger's fused
linear cross-entropy, only where CUDA and Triton and ``liger_kernel`` import (never a dependency).

Each contender runs in its own subprocess (one at a time, so that peak RSS is its own), loads the model, then:
* saved-tensor bytes: one forward + loss under ``plan.SavedTensors`` (unique storages autograd keeps for backward,
  weights excluded), i.e. the activation memory at the end of the forward;
* peak RSS: the process's resident peak over its first step (Linux: VmHWM reset after loading; later steps reuse
  what the allocator kept), and how far it rose above the loaded model;
* steps/s over ``--steps`` optimizer steps after one warm-up step.
Ratios are printed against the full head and against TRL. On a CPU without native bf16 it is emulated and slow:
use ``--precision fp32`` there (``workbench env`` says which).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from . import run_child

HEADS = ("full", "labels", "chunked")
CONTENDERS = HEADS + ("trl", "liger")


def available(contender: str) -> str | None:
    """None when ``contender`` can run here, else why not."""
    import importlib.util

    if contender == "trl" and importlib.util.find_spec("trl") is None:
        return "trl is not installed (pip install trl)"
    if contender == "liger":
        import torch

        missing = [m for m in ("triton", "liger_kernel") if importlib.util.find_spec(m) is None]
        if not torch.cuda.is_available() or missing:
            return "needs CUDA" + (f" and {', '.join(missing)}" if missing else "")
    return None


def _row(vocab: int, prompt: int, labelled: int, seed: int = 0):
    """input_ids [1, prompt + labelled]; labels on the last ``labelled`` tokens (workbench's convention)."""
    import torch

    from ..data.tokenize import IGNORE_INDEX

    ids = torch.randint(0, vocab, (1, prompt + labelled), generator=torch.Generator().manual_seed(seed))
    labels = ids.clone()
    labels[:, :prompt] = IGNORE_INDEX
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}


def _vm_hwm() -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _reset_hwm() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS (Linux >= 4.0)
        return True
    except OSError:
        return False


def _build(args):
    from ..config import load_config
    from ..engine.build import build_model
    from ..hardware import resolve_device
    from ..precision import resolve_precision

    cfg = load_config(
        None,
        {
            "model.source": args.model,
            "precision.mode": args.precision,
            "data.eval": None,
            "lora.dropout": 0.0,
            "memory.loss_chunk_tokens": args.chunk_tokens,
            "schedule.learning_rate": 1e-4,
            "device": args.device,
        },
    )
    device = resolve_device(cfg.device)
    precision = resolve_precision(cfg, device)
    built = build_model(cfg, precision, device)
    return cfg, precision, built, device


def run_contender(name: str, args) -> dict:
    import torch

    from ..engine.memory import host_rss
    from ..forward import on_device
    from ..plan.activations import SavedTensors

    torch.set_num_threads(args.threads)
    cfg, precision, built, device = _build(args)
    model = built.model.train()
    batch = on_device(_row(model.config.vocab_size, args.prompt_tokens, args.label_tokens), device)
    step, saved = (_trl_step if name == "trl" else _workbench_step)(name, cfg, precision, model, batch, built.tokenizer)
    # Peak RSS over the first step, from the loaded model: later steps reuse what the allocator kept of it.
    loaded = host_rss()
    reset = _reset_hwm()
    step()  # also the warm-up
    peak = _vm_hwm() if reset else None
    with SavedTensors(model) as counter:
        loss = saved()
    del loss
    saved_bytes = counter.result().saved_forward
    model.zero_grad(set_to_none=True)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    elapsed = time.perf_counter() - t0
    out = {
        "contender": name,
        "saved_bytes": saved_bytes,
        "steps_per_s": args.steps / elapsed,
        "rss_before": loaded,
        "rss_peak": peak,
        "rss_rise": (peak - loaded) if peak else None,
    }
    if device.type == "cuda":
        out["cuda_peak"] = torch.cuda.max_memory_allocated(device)
    return out


def _workbench_step(name, cfg, precision, model, batch, tokenizer):
    """The engine's step for one micro-batch: batch_loss_sum through the head, normalised by precision.step."""
    from ..engine.step import build_optimizer
    from ..forward import batch_loss_sum
    from ..precision import count_target_tokens, optimizer_step, window_loss_divisor

    memory = cfg.memory.model_copy(update={"loss_head": "chunked" if name == "liger" else name})
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    opt = build_optimizer([p for _, p in named], cfg.schedule)
    scaler = precision.make_grad_scaler()
    divisor = window_loss_divisor(count_target_tokens(batch["labels"]))
    forward = (
        (lambda: _liger_loss_sum(model, batch, precision.autocast))
        if name == "liger"
        else (lambda: batch_loss_sum(model, batch, precision.autocast, memory))
    )

    def step():
        loss = forward() / divisor
        (scaler.scale(loss) if scaler is not None else loss).backward()
        optimizer_step(opt, named, scaler, cfg.precision.max_grad_norm)

    return step, forward


def _liger_loss_sum(model, batch, autocast):
    """Liger's fused linear cross-entropy over the labelled positions' hidden states (CUDA + Triton only)."""
    from liger_kernel.transformers.functional import liger_fused_linear_cross_entropy

    from ..forward import output_head
    from ..forward.head import labelled_positions

    head = output_head(model)
    captured = {}
    hook = head.register_forward_pre_hook(lambda m, args: captured.setdefault("h", args[0]))
    try:
        with autocast():
            model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], use_cache=False)
    finally:
        hook.remove()
    hidden = captured["h"]
    positions = labelled_positions(batch["labels"])
    x = hidden.reshape(-1, hidden.size(-1)).index_select(0, positions)
    weight = getattr(head, "base_layer", head).weight
    return liger_fused_linear_cross_entropy(
        x, weight.to(x.dtype), batch["labels"].reshape(-1)[positions + 1], reduction="sum"
    )


def _trl_step(name, cfg, precision, model, batch, tokenizer):
    """TRL's SFTTrainer with its default loss, on the same row: its compute_loss (the saved-tensor figure) and
    its training_step + optimizer step (one optimizer step per call)."""
    import tempfile

    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    ids = batch["input_ids"][0].tolist()
    mask = (batch["labels"][0] != -100).long().tolist()
    data = Dataset.from_list([{"input_ids": ids, "completion_mask": mask}])
    targs = SFTConfig(
        output_dir=tempfile.mkdtemp(),
        per_device_train_batch_size=1,
        max_steps=10**6,
        learning_rate=cfg.schedule.learning_rate,
        lr_scheduler_type="constant",
        max_grad_norm=cfg.precision.max_grad_norm,
        bf16=precision.mode == "bf16",
        fp16=precision.mode == "fp16",
        use_cpu=precision.device_type == "cpu",
        report_to=[],
        logging_strategy="no",
        save_strategy="no",
        disable_tqdm=True,
        max_length=None,
        completion_only_loss=True,
        dataloader_num_workers=0,
    )
    trainer = SFTTrainer(model=model, args=targs, train_dataset=data, processing_class=tokenizer)
    trainer.create_optimizer_and_scheduler(num_training_steps=10**6)
    trainer.current_gradient_accumulation_steps = 1  # what Trainer.train sets per window; one micro-batch here
    inputs = next(iter(trainer.get_train_dataloader()))
    assert int((inputs["labels"] != -100).sum()) == int(sum(mask)), "TRL must see the same labelled tokens"

    def forward():
        with trainer.compute_loss_context_manager():
            return trainer.compute_loss(trainer.model, trainer._prepare_inputs(dict(inputs)))

    def step():
        trainer.training_step(trainer.model, dict(inputs))
        if targs.max_grad_norm:
            trainer.accelerator.clip_grad_norm_(trainer.model.parameters(), targs.max_grad_norm)
        trainer.optimizer.step()
        trainer.optimizer.zero_grad(set_to_none=True)

    return step, forward


def format_results(results: list[dict], skipped: dict) -> str:
    def mib(b):
        return f"{b / 2**20:,.1f}" if b is not None else "-"

    lines = [f"{'contender':<10}{'saved MiB':>12}{'RSS peak MiB':>14}{'RSS rise MiB':>14}{'steps/s':>10}"]
    for r in results:
        lines.append(
            f"{r['contender']:<10}{mib(r['saved_bytes']):>12}{mib(r['rss_peak']):>14}{mib(r['rss_rise']):>14}"
            f"{r['steps_per_s']:>10.3f}"
        )
    by = {r["contender"]: r for r in results}
    for ours in ("labels", "chunked"):
        for ref in ("full", "trl", "liger"):
            if ours not in by or ref not in by:
                continue
            a, b = by[ours], by[ref]
            rise = f"{a['rss_rise'] / b['rss_rise']:.3f}" if a["rss_rise"] and b["rss_rise"] else "-"
            lines.append(
                f"{ours} / {ref}: saved tensors {a['saved_bytes'] / b['saved_bytes']:.3f}, RSS rise {rise}, "
                f"steps/s {a['steps_per_s'] / b['steps_per_s']:.3f}"
            )
    for name, why in skipped.items():
        lines.append(f"{name}: skipped ({why})")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m workbench.bench.loss_head",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument("--precision", default="bf16", help="precision.mode (bf16 is emulated, slow, on CPUs without it)")
    p.add_argument("--steps", type=int, default=2, help="timed optimizer steps per contender")
    p.add_argument("--prompt-tokens", type=int, default=2048)
    p.add_argument("--label-tokens", type=int, default=64)
    p.add_argument("--chunk-tokens", type=int, default=512, help="memory.loss_chunk_tokens")
    p.add_argument("--contenders", default=",".join(CONTENDERS), help="comma-separated, of " + ", ".join(CONTENDERS))
    p.add_argument("--threads", type=int, default=1, help="torch threads per contender")
    p.add_argument("--device", default="auto")
    p.add_argument("--json", metavar="FILE", help="also write the figures to FILE")
    p.add_argument("--only", choices=CONTENDERS, help=argparse.SUPPRESS)  # child-process mode
    args = p.parse_args(argv)
    if args.only:
        print("RESULT " + json.dumps(run_contender(args.only, args)), flush=True)
        return 0
    names = [n.strip() for n in args.contenders.split(",") if n.strip()]
    unknown = [n for n in names if n not in CONTENDERS]
    if unknown or args.steps < 1 or args.label_tokens < 1 or args.prompt_tokens < 1:
        p.error(f"--contenders: unknown {unknown}" if unknown else "--steps, --prompt-tokens, --label-tokens: >= 1")
    skipped = {n: why for n in names if (why := available(n))}
    passthrough = list(argv if argv is not None else sys.argv[1:])
    results = []
    for name in names:
        if name in skipped:
            continue
        got = run_child("workbench.bench.loss_head", passthrough, name)
        if got is None:
            return 1
        results.append(got)
        r = results[-1]
        print(f"  {name:<8} saved {r['saved_bytes'] / 2**20:,.1f} MiB, {r['steps_per_s']:.3f} steps/s", flush=True)
    print(
        f"{args.model} LoRA, {args.precision}, 1 row of {args.prompt_tokens:,} prompt + {args.label_tokens} labelled "
        f"tokens, chunk {args.chunk_tokens}, {args.steps} timed steps, {args.threads} thread(s)"
    )
    print(format_results(results, skipped))
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "settings": {k: v for k, v in vars(args).items() if k != "only"},
                    "results": results,
                    "skipped": skipped,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
