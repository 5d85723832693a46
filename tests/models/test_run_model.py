"""A run's model is rebuilt on the base it trained on: a code-built base is its seed, read from the run's config."""

from __future__ import annotations

import pytest

from workbench.runs.layout import run_config, trained_weights

from ..conftest import SAMPLES

HELDOUT = SAMPLES / "identity" / "heldout.jsonl"


@pytest.fixture(scope="module")
def seed7_run(tmp_path_factory):
    """tiny-glm4 trained with LoRA and schedule.seed 7 (not the schema's default 0), its eval loss logged at the
    end on the identity held-out rows."""
    from workbench.config import load_config
    from workbench.training import train

    from ..conftest import tiny_run_overrides

    tmp = tmp_path_factory.mktemp("runs")
    cfg = load_config(
        None,
        tiny_run_overrides(
            tmp,
            **{
                "schedule.seed": 7,
                "data.eval": str(HELDOUT),
                "schedule.eval_loss_every": 6,
                "output.run_name": "seed7",
            },
        ),
    )
    result = train(cfg)
    assert result.eval_losses[-1][0] == 6
    return result.run_dir, result.eval_losses[-1][1]


def _loss(model, tokenizer, run_dir) -> float:
    from workbench.eval.loss import HeldoutLossTask

    cfg = run_config(run_dir)
    return HeldoutLossTask().measure(
        model, tokenizer, HELDOUT, max_length=cfg.data.max_length, batch_size=cfg.schedule.micro_batch_size
    )["loss"]


def test_the_served_run_has_the_loss_the_engine_logged(seed7_run):
    from workbench.serve.config import ServeConfig
    from workbench.serve.registry import ServedModels

    run_dir, logged = seed7_run
    served = ServedModels(ServeConfig(model="tiny-glm4", runs=[str(run_dir)]))
    served.load()
    try:
        assert served.status == "ok", served.error
        served.decoder.model.set_adapter(served.adapters["seed7"].internal)  # what a request for the run routes to
        assert _loss(served.decoder.model, served.tokenizer, run_dir) == pytest.approx(logged, rel=1e-5)
        assert served.base_seed == 7
    finally:
        served.shutdown()


def test_eval_run_in_process_and_the_export_reference_have_the_engines_loss(seed7_run):
    from workbench.eval.runner import evaluate
    from workbench.export.source import load_reference, open_run

    run_dir, logged = seed7_run
    report = evaluate("heldout_loss", runs=[run_dir], progress=False, write=False)
    assert report.metrics["seed7"]["default"]["loss"] == pytest.approx(logged, rel=1e-5)
    ref = load_reference(open_run(run_dir))
    assert _loss(ref.model, ref.tokenizer, run_dir) == pytest.approx(logged, rel=1e-5)


def test_a_server_of_another_seeds_base_refuses_the_run(seed7_run):
    from workbench.serve.config import ServeConfig, ServeError
    from workbench.serve.registry import ServedModels

    run_dir, _ = seed7_run
    served = ServedModels(ServeConfig(model="tiny-glm4"))  # no run: the base of the schema's default seed, 0
    served.load()
    try:
        assert served.status == "ok" and served.base_seed == 0
        with pytest.raises(ServeError, match="schedule.seed 7"):
            served.add_adapter("late", run_dir)
    finally:
        served.shutdown()


def test_build_run_model_draws_a_code_built_base_from_the_runs_seed(seed7_run):
    import torch

    from workbench.models import base_seed, build_run_model, load_for_inference

    run_dir, _ = seed7_run
    cfg = run_config(run_dir)
    assert base_seed(cfg) == 7
    built = build_run_model(cfg, torch.float32, trained_weights(run_dir))
    with built.model.disable_adapter():
        base = dict(built.model.base_model.model.named_parameters())
    default = dict(load_for_inference("tiny-glm4").model.named_parameters())
    name = "model.embed_tokens.weight"
    assert not torch.equal(base[name], default[name])  # seed 7's weights, not seed 0's


def test_load_for_inference_puts_the_model_on_the_device_asked():
    import torch

    from workbench.models import load_for_inference

    assert {p.device.type for p in load_for_inference("tiny-glm4").model.parameters()} == {"cpu"}  # the default
    on_meta = load_for_inference("tiny-glm4", device=torch.device("meta")).model  # any device torch knows
    assert {p.device.type for p in on_meta.parameters()} == {"meta"} and not on_meta.training


def test_load_run_for_inference_merges_a_lora_runs_adapter_into_its_own_base(seed7_run, tmp_path):
    """A LoRA run saves no whole model: its adapter is merged into the base of the run's seed (no peft wrapper
    left), with the loss the engine logged; a run with no weights yet is refused, naming what is missing."""
    from workbench.models import load_run_for_inference

    run_dir, logged = seed7_run
    loaded = load_run_for_inference(run_dir)
    assert type(loaded.model).__module__.startswith("transformers") and not loaded.model.training
    assert _loss(loaded.model, loaded.tokenizer, run_dir) == pytest.approx(logged, rel=1e-4)
    with pytest.raises(ValueError, match="no trained weights"):
        load_run_for_inference(tmp_path)


def test_load_run_for_inference_keeps_a_qlora_runs_adapter_unmerged_on_its_nf4_base(qlora_run):
    """Over an nf4 base the adapter stays as it trained (merging would round the merged weights to nf4 again): the
    model the recipe bench plays has the run's own eval loss and the logits of its base and adapter built by hand."""
    import torch

    from workbench.events import iter_events
    from workbench.models import load_run_for_inference

    from ..conftest import qlora_reference

    loaded = load_run_for_inference(qlora_run)
    assert not loaded.model.training
    logged = [e.loss for e in iter_events(qlora_run / "events.jsonl") if getattr(e, "type", None) == "eval"][-1]
    assert _loss(loaded.model, loaded.tokenizer, qlora_run) == pytest.approx(logged, rel=1e-6)
    reference, _ = qlora_reference(qlora_run)
    ids = torch.tensor([[5, 70, 81, 120, 33, 9]])
    with torch.no_grad():
        torch.testing.assert_close(
            loaded.model(input_ids=ids).logits, reference(input_ids=ids).logits, rtol=0, atol=1e-4
        )


def test_two_quantized_bases_are_the_same_whatever_the_order_their_kept_modules_are_named_in():
    from workbench.config.schema import QuantizationSection
    from workbench.models.run_model import _base_quantization

    one = QuantizationSection(base="nf4", skip_modules=["visual", "lm_head"])
    assert _base_quantization(one) == _base_quantization(
        QuantizationSection(base="nf4", skip_modules=["lm_head", "visual"])
    )
    assert _base_quantization(one) != _base_quantization(QuantizationSection(base="nf4", skip_modules=["lm_head"]))
