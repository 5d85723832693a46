"""Short GRPO runs, one per RL mechanism, from one SFT start, and what each changed in the rollout events.

    # the start: the screenshot agent (tiny GLM-4V, ~6 min on 2 CPU cores)
    workbench train --recipe screenshots-to-actions-tiny-glm4v --output.runs_dir runs/rl --output.run_name start
    # the variants (each rl.* setting on top of the recipe grpo-phone-tasks-tiny-glm4v), then the table
    python scripts/rl_mechanisms.py --start runs/rl/start --runs-dir runs/rl --steps 6
    # only the table, of runs made before
    python scripts/rl_mechanisms.py --summarize runs/rl/rl-plain runs/rl/rl-pool ...

Each variant is ``workbench train --recipe RECIPE --model.source START/model --schedule.max_steps STEPS`` plus its
flags (printed as it starts); the table reads each run's events: the weighted reward, the share of groups without a
spread, the task pool's per-family success and draws, the replayed completions, GiGPO's anchor groups, the
importance-sampling weights. A mechanism's figures here say what it did to the rollouts, not whether it helps:
that is the recipe bench's held-out episodes (docs/rl_task_pool.md).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

VARIANTS = {
    "plain": [],
    "pool": ["--rl.pool", "true"],
    "pool-fresh-replay": ["--rl.pool", "true", "--rl.pool_fresh_share", "0.5", "--rl.pool_replay", "true"],
    "step-credit": ["--rl.step_advantage_weight", "1.0"],
    "shortest": ["--rl.rewards", '{"episode_shortest": 1.0, "action_type": 0.25, "tap_in_box": 0.25}'],
    "dr-grpo-masked-is": [
        "--rl.loss_type",
        "dr_grpo",
        "--rl.mask_truncated_completions",
        "true",
        "--rl.importance_sampling",
        "token_truncate",
    ],
}


def train(recipe: str, start: Path, runs_dir: Path, steps: int, name: str, flags: list[str]) -> Path:
    command = [
        sys.executable,
        "-m",
        "workbench",
        "train",
        "--recipe",
        recipe,
        "--model.source",
        str(start / "model"),
        "--schedule.max_steps",
        str(steps),
        "--output.runs_dir",
        str(runs_dir),
        "--output.run_name",
        f"rl-{name}",
        "--output.progress_bar",
        "false",
        *flags,
    ]
    print("$", " ".join(command[1:]), flush=True)
    subprocess.run(command, check=True, env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")})
    return runs_dir / f"rl-{name}"


def summary(run_dir: Path) -> dict:
    """What a GRPO run's rollout and mismatch events say, over its steps."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from workbench.events import iter_events

    events = list(iter_events(run_dir / "events.jsonl"))
    rollouts = [e for e in events if getattr(e, "type", None) == "rollout"]
    mismatch = [e for e in events if getattr(e, "type", None) == "policy_mismatch"]
    steps = [e for e in events if getattr(e, "type", None) == "step"]
    out = {
        "run": run_dir.name,
        "steps": len(rollouts),
        "reward": statistics.mean(r.reward_mean for r in rollouts) if rollouts else None,
        "all_equal": statistics.mean(r.all_equal_groups for r in rollouts) if rollouts else None,
        "grad0": sum(s.grad_norm == 0 for s in steps),
    }
    episodes = [r.rewards.get("episode_success", {}).get("mean") for r in rollouts]
    out["success"] = statistics.mean(episodes) if episodes and None not in episodes else None
    pools = [r.task_pool for r in rollouts if r.task_pool]
    if pools:
        last = pools[-1]["families"]
        out["pool"] = {
            f: (None if v["success"] is None else round(v["success"], 2), round(v["weight"], 2))
            for f, v in last.items()
        }
        out["drawn"] = {f: sum(p["families"][f]["drawn"] for p in pools) for f in last}
        out["fresh"], out["replayed"] = sum(p["fresh"] for p in pools), sum(p["replayed"] for p in pools)
    anchors = [r.anchors for r in rollouts if r.anchors]
    if anchors:
        out["anchor_groups"] = sum(a["anchor_groups"] for a in anchors)
        out["anchors_with_spread"] = sum(a["with_spread"] for a in anchors)
        out["anchor_size"] = statistics.mean(a["mean_size"] for a in anchors)
    corrected = [m for m in mismatch if m.is_weight_mean is not None]
    if corrected:
        out["is_weight_mean"] = statistics.mean(m.is_weight_mean for m in corrected)
        out["is_capped"] = statistics.mean(m.is_capped for m in corrected)
    out["mismatch_mean_abs"] = statistics.mean(m.mean_abs for m in mismatch) if mismatch else None
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--start", type=Path, help="the SFT run the variants start from (its model/)")
    ap.add_argument("--runs-dir", type=Path, default=Path("runs/rl"))
    ap.add_argument("--recipe", default="grpo-phone-tasks-tiny-glm4v")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--only", nargs="*", choices=list(VARIANTS), help="these variants only (default: all)")
    ap.add_argument("--summarize", nargs="*", type=Path, help="only print the table of these runs")
    args = ap.parse_args(argv)
    runs = args.summarize
    if not runs:
        if args.start is None:
            ap.error("give --start RUN (or --summarize RUN ...)")
        runs = [
            train(args.recipe, args.start, args.runs_dir, args.steps, name, VARIANTS[name])
            for name in (args.only or VARIANTS)
        ]
    for run in runs:
        print(summary(run))
    return 0


if __name__ == "__main__":
    sys.exit(main())
