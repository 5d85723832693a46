"""The one typed configuration of a run.

Every consumer (CLI flags, Python API, widgets, the training worker) reads these models; field
descriptions double as CLI help. The user states intent (``precision.mode = "auto"``); the engine
derives the mechanics (autocast dtype, whether a GradScaler exists) in ``workbench.precision``.
"""

from __future__ import annotations

import math
import re
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal, Union, get_args

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_serializer, field_validator, model_validator

from .names import EPISODE_REWARDS, EVAL_TASKS, REWARDS
from .packages import missing_package
from .samples import resolve_sample_path

PrecisionMode = Literal["auto", "fp32", "fp16", "bf16", "pure-bf16"]
StorageDtype = Literal["auto", "float32", "bfloat16", "float16"]


@dataclass(frozen=True)
class CliFlag:
    """Field metadata (``Annotated[type, CliFlag(...)]``) for a command-line flag that differs from the
    generated ``--path VALUE``: a repeatable flag for a list or mapping, under a singular name
    (``adapters`` -> ``--adapter NAME=PATH``, each occurrence one raw string item)."""

    name: str | None = None
    metavar: str = "VALUE"
    repeat: bool = False


class Section(BaseModel):
    """Frozen, strict about unknown keys: a typo is an error naming the key, not a silent default."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)
    # what a top-level configuration is called in error messages, and the command that lists its keys
    config_title: ClassVar[str] = "configuration"
    help_command: ClassVar[str] = "--help"
    # {old dotted key: new one} of the keys renamed: an old key is refused naming the new one (config.loading), and a
    # configuration this package saved before the rename (a run's config.json) is read under the new names
    renamed_keys: ClassVar[dict[str, str]] = {}

    def problems(self, path: str) -> list[tuple[str, str]]:
        """Cross-field problems of this section as (field path, message); empty when fine."""
        return []


class ModelSection(Section):
    source: str = Field(
        "smollm2-135m-instruct",
        description="Model to fine-tune: a built-in name (see `workbench models`), a local Hugging Face "
        "directory, or a hub id such as zai-org/AutoGLM-Phone-9B.",
    )
    dtype: StorageDtype = Field(
        "auto",
        description="Storage dtype of the base weights. auto: the autocast dtype for a LoRA-frozen base "
        "under fp16/bf16, bfloat16 for pure-bf16, else float32 (full fine-tuning keeps fp32 master weights).",
    )
    gradient_checkpointing: bool = Field(False, description="Recompute transformer-block activations in backward.")
    attn_implementation: Literal["sdpa", "eager"] = Field("sdpa", description="Attention kernel.")
    trust_remote_code: bool = Field(False, description="Allow model code from the hub (only for sources that need it).")


class DataSection(Section):
    train: str = Field("data_samples/identity/train.jsonl", description="Training JSONL file.")
    eval: str | None = Field(
        "data_samples/identity/heldout.jsonl", description="Held-out JSONL file for eval loss; null to skip eval."
    )
    format: Literal["auto", "chat", "instruction"] = Field(
        "auto",
        description="Row format: chat ({messages}) or instruction ({instruction, input, output}); auto detects per row.",
    )
    max_length: int = Field(
        256, ge=8, le=1_048_576, description="Tokens per example; longer examples are truncated and counted."
    )
    skip_bad_rows: bool = Field(
        False, description="Skip and count malformed rows instead of stopping at the first one."
    )
    system_prompt: str | None = Field(None, description="System message prepended to rows that have none.")
    ui_tree_layouts: Literal["as_recorded", "shuffled"] = Field(
        "as_recorded",
        description="Training rows of a phone agent that reads the screen as text (meta.observation "
        "ui_tree). shuffled: each row's latest screen has its same-size elements in a random order (seeded by "
        "schedule.seed and the row; the reply's tap moves with its element), so the model must read where a name is, "
        "not remember where it sat in training: the simulated phone draws every name at one point always "
        "(python -m workbench.bench.agent grounding measures which a model does).",
    )

    @field_validator("train", "eval")
    @classmethod
    def _packaged_samples(cls, value: str | None) -> str | None:
        return value if value is None else resolve_sample_path(value)

    def problems(self, path: str) -> list[tuple[str, str]]:
        out = []
        for name in ("train", "eval"):
            value = getattr(self, name)
            if value is None or Path(value).is_file():
                continue
            problem = f"{value!r} is a directory" if Path(value).is_dir() else f"file not found: {value!r}"
            out.append((f"{path}.{name}", f"{problem} (give an existing JSONL file)"))
        return out


class ModuleRule(Section):
    """One per-module precision rule: modules whose qualified name matches ``pattern`` get this storage
    and compute dtype (the first matching rule wins; a matched module's children follow it)."""

    pattern: str = Field(
        ...,
        description="Python regex searched in module names (e.g. lm_head, \\.visual$, "
        "layers\\.\\d+\\.mlp\\.down_proj$); peft's base_model.model. prefix may be left out.",
    )
    storage: StorageDtype = Field(
        "auto",
        description="Dtype of the matched modules' weights, trained ones included (the "
        "rules apply before the optimizer exists). auto: float32 when compute=float32, else unchanged.",
    )
    compute: Literal["autocast", "float32"] = Field(
        "autocast",
        description="float32 runs the matched modules with autocast disabled and fp32 inputs; autocast "
        "follows the precision mode.",
    )

    def problems(self, path: str) -> list[tuple[str, str]]:
        import re

        try:
            re.compile(self.pattern)
        except re.error as err:
            return [(f"{path}.pattern", f"not a valid regular expression: {err}")]
        if self.storage == "auto" and self.compute == "autocast":
            return [(path, "does nothing: set storage or compute (e.g. compute: float32)")]
        if self.compute == "float32" and self.storage not in ("auto", "float32"):
            return [
                (
                    f"{path}.storage",
                    f"{self.storage} weights cannot compute in fp32 (inputs are cast to fp32): use auto or float32",
                )
            ]
        return []


class PrecisionSection(Section):
    mode: PrecisionMode = Field(
        "auto",
        description="fp32; fp16 (autocast + GradScaler, fp32 master weights); bf16 (autocast, no scaler); "
        "pure-bf16 (bf16 weights and compute); auto: on a GPU bf16 where it supports it, else fp16 (with a warning: "
        "GLM models are known to overflow in fp16); on a CPU bf16 with native bf16 (AVX512-BF16 or AMX), else fp32 "
        "(`workbench env` says which).",
    )
    init_scale: float = Field(65536.0, gt=0, description="fp16: initial loss scale.")
    growth_factor: float = Field(
        2.0,
        gt=1.0,
        description="fp16: scale multiplier after growth_interval clean steps; must be "
        "> 1 (torch's GradScaler refuses 1.0: to hold the scale, raise growth_interval instead).",
    )
    backoff_factor: float = Field(0.5, gt=0, lt=1, description="fp16: scale multiplier on an overflow step.")
    growth_interval: int = Field(2000, ge=1, description="fp16: clean steps before the scale grows.")
    max_grad_norm: float | None = Field(
        1.0, gt=0, description="Clip the (unscaled) gradient norm to this; null = no clipping."
    )
    module_rules: list[ModuleRule] = Field(
        default_factory=list,
        description="Per-module precision rules [{pattern, storage, compute}], applied in order "
        "before the family defaults, e.g. [{pattern: lm_head, compute: float32}].",
    )
    family_defaults: bool = Field(
        True,
        description="Add the model family's default rules after module_rules (GLM-4V "
        "under fp16: vision tower in fp32).",
    )

    def problems(self, path: str) -> list[tuple[str, str]]:
        out = []
        for i, rule in enumerate(self.module_rules):
            out += rule.problems(f"{path}.module_rules[{i}]")
        return out


SFT_LORA_DROPOUT = 0.05


class LoraSection(Section):
    enabled: bool = Field(True, description="Train LoRA adapters (peft) instead of all weights.")
    r: int = Field(16, ge=1, le=4096, description="LoRA rank.")
    alpha: float = Field(32.0, gt=0, description="LoRA alpha (scaling = alpha / r).")
    dropout: float | None = Field(
        None,
        ge=0,
        lt=1,
        description=f"Dropout on the LoRA input. null: derived from training.method, "
        f"{SFT_LORA_DROPOUT} for sft, 0 for grpo (whose importance ratio compares the trainer's log-probabilities with "
        "the sampler's, which samples without dropout) and dpo (whose reference is computed without it); "
        "--print-config says which it took.",
    )
    target_modules: Literal["all-linear"] | list[str] = Field(
        "all-linear", description="Module names to adapt, e.g. [q_proj, v_proj], or all-linear."
    )
    bias: Literal["none", "all", "lora_only"] = Field("none", description="Which biases are trained.")
    layers: int | None = Field(
        None,
        ge=1,
        description="Adapt only the last N decoder layers (null: every layer). Nothing below them needs a "
        "gradient, so backward stops there and keeps no activations for them: a text-agent row of SmolLM2-135M (30 "
        "layers) trains in about half the time with 8 (docs/results/2026-12-03-text-agent-reading.md).",
    )
    train_projector: bool = Field(
        False,
        description="Vision-language models (GLM-4.1V): also put LoRA adapters on the vision projector "
        "(visual.merger, the MLP that maps image features into the language model). The vision encoder stays frozen; "
        "by default LoRA adapts the language model only (full fine-tuning, lora.enabled=false, trains every weight).",
    )

    @field_validator("dropout")
    @classmethod
    def _sft_dropout_unless_given(cls, value: float | None) -> float:
        # A RunConfig derives null from training.method before this runs; a lone section is supervised.
        return SFT_LORA_DROPOUT if value is None else value

    def problems(self, path: str) -> list[tuple[str, str]]:
        out = []
        if isinstance(self.target_modules, list) and not self.target_modules:
            out.append((f"{path}.target_modules", "empty list: name at least one module, or use all-linear"))
        if self.layers is not None and self.train_projector:
            out.append(
                (
                    f"{path}.layers",
                    f"{self.layers} with train_projector: the vision projector is no decoder layer; "
                    "set layers null to train it, or train_projector false",
                )
            )
        return out


QuantizedBase = Literal["none", "nf4", "int8"]
QUANTIZED_BASES: tuple = get_args(QuantizedBase)
# (strategy, quantization.base) that cannot train together, and why: the run is refused before it starts. Checked with
# bitsandbytes 0.50.2 and 2 gloo ranks (tests/distributed/test_quantized_base.py): FSDP2 with nf4 and DeepSpeed ZeRO
# with nf4 or int8 train to the one-process losses.
QUANTIZED_BASE_UNSHARDABLE = {
    ("fsdp", "int8"): "replaces each parameter by a plain sharded one, and bitsandbytes' int8 layer reads its weight's "
    "row scales from its own Int8Params type (AttributeError: 'Parameter' object has no attribute 'CB')",
}


class QuantizationSection(Section):
    qat: Literal["int8-weight", "int8-dynamic", "int4-weight"] | None = Field(
        None,
        description="Quantization-aware training (torchao): fake-quantize the decoder's linear layers while "
        "training (under LoRA: the frozen base layers), convert them to real int8/int4 weights at the end; "
        "int8-dynamic also quantizes activations. null: off.",
    )
    base: QuantizedBase = Field(
        "none",
        description="Keep the frozen base's linear layers quantized while LoRA trains over them "
        "(bitsandbytes; QLoRA): nf4 = 4-bit NormalFloat in blocks of 64 (about 0.52 bytes per weight with "
        "double_quant), int8 = LLM.int8 (1 byte per weight + an fp32 scale per row, outliers above 6.0 in 16-bit). "
        "They compute in the precision policy's dtype, dequantized one layer at a time. The run's model is rebuilt "
        "the same way to serve, chat with and evaluate it; `workbench export` merges the adapter into the dequantized "
        "base. none: the base in model.dtype. AutoGLM-Phone-9B with a screenshot fits one 24 GB GPU with nf4, not "
        "with int8, whose layers keep their 16-bit inputs for backward (`workbench plan --quantization-base all "
        "--images-per-row 1 --devices 1x24564MiB --lora --strategy none`).",
    )
    double_quant: bool = Field(
        True,
        description="nf4: quantize the per-block scales too (8-bit, QLoRA's double quantization): about "
        "0.4 bits less per weight. int8 ignores it (one fp32 scale per row).",
    )
    skip_modules: list[str] = Field(
        default_factory=lambda: ["lm_head", "visual"],
        description="Linear layers left unquantized, in the base's "
        "dtype: a module is skipped when one of these names is a dotted part of its name (visual = GLM-4.1V's vision "
        "tower with its projector visual.merger; visual.merger alone keeps just the projector). The output layer "
        "(lm_head) is where quantization error reaches the logits directly: QLoRA and transformers leave it out too.",
    )

    def problems(self, path: str) -> list[tuple[str, str]]:
        bad = [name for name in self.skip_modules if not re.fullmatch(r"[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*", name)]
        return [
            (
                f"{path}.skip_modules",
                f"{name!r} is not a module name: give dotted names such as lm_head or visual.merger (no patterns)",
            )
            for name in bad
        ]


LossHead = Literal["full", "labels", "chunked"]
LOSS_HEADS: tuple = get_args(LossHead)


class MemorySection(Section):
    """How the training forward spends activation memory (the planner models each choice)."""

    loss_head: LossHead = Field(
        "chunked",
        description="Where the output projection and the fp32 cross-entropy run. full: at every position "
        "(full-vocabulary logits of the whole sequence kept for backward); labels: only at positions with a label "
        "(a screenshot's and the prompt's positions cost nothing); chunked (default): at labelled positions in chunks "
        "of loss_chunk_tokens whose logits are recomputed in backward, so the loss keeps only its input hidden states. "
        "All three give the same loss and gradients (summed in another order: equal to fp32 rounding).",
    )
    loss_chunk_tokens: int = Field(
        512,
        ge=1,
        description="chunked: labelled positions per chunk. Backward holds one chunk's logits "
        "(chunk x vocabulary in fp32); smaller chunks save memory at the cost of more, smaller matmuls.",
    )


class ScheduleSection(Section):
    max_steps: int = Field(100, ge=1, description="Optimizer steps (each = grad_accum_steps micro-batches).")
    micro_batch_size: int = Field(4, ge=1, description="Examples per forward/backward.")
    grad_accum_steps: int = Field(1, ge=1, description="Micro-batches accumulated per optimizer step.")
    learning_rate: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="Peak learning rate (AdamW). null: derived from the model when the run starts "
        "(run_started records it): LoRA 1e-3 below 1 B parameters, 2e-4 from 1 B; full fine-tuning 5e-5 below 1 B, "
        "1e-5 from 1 B. One rate does not fit every size: on the phone-actions recipe SmolLM2-135M's LoRA at 2e-4, "
        "a usual rate for 7-9 B models, still answers mostly unparsable actions after 60 steps; at 1e-3 it learns them.",
    )
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay.")
    warmup_steps: int | None = Field(
        None, ge=0, description="Linear warmup steps before cosine decay; null = 5% of max_steps."
    )
    min_lr_ratio: float = Field(0.1, ge=0, le=1, description="Cosine floor as a fraction of learning_rate.")
    eval_loss_every: int = Field(
        50,
        ge=0,
        description="The loss on data.eval every N optimizer steps (0 = only at the "
        "end); the eval tasks' metrics follow eval.every.",
    )
    seed: int = Field(0, ge=0, description="Seed for initialisation, data order and dropout.")

    def derived_learning_rate(self, lora: bool, base_params: int) -> float:
        """learning_rate, or when null the rate derived from the base model's parameter count (see its help)."""
        if self.learning_rate is not None:
            return self.learning_rate
        small = base_params < 1_000_000_000
        return (1e-3 if small else 2e-4) if lora else (5e-5 if small else 1e-5)

    @property
    def resolved_warmup_steps(self) -> int:
        return self.warmup_steps if self.warmup_steps is not None else round(0.05 * self.max_steps)

    def problems(self, path: str) -> list[tuple[str, str]]:
        if self.warmup_steps is not None and self.warmup_steps > self.max_steps:
            return [(f"{path}.warmup_steps", f"{self.warmup_steps} exceeds max_steps={self.max_steps}: lower it")]
        return []


