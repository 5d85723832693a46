"""A DeepSpeed JSON read into RunConfig settings: one of the inputs a run config is assembled from
(``config.assemble``: ``workbench train --deepspeed``, the config panel, ``workbench deepspeed import``).

``import_deepspeed_config(path)`` reads an existing file into RunConfig settings and warns, naming the key, about
what DeepSpeed will really do with keys it does not know or that contradict each other. Writing the DeepSpeed config
a RunConfig means is ``distributed.ds_config``'s.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from .loading import ConfigError, apply_overrides, config_from_dict, read_mapping_file
from .optimizer import ADAMW_BETAS, ADAMW_EPS, OPTIMIZER


class DeepSpeedConfigWarning(UserWarning):
    pass


# DeepSpeed 0.19.8 keys, per section, that this importer recognises (known but not mapped ones become notes).
TOP_LEVEL = {
    "train_batch_size",
    "train_micro_batch_size_per_gpu",
    "gradient_accumulation_steps",
    "steps_per_print",
    "optimizer",
    "scheduler",
    "fp16",
    "bf16",
    "amp",
    "zero_optimization",
    "gradient_clipping",
    "prescale_gradients",
    "gradient_predivide_factor",
    "activation_checkpointing",
    "wall_clock_breakdown",
    "zero_allow_untested_optimizer",
    "communication_data_type",
    "flops_profiler",
    "tensorboard",
    "wandb",
    "csv_monitor",
    "comms_logger",
    "memory_breakdown",
    "dump_state",
    "data_types",
    "checkpoint",
    "aio",
    "elasticity",
    "seed",
    "sparse_gradients",
    "zero_force_ds_cpu_optimizer",
    "managed_gradient_accumulation",
    "torch_autocast",
}
FP16_KEYS = {
    "enabled",
    "auto_cast",
    "loss_scale",
    "initial_scale_power",
    "loss_scale_window",
    "hysteresis",
    "consecutive_hysteresis",
    "min_loss_scale",
    "fp16_master_weights_and_grads",
}
FP16_DYNAMIC_KEYS = (
    "initial_scale_power",
    "loss_scale_window",
    "hysteresis",
    "consecutive_hysteresis",
    "min_loss_scale",
)
BF16_KEYS = {"enabled", "immediate_grad_update", "check_grad_overflow", "bf16_master_weights_and_grads"}
ZERO_KEYS = {
    "stage",
    "offload_optimizer",
    "offload_param",
    "allgather_partitions",
    "allgather_bucket_size",
    "overlap_comm",
    "reduce_scatter",
    "reduce_bucket_size",
    "contiguous_gradients",
    "sub_group_size",
    "stage3_max_live_parameters",
    "stage3_max_reuse_distance",
    "stage3_prefetch_bucket_size",
    "stage3_param_persistence_threshold",
    "stage3_gather_16bit_weights_on_model_save",
    "round_robin_gradients",
    "zero_hpz_partition_size",
    "zero_quantized_weights",
    "zero_quantized_gradients",
    "ignore_unused_parameters",
    "elastic_checkpoint",
    "cpu_offload",
    "load_from_fp32_weights",
    "use_multi_rank_bucket_allreduce",
    "mics_shard_size",
    "stage3_model_persistence_threshold",
    "memory_efficient_linear",
    "log_trace_cache_warnings",
}
# Adam/AdamW constructor arguments DeepSpeed passes optimizer.params to (torch, FusedAdam, DeepSpeedCPUAdam).
ADAM_PARAMS = {
    "lr",
    "betas",
    "eps",
    "weight_decay",
    "amsgrad",
    "bias_correction",
    "adam_w_mode",
    "torch_adam",
    "fp32_optimizer_states",
    "maximize",
    "foreach",
    "capturable",
    "differentiable",
    "fused",
    "set_grad_none",
}


@dataclass
class DeepSpeedImport:
    overrides: dict  # dotted RunConfig keys -> values
    warnings: list = field(default_factory=list)  # (key, message): DeepSpeed will not do what the file seems to say
    notes: list = field(
        default_factory=list
    )  # (key, message): settings RunConfig does not carry (DeepSpeed defaults apply)

    def config(self, base: dict | None = None):
        """A validated RunConfig: ``base`` (a config dict) with these settings applied."""
        return config_from_dict(apply_overrides(base or {}, self.overrides))


def import_deepspeed_file(
    path: str | Path, world_size: int | None = None, field: str = "--deepspeed"
) -> DeepSpeedImport:
    """``import_deepspeed_config`` of a file, for the CLI's ``--deepspeed`` and the config panel: every way the
    file is unusable (unreadable, not JSON, not an object, a value of the wrong shape) is one ConfigError
    naming ``field`` and the file. The result's ``warnings`` and ``notes`` are for the caller to show."""
    ds = read_mapping_file(path, field, "a DeepSpeed configuration object")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeepSpeedConfigWarning)  # returned in .warnings instead
            return import_deepspeed_config(ds, world_size)
    except (TypeError, ValueError, AttributeError, KeyError, ZeroDivisionError) as err:
        raise ConfigError(
            [(field, f"{path}: a value has the wrong type or shape for DeepSpeed ({type(err).__name__}: {err})")]
        ) from None


