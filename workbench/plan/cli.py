"""``workbench plan`` and ``workbench fact-check``: register with ``add_parser(subparsers)`` /
``add_fact_check_parser(subparsers)``, run with ``run(args)`` / ``run_fact_check(args)``."""

from __future__ import annotations

import argparse
import itertools
import json
import sys

from ..config import ConfigError, LoraSection, config_from_dict, world_size_for
from ..config.flags import add_config_arguments, overrides_from_args
from .arch import PRESETS
from .inference import INFERENCE_DEVICES
from .options import PlanOptions
from .planner import DEFAULT_DEVICES, OFFLOADS, PRECISIONS, DeviceSet, GiB, Setting, predict

STRATEGY_CHOICES = ("all", "none", "ddp", "fsdp-zero2", "fsdp-zero3", "ds-zero1", "ds-zero2", "ds-zero3")


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "plan",
        help="predict GPU/host memory per device and find the cheapest configuration that fits",
        description="Memory planner: from the model config alone (meta device, no weights) predict per-GPU and "
        "host bytes (weights, gradients, optimizer state, master weights, activations, LoRA extras, sharding "
        "buffers) for each precision x strategy x offload x LoRA/full; print a fits matrix and the cheapest fit.",
    )
    p.add_argument(
        "--recipe",
        metavar="NAME",
        help="plan a packaged recipe (`workbench recipes`): its model, LoRA, "
        "micro-batch, text tokens (data.max_length less its screenshots' tokens) and screenshots on its target "
        "devices (--devices/--host-ram change them; the other planning flags are the recipe's), then its own "
        "setting against the cheapest fit",
    )
    p.add_argument(
        "--model",
        default="autoglm-phone-9b",
        help=f"preset ({', '.join(PRESETS)}) or a directory with config.json (default: autoglm-phone-9b)",
    )
    p.add_argument("--precision", default="all", choices=("all",) + PRECISIONS, help="precision mode (default: all)")
    p.add_argument("--strategy", default="all", choices=STRATEGY_CHOICES, help="parallel strategy (default: all)")
    p.add_argument("--offload", default="all", choices=("all",) + OFFLOADS, help="offload to host RAM (default: all)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--lora", dest="lora", action="store_const", const=True, help="LoRA only")
    g.add_argument("--full", dest="lora", action="store_const", const=False, help="full fine-tuning only")
    p.set_defaults(lora=None)
    p.add_argument("--lora-r", type=int, default=16, help="LoRA rank (default 16, all-linear)")
    p.add_argument("--micro-batch", type=int, default=1, help="examples per forward per GPU (default 1)")
    p.add_argument(
        "--seq-len", type=int, default=2048, help="text tokens per example (default 2048); images add theirs"
    )
    p.add_argument(
        "--grad-ckpt", default="both", choices=("on", "off", "both"), help="gradient checkpointing (default: both)"
    )
    p.add_argument(
        "--devices", default="2x24564MiB", help="COUNTxSIZE, e.g. 2x24GiB (default: 2x RTX 4090, 24564 MiB each)"
    )
    p.add_argument("--host-ram", default="64GiB", help="host RAM (default 64GiB)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument(
        "--fact-check",
        action="store_true",
        help="print published memory claims (three blog posts) vs the planner instead",
    )
    p.add_argument(
        "--inference",
        action="store_true",
        help="serving memory instead of training: weights in each format + KV cache + screenshots, on one "
        "GPU (a 16 GB T4 and a 24 GB RTX 4090 unless --devices names one)",
    )
    add_config_arguments(p, PlanOptions, dashes=True)  # screenshots and inference: typed, validated together
    return p


def add_fact_check_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "fact-check", help="compare published memory claims about AutoGLM-Phone-9B (three blog posts) with the planner"
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a markdown table")
    return p


