"""The GRPO step of the engine (``training.method: grpo``): rollouts sampled by the model being trained, scored by
the rewards the run was given, one optimizer step on the clipped, token-normalised surrogate.

The engine imports no reward: whoever starts the run (``workbench.training``) passes a ``RolloutScorer``, an object
with the prompts and a call that scores completions (and, for phone tasks, optionally a task pool that draws the
prompts, and each completion's step advantage: ``rewards.task_pool``, ``rewards.credit``). Per optimizer step, for each of ``grad_accum_steps``
micro-batches, ``micro_batch_size`` prompts (this rank's slice of the data stream, as SFT takes rows) each get
``rl.group_size`` completions, sampled in one batch under the run's precision policy with each token's
log-probability kept as the sampler computed it. The trainer's forward recomputes those log-probabilities (same
weights, full sequence, gradients on); the arithmetic is ``engine.grpo_loss``, the divisor the SFT one.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol

import torch

from ..config import ConfigError, RunConfig
from ..events.schema import PolicyMismatch, Rollout
from ..forward import token_logprobs
from ..forward.generate import Rollouts, model_stop_token_ids, sample_completions
from ..image_io import resolve_images
from ..precision import window_loss_divisor
from ..stats import rate
from .grpo_loss import (
    Mismatch,
    all_equal_groups,
    group_advantages,
    groups_with_spread,
    grpo_loss_sum,
    importance_stats,
    importance_weights,
    loss_normalisation,
    mismatch_stats,
    reference_kl_sum,
)
from .step import Accumulated, Trainee


@dataclass
class ScoredCompletions:
    """What a scorer says of a batch of completions: each reward function's raw value per completion, and per
    completion whether it parsed (None where the scorer has no notion of parsing); a scorer that plays episodes
    also says which succeeded (``successes``: the task pool's tallies) and, with rl.step_advantage_weight > 0, each
    completion's step advantage and what its anchor groups were (``rewards.credit``)."""

    rewards: dict[str, list[float]]
    parsed: list[bool] | None = None
    successes: list[bool] | None = None
    step_advantages: list[float] | None = None
    anchors: dict | None = None  # {anchor_groups, mean_size, with_spread}


class RolloutScorer(Protocol):
    """What scores a run's rollouts. Optionally it also has ``attach(policy: TrainedPolicy)``, called once the
    model is built: a reward that needs the model being trained (an episode the model plays on after its sampled
    first action) gets it there; ``thumbnail(prompt) -> Optional[str]``, a small image data: URL of the
    prompt shown beside its logged samples; and ``pool`` (``rewards.task_pool.TaskPool``, rl.pool): then the pool
    draws the prompts (``draw``), follows the successes (``tally`` summed over ranks, ``update``), keeps and replays
    successful replies (``remember``, ``kept_reply``), and reports and saves its state."""

    prompts: Sequence  # items with .messages (the conversation up to the answer; screenshots as data: URLs)

    def __call__(self, prompts: list, completions: list[str]) -> ScoredCompletions: ...

    def describe(self, prompt) -> str: ...  # a short text of a prompt for the samples table


@dataclass(frozen=True)
class TrainedPolicy:
    """The model being trained, as a scorer may use it: the unwrapped module, its tokenizer and processor (None for
    a text model), the run's precision policy's autocast."""

    model: torch.nn.Module
    tokenizer: object
    processor: object
    autocast: object


@dataclass
class _Window:
    rollouts: Rollouts
    prompts: list
    scored: ScoredCompletions
    total: torch.Tensor
    advantages: torch.Tensor
    replayed: list[bool] | None = None  # rows whose completion the task pool replayed (rl.pool_replay)

    def groups(self, keep: list[int], group_size: int) -> _Window:
        """This window restricted to the groups ``keep`` (their advantages are within-group: unchanged)."""
        rows = [g * group_size + j for g in keep for j in range(group_size)]
        pick = lambda values: None if values is None else [values[i] for i in rows]  # noqa: E731
        scored = ScoredCompletions(
            {n: pick(v) for n, v in self.scored.rewards.items()},
            pick(self.scored.parsed),
            pick(self.scored.successes),
            pick(self.scored.step_advantages),
            self.scored.anchors,
        )
        idx = torch.tensor(rows, dtype=torch.long)
        return _Window(
            self.rollouts.rows(rows),
            [self.prompts[i] for i in rows],
            scored,
            self.total[idx],
            self.advantages[idx],
            pick(self.replayed),
        )

    def sampler_logprobs(self, logp: torch.Tensor) -> torch.Tensor:
        """The log-probabilities the old policy gave the completions: the sampler's, and for a replayed row the
        trainer's own (``logp``, detached: no sampler drew it this step)."""
        r = self.rollouts
        if not self.replayed or not any(self.replayed):
            return r.sampler_logprobs
        rows = torch.tensor(self.replayed, device=logp.device).unsqueeze(1)
        return torch.where(rows, logp.detach(), r.sampler_logprobs)

    def sampled_mask(self, mask: torch.Tensor) -> torch.Tensor:
        """``mask`` without the replayed rows: the tokens a sampler drew (what the mismatch measures)."""
        if not self.replayed or not any(self.replayed):
            return mask
        return mask * (~torch.tensor(self.replayed, device=mask.device)).to(mask.dtype).unsqueeze(1)


def _mean_std(values: list[float]) -> tuple[float, float]:
    t = torch.tensor(values, dtype=torch.float64)
    return float(t.mean()), float(t.std(unbiased=False))


class GrpoStep:
    """GRPO's part of an optimizer step (``TrainingStep``; ``accumulate``: rollouts, rewards, the backward of every
    micro-batch); the engine then takes the optimizer step as for SFT. It sees the run only through its ``Trainee``."""

    reads_pairs: ClassVar[bool] = False  # data.train is loaded as rows (preference pairs: DPO)

    def __init__(self, cfg: RunConfig, trainee: Trainee, scorer: RolloutScorer):
        self.cfg, self.t, self.scorer = cfg, trainee, scorer
        attach = getattr(scorer, "attach", None)
        if attach is not None:
            attach(TrainedPolicy(trainee.module, trainee.tokenizer, trainee.processor, trainee.precision.autocast))
        self.vllm = None  # rl.rollout_engine vllm: the server sampling the rollouts (stopped when the process ends)
        if self.cfg.rl.rollout_engine == "vllm":
            from .vllm_rollouts import VllmRollouts

            self.vllm = VllmRollouts(
                self.cfg,
                trainee.precision,
                trainee.tokenizer,
                model_stop_token_ids(trainee.module, trainee.tokenizer),
                trainee.device,
            )

        self.pool = getattr(scorer, "pool", None)  # rl.pool: the scorer's task pool draws the prompts
        self.step = 0

    @classmethod
    def for_run(cls, cfg: RunConfig, trainee: Trainee, examples: Sequence, scorer: RolloutScorer | None) -> GrpoStep:
        """The GRPO step of a run, on the prompts of its ``scorer`` (the training rows are not its data);
        ConfigError naming the field for a run it cannot train."""
        if scorer is None:
            raise ConfigError(
                [
                    (
                        "training.method",
                        "grpo needs rewards to score the rollouts: start the run through "
                        "workbench.train (or the CLI), which composes the rewards of rl.rewards",
                    )
                ]
            )
        if cfg.rl.prompts == "phone_tasks" and trainee.processor is None and cfg.rl.observation != "ui_tree":
            raise ConfigError(
                [
                    (
                        "rl.prompts",
                        f"phone_tasks prompts are screenshots, and {cfg.model.source!r} is "
                        "a text model (no processor): use a vision-language model (e.g. tiny-glm4v-agent), "
                        "rl.observation ui_tree (the screen as text) or rl.prompts rows",
                    )
                ]
            )
        if not scorer.prompts:
            raise ConfigError([("data.train", "no prompts to sample rollouts for")])
        return cls(cfg, trainee, scorer)

    @property
    def rows(self) -> int:
        return len(self.scorer.prompts)

    def resume_state(self) -> dict:
        """What an exact resume needs beyond weights and the stream: the task pool's state."""
        return {"task_pool": self.pool.state_dict()} if self.pool is not None else {}

    def restore(self, state: dict) -> None:
        if self.pool is not None and state.get("task_pool"):
            self.pool.load_state_dict(state["task_pool"])

    def _draw(self, stream, draw: int) -> list:
        """This rank's prompts of the next global micro-batch: the stream's (the data order), or with the task pool
        its own draw, the same on every rank for the run's seed, the step and the draw (the stream is still
        advanced: its position counts the micro-batches taken)."""
        mbs, rank = self.cfg.schedule.micro_batch_size, self.t.world.rank
        idx = next(stream)[rank * mbs : (rank + 1) * mbs]  # this rank's slice of the global micro-batch of prompts
        if self.pool is None:
            return [self.scorer.prompts[i] for i in idx]
        return self.pool.draw(
            mbs * self.t.world.world_size,
            (self.cfg.schedule.seed, self.step, draw),
            slice(rank * mbs, (rank + 1) * mbs),
        )

    def _rollout(self, prompts: list) -> _Window:
        t, rl = self.t, self.cfg.rl
        if self.vllm is not None:
            rollouts = self.vllm.sample([p.messages for p in prompts], rl.group_size, rl.max_new_tokens, rl.temperature)
            window = self._scored(prompts, rollouts)
            return self._followed(window) if self.pool is not None else window
        # screenshots travel inline (data: URLs) and are decoded here, for the processor (a text model has none)
        rollouts = sample_completions(
            t.module,
            t.tokenizer,
            [resolve_images(p.messages) for p in prompts],
            rl.group_size,
            rl.max_new_tokens,
            temperature=rl.temperature,
            autocast=t.precision.autocast,
            processor=t.processor,
        )
        window = self._scored(prompts, rollouts)
        return self._followed(window) if self.pool is not None else window

    def _scored(self, prompts: list, rollouts: Rollouts) -> _Window:
        rl = self.cfg.rl
        expanded = [p for p in prompts for _ in range(rl.group_size)]
        scored = self.scorer(expanded, rollouts.texts)
        missing = [name for name in rl.rewards if name not in scored.rewards]
        if missing:
            raise RuntimeError(f"the rollout scorer gave no values for rl.rewards {missing}")
        return self._advantaged(_Window(rollouts, expanded, scored, torch.zeros(0), torch.zeros(0)))

    def _advantaged(self, w: _Window) -> _Window:
        """``w`` with its totals (the rewards weighted) and advantages: the episode's within its group, plus with
        rl.step_advantage_weight the sampled step's within its anchor group (``ScoredCompletions.step_advantages``)."""
        rl = self.cfg.rl
        w.total = torch.zeros(len(w.prompts), dtype=torch.float64)
        for name, weight in rl.rewards.items():
            w.total += weight * torch.tensor(w.scored.rewards[name], dtype=torch.float64)
        w.advantages = group_advantages(w.total, rl.group_size, scale=rl.scale_rewards == "group")
        if rl.step_advantage_weight > 0 and w.scored.step_advantages is not None:
            w.advantages = w.advantages + rl.step_advantage_weight * torch.tensor(
                w.scored.step_advantages, dtype=w.advantages.dtype
            )
        return w

    def _followed(self, w: _Window) -> _Window:
        """The task pool's part of a drawn window (rl.pool): the replies that succeeded kept, the groups that all
        failed given a kept reply (rl.pool_replay), and every rank's successes summed into the pool's weights."""
        pool, rl = self.pool, self.cfg.rl
        successes = w.scored.successes or [False] * len(w.prompts)
        # the agent's own episodes move the weights (a replayed success is not one of them)
        pool.update(self.t.world.sum(pool.tally(w.prompts, successes)))
        replace = {}
        for i, ok in enumerate(successes):
            if ok:
                pool.remember(w.prompts[i], w.rollouts.completion_ids(i))
        for g in range(0, len(w.prompts), rl.group_size):
            kept = pool.kept_reply(w.prompts[g])
            if kept is not None and not any(successes[g : g + rl.group_size]):
                replace[g + rl.group_size - 1] = kept
        return self._replayed(w, replace) if replace else w

    def _replayed(self, w: _Window, replace: dict[int, list[int]]) -> _Window:
        """``w`` with the kept replies of ``replace`` (row -> token ids) in place of those rows' completions, the
        window scored again (the replayed episodes played with the model as it is now)."""
        t = self.t
        rollouts = w.rollouts.replaced(replace, t.tokenizer, model_stop_token_ids(t.module, t.tokenizer))
        scored = self.scorer(w.prompts, rollouts.texts)
        self.pool.replayed += len(replace)
        return self._advantaged(
            _Window(rollouts, w.prompts, scored, w.total, w.advantages, [i in replace for i in range(len(w.prompts))])
        )

    def accumulate(self, stream: Iterator[Sequence[int]], step: int) -> Accumulated:
        """The rollouts and backward of optimizer step ``step`` (1-based): this rank's loss sum, what the window's
        loss sum is divided by over all ranks (``rl.loss_type``), the window's trained completion tokens over all
        ranks, this rank's processed tokens, and the step's rollout and policy-mismatch events."""
        t, rl = self.t, self.cfg.rl
        t0 = time.perf_counter()
        self.step = step
        if self.vllm is not None:  # the adapter as this step starts reaches vLLM under a new name
            self.vllm.push_adapter(t.module, step)
        drawn, windows = [], []  # every window sampled (the rollout event's rewards), the ones trained on
        for _ in range(self.cfg.schedule.grad_accum_steps):
            windows += self._micro_batch(stream, drawn)
        rollout_s = time.perf_counter() - t0
        masks = [self._trained_mask(w.rollouts) for w in windows]
        local_tokens = sum(int(m.sum()) for m in masks)
        processed = sum(int(w.rollouts.attention_mask.sum()) for w in windows)
        row_weights, count = loss_normalisation(rl.loss_type, masks, rl.max_new_tokens)
        window_tokens, count = (int(v) for v in t.world.sum([local_tokens, count]))
        divisor = window_loss_divisor(max(count, 1), t.world.world_size)  # all masked (truncated): the loss is 0
        parts, mismatches, weighted, reference_kl = [], [], [], 0.0
        for i, (w, mask, rows) in enumerate(zip(windows, masks, row_weights)):
            r = w.rollouts
            with t.accumulating(i == len(windows) - 1):
                logp = token_logprobs(
                    t.forward,
                    r.batch(),
                    t.precision.autocast,
                    rl.temperature,
                    last=r.completion_width,
                    suppress=r.suppressed,
                )
                ref = self._reference_logprobs(r) if rl.kl_coef > 0 else None
                old = sampler = w.sampler_logprobs(logp)
                is_weights = None
                if rl.importance_sampling != "none":  # the trainer is the old policy, the mismatch a weight
                    old = logp.detach()
                    is_weights = importance_weights(logp, sampler, rl.importance_sampling, rl.importance_sampling_cap)
                    weighted.append(importance_stats(is_weights, logp, sampler, mask, rl.importance_sampling_cap))
                part = grpo_loss_sum(
                    logp,
                    old,
                    w.advantages.to(logp.device),
                    mask,
                    rl.clip_range,
                    rl.kl_coef,
                    ref,
                    rows.to(logp.device),
                    is_weights,
                )
                t.backward(part / divisor)
                if ref is not None:
                    reference_kl += reference_kl_sum(logp, ref, mask)
            parts.append(part.detach())
            mismatches.append(mismatch_stats(logp, sampler, w.sampled_mask(r.completion_mask), rl.clip_range))
        loss_sum = float(torch.stack(parts).double().sum())
        # rl.kl_coef > 0 on every rank alike: the reference forward is done anyway, and the sum is one collective
        kl = float(t.world.sum([reference_kl])[0]) / max(window_tokens, 1) if rl.kl_coef > 0 else None
        events = (self._rollout_event(drawn, windows, rollout_s, kl), self._mismatch_event(mismatches, weighted))
        return Accumulated(loss_sum, count, window_tokens, processed, events)

    def _trained_mask(self, r: Rollouts) -> torch.Tensor:
        """The completion tokens the loss counts: all, or with rl.mask_truncated_completions none of a completion
        cut at rl.max_new_tokens (DAPO's overlong filter: its reward says nothing of a finished answer)."""
        if not self.cfg.rl.mask_truncated_completions:
            return r.completion_mask
        stopped = torch.tensor(r.stopped, dtype=r.completion_mask.dtype, device=r.completion_mask.device)
        return r.completion_mask * stopped.unsqueeze(1)

    def _micro_batch(self, stream, drawn: list) -> list[_Window]:
        """One micro-batch's windows to train on. rl.max_draws 1: the prompts drawn, every group. Above 1: the
        groups with a spread of each draw, drawing again while all ranks together hold fewer than
        micro_batch_size groups each and draws are left (every rank draws as often, so the stream stays one);
        when no draw had a spread, the last as drawn (advantages 0: a backward on every rank all the same)."""
        t, rl = self.t, self.cfg.rl
        mbs = self.cfg.schedule.micro_batch_size
        kept = []
        for _ in range(rl.max_draws):
            window = self._rollout(self._draw(stream, len(drawn)))
            drawn.append(window)
            if rl.max_draws == 1:
                return [window]
            spread = groups_with_spread(window.total, rl.group_size)
            if spread:
                kept.append(window.groups(spread, rl.group_size))
            held = int(t.world.sum([sum(len(w.total) // rl.group_size for w in kept)])[0])
            if held >= mbs * t.world.world_size:
                break
        return kept or [drawn[-1]]

    @torch.no_grad()
    def _reference_logprobs(self, r: Rollouts) -> torch.Tensor:
        """The reference policy's log-probabilities: the base model, the LoRA adapter disabled (no second copy)."""
        t = self.t
        with t.module.disable_adapter():
            return token_logprobs(
                t.forward,
                r.batch(),
                t.precision.autocast,
                self.cfg.rl.temperature,
                last=r.completion_width,
                suppress=r.suppressed,
            )

    # ---- the step's events (rank 0 writes them; the mismatch is summed over ranks) ---------------------------
    def _rollout_event(
        self, windows: list[_Window], trained: list[_Window], rollout_s: float, reference_kl: float | None
    ) -> Rollout:
        """The step's rollouts: the rewards of every window drawn (``windows``), with rl.max_draws > 1 how many
        were drawn and how many groups with a spread were trained on (of ``trained``), and with rl.kl_coef > 0
        the policy's KL to its reference on the trained tokens."""
        rl = self.cfg.rl
        total = torch.cat([w.total for w in windows])
        rewards = {}
        for name, weight in rl.rewards.items():
            mean, std = _mean_std([v for w in windows for v in w.scored.rewards[name]])
            rewards[name] = {"mean": mean, "std": std, "weight": weight}
        lengths = [n for w in windows for n in w.rollouts.lengths]
        parsed = [p for w in windows for p in (w.scored.parsed or [])]
        truncated = [not stopped for w in windows for stopped in w.rollouts.stopped]
        samples, thumbnails = [], getattr(self.scorer, "thumbnail", None)
        for w in windows:
            for j in range(0, len(w.prompts), rl.group_size):  # one completion of each group first
                if len(samples) >= rl.samples_logged:
                    break
                sample = {
                    "prompt": self.scorer.describe(w.prompts[j]),
                    "completion": w.rollouts.texts[j],
                    "rewards": {n: w.scored.rewards[n][j] for n in rl.rewards},
                    "total": float(w.total[j]),
                    "advantage": float(w.advantages[j]),
                }
                thumbnail = thumbnails(w.prompts[j]) if thumbnails else None
                if thumbnail:  # only prompts with an image have one
                    sample["thumbnail"] = thumbnail
                samples.append(sample)
        mean, std = float(total.mean()), float(total.std(unbiased=False))
        anchors = [w.scored.anchors for w in windows if w.scored.anchors]
        credit = (
            {}
            if not anchors
            else {
                "anchors": {
                    "anchor_groups": sum(a["anchor_groups"] for a in anchors),
                    "with_spread": sum(a["with_spread"] for a in anchors),
                    "mean_size": sum(a["mean_size"] * a["anchor_groups"] for a in anchors)
                    / max(1, sum(a["anchor_groups"] for a in anchors)),
                }
            }
        )
        if self.pool is not None:
            credit["task_pool"] = self.pool.event_state()
        return Rollout(
            step=0,
            groups=len(total) // rl.group_size,
            group_size=rl.group_size,
            rewards=rewards,
            reward_mean=mean,
            reward_std=std,
            all_equal_groups=all_equal_groups(total, rl.group_size),
            completion_tokens_mean=sum(lengths) / len(lengths),
            completion_tokens_max=max(lengths),
            truncated=sum(truncated) / len(truncated),
            parse_rate=rate(parsed),
            samples=samples,
            rollout_s=rollout_s,
            reference_kl=reference_kl,
            **credit,
            **(
                {}
                if rl.max_draws == 1
                else {
                    "draws": len(windows),
                    "trained_groups": sum(len(groups_with_spread(w.total, rl.group_size)) for w in trained),
                }
            ),
        )

    def _mismatch_event(self, ms: list[Mismatch], weighted: list[tuple[float, int, int]]) -> PolicyMismatch:
        """The step's mismatch over all ranks; with rl.importance_sampling, the weights it applied: their mean over
        the trained tokens and the share of tokens the cap truncated (or masked)."""
        t, rl = self.t, self.cfg.rl
        sums = [sum(m.as_sums()[k] for m in ms) for k in range(5)] + [sum(w[k] for w in weighted) for k in range(3)]
        tokens, abs_sum, sq_dev, kl_sum, clipped, is_sum, is_capped, is_tokens = t.world.sum(sums)
        tokens = max(int(tokens), 1)
        corrected = (
            {}
            if rl.importance_sampling == "none"
            else {"is_weight_mean": is_sum / max(is_tokens, 1), "is_capped": is_capped / max(is_tokens, 1)}
        )
        return PolicyMismatch(
            step=0,
            tokens=int(tokens),
            mean_abs=abs_sum / tokens,
            max_abs=max(m.abs_max for m in ms),
            ratio_min=min(m.ratio_min for m in ms),
            ratio_max=max(m.ratio_max for m in ms),
            ratio_std=math.sqrt(sq_dev / tokens),
            kl=kl_sum / tokens,
            clipped=clipped / tokens,
            precision=t.precision.mode,
            **corrected,
        )
