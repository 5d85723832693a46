"""Typed, versioned run events. The engine writes them; UI, CLI and extensions only read them.

One JSON object per line with ``type``, ``v`` (schema version), ``time`` (unix seconds) and
``rank``. Readers must ignore unknown fields and unknown types (forward compatibility).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Event:
    type: ClassVar[str] = "event"
    time: float = field(default_factory=time.time, kw_only=True)
    rank: int = field(default=0, kw_only=True)

    def to_dict(self) -> dict:
        d = {"type": self.type, "v": SCHEMA_VERSION}
        d.update(dataclasses.asdict(self))
        return d


@dataclass(frozen=True)
class RunStarted(Event):
    type: ClassVar[str] = "run_started"
    run_dir: str
    config: dict
    hardware: dict
    versions: dict
    precision: dict  # the resolved PrecisionPolicy
    total_steps: int
    start_step: int = 0
    data: dict = field(default_factory=dict)  # example counts, truncated, skipped rows


@dataclass(frozen=True)
class Step(Event):
    type: ClassVar[str] = "step"
    step: int
    loss: float
    lr: float
    grad_norm: float | None
    loss_scale: float | None
    skipped: bool
    tokens: int
    tokens_per_s: float
    step_time_s: float
    eta_s: float


@dataclass(frozen=True)
class Overflow(Event):
    type: ClassVar[str] = "overflow"
    step: int
    scale_before: float | None
    scale_after: float | None
    nonfinite_params: list  # names of parameters whose gradients held inf/nan (capped)
    nonfinite_count: int


@dataclass(frozen=True)
class Census(Event):
    type: ClassVar[str] = "census"
    step: int
    rows: list  # [{group, dtype, trainable, quantized, count, bytes}]; quantized: '', fake-quant or the int type
    totals: dict  # {dtype: count}


# The model-state categories, in the order every report and chart shows them, and the memory event's field
# that carries each as measured (the planner predicts the same categories by these names).
MODEL_STATE_FIELDS = {
    "weights": "params_bytes",
    "gradients": "grads_bytes",
    "optimizer_state": "optimizer_bytes",
    "master_weights": "master_weights_bytes",
}


@dataclass(frozen=True)
class Memory(Event):
    type: ClassVar[str] = "memory"
    step: int
    devices: list  # [{device, allocated, reserved, peak}] on GPUs
    host_rss: int
    params_bytes: int
    grads_bytes: int  # at the step's peak: after backward, before the optimizer step frees them (0 before any)
    optimizer_bytes: int
    master_weights_bytes: int = 0  # an fp32 copy held besides the weights (DeepSpeed); 0 under torch AMP


@dataclass(frozen=True)
class PlanPrediction(Event):
    """The memory planner's prediction for this run, emitted at start (compare with ``memory``)."""

    type: ClassVar[str] = "plan"
    step: int
    plan: dict


@dataclass(frozen=True)
class Eval(Event):
    type: ClassVar[str] = "eval"
    step: int
    loss: float
    tokens: int


@dataclass(frozen=True)
class Checkpoint(Event):
    type: ClassVar[str] = "checkpoint"
    step: int
    path: str
    kind: str  # "resumable" | "emergency" (resumable, written after a failure) | "adapter" | "merged"


@dataclass(frozen=True)
class RunFinished(Event):
    type: ClassVar[str] = "run_finished"
    step: int
    final_loss: float | None
    adapter_path: str | None
    wall_s: float
    stopped: bool = False  # ended early by a stop request or an observer (after saving a checkpoint)
    stop_reason: str | None = None


@dataclass(frozen=True)
class RunFailed(Event):
    type: ClassVar[str] = "run_failed"
    step: int
    error: str
    error_type: str
    traceback: str = ""
    # The newest checkpoint to resume from (resume_from=latest): the last completed step, saved after the
    # failure so nothing is lost, where the strategy can (one process, DDP); else the last periodic one; or None.
    checkpoint: str | None = None
    # Why saving the last completed step after the failure failed (e.g. a full disk); checkpoint is then the
    # last periodic one, or None. The failure above is still the run's error.
    checkpoint_error: str | None = None


@dataclass(frozen=True)
class PrecisionRules(Event):
    """The per-module precision rules a run applied (user rules, then family defaults) and what each matched."""

    type: ClassVar[str] = "precision_rules"
    step: int
    rules: list  # [{source, pattern, storage, compute, modules: [names, capped], module_count, params_recast, ...}]


