#!/usr/bin/env bash
# Issue 55 item 5: does some RL setting beat the SFT start, SFT continued and filtered BC on held-out success by more
# than the spread? Run it once the agent's message format is settled (the SFT start follows the training rows).
#
#   bash scripts/rl_experiment.sh [RUNS_DIR]          # default runs/rl-experiment
#   STEPS=14 START=runs/rl-experiment/sft bash scripts/rl_experiment.sh   # reuse a start, another GRPO length
#
# On 2 CPU cores (fp32): the start ~2 h, each GRPO run ~1.5 h (14 steps), each model's held-out + combos episodes
# ~30 min, the baselines ~1.5 h each (they get the GRPO run's training time). Every command is printed before it runs;
# the tables go to RUNS_DIR/*.txt. nice'd: the machine stays usable.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-runs/rl-experiment}
STEPS=${STEPS:-14}
mkdir -p "$RUNS"
run() { echo "+ $*" >&2; nice -n 10 "$@"; }

# 1. The SFT start, once (its own bench judges it: held-out and combos). Its run is every later step's --start-run.
if [ -z "${START:-}" ]; then
  run .venv/bin/python -m workbench.bench.recipes phone-agent-smollm2 --runs-dir "$RUNS" --json "$RUNS/sft.json" \
    | tee "$RUNS/sft.txt" || true  # its figures may fall outside their windows on the new format: go on
  START=$(ls -d "$RUNS"/phone-agent-smollm2-* | tail -1)
fi

# 2. The recipe as it is, with its baselines: SFT start, SFT continued, filtered BC and GRPO on the same episodes,
#    paired counts, one table (the recipe's goal judged against the best of the three).
#    (another STEPS than the recipe's 14 is a --set: the table is printed, the figures not judged)
SET=()
[ "$STEPS" = 14 ] || SET=(--set "schedule.max_steps=$STEPS")
run .venv/bin/python -m workbench.bench.recipes grpo-phone-agent-smollm2 --start-run "$START" --runs-dir "$RUNS" \
  "${SET[@]}" --json "$RUNS/grpo.json" | tee "$RUNS/grpo.txt" || true

# 3. The mechanisms, one run each from the same start (trained, then judged: the start's episodes are copied by their
#    replay key; compare each with the table of step 2). Each line is one setting on top of the recipe.
variant() {
  local name=$1
  shift
  run .venv/bin/python -m workbench train --recipe grpo-phone-agent-smollm2 --model.source "$START/model" \
    --schedule.max_steps "$STEPS" --output.runs_dir "$RUNS" --output.run_name "grpo-$name" "$@"
  run .venv/bin/python -m workbench.bench.recipes grpo-phone-agent-smollm2 --run "$RUNS/grpo-$name" \
    --json "$RUNS/grpo-$name.json" | tee "$RUNS/grpo-$name.txt" || true
}
variant pool --rl.pool true
variant pool-fresh-replay --rl.pool true --rl.pool_fresh_share 0.5 --rl.pool_replay true
variant step-credit --rl.step_advantage_weight 1.0
variant pool-step-credit --rl.pool true --rl.pool_fresh_share 0.5 --rl.pool_replay true --rl.step_advantage_weight 1.0
variant shortest --rl.rewards '{"episode_shortest": 1.0, "action_type": 0.25, "tap_in_box": 0.25}'
variant draws --rl.pool true --rl.max_draws 3  # the pool's draws, and dynamic sampling for the groups with a spread

# 4. What each changed in the rollouts (the task pool's families, replays, anchor groups), one line per run.
run .venv/bin/python scripts/rl_mechanisms.py --summarize "$RUNS"/grpo-* | tee "$RUNS/rollouts.txt"

# On a GPU (device lends one): the same commands with --precision.mode bf16 (the start recipe's mode); the episodes'
# batches grow to 48 conversations by themselves (agent.policy.default_batch_size). Within a 15-minute lease: step 3's
# `variant pool-step-credit` alone, from a START copied onto the machine, with STEPS=6.
