import torch

from workbench import train


def test_gradient_checkpointing_does_not_change_results(make_cfg):
    """Its memory saving is test_checkpointing_keeps_less_activation_memory_for_backward's."""
    common = {"schedule.max_steps": 3, "lora.dropout": 0.0}
    plain = train(make_cfg(**common, **{"output.run_name": "plain"}))
    ckpt = train(make_cfg(**common, **{"output.run_name": "ckpt", "model.gradient_checkpointing": True}))
    # Recomputation repeats the same fp32 ops: results agree to rounding.
    torch.testing.assert_close(torch.tensor(ckpt.losses), torch.tensor(plain.losses), rtol=1e-6, atol=1e-6)


def test_checkpointing_keeps_less_activation_memory_for_backward():
    from workbench.config import LoraSection, ModelSection
    from workbench.models import apply_lora, enable_gradient_checkpointing, load_base_model

    model = apply_lora(
        load_base_model(ModelSection(source="tiny-glm4"), torch.float32), LoraSection(r=2), torch.float32
    )
    enable_gradient_checkpointing(model)
    model.train()
    saved = []
    ids = torch.randint(0, 300, (1, 16))
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        model(input_ids=ids).logits.sum()
    with_ckpt, with_ckpt_bytes = len(saved), sum(t.numel() * t.element_size() for t in saved)
    model.activation_checkpointing_disable()
    saved.clear()
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        model(input_ids=ids).logits.sum()
    without_bytes = sum(t.numel() * t.element_size() for t in saved)
    # only block inputs are kept for backward: fewer tensors and fewer bytes held for it (the memory that changes)
    assert with_ckpt < len(saved) / 2 and with_ckpt_bytes < without_bytes / 2, (with_ckpt_bytes, without_bytes)


def test_checkpointing_and_lora_use_current_transformers_apis():
    """No FutureWarning from our calls: transformers 5 deprecated gradient_checkpointing_enable and
    is_gradient_checkpointing (which peft reads when it wraps a model)."""
    import warnings

    from workbench.config import LoraSection, ModelSection
    from workbench.models import apply_lora, enable_gradient_checkpointing, load_base_model

    loaded = load_base_model(ModelSection(source="tiny-glm4"), torch.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        model = apply_lora(loaded, LoraSection(r=2), torch.float32)
        enable_gradient_checkpointing(model)
    assert model.is_activation_checkpointing