class EvalSection(Section):
    """Task metrics while training: ``workbench eval``'s tasks scored on the model being trained (greedy answers
    generated in the training process, no server), logged as ``eval_task`` events next to the eval loss."""

    tasks: list[str] = Field(
        default_factory=list,
        description="Tasks to score during training, e.g. [identity, "
        "heldout_loss] (see `workbench eval --help`); empty: none.",
    )
    every: int = Field(
        0,
        ge=0,
        description="Score the tasks every N optimizer steps (0 = only at the end of the run); "
        "the eval loss follows schedule.eval_loss_every.",
    )
    limit: int | None = Field(
        16,
        ge=1,
        description="Rows of each answer-scored task's set (null = all). "
        "heldout_loss measures the whole of data.eval: it is the run's eval loss.",
    )
    max_new_tokens: int = Field(64, ge=1, le=4096, description="Answer length limit of the generated answers.")

    def problems(self, path: str) -> list[tuple[str, str]]:
        return EVAL_TASKS.unknown(f"{path}.tasks", self.tasks)


class TrainingSection(Section):
    method: Literal["sft", "grpo", "dpo"] = Field(
        "sft",
        description="sft: supervised fine-tuning on data.train's answers; grpo: reinforcement fine-tuning with "
        "verifiable rewards (GRPO, the rl section): the model samples rl.group_size answers per prompt (data.train's "
        "rows, or the phone's tasks: rl.prompts), rewards score them, and each answer is pushed up or down by how it "
        "did against its group; dpo: direct preference optimisation (the dpo section) on data.train's preference "
        "pairs (prompt, chosen, rejected: `workbench agent dagger`'s pairs.jsonl): each pair's chosen reply is made "
        "more likely than its rejected one, relative to the model as the run starts.",
    )


