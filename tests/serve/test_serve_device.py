"""Inference on the device the user has: `serve`, `eval` and export parity resolve ``--device`` and ``--dtype`` as
training does, the weights go where that resolution says, and every tensor the decoder makes follows them. No GPU
here: CUDA is a stub (torch.cuda's answers patched), and the meta device stands in for a device other than the CPU."""

from __future__ import annotations

import base64
import io

import pytest
import torch

from workbench.config import ConfigError, PrecisionSection
from workbench.hardware import Hardware
from workbench.precision import resolve_policy
from workbench.serve.config import ServeConfig
from workbench.serve.registry import ServedModels, placement

from .helpers import make_adapter


@pytest.fixture
def cuda_visible(monkeypatch):
    """torch says two CUDA GPUs are visible; ``bf16`` says whether they run bfloat16 (an sm_75 T4 does not)."""
    state = {"bf16": True}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: state["bf16"])
    return state


def test_auto_is_the_gpu_when_one_is_visible_in_the_dtype_training_picks_there(cuda_visible):
    assert placement("auto", "auto") == (torch.device("cuda"), "bfloat16")
    assert placement("cuda:1", "auto") == (torch.device("cuda", 1), "bfloat16")
    assert placement("auto", "float32") == (torch.device("cuda"), "float32")  # asked for: kept
    cuda_visible["bf16"] = False  # a T4: training's auto picks fp16 there, and so does inference
    assert placement("auto", "auto") == (torch.device("cuda"), "float16")
    with pytest.raises(ConfigError, match="cuda:2 does not exist: 2 CUDA device"):
        placement("cuda:2", "auto")
    with pytest.raises(ConfigError, match="'tpu' is not a device: use auto, cpu, cuda or cuda:N"):
        placement("tpu", "auto")


@pytest.mark.parametrize("fast_bf16", [True, False])
def test_on_a_cpu_auto_is_what_training_precision_auto_picks(monkeypatch, fast_bf16):
    """bf16 where the CPU has it natively (AVX512-BF16/AMX), else fp32: one decision, training's."""
    monkeypatch.setattr("workbench.hardware.cpu_has_fast_bf16", lambda: fast_bf16)
    device, dtype = placement("auto", "auto")
    assert device == torch.device("cpu") and dtype == ("bfloat16" if fast_bf16 else "float32")
    training = resolve_policy(PrecisionSection(mode="auto"), Hardware.of(device), lora_enabled=True)
    assert training.mode == ("bf16" if fast_bf16 else "fp32") and training.base_dtype == getattr(torch, dtype)
    with pytest.raises(ConfigError, match="requested but no CUDA device is visible"):
        placement("cuda", "auto")


def test_serve_and_eval_flags_take_the_device_and_default_to_auto(capsys):
    from workbench.cli.main import build_parser

    assert ServeConfig().device == "auto" and ServeConfig().dtype == "auto"
    with pytest.raises(ValueError, match="'gpu' is not a device"):
        ServeConfig(device="gpu")
    args = build_parser().parse_args(["eval", "--task", "identity", "--base", "tiny-glm4"])
    assert (args.device, args.dtype) == ("auto", "auto")
    args = build_parser().parse_args(["export", "runs/x", "--device", "cpu"])
    assert args.device == "cpu"


@pytest.mark.filterwarnings("ignore:for base_model.*copying from a non-meta parameter")
def test_the_weights_go_where_the_device_resolves(monkeypatch, tmp_path):
    """The served base and its adapter, on the resolved device (the meta device here: not the CPU, so a model left
    on the CPU is seen), in the resolved dtype."""
    run = make_adapter("tiny-glm4", tmp_path / "runs" / "probe")
    monkeypatch.setattr("workbench.hardware.resolve_device", lambda name: torch.device("meta"))
    served = ServedModels(ServeConfig(model="tiny-glm4", dtype="bfloat16", runs=[str(run)]))
    served.load()
    try:
        assert served.status == "ok", served.error
        assert served.device == torch.device("meta") and served.dtype == "bfloat16"
        params = dict(served.decoder.model.named_parameters())
        assert any("lora_A" in name for name in params)  # the adapter's weights too
        assert {p.device.type for p in params.values()} == {"meta"}
        assert {p.dtype for name, p in params.items() if "lora_" not in name} == {torch.bfloat16}
    finally:
        served.shutdown()


