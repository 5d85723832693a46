"""One assembly of a run config (config.assemble): the same inputs through ``workbench train``, the
``%%workbench_train`` magic and the config panel's form give the same RunConfig."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.conftest import SAMPLES
from workbench.cli.main import main
from workbench.config import ConfigError, RunConfig
from workbench.config.assemble import RunInputs, assemble
from workbench.ui.config_form import ConfigForm
from workbench.ui.magics import train_config

DEEPSPEED = str(SAMPLES / "deepspeed" / "seed000_ds_config.json")


def as_json(cfg: RunConfig) -> str:
    return json.dumps(cfg.model_dump(mode="json"), sort_keys=True)


def from_command(capsys, *argv: str) -> str:
    assert main(["train", *argv, "--print-config"]) == 0
    return json.dumps(json.loads(capsys.readouterr().out), sort_keys=True)


def test_a_recipe_a_deepspeed_file_overrides_and_processes_give_one_config_everywhere(capsys):
    line = f"--recipe identity-demo --deepspeed {DEEPSPEED} --set schedule.max_steps=7 --lora.r 8 --nproc 2"
    command = from_command(capsys, *line.split())
    magic, _ = train_config(line, "")
    form = ConfigForm()  # as the panel drives it: the recipe, the process count, the JSON, the edited fields
    form.start_from_recipe("identity-demo")
    form.update({"sharding.nproc_per_node": 2})
    form.import_deepspeed(DEEPSPEED)
    form.update({"schedule.max_steps": 7, "lora.r": 8})
    assert form.problems == []
    assert as_json(magic) == command and as_json(form.config) == command
    # the layers in their order: the JSON over the recipe (ZeRO-3, fp16, its accumulation over 2 processes), the
    # command line over the JSON
    cfg = magic
    assert (cfg.sharding.strategy, cfg.sharding.deepspeed_stage, cfg.precision.mode) == ("deepspeed", 3, "fp16")
    assert cfg.schedule.grad_accum_steps == 64 // (4 * 2) and cfg.sharding.nproc_per_node == 2
    assert cfg.schedule.max_steps == 7 and cfg.lora.r == 8 and cfg.data.train.endswith("identity/train.jsonl")


def test_a_config_file_and_a_process_count_without_a_strategy_mean_ddp_everywhere(capsys, tmp_path):
    settings = {"model": {"source": "tiny-glm4"}, "lora": {"r": 4}, "schedule": {"max_steps": 3}}
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(settings), encoding="utf-8")
    command = from_command(capsys, "--config", str(path), "--nproc", "2")
    magic, _ = train_config("--nproc 2", path.read_text(encoding="utf-8"))
    form = ConfigForm()
    form.load(path)
    form.set("sharding.nproc_per_node", 2)
    assembled = assemble(RunInputs(config=settings, flags={"sharding.nproc_per_node": 2}))
    assert as_json(magic) == command and as_json(form.config) == command and as_json(assembled) == command
    assert magic.sharding.strategy == "ddp" and magic.sharding.world_size == 2


def test_a_strategy_given_is_kept_and_one_process_stays_single():
    one = assemble(RunInputs(config={"model": {"source": "tiny-glm4"}}))
    assert one.sharding.strategy == "none"
    with pytest.raises(ConfigError) as err:  # given as none: the contradiction is reported, not overridden
        assemble(RunInputs(flags={"sharding.strategy": "none", "sharding.nproc_per_node": 2}))
    assert "sharding.strategy" in dict(err.value.problems)
    form = ConfigForm()
    form.update({"sharding.strategy": "fsdp", "sharding.nproc_per_node": 2})
    assert form.config.sharding.strategy == "fsdp"