class DpoSection(Section):
    """Direct preference optimisation (``training.method: dpo``): TRL's DPOTrainer loss on preference pairs, the
    reference being the model as the run starts (``engine.dpo``)."""

    beta: float = Field(
        0.1,
        gt=0,
        le=100,
        description="How far the trained model may move from the reference (the "
        "model as the run starts): the implicit reward of a reply is beta x (its log-probability now - "
        "the reference's); higher keeps the model closer (TRL's beta; IPO's 1/(2 beta) is the margin "
        "it aims for).",
    )
    loss_type: Literal["sigmoid", "ipo"] = Field(
        "sigmoid",
        description="sigmoid = DPO: -log sigmoid(beta x (chosen - rejected log-ratio)), each reply's "
        "log-probability summed over its tokens; ipo = IPO: (chosen - rejected log-ratio - 1/(2 beta))^2, each "
        "reply's log-ratio averaged over its tokens as TRL does (no ever-growing margin, for pairs the model "
        "already orders).",
    )


def _is_date(text: str) -> bool:
    import datetime

    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return True


class RlSection(Section):
    """Reinforcement fine-tuning (``training.method: grpo``). A step samples ``group_size`` completions for each of
    ``schedule.micro_batch_size`` prompts per micro-batch (``grad_accum_steps`` micro-batches per optimizer step)."""

    prompts: Literal["rows", "phone_tasks"] = Field(
        "rows",
        description="Where prompts come from: rows = the single-step rows of data.train (every message "
        "but the last answer is the prompt; the answer is the reference the rewards check against); phone_tasks = "
        "the first step of each of rl.tasks on the offline phone, in Open-AutoGLM's runtime format with its screenshot "
        "(a vision-language model) or, with rl.observation ui_tree, the screen as text (any chat model); the "
        "oracle's first action is the reference; data.train is not read for prompts.",
    )
    tasks: str = Field(
        "train",
        description="rl.prompts phone_tasks: the offline phone's tasks to start from: all, "
        "train, heldout, a template, task ids, more:COUNT:SEED (further training tasks, a new draw for a seed "
        "other than 0; comma-separated) or a .jsonl task file.",
    )
    screen_size: str = Field(
        "1080x2400",
        description="rl.prompts phone_tasks: the simulated phone's screen, "
        "WIDTHxHEIGHT in pixels (112x252 for tiny-glm4v-agent).",
    )
    date: str | None = Field(
        None,
        description="rl.prompts phone_tasks: the date the system prompt states, "
        "YYYY-MM-DD (the packaged episode rows say 2026-12-01); null: the day the run starts. "
        "A fixed date keeps the prompts, and so the run, the same on any day.",
    )
    observation: Literal["screenshot", "ui_tree", "both"] = Field(
        "screenshot",
        description="rl.prompts phone_tasks: what the prompts show of each screen: the screenshot (a "
        "vision-language model), ui_tree (the screen's compact tree as text: a text model will do) or both.",
    )
    lang: Literal["cn", "en"] = Field(
        "en",
        description="rl.prompts phone_tasks: Open-AutoGLM's system prompt in the prompts (its --lang): en, or cn "
        "(its default, the prompt AutoGLM-Phone-9B was trained on). Serve the result to the runtime with the same.",
    )
    prompt_steps: Literal["first", "all"] = Field(
        "first",
        description="rl.prompts phone_tasks: first = each task's first step is a prompt; all = every step "
        "of each task's oracle episode is one (the conversation up to it as the oracle played it), so that the "
        "later steps of an episode are sampled and trained too; episode_success plays on from the sampled step.",
    )
    episode_max_steps: int = Field(
        20,
        ge=1,
        le=500,
        description="episode_success: the steps an episode may take, "
        "the sampled first action included; the rest are the trained model's greedy "
        "answers (rl.max_new_tokens each).",
    )
    group_size: int = Field(
        4,
        ge=2,
        le=256,
        description="Completions sampled per prompt; advantages are "
        "relative to each group's mean (at least 2, or every advantage is 0).",
    )
    scale_rewards: Literal["group", "none"] = Field(
        "group",
        description="group = advantages divided by their group's reward std (GRPO): every group with a "
        "spread weighs alike, one that differs by a 0.25 shaping term as much as one that differs in success; none "
        "= the reward minus the group mean only (Dr. GRPO, TRL's scale_rewards none): a group weighs by its "
        "spread, and the rewards' weights keep their meaning across groups.",
    )
    rewards: dict[str, float] = Field(
        default_factory=lambda: {"format": 1.0, "action_type": 1.0, "tap_in_box": 1.0, "text_match": 1.0},
        description="Reward functions by name with their weights, e.g. {format: 0.5, tap_in_box: 1}: the reward "
        "of a completion is the weighted sum. Names: " + ", ".join(REWARDS.names()) + ".",
    )
    max_draws: int = Field(
        1,
        ge=1,
        le=16,
        description="Prompt draws per micro-batch: 1 trains every group drawn "
        "(plain GRPO); N > 1 drops the groups whose rewards are all equal (advantage 0: no "
        "gradient, only tokens in the divisor) and draws again, up to N times, until the "
        "micro-batch holds micro_batch_size groups with a spread (or more: none drawn is "
        "wasted) on every rank together (DAPO's dynamic sampling): for a start model that "
        "already solves most prompts. Each draw costs a rollout.",
    )
    clip_range: float = Field(0.2, gt=0, lt=1, description="PPO clip of the importance ratio: 1 +- clip_range.")
    kl_coef: float = Field(
        0.0,
        ge=0,
        description="Weight of the KL penalty to the reference model (the base with "
        "the LoRA adapter disabled); 0 = none (no reference forward).",
    )
    temperature: float = Field(
        1.0,
        gt=0,
        le=10,
        description="Sampling temperature of the rollouts (the trained log-probabilities use the same).",
    )
    max_new_tokens: int = Field(64, ge=1, le=8192, description="Completion length limit of the rollouts.")
    samples_logged: int = Field(
        4, ge=0, le=64, description="Sample completions per rollout event (the monitor's table)."
    )
    pool: bool = Field(
        False,
        description="rl.prompts phone_tasks: draw the tasks by how the agent does on them (the task pool: "
        "MobileRL's AdaGRPO, ARPO): each family of tasks (template) by its recent success, a solved one less, a "
        "failing one more, with a floor (rl.pool_floor); fresh instances (rl.pool_fresh_share) and replay of "
        "successful replies (rl.pool_replay) on top. Needs an episode reward (its success is what the pool follows).",
    )
    pool_floor: float = Field(
        0.1,
        ge=0,
        le=1,
        description="rl.pool: a family's draw weight is floor + (1 - floor) x "
        "(1 - its recent success): a solved family keeps this much of a failing one's.",
    )
    pool_window: int = Field(
        16,
        ge=1,
        le=4096,
        description="rl.pool: a family's recent success is the share of its "
        "last this-many played episodes that succeeded.",
    )
    pool_fresh_share: float = Field(
        0.0,
        ge=0,
        le=1,
        description="rl.pool: the share of draws that are a new task of "
        "the family on a phone of new names and texts (never a held-out value) instead of "
        "a task of rl.tasks: a solved template still yields unsolved instances.",
    )
    pool_replay: bool = Field(
        False,
        description="rl.pool: keep each reply whose episode succeeded, per task and step; "
        "a later group of that prompt whose episodes all failed gets it in place of its last "
        "completion (played and scored again; trained as on-policy): a spread where none was.",
    )
    step_advantage_weight: float = Field(
        0.0,
        ge=0,
        le=10,
        description="GiGPO's step credit (rl.prompts phone_tasks, an episode reward): the weight of "
        "each sampled step's advantage within its anchor-state group (every step of the window's episodes taken on "
        "the same screen of the same task, its return the success discounted by rl.step_discount per later step), "
        "added to the episode advantage; 0 = off. Tells apart episodes that all succeed in different numbers of steps.",
    )
    step_discount: float = Field(
        0.95,
        gt=0,
        le=1,
        description="rl.step_advantage_weight: a step's return is the episode's success x this per step after it.",
    )
    loss_type: Literal["dapo", "grpo", "dr_grpo", "bnpo"] = Field(
        "dapo",
        description="How the loss is normalised (TRL's GRPOTrainer loss_type, over the whole accumulation "
        "window): dapo = the token mean over the window, as SFT's loss (a long completion weighs by its tokens); "
        "grpo = each completion's token mean, averaged (length-biased: short right answers and long wrong ones "
        "weigh more per token); dr_grpo = the sum over completions x rl.max_new_tokens (Dr. GRPO: a constant); "
        "bnpo = each micro-batch's token mean, averaged.",
    )
    mask_truncated_completions: bool = Field(
        False,
        description="Leave the completions cut at rl.max_new_tokens out of the loss and its normalisation "
        "(TRL's mask_truncated_completions, DAPO's overlong filter): a cut answer is scored as unfinished, not as wrong.",
    )
    importance_sampling: Literal["none", "token_truncate", "token_mask"] = Field(
        "none",
        description="Correct the sampler/trainer mismatch by truncated importance sampling (TRL's "
        "vllm_importance_sampling_correction; in-process and vLLM rollouts alike): the trainer's own log-probabilities "
        "are the old policy, and each token's loss is weighted by exp(logp trainer - logp sampler), capped at "
        "rl.importance_sampling_cap (token_truncate) or 0 above it (token_mask); the mismatch event reports the mean "
        "weight and the share capped. none = the sampler's log-probabilities are the old policy (the mismatch "
        "enters the PPO ratio and its clip).",
    )
    importance_sampling_cap: float = Field(
        3.0,
        gt=1,
        le=100,
        description="rl.importance_sampling: the cap C of the weights (TRL's vllm_importance_sampling_cap).",
    )
    rollout_engine: Literal["in_process", "vllm"] = Field(
        "in_process",
        description="What samples the rollouts: in_process = the model being trained (generate); vllm = "
        "a vLLM server started for the run (`bash scripts/setup.sh --vllm`), given the current LoRA adapter each step "
        "and returning its own per-token log-probabilities (policy_mismatch then compares trainer and engine).",
    )

    def problems(self, path: str) -> list[tuple[str, str]]:
        out = REWARDS.unknown(f"{path}.rewards", list(self.rewards))
        if not self.rewards:
            out.append((f"{path}.rewards", "empty: name at least one reward, e.g. {format: 1}"))
        out += [
            (f"{path}.rewards.{name}", f"weight {w} is not a finite number: give one such as 1.0")
            for name, w in self.rewards.items()
            if not math.isfinite(w)
        ]
        out += [
            (
                f"{path}.rewards.{name}",
                "plays the episode of a phone task on from its sampled action, and "
                f"rl.prompts is {self.prompts}: set rl.prompts phone_tasks, or drop the reward",
            )
            for name in self.rewards
            if name in EPISODE_REWARDS and self.prompts != "phone_tasks"
        ]
        played = any(name in EPISODE_REWARDS for name in self.rewards)
        for name, on in (("pool", self.pool), ("step_advantage_weight", self.step_advantage_weight > 0)):
            if on and (self.prompts != "phone_tasks" or not played):
                out.append(
                    (
                        f"{path}.{name}",
                        "follows the episodes played from each sampled reply: set rl.prompts "
                        f"phone_tasks and an episode reward ({', '.join(EPISODE_REWARDS)}) in rl.rewards, or turn "
                        "it off",
                    )
                )
        for name, on in (("pool_fresh_share", self.pool_fresh_share > 0), ("pool_replay", self.pool_replay)):
            if on and not self.pool:
                out.append(
                    (f"{path}.{name}", "a setting of the task pool: set rl.pool true, or leave it at its default")
                )
        if self.date is not None and not _is_date(self.date):
            out.append((f"{path}.date", f"{self.date!r} is not a date: give YYYY-MM-DD, e.g. 2026-12-01, or null"))
        if (
            not re.fullmatch(r"\s*\d+\s*[xX]\s*\d+\s*", self.screen_size)
            or min(int(v) for v in re.split(r"[xX]", self.screen_size)) < 28
        ):
            out.append(
                (
                    f"{path}.screen_size",
                    f"{self.screen_size!r}: give WIDTHxHEIGHT in pixels, each side at "
                    "least 28 (one merged image patch), e.g. 1080x2400 or 112x252",
                )
            )
        return out