def _strategies(choice: str):
    table = {
        "none": ("none", 0),
        "ddp": ("ddp", 0),
        "fsdp-zero2": ("fsdp", 2),
        "fsdp-zero3": ("fsdp", 3),
        "ds-zero1": ("deepspeed", 1),
        "ds-zero2": ("deepspeed", 2),
        "ds-zero3": ("deepspeed", 3),
    }
    return list(table.values()) if choice == "all" else [table[choice]]


def run(args) -> int:
    if getattr(args, "fact_check", False):
        return run_fact_check(args)
    try:
        options = plan_options(args)
    except ConfigError as err:
        print(f"workbench plan: {err}", file=sys.stderr)
        return 2
    if options.gguf:
        return run_gguf(args, options)
    if getattr(args, "inference", False):
        return run_inference(args, options)
    if getattr(args, "recipe", None):
        return run_recipe(args)
    try:
        devices = DeviceSet.parse(args.devices, args.host_ram)
        if args.devices == "2x24564MiB":
            devices = DeviceSet(**{**devices.__dict__, "name": DEFAULT_DEVICES.name})
        if args.micro_batch < 1 or args.seq_len < 2:
            raise ConfigError([("--micro-batch/--seq-len", "need micro-batch >= 1 and seq-len >= 2")])
        lora = LoraSection(r=args.lora_r)
        plans = []
        for prec in PRECISIONS if args.precision == "all" else (args.precision,):
            for strat, stage in _strategies(args.strategy):
                for off in OFFLOADS if args.offload == "all" else (args.offload,):
                    for use_lora in (True, False) if args.lora is None else (args.lora,):
                        for ck, quant in itertools.product(
                            {"on": (True,), "off": (False,), "both": (False, True)}[args.grad_ckpt],
                            options.quantized_bases,
                        ):
                            s = Setting(
                                prec,
                                strat,
                                stage,
                                off,
                                use_lora,
                                world_size_for(strat, devices.count),
                                args.micro_batch,
                                args.seq_len,
                                ck,
                                options.images(),
                                options.image_size,
                                loss_head=options.loss_head,
                                label_tokens=options.label_tokens,
                                quantized_base=quant,
                            )
                            if s.invalid_reason() is None and s.world_size <= devices.count:
                                plans.append(predict(args.model, s, devices, lora=lora))
    except ConfigError as err:
        print(f"workbench plan: {err}", file=sys.stderr)
        return 2
    from .planner import Matrix

    m = Matrix(args.model, devices, plans)
    if args.json:
        print(json.dumps(m.to_dict(), indent=1))
        return 0
    print(format_matrix(m))
    return 0


def run_recipe(args) -> int:
    from ..config.recipes import load_recipe
    from .recipes import format_recipe_plan, plan_recipe

    try:
        recipe = load_recipe(args.recipe)
        given = args.devices != "2x24564MiB" or args.host_ram != "64GiB"
        rp = plan_recipe(recipe, DeviceSet.parse(args.devices, args.host_ram) if given else None)
    except ConfigError as err:
        print(f"workbench plan: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(
            json.dumps(
                {
                    **rp.matrix.to_dict(),
                    "recipe": recipe.name,
                    "recipe_plan": rp.own.to_dict(),
                    "recipe_is_cheapest": rp.agrees,
                },
                indent=1,
            )
        )
    else:
        print(format_matrix(rp.matrix))
        print(format_recipe_plan(rp))
    return 0


def plan_options(args) -> PlanOptions:
    """The typed options given as flags; ConfigError naming every bad one."""
    return config_from_dict(overrides_from_args(args, PlanOptions), PlanOptions)


def run_gguf(args, options: PlanOptions) -> int:
    from .gguf import format_gguf, gguf_plan

    try:
        plans = [gguf_plan(args.model, q, options.gguf_context) for q in options.gguf_quants]
    except ConfigError as err:
        print(f"workbench plan: {err}", file=sys.stderr)
        return 2
    print(json.dumps([p.to_dict() for p in plans], indent=1) if args.json else format_gguf(plans))
    return 0


