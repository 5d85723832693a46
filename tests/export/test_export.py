"""Exports of tiny GLM-4 / GLM-4V runs: merged equals base + adapter, int8 and ONNX pass their parity gates and
reload, a corrupted export fails its gate with the figures, bad input is refused with exit code 2."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from tests.conftest import SAMPLES

MERGE_TOLERANCE = 1e-4  # fp32 merge: W + scale * B @ A rounds differently from applying the adapter beside W


def _batch(tokenizer):
    from workbench.forward import collated, load_heldout

    return collated(
        load_heldout(SAMPLES / "identity" / "heldout.jsonl", tokenizer, 128, limit=4), tokenizer.pad_token_id, 4
    )[0]


def _logits(model, batch):
    with torch.no_grad():
        return model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits


@pytest.mark.parametrize("run_fixture", ["glm4_run", "glm4v_run"])
def test_merged_export_equals_base_plus_adapter(run_fixture, request, tmp_path):
    from peft import PeftModel

    from workbench.export import export
    from workbench.models import load_base_model, load_for_inference

    run = request.getfixturevalue(run_fixture)
    result = export(run, "merged", tmp_path / "merged")
    out = result.path
    for name in ("model.safetensors", "config.json", "generation_config.json", "tokenizer.json", "manifest.json"):
        assert (out / name).is_file(), name
    exported = load_for_inference(str(out))
    assert exported.tokenizer.chat_template  # the chat template travels with the export
    # the reference built here independently of the exporter: the run's base (same source and seed) + its adapter
    from workbench.config import load_config

    cfg = load_config(run / "config.json")
    base = load_base_model(cfg.model, torch.float32, seed=cfg.schedule.seed)
    batch = _batch(base.tokenizer)
    real = batch["attention_mask"].bool()
    base_logits = _logits(base.model.eval(), batch)
    with_adapter = _logits(PeftModel.from_pretrained(base.model, str(run / "adapter")).eval(), batch)
    merged = _logits(exported.model, batch)
    assert (with_adapter - base_logits).abs()[real].max() > 100 * MERGE_TOLERANCE  # the adapter matters
    assert (merged - with_adapter).abs()[real].max() < MERGE_TOLERANCE
    m = result.manifest
    assert m["status"] == "passed" and m["target"] == "merged" and m["precision"] == "float32"
    assert m["source_run"] == str(run.resolve()) and m["base"] == cfg.model.source
    assert m["parity"]["max_logit_diff"] < MERGE_TOLERANCE and m["parity"]["greedy_agreement"] == 1.0
    assert m["sizes"]["weights_bytes"] == (out / "model.safetensors").stat().st_size
    assert json.loads((out / "manifest.json").read_text()) == m


def test_half_precision_merged_export_is_smaller_and_passes(glm4_run, tmp_path):
    from workbench.export import export

    result = export(glm4_run, "merged", tmp_path / "bf16", dtype="bfloat16")
    fp32 = result.manifest["sizes"]["reference_fp32_bytes"]
    assert result.manifest["sizes"]["weights_bytes"] < 0.6 * fp32
    assert result.manifest["parity"]["passed"]


@pytest.mark.parametrize("mode", ["dynamic", "weight"])
def test_int8_export_passes_parity_and_reloads_quantized(glm4_run, tmp_path, mode):
    from torchao.quantization import Int8Tensor

    from workbench.export import export
    from workbench.models import load_for_inference

    result = export(glm4_run, "int8", tmp_path / mode, int8_mode=mode)
    p = result.manifest["parity"]
    assert p["passed"] and p["greedy_agreement"] >= 0.85
    model = load_for_inference(str(result.path)).model
    assert isinstance(model.model.layers[0].mlp.down_proj.weight, Int8Tensor)
    assert result.manifest["sizes"]["weights_bytes"] < 0.7 * result.manifest["sizes"]["reference_fp32_bytes"]


def test_int8_export_of_glm4v(glm4v_run, tmp_path):
    from workbench.export import export
    from workbench.models import load_for_inference

    result = export(glm4v_run, "int8", tmp_path / "int8")
    assert result.manifest["parity"]["passed"]
    assert type(load_for_inference(str(result.path)).model).__name__ == "Glm4vForConditionalGeneration"


def test_onnx_export_passes_parity_and_generates_like_the_merged_model(glm4_run, glm4_merged, tmp_path):
    from workbench.export import export
    from workbench.export.onnx_runner import OnnxCausalLM
    from workbench.models import load_for_inference

    result = export(glm4_run, "onnx", tmp_path / "onnx")
    assert result.manifest["parity"]["max_logit_diff"] < 1e-3
    runner = OnnxCausalLM(result.path)
    merged = load_for_inference(str(glm4_merged.path))
    prompt = merged.tokenizer.apply_chat_template(
        [{"role": "user", "content": "Who are you?"}], tokenize=False, add_generation_prompt=True
    )
    ids = merged.tokenizer(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
    expected = merged.model.generate(ids, max_new_tokens=8, do_sample=False)[0, ids.shape[1] :].tolist()
    expected = (
        expected[: expected.index(merged.tokenizer.eos_token_id)]
        if merged.tokenizer.eos_token_id in expected
        else expected
    )
    assert runner.generate_ids(ids[0].tolist(), max_new_tokens=8) == expected  # decoded with the graph's KV cache
    # the runner's chat answers as in process: the same prompt, stop rule and answer text
    from workbench.forward.generate import greedy_replies

    question = [{"role": "user", "content": "Who are you?"}]
    assert runner.chat(question, 8) == greedy_replies(merged.model, merged.tokenizer, [question], 8)[0]
    # the cache is real: the prompt less its last token, then that token after the returned past, gives the
    # whole prompt's last logits (the graph takes and returns the key/values as flat tensors)
    assert runner.has_cache and len(runner.cache_inputs) == 2 * merged.model.config.num_hidden_layers
    prompt_ids = ids.numpy()
    whole, _ = runner.forward(prompt_ids, np.ones_like(prompt_ids))
    _, past = runner.forward(prompt_ids[:, :-1], np.ones_like(prompt_ids[:, :-1]))
    assert past[0].shape[2] == prompt_ids.shape[1] - 1
    last, present = runner.forward(prompt_ids[:, -1:], np.ones_like(prompt_ids), past)
    assert present[0].shape[2] == prompt_ids.shape[1] and np.abs(last[0, -1] - whole[0, -1]).max() < 1e-4


def test_onnx_int8_export_passes_its_gate(glm4_run, tmp_path):
    import collections

    import onnx

    from workbench.export import export

    result = export(glm4_run, "onnx-int8", tmp_path / "onnx-int8")
    assert result.manifest["parity"]["passed"]
    assert "int8" in result.manifest["precision"]
    # really quantized: every decoder projection (q, k, v, o, gate_up, down per layer) multiplies int8 weights
    graph = onnx.load(str(result.path / "model.onnx"), load_external_data=False).graph
    ops = collections.Counter(node.op_type for node in graph.node)
    layers = json.loads((result.path / "config.json").read_text())["num_hidden_layers"]
    int8_weights = [t for t in graph.initializer if t.data_type == onnx.TensorProto.INT8 and len(t.dims) == 2]
    assert ops["MatMulInteger"] >= 6 * layers and len(int8_weights) >= 6 * layers, (ops, len(int8_weights))


def test_corrupted_export_fails_its_parity_gate_with_the_figures(glm4_merged, tmp_path, capsys):
    from safetensors.torch import load_file, save_file

    from workbench.cli.main import main
    from workbench.export import ParityFailed, verify

    broken = tmp_path / "broken"
    shutil.copytree(glm4_merged.path, broken)
    weights = load_file(str(broken / "model.safetensors"))
    name = next(n for n in weights if n.endswith("layers.0.mlp.down_proj.weight"))
    weights[name] = weights[name] * 5.0  # one corrupted matrix
    save_file(weights, str(broken / "model.safetensors"), metadata={"format": "pt"})
    assert verify(glm4_merged.path).passed  # the intact export still verifies
    with pytest.raises(ParityFailed) as err:
        verify(broken)
    report = err.value.report
    assert not report.passed and report.max_logit_diff > report.gate.max_logit_diff
    assert "max |logit diff|" in str(err.value)
    assert main(["export", "--verify", str(broken)]) == 1
    printed = capsys.readouterr().err
    assert "failed its parity gate" in printed and '"max_logit_diff"' in printed


def test_export_outside_its_gate_is_a_failed_export_not_a_warning(glm4_run, tmp_path):
    from workbench.export import ParityFailed, ParityGate, export

    out = tmp_path / "int8"
    with pytest.raises(ParityFailed) as err:
        export(glm4_run, "int8", out, gate=ParityGate(max_logit_diff=0.0, min_agreement=1.0, max_loss_increase=0.0))
    assert not out.exists()  # nothing that looks like a usable export
    failed = json.loads((tmp_path / "int8.failed" / "manifest.json").read_text())
    assert failed["status"] == "failed parity" and failed["parity"]["failures"]
    assert failed["parity"]["max_logit_diff"] == err.value.report.max_logit_diff


def test_bad_input_is_refused_with_exit_code_2(glm4_run, glm4v_run, tmp_path, capsys):
    from workbench.cli.main import main

    def refused(*argv: str) -> str:
        assert main(["export", *argv]) == 2
        return capsys.readouterr().err

    assert "does not exist" in refused(str(tmp_path / "nope"))
    no_adapter = tmp_path / "unfinished"
    no_adapter.mkdir()
    shutil.copy(glm4_run / "config.json", no_adapter / "config.json")
    assert "has no LoRA adapter" in refused(str(no_adapter))
    assert "unsupported target 'tflite'" in refused(str(glm4_run), "--target", "tflite")
    assert "applies to --target merged only" in refused(str(glm4_run), "--target", "int8", "--dtype", "bfloat16")
    assert "exports text-only decoders" in refused(str(glm4v_run), "--target", "onnx", "--out", str(tmp_path / "o"))
    existing = tmp_path / "taken"
    existing.mkdir()
    assert "--force" in refused(str(glm4_run), "--out", str(existing))
    assert "is not an export" in refused("--verify", str(tmp_path))


@pytest.mark.parametrize("target,package", [("int8", "torchao"), ("onnx-int8", "onnxruntime")])
def test_a_target_whose_package_is_missing_is_refused_in_one_line(
    glm4_run, tmp_path, capsys, monkeypatch, target, package
):
    """Without the export extra: one line naming the package and its install command, exit 2, nothing written."""
    import sys

    from workbench.cli.main import main

    monkeypatch.setitem(sys.modules, package, None)  # as if it were not installed
    assert main(["export", str(glm4_run), "--target", target, "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"pip install '{package}" in err and "Traceback" not in err, err
    assert not (tmp_path / "x").exists() and not (tmp_path / "x.partial").exists()


def _screenshot_positions(run, max_examples: int) -> int:
    """Real positions of the run's first held-out examples as training tokenizes them: image tokens included."""
    from workbench.config import load_config
    from workbench.forward import load_heldout
    from workbench.models import load_base_model

    cfg = load_config(run / "config.json")
    base = load_base_model(cfg.model, torch.float32)
    examples = load_heldout(cfg.data.eval, base.tokenizer, cfg.data.max_length, base.processor, limit=max_examples)
    assert all(e.vision is not None for e in examples)  # every parity row holds a screenshot
    return sum(len(e.input_ids) for e in examples)