class CheckpointSection(Section):
    every_steps: int = Field(0, ge=0, description="Save a resumable checkpoint every N steps (0 = only at the end).")
    keep_last: int = Field(2, ge=1, description="Resumable checkpoints kept on disk.")
    resume_from: str | None = Field(None, description="A checkpoint directory, or 'latest' in the run directory.")
    merge_adapter: bool = Field(
        False,
        description="Also save the base with the adapter merged in, as a whole model "
        "in RUN_DIR/merged (beside RUN_DIR/adapter) at the end of the run.",
    )

    def problems(self, path: str) -> list[tuple[str, str]]:
        where = self.resume_from
        if where is None or where == "latest" or Path(where).is_dir():
            return []  # the engine checks that a directory holds a checkpoint
        return [
            (
                f"{path}.resume_from",
                f"{where!r} is not a directory: give a checkpoint directory "
                "(runs/NAME/checkpoints/step-...), or latest",
            )
        ]


class OutputSection(Section):
    runs_dir: str = Field("runs", description="Folder holding one directory per run.")
    run_name: str | None = Field(None, description="Run directory name; default: a timestamp.")
    progress_bar: bool = Field(True, description="Console progress bar.")
    log_every: int = Field(1, ge=1, description="Emit a step event every N optimizer steps.")
    memory_every: int = Field(10, ge=1, description="Emit a memory event every N optimizer steps.")
    census_every: int = Field(0, ge=0, description="Re-emit the parameter census every N steps (0 = at start and end).")

    def problems(self, path: str) -> list[tuple[str, str]]:
        name = self.run_name
        if name is None:
            return []
        # The run directory is runs_dir/run_name: a name that is a path (../x, /tmp/x, a/b) would put it elsewhere.
        if name.strip() in ("", ".", "..") or any(c in name for c in "/\\\0") or Path(name).is_absolute():
            return [
                (
                    f"{path}.run_name",
                    f"{name!r} is not a directory name: use one name without '/', '\\' or "
                    "'..' (the run directory is always created inside output.runs_dir)",
                )
            ]
        return []


