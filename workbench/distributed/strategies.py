"""Training strategies: how the model is wrapped, how gradients are synchronised and stepped, how
state is saved. The engine's loop is the same for all of them:

    for each micro-batch:  with strategy.accumulating(last): loss = ...; strategy.backward(loss)
    outcome = strategy.step(max_grad_norm)

Torch strategies (none, ddp, fsdp) step through ``workbench.precision.optimizer_step`` (unscale ->
clip -> step -> update), the one place that logic lives; FSDP only swaps in torch's sharded grad
scaler. DeepSpeed owns scaling, clipping and stepping itself; its figures are read back into the
same ``StepOutcome``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from pathlib import Path

import torch

from ..plan import measure_model_state
from ..precision import PrecisionPolicy, StepOutcome, optimizer_step
from ..runs.checkpoints import (
    OPTIMIZER_FILE,
    TRAINABLE_FILE,
    load_trainable_weights,
    optimizer_file,
    trainable_state,
)
from .context import DistContext

OptimizerFactory = Callable[[list], torch.optim.Optimizer]


class Strategy:
    """One process, no wrapper: the reference every other strategy must match."""

    name = "none"

    def __init__(self, cfg, ctx: DistContext, precision: PrecisionPolicy, device: torch.device):
        self.cfg, self.ctx, self.precision, self.device = cfg, ctx, precision, device

    # ---- set-up ---------------------------------------------------------------------------------
    # Rank 0 holds the whole model and optimizer state, so it can save a checkpoint after a failure
    # without its peers (which may be gone): the emergency checkpoint.
    can_save_alone = True
    # Whether a checkpoint this strategy wrote at one world size loads at another (its state is resharded).
    can_reshard = False

    def prepare(self, model: torch.nn.Module, make_optimizer: OptimizerFactory, fp32_modules=()) -> None:
        """Wrap ``model`` (the peft/transformers module, already on its device) and build the optimizer.
        ``fp32_modules``: (name, module) that precision rules keep computing in fp32."""
        self.module = model  # the unwrapped model: names, save_pretrained
        self.fp32_modules = list(fp32_modules)
        self.model = self.wrap(model)  # what forward is called on
        self.named_trainable = [(n, p) for n, p in self.model.named_parameters() if p.requires_grad]
        self.optimizer = make_optimizer([p for _, p in self.named_trainable])
        self.scaler = self.make_scaler()

    def wrap(self, model):
        return model

    def make_scaler(self):
        return self.precision.make_grad_scaler()

    # ---- the step -------------------------------------------------------------------------------
    def accumulating(self, last: bool):
        """Context for one micro-batch's forward and backward: skip gradient sync unless ``last``."""
        return contextlib.nullcontext()

    def backward(self, loss: torch.Tensor) -> None:
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def step(self, max_grad_norm: float | None) -> StepOutcome:
        return optimizer_step(self.optimizer, self.named_trainable, self.scaler, max_grad_norm)

    # ---- measuring and saving -------------------------------------------------------------------
    def measure_state(self) -> dict:
        """This rank's model-state bytes (local shards only; see workbench.plan.measure_model_state)."""
        return measure_model_state(self.model, self.optimizer)

    def save_state(self, directory: Path) -> None:
        """Trained weights + optimizer (+ scaler) state into a checkpoint ``directory``. Every rank calls
        it, except for an emergency save (``can_save_alone``), which only rank 0 makes."""
        if self.ctx.is_main:
            from safetensors.torch import save_file

            save_file(trainable_state(self.module), str(directory / TRAINABLE_FILE))
            torch.save(
                {
                    "optimizer": self.optimizer.state_dict(),
                    "scaler": self.scaler.state_dict() if self.scaler is not None else None,
                },
                directory / OPTIMIZER_FILE,
            )

    def load_state(self, directory: Path) -> None:
        load_trainable_weights(directory, self.module)
        blob = torch.load(optimizer_file(directory), weights_only=False)
        self.optimizer.load_state_dict(blob["optimizer"])
        if self.scaler is not None and blob["scaler"] is not None:
            self.scaler.load_state_dict(blob["scaler"])

    def save_pretrained(self, target: Path) -> None:
        """The adapter (or full model) in Hugging Face format, written by rank 0 (all ranks call)."""
        if self.ctx.is_main:
            self.module.save_pretrained(target)

    def close(self) -> None:
        pass


