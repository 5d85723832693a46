"""The RL task pool (``rl.pool``): which phone tasks GRPO samples, following how the agent does on them.

MobileRL's AdaGRPO (arXiv 2509.18119) and ARPO (arXiv 2505.16282) raise success over an SFT start by choosing the
tasks trained, not by changing the optimiser. The pool does three things, each a setting:

* **Draws by recent success.** Tasks are grouped in families (their template: ``open_app``, ``send_message``...);
  each family's recent success is the share of its last ``rl.pool_window`` played episodes that succeeded, and a
  family is drawn with weight ``floor + (1 - floor) x (1 - success)`` (``rl.pool_floor``): a solved family less, a
  failing one more, none never. A family never played yet counts as failing (weight 1).
* **Fresh instances** (``rl.pool_fresh_share``): that share of the draws is a new task of the family on a phone of
  new names (``phone.fresh``: contacts, songs, photos, app labels) with new texts, never a held-out value
  (``phone.tasks.more_training_tasks``): a template the agent solves on its trained names still yields instances
  it does not. The rest are tasks of ``rl.tasks``.
* **Replay** (``rl.pool_replay``): each reply that led to a successful episode is kept per prompt (its task and
  step); a later group of that prompt whose episodes all failed has its last completion replaced by the kept reply
  (played again, scored again): a group with no spread gets one (ARPO's per-task replay). Trained as on-policy (its
  old log-probabilities are the trainer's own: ratio 1), since no sampler drew it this step.

Every rank draws the same global micro-batch from the same seed (the run's seed, the step, the draw) and builds only
its own slice; the tallies of success are summed over ranks before the weights move, so every rank's pool is the
same. Its state (per family: recent outcomes; the kept replies) rides in each resumable checkpoint.
"""

from __future__ import annotations

import collections
import hashlib
import random

from ..phone.tasks import TEMPLATES, PhoneTask, more_training_tasks
from ..stats import mean


def family(task: PhoneTask) -> str:
    """A task's family in the pool: its template."""
    return task.template


def prompt_key(prompt) -> str:
    """What identifies a prompt for replay: its task and the step it asks for."""
    return f"{prompt.task.id}#{sum(1 for m in prompt.messages if m['role'] == 'assistant')}"


