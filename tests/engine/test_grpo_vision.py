"""GRPO on screenshots: tiny GLM-4V (the agent's tokenizer) on the offline phone's tasks (rl.prompts phone_tasks),
vision rollouts whose pixels reach the trainer's forward, the episode_success reward playing each sampled first
action on with the model being trained, and the text-model refusal naming the field."""

import pytest
import torch

from workbench import train
from workbench.config import ConfigError
from workbench.events import iter_events
from workbench.rewards import register_reward, unregister_reward


def events_of(run_dir, kind):
    return [e for e in iter_events(run_dir / "events.jsonl") if getattr(e, "type", None) == kind]


def phone_grpo(make_cfg, **overrides):
    return make_cfg(
        **{
            "model.source": "tiny-glm4v-agent",
            "lora.enabled": False,
            "training.method": "grpo",
            "data.max_length": 512,
            "schedule.micro_batch_size": 2,
            "schedule.max_steps": 2,
            "rl.prompts": "phone_tasks",
            "rl.tasks": "open_app",
            "rl.screen_size": "112x252",
            "rl.group_size": 2,
            "rl.max_new_tokens": 8,
            "rl.episode_max_steps": 2,
            "rl.rewards": {"format": 1.0, "episode_success": 1.0, "length": 0.1},
            **overrides,
        }
    )


@pytest.fixture(autouse=True)
def length_reward():
    # varies within a group, so an untrained model's advantages are not all 0 and the weights move
    register_reward("length", lambda example, completion, verdict: len(completion) / 10.0)
    yield
    unregister_reward("length")


@pytest.mark.parametrize("mode", ["fp32", "bf16"])
def test_a_grpo_step_on_phone_task_screenshots_plays_episodes_and_trains(make_cfg, mode):
    from workbench.models import load_for_inference

    played = []
    import workbench.rewards.phone_tasks as phone_tasks

    original = phone_tasks.play_episodes

    def spying(prompts, first, continuation, *args):
        episodes = original(prompts, first, continuation, *args)
        played.append((continuation, episodes))
        return episodes

    phone_tasks.play_episodes = spying
    try:
        r = train(phone_grpo(make_cfg, **{"precision.mode": mode, "output.run_name": mode}))
    finally:
        phone_tasks.play_episodes = original
    rollouts, mismatch = events_of(r.run_dir, "rollout"), events_of(r.run_dir, "policy_mismatch")
    assert [e.step for e in rollouts] == [1, 2] and [e.step for e in mismatch] == [1, 2]
    ro = rollouts[0]
    assert set(ro.rewards) == {"format", "episode_success", "length"} and ro.groups == 2
    assert "current_app" in ro.samples[0]["prompt"] and "data:" not in ro.samples[0]["prompt"]  # text, not pixels
    assert all(x["thumbnail"].startswith("data:image/png;base64,") for x in ro.samples)  # read back from the log
    m = mismatch[0]
    # the trainer's forward saw the sampler's pixels and positions: it reproduces the sampler up to rounding
    # (fp32: 4.8e-7 measured, docs/grpo.md's ~1e-6; bf16: 3.0e-3)
    assert m.tokens > 0
    # (bf16: within its rounding; sampler and trainer may round alike: on the runtime's prompts, whose completions
    # here are a few tokens, both steps gave 0)
    worst = max(e.max_abs for e in mismatch)
    assert m.max_abs < 1e-5 and m.kl < 1e-10 if mode == "fp32" else worst < 1e-2 and m.kl < 1e-5
    assert {e.precision for e in mismatch} == {mode}
    # every completion's episode was played on, by the model being trained (not a copy), up to the step limit
    assert len(played) == 2 and all(len(eps) == 4 for _, eps in played)
    continuation, episodes = played[0]
    assert all(1 <= len(ep.steps) <= 2 for ep in episodes)
    # the rollout's episode_success is the played episodes' own outcome
    assert ro.rewards["episode_success"]["mean"] == sum(ep.success for ep in episodes) / len(episodes)
    base = load_for_inference("tiny-glm4v-agent").model.state_dict()
    from safetensors.torch import load_file

    trained = load_file(str(next((r.run_dir / "model").glob("*.safetensors"))))
    moved = [k for k, v in trained.items() if k in base and not torch.equal(v.float(), base[k].float())]
    assert moved, "the rewards' advantages reached no weight"
    # the episodes' player is the model being trained, not a copy: its weights are the trained ones at the end
    live = continuation.model.state_dict()
    assert all(torch.equal(live[k].float(), trained[k].float()) for k in moved), "the player did not train"


def test_phone_tasks_on_a_text_model_are_refused_naming_the_field(make_cfg):
    with pytest.raises(ConfigError, match=r"rl\.prompts: .*text model"):
        train(phone_grpo(make_cfg, **{"model.source": "tiny-glm4", "output.run_name": "text"}))
