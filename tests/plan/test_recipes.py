"""A GPU recipe is the memory planner's cheapest fit for its own inputs, and its requirements cover what the planner
predicts: when the planner changes (a new loss head, another activation model), this fails naming the new fit."""

import json

import pytest

from workbench.cli.main import main
from workbench.config.recipes import all_recipes, load_recipe
from workbench.plan.recipes import format_recipe_plan, plan_recipe

GiB = 1024**3
GPU_RECIPES = [r.name for r in all_recipes() if r.requirements.gpus]


@pytest.fixture(scope="module")
def plans():
    return {name: plan_recipe(load_recipe(name)) for name in GPU_RECIPES}


def test_there_is_a_gpu_recipe():
    assert "autoglm-phone-9b-lora-2x4090" in GPU_RECIPES


@pytest.mark.parametrize("name", GPU_RECIPES)
def test_a_gpu_recipe_is_the_planners_cheapest_fit_and_needs_what_it_predicts(plans, name):
    rp = plans[name]
    assert rp.own.fits, format_recipe_plan(rp)
    assert rp.agrees, format_recipe_plan(rp)
    req, devices = rp.recipe.requirements, rp.own.devices
    assert req.gpus == devices.count == rp.own.setting.world_size
    # the requirement admits the target GPUs and asks at least for what the planner predicts on each
    assert rp.own.gpu_total <= req.gpu_memory_gib * GiB <= devices.bytes_per_device, format_recipe_plan(rp)
    assert rp.own.host_total <= req.host_memory_gib * GiB <= devices.host_ram


@pytest.mark.parametrize("name", ["autoglm-phone-9b-lora-2x4090", "autoglm-phone-9b-qlora-1x24gb"])
def test_the_9b_recipes_read_one_screenshot_and_2560_text_tokens(plans, name):
    own = plans[name].own
    images = own.activations["images"]
    assert images["size"] == "1080x2400" and images["images_per_row"] == 1
    assert own.setting.seq_len == 2560  # data.max_length less the screenshot's tokens


def test_the_one_gpu_recipe_is_the_cheapest_fit_over_its_nf4_base(plans):
    rp = plans["autoglm-phone-9b-qlora-1x24gb"]
    assert rp.own.setting.label == "bf16/single/QLoRA-nf4/ckpt/1img@1080x2400" and rp.own.devices.count == 1
    assert {p.setting.quantized_base for p in rp.matrix.plans} == {"nf4"}  # held to fits over the same base
    assert not plan_recipe(load_recipe("autoglm-phone-9b-lora-2x4090"), rp.own.devices).own.fits  # 16-bit: no


def test_a_disagreeing_recipe_is_named_with_the_new_fit(plans):
    rp = plans["autoglm-phone-9b-lora-2x4090"]
    other = next(p for p in rp.matrix.plans if p.fits and p.setting != rp.own.setting)
    moved = type(rp)(rp.recipe, other, rp.matrix)
    assert not moved.agrees
    assert f"the planner's cheapest fit is now {rp.own.setting.label}" in format_recipe_plan(moved)


def test_plan_recipe_command(capsys):
    """The command plans the recipe's own inputs (SmolLM2 here: the 9B's plan is above) and says how it compares."""
    assert main(["plan", "--recipe", "phone-actions-smollm2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["recipe"] == "phone-actions-smollm2" and out["recipe_plan"]["setting"]["micro_batch"] == 4
    assert out["recipe_plan"]["setting"]["seq_len"] == 256 and "recipe_is_cheapest" in out
    assert main(["plan", "--recipe", "phone-actions-smollm2"]) == 0
    out = capsys.readouterr().out
    assert "recipe phone-actions-smollm2: fp32/single/LoRA  fits" in out  # pinned: its figures are fp32's
    assert "cheapest fit on these GPUs would be bf16/single/LoRA" in out and "keeps cpu/fp32" in out
    assert main(["plan", "--recipe", "nope"]) == 2 and "unknown recipe 'nope'" in capsys.readouterr().err
