"""The GRPO part of the run configuration: training.method and the rl section, each problem named by field path."""

import pytest

from workbench.config import ConfigError, config_from_dict, load_config


def problems_of(data) -> dict[str, str]:
    with pytest.raises(ConfigError) as exc:
        config_from_dict(data)
    return dict(exc.value.problems)


def test_grpo_defaults_are_valid_and_sft_stays_the_default():
    assert load_config(None, {}).training.method == "sft"
    cfg = load_config(
        None, {"training.method": "grpo", "lora.dropout": 0.0, "rl.rewards": {"format": 0.5, "tap_in_box": 1}}
    )
    assert cfg.rl.group_size == 4 and cfg.rl.kl_coef == 0.0 and cfg.rl.rewards == {"format": 0.5, "tap_in_box": 1.0}


@pytest.mark.parametrize(
    "data,path,word",
    [
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
        (
            {"training": {"method": "grpo"}, "rl": {"kl_coef": 0.1}, "lora": {"enabled": False}},
            "rl.kl_coef",
            "enable lora",
        ),
        (
            {"training": {"method": "grpo"}, "sharding": {"strategy": "fsdp", "nproc_per_node": 2}},
            "sharding.strategy",
            "none or ddp",
        ),
        (
            {"training": {"method": "grpo"}, "sharding": {"strategy": "deepspeed", "nproc_per_node": 2}},
            "sharding.strategy",
            "none or ddp",
        ),
        (
            {
                "training": {"method": "grpo"},
                "lora": {"dropout": 0.0, "enabled": False},
                "rl": {"rollout_engine": "vllm"},
            },
            "rl.rollout_engine",
            "enable lora",
        ),
        (
            {
                "training": {"method": "grpo"},
                "lora": {"dropout": 0.0},
                "rl": {"rollout_engine": "vllm", "prompts": "phone_tasks"},
            },
            "rl.rollout_engine",
            "text prompts",
        ),
        ({"rl": {"rollout_engine": "sglang"}}, "rl.rollout_engine", "in_process"),
        ({"rl": {"loss_type": "sum"}}, "rl.loss_type", "dr_grpo"),
        ({"rl": {"importance_sampling": "sequence_mask"}}, "rl.importance_sampling", "token_truncate"),
        ({"rl": {"importance_sampling_cap": 1.0}}, "rl.importance_sampling_cap", "greater than 1"),
        ({"rl": {"pool": True}}, "rl.pool", "set rl.prompts phone_tasks and an episode reward"),
        ({"rl": {"pool": True, "prompts": "phone_tasks", "rewards": {"format": 1}}}, "rl.pool", "an episode reward"),
        ({"rl": {"pool_replay": True}}, "rl.pool_replay", "set rl.pool true"),
        ({"rl": {"pool_fresh_share": 0.5}}, "rl.pool_fresh_share", "set rl.pool true"),
        ({"rl": {"pool_floor": 1.5}}, "rl.pool_floor", "less than or equal to 1"),
        ({"rl": {"step_advantage_weight": 0.5}}, "rl.step_advantage_weight", "episode reward"),
        ({"rl": {"step_discount": 0}}, "rl.step_discount", "greater than 0"),
    ],
)
def test_bad_rl_settings_name_their_field(data, path, word):
    problems = problems_of(data)
    assert path in problems and word in problems[path], problems


def test_kl_without_lora_is_fine_for_sft_and_kl_zero_is_fine_for_grpo():
    load_config(None, {"rl.kl_coef": 0.1, "lora.enabled": False})  # rl is read only by grpo
    load_config(None, {"training.method": "grpo", "rl.kl_coef": 0.0, "lora.enabled": False})
    load_config(None, {"lora.dropout": 0.1})  # dropout is only GRPO's problem


def test_grpo_derives_lora_dropout_0_unless_it_is_given():
    from workbench.config import config_to_dict, replace

    grpo = load_config(None, {"training.method": "grpo"})
    assert grpo.lora.dropout == 0.0 and grpo.derived["lora.dropout"][0] == 0.0
    assert "sampler" in grpo.derived["lora.dropout"][1]
    sft = load_config(None, {})
    assert sft.lora.dropout == 0.05 and sft.derived["lora.dropout"][0] == 0.05
    # A dump keeps null, so a copy with the other method derives again (the config panel and replace work so).
    assert config_to_dict(sft)["lora"]["dropout"] is None
    assert replace(sft, **{"training.method": "grpo"}).lora.dropout == 0.0
    assert replace(grpo, **{"training.method": "sft"}).lora.dropout == 0.05
    given = load_config(None, {"training.method": "grpo", "lora.dropout": 0.0})
    assert given.derived == {} and config_to_dict(given)["lora"]["dropout"] == 0.0


def test_print_config_says_which_dropout_grpo_derived(capsys):
    import json

    from workbench.cli.main import main

    assert main(["train", "--training.method", "grpo", "--model.source", "tiny-glm4", "--print-config"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["lora"]["dropout"] is None
    assert "note: lora.dropout: null, so 0 (training.method grpo" in out.err


# ---- DPO (training.method dpo, the dpo section) --------------------------------------------------------------------
def test_dpo_defaults_are_trls_and_derive_lora_dropout_0():
    cfg = load_config(None, {"training.method": "dpo"})
    assert (cfg.dpo.beta, cfg.dpo.loss_type) == (0.1, "sigmoid")  # TRL DPOConfig's beta and loss_type
    assert cfg.lora.dropout == 0.0 and "reference" in cfg.derived["lora.dropout"][1]
    assert load_config(None, {"training.method": "dpo", "dpo.loss_type": "ipo", "dpo.beta": 0.5}).dpo.beta == 0.5


@pytest.mark.parametrize(
    "data,path,word",
    [
        ({"dpo": {"beta": 0}}, "dpo.beta", "greater than 0"),
        ({"dpo": {"loss_type": "hinge"}}, "dpo.loss_type", "ipo"),
        ({"dpo": {"beta": 0.5}}, "dpo.beta", "method is sft: set training.method dpo"),
        ({"training": {"method": "grpo"}, "dpo": {"loss_type": "ipo"}}, "dpo.loss_type", "method is grpo"),
        ({"training": {"method": "dpo"}, "rl": {"group_size": 8}}, "rl.group_size", "a GRPO setting"),
        ({"training": {"method": "dpo"}, "rl": {"kl_coef": 0.1}}, "rl.kl_coef", "dpo samples nothing"),
        ({"training": {"method": "dpo"}, "data": {"format": "chat"}}, "data.format", "preference pairs"),
        (
            {"training": {"method": "dpo"}, "data": {"ui_tree_layouts": "shuffled"}},
            "data.ui_tree_layouts",
            "as_recorded",
        ),
        (
            {"training": {"method": "dpo"}, "sharding": {"strategy": "fsdp", "nproc_per_node": 2}},
            "sharding.strategy",
            "none or ddp",
        ),
    ],
)
def test_bad_dpo_settings_name_their_field(data, path, word):
    problems = problems_of(data)
    assert path in problems and word in problems[path], problems


def test_a_saved_config_with_dpo_defaults_loads_under_every_method():
    from workbench.config import config_to_dict

    for method in ("sft", "grpo", "dpo"):
        saved = config_to_dict(load_config(None, {"training.method": method}))
        assert saved["dpo"] == {"beta": 0.1, "loss_type": "sigmoid"}
        assert config_from_dict(saved).training.method == method