@dataclass(frozen=True)
class Coverage(Event):
    """Autocast coverage of one sampled step: matmul FLOPs (forward, 2*in*out*tokens) by output dtype."""

    type: ClassVar[str] = "coverage"
    step: int
    low_precision_share: float | None  # share of matmul FLOPs whose output was fp16/bf16; None if none ran
    flops: float
    groups: dict  # {group: {flops, low_precision_share, dtypes: {dtype: flops}}}
    fp32_modules: list = field(default_factory=list)  # matmul modules that ran in fp32 (capped)


@dataclass(frozen=True)
class OverflowOrigin(Event):
    """Where an overflow step's non-finite values first appeared (traced on a bounded number of overflow steps)."""

    type: ClassVar[str] = "overflow_origin"
    step: int
    phase: str  # forward | backward | loss | parameter_grads | not_reproduced
    module: str | None
    evidence: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Diagnosis(Event):
    """A diagnosed precision failure (e.g. loss-scale collapse): the likely cause and the fix."""

    type: ClassVar[str] = "diagnosis"
    step: int
    kind: str  # scale_collapse
    cause: str
    fix: str
    module: str | None
    evidence: dict = field(default_factory=dict)  # skips in window, scale history, fixes as config overrides
    stopping: bool = False  # the run stops after this event (diagnosis.stop_on_collapse)


@dataclass(frozen=True)
class QatConverted(Event):
    """Quantization-aware training converted: the fake-quantized layers now hold real quantized weights, and how
    far the converted model's logits are from the fake-quantized model's on one batch."""

    type: ClassVar[str] = "qat_converted"
    step: int
    scheme: str  # quantization.qat
    layers: int  # linear layers converted
    max_logit_diff: float  # converted vs fake-quantized, on the batch below
    greedy_agreement: float
    positions: int


@dataclass(frozen=True)
class BaseQuantized(Event):
    """The frozen base's linear layers were quantized (``quantization.base``) before LoRA wrapped them: how many, and
    their bytes before and after (the census then shows them as nf4 / int8 rows)."""

    type: ClassVar[str] = "base_quantized"
    step: int
    kind: str  # nf4 | int8
    layers: int  # linear layers quantized
    weights: int  # elements they hold
    bytes_before: int  # in the 16-bit dtype they were quantized from
    bytes_after: int  # packed weights + quantization constants
    compute_dtype: str  # what they dequantize to for each matmul
    double_quant: bool
    skipped: list  # linear layers left unquantized (quantization.skip_modules)


@dataclass(frozen=True)
class EvalTask(Event):
    """Task metrics of the model being trained (config ``eval.tasks``): one event per task per evaluation."""

    type: ClassVar[str] = "eval_task"
    step: int
    task: str
    metrics: dict  # the task's summary: rates in 0..1, or loss / perplexity for heldout_loss
    wall_s: float


@dataclass(frozen=True)
class Rollout(Event):
    """The rollouts of one GRPO step (``training.method: grpo``; rank 0's under DDP): what the rewards said."""

    type: ClassVar[str] = "rollout"
    step: int
    groups: int  # prompts, each with group_size completions
    group_size: int
    rewards: dict  # {reward name: {mean, std, weight}} of the raw (unweighted) rewards
    reward_mean: float  # the weighted total
    reward_std: float
    all_equal_groups: float  # share of groups whose total rewards are all equal (no learning signal)
    completion_tokens_mean: float
    completion_tokens_max: int
    truncated: float  # share of completions cut at rl.max_new_tokens
    parse_rate: float | None  # share of completions that parse as an action (None: the scorer does not parse)
    # [{prompt, completion, rewards: {name: value}, total, advantage, thumbnail?}]; thumbnail (optional, absent in
    # older logs and for text prompts): the prompt's latest screenshot as a small PNG data: URL (<= 64 px wide)
    samples: list = field(default_factory=list)
    rollout_s: float = 0.0  # seconds spent sampling and scoring
    # rl.max_draws > 1: the micro-batches of prompts drawn this step (all counted above) and the groups with a spread
    # trained on; absent with rl.max_draws 1 and in older logs, where every drawn group was trained
    draws: int | None = None
    trained_groups: int | None = None
    # rl.kl_coef > 0: the k3 estimate of KL(policy || reference) per trained completion token (how far the policy has
    # moved from its start; what the penalty acts on); absent without a reference and in older logs
    reference_kl: float | None = None
    # rl.pool (the task pool, rank 0's view: every rank's is the same): {"families": {family: {success: recent share
    # of successful episodes or None before any, weight: its draw weight, drawn: prompts drawn this step}}, "fresh":
    # fresh instances drawn this step, "replayed": completions replaced by a kept successful reply, "kept": replies
    # kept}; absent without the pool and in older logs
    task_pool: dict | None = None
    # rl.step_advantage_weight > 0: GiGPO's anchor-state groups of the trained steps this step (rank 0's):
    # {anchor_groups, mean_size: members per group, with_spread: groups whose returns differ}; absent without it
    anchors: dict | None = None


