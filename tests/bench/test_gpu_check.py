"""The GPU check's CPU-side logic: its cases, its skip without a GPU, its JSON report (it has never run on a GPU)."""
from __future__ import annotations

import json

import pytest

from tests.conftest import SAMPLES
from workbench.bench import gpu_check


def test_without_cuda_it_skips_saying_why_and_writes_the_json(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    out = tmp_path / "gpu.json"
    assert gpu_check.main(["--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert "no CUDA GPU visible" in report["skipped"] and "nothing was run" in report["skipped"]
    assert report["cases_planned"] == [c.name for c in gpu_check.CASES] and "cases" not in report
    assert "gpu_check: skipped: no CUDA GPU visible" in capsys.readouterr().out


def test_the_cases_cover_what_the_issue_asks_and_each_is_a_valid_run(tmp_path):
    cases = {c.name: c for c in gpu_check.CASES}
    assert len(cases) == len(gpu_check.CASES)
    heads = {c.overrides.get("memory.loss_head", "chunked") for c in cases.values()}
    assert heads == {"full", "labels", "chunked"}
    fp16 = cases["fp16-overflow"]
    assert fp16.expects_overflow and fp16.overrides["precision.mode"] == "fp16"
    assert fp16.overrides["precision.init_scale"] >= 2.0 ** 30  # overflows on the first steps, on purpose
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
    events = [{"type": "memory", "time": 0.0, "rank": 0, "step": 1, "devices": [{"device": "cuda:0", "peak": 5 << 30}]},
              {"type": "memory", "time": 0.0, "rank": 0, "step": 2, "devices": [{"device": "cuda:0", "peak": 7 << 30}]},
              {"type": "step", "time": 0.0, "rank": 0, "step": 1, "loss": 3.0, "skipped": True},
              {"type": "overflow_origin", "time": 0.0, "rank": 0, "step": 1, "phase": "backward",
               "module": "model.language_model.layers.3.mlp.down_proj"}]
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    got = gpu_check.measured(run)
    assert got["cuda_peak"] == 7 << 30 and got["losses"] == [3.0] and got["skipped_steps"] == 1
    assert got["overflow_origins"][0]["module"].endswith("down_proj") and got["failed"] is None
    report = {"cases": [{"case": "fp16-overflow", **got, "predicted": {"gpu_total": 8 << 30},
                         "measured_over_predicted": 7 / 8, "overflow_named": True}]}
    gpu_check.write_report(tmp_path / "r.json", report)
    assert json.loads((tmp_path / "r.json").read_text()) == report
    text = gpu_check.summary(report)
    assert "fp16-overflow" in text and "7.00" in text and "8.00" in text and "down_proj" in text