def run_inference(args, options: PlanOptions) -> int:
    from .inference import format_inference, inference_table

    try:
        devices = INFERENCE_DEVICES
        if args.devices != "2x24564MiB":
            d = DeviceSet.parse(args.devices, args.host_ram)
            devices = (
                DeviceSet(
                    count=1,
                    bytes_per_device=d.bytes_per_device,
                    host_ram=d.host_ram,
                    name=f"GPU {d.bytes_per_device / GiB:.1f} GiB",
                ),
            )
        rows = inference_table(
            args.model,
            devices,
            options.formats,
            options.context,
            options.images(inference=True),
            options.image_size,
            args.micro_batch,
        )
    except ConfigError as err:
        print(f"workbench plan: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([r.to_dict() for r in rows], indent=1))
    else:
        print(format_inference(rows))
    return 0


def format_matrix(m) -> str:
    d = m.devices
    out = [
        f"model {m.model}: {(m.plans[0].census['total_params'] - m.plans[0].census['lora_params']) / 1e9:.2f} B params "
        f"({m.plans[0].census['vision_params'] / 1e9:.2f} B vision) on {d.count}x {d.bytes_per_device / GiB:.1f} GiB "
        f"({d.name}), host {d.host_ram / GiB:.0f} GiB"
        if m.plans
        else f"model {m.model}: no valid combination"
    ]
    images = m.plans[0].activations.get("images") if m.plans else None
    keys = ("weights", "gradients", "optimizer_state", "master_weights", "activations") + (
        ("vision_activations",) if images else ()
    )
    width = max([52] + [len(p.setting.label) + 2 for p in m.plans])
    if images:
        a = m.plans[0].activations
        out.append(
            f"images: {images['images_per_row']} x {images['size']} per example -> resized {images['resized']}, "
            f"grid {'x'.join(map(str, images['grid_thw']))} = {images['patches_per_image']:,} patches, "
            f"{images['tokens_per_image']:,} image tokens each (2x2 merge); decoder sequence {a['text_seq_len']:,} "
            f"text + {images['tokens_per_row']:,} image = {a['seq_len']:,} tokens ({images['geometry']['source']})"
        )
    out.append(
        f"{'configuration':<{width}}{'fits':>5}{'GPU GiB':>9}{'headroom':>9}{'host GiB':>9}  "
        f"weights/grads/optim/master/acts{'/vision' if images else ''}/buffers per GPU"
    )
    for p in m.plans:
        g = p.gpu
        parts = "/".join(f"{g[k] / GiB:.1f}" for k in keys)
        out.append(
            f"{p.setting.label:<{width}}{'yes' if p.fits else 'no':>5}{p.gpu_total / GiB:>9.1f}"
            f"{p.gpu_headroom / GiB:>9.1f}{p.host_total / GiB:>9.1f}  {parts}/{g['sharding_buffers'] / GiB:.1f}"
        )
    for name, lora in (("overall", None), ("LoRA", True), ("full fine-tuning", False)):
        best = m.cheapest(lora)
        out.append(
            f"cheapest fit ({name}): "
            + (
                f"{best.setting.label}  GPU {best.gpu_total / GiB:.1f} GiB "
                f"(headroom {best.gpu_headroom / GiB:.1f}), host {best.host_total / GiB:.1f} GiB"
                if best
                else "none fits"
            )
        )
    out.append(
        "cheapest = no offload, then no checkpointing, then least communication, then bf16 > pure-bf16 > fp16 > "
        "fp32, then most headroom (docs/memory_planner.md)"
    )
    return "\n".join(out)


def run_fact_check(args) -> int:
    from .factcheck import fact_check, format_markdown

    verdicts = fact_check()
    if getattr(args, "json", False):
        print(json.dumps([v.to_dict() for v in verdicts], indent=1, ensure_ascii=False))
    else:
        print(format_markdown(verdicts))
    return 0