def _png_url() -> str:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (112, 252), (200, 30, 30)).save(buffer, "PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def test_every_tensor_the_decoder_makes_follows_the_model(monkeypatch):
    """A screenshot request and a sampled text request decoded in one batch with torch's default device set to meta:
    a tensor made without naming the model's device (a prompt's ids, positions, masks, the cache's padding, the
    images' pixels) would land on meta and the forward on the CPU model fails. The sampler's generator is made on
    the model's device (on a GPU, a CPU generator cannot draw from CUDA probabilities)."""
    from workbench.data.multimodal import encode_prompt, vision_batch
    from workbench.image_io import resolve_images
    from workbench.models import load_for_inference
    from workbench.serve import batcher
    from workbench.serve.batcher import BatchDecoder, GenerationRequest, SamplingParams

    loaded = load_for_inference("tiny-glm4v")
    decoder = BatchDecoder(loaded.model, loaded.tokenizer, max_batch=4)
    generators = []
    real_generator = torch.Generator
    monkeypatch.setattr(batcher.torch, "Generator", lambda **kw: generators.append(kw) or real_generator(**kw))
    image = [
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": _png_url()}}, {"type": "text", "text": "Open Mail"}],
        }
    ]
    shown = encode_prompt(loaded.tokenizer, resolve_images(image), loaded.processor)
    text = encode_prompt(loaded.tokenizer, [{"role": "user", "content": "hello"}], loaded.processor)
    events = []
    decoder.submit(
        GenerationRequest(
            shown.input_ids,
            SamplingParams(max_new_tokens=4),
            events.append,
            prefill_inputs=vision_batch(torch.tensor([shown.input_ids]), [shown.vision]),
        )
    )
    decoder.submit(
        GenerationRequest(text.input_ids, SamplingParams(max_new_tokens=4, temperature=0.8, seed=1), events.append)
    )
    with torch.no_grad(), torch.device("meta"):
        decoder._admit()
        while decoder._running:
            decoder._decode_step()
    finished = [e for e in events if e.finish_reason]
    assert [e.finish_reason for e in finished] == ["length", "length"], [e.error for e in finished]
    assert generators and all(made == {"device": decoder.device} for made in generators), generators


def test_a_model_that_does_not_fit_is_refused_before_loading_with_the_planners_figure(monkeypatch, cuda_visible):
    """AutoGLM-Phone-9B on a 16 GB GPU in fp16 and in fp32 on a CPU with 16 GiB free: refused before anything
    loads (nothing is fetched: the planner needs only the config), the figure and the fixes in the message."""
    import types

    import psutil

    from workbench.serve.config import ServeError

    monkeypatch.setattr(
        torch.cuda,
        "get_device_properties",
        lambda index=0: types.SimpleNamespace(total_memory=15360 * 2**20, name="Tesla T4"),
    )
    cuda_visible["bf16"] = False
    monkeypatch.setattr("workbench.models.build_run_model", lambda *a, **k: pytest.fail("loaded"))
    served = ServedModels(ServeConfig(model="zai-org/AutoGLM-Phone-9B"))
    served.load()
    assert served.status == "error" and isinstance(served.failure, ServeError)
    assert (
        "zai-org/AutoGLM-Phone-9B in float16 needs 21." in served.error
        and "cuda (Tesla T4) has 15.0 GiB" in served.error
    )
    assert "workbench plan --inference" in served.error and "quantization.base nf4" in served.error
    assert "--engine vllm" in served.error
    monkeypatch.setattr(psutil, "virtual_memory", lambda: types.SimpleNamespace(available=16 * 2**30, total=32 * 2**30))
    served = ServedModels(ServeConfig(model="autoglm-phone-9b", device="cpu", dtype="float32"))
    served.load()
    assert "autoglm-phone-9b in float32 needs 40.2 GiB" in served.error, served.error
    assert "this machine has 16.0 GiB of RAM free" in served.error and "--device cuda" in served.error


def test_the_built_in_name_and_the_hub_id_are_one_model(tmp_path):
    """A run trained on the built-in autoglm-phone-9b is served on zai-org/AutoGLM-Phone-9B (and the other way round,
    and from the Hugging Face cache's folder of it); another model is still refused, naming the flag to pass."""
    import json

    from workbench.models import canonical_model, same_model

    def run(name: str, source: str):
        adapter = tmp_path / name / "adapter"
        adapter.mkdir(parents=True)
        (adapter / "adapter_config.json").write_text(json.dumps({"r": 16, "base_model_name_or_path": source}))
        (tmp_path / name / "config.json").write_text(json.dumps({"model": {"source": source}}))
        return str(tmp_path / name)

    snapshot = tmp_path / "hub" / "models--zai-org--AutoGLM-Phone-9B" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    assert same_model("autoglm-phone-9b", "zai-org/AutoGLM-Phone-9B") and same_model(str(snapshot), "autoglm-phone-9b")
    assert canonical_model("zai-org/autoglm-phone-9b") == "zai-org/autoglm-phone-9b"
    assert not same_model("autoglm-phone-9b", "tiny-glm4v") and not same_model(str(tmp_path), "autoglm-phone-9b")
    for served, trained in [
        ("zai-org/AutoGLM-Phone-9B", "autoglm-phone-9b"),
        ("autoglm-phone-9b", "zai-org/AutoGLM-Phone-9B"),
        (str(snapshot), "autoglm-phone-9b"),
    ]:
        assert ServeConfig(model=served, runs=[run(f"r{len(list(tmp_path.iterdir()))}", trained)]).problems() == []
    problems = ServeConfig(model="zai-org/AutoGLM-Phone-9B", runs=[run("other", "tiny-glm4v")]).problems()
    assert problems and "pass --model tiny-glm4v" in problems[0][1]
