import json
import os
import shlex
import subprocess
import sys

from tests.cli.helpers import run_cli
from tests.conftest import REPO, SAMPLES
from workbench.cli.main import main


def test_print_config_applies_typed_flags(capsys, tmp_path):
    assert (
        main(
            [
                "train",
                "--print-config",
                "--precision.mode",
                "fp16",
                "--lora.target_modules",
                "[q_proj, v_proj]",
                "--output.run_name",
                "007",
                "--data.eval",
                "null",
                "--set",
                "schedule.max_steps=9",
            ]
        )
        == 0
    )
    cfg = json.loads(capsys.readouterr().out)
    assert cfg["precision"]["mode"] == "fp16" and cfg["lora"]["target_modules"] == ["q_proj", "v_proj"]
    assert cfg["output"]["run_name"] == "007"  # strings stay strings
    assert cfg["data"]["eval"] is None and cfg["schedule"]["max_steps"] == 9


def test_bad_values_exit_2_listing_every_field(capsys):
    assert main(["train", "--precision.mode", "fp8", "--lora.r", "0", "--data.train", "nope.jsonl"]) == 2
    err = capsys.readouterr().err
    assert "3 problem(s)" in err and "precision.mode" in err and "lora.r" in err and "data.train" in err
    assert "Traceback" not in err