class DiagnosisSection(Section):
    """Precision instruments: autocast coverage sampling, overflow attribution, loss-scale collapse detection."""

    enabled: bool = Field(True, description="Run the precision instruments (bounded cost: see docs/precision.md).")
    coverage_every: int = Field(
        50,
        ge=0,
        description="Sample autocast coverage (share of matmul FLOPs in low precision) "
        "on step 1 and every N steps; 0 = never.",
    )
    attribute_overflows: int = Field(
        3,
        ge=0,
        description="Overflow steps per collapse_window whose origin is traced "
        "(each replays the window's micro-batches once with hooks).",
    )
    collapse_window: int = Field(50, ge=1, description="Steps over which skipped (overflow) steps are counted.")
    collapse_skips: int = Field(10, ge=1, description="Skipped steps within collapse_window that count as a collapse.")
    scale_floor: float = Field(1.0, gt=0, description="fp16: a loss scale at or below this counts as a collapse.")
    stop_on_collapse: bool = Field(
        False, description="Stop the run cleanly (checkpoint, run_finished stopped=true) when a collapse is diagnosed."
    )

    def problems(self, path: str) -> list[tuple[str, str]]:
        if self.collapse_skips > self.collapse_window:
            return [
                (
                    f"{path}.collapse_skips",
                    f"{self.collapse_skips} exceeds collapse_window={self.collapse_window}: it could never trigger",
                )
            ]
        return []


