"""The loss head where the labels are: the same loss and the same gradient of every parameter as the full head.

Tolerances: fp32 1e-6 relative (the same sum over the same (position, target) pairs in another order); under
bf16 / fp16 autocast the projection's low-precision matmul blocks rows differently, so 1e-2 relative on the
loss and 2e-2 relative (by norm) on each gradient, what tests/engine's low-precision comparisons allow for
one reordering. Dropout on a LoRA of lm_head draws another mask for fewer positions, so exactness there is
checked without dropout (the other layers' dropout draws are untouched: the head is the last op).
"""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from tests.conftest import SAMPLES
from workbench import train
from workbench.config import LoraSection, MemorySection, ModelSection
from workbench.data.tokenize import IGNORE_INDEX
from workbench.events import iter_events
from workbench.forward import batch_loss_sum, collated, load_heldout, output_head
from workbench.models import apply_lora, load_base_model
from workbench.models.loading import LoadedModel

HEADS = {
    "full": MemorySection(loss_head="full"),
    "labels": MemorySection(loss_head="labels"),
    "chunked": MemorySection(loss_head="chunked", loss_chunk_tokens=5),
}  # several chunks, a ragged last one
FP32_REL = 1e-6
LOW_LOSS_REL, LOW_GRAD_REL = 1e-2, 2e-2


