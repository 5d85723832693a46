#!/usr/bin/env bash
# The recipes whose figures take longer than CI has, trained from scratch and held to their figures (exit 1 outside a
# tolerance), as a nightly-style opt-in run on a 2-core CPU (about an hour; docs/development.md):
#   bash scripts/nightly.sh            # set up (scripts/setup.sh), then .ci/run's nightly steps
#   bash scripts/nightly.sh agent      # one of them: agent, phone_actions, qlora_demo
# - agent: phone-agent-smollm2-short, the text agent trained on 2 DDP processes and judged by whole held-out episodes
#   (needs native bf16, AVX512-BF16 or AMX: on another CPU it says so and runs nothing);
# - phone_actions: phone-actions-smollm2, SmolLM2 answering one phone action per screen;
# - qlora_demo: identity-demo-qlora, the demo over an nf4 base.
# Each step's time is compared with .ci/durations.json's "nightly" times, as CI's are with its "steps".
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec bash .ci/run "${@:-nightly}"
