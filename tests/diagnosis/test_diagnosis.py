"""Per-module precision rules, autocast coverage, overflow attribution and collapse diagnosis on tiny models."""

import math

import pytest
import torch
from safetensors.torch import load_file

from tests.engine.test_train import _hand_count
from workbench import train
from workbench.config import ConfigError, config_from_dict
from workbench.diagnosis import ScaleHistory, collapse_reason
from workbench.events import iter_events
from workbench.models import loading, tiny

POISONED = "model.layers.1.mlp.down_proj"


def events_of(result, kind):
    return [e for e in iter_events(result.run_dir / "events.jsonl") if getattr(e, "type", None) == kind]


@pytest.fixture
def poisoned_glm4(monkeypatch):
    """tiny-glm4 whose layer-1 MLP overflows fp16 in the forward pass (|down_proj output| ~ 1e5 > 65504)
    while every weight still fits fp16 and the fp32/bf16 forward stays finite."""

    def build(seed=0, dtype=torch.float32):
        model, tok = tiny.tiny_glm4(seed=seed, dtype=torch.float32)
        mlp = model.model.layers[1].mlp
        with torch.no_grad():
            mlp.gate_up_proj.weight.mul_(100.0)
            mlp.down_proj.weight.mul_(1000.0)
        return model.to(dtype), tok

    monkeypatch.setitem(loading._TINY, "tiny-glm4", build)


def test_forced_fp16_collapse_names_module_recommends_bf16_and_stops_cleanly(make_cfg, poisoned_glm4):
    cfg = make_cfg(
        **{
            "precision.mode": "fp16",
            "precision.init_scale": 64.0,
            "schedule.max_steps": 12,
            "diagnosis.collapse_window": 8,
            "diagnosis.collapse_skips": 4,
            "diagnosis.stop_on_collapse": True,
        }
    )
    r = train(cfg)
    origins = events_of(r, "overflow_origin")
    assert origins and all(o.phase == "forward" and o.module == POISONED for o in origins)
    assert origins[0].evidence["module"] == POISONED + ".base_layer" and origins[0].evidence["output_inf"] > 0
    (diag,) = events_of(r, "diagnosis")
    assert diag.kind == "scale_collapse" and diag.module == POISONED and diag.stopping
    assert "forward" in diag.cause and "bf16" in diag.fix
    assert diag.evidence["fixes"][0]["override"] == {"precision.mode": "bf16"}
    assert diag.evidence["scale_history"] == [[1, 32.0], [2, 16.0], [3, 8.0], [4, 4.0]]
    # Stopped cleanly at the diagnosis: checkpoint, then run_finished stopped=True.
    assert r.stopped and r.step == diag.step == 4 and "bf16" in r.stop_reason
    (finished,) = events_of(r, "run_finished")
    assert finished.stopped and finished.stop_reason == r.stop_reason
    assert any(c.kind == "resumable" and c.step == 4 for c in events_of(r, "checkpoint"))


@pytest.mark.parametrize(
    "fix",
    [
        {"precision.mode": "bf16"},
        {"precision.module_rules": [{"pattern": r"model\.layers\.1\.mlp\.down_proj$", "compute": "float32"}]},
    ],
    ids=["bf16", "fp32-rule"],
)
def test_the_recommended_fixes_train_the_poisoned_model(make_cfg, poisoned_glm4, fix):
    base = {"precision.mode": "fp16", "precision.init_scale": 64.0, "schedule.max_steps": 4}
    r = train(make_cfg(**{**base, **fix}))
    assert r.skipped_steps == 0 and not events_of(r, "overflow") and not events_of(r, "diagnosis")


def _rows(result, kind="census"):
    return {(row["group"], row["dtype"], row["trainable"]): row["count"] for row in events_of(result, kind)[0].rows}


@pytest.mark.parametrize(
    "mode,lora,rules,overrides",
    [
        # lm_head kept fp32 (storage auto -> float32 under compute float32) while the frozen base is fp16
        ("fp16", True, [{"pattern": "lm_head", "compute": "float32"}], {"lm_head": ("float32", False)}),
        ("bf16", True, [{"pattern": "norm", "storage": "float32"}], {"norms": ("float32", False)}),
        ("pure-bf16", True, [{"pattern": "lm_head", "compute": "float32"}], {"lm_head": ("float32", False)}),
        # full fine-tuning: rules apply before the optimizer exists, so they re-cast trained weights too
        ("bf16", False, [{"pattern": "lm_head", "storage": "bfloat16"}], {"lm_head": ("bfloat16", True)}),
        ("pure-bf16", False, [{"pattern": "lm_head", "compute": "float32"}], {"lm_head": ("float32", True)}),
        ("fp32", True, [{"pattern": "embed_tokens", "storage": "bfloat16"}], {"embeddings": ("bfloat16", False)}),
    ],
)
def test_census_with_module_rules_equals_hand_count(make_cfg, mode, lora, rules, overrides):
    r = train(
        make_cfg(
            **{"precision.mode": mode, "lora.enabled": lora, "schedule.max_steps": 1, "precision.module_rules": rules}
        )
    )
    frozen, trained = {
        "fp32": ("float32", "float32"),
        "bf16": ("bfloat16", "float32"),
        "fp16": ("float16", "float32"),
        "pure-bf16": ("bfloat16", "bfloat16"),
    }[mode]
    want = {}
    for group, n in _hand_count().items():
        if group == "lora":
            if lora:
                want[("lora", trained, True)] = n
        elif group in overrides:
            want[(group, *overrides[group])] = n
        else:
            want[(group, frozen if lora else trained, not lora)] = n
    assert _rows(r) == want
    (applied,) = events_of(r, "precision_rules")
    assert applied.rules[0]["source"] == "precision.module_rules[0]" and applied.rules[0]["module_count"] >= 1
    if not lora:
        assert applied.rules[0]["trained_params_recast"] == applied.rules[0]["params_recast"] == 320 * 64
        assert all(math.isfinite(x) for x in r.losses)


