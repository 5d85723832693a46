"""The `serve` subcommand: flags generated from ServeConfig, every bad option reported at once (exit 2)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.config import ConfigError
from workbench.serve import ServeError
from workbench.serve.cli import add_parser, config_from_args

from .helpers import make_adapter


def _parse(argv):
    parser = argparse.ArgumentParser(prog="workbench")
    add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def _serve(*argv, env=None, timeout=120):
    """``python -m workbench serve ARGV`` (never reaches serving in these tests: each fails validation)."""
    return subprocess.run(
        [sys.executable, "-m", "workbench", "serve", *argv], capture_output=True, text=True, timeout=timeout, env=env
    )


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    return make_adapter("tiny-glm4", tmp_path_factory.mktemp("runs") / "exp1", seed=0)


def test_serve_flags_become_a_typed_config(tiny_run, monkeypatch):
    monkeypatch.setenv("WORKBENCH_API_KEY", "from-env")
    args = _parse(
        [
            "serve",
            "--model",
            "tiny-glm4",
            "--run",
            str(tiny_run),
            "--adapter",
            f"v2={tiny_run}/adapter",
            "--port",
            "0",
            "--max-batch",
            "4",
            "--max-context",
            "null",
            "--adapter-root",
            "/srv/runs",
            "--health-hides-model",
            "true",
        ]
    )
    assert args.func.__name__ == "run"
    cfg = config_from_args(args)
    assert cfg.runs == [str(tiny_run)] and cfg.adapters == {"v2": f"{tiny_run}/adapter"}
    assert cfg.served_adapters() == {"v2": f"{tiny_run}/adapter", "exp1": str(tiny_run)}
    assert (cfg.host, cfg.port, cfg.max_batch, cfg.max_context, cfg.api_key, cfg.adapter_root) == (
        "127.0.0.1",
        0,
        4,
        None,
        "from-env",
        "/srv/runs",
    )
    assert cfg.health_hides_model is True and config_from_args(_parse(["serve"])).health_hides_model is False
    with pytest.raises(ValueError, match="Instance is frozen"):  # the parsed options cannot change under the server
        cfg.port = 1


def test_a_config_file_and_flags_over_it(tmp_path, monkeypatch):
    monkeypatch.delenv("WORKBENCH_API_KEY", raising=False)
    (tmp_path / "serve.yaml").write_text("model: tiny-glm4\nmax_batch: 3\nport: 9000\n")
    cfg = config_from_args(_parse(["serve", "--config", str(tmp_path / "serve.yaml"), "--port", "0"]))
    assert (cfg.model, cfg.max_batch, cfg.port, cfg.api_key) == ("tiny-glm4", 3, 0, None)


def test_every_bad_option_is_reported_at_once_with_its_field():
    with pytest.raises(ConfigError) as exc:
        config_from_args(
            _parse(
                [
                    "serve",
                    "--port",
                    "abc",
                    "--max-batch",
                    "0",
                    "--dtype",
                    "fp8",
                    "--adapter",
                    "x",
                    "--run",
                    "runs/does-not-exist",
                    "--api-key",
                    "",
                    "--model-id",
                    " ",
                    "--threads",
                    "-1",
                    "--max-context",
                    "1",
                    "--log-level",
                    "loud",
                    "--port",
                    "70000",
                ]
            )
        )
    fields = {field for field, _ in exc.value.problems}
    assert fields == {
        "port",
        "max_batch",
        "dtype",
        "adapters",
        "runs[0]",
        "api_key",
        "model_id",
        "threads",
        "max_context",
        "log_level",
    }
    text = str(exc.value)
    assert "NAME=PATH" in text and "'runs/does-not-exist' does not exist" in text and "serve configuration" in text


def test_cli_exits_2_without_a_traceback_on_bad_options(tmp_path):
    res = _serve("--run", str(tmp_path / "does-not-exist"), "--max-batch", "many", "--port", "0")
    assert res.returncode == 2, res.stderr
    assert "runs[0]" in res.stderr and "does not exist" in res.stderr and "max_batch" in res.stderr
    assert "Traceback" not in res.stderr
    (tmp_path / "typo.json").write_text('{"modle": "tiny-glm4"}')
    res = _serve("--config", str(tmp_path / "typo.json"))
    assert res.returncode == 2 and "modle: unknown key" in res.stderr and "Traceback" not in res.stderr
    res = _serve("--no-such-flag")
    assert res.returncode == 2 and "unrecognized arguments" in res.stderr


def test_a_model_that_does_not_exist_ends_the_server_with_exit_2(tmp_path):
    import os

    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    for model in ("does-not-exist", str(tmp_path / "no-such-dir")):
        res = _serve("--model", model, "--port", "0", "--log-level", "error", env=env)
        assert res.returncode == 2, res.stderr
        assert f"model: '{model}' is neither a built-in model" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize(
    "content, says",
    [
        (b"\xff\xfe\x00garbage", "not UTF-8 text"),
        (b"{not json", "is not valid JSON"),
        (b"[1, 2]", "must hold a mapping"),
        (b'{"model": {"source": 5}}', "model.source"),
        (b'{"lora": {"rank": 8}}', "lora.rank: unknown key"),
    ],
)
def test_unreadable_run_config_is_an_error_naming_the_file(tiny_run, tmp_path, content, says):
    import shutil

    run = tmp_path / "broken-run"
    shutil.copytree(tiny_run, run)
    (run / "config.json").write_bytes(content)
    with pytest.raises(ConfigError) as exc:
        config_from_args(_parse(["serve", "--model", "tiny-glm4", "--run", str(run)]))
    [(field, message)] = exc.value.problems
    assert field == "runs[0]" and str(run / "config.json") in message and says in message


@pytest.mark.parametrize("content", [b"\xff\xfe", b"{", b'"a string"'])
def test_unreadable_adapter_config_is_an_error_naming_the_file(tiny_run, tmp_path, content):
    import shutil

    adapter = tmp_path / "adapter"
    shutil.copytree(tiny_run / "adapter", adapter)
    (adapter / "adapter_config.json").write_bytes(content)
    with pytest.raises(ConfigError) as exc:
        config_from_args(_parse(["serve", "--model", "tiny-glm4", "--adapter", f"a={adapter}"]))
    [(field, message)] = exc.value.problems
    assert field == "adapters.a" and str(adapter / "adapter_config.json") in message
    res = _serve("--model", "tiny-glm4", "--adapter", f"a={adapter}")
    assert res.returncode == 2 and "adapter_config.json" in res.stderr and "Traceback" not in res.stderr


def test_model_ids_taken_twice_are_refused(tiny_run):
    with pytest.raises(ConfigError) as exc:
        config_from_args(
            _parse(
                [
                    "serve",
                    "--model",
                    "tiny-glm4",
                    "--run",
                    str(tiny_run),
                    "--adapter",
                    f"exp1={tiny_run}",
                    "--adapter",
                    f"tiny-glm4={tiny_run}",
                ]
            )
        )
    fields = dict(exc.value.problems)
    assert (
        "already taken by model" in fields["adapters.tiny-glm4"]
        and "already taken by adapters.exp1" in fields["runs[0]"]
    )


def test_server_and_client_import_without_ipywidgets():
    code = (
        "import sys, workbench.serve, workbench.serve.app, workbench.serve.client, workbench.serve.batcher; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('ipywidgets', 'anywidget')]; "
        "assert not bad, bad"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]


def test_module_entry_point_help():
    res = _serve("--help")
    assert res.returncode == 0 and "--adapter NAME=PATH" in res.stdout and "--run runs/NAME" in res.stdout
    assert (
        "--max-batch" in res.stdout
        and "--adapter-root" in res.stdout
        and "auto, float32, bfloat16, float16" in " ".join(res.stdout.split())
    )


def test_subprocess_mode_hands_the_config_over_as_a_file(tiny_run, monkeypatch):
    import httpx

    from workbench.serve import start_server

    monkeypatch.setenv("WORKBENCH_API_KEY", "not-for-the-child")
    with start_server(
        "tiny-glm4",
        runs=[str(tiny_run)],
        subprocess_mode=True,
        api_key="k",
        default_max_tokens=3,
        max_batch=2,
        threads=1,
    ) as srv:
        config_file = srv.config_file
        written = json.loads(config_file.read_text())
        assert written["runs"] == [str(tiny_run)] and written["max_batch"] == 2 and "api_key" not in written
        assert oct(config_file.stat().st_mode & 0o777) == "0o600"
        assert httpx.get(srv.url + "/v1/models").status_code == 401
        assert srv.models() == ["tiny-glm4", "exp1"]
        r = srv.openai_client(max_retries=0).chat.completions.create(
            model="exp1", messages=[{"role": "user", "content": "hi"}], extra_body={"ignore_eos": True}
        )
        assert r.usage.completion_tokens == 3  # default_max_tokens reached the child (ignore_eos: never fewer)
        # the child is asked over HTTP, as any client would: its refusals come back with its own message
        with pytest.raises(ServeError, match="outside the adapter root"):
            srv.add_adapter("again", tiny_run)
        with pytest.raises(ServeError, match="No adapter 'nope' is loaded"):
            srv.remove_adapter("nope")
        srv.remove_adapter("exp1")
        assert srv.models() == ["tiny-glm4"]
    assert not config_file.exists()


def test_start_server_reports_bad_options_before_starting():
    from workbench.serve import start_server

    with pytest.raises(ConfigError) as exc:
        start_server("tiny-glm4", max_batch=0, runs=["/nope"], port=-1, colour="blue")
    assert {f for f, _ in exc.value.problems} == {"max_batch", "runs[0]", "port", "colour"}


def test_serves_a_run_from_the_training_engine(tmp_path):
    """The real producer of runs/: a 2-step tiny-glm4 fine-tune, served with --run semantics."""
    import httpx

    from workbench.serve import start_server

    data = Path(__file__).resolve().parents[2] / "data_samples" / "identity" / "train.jsonl"
    assert data.is_file(), "the repository's sample data is missing"
    sets = [
        "model.source=tiny-glm4",
        "schedule.max_steps=2",
        f"output.runs_dir={tmp_path}",
        "output.run_name=t",
        f"data.train={data}",
        "data.eval=null",
        "output.progress_bar=false",
    ]
    cmd = [sys.executable, "-m", "workbench.cli.main", "train"] + [a for s in sets for a in ("--set", s)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    with start_server("tiny-glm4", runs=[str(tmp_path / "t")], default_max_tokens=4) as srv:
        cards = {m["id"]: m for m in httpx.get(srv.url + "/v1/models").json()["data"]}
        assert cards["t"]["parent"] == "tiny-glm4" and cards["t"]["root"] == str((tmp_path / "t" / "adapter").resolve())
        r = srv.openai_client(max_retries=0).chat.completions.create(
            model="t", messages=[{"role": "user", "content": "hi"}], extra_body={"ignore_eos": True}
        )
        assert r.usage.completion_tokens == 4
