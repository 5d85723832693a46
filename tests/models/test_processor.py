"""GLM-4.1V processors (workbench.models.processor) and the vision parts of LoRA wrapping."""

import pytest
import torch

from workbench.config import ConfigError, LoraSection, ModelSection
from workbench.engine.census import parameter_census
from workbench.models import apply_lora, load_base_model
from workbench.models.processor import GLM4V_CHAT_TEMPLATE, image_token_count

FP32 = torch.float32


def vision_rows(model):
    rows, _ = parameter_census(model)
    return [r for r in rows if r["group"] == "vision"]


def test_vision_tower_frozen_and_projector_adapted_only_when_asked():
    default = apply_lora(load_base_model(ModelSection(source="tiny-glm4v"), FP32), LoraSection(), FP32)
    assert vision_rows(default) and not any(r["trainable"] for r in vision_rows(default))
    with_projector = apply_lora(
        load_base_model(ModelSection(source="tiny-glm4v"), FP32), LoraSection(train_projector=True), FP32
    )
    trained = [n for n, p in with_projector.named_parameters() if p.requires_grad and ".visual." in n]
    assert trained and all(".visual.merger." in n for n in trained)
    assert any(".visual.blocks." in n for n, _ in with_projector.named_parameters())  # the encoder: there, frozen


def test_projector_with_named_targets_and_on_a_text_model():
    model = apply_lora(
        load_base_model(ModelSection(source="tiny-glm4v"), FP32),
        LoraSection(target_modules=["q_proj"], train_projector=True),
        FP32,
    )
    adapted = {
        n.split(".lora_")[0].split(".visual.")[-1]
        for n, p in model.named_parameters()
        if p.requires_grad and ".visual." in n
    }
    assert adapted == {f"merger.{x}" for x in ("proj", "gate_proj", "up_proj", "down_proj")}
    for lora in (True, False):
        with pytest.raises(ConfigError) as exc:
            apply_lora(
                load_base_model(ModelSection(source="tiny-glm4"), FP32),
                LoraSection(enabled=lora, train_projector=True),
                FP32,
            )
        assert exc.value.problems[0][0] == "lora.train_projector" and "no vision projector" in exc.value.problems[0][1]


def _save_dir(tmp_path, template):
    loaded = load_base_model(ModelSection(source="tiny-glm4v"), FP32)
    loaded.model.save_pretrained(tmp_path)
    loaded.tokenizer.chat_template = template
    loaded.tokenizer.save_pretrained(tmp_path)
    image_processor = loaded.processor.image_processor
    image_processor.size = {"shortest_edge": 56 * 56, "longest_edge": 28 * 28 * 64}  # the directory's own limits
    image_processor.save_pretrained(tmp_path)
    return tmp_path


def test_a_model_directory_brings_its_resize_rules_and_template(tmp_path):
    loaded = load_base_model(ModelSection(source=str(_save_dir(tmp_path, GLM4V_CHAT_TEMPLATE))), FP32)
    assert loaded.family == "glm4v" and loaded.processor.chat_template == GLM4V_CHAT_TEMPLATE
    assert image_token_count(loaded.processor, 1080, 2400) <= 64  # its longest_edge, not the default's 3354


def test_a_template_that_drops_reasoning_is_replaced_with_a_warning(tmp_path):
    dropping = GLM4V_CHAT_TEMPLATE.replace("{{ m['content'] }}", "{{ m['content'].split('</think>')[-1] }}")
    with pytest.warns(UserWarning, match="drops <think> reasoning"):
        loaded = load_base_model(ModelSection(source=str(_save_dir(tmp_path, dropping))), FP32)
    assert loaded.processor.chat_template == GLM4V_CHAT_TEMPLATE == loaded.tokenizer.chat_template