@pytest.mark.parametrize("target", ["merged", "int8"])
def test_a_screenshot_run_exports_from_the_cli_with_parity_on_its_screenshot_rows(
    glm4v_screens_run, tmp_path, capsys, target
):
    """The run notebook 05 makes (GLM-4V on phone screenshots): parity runs on its held-out screenshot rows, images
    given to both models (it used to stop with "the row holds images, but the model is text-only")."""
    from tests.models.load_alone import loaded_alone
    from workbench.cli.main import main
    from workbench.export import verify

    out = tmp_path / target
    assert main(["export", str(glm4v_screens_run), "--target", target, "--out", str(out), "--max-examples", "6"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    parity = manifest["parity"]
    assert manifest["status"] == "passed" and parity["passed"] and manifest["family"] == "glm4v"
    assert parity["heldout"] == str((SAMPLES / "phone_screens" / "heldout.jsonl").resolve()) and parity["examples"] == 6
    assert parity["positions"] == _screenshot_positions(glm4v_screens_run, 6)
    assert json.loads((out / "processor_config.json").read_text())["processor_class"] == "Glm4vProcessor"
    if target == "merged":
        assert parity["max_logit_diff"] < 1e-4 and parity["greedy_agreement"] == 1.0
        assert verify(out).passed  # read back again from disk, on the same screenshot rows
        alone = loaded_alone(out)  # plain transformers in a fresh process: what a server gets from the export
        assert not alone["workbench_imported"] and alone["finite"] and alone["patch_size"] == 14


def test_a_corrupted_vision_tower_weight_fails_the_parity_gate(glm4v_screens_run, tmp_path):
    """Parity sees the screenshots: one scaled matrix inside the vision tower moves the logits after the image."""
    from safetensors.torch import load_file, save_file

    from workbench.export import ParityFailed, export, verify

    good = export(glm4v_screens_run, "merged", tmp_path / "merged", max_examples=4).path
    broken = tmp_path / "broken"
    shutil.copytree(good, broken)
    weights = load_file(str(broken / "model.safetensors"))
    name = next(n for n in weights if ".visual.blocks.0." in n and n.endswith("mlp.down_proj.weight"))
    weights[name] = weights[name] * 5.0
    save_file(weights, str(broken / "model.safetensors"), metadata={"format": "pt"})
    assert verify(good).passed
    with pytest.raises(ParityFailed) as err:
        verify(broken)
    assert err.value.report.max_logit_diff > err.value.report.gate.max_logit_diff