def single_process(strategy: str) -> bool:
    """Strategy none runs in this one process, without torchrun: a world of one, whatever the devices."""
    return strategy == "none"


def world_size_for(strategy: str, processes: int) -> int:
    """The ranks ``strategy`` runs as when ``processes`` are available (the planner's and the panels' settings)."""
    return 1 if single_process(strategy) else processes


class ShardingSection(Section):
    """Multi-process training: the strategy, how state is sharded, and where the processes run.

    Data convention: every optimizer step sees the same global batch as one process with
    micro_batch_size x (nproc_per_node x nnodes) examples per micro-batch; each rank takes its own
    disjoint slice of micro_batch_size examples of every global micro-batch.
    """

    strategy: Literal["none", "ddp", "fsdp", "deepspeed"] = Field(
        "none",
        description="none: one process; ddp: replicate, average gradients; fsdp: FSDP2 fully_shard; "
        "deepspeed: DeepSpeed ZeRO. micro_batch_size is per rank: the global micro-batch is micro_batch_size x ranks.",
    )
    fsdp_stage: Literal["zero2", "zero3"] = Field(
        "zero3",
        description="fsdp: zero2 shards gradients and optimizer state (parameters stay gathered from forward "
        "to backward); zero3 shards parameters too (re-gathered per layer).",
    )
    deepspeed_stage: Literal[1, 2, 3] = Field(
        3, description="deepspeed: ZeRO stage 1 (optimizer state), 2 (+ gradients), 3 (+ parameters)."
    )
    offload: Literal["none", "optimizer", "optimizer+params"] = Field(
        "none",
        description="Move sharded state to host RAM: optimizer (DeepSpeed) or optimizer+params "
        "(DeepSpeed ZeRO-3; FSDP, whose CPU offload moves parameters, gradients and optimizer state together).",
    )
    nproc_per_node: int = Field(1, ge=1, le=1024, description="Processes per node (one per GPU; any number on CPUs).")
    nnodes: int = Field(
        1, ge=1, le=4096, description="Nodes taking part; start the same command on each with its node_rank."
    )
    node_rank: int = Field(0, ge=0, description="This node's index, 0 .. nnodes-1 (node 0 hosts the rendezvous).")
    master_addr: str = Field("127.0.0.1", description="Address of node 0, reachable from every node.")
    master_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="Rendezvous port on node 0; null: a free port on one node, 29500 across nodes.",
    )
    backend: Literal["auto", "gloo", "nccl"] = Field(
        "auto", description="Collective backend; auto: nccl on GPUs, gloo on CPUs."
    )

    @property
    def world_size(self) -> int:
        return self.nproc_per_node * self.nnodes

    @property
    def distributed(self) -> bool:
        """Runs under torchrun (any strategy but none), even with a single process."""
        return not single_process(self.strategy)

    @property
    def stage(self) -> int:
        """The ZeRO stage the strategy shards at, as the planner counts it: 0 for none and ddp, 2 or 3
        for FSDP zero2 / zero3, 1-3 for DeepSpeed."""
        if self.strategy == "fsdp":
            return 3 if self.fsdp_stage == "zero3" else 2
        return self.deepspeed_stage if self.strategy == "deepspeed" else 0

    def problems(self, path: str) -> list[tuple[str, str]]:
        out = []
        if self.node_rank >= self.nnodes:
            out.append((f"{path}.node_rank", f"{self.node_rank} is not below nnodes={self.nnodes}: nodes count from 0"))
        if single_process(self.strategy) and self.world_size > 1:
            out.append(
                (
                    f"{path}.strategy",
                    f"none runs one process, but nproc_per_node x nnodes = {self.world_size}: "
                    "choose ddp, fsdp or deepspeed",
                )
            )
        if self.offload != "none" and self.strategy in ("none", "ddp"):
            out.append(
                (
                    f"{path}.offload",
                    f"offload moves sharded state to host RAM, and strategy {self.strategy} shards "
                    "nothing: use fsdp or deepspeed, or offload none",
                )
            )
        if self.strategy == "fsdp" and self.offload == "optimizer":
            out.append(
                (
                    f"{path}.offload",
                    "FSDP2's CPUOffloadPolicy moves parameters, gradients and optimizer state "
                    "together: use optimizer+params",
                )
            )
        if self.strategy == "deepspeed" and self.offload == "optimizer+params" and self.deepspeed_stage != 3:
            out.append(
                (
                    f"{path}.offload",
                    f"DeepSpeed offloads parameters only under ZeRO-3, not stage "
                    f"{self.deepspeed_stage}: use offload optimizer, or deepspeed_stage 3",
                )
            )
        if self.strategy == "deepspeed" and (missing := missing_package("deepspeed")):
            out.append((f"{path}.strategy", f"{missing}; or use fsdp"))
        return out

    def run_problems(self, cfg: RunConfig) -> list[tuple[str, str]]:
        """Checks that need the other sections (precision, device, checkpointing)."""
        if not self.distributed:
            return []
        out = []
        mode = cfg.precision.mode
        if self.strategy == "fsdp" and mode in ("fp16", "auto") and not _sharded_grad_scaler_available():
            out.append(
                (
                    "precision.mode",
                    "fp16 under FSDP needs torch's ShardedGradScaler, which this torch lacks: use "
                    "bf16 or fp32, or deepspeed",
                )
            )
        if self.strategy == "deepspeed" and mode == "pure-bf16":
            out.append(("precision.mode", "DeepSpeed's bf16 mode always keeps fp32 master weights: use bf16"))
        if self.nnodes > 1 and cfg.output.run_name is None:
            out.append(
                (
                    "output.run_name",
                    "every node must join the same run directory: name it (a default name "
                    "is a timestamp, different on each node)",
                )
            )
        if self.strategy in ("fsdp", "deepspeed") and cfg.checkpointing.merge_adapter:
            out.append(
                (
                    "checkpointing.merge_adapter",
                    f"{self.strategy} holds no full model on any rank to merge into: "
                    "merge the saved adapter afterwards (one process)",
                )
            )
        if cfg.device.startswith("cuda:") and self.nproc_per_node > 1:
            out.append(
                (
                    "device",
                    f"{cfg.device} pins one GPU, but each of the {self.nproc_per_node} ranks takes "
                    "cuda:LOCAL_RANK: use cuda or auto",
                )
            )
        if cfg.device == "cpu":
            if self.backend == "nccl":
                out.append(("sharding.backend", "nccl needs GPUs and device is cpu: use gloo or auto"))
            if self.offload != "none":
                out.append(
                    (
                        "sharding.offload",
                        "offload moves state from GPU to host RAM, and this run is on the CPU "
                        "already: use offload none",
                    )
                )
            if self.strategy == "deepspeed" and mode == "fp16":
                out.append(("precision.mode", "DeepSpeed's CPU accelerator has no fp16: use bf16 or fp32 on the CPU"))
        elif cfg.device in ("auto", "cuda") or cfg.device.startswith("cuda"):
            gpus = _visible_gpus() if self.nproc_per_node > 1 or cfg.device != "auto" else None
            if gpus and self.nproc_per_node > gpus:
                out.append(
                    (
                        "sharding.nproc_per_node",
                        f"{self.nproc_per_node} processes but {gpus} GPU(s) visible on "
                        "this node: one process per GPU (or device cpu)",
                    )
                )
        return out