def test_bad_data_row_exits_2_with_file_and_line(capsys, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}\n{oops\n')
    rc = main(
        [
            "train",
            "--model.source",
            "tiny-glm4",
            "--data.train",
            str(bad),
            "--data.eval",
            "null",
            "--output.runs_dir",
            str(tmp_path / "runs"),
            "--output.progress_bar",
            "false",
        ]
    )
    assert rc == 2 and f"{bad}:2: not valid JSON" in capsys.readouterr().err


def test_train_then_list_runs_and_print_events(capsys, tmp_path):
    runs = str(tmp_path / "runs")
    assert (
        main(
            [
                "train",
                "--model.source",
                "tiny-glm4",
                "--data.eval",
                "null",
                "--schedule.max_steps",
                "2",
                "--output.runs_dir",
                runs,
                "--output.run_name",
                "cli",
                "--output.progress_bar",
                "false",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["runs", "--runs-dir", runs]) == 0
    assert "finished" in capsys.readouterr().out
    assert main(["events", f"{runs}/cli", "--type", "step"]) == 0
    steps = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [s["step"] for s in steps] == [1, 2]


def test_a_full_fine_tune_says_its_model_and_how_to_serve_it(capsys, tmp_path):
    runs = str(tmp_path / "runs")
    assert (
        main(
            [
                "train",
                "--model.source",
                "tiny-glm4",
                "--data.eval",
                "null",
                "--schedule.max_steps",
                "1",
                "--lora.enabled",
                "false",
                "--output.runs_dir",
                runs,
                "--output.run_name",
                "full",
                "--output.progress_bar",
                "false",
            ]
        )
        == 0
    )
    model = f"{runs}/full/model"
    assert f"model: {model} (all weights: workbench serve --model {model})" in capsys.readouterr().out


def test_models_list(capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "smollm2-135m-instruct" in out and "tiny-glm4v" in out


def test_ctrl_c_keeps_the_completed_steps_and_prints_how_to_continue(capsys, tmp_path, fail_forward):
    runs = str(tmp_path / "runs")
    patch = fail_forward(3, KeyboardInterrupt())  # step 3
    assert (
        main(
            [
                "train",
                "--model.source",
                "tiny-glm4",
                "--data.eval",
                "null",
                "--schedule.max_steps",
                "4",
                "--output.runs_dir",
                runs,
                "--output.run_name",
                "cli",
                "--output.progress_bar",
                "false",
            ]
        )
        == 130
    )
    patch.undo()
    err = capsys.readouterr().err
    assert f"step 2 is saved in {runs}/cli/checkpoints/step-0000002" in err
    command = shlex.split(err.strip().splitlines()[-1])
    assert command[:2] == ["workbench", "train"]
    assert main(command[1:]) == 0  # the printed command continues the run to its end
    capsys.readouterr()
    assert main(["events", f"{runs}/cli", "--type", "step"]) == 0
    steps = [json.loads(line)["step"] for line in capsys.readouterr().out.splitlines()]
    assert steps == [1, 2, 3, 4]


def test_deepspeed_json_is_imported_with_its_warnings_and_flags_win(capsys):
    ds = str(SAMPLES / "deepspeed" / "seed000_ds_config.json")
    assert main(["train", "--deepspeed", ds, "--print-config"]) == 0
    out = capsys.readouterr()
    cfg = json.loads(out.out)
    # What the file says: ZeRO-3 with the optimizer offloaded, fp16 at a fixed scale of 128, AdamW lr 5e-5;
    # train_batch_size 64 = 4 per GPU x 16 accumulation steps on one process.
    assert cfg["sharding"]["strategy"] == "deepspeed" and cfg["sharding"]["deepspeed_stage"] == 3
    assert cfg["sharding"]["offload"] == "optimizer" and cfg["precision"]["mode"] == "fp16"
    assert cfg["precision"]["init_scale"] == 128 and cfg["schedule"]["learning_rate"] == 5e-5
    assert cfg["schedule"]["micro_batch_size"] == 4 and cfg["schedule"]["grad_accum_steps"] == 16
    # The importer's warnings reach the user: the key the optimizer refuses, the static loss scale.
    assert f"warning: {ds}: optimizer.params.fp16_optimizer_state:" in out.err
    assert f"warning: {ds}: fp16.loss_scale: 128 is non-zero" in out.err
    # Flags on the same command line win over the JSON; --nproc is the world size that splits train_batch_size.
    assert (
        main(
            [
                "train",
                "--deepspeed",
                ds,
                "--precision.mode",
                "bf16",
                "--set",
                "schedule.learning_rate=1e-4",
                "--nproc",
                "2",
                "--print-config",
            ]
        )
        == 0
    )
    cfg = json.loads(capsys.readouterr().out)
    assert cfg["precision"]["mode"] == "bf16" and cfg["schedule"]["learning_rate"] == 1e-4
    assert cfg["sharding"]["nproc_per_node"] == 2 and cfg["schedule"]["grad_accum_steps"] == 8


def test_env_reports_versions_devices_and_what_auto_picks():
    import torch

    from workbench import __version__
    from workbench.config import RunConfig
    from workbench.precision import resolve_precision

    res = run_cli("env", cwd=REPO)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert out.startswith(f"workbench {__version__}\n") and f"torch         {torch.__version__}" in out
    assert "bf16: " in out and "fp16: " in out
    expected = resolve_precision(RunConfig(), torch.device("cpu")).mode  # the policy's own answer for this CPU
    assert f"precision.mode=auto -> {expected}" in out
    # the README's set-up installs the extension
    assert "jupyterlab    " in out and "extension     workbench-jupyterlab 0." in out and "browser       " in out
    version = run_cli("--version", cwd=REPO)
    assert version.returncode == 0 and version.stdout.strip() == f"workbench {__version__}"


def test_no_third_party_deprecation_noise_with_gradient_checkpointing(tmp_path):
    res = run_cli(
        "train",
        "--model.source",
        "tiny-glm4",
        "--model.gradient_checkpointing",
        "true",
        "--data.eval",
        "null",
        "--schedule.max_steps",
        "1",
        "--output.runs_dir",
        str(tmp_path),
        "--output.progress_bar",
        "false",
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    assert "FutureWarning" not in res.stderr and "DeprecationWarning" not in res.stderr, res.stderr
    assert "run directory:" in res.stdout


def test_the_entry_points_hide_only_third_party_deprecations():
    import warnings

    from workbench.user_output import hide_third_party_deprecations

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        hide_third_party_deprecations()
        for module, category in (
            ("transformers.modeling_utils", FutureWarning),
            ("peft.peft_model", DeprecationWarning),
            ("workbench.engine.run", FutureWarning),
            ("peft.tuners", UserWarning),
        ):
            warnings.warn_explicit(f"{module} {category.__name__}", category, "file.py", 1, module=module)
    assert [str(w.message) for w in seen] == ["workbench.engine.run FutureWarning", "peft.tuners UserWarning"]


def test_a_reader_that_goes_away_gets_no_traceback():
    # `workbench recipes show NAME | head`: the pipe's reader is gone before the output is written
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "workbench", "recipes", "show", "identity-demo"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr
    assert proc.returncode == 1
