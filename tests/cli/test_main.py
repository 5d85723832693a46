import json
import shlex

from workbench.cli.main import main


def test_print_config_applies_typed_flags(capsys, tmp_path):
    assert main(["train", "--print-config", "--precision.mode", "fp16", "--lora.target_modules", "[q_proj, v_proj]",
                 "--output.run_name", "007", "--data.eval", "null", "--set", "schedule.max_steps=9"]) == 0
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
    rc = main(["train", "--model.source", "tiny-glm4", "--data.train", str(bad), "--data.eval", "null",
               "--output.runs_dir", str(tmp_path / "runs"), "--output.progress_bar", "false"])
    assert rc == 2 and f"{bad}:2: not valid JSON" in capsys.readouterr().err


def test_train_then_list_runs_and_print_events(capsys, tmp_path):
    runs = str(tmp_path / "runs")
    assert main(["train", "--model.source", "tiny-glm4", "--data.eval", "null", "--schedule.max_steps", "2",
                 "--output.runs_dir", runs, "--output.run_name", "cli", "--output.progress_bar", "false"]) == 0
    capsys.readouterr()
    assert main(["runs", "--runs-dir", runs]) == 0
    assert "finished" in capsys.readouterr().out
    assert main(["events", f"{runs}/cli", "--type", "step"]) == 0
    steps = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [s["step"] for s in steps] == [1, 2]


def test_models_list(capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "smollm2-135m-instruct" in out and "tiny-glm4v" in out


def test_ctrl_c_keeps_the_completed_steps_and_prints_how_to_continue(capsys, tmp_path, fail_forward):
    runs = str(tmp_path / "runs")
    patch = fail_forward(3, KeyboardInterrupt())  # step 3
    assert main(["train", "--model.source", "tiny-glm4", "--data.eval", "null", "--schedule.max_steps", "4",
                 "--output.runs_dir", runs, "--output.run_name", "cli", "--output.progress_bar", "false"]) == 130
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