def _sharded_grad_scaler_available() -> bool:
    try:
        from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler  # noqa: F401
    except ImportError:
        return False
    return True


DEVICE_HELP = (
    "auto (the first CUDA GPU when one is visible, else the CPU), cpu, cuda or cuda:N; one resolution "
    "for training and inference (hardware.resolve_device)"
)


def device_problem(name: str) -> str | None:
    """Why ``name`` is not a device value (auto, cpu, cuda or cuda:N), or None."""
    if name in ("auto", "cpu", "cuda") or (name.startswith("cuda:") and name[5:].isdigit()):
        return None
    return f"{name!r} is not a device: use auto, cpu, cuda or cuda:N"


def _visible_gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


class RunConfig(Section):
    """Everything a fine-tuning run needs. Saved resolved as ``config.json`` in the run directory."""

    config_title: ClassVar[str] = "run configuration"
    help_command: ClassVar[str] = "workbench train --help"
    renamed_keys: ClassVar[dict[str, str]] = {"schedule.eval_every": "schedule.eval_loss_every"}
    model: ModelSection = ModelSection()
    data: DataSection = Field(
        default_factory=DataSection
    )  # fresh per config: data_samples/ paths resolve in the current cwd
    precision: PrecisionSection = PrecisionSection()
    lora: LoraSection = LoraSection()
    schedule: ScheduleSection = ScheduleSection()
    checkpointing: CheckpointSection = CheckpointSection()
    output: OutputSection = OutputSection()
    sharding: ShardingSection = ShardingSection()
    diagnosis: DiagnosisSection = DiagnosisSection()
    quantization: QuantizationSection = QuantizationSection()
    memory: MemorySection = MemorySection()
    eval: EvalSection = EvalSection()
    training: TrainingSection = TrainingSection()
    rl: RlSection = Field(default_factory=RlSection)
    dpo: DpoSection = DpoSection()
    device: str = Field("auto", description=DEVICE_HELP + ".")
    # {field path: (value, why)} of the values derived from other fields because the user left them null; a dump writes
    # them back as null, so a copy with another training.method derives them again.
    _derived: dict = PrivateAttr(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _derive_unset_values(cls, data, handler):
        derived: dict = {}
        if isinstance(data, dict):
            data, derived = _derive_lora_dropout(data)
        cfg = handler(data)
        cfg._derived = derived
        return cfg

    @field_serializer("lora")
    def _lora_as_given(self, lora: LoraSection, info) -> dict:
        out = lora.model_dump(mode=info.mode)
        if "lora.dropout" in self._derived:
            out["dropout"] = None
        return out

    @property
    def derived(self) -> dict:
        """{field path: (value, why)} of the values this config derived because they were left null."""
        return dict(self._derived)

    def problems(self, path: str = "") -> list[tuple[str, str]]:
        out = []
        if problem := device_problem(self.device):
            out.append(("device", problem))
        if not self.lora.enabled and self.precision.mode != "pure-bf16" and self.model.dtype not in ("auto", "float32"):
            out.append(
                (
                    "model.dtype",
                    f"full fine-tuning keeps fp32 master weights; {self.model.dtype} weights would "
                    "be trained directly (and GradScaler refuses fp16 gradients): use auto or float32, or enable LoRA",
                )
            )
        if self.precision.mode == "pure-bf16" and self.model.dtype not in ("auto", "bfloat16"):
            out.append(
                ("model.dtype", f"pure-bf16 stores weights in bfloat16, not {self.model.dtype}: use auto or bfloat16")
            )
        if self.quantization.qat and (missing := missing_package("torchao")):
            out.append(("quantization.qat", f"QAT runs on torchao, and {missing}; or turn QAT off"))
        if self.quantization.qat and self.sharding.strategy in ("fsdp", "deepspeed"):
            out.append(
                (
                    "quantization.qat",
                    f"QAT swaps linear layers for fake-quantized ones before the strategy wraps "
                    f"the model; sharding them with {self.sharding.strategy} is not supported: use "
                    "sharding.strategy none or ddp, or turn QAT off",
                )
            )
        out += self._quantized_base_problems()
        if self.eval.tasks and self.sharding.strategy in ("fsdp", "deepspeed"):
            out.append(
                (
                    "eval.tasks",
                    f"task metrics generate answers with the whole model on rank 0; "
                    f"{self.sharding.strategy} shards it across ranks: use sharding.strategy none or ddp, or "
                    "score the saved adapter with `workbench eval` after the run",
                )
            )
        if self.training.method == "grpo":
            out += self._grpo_problems()
        out += self._dpo_problems()
        out += self.sharding.run_problems(self)
        return out

    def _quantized_base_problems(self) -> list[tuple[str, str]]:
        base = self.quantization.base
        if base == "none":
            return []
        out = []
        if missing := missing_package("bitsandbytes"):
            out.append(
                (
                    "quantization.base",
                    f"a quantized base runs on bitsandbytes, and {missing}; or set quantization.base none",
                )
            )
        if not self.lora.enabled:
            out.append(
                (
                    "quantization.base",
                    f"{base} weights are frozen: a full fine-tune (lora.enabled false) would "
                    "have nothing to train in them: enable lora, or set quantization.base none",
                )
            )
        if self.quantization.qat:
            out.append(
                (
                    "quantization.qat",
                    f"QAT fake-quantizes the base's linear layers, and quantization.base {base} "
                    "has replaced them with quantized ones already: set one of them (qat null, or base none)",
                )
            )
        why = QUANTIZED_BASE_UNSHARDABLE.get((self.sharding.strategy, base))
        if why:
            out.append(
                (
                    "sharding.strategy",
                    f"{self.sharding.strategy} over an {base} base: FSDP2 {why}: use "
                    "quantization.base nf4, or sharding.strategy ddp or deepspeed",
                )
            )
        return out

    def _grpo_problems(self) -> list[tuple[str, str]]:
        out = []
        if self.sharding.strategy in ("fsdp", "deepspeed"):
            out.append(
                (
                    "sharding.strategy",
                    f"GRPO samples its rollouts with the whole model in each process; "
                    f"{self.sharding.strategy} shards it across ranks: use sharding.strategy none or ddp",
                )
            )
        if self.rl.kl_coef > 0 and not self.lora.enabled:
            out.append(
                (
                    "rl.kl_coef",
                    "the KL reference is the base model with the LoRA adapter disabled, and full "
                    "fine-tuning has no adapter to disable: enable lora, or set rl.kl_coef 0",
                )
            )
        if self.lora.enabled and self.lora.dropout > 0:
            out.append(
                (
                    "lora.dropout",
                    f"{self.lora.dropout}: GRPO's importance ratio compares the trainer's "
                    "log-probabilities with the sampler's, and dropout (off while sampling) would make them "
                    "differ by noise: set lora.dropout 0",
                )
            )
        if self.quantization.qat:
            out.append(("quantization.qat", "GRPO under quantization-aware training is not supported: turn QAT off"))
        if self.rl.rollout_engine == "vllm":
            if not self.lora.enabled:
                out.append(
                    (
                        "rl.rollout_engine",
                        "vllm receives the trained weights as a LoRA adapter each step, and "
                        "full fine-tuning has none: enable lora, or use rl.rollout_engine in_process",
                    )
                )
            if self.rl.prompts != "rows" or any(name in EPISODE_REWARDS for name in self.rl.rewards):
                out.append(
                    (
                        "rl.rollout_engine",
                        "vllm rollouts take text prompts (rl.prompts rows) only so far: use "
                        "rl.rollout_engine in_process for phone tasks",
                    )
                )
            if self.sharding.strategy != "none":
                out.append(("rl.rollout_engine", "vllm rollouts serve one process: use sharding.strategy none"))
            if self.quantization.base != "none":
                out.append(
                    (
                        "rl.rollout_engine",
                        f"vllm would sample with the adapter on the 16-bit base, not the "
                        f"{self.quantization.base} base the policy trains over: use rl.rollout_engine in_process",
                    )
                )
        return out

    def _dpo_problems(self) -> list[tuple[str, str]]:
        """dpo's settings with another method, and what dpo cannot train with."""
        given = _changed_fields(self.dpo, DpoSection(), "dpo")
        if self.training.method != "dpo":
            return [
                (
                    path,
                    f"a setting of training.method dpo, and the method is {self.training.method}: set "
                    "training.method dpo, or leave it at its default",
                )
                for path in given
            ]
        out = [
            (
                path,
                "a GRPO setting (training.method grpo): dpo samples nothing and has no rewards; leave it at "
                "its default",
            )
            for path in _changed_fields(self.rl, RlSection(), "rl")
        ]
        if self.data.format != "auto":
            out.append(
                (
                    "data.format",
                    f"{self.data.format}: dpo reads preference pairs (prompt, chosen, rejected); "
                    "leave data.format auto",
                )
            )
        if self.data.ui_tree_layouts != "as_recorded":
            out.append(
                (
                    "data.ui_tree_layouts",
                    "shuffled layouts are drawn for supervised rows only: dpo trains on "
                    "its pairs as recorded; set as_recorded",
                )
            )
        if self.quantization.qat:
            out.append(("quantization.qat", "dpo under quantization-aware training is not supported: turn QAT off"))
        if self.sharding.strategy in ("fsdp", "deepspeed"):
            out.append(
                (
                    "sharding.strategy",
                    f"dpo runs in one process or under ddp so far ({self.sharding.strategy} "
                    "is untested with its reference pass): use sharding.strategy none or ddp",
                )
            )
        return out


def _changed_fields(section: Section, default: Section, path: str) -> list[str]:
    """The dotted paths of ``section``'s fields whose value is not ``default``'s."""
    return [f"{path}.{name}" for name in type(section).model_fields if getattr(section, name) != getattr(default, name)]


def _derive_lora_dropout(data: dict) -> tuple[dict, dict]:
    """``data`` with lora.dropout derived from training.method when left null, and {path: why} if it was."""
    lora, training = data.get("lora", {}), data.get("training", {})
    if not isinstance(lora, dict) or lora.get("dropout") is not None:
        return data, {}  # given (a section instance holds its own value)
    method = (
        training.method
        if isinstance(training, TrainingSection)
        else (training.get("method", "sft") if isinstance(training, dict) else None)
    )
    if method == "grpo":
        dropout, why = (
            0.0,
            (
                "training.method grpo: its importance ratio compares the trainer's log-probabilities "
                "with the sampler's, which samples without dropout"
            ),
        )
    elif method == "dpo":
        dropout, why = (
            0.0,
            (
                "training.method dpo: its log-ratios compare the trainer's log-probabilities with the "
                "reference's, computed without dropout (TRL's DPOTrainer disables dropout too)"
            ),
        )
    else:
        dropout, why = SFT_LORA_DROPOUT, f"training.method {method}"
    return {**data, "lora": {**lora, "dropout": dropout}}, {"lora.dropout": (dropout, why)}


def optional_parts(annotation) -> tuple[list, bool]:
    """The members of a union annotation other than None, and whether None was one of them (``Optional[X]`` and
    ``X | None`` alike); a plain annotation is its own one member."""
    if typing.get_origin(annotation) not in (Union, types.UnionType):
        return [annotation], False
    args = typing.get_args(annotation)
    return [a for a in args if a is not type(None)], type(None) in args


def cli_flag(field) -> CliFlag:
    """The CliFlag of a pydantic field (the default when it declares none)."""
    return next((m for m in field.metadata if isinstance(m, CliFlag)), CliFlag())


def leaf_fields(model: type[BaseModel] = RunConfig, prefix: str = ""):
    """(dotted path, pydantic FieldInfo) of every leaf field, sections recursed: what the CLI flags
    and the widget panel are generated from."""
    for name, info in model.model_fields.items():
        ann = info.annotation
        if isinstance(ann, type) and issubclass(ann, Section):
            yield from leaf_fields(ann, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", info