def _tiny_llama(tied: bool) -> LoadedModel:
    """SmolLM2's architecture (LlamaForCausalLM) at tiny widths: tied or untied input/output embeddings."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from workbench.models.tiny import VOCAB_SIZE, byte_tokenizer

    tok = byte_tokenizer()
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        tie_word_embeddings=tied,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=tok.bos_token_id,
    )
    return LoadedModel(LlamaForCausalLM(cfg), tok, "llama", "tiny-llama")


def _model(source: str, lora: dict | None, dtype=torch.float32) -> torch.nn.Module:
    loaded = (
        _tiny_llama(source == "tiny-llama-tied")
        if source.startswith("tiny-llama")
        else load_base_model(ModelSection(source=source), dtype)
    )
    model = apply_lora(loaded, LoraSection(**lora) if lora is not None else LoraSection(enabled=False), torch.float32)
    torch.manual_seed(1)
    with torch.no_grad():  # lora_B starts at zero, which would leave every lora_A gradient zero: nothing to compare
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)
    return model.train()


def _text_batch(seed: int = 0) -> dict:
    """Two rows of unequal length (right-padded), labels on a few spans as chat rows have them."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 250, (2, 40), generator=g)
    labels = ids.clone()
    labels[:, :22] = IGNORE_INDEX
    labels[0, 30:33] = IGNORE_INDEX
    labels[1, 31:] = IGNORE_INDEX  # padding
    mask = torch.ones_like(ids)
    mask[1, 31:] = 0
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def _loss_and_grads(model, batch, memory, autocast=None):
    model.zero_grad(set_to_none=True)
    torch.manual_seed(2)
    loss = batch_loss_sum(model, batch, autocast, memory)
    loss.backward()
    return loss.detach(), {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


def _assert_same(model, batch, autocast=None, loss_rel=FP32_REL, grad_rel=FP32_REL):
    ref_loss, ref = _loss_and_grads(model, batch, HEADS["full"], autocast)
    assert ref and all(float(g.norm()) > 0 for g in ref.values())  # every trained parameter has a gradient to compare
    for head in ("labels", "chunked"):
        loss, grads = _loss_and_grads(model, batch, HEADS[head], autocast)
        assert loss.dtype == torch.float32 and loss.shape == ()
        assert abs(float(loss) - float(ref_loss)) <= loss_rel * abs(float(ref_loss)), (head, loss, ref_loss)
        assert grads.keys() == ref.keys(), head
        for name, g in ref.items():
            err = float((grads[name].float() - g.float()).norm() / g.float().norm())
            assert err <= grad_rel, (head, name, err)


@pytest.mark.parametrize(
    "source,lora",
    [
        ("tiny-glm4", {}),  # untied, LoRA on the default targets (lm_head frozen)
        ("tiny-glm4", {"target_modules": ["q_proj", "v_proj", "lm_head"], "dropout": 0.0}),  # LoRA on lm_head
        ("tiny-llama-tied", None),  # tied embeddings, full fine-tuning: the shared weight gets both gradients
        ("tiny-llama-tied", {}),
        ("tiny-llama-untied", None),
    ],
    ids=["glm4-lora", "glm4-lora-lm_head", "llama-tied-full", "llama-tied-lora", "llama-untied-full"],
)
def test_fp32_loss_and_every_gradient_equal_the_full_head(source, lora):
    _assert_same(_model(source, lora), _text_batch())


@pytest.mark.parametrize(
    "source,lora",
    [("tiny-glm4", {"target_modules": ["q_proj", "v_proj", "lm_head"], "dropout": 0.0}), ("tiny-llama-tied", None)],
)
def test_each_rows_log_probability_and_its_gradient_equal_the_full_heads(source, lora):
    """DPO's per-reply log-probabilities (``sequence_logprobs``) through the labels and chunked heads: each row's sum
    and the gradient of a loss weighing the rows differently (as DPO's does) equal the full head's; the chunked head
    projects only the target positions (the full head: every position of both rows)."""
    from workbench.forward import sequence_logprobs

    model, batch = _model(source, lora), _text_batch()
    weights = torch.tensor([1.0, -2.0])  # one row pushed up, the other down: a sum over rows would hide a mix-up

    def run(memory):
        model.zero_grad(set_to_none=True)
        logp, tokens = sequence_logprobs(model, batch, None, memory)
        (logp * weights).sum().backward()
        return logp.detach(), tokens, {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    ref_logp, ref_tokens, ref_grads = run(HEADS["full"])
    assert ref_logp.shape == (2,) and ref_tokens.tolist() == [15, 9]
    for head in ("labels", "chunked"):
        logp, tokens, grads = run(HEADS[head])
        assert torch.allclose(logp, ref_logp, rtol=FP32_REL, atol=1e-5), (head, logp, ref_logp)
        assert tokens.tolist() == ref_tokens.tolist() and grads.keys() == ref_grads.keys()
        for name, g in ref_grads.items():
            assert float((grads[name] - g).norm() / g.norm()) <= 1e-5, (head, name)
        assert getattr(output_head(model), "_workbench_projected")[0] == 24  # 15 + 9 positions, not 2 x 40


@pytest.mark.parametrize("mode", ["bf16", "fp16"])
def test_low_precision_autocast_matches_the_full_head(mode):
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[mode]
    model = _model("tiny-glm4", {"target_modules": ["q_proj", "v_proj", "lm_head"], "dropout": 0.0})
    _assert_same(model, _text_batch(), lambda: torch.autocast("cpu", dtype=dtype), LOW_LOSS_REL, LOW_GRAD_REL)


def test_screenshot_rows_on_tiny_glm4v():
    """GLM-4V rows with a screenshot: the head skips the image tokens' positions (no labels there) and gives the
    same loss and gradients, the vision projector's included."""
    loaded = load_base_model(ModelSection(source="tiny-glm4v"), torch.float32)
    examples = load_heldout(
        SAMPLES / "phone_screens" / "heldout.jsonl", loaded.tokenizer, 512, loaded.processor, limit=2
    )
    batch = collated(examples, loaded.tokenizer.pad_token_id, 2)[0]
    assert "pixel_values" in batch
    model = apply_lora(loaded, LoraSection(train_projector=True, dropout=0.0), torch.float32)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)
    _assert_same(model.train(), batch)


def test_the_head_is_restored_and_rejects_mismatched_states():
    model = _model("tiny-glm4", {})
    head = output_head(model)
    assert "forward" not in head.__dict__
    batch = _text_batch()
    batch_loss_sum(model, batch, None, HEADS["chunked"])
    assert "forward" not in head.__dict__  # the model's own forward is back: generation sees logits again
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    assert logits.shape == (2, 40, 320)
    with pytest.raises(ValueError, match="memory.loss_head full"):
        batch_loss_sum(model, {**batch, "labels": batch["labels"][:, :-1]}, None, HEADS["labels"])


def test_a_micro_batch_without_labels_gives_zero_and_reaches_the_head():
    model = _model("tiny-llama-tied", None)
    batch = {**_text_batch(), "labels": torch.full((2, 40), IGNORE_INDEX)}
    loss, grads = _loss_and_grads(model, batch, HEADS["chunked"])
    assert float(loss) == 0.0 and "model.embed_tokens.weight" in grads  # the (tied) head took part in the graph


def _adapter(result) -> dict:
    return load_file(str(result.run_dir / "adapter" / "adapter_model.safetensors"))


def test_accumulation_2x2_chunked_equals_4x1_full(make_cfg):
    """The engine's loss through the chunked head, two micro-batches of 2, equals the full head's one of 4:
    the loss normalisation (precision.step) sees the same token counts whatever the head."""
    common = {"schedule.max_steps": 3, "lora.dropout": 0.0, "precision.max_grad_norm": None}
    a = train(
        make_cfg(
            **common, **{"schedule.micro_batch_size": 4, "memory.loss_head": "full", "output.run_name": "full-4x1"}
        )
    )
    b = train(
        make_cfg(
            **common,
            **{
                "schedule.micro_batch_size": 2,
                "schedule.grad_accum_steps": 2,
                "memory.loss_head": "chunked",
                "memory.loss_chunk_tokens": 16,
                "output.run_name": "chunked-2x2",
            },
        )
    )
    torch.testing.assert_close(torch.tensor(b.losses), torch.tensor(a.losses), rtol=1e-5, atol=1e-6)
    wa, wb = _adapter(a), _adapter(b)
    for k in wa:
        torch.testing.assert_close(wb[k], wa[k], rtol=1e-4, atol=1e-6)


def test_held_out_loss_is_the_same_for_every_head(make_cfg, monkeypatch):
    """The engine's eval goes through the run's head: a chunked-head run hands its own memory section to the
    held-out loss, and its eval event equals the full and the labels head's figures on the same final weights
    (one run; the other heads are measured on the model it leaves, with the examples and batching it used)."""
    from workbench.engine import run as run_module

    calls, measure = [], run_module.heldout_loss

    def recording(model, examples, pad_token_id, **kw):
        calls.append((model, examples, pad_token_id, kw))
        return measure(model, examples, pad_token_id, **kw)

    monkeypatch.setattr(run_module, "heldout_loss", recording)
    r = train(
        make_cfg(
            **{
                "schedule.max_steps": 1,
                "memory.loss_head": "chunked",
                "memory.loss_chunk_tokens": 5,
                "data.eval": str(SAMPLES / "identity" / "heldout.jsonl"),
            }
        )
    )
    event = [e.loss for e in iter_events(r.run_dir / "events.jsonl") if e.type == "eval"][-1]
    model, examples, pad, kw = calls[-1]
    assert kw["memory"].loss_head == "chunked" and kw["memory"].loss_chunk_tokens == 5  # the run's head, not a default
    assert measure(model, examples, pad, **kw).loss == pytest.approx(event, rel=FP32_REL)  # the weights it measured
    for head in ("full", "labels"):
        assert measure(model, examples, pad, **{**kw, "memory": HEADS[head]}).loss == pytest.approx(event, rel=FP32_REL)


@pytest.fixture
def poisoned_head(monkeypatch):
    """tiny-glm4 whose lm_head overflows fp16 (|logits| above 65504) while its weights fit fp16."""
    from workbench.models import loading, tiny

    def build(seed=0, dtype=torch.float32):
        model, tok = tiny.tiny_glm4(seed=seed, dtype=torch.float32)
        with torch.no_grad():
            model.lm_head.weight.mul_(2e5)  # entries ~4e3, logits ~3e4 x a few std
        return model.to(dtype), tok

    monkeypatch.setitem(loading._TINY, "tiny-glm4", build)


@pytest.mark.parametrize("head", ["chunked", "full"])
def test_overflow_diagnosis_names_the_head_module(make_cfg, poisoned_head, head):
    """An fp16 overflow in the projection is found on replay (which runs the run's head) and named lm_head."""
    r = train(
        make_cfg(
            **{
                "precision.mode": "fp16",
                "precision.init_scale": 64.0,
                "schedule.max_steps": 2,
                "memory.loss_head": head,
            }
        )
    )
    origins = [e for e in iter_events(r.run_dir / "events.jsonl") if e.type == "overflow_origin"]
    assert origins and all(o.phase == "forward" and o.module == "lm_head" for o in origins), origins


# Under DDP / FSDP2 / DeepSpeed (2 gloo ranks) the head runs inside the wrapped model's forward: the strategies'
# parameter gathering and gradient reduction see it as they see the full head. Same setting and tolerances as
# tests/distributed/test_strategies.py (one process with the full head as the reference).
SHARDED = {
    "fsdp-zero3": {"sharding.strategy": "fsdp", "sharding.fsdp_stage": "zero3"},
    "ddp": {"sharding.strategy": "ddp"},
    "deepspeed-3": {"sharding.strategy": "deepspeed", "sharding.deepspeed_stage": 3},
}


@pytest.fixture(scope="module")
def full_head_single(tmp_path_factory):
    from tests.distributed.conftest import PER_RANK, WORLD, make_config

    root = tmp_path_factory.mktemp("head-strategies")
    cfg = make_config(
        root,
        **{"schedule.micro_batch_size": PER_RANK * WORLD, "memory.loss_head": "full", "output.run_name": "single-full"},
    )
    return root, train(cfg).run_dir


@pytest.mark.parametrize(
    "name",
    ["fsdp-zero3", pytest.param("ddp", marks=pytest.mark.slow), pytest.param("deepspeed-3", marks=pytest.mark.slow)],
)
def test_sharded_chunked_head_trains_like_one_process_with_the_full_head(full_head_single, name):
    from tests.distributed.conftest import WORLD, launch_and_wait, make_config, step_losses
    from tests.distributed.test_strategies import LOSS_RTOL, WEIGHT_ATOL

    root, single = full_head_single
    run_dir = launch_and_wait(
        make_config(
            root,
            **SHARDED[name],
            **{
                "sharding.nproc_per_node": WORLD,
                "memory.loss_head": "chunked",
                "memory.loss_chunk_tokens": 16,
                "output.run_name": f"{name}-chunked",
            },
        )
    )
    reference, got = step_losses(single), step_losses(run_dir)
    assert len(got) == len(reference) == 10
    torch.testing.assert_close(torch.tensor(got), torch.tensor(reference), rtol=LOSS_RTOL, atol=0)
    ref_w = load_file(str(single / "adapter" / "adapter_model.safetensors"))
    got_w = load_file(str(run_dir / "adapter" / "adapter_model.safetensors"))
    assert ref_w.keys() == got_w.keys()
    for k in ref_w:
        torch.testing.assert_close(got_w[k].float(), ref_w[k].float(), atol=WEIGHT_ATOL, rtol=0)