class DDPStrategy(Strategy):
    """Every rank holds the whole model; gradients are averaged once per window."""

    name = "ddp"

    def wrap(self, model):
        from torch.nn.parallel import DistributedDataParallel

        ids = [self.device.index] if self.device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids)

    def accumulating(self, last: bool):
        return contextlib.nullcontext() if last else self.model.no_sync()

    def measure_state(self) -> dict:
        return measure_model_state(self.module, self.optimizer)


class FSDPStrategy(Strategy):
    """FSDP2 ``fully_shard`` per decoder layer and at the root. zero2 keeps parameters gathered from
    forward to backward (``reshard_after_forward=False``); zero3 re-gathers them per layer."""

    name = "fsdp"
    can_save_alone = False  # every rank holds a shard
    can_reshard = True  # distributed checkpoint: each rank loads its shards of the saved tensors

    def wrap(self, model):
        from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, OffloadPolicy, fully_shard

        sh = self.cfg.sharding
        low = self.precision.autocast_dtype
        # Gather parameters in the compute dtype; reduce gradients in fp32 so shards stay exact master grads.
        mp = (
            MixedPrecisionPolicy(param_dtype=low, reduce_dtype=torch.float32)
            if low is not None
            else MixedPrecisionPolicy()
        )
        offload = CPUOffloadPolicy() if sh.offload == "optimizer+params" else OffloadPolicy()
        kw = dict(reshard_after_forward=sh.fsdp_stage == "zero3", mp_policy=mp, offload_policy=offload)
        # Modules a precision rule keeps in fp32 get units of their own that gather their own dtype:
        # under the layers' low-precision param_dtype their fp32 weights would be cast down.
        fp32_kw = dict(kw, mp_policy=MixedPrecisionPolicy(reduce_dtype=torch.float32))
        for _, module in self.fp32_modules:
            fully_shard(module, **fp32_kw)
        for layer in shard_units(model):
            fully_shard(layer, **kw)
        fully_shard(model, **kw)
        return model

    def make_scaler(self):
        if not self.precision.use_grad_scaler:
            return None
        from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

        # Agrees on found-inf across ranks, so every rank skips the same steps.
        return ShardedGradScaler(self.precision.device_type, **self.precision.scaler)

    @contextlib.contextmanager
    def accumulating(self, last: bool):
        self.model.set_requires_gradient_sync(last)
        yield

    def _state_dicts(self):
        from torch.distributed.checkpoint.state_dict import get_state_dict

        msd, osd = get_state_dict(self.model, self.optimizer)
        trained = {n for n, _ in self.named_trainable}
        # Frozen base weights come back from the model source; saving them would copy the base per checkpoint.
        return {"model": {k: v for k, v in msd.items() if k in trained}, "optim": osd}

    def save_state(self, directory: Path) -> None:
        import torch.distributed.checkpoint as dcp

        dcp.save(self._state_dicts(), checkpoint_id=str(directory / "dcp"))
        if self.ctx.is_main and self.scaler is not None:
            torch.save(self.scaler.state_dict(), directory / "scaler.pt")

    def load_state(self, directory: Path) -> None:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

        state = self._state_dicts()
        dcp.load(state, checkpoint_id=str(directory / "dcp"))
        set_state_dict(
            self.model,
            self.optimizer,
            model_state_dict=state["model"],
            optim_state_dict=state["optim"],
            options=StateDictOptions(strict=False),
        )
        if self.scaler is not None and (directory / "scaler.pt").is_file():
            self.scaler.load_state_dict(torch.load(directory / "scaler.pt", weights_only=False))

    def save_pretrained(self, target: Path) -> None:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        full = get_model_state_dict(self.model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        if self.ctx.is_main:
            self.module.save_pretrained(target, state_dict=full)


class DeepSpeedStrategy(Strategy):
    """DeepSpeed ZeRO 1-3 from the same RunConfig (``to_deepspeed_config``). DeepSpeed scales,
    clips and steps; ``step`` reads its verdict back into a StepOutcome."""

    name = "deepspeed"
    can_save_alone = False  # every rank holds a partition

    def prepare(self, model, make_optimizer, fp32_modules=()) -> None:
        import deepspeed

        from .ds_config import engine_deepspeed_config

        self.module = model
        self.named_trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        self.optimizer = make_optimizer(
            [p for _, p in self.named_trainable]
        )  # DeepSpeed wraps it; LR schedule acts on it
        self.ds_config = engine_deepspeed_config(self.cfg, self.precision, self.ctx.world_size)
        if self.device.type == "cpu":
            # DeepSpeed's CPU shared-memory collectives are a JIT-compiled C++ op (minutes of compiling, and a
            # compiler) that only speeds up large CPU reductions; plain gloo is what the other strategies use.
            deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
        self.model, self.ds_optimizer, _, _ = deepspeed.initialize(
            model=model, optimizer=self.optimizer, config=self.ds_config, dist_init_required=False
        )
        self.scaler = None

    def backward(self, loss):
        # Our divisor already normalises over the window; DeepSpeed must not divide by the accumulation steps again.
        self.model.backward(loss, scale_wrt_gas=False)

    def _loss_scale(self) -> float | None:
        return float(self.ds_optimizer.loss_scale) if self.model.fp16_enabled() else None

    def step(self, max_grad_norm):
        before = self._loss_scale()
        self.model.step()
        applied = self.model.was_step_applied()
        norm = self.model.get_global_grad_norm()
        norm = float(norm) if norm is not None and applied else math.inf
        # DeepSpeed reports that a step overflowed, not which parameters: attribution stays empty.
        return StepOutcome(grad_norm=norm, skipped=not applied, scale_before=before, scale_after=self._loss_scale())

    def measure_state(self) -> dict:
        state = measure_model_state(self.module, self.ds_optimizer.optimizer)
        state["gradients"] += _deepspeed_gradient_bytes(self.ds_optimizer)
        return state

    def save_state(self, directory: Path) -> None:
        self.model.save_checkpoint(str(directory), tag="deepspeed", save_latest=False, exclude_frozen_parameters=True)

    def load_state(self, directory: Path) -> None:
        path, _ = self.model.load_checkpoint(
            str(directory), tag="deepspeed", load_module_strict=False, load_lr_scheduler_states=False
        )
        if path is None:
            raise FileNotFoundError(f"{directory} holds no DeepSpeed checkpoint (tag 'deepspeed')")

    def save_pretrained(self, target: Path) -> None:
        import deepspeed

        params = [p for _, p in self.named_trainable] if self.cfg.lora.enabled else list(self.module.parameters())
        with deepspeed.zero.GatheredParameters(params, modifier_rank=None):
            if self.ctx.is_main:
                full = {n: t.detach().to("cpu", copy=True) for n, t in self.module.state_dict().items()}
                self.module.save_pretrained(target, state_dict=full)

    def close(self) -> None:
        self.model.destroy()


def shard_units(model) -> list:
    """The repeated blocks of a transformers model (its ``_no_split_modules``): FSDP's shard units."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    names = set(getattr(base, "_no_split_modules", None) or [])
    layers = [m for m in model.modules() if type(m).__name__ in names]
    if not layers:
        raise ValueError(f"{type(base).__name__} names no _no_split_modules: FSDP cannot find its decoder layers")
    return layers


def _deepspeed_gradient_bytes(opt) -> int:
    """Gradients DeepSpeed keeps outside ``param.grad``: stage 3's flat partition buffer, stage 2's
    reduced partition (contiguous_gradients), else stage 1/2's per-group gradient lists."""
    for name in ("grad_partitions_flat_buffer", "grads_in_partition"):  # the others are views into these
        flat = getattr(opt, name, None)
        if torch.is_tensor(flat):
            return flat.numel() * flat.element_size()
    for name in ("averaged_gradients", "all_grad_tensors"):  # reduced at the boundary | accumulated before it
        tensors = []
        for v in (getattr(opt, name, None) or {}).values():
            tensors += v if isinstance(v, (list, tuple)) else [v]
        total = sum(t.numel() * t.element_size() for t in tensors if torch.is_tensor(t))
        if total:
            return total
    return 0


STRATEGIES = {"none": Strategy, "ddp": DDPStrategy, "fsdp": FSDPStrategy, "deepspeed": DeepSpeedStrategy}


def make_strategy(cfg, ctx: DistContext, precision: PrecisionPolicy, device: torch.device) -> Strategy:
    return STRATEGIES[cfg.sharding.strategy](cfg, ctx, precision, device)