@pytest.mark.parametrize("family_defaults,vision_dtype", [(True, "float32"), (False, "float16")])
def test_glm4v_fp16_family_default_keeps_the_vision_tower_fp32(make_cfg, family_defaults, vision_dtype):
    r = train(
        make_cfg(
            **{
                "precision.mode": "fp16",
                "model.source": "tiny-glm4v",
                "schedule.max_steps": 1,
                "precision.family_defaults": family_defaults,
            }
        )
    )
    model, _ = tiny.tiny_glm4v()
    n_vision = sum(p.numel() for p in model.model.visual.parameters())
    rows = _rows(r)
    assert rows[("vision", vision_dtype, False)] == n_vision
    assert rows[("decoder", "float16", False)] > 0
    applied = events_of(r, "precision_rules")
    if family_defaults:
        assert applied[0].rules[0]["modules"] == ["model.visual"] and applied[0].rules[0]["params_recast"] == n_vision
    else:
        assert not applied


def _matmul_hand_flops(tokens: int) -> dict:
    """Forward matmul FLOPs of tiny-glm4 + LoRA r=16 (all-linear): 2 * tokens * weights of each matmul."""
    h, i, L, kv, v, r = 64, 128, 2, 32, 320, 16
    decoder = L * (h * h + 2 * h * kv + h * h + h * 2 * i + i * h)
    lora = L * r * ((h + h) + (h + kv) * 2 + (h + h) + (h + 2 * i) + (i + h))
    return {"decoder": 2 * tokens * decoder, "lm_head": 2 * tokens * h * v, "lora": 2 * tokens * lora}


@pytest.mark.parametrize(
    "mode,rules,low_share",
    [
        ("fp32", [], {"decoder": 0.0, "lm_head": 0.0, "lora": 0.0}),
        ("bf16", [], {"decoder": 1.0, "lm_head": 1.0, "lora": 1.0}),
        ("pure-bf16", [], {"decoder": 1.0, "lm_head": 1.0, "lora": 1.0}),
        ("bf16", [{"pattern": "lm_head", "compute": "float32"}], {"decoder": 1.0, "lm_head": 0.0, "lora": 1.0}),
    ],
)
def test_coverage_counts_matmul_flops_by_dtype(make_cfg, mode, rules, low_share):
    r = train(
        make_cfg(
            **{
                "precision.mode": mode,
                "schedule.max_steps": 3,
                "diagnosis.coverage_every": 2,
                "precision.module_rules": rules,
                "memory.loss_head": "full",
            }
        )
    )  # lm_head at every token
    samples = events_of(r, "coverage")
    assert [c.step for c in samples] == [1, 2]  # step 1, then every 2 steps
    cov = samples[0]
    tokens = cov.groups["lm_head"]["flops"] // (2 * 64 * 320)
    assert tokens > 0 and tokens % 4 == 0  # 4 rows padded to the longest
    hand = _matmul_hand_flops(tokens)
    assert {g: c["flops"] for g, c in cov.groups.items()} == hand
    assert {g: c["low_precision_share"] for g, c in cov.groups.items()} == low_share
    want = sum(hand[g] * s for g, s in low_share.items()) / sum(hand.values())
    assert cov.low_precision_share == pytest.approx(want)


@pytest.mark.parametrize("rules,low_share", [([], 1.0), ([{"pattern": "lm_head", "compute": "float32"}], 0.0)])
def test_coverage_counts_the_loss_head_at_labelled_positions_only(make_cfg, rules, low_share):
    """The default head projects only positions with a label: its FLOPs are the step's target tokens', in the
    dtype the projection ran in (fp32 under a rule), not those of the summed loss it hands back."""
    r = train(
        make_cfg(
            **{
                "precision.mode": "bf16",
                "schedule.max_steps": 1,
                "diagnosis.coverage_every": 1,
                "precision.module_rules": rules,
            }
        )
    )
    (cov,), (step,) = events_of(r, "coverage"), events_of(r, "step")
    assert cov.groups["lm_head"]["flops"] == 2 * 64 * 320 * step.tokens
    assert cov.groups["lm_head"]["low_precision_share"] == low_share


