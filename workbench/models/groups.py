"""Module groups: the one mapping from a parameter or module name to the group the census, the
coverage sampler and the memory planner report it under."""

from __future__ import annotations

GROUP_RULES = (  # first match wins; names are peft/transformers parameter or module names
    # A LoRA adapter inside the vision tower is vision: it lives there, and text-only data never reaches it.
    ("vision", ("visual.", "vision_tower", "vision_model")),
    ("lora", ("lora_",)),
    ("embeddings", ("embed_tokens", "wte", "word_embeddings")),
    ("lm_head", ("lm_head", "output_layer")),
    ("norms", ("norm",)),
)
GROUPS = tuple(g for g, _ in GROUP_RULES) + ("decoder",)


def module_group(name: str) -> str:
    for group, needles in GROUP_RULES:
        if any(n in name for n in needles):
            return group
    return "decoder"
