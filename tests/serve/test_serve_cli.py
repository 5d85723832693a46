"""The `serve` subcommand's argparse wiring (the lead mounts it with add_parser)."""
from __future__ import annotations

import argparse

import pytest

from workbench.serve.cli import add_parser, config_from_args


def _parse(argv):
    parser = argparse.ArgumentParser(prog="workbench")
    add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_serve_flags_become_a_config(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_API_KEY", "from-env")
    args = _parse(["serve", "--run", str(tmp_path / "runs" / "exp1"), "--adapter", "v2=/x/adapter", "--port", "0",
                   "--max-batch", "4"])
    assert args.func.__name__ == "run"
    cfg = config_from_args(args)
    assert cfg.adapters == {"exp1": str(tmp_path / "runs" / "exp1"), "v2": "/x/adapter"}
    assert (cfg.host, cfg.port, cfg.max_batch, cfg.api_key, cfg.model) == ("127.0.0.1", 0, 4, "from-env",
                                                                          "smollm2-135m-instruct")


def test_bad_adapter_spec_is_a_clear_error():
    with pytest.raises(SystemExit, match="NAME=PATH"):
        config_from_args(_parse(["serve", "--adapter", "no-equals-sign"]))


def test_server_and_client_import_without_ipywidgets():
    import subprocess
    import sys

    code = ("import sys, workbench.serve, workbench.serve.app, workbench.serve.client, workbench.serve.engine; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('ipywidgets', 'anywidget')]; "
            "assert not bad, bad")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]


def test_module_entry_point_help():
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-m", "workbench.serve", "--help"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "--adapter NAME=PATH" in res.stdout and "--run runs/NAME" in res.stdout


def test_serves_a_run_from_the_training_engine(tmp_path):
    """The real producer of runs/: a 2-step tiny-glm4 fine-tune, served with --run semantics."""
    import subprocess
    import sys
    from pathlib import Path

    import httpx

    from workbench.serve import start_server

    data = Path(__file__).resolve().parents[2] / "data_samples" / "identity" / "train.jsonl"
    if not data.is_file():
        pytest.skip("no sample data")
    sets = ["model.source=tiny-glm4", "schedule.max_steps=2", f"output.runs_dir={tmp_path}", "output.run_name=t",
            f"data.train={data}", "data.eval=null", "output.progress_bar=false"]
    cmd = [sys.executable, "-m", "workbench.cli.main", "train"] + [a for s in sets for a in ("--set", s)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    with start_server("tiny-glm4", runs=[str(tmp_path / "t")], default_max_tokens=4) as srv:
        cards = {m["id"]: m for m in httpx.get(srv.url + "/v1/models").json()["data"]}
        assert cards["t"]["parent"] == "tiny-glm4" and cards["t"]["root"] == str((tmp_path / "t" / "adapter").resolve())
        r = srv.openai_client(max_retries=0).chat.completions.create(model="t", messages=[{"role": "user", "content": "hi"}])
        assert r.usage.completion_tokens == 4