def test_diagnosis_does_not_change_the_trajectory(make_cfg):
    # 2**24 overflows tiny-glm4's fp16 gradients for the first steps: each is traced by a replay,
    # which must leave weights, gradients, scaler and RNG (dropout) as they were.
    common = {
        "precision.mode": "fp16",
        "precision.init_scale": 2.0**24,
        "schedule.max_steps": 7,
        "lora.dropout": 0.1,
        "diagnosis.attribute_overflows": 10,
    }
    on = train(make_cfg(**common, **{"output.run_name": "on"}))
    off = train(make_cfg(**common, **{"output.run_name": "off", "diagnosis.enabled": False}))
    origins = events_of(on, "overflow_origin")
    assert len(origins) == on.skipped_steps >= 3
    assert all(o.phase == "backward" and o.module for o in origins)
    assert not events_of(off, "overflow_origin") and not events_of(off, "coverage")
    assert on.losses == off.losses
    wa = load_file(str(sorted((on.run_dir / "checkpoints").iterdir())[-1] / "trainable.safetensors"))
    wb = load_file(str(sorted((off.run_dir / "checkpoints").iterdir())[-1] / "trainable.safetensors"))
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_collapse_detector_floor_and_skip_count():
    h = ScaleHistory(window=5)
    for step, (scale, skipped) in enumerate([(8.0, True), (4.0, True), (4.0, False), (2.0, True)], start=1):
        h.record(step, scale, skipped)
    assert collapse_reason(h, floor=1.0, min_skips=4) is None
    h.record(5, 1.0, True)
    assert "floor" in collapse_reason(h, floor=1.0, min_skips=10)
    assert "4 of the last 5" in collapse_reason(h, floor=0.5, min_skips=4)
    assert h.changes == [[1, 8.0], [2, 4.0], [4, 2.0], [5, 1.0]]


@pytest.mark.parametrize(
    "data,path,word",
    [
        (
            {"precision": {"module_rules": [{"pattern": "lm_(head", "compute": "float32"}]}},
            "precision.module_rules[0].pattern",
            "regular expression",
        ),
        (
            {"precision": {"module_rules": [{"pattern": "x", "compute": "float32"}, {"pattern": "lm_head"}]}},
            "precision.module_rules[1]",
            "does nothing",
        ),
        (
            {"precision": {"module_rules": [{"pattern": "x", "compute": "float32", "storage": "float16"}]}},
            "precision.module_rules[0].storage",
            "fp32",
        ),
        ({"diagnosis": {"collapse_window": 5, "collapse_skips": 6}}, "diagnosis.collapse_skips", "exceeds"),
        ({"diagnosis": {"coverage_every": -1}}, "diagnosis.coverage_every", "greater than or equal to 0"),
    ],
)
def test_bad_diagnosis_config_names_its_field(data, path, word):
    with pytest.raises(ConfigError) as exc:
        config_from_dict(data)
    probs = dict(exc.value.problems)
    assert path in probs and word in probs[path], probs


def test_glm4v_image_forward_under_fp16_runs_the_vision_tower_in_fp32():
    from workbench.diagnosis import CoverageSampler
    from workbench.precision.module_rules import apply_module_rules, family_default_rules

    model, _ = tiny.tiny_glm4v(dtype=torch.float16)
    model.requires_grad_(False).train()
    apply_module_rules(model, family_default_rules("glm4v", "fp16"), "cpu")
    assert all(p.dtype == torch.float32 for p in model.model.visual.parameters())
    pixels, grid = torch.randn(16, 1176, dtype=torch.float16), torch.tensor([[1, 4, 4]])  # 4x4 patches -> 4 tokens
    ids = torch.tensor([[1, 2] + [model.config.image_token_id] * 4 + [5, 6]])
    coverage = CoverageSampler(model)
    coverage.arm()
    with torch.autocast("cpu", dtype=torch.float16):
        out = model(
            input_ids=ids,
            pixel_values=pixels,
            image_grid_thw=grid,
            mm_token_type_ids=(ids == model.config.image_token_id).long(),
        )
    report = coverage.disarm()
    assert torch.isfinite(out.logits).all() and out.logits.dtype == torch.float16
    assert report["groups"]["vision"]["low_precision_share"] == 0.0 and set(report["groups"]["vision"]["dtypes"]) == {
        "float32"
    }
    assert report["groups"]["decoder"]["low_precision_share"] == 1.0


def test_rules_are_refused_under_deepspeed_which_casts_the_whole_model():
    from workbench.precision.module_rules import Rule, apply_module_rules

    model, _ = tiny.tiny_glm4v(dtype=torch.float16)
    model.requires_grad_(False)
    user = Rule("lm_head", "auto", "float32", "precision.module_rules[0]")
    with pytest.raises(ConfigError) as exc:
        apply_module_rules(model, [user], "cpu", strategy="deepspeed")
    assert "DeepSpeed casts" in dict(exc.value.problems)["precision.module_rules[0]"]
    default = Rule(r"\.visual$", "float32", "float32", "family default (glm4v, fp16)")
    (report,) = apply_module_rules(model, [default], "cpu", strategy="deepspeed").reports
    assert report["skipped"] and all(p.dtype == torch.float16 for p in model.model.visual.parameters())
