"""A recipe's memory plan: its own setting on its target devices, next to the planner's cheapest fit for the same
model and batch shape (``workbench plan --recipe NAME``; a test holds each recipe to the planner's choice)."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import ConfigError
from ..config.recipes import Recipe
from .arch import load_model_config
from .images import images_for
from .planner import DEFAULT_DEVICES, DeviceSet, Matrix, Plan, Setting, plan_matrix, policy_for, predict


@dataclass(frozen=True)
class RecipePlan:
    recipe: Recipe
    own: Plan  # the recipe's own setting
    matrix: Matrix  # every setting for the same model, batch shape and screenshots

    @property
    def cheapest(self) -> Plan | None:
        return self.matrix.cheapest(self.own.setting.lora)

    @property
    def agrees(self) -> bool:
        """The recipe's setting is the planner's cheapest fit."""
        return self.cheapest is not None and self.cheapest.setting == self.own.setting


def recipe_devices(recipe: Recipe) -> DeviceSet:
    devices = DeviceSet.parse(recipe.plan.devices, recipe.plan.host_ram)
    same_as_default = devices.bytes_per_device == DEFAULT_DEVICES.bytes_per_device  # RTX 4090s, one or more
    return DeviceSet(**{**devices.__dict__, "name": DEFAULT_DEVICES.name}) if same_as_default else devices


def plan_recipe(recipe: Recipe, devices: DeviceSet | None = None) -> RecipePlan:
    """The plan of ``recipe`` on its target devices (or ``devices``). The text tokens per row are data.max_length
    less the screenshots' tokens (data.max_length counts both)."""
    cfg = recipe.run_config()
    devices = devices or recipe_devices(recipe)
    p = recipe.plan
    source = cfg.model.source
    text = cfg.data.max_length
    if p.images_per_row:
        text -= images_for(source, load_model_config(source), p.image_size, p.images_per_row).tokens_per_row
        if text < 2:
            raise ConfigError(
                [
                    (
                        "config.data.max_length",
                        f"{cfg.data.max_length} leaves no text tokens beside "
                        f"{p.images_per_row} screenshot(s) of {p.image_size}: raise it",
                    )
                ],
                f"recipe {recipe.name}",
            )
    sh = cfg.sharding
    precision = policy_for(cfg.precision.mode, cfg.lora, devices, cfg.model.dtype).mode  # auto, resolved for them
    setting = Setting(
        precision=precision,
        strategy=sh.strategy,
        stage=sh.stage,
        offload=sh.offload,
        lora=cfg.lora.enabled,
        world_size=sh.world_size,
        micro_batch=cfg.schedule.micro_batch_size,
        seq_len=text,
        gradient_checkpointing=cfg.model.gradient_checkpointing,
        images_per_row=p.images_per_row,
        image_size=p.image_size,
        quantized_base=cfg.quantization.base,
    )
    own = predict(
        source,
        setting,
        devices,
        lora=cfg.lora,
        precision=cfg.precision,
        attn_implementation=cfg.model.attn_implementation,
        quantization=cfg.quantization,
    )
    # the same frozen base throughout: a QLoRA recipe is held to the cheapest fit over its quantized base
    matrix = plan_matrix(
        source,
        devices,
        setting.micro_batch,
        text,
        lora=cfg.lora,
        lora_choices=(cfg.lora.enabled,),
        images_per_row=p.images_per_row,
        image_size=p.image_size,
        quantized_base=cfg.quantization.base,
    )
    return RecipePlan(recipe, own, matrix)


def format_recipe_plan(rp: RecipePlan) -> str:
    """The recipe's own line and its verdict against the cheapest fit."""
    own, best, gib = rp.own, rp.cheapest, 1024**3
    lines = [
        f"recipe {rp.recipe.name}: {own.setting.label}  {'fits' if own.fits else 'does NOT fit'}: GPU "
        f"{own.gpu_total / gib:.1f} GiB (headroom {own.gpu_headroom / gib:.1f}), host {own.host_total / gib:.1f} GiB"
        f" on {own.devices.count}x {own.devices.name}"
    ]
    if best is None:
        lines.append("the planner finds no fitting setting for these inputs")
    elif rp.agrees:
        lines.append("= the planner's cheapest fit")
    elif not rp.recipe.requirements.gpus and rp.recipe.measured_on is not None:
        # a CPU recipe keeps the precision its figures were measured in (a GPU one is held to the cheapest fit)
        m = rp.recipe.measured_on
        lines.append(
            f"the planner's cheapest fit on these GPUs would be {best.setting.label} (GPU "
            f"{best.gpu_total / gib:.1f} GiB); the recipe keeps {m.device}/{m.precision}, where its figures "
            "were measured"
        )
    else:
        lines.append(
            f"the planner's cheapest fit is now {best.setting.label} (GPU {best.gpu_total / gib:.1f} GiB): "
            f"update {rp.recipe.path} to it"
        )
    return "\n".join(lines)
