"""The GRPO part of the run configuration: training.method and the rl section, each problem named by field path."""
import pytest

from workbench.config import ConfigError, config_from_dict, load_config


def problems_of(data) -> dict[str, str]:
    with pytest.raises(ConfigError) as exc:
        config_from_dict(data)
    return dict(exc.value.problems)


def test_grpo_defaults_are_valid_and_sft_stays_the_default():
    assert load_config(None, {}).training.method == "sft"
    cfg = load_config(None, {"training.method": "grpo", "lora.dropout": 0.0,
                             "rl.rewards": {"format": 0.5, "tap_in_box": 1}})
    assert cfg.rl.group_size == 4 and cfg.rl.kl_coef == 0.0 and cfg.rl.rewards == {"format": 0.5, "tap_in_box": 1.0}


@pytest.mark.parametrize("data,path,word", [
    ({"rl": {"rewards": {"format": 1, "nope": 2}}}, "rl.rewards", "unknown reward 'nope'"),
    ({"rl": {"rewards": {}}}, "rl.rewards", "at least one reward"),
    ({"rl": {"rewards": {"format": float("nan")}}}, "rl.rewards.format", "finite"),
    ({"rl": {"group_size": 1}}, "rl.group_size", "greater than or equal to 2"),
    ({"rl": {"clip_range": 0}}, "rl.clip_range", "greater than 0"),
    ({"rl": {"kl_coef": -0.1}}, "rl.kl_coef", "greater than or equal to 0"),
    ({"rl": {"temperature": 0}}, "rl.temperature", "greater than 0"),
    ({"rl": {"prompts": "screens"}}, "rl.prompts", "rows"),
    ({"training": {"method": "ppo"}}, "training.method", "grpo"),
    ({"training": {"method": "grpo"}, "lora": {"dropout": 0.1}}, "lora.dropout", "set lora.dropout 0"),
    ({"training": {"method": "grpo"}, "rl": {"kl_coef": 0.1}, "lora": {"enabled": False}}, "rl.kl_coef", "enable lora"),
    ({"training": {"method": "grpo"}, "sharding": {"strategy": "fsdp", "nproc_per_node": 2}}, "sharding.strategy",
     "none or ddp"),
    ({"training": {"method": "grpo"}, "sharding": {"strategy": "deepspeed", "nproc_per_node": 2}},
     "sharding.strategy", "none or ddp"),
    ({"training": {"method": "grpo"}, "lora": {"dropout": 0.0, "enabled": False}, "rl": {"rollout_engine": "vllm"}},
     "rl.rollout_engine", "enable lora"),
    ({"training": {"method": "grpo"}, "lora": {"dropout": 0.0}, "rl": {"rollout_engine": "vllm",
                                                                       "prompts": "phone_tasks"}},
     "rl.rollout_engine", "text prompts"),
    ({"rl": {"rollout_engine": "sglang"}}, "rl.rollout_engine", "in_process"),
])
def test_bad_rl_settings_name_their_field(data, path, word):
    problems = problems_of(data)
    assert path in problems and word in problems[path], problems


def test_kl_without_lora_is_fine_for_sft_and_kl_zero_is_fine_for_grpo():
    load_config(None, {"rl.kl_coef": 0.1, "lora.enabled": False})  # rl is read only by grpo
    load_config(None, {"training.method": "grpo", "rl.kl_coef": 0.0, "lora.enabled": False})
    load_config(None, {"lora.dropout": 0.1})  # dropout is only GRPO's problem
