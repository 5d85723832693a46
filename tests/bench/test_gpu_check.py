"""The GPU check's CPU-side logic: its cases, its skip without a GPU, its JSON report (it has never run on a GPU)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import SAMPLES
from workbench.bench import gpu_check


def test_without_cuda_it_says_so_in_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    monkeypatch.chdir(tmp_path)
    assert gpu_check.main([]) == 0
    assert gpu_check.main(["--out", str(tmp_path / "gpu.json")]) == 0
    assert list(tmp_path.iterdir()) == []  # neither the default (runs/gpu_check.json) nor --out
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and all(line.startswith("gpu_check: skipped: no CUDA device here") for line in out)
    assert "nothing was run and nothing written" in out[0]


def test_the_gpu_marked_tests_run_through_pytest_and_are_reported(tmp_path):
    tests = tmp_path / "test_marked.py"
    tests.write_text(
        "import pytest\n\n@pytest.mark.gpu\ndef test_on_gpu():\n    assert True\n\n"
        "@pytest.mark.gpu\ndef test_broken_on_gpu():\n    assert False\n\ndef test_cpu():\n    assert True\n"
    )
    result = gpu_check.run_gpu_tests([tests], timeout_s=120)
    assert result["rc"] == 1 and "1 failed, 1 passed, 1 deselected" in result["summary"], result
    assert gpu_check.gpu_tests_failed(result) and "-m gpu" in result["command"]
    assert not gpu_check.gpu_tests_failed({"rc": 5})  # none collected is not a failure
    assert "gpu tests (pytest -m gpu): 1 failed" in gpu_check.summary({"gpu_tests": result})
    assert gpu_check.run_gpu_tests([tmp_path / "absent"])["skipped"].startswith("no tests at")


def test_the_cases_cover_what_the_issue_asks_and_each_is_a_valid_run(tmp_path):
    cases = {c.name: c for c in gpu_check.CASES}
    assert len(cases) == len(gpu_check.CASES)
    heads = {c.overrides.get("memory.loss_head", "chunked") for c in cases.values()}
    assert heads == {"full", "labels", "chunked"}
    fp16 = cases["fp16-overflow"]
    assert fp16.expects_overflow and fp16.overrides["precision.mode"] == "fp16"
    assert fp16.overrides["precision.init_scale"] >= 2.0**30  # overflows on the first steps, on purpose
    assert cases["fsdp2"].overrides["sharding.strategy"] == "fsdp"
    ds = cases["deepspeed-zero3-offload"].overrides
    assert ds["sharding.deepspeed_stage"] == 3 and ds["sharding.offload"] == "optimizer+params"
    for case in gpu_check.CASES:  # every case validates as a run configuration (world size 1, LoRA, one GPU)
        cfg = gpu_check.case_config(case, tmp_path / "model", SAMPLES / "phone_screens" / "train.jsonl", tmp_path, 3)
        assert cfg.sharding.world_size == 1 and cfg.lora.enabled and cfg.device == "cuda"
        assert cfg.schedule.max_steps == 3 and cfg.output.run_name == case.name


def test_an_unknown_case_is_refused_naming_the_cases():
    with pytest.raises(ValueError, match="unknown nope; the cases are fp16-overflow"):
        gpu_check.select_cases("bf16-full-head,nope")
    assert [c.name for c in gpu_check.select_cases("fsdp2,bf16-full-head")] == ["fsdp2", "bf16-full-head"]


def test_the_model_has_the_real_widths_and_reduced_depth():
    cfg, tok = gpu_check.model_config()
    assert cfg.text_config.hidden_size == 4096 and cfg.text_config.vocab_size == 151552
    assert cfg.text_config.num_hidden_layers == 4 and cfg.vision_config.depth == 4
    assert cfg.vision_config.hidden_size == 1536
    assert cfg.image_token_id == tok.convert_tokens_to_ids("<|image|>")


def test_figures_from_a_runs_events_and_the_report(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    events = [
        {"type": "memory", "time": 0.0, "rank": 0, "step": 1, "devices": [{"device": "cuda:0", "peak": 5 << 30}]},
        {"type": "memory", "time": 0.0, "rank": 0, "step": 2, "devices": [{"device": "cuda:0", "peak": 7 << 30}]},
        {"type": "step", "time": 0.0, "rank": 0, "step": 1, "loss": 3.0, "skipped": True},
        {
            "type": "overflow_origin",
            "time": 0.0,
            "rank": 0,
            "step": 1,
            "phase": "backward",
            "module": "model.language_model.layers.3.mlp.down_proj",
        },
    ]
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    got = gpu_check.measured(run)
    assert got["cuda_peak"] == 7 << 30 and got["losses"] == [3.0] and got["skipped_steps"] == 1
    assert got["overflow_origins"][0]["module"].endswith("down_proj") and got["failed"] is None
    report = {
        "cases": [
            {
                "case": "fp16-overflow",
                **got,
                "predicted": {"gpu_total": 8 << 30},
                "measured_over_predicted": 7 / 8,
                "overflow_named": True,
            }
        ]
    }
    gpu_check.write_report(tmp_path / "r.json", report)
    assert json.loads((tmp_path / "r.json").read_text()) == report
    text = gpu_check.summary(report)
    assert "fp16-overflow" in text and "7.00" in text and "8.00" in text and "down_proj" in text


def test_the_full_depth_cases_put_autoglm_phone_9b_on_a_24_gib_card():
    """LoRA bf16, nf4 QLoRA and int8 QLoRA at AutoGLM-Phone-9B's every layer, each capped at an RTX 4090's memory."""
    from workbench.plan.planner import RTX4090_BYTES

    full = {c.name: c for c in gpu_check.CASES if c.full_depth}
    assert set(full) == {"9b-lora-bf16-24gib", "9b-qlora-nf4-24gib", "9b-qlora-int8-24gib"}
    assert {c.overrides.get("quantization.base", "none") for c in full.values()} == {"none", "nf4", "int8"}
    assert all(c.cap_bytes == RTX4090_BYTES == gpu_check.RTX4090_BYTES for c in full.values())
    assert all(c.overrides["precision.mode"] == "bf16" for c in full.values())
    assert not any(c.cap_bytes for c in gpu_check.CASES if not c.full_depth)


def test_the_full_depth_model_is_autoglm_phone_9b_whole():
    import torch
    from transformers import Glm4vForConditionalGeneration

    from workbench.config import LoraSection
    from workbench.plan.arch import planned_census
    from workbench.plan.planner import policy_for

    cfg, _ = gpu_check.model_config(None, None)
    assert cfg.text_config.num_hidden_layers == 40 and cfg.vision_config.depth == 24
    with torch.device("meta"):
        params = sum(p.numel() for p in Glm4vForConditionalGeneration(cfg).parameters())
    lora = LoraSection(enabled=False)
    assert (
        params == planned_census("autoglm-phone-9b", lora, policy_for("bf16", lora)).count()
    )  # what the planner plans
    assert 10.2e9 < params < 10.4e9


def test_the_cap_is_a_fraction_of_the_gpu_and_a_smaller_gpu_is_refused():
    h100 = 81559 * 2**20  # what an 80 GB H100 reports
    assert gpu_check.cap_fraction(gpu_check.RTX4090_BYTES, h100) == pytest.approx(24564 / 81559)
    assert gpu_check.cap_fraction(gpu_check.RTX4090_BYTES, gpu_check.RTX4090_BYTES) == 1.0
    with pytest.raises(ValueError, match="less than the 24.0 GiB cap"):
        gpu_check.cap_fraction(gpu_check.RTX4090_BYTES, 16 * 2**30)
    with gpu_check.memory_cap(None):  # uncapped cases touch no CUDA state (this machine has none)
        pass


def test_the_report_says_whether_the_planned_fit_held():
    report = {
        "cases": [
            {
                "case": "9b-lora-bf16-24gib",
                "cuda_peak": None,
                "predicted": {"gpu_total": 28 << 30},
                "planned_fit": False,
                "out_of_memory": True,
                "error": "OutOfMemoryError: CUDA out of memory.",
            },
            {
                "case": "9b-qlora-nf4-24gib",
                "cuda_peak": 15 << 30,
                "predicted": {"gpu_total": 16 << 30},
                "measured_over_predicted": 15 / 16,
                "planned_fit": True,
                "out_of_memory": False,
                "s_per_step": [9.5, 8.25],
            },
        ]
    }
    lines = gpu_check.summary(report).splitlines()
    assert "planned not to fit 24 GiB, ran out of memory" in lines[2]
    assert "planned to fit 24 GiB, ran" in lines[3] and "8.2" in lines[3] and "15.00" in lines[3]


def test_the_inference_cases_ask_the_server_on_cuda_for_a_phone_screenshot(monkeypatch, tmp_path):
    """Each server case starts the built-in server with --device cuda (the one it checks: auto lands there too) and
    sends one 1080x2400 screenshot; the eval case evaluates a training case's run on CUDA; a failure is recorded."""
    import base64
    import contextlib
    import io

    from PIL import Image

    cases = {c.name: c for c in gpu_check.INFERENCE_CASES}
    assert set(cases) == {"serve-tiny-glm4v-cuda", "serve-9b-random-bf16", "eval-run-cuda"}
    assert cases["serve-9b-random-bf16"].model == "model-9b" and cases["serve-9b-random-bf16"].dtype == "bfloat16"
    message = gpu_check.screenshot_request()
    png = base64.b64decode(message[0]["content"][0]["image_url"]["url"].split(",", 1)[1])
    assert Image.open(io.BytesIO(png)).size == (1080, 2400)
    started = []

    @contextlib.contextmanager
    def fake_server(model, **options):
        started.append((model, options))
        raise RuntimeError("no CUDA here")
        yield

    monkeypatch.setattr("workbench.serve.start_server", fake_server)
    got = gpu_check.run_inference_case(cases["serve-9b-random-bf16"], tmp_path / "model-9b", None)
    assert started == [
        (
            str(tmp_path / "model-9b"),
            {"device": "cuda", "dtype": "bfloat16", "max_context": 8192, "log_level": "warning"},
        )
    ]
    assert got["error"] == "RuntimeError: no CUDA here" and "wall_s" in got
    evaluated = []
    monkeypatch.setattr("workbench.eval.runner.evaluate", lambda task, **kw: evaluated.append((task, kw)) or 1 / 0)
    got = gpu_check.run_inference_case(cases["eval-run-cuda"], None, tmp_path / "run")
    assert (
        evaluated[0][0] == "heldout_loss"
        and evaluated[0][1]["device"] == "cuda"
        and "ZeroDivisionError" in got["error"]
    )
    monkeypatch.setattr(gpu_check, "write_model", lambda directory, full_depth=False: directory)  # no 20 GB here
    skipped = gpu_check.inference_cases({}, tmp_path, 600, {}, str(tmp_path / "r.json"))
    assert any(r.get("skipped") == "no training case finished a run" for r in skipped)