def _warn(out: DeepSpeedImport, key: str, message: str) -> None:
    out.warnings.append((key, message))
    warnings.warn(f"{key}: {message}", DeepSpeedConfigWarning, stacklevel=3)


def import_deepspeed_config(source: str | Path | dict, world_size: int | None = None) -> DeepSpeedImport:
    """RunConfig settings for a DeepSpeed config file (or dict). ``world_size`` (GPUs in all) turns
    ``train_batch_size`` into accumulation steps; by default it is taken from the file or 1."""
    ds = json.loads(Path(source).read_text(encoding="utf-8")) if not isinstance(source, dict) else dict(source)
    out = DeepSpeedImport(overrides={})
    for key in ds:
        if key not in TOP_LEVEL:
            _warn(out, key, "not a DeepSpeed setting: DeepSpeed ignores it; dropped here")
    world_size = _import_batch(ds, out, world_size)
    _import_optimizer(ds.get("optimizer") or {}, out)
    _import_precision(ds, out)
    _import_zero(ds.get("zero_optimization") or {}, out, world_size)
    _import_unmapped(ds, out)
    return out


def _import_batch(ds: dict, out: DeepSpeedImport, world_size: int | None) -> int:
    """Micro batch and accumulation steps (from train_batch_size over the world size); returns the world size."""
    o = out.overrides
    micro = ds.get("train_micro_batch_size_per_gpu")
    gas = ds.get("gradient_accumulation_steps")
    total = ds.get("train_batch_size")
    if micro:
        o["schedule.micro_batch_size"] = int(micro)
    if world_size is None:
        world_size = total // (micro * gas) if total and micro and gas and total % (micro * gas) == 0 else 1
    if gas is None and total and micro:
        if total % (micro * world_size):
            _warn(
                out,
                "train_batch_size",
                f"{total} is not a multiple of train_micro_batch_size_per_gpu x GPUs = "
                f"{micro} x {world_size}: DeepSpeed refuses to start",
            )
        else:
            gas = total // (micro * world_size)
            out.notes.append(
                (
                    "train_batch_size",
                    f"{total} = {micro} per GPU x {world_size} GPU(s) x {gas} "
                    f"accumulation steps (pass world_size for another GPU count)",
                )
            )
    if gas:
        o["schedule.grad_accum_steps"] = int(gas)
    if world_size > 1:
        o["sharding.nproc_per_node"] = world_size
    return world_size


def _import_optimizer(opt: dict, out: DeepSpeedImport) -> None:
    """lr and weight_decay carry over; anything AdamW would not do is a warning or a note."""
    if not opt:
        return
    o = out.overrides
    kind = str(opt.get("type", ""))
    if kind.lower() not in ("adamw", "adam"):
        _warn(
            out,
            "optimizer.type",
            f"{kind!r}: the workbench trains with {OPTIMIZER}; only lr and weight_decay carry over",
        )
    params = opt.get("params") or {}
    for key in params:
        if key not in ADAM_PARAMS:
            _warn(
                out,
                f"optimizer.params.{key}",
                "not an argument of any optimizer DeepSpeed builds for "
                f"{kind or 'this type'}: DeepSpeed passes optimizer.params to the optimizer's constructor, so "
                f"DeepSpeed will fail at start with an unexpected-keyword TypeError. Adam's moments stay fp32 "
                f"(the real switch is DeepSpeedCPUAdam's fp32_optimizer_states); the key was dropped here",
            )
    if "lr" in params:
        o["schedule.learning_rate"] = float(params["lr"])
    if "weight_decay" in params:
        o["schedule.weight_decay"] = float(params["weight_decay"])
    if kind.lower() == "adam" and not params.get("adam_w_mode", True):
        _warn(out, "optimizer.params.adam_w_mode", "false selects L2-regularised Adam; the workbench uses AdamW")
    for key in ("betas", "eps"):
        if key in params and list(params[key] if key == "betas" else [params[key]]) != list(
            ADAMW_BETAS if key == "betas" else [ADAMW_EPS]
        ):
            out.notes.append(
                (
                    f"optimizer.params.{key}",
                    f"{params[key]} differs from the AdamW default the workbench uses; not carried over",
                )
            )


