"""``workbench train --dry-run``: what a run would do, checked before a 20 GB download and without a GPU.

The model is built at its real size on the meta device from its config alone (the memory planner's builder: no
weights, no memory), then taken through what the engine does to it: the precision policy's storage dtypes, the nf4 or
int8 plan of a quantized base (quantization.base), LoRA (a target module name that matches nothing fails here), the
precision module rules (a rule that matches nothing fails here), the sharding strategy's units. One row of the run's
shape (data.max_length tokens, its screenshots' image tokens among them) goes forward through the text decoder and
the loss head, and backward, on meta tensors: a shape error fails here. The vision tower's forward reads its grid's
values, which meta tensors do not hold: its output is stood in by a tensor of its shape. Printed: parameters by
group and dtype, what is trained, the planner's memory per GPU, and the command that launches the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..config import ConfigError, RunConfig
from ..config.command_line import command_line

GiB = 1024**3
LABELLED_TOKENS = 64  # one reply's tokens: what the loss head computes logits for


@dataclass
class DryRun:
    lines: list[str] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)

    def say(self, line: str = "") -> None:
        self.lines.append(line)


def dry_run(cfg: RunConfig, recipe=None, argv: list[str] | None = None) -> DryRun:
    """The dry run of ``cfg`` (from ``recipe`` when given: its target devices and screenshots); ``argv``: the
    command line it came from, for the launch command."""
    from ..plan.arch import build_meta_model, load_model_config

    out = DryRun()
    devices, images_per_row, image_size = _targets(cfg, recipe)
    policy = _policy(cfg, devices)
    source = cfg.model.source
    try:
        config = load_model_config(source)
    except ConfigError as err:
        raise ConfigError([("model.source", m) for _, m in err.problems]) from None
    model = build_meta_model(config).to(policy.base_dtype)
    out.say(
        f"dry run: {source} ({type(model).__name__}, {config.model_type}) built at its real size on the meta "
        "device: no weights read, nothing allocated"
    )
    out.say(
        f"precision {policy.mode}: autocast {_name(policy.autocast_dtype)}, frozen base stored "
        f"{_name(policy.base_dtype)}, trained weights {_name(policy.trainable_dtype)} (resolved for "
        f"{devices.count}x {devices.name})"
    )
    wrapped = _wrapped(cfg, model, config, policy, out)
    _census(cfg, policy, out)
    _sharding(cfg, wrapped, out)
    image = _image_load(source, config, image_size, images_per_row)
    _forward_backward(cfg, wrapped, config, image, out)
    _memory(cfg, policy, devices, image, out)
    _launch(cfg, argv or [], out)
    return out


def _targets(cfg: RunConfig, recipe):
    """The devices, screenshots per row and their size the run is planned for: its recipe's, else this machine's GPUs
    (two RTX 4090s where it has none) and one 1080x2400 screenshot a row for a vision-language model."""
    from ..plan.planner import DEFAULT_DEVICES, _local_devices

    if recipe is not None:
        from ..plan.recipes import recipe_devices

        return recipe_devices(recipe), recipe.plan.images_per_row, recipe.plan.image_size
    devices = _local_devices("cuda", cfg.sharding.world_size) if torch.cuda.is_available() else DEFAULT_DEVICES
    return (devices, *_first_row_screens(cfg.data.train))


def _first_row_screens(path: str) -> tuple:
    """(screenshots, WIDTHxHEIGHT of the first) of the training file's first row; (None, 1080x2400) when there is
    none to read (a vision-language model is then planned with one phone screenshot a row)."""
    from pathlib import Path

    from ..config.files import jsonl_lines
    from ..image_io import load_image

    try:
        row = next(jsonl_lines(path)).value
        parts = [
            p
            for m in row["messages"]
            if isinstance(m.get("content"), list)
            for p in m["content"]
            if p.get("type") == "image_url"
        ]
        image = load_image(parts[0]["image_url"]["url"], Path(path).parent)
        return len(parts), f"{image.width}x{image.height}"
    except (OSError, ValueError, KeyError, IndexError, TypeError, StopIteration):
        return None, "1080x2400"


def _policy(cfg: RunConfig, devices):
    from ..plan.planner import policy_for

    return policy_for(cfg.precision.mode, cfg.lora, devices, cfg.model.dtype)


def _name(dtype) -> str:
    return "none" if dtype is None else str(dtype).removeprefix("torch.")


def _wrapped(cfg: RunConfig, model, config, policy, out: DryRun):
    """LoRA (or full fine-tuning) and the module rules on the meta model, as the engine applies them."""
    from ..models import LoadedModel, apply_lora, model_family
    from ..precision.module_rules import apply_module_rules, resolve_rules

    family = model_family(config)
    wrapped = apply_lora(LoadedModel(model, None, family, cfg.model.source), cfg.lora, policy.trainable_dtype)
    if cfg.lora.enabled:
        adapted = sorted(
            {n.rsplit(".lora_A", 1)[0].rsplit(".", 1)[-1] for n, _ in wrapped.named_parameters() if ".lora_A." in n}
        )
        layers = sum(1 for n, _ in wrapped.named_parameters() if n.endswith("lora_A.default.weight"))
        out.say(
            f"LoRA r={cfg.lora.r} alpha={cfg.lora.alpha}: {layers} linear layers ({', '.join(adapted)}); "
            f"{'the vision projector trained too' if cfg.lora.train_projector else 'the vision tower frozen'}"
        )
    rules = resolve_rules(cfg.precision, family, policy.mode)
    applied = apply_module_rules(wrapped, rules, "meta", cfg.sharding.strategy)
    for report in applied.reports:
        what = f"{report['storage'] or 'as is'} storage, {report['compute'] or 'as is'} compute"
        if report["module_count"] == 0 and not report.get("skipped"):
            out.problems.append(
                (
                    report["source"],
                    f"pattern {report['pattern']!r} matches no module of "
                    f"{cfg.model.source}: fix the pattern (`workbench train --dry-run` lists the names "
                    "in the census) or drop the rule",
                )
            )
        out.say(
            f"module rule {report['source']} {report['pattern']!r} ({what}): "
            f"{report.get('skipped') or str(report['module_count']) + ' module(s)'}"
        )
    return wrapped


def _census(cfg: RunConfig, policy, out: DryRun) -> None:
    """Parameters by group and storage dtype as the run holds them (the planner's census: a quantized base's layers
    at nf4 / int8)."""
    from ..plan.arch import planned_census

    census = planned_census(cfg.model.source, cfg.lora, policy, cfg.precision, cfg.quantization)
    rows: dict = {}
    for p in census.params:
        kind = p.quantized or _name(p.dtype)
        row = rows.setdefault((p.group, kind), [0, 0, 0])
        row[0] += p.numel
        row[1] += p.numel if p.trainable else 0
        row[2] += p.nbytes
    out.say(f"{'group':<12}{'stored as':<11}{'parameters':>16}{'trained':>14}{'GiB':>8}")
    for (group, kind), (n, trained, nbytes) in sorted(rows.items()):
        out.say(f"{group:<12}{kind:<11}{n:>16,}{trained:>14,}{nbytes / GiB:>8.2f}")
    total, trained = census.count(), census.count(trainable=True)
    out.say(f"total {total:,} parameters, {trained:,} trained ({100 * trained / total:.2f}%)")
    if census.quantized:
        q = census.quantized
        out.say(
            f"quantized base: {len(q)} linear layers in {q[0].quantized} ({sum(p.numel for p in q):,} parameters, "
            f"{sum(p.nbytes for p in q) / GiB:.2f} GiB with their constants); quantization.skip_modules "
            f"{list(cfg.quantization.skip_modules)} stay 16-bit. On the meta device they compute as plain layers "
            "of the same shapes (bitsandbytes' kernels run on the GPU)"
        )


def _sharding(cfg: RunConfig, wrapped, out: DryRun) -> None:
    from ..distributed.strategies import shard_units

    sh = cfg.sharding
    if sh.strategy == "fsdp":
        units = shard_units(wrapped)
        kinds = sorted({type(u).__name__ for u in units})
        out.say(
            f"sharding: FSDP2 {sh.fsdp_stage} over {sh.world_size} rank(s): fully_shard on {len(units)} units "
            f"({', '.join(kinds)}) and the root"
        )
    elif sh.strategy == "deepspeed":
        out.say(f"sharding: DeepSpeed ZeRO-{sh.deepspeed_stage} over {sh.world_size} rank(s), offload {sh.offload}")
    else:
        out.say(f"sharding: {sh.strategy} ({sh.world_size} process(es))")


def _image_load(source: str, config, image_size: str, images_per_row):
    from ..plan.arch import is_vision_language
    from ..plan.images import images_for

    if images_per_row is None:
        images_per_row = 1 if is_vision_language(config) else 0
    return images_for(source, config, image_size, images_per_row)


def _forward_backward(cfg: RunConfig, wrapped, config, image, out: DryRun) -> None:
    """One row of data.max_length tokens through the text decoder and the loss head, and backward, on the meta
    device; a shape error is a problem (the model's own message)."""
    from ..plan.arch import text_config

    text = text_config(config)
    seq = cfg.data.max_length
    image_tokens = image.tokens_per_row if image is not None else 0
    if image_tokens >= seq:
        out.problems.append(("data.max_length", f"{seq} tokens leave no text beside {image_tokens} image tokens"))
        return
    if not hasattr(config, "vision_config"):  # a text model's mask builder reads its positions' values: not on meta
        out.say(
            "forward + backward on the meta device: run for GLM-4.1V models (a text decoder's mask builder reads "
            "its positions' values, which meta tensors do not hold)"
        )
        return
    base = wrapped.get_base_model() if hasattr(wrapped, "get_base_model") else wrapped
    decoder = getattr(base.model, "language_model", base.model)
    meta = dict(device="meta")
    embeds = torch.empty(1, seq, text.hidden_size, dtype=base.get_input_embeddings().weight.dtype, **meta)
    positions = torch.empty(3, 1, seq, dtype=torch.long, **meta)  # GLM-4.1V's 3D rotary positions
    try:
        hidden = decoder(
            inputs_embeds=embeds.requires_grad_(), position_ids=positions, use_cache=False
        ).last_hidden_state
        logits = base.lm_head(hidden[:, -LABELLED_TOKENS:]).float()
        loss = torch.nn.functional.cross_entropy(
            logits.flatten(0, 1), torch.zeros(LABELLED_TOKENS, dtype=torch.long, **meta)
        )
        loss.backward()
    except (RuntimeError, ValueError, TypeError) as err:
        out.problems.append(
            ("model.source", f"shape error in {cfg.model.source}'s forward/backward: {str(err).splitlines()[0]}")
        )
        return
    trained = [p for p in wrapped.parameters() if p.requires_grad]
    reached = sum(1 for p in trained if p.grad is not None)
    shown = (
        f"{image.images_per_row} screenshot(s) of {image.width}x{image.height} = {image_tokens:,} image tokens "
        "(the vision tower's output stood in by its shape: its forward reads its grid's values)"
        if image
        else ""
    )
    out.say(
        f"forward + backward on the meta device: one row of {seq:,} tokens ({seq - image_tokens:,} text"
        f"{', ' + shown if shown else ''}), logits of {LABELLED_TOKENS} labelled positions "
        f"{list(logits.shape)}; gradients reached {reached} of {len(trained)} trained tensors"
    )
    if reached < len(trained):
        out.problems.append(("lora", f"{len(trained) - reached} trained tensors get no gradient from a row"))


def _memory(cfg: RunConfig, policy, devices, image, out: DryRun) -> None:
    from ..plan import predict_for_run

    plan = predict_for_run(
        cfg,
        policy,
        world_size=cfg.sharding.world_size,
        devices=devices,
        seq_len=cfg.data.max_length - (image.tokens_per_row if image else 0),
        images_per_row=image.images_per_row if image else 0,
        image_size=f"{image.width}x{image.height}" if image else "1080x2400",
    )
    parts = "/".join(
        f"{plan.gpu.get(k, 0) / GiB:.1f}"
        for k in ("weights", "gradients", "optimizer_state", "activations", "vision_activations")
    )
    verdict = "fits" if plan.fits else "does NOT fit"
    out.say(
        f"memory per GPU (planner, {plan.setting.label}): {plan.gpu_total / GiB:.1f} GiB of "
        f"{devices.bytes_per_device / GiB:.1f} ({verdict}; weights/grads/optimizer/activations/vision {parts} GiB), "
        f"host {plan.host_total / GiB:.1f} GiB"
    )
    if not plan.fits:
        out.problems.append(
            (
                "sharding",
                f"the planner says {plan.setting.label} does not fit {devices.count}x "
                f"{devices.name}: `workbench plan` lists what does",
            )
        )


def _launch(cfg: RunConfig, argv: list[str], out: DryRun) -> None:
    from ..distributed.launcher import torchrun_args

    given = " ".join(a for a in argv if a != "--dry-run")
    out.say(f"launch: workbench train {given}".rstrip())
    if cfg.sharding.distributed:
        out.say("  which starts: torchrun " + " ".join(torchrun_args(cfg.sharding, "workbench.training", "RUN_DIR")))
    out.say("  the same run from its settings alone: " + command_line(cfg, multiline=False))


def run_dry(cfg: RunConfig, recipe=None, argv: list[str] | None = None) -> int:
    """The CLI: print the dry run; 2 with every problem named (field: why) when one was found."""
    result = dry_run(cfg, recipe, argv)
    print("\n".join(result.lines))
    if result.problems:
        raise ConfigError(result.problems)
    print("dry run: ok (nothing was downloaded, loaded or trained)")
    return 0
