"""``workbench deepspeed import|export``: DeepSpeed JSON <-> run configuration from the command line."""

import json

import yaml

from tests.conftest import SAMPLES
from workbench.cli.main import main


def test_import_prints_the_settings_and_the_warnings(capsys):
    ds = str(SAMPLES / "deepspeed" / "seed000_ds_config.json")
    assert main(["deepspeed", "import", ds, "--world-size", "2"]) == 0
    out = capsys.readouterr().out
    settings = yaml.safe_load(out.split("\nWARNING", 1)[0].split("\nnote", 1)[0])
    assert settings["sharding"]["strategy"] == "deepspeed" and settings["sharding"]["nproc_per_node"] == 2
    assert "WARNING " in out and "note train_batch_size: " in out


def test_import_of_a_missing_file_exits_2_naming_it(capsys):
    assert main(["deepspeed", "import", "missing.json"]) == 2
    assert "missing.json: file not found" in capsys.readouterr().err


def test_export_resolves_precision_for_gpus(capsys):
    assert (
        main(
            ["deepspeed", "export", "--set", "precision.mode=auto", "--set", "sharding.strategy=deepspeed", "--no-bf16"]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["fp16"]["enabled"] is True


def test_onnx_chat_refuses_a_folder_without_an_export(tmp_path, capsys):
    assert main(["onnx-chat", str(tmp_path), "hi"]) == 2
    assert "holds no ONNX export" in capsys.readouterr().err