@dataclass(frozen=True)
class PolicyMismatch(Event):
    """The training-inference mismatch of one GRPO step: the trainer's log-probabilities of the sampled tokens
    (its forward, its precision) against the sampler's (generation with a KV cache, same weights, same policy)."""

    type: ClassVar[str] = "policy_mismatch"
    step: int
    tokens: int  # completion tokens compared
    mean_abs: float  # mean |logp_sampler - logp_trainer|
    max_abs: float
    ratio_min: float  # importance ratio exp(logp_trainer - logp_sampler): 1 in exact arithmetic
    ratio_max: float
    ratio_std: float  # root mean square of (ratio - 1)
    kl: float  # mean k3 estimate of KL(sampler || trainer) per token
    clipped: float  # share of tokens whose ratio falls outside 1 +- rl.clip_range
    precision: str  # the run's precision mode
    # rl.importance_sampling (truncated importance sampling of the mismatch): the mean weight exp(trainer - sampler)
    # the loss applied per trained token (after the cap) and the share of those tokens the cap truncated or masked;
    # absent without the correction and in older logs
    is_weight_mean: float | None = None
    is_capped: float | None = None


@dataclass(frozen=True)
class DpoRewards(Event):
    """The implicit rewards of one DPO step's pairs (``training.method: dpo``; over all ranks, written by rank 0): a
    reply's reward is dpo.beta x (its log-probability now - the reference's, the model as the run started), summed
    over its tokens, as TRL's DPOTrainer logs rewards/chosen, rewards/rejected, rewards/margins, rewards/accuracies."""

    type: ClassVar[str] = "dpo_rewards"
    step: int
    pairs: int  # the window's pairs, all ranks
    beta: float
    loss_type: str  # sigmoid | ipo
    reward_chosen: float  # mean over the pairs
    reward_rejected: float
    margin: float  # mean of reward_chosen - reward_rejected per pair
    accuracy: float  # share of pairs whose chosen reward exceeds the rejected one
    logp_chosen: float  # the trained model's mean log-probability of the chosen replies (summed over their tokens)
    logp_rejected: float


@dataclass(frozen=True)
class DaggerRound(Event):
    """One round of DAgger (``workbench agent dagger``, logged in ``RUN/dagger/events.jsonl``): the agent played the
    tasks, the expert labelled every state it was asked at, and the model trained on the run's rows and every
    round's labels so far."""

    type: ClassVar[str] = "dagger_round"
    round: int  # 1, 2, ...
    model: str  # the model that played: the run's, then the previous round's
    episodes: int
    success_rate: float | None  # of the episodes it played (agent.metrics.summarize_episodes)
    loop_rate: float | None
    false_finish_rate: float | None
    states: int  # states labelled by the expert this round (rows added)
    kinds: dict  # of them, the ones where the agent left a shortest path: {"loop": n, "false_finish": n, "other": n}
    rows: int  # rows the round trained on (the run's and every round's labels)
    run_dir: str  # the round's training run
    status: str  # its end: finished | stopped | failed
    wall_s: float  # playing, labelling and training


EVENT_TYPES: dict[str, type[Event]] = {
    cls.type: cls
    for cls in (RunStarted, PlanPrediction, Step, Overflow, Census, Memory, Eval, Checkpoint, RunFinished, RunFailed)
}
EVENT_TYPES.update(
    {
        cls.type: cls
        for cls in (
            PrecisionRules,
            Coverage,
            OverflowOrigin,
            Diagnosis,
            QatConverted,
            BaseQuantized,
            EvalTask,
            Rollout,
            PolicyMismatch,
            DpoRewards,
            DaggerRound,
        )
    }
)


def event_from_dict(d: dict[str, Any]) -> Event | dict:
    """The typed event for a logged dict; unknown types come back as the plain dict."""
    cls = EVENT_TYPES.get(d.get("type", ""))
    if cls is None:
        return d
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in d.items() if k in names})