def _import_precision(ds: dict, out: DeepSpeedImport) -> None:
    """fp16 / bf16 / fp32, the loss scaler's settings and gradient clipping."""
    o = out.overrides
    fp16, bf16 = ds.get("fp16") or {}, ds.get("bf16") or {}
    for section, known, name in ((fp16, FP16_KEYS, "fp16"), (bf16, BF16_KEYS, "bf16")):
        for key in section:
            if key not in known:
                _warn(out, f"{name}.{key}", f"not a DeepSpeed {name} setting: ignored by DeepSpeed, dropped here")
    if fp16.get("enabled") and bf16.get("enabled"):
        _warn(out, "fp16.enabled", "fp16 and bf16 are both enabled: DeepSpeed refuses to start; imported as fp16")
    if fp16.get("enabled"):
        _import_fp16(fp16, out)
    elif bf16.get("enabled"):
        o["precision.mode"] = "bf16"
    else:
        o["precision.mode"] = "fp32"

    if "gradient_clipping" in ds:
        clip = float(ds["gradient_clipping"])
        o["precision.max_grad_norm"] = clip if clip > 0 else None


def _import_fp16(fp16: dict, out: DeepSpeedImport) -> None:
    """fp16's loss scaling as DeepSpeed really runs it: a non-zero loss_scale is a fixed scale."""
    o = out.overrides
    o["precision.mode"] = "fp16"
    fixed = fp16.get("loss_scale", 0)
    dynamic = [k for k in FP16_DYNAMIC_KEYS if k in fp16]
    if fixed:
        if dynamic:
            settings = ", ".join(f"{k}={fp16[k]}" for k in dynamic)
            _warn(
                out,
                "fp16.loss_scale",
                f"{fixed} is non-zero, which makes DeepSpeed use a fixed (static) loss "
                f"scale of {fixed} and turns dynamic loss scaling off, so {settings} (dynamic-scaling settings) have "
                f"no effect: every step is scaled by {fixed}, the scale never grows nor backs off, and an "
                f"overflowing step is skipped at the same scale. For dynamic scaling from 2^"
                f"{fp16.get('initial_scale_power', 16)} set loss_scale to 0. Imported as what DeepSpeed does: "
                f"init_scale={fixed} and a scale that never grows",
            )
        o["precision.init_scale"] = float(fixed)
        o["precision.growth_interval"] = 10**9  # never grows; the workbench's scaler still backs off on overflow
    else:
        o["precision.init_scale"] = float(2 ** fp16.get("initial_scale_power", 16))
        o["precision.growth_interval"] = int(fp16.get("loss_scale_window", 1000))
        if fp16.get("hysteresis", 2) != 1:
            out.notes.append(
                (
                    "fp16.hysteresis",
                    f"{fp16.get('hysteresis', 2)}: DeepSpeed backs off only after "
                    "that many overflows in a row; the workbench's exported config uses 1 (torch's behaviour)",
                )
            )


def _import_zero(zero: dict, out: DeepSpeedImport, world_size: int) -> None:
    """ZeRO stage and offload onto sharding.*; its tuning knobs become notes."""
    o = out.overrides
    for key in zero:
        if key not in ZERO_KEYS:
            _warn(out, f"zero_optimization.{key}", "not a ZeRO setting: ignored by DeepSpeed, dropped here")
    stage = int(zero.get("stage", 0))
    if stage:
        o["sharding.strategy"] = "deepspeed"
        o["sharding.deepspeed_stage"] = stage
    elif world_size > 1:
        o["sharding.strategy"] = "ddp"
    off_opt = (zero.get("offload_optimizer") or {}).get("device", "none")
    off_par = (zero.get("offload_param") or {}).get("device", "none")
    for key, dev in (("offload_optimizer", off_opt), ("offload_param", off_par)):
        if dev == "nvme":
            _warn(
                out,
                f"zero_optimization.{key}.device",
                "nvme offload is not supported by the workbench; imported as cpu",
            )
    if off_par != "none":
        o["sharding.offload"] = "optimizer+params"
        if stage != 3:
            _warn(
                out,
                "zero_optimization.offload_param",
                f"DeepSpeed offloads parameters only under ZeRO-3, not stage {stage}: it ignores offload_param",
            )
    elif off_opt != "none":
        o["sharding.offload"] = "optimizer"
    for key in sorted(set(zero) & (ZERO_KEYS - {"stage", "offload_optimizer", "offload_param"})):
        out.notes.append(
            (
                f"zero_optimization.{key}",
                "tuning knob RunConfig does not carry: the exported config uses DeepSpeed's default",
            )
        )


def _import_unmapped(ds: dict, out: DeepSpeedImport) -> None:
    """Notes for the real DeepSpeed settings RunConfig does not carry."""
    for key in ("steps_per_print", "activation_checkpointing", "wall_clock_breakdown", "scheduler"):
        if key in ds:
            out.notes.append(
                (
                    key,
                    {
                        "activation_checkpointing": "DeepSpeed's activation checkpointing needs models that "
                        "call deepspeed.checkpointing; the workbench's switch is model.gradient_checkpointing",
                        "scheduler": "the workbench's schedule (linear warmup, cosine decay) applies",
                    }.get(key, "logging setting, not carried over"),
                )
            )
