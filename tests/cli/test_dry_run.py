"""`workbench train --dry-run`: the run's model at its real size on the meta device, taken through LoRA, the quantized
base's plan, the module rules, the sharding units and one row forward and backward, without weights or a GPU; a
wrong target module, a rule that matches nothing and a shape error each fail it, named."""

from __future__ import annotations

import json

import pytest

from workbench.cli.main import main

from ..conftest import SAMPLES

ROWS = str(SAMPLES / "phone_episodes" / "train.jsonl")


@pytest.mark.slow
@pytest.mark.parametrize(
    "recipe, says",
    [
        (
            "autoglm-phone-9b-lora-2x4090",
            [
                "FSDP2 zero3 over 2 rank(s): fully_shard on 64 units",
                "23.5 GiB of 24.0 (fits",
                "torchrun --nproc_per_node 2",
            ],
        ),
        ("autoglm-phone-9b-qlora-1x24gb", ["240 linear layers in nf4", "16.6 GiB of 24.0 (fits", "sharding: none"]),
    ],
)
def test_each_9b_recipe_prints_what_would_run(recipe, says, capsys):
    assert main(["train", "--recipe", recipe, "--dry-run"]) == 0
    out = capsys.readouterr().out
    for text in says + [
        "built at its real size on the meta device",
        "total 10,340,372,992 parameters, 47,595,520 trained",
        "one row of 5,916 tokens (2,560 text, 1 screenshot(s) of 1080x2400 = 3,356 image tokens",
        "gradients reached 480 of 480 trained tensors",
        f"launch: workbench train --recipe {recipe}",
        "dry run: ok",
    ]:
        assert text in out, (text, out)


def _dry(capsys, *flags) -> tuple[int, str]:
    code = main(["train", "--model.source", "tiny-glm4v", "--data.train", ROWS, "--dry-run", *flags])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_a_small_run_passes_and_says_what_it_trains(capsys):
    code, out = _dry(capsys)
    assert code == 0 and "LoRA r=16" in out and "the vision tower frozen" in out and "dry run: ok" in out


def test_a_target_module_that_matches_nothing_fails_naming_the_field(capsys):
    code, out = _dry(capsys, "--lora.target_modules", "[q_projection]")
    assert code == 2 and "lora.target_modules: ['q_projection'] matched nothing usable in tiny-glm4v" in out


def test_a_precision_rule_that_matches_nothing_fails_naming_the_rule(capsys):
    code, out = _dry(capsys, "--precision.module_rules", "[{pattern: 'no_such_norm', compute: float32}]")
    assert code == 2 and "precision.module_rules[0]: pattern 'no_such_norm' matches no module of tiny-glm4v" in out


def test_a_shape_error_in_the_models_forward_fails_it(tmp_path, capsys):
    """GLM-4.1V from transformers' Glm4vConfig() defaults (partial_rotary_factor 1.0 beside mrope_section [8, 12, 12]):
    its decoder's forward fails. At one decoder layer and one vision block, real widths."""
    from transformers import Glm4vConfig

    config = Glm4vConfig(text_config={"num_hidden_layers": 1}, vision_config={"depth": 1})
    (tmp_path / "glm").mkdir()
    (tmp_path / "glm" / "config.json").write_text(json.dumps(config.to_dict()))
    code = main(
        [
            "train",
            "--model.source",
            str(tmp_path / "glm"),
            "--data.train",
            ROWS,
            "--data.max_length",
            "4096",
            "--dry-run",
        ]
    )
    out = capsys.readouterr()
    assert code == 2 and "model.source: shape error in" in out.err and "split_sizes" in out.err, out.err