class TaskPool:
    """The pool over ``prompts`` (``rewards.phone_tasks.TaskPrompt`` items of rl.tasks); ``make_prompts(tasks)``
    builds the prompts of new tasks (every step, or the first, as rl.prompt_steps says)."""

    def __init__(self, prompts: list, make_prompts, *, floor: float, window: int, fresh_share: float, replay: bool):
        self.make_prompts, self.floor, self.window = make_prompts, floor, window
        self.fresh_share, self.replay_on = fresh_share, replay
        self.by_family: dict[str, list] = collections.defaultdict(list)
        for p in prompts:
            self.by_family[family(p.task)].append(p)
        self.families = sorted(self.by_family)
        self.recent: dict[str, collections.deque] = {f: collections.deque(maxlen=window) for f in self.families}
        self.kept: dict[str, list[int]] = {}  # prompt key -> token ids of a reply whose episode succeeded
        self.drawn = collections.Counter()  # this step's draws per family (the event's)
        self.fresh_drawn = 0
        self.replayed = 0

    # ---- the weights ---------------------------------------------------------------------------------------
    def success(self, fam: str) -> float | None:
        return mean(self.recent[fam])

    def weight(self, fam: str) -> float:
        s = self.success(fam)
        return self.floor + (1.0 - self.floor) * (1.0 - (0.0 if s is None else s))

    def probabilities(self) -> dict[str, float]:
        weights = {f: self.weight(f) for f in self.families}
        total = sum(weights.values())
        return {f: w / total for f, w in weights.items()}

    # ---- drawing -------------------------------------------------------------------------------------------
    def draw(self, count: int, seed: tuple, keep: slice) -> list:
        """``count`` prompts of one global micro-batch, the same on every rank for the same ``seed``; only those of
        ``keep`` (this rank's slice) are built."""
        rng = random.Random(hashlib.sha256(repr(seed).encode()).hexdigest())
        probs = self.probabilities()
        plan = []
        for _ in range(count):
            fam = rng.choices(self.families, weights=[probs[f] for f in self.families])[0]
            fresh = rng.random() < self.fresh_share
            plan.append((fam, fresh, rng.randrange(2**31), rng.random()))
        prompts = [self._prompt(*slot) for slot in plan[keep]]
        for fam, fresh, _, _ in plan:
            self.drawn[fam] += 1
            self.fresh_drawn += fresh
        return prompts

    def _prompt(self, fam: str, fresh: bool, seed: int, pick: float):
        if fresh:
            task = fresh_instance(fam, seed)
            if task is not None:
                candidates = self.make_prompts([task])
                return candidates[int(pick * len(candidates))]
        candidates = self.by_family[fam]
        return candidates[int(pick * len(candidates))]

    # ---- what the episodes said ----------------------------------------------------------------------------
    def tally(self, prompts: list, successes: list[bool]) -> list[float]:
        """This rank's outcomes as a vector to sum over ranks: per family (in order) the episodes and successes."""
        out = [0.0] * (2 * len(self.families))
        index = {f: i for i, f in enumerate(self.families)}
        for p, ok in zip(prompts, successes):
            i = index.get(family(p.task))
            if i is not None:
                out[2 * i] += 1
                out[2 * i + 1] += bool(ok)
        return out

    def update(self, summed: list[float]) -> None:
        """Every rank's outcomes of a draw (``tally`` summed): into each family's recent window."""
        for i, fam in enumerate(self.families):
            episodes, wins = int(summed[2 * i]), int(summed[2 * i + 1])
            # spread evenly: a window shorter than one draw keeps the draw's share, not its last kind
            self.recent[fam].extend(int((k + 1) * wins // episodes > k * wins // episodes) for k in range(episodes))

    # ---- replay --------------------------------------------------------------------------------------------
    def remember(self, prompt, token_ids: list[int]) -> None:
        if self.replay_on:
            self.kept[prompt_key(prompt)] = list(token_ids)

    def kept_reply(self, prompt) -> list[int] | None:
        return self.kept.get(prompt_key(prompt)) if self.replay_on else None

    # ---- the event and the checkpoint ----------------------------------------------------------------------
    def event_state(self) -> dict:
        """Per family: recent success (None before any episode), draw weight, this step's draws; then this step's
        fresh instances and replayed groups. Resets the step's counts."""
        state = {
            "families": {
                f: {"success": self.success(f), "weight": round(self.weight(f), 4), "drawn": self.drawn[f]}
                for f in self.families
            },
            "fresh": self.fresh_drawn,
            "replayed": self.replayed,
            "kept": len(self.kept),
        }
        self.drawn, self.fresh_drawn, self.replayed = collections.Counter(), 0, 0
        return state

    def state_dict(self) -> dict:
        return {"recent": {f: list(d) for f, d in self.recent.items()}, "kept": dict(self.kept)}

    def load_state_dict(self, state: dict) -> None:
        for f, outcomes in (state.get("recent") or {}).items():
            if f in self.recent:
                self.recent[f] = collections.deque(outcomes, maxlen=self.window)
        self.kept = {k: list(v) for k, v in (state.get("kept") or {}).items()}


def fresh_instance(template: str, seed: int) -> PhoneTask | None:
    """A new training task of ``template`` on a phone of new names (``more_training_tasks`` with every phone fresh,
    one task of each of its templates drawn for ``seed``); None for a template it has none of (held out whole)."""
    tasks = more_training_tasks(len(TEMPLATES), seed + 1, fresh_phones=1.0)  # seed 0 would be the built-in draw
    return next((t for t in tasks if t.template == template), None)
