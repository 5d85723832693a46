import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.conftest import write_jsonl
from workbench import train
from workbench.config import ConfigError
from workbench.data import DataError
from workbench.events import iter_events


def events_of(result, kind):
    return [e for e in iter_events(result.run_dir / "events.jsonl") if getattr(e, "type", None) == kind]


def mean(xs):
    return sum(xs) / len(xs)


@pytest.mark.parametrize(
    "mode,source",
    [
        ("fp32", "tiny-glm4"),
        ("fp16", "tiny-glm4"),
        ("bf16", "tiny-glm4"),
        ("pure-bf16", "tiny-glm4"),
        ("bf16", "tiny-glm4v"),
    ],
)
def test_loss_falls_in_every_precision_mode(make_cfg, mode, source):
    cfg = make_cfg(
        **{
            "precision.mode": mode,
            "model.source": source,
            "schedule.max_steps": 12,
            "schedule.learning_rate": 1e-2,
            "lora.dropout": 0.0,
        }
    )
    r = train(cfg)
    assert len(r.losses) == 12 and r.skipped_steps == 0
    # ~0.17 nats measured in every mode (12 steps from ~5.8, ln of the vocabulary): a run learning half as fast fails
    assert mean(r.losses[-3:]) < mean(r.losses[:3]) - 0.12, r.losses
    assert not events_of(r, "overflow")
    finished = events_of(r, "run_finished")
    assert len(finished) == 1 and finished[0].step == 12
    assert (r.run_dir / "adapter" / "adapter_model.safetensors").is_file()


def test_fp16_huge_init_scale_overflows_skips_and_backs_off(make_cfg):
    # 2**24 overflows fp16 gradients on tiny-glm4; halving reaches a workable scale (2**18) in 6 steps.
    cfg = make_cfg(**{"precision.mode": "fp16", "precision.init_scale": 2.0**24, "schedule.max_steps": 8})
    r = train(cfg)
    overflows = events_of(r, "overflow")
    assert len(overflows) >= 3 and r.skipped_steps == len(overflows)
    for o in overflows:
        assert o.scale_after == o.scale_before * 0.5 and o.nonfinite_count > 0
        assert all("lora_" in n for n in o.nonfinite_params)  # only trained params have gradients
    steps = events_of(r, "step")
    skipped = [s for s in steps if s.skipped]
    assert [s.step for s in skipped] == [o.step for o in overflows]
    assert steps[-1].loss_scale < 2.0**24 and not steps[-1].skipped  # recovered once the scale fits


def test_bf16_never_overflows_even_with_huge_scale_setting(make_cfg):
    r = train(make_cfg(**{"precision.mode": "bf16", "precision.init_scale": 2.0**40, "schedule.max_steps": 4}))
    assert not events_of(r, "overflow") and all(s.loss_scale is None for s in events_of(r, "step"))


def _trained(result):
    """The trained LoRA weights the run saved at its end (the same file for every strategy)."""
    return load_file(str(result.run_dir / "adapter" / "adapter_model.safetensors"))


def test_accumulation_2x2_equals_4x1_with_unequal_lengths(make_cfg):
    common = {"schedule.max_steps": 3, "lora.dropout": 0.0, "precision.max_grad_norm": None}
    a = train(
        make_cfg(**common, **{"schedule.micro_batch_size": 4, "schedule.grad_accum_steps": 1, "output.run_name": "mb4"})
    )
    b = train(
        make_cfg(
            **common, **{"schedule.micro_batch_size": 2, "schedule.grad_accum_steps": 2, "output.run_name": "mb2x2"}
        )
    )
    # The identity rows differ in length, so the two micro-batches of a window hold unequal token counts.
    torch.testing.assert_close(torch.tensor(a.losses), torch.tensor(b.losses), rtol=1e-5, atol=1e-6)
    wa, wb = _trained(a), _trained(b)
    assert wa.keys() == wb.keys()
    for k in wa:  # tolerance: fp32 summation order differs between the splits
        torch.testing.assert_close(wa[k], wb[k], rtol=1e-4, atol=1e-6)


def test_resume_continues_exactly(make_cfg):
    # fp16 (scaler state) and dropout (RNG state) make an inexact resume visible: the loss scale grows every
    # 2 clean steps, so a resume that dropped the scaler's state would restart at init_scale and differ.
    common = {
        "precision.mode": "fp16",
        "lora.dropout": 0.1,
        "schedule.max_steps": 10,
        "schedule.warmup_steps": 2,
        "checkpointing.every_steps": 5,
        "checkpointing.keep_last": 5,
        "precision.growth_interval": 2,
        "precision.init_scale": 256.0,
    }
    full = train(make_cfg(**common, **{"output.run_name": "full"}))
    scales = {e.step: e.loss_scale for e in events_of(full, "step")}
    assert scales[5] > 256.0, scales  # the scaler's state at the checkpoint is not its initial one
    ckpt = full.run_dir / "checkpoints" / "step-0000005"
    resumed = train(make_cfg(**common, **{"output.run_name": "resumed", "checkpointing.resume_from": str(ckpt)}))
    assert resumed.losses == full.losses[5:]  # bitwise: same ops, same order, same RNG
    assert {e.step: e.loss_scale for e in events_of(resumed, "step")} == {k: v for k, v in scales.items() if k > 5}
    wa, wb = _trained(full), _trained(resumed)
    for k in wa:
        assert torch.equal(wa[k], wb[k]), k
    started = events_of(resumed, "run_started")[0]
    assert started.start_step == 5


@pytest.mark.parametrize(
    "strategy,mode,saved",
    [
        ("none", "fp16", [(2, "resumable"), (3, "emergency")]),
        ("ddp", "fp16", [(2, "resumable"), (3, "emergency")]),  # rank 0 holds everything: it saves without peers
        ("fsdp", "fp32", [(2, "resumable")]),  # shards on every rank: run_failed names the last periodic checkpoint
    ],
)
def test_a_crash_mid_step_keeps_every_completed_step(make_cfg, fail_forward, strategy, mode, saved):
    """Ctrl-C in the middle of step 4 (its first micro-batch already trained, dropout drawn): the run_failed
    event points at an emergency checkpoint of step 3 where the strategy can save one (else the last periodic
    one), and resuming it gives the uninterrupted run exactly. Distributed strategies run as a world of one."""
    common = {
        "precision.mode": mode,
        "lora.dropout": 0.1,
        "schedule.max_steps": 6,
        "schedule.micro_batch_size": 2,
        "schedule.grad_accum_steps": 2,
        "checkpointing.every_steps": 2,
        "checkpointing.keep_last": 5,
        "sharding.strategy": strategy,
    }
    full = train(make_cfg(**common, **{"output.run_name": "full"}))
    patch = fail_forward(3 * 2 + 2, KeyboardInterrupt())  # step 4, second micro-batch
    with pytest.raises(KeyboardInterrupt):
        train(make_cfg(**common, **{"output.run_name": "crashed"}))
    patch.undo()
    crashed_dir = full.run_dir.parent / "crashed"
    events = list(iter_events(crashed_dir / "events.jsonl"))
    failed = [e for e in events if e.type == "run_failed"]
    last = saved[-1][0]
    assert len(failed) == 1 and failed[0].step == 3 and failed[0].error_type == "KeyboardInterrupt"
    assert failed[0].checkpoint == str(crashed_dir / "checkpoints" / f"step-{last:07d}")
    assert [(e.step, e.kind) for e in events if e.type == "checkpoint"] == saved
    assert json.loads((crashed_dir / "checkpoints" / f"step-{last:07d}" / "sharding.json").read_text()) == {
        "strategy": strategy,
        "world_size": 1,
    }

    resumed = train(make_cfg(**common, **{"output.run_name": "crashed", "checkpointing.resume_from": "latest"}))
    assert resumed.losses == full.losses[last:]  # bitwise: the step's RNG was saved as it was when the step began
    wa, wb = _trained(full), _trained(resumed)
    for k in wa:
        assert torch.equal(wa[k], wb[k]), k


def test_a_crash_right_after_a_checkpoint_points_at_it(make_cfg, fail_forward):
    cfg = make_cfg(**{"schedule.max_steps": 6, "checkpointing.every_steps": 2, "output.run_name": "crashed"})
    fail_forward(5, RuntimeError("boom"))  # step 5, just after the step-4 checkpoint
    with pytest.raises(RuntimeError, match="boom"):
        train(cfg)
    run_dir = Path(cfg.output.runs_dir) / "crashed"
    events = list(iter_events(run_dir / "events.jsonl"))
    assert [(e.step, e.kind) for e in events if e.type == "checkpoint"] == [(2, "resumable"), (4, "resumable")]
    assert [e.checkpoint for e in events if e.type == "run_failed"] == [str(run_dir / "checkpoints" / "step-0000004")]


def test_a_failed_emergency_checkpoint_is_reported_and_the_runs_own_failure_propagates(
    make_cfg, fail_forward, monkeypatch
):
    from workbench.engine import run as run_module

    save = run_module.save_checkpoint

    def full_disk(*args, alone=False, **kwargs):
        if alone:  # only the emergency save fails
            raise OSError(28, "No space left on device")
        return save(*args, alone=alone, **kwargs)

    monkeypatch.setattr(run_module, "save_checkpoint", full_disk)
    cfg = make_cfg(**{"schedule.max_steps": 6, "checkpointing.every_steps": 2, "output.run_name": "crashed"})
    fail_forward(4, RuntimeError("boom"))  # step 4, after the step-2 checkpoint
    with pytest.raises(RuntimeError, match="boom"):
        train(cfg)
    run_dir = Path(cfg.output.runs_dir) / "crashed"
    [failed] = [e for e in iter_events(run_dir / "events.jsonl") if e.type == "run_failed"]
    assert failed.error == "boom" and failed.step == 3
    assert failed.checkpoint == str(run_dir / "checkpoints" / "step-0000002")  # the newest one there is
    assert failed.checkpoint_error == "OSError: [Errno 28] No space left on device"

    from workbench.cli.main import _resume_hint
    from workbench.ui.run_state import RunState

    hint = _resume_hint(run_dir)
    assert hint.startswith(
        "step 3 could not be saved after the failure (OSError: [Errno 28] No space left on device); "
        f"the last checkpoint is {run_dir / 'checkpoints' / 'step-0000002'}; continue with"
    ), hint
    state = RunState()
    state.apply(iter_events(run_dir / "events.jsonl", typed=False))
    assert "could not be saved after the failure: OSError" in state.alerts[-1].detail


def test_resume_latest_in_same_run_dir(make_cfg):
    r1 = train(make_cfg(**{"schedule.max_steps": 3, "output.run_name": "again"}))
    with pytest.raises(ConfigError, match="already holds a run"):
        train(make_cfg(**{"schedule.max_steps": 3, "output.run_name": "again"}))
    r2 = train(make_cfg(**{"schedule.max_steps": 5, "output.run_name": "again", "checkpointing.resume_from": "latest"}))
    assert len(r2.losses) == 2 and r2.run_dir == r1.run_dir
    assert len(events_of(r2, "run_started")) == 2


def _hand_count():
    """tiny-glm4 from its config: hidden 64, intermediate 128, 2 layers, 4 heads x 16, 2 kv heads, vocab 320."""
    h, i, L, kv, v, r = 64, 128, 2, 32, 320, 16
    attn = (h * h + h) + 2 * (h * kv + kv) + h * h  # q,k,v carry biases in GLM-4; o does not
    mlp = h * 2 * i + i * h  # fused gate_up, down
    lora = L * r * ((h + h) + (h + kv) * 2 + (h + h) + (h + 2 * i) + (i + h))
    return {"decoder": L * (attn + mlp), "norms": L * 4 * h + h, "embeddings": v * h, "lm_head": v * h, "lora": lora}


@pytest.mark.parametrize(
    "mode,lora,frozen,trained",
    [
        ("fp32", True, "float32", "float32"),
        ("bf16", True, "bfloat16", "float32"),  # fp32 LoRA on a bf16 frozen base
        ("fp16", True, "float16", "float32"),
        ("pure-bf16", True, "bfloat16", "bfloat16"),
        ("bf16", False, None, "float32"),  # full fine-tuning: fp32 master weights, no frozen part
    ],
)
def test_census_equals_hand_count(make_cfg, mode, lora, frozen, trained):
    r = train(make_cfg(**{"precision.mode": mode, "lora.enabled": lora, "schedule.max_steps": 1}))
    census = events_of(r, "census")[0]
    got = {(row["group"], row["dtype"], row["trainable"]): row["count"] for row in census.rows}
    hand = _hand_count()
    want = {}
    for group, n in hand.items():
        if group == "lora":
            if lora:
                want[("lora", trained, True)] = n
        else:
            want[(group, frozen if lora else trained, not lora)] = n
    assert got == want
    for row in census.rows:
        assert row["bytes"] == row["count"] * {"float32": 4, "bfloat16": 2, "float16": 2}[row["dtype"]]


def test_events_are_typed_and_complete(make_cfg):
    r = train(make_cfg(**{"schedule.max_steps": 4, "output.memory_every": 2, "data.eval": make_cfg().data.train}))
    types = [e.type for e in iter_events(r.run_dir / "events.jsonl")]
    assert types[0] == "run_started" and types[-1] == "run_finished"
    assert {"census", "memory", "step", "eval", "checkpoint"} <= set(types)
    started = events_of(r, "run_started")[0]
    assert started.precision["mode"] == "fp32" and "torch" in started.versions and started.hardware["device"] == "cpu"
    assert started.data["train"]["examples"] == 80  # data_samples/identity/train.jsonl
    step = events_of(r, "step")[-1]
    assert step.tokens > 0 and step.tokens_per_s > 0 and step.eta_s == 0 and step.grad_norm > 0
    mem = [m for m in events_of(r, "memory") if m.step == 2][0]
    assert mem.host_rss > 0 and mem.params_bytes > 0 and mem.grads_bytes == 30720 * 4
    assert mem.optimizer_bytes == 2 * 30720 * 4 + 4 * 24  # exp_avg + exp_avg_sq + a 4-byte step per tensor
    saved = json.loads((r.run_dir / "config.json").read_text())
    assert saved["schedule"]["max_steps"] == 4


def test_every_memory_event_after_a_backward_carries_the_steps_peak_gradients(make_cfg):
    # The default memory_every (10) is longer than the run: only the start and the closing events, and the
    # closing one is taken after the last optimizer step freed the gradients (zero_grad set_to_none).
    r = train(make_cfg(**{"schedule.max_steps": 4}))
    trained = sum(row["bytes"] for row in events_of(r, "census")[0].rows if row["trainable"])
    assert trained == 30720 * 4  # LoRA r=16 on tiny-glm4, fp32
    mems = events_of(r, "memory")
    assert [(m.step, m.grads_bytes) for m in mems] == [(0, 0), (4, trained)]
    r = train(make_cfg(**{"schedule.max_steps": 4, "output.memory_every": 1, "output.run_name": "every"}))
    assert [m.grads_bytes for m in events_of(r, "memory")] == [0] + [trained] * 5  # steps 1-4, then the close


def test_failure_is_logged_as_run_failed(make_cfg, tmp_path):
    bad = write_jsonl(tmp_path / "bad.jsonl", ['{"messages": [{"role": "user", "content": "q"}]}'])
    cfg = make_cfg(**{"data.train": str(bad)})
    with pytest.raises(DataError):
        train(cfg)
    run_dir = next((tmp_path / "runs").iterdir())
    failed = [e for e in iter_events(run_dir / "events.jsonl") if e.type == "run_failed"]
    assert len(failed) == 1 and failed[0].error_type == "DataError" and f"{bad}:1" in failed[0].error
    assert failed[0].checkpoint is None  # it failed before training anything: nothing to save


def test_merge_adapter_writes_a_loadable_model(make_cfg):
    """The merged model computes what base + adapter compute, and not what the base alone does (a merge that
    saved the base without the adapter would fail here)."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from workbench.models import tiny

    r = train(make_cfg(**{"schedule.max_steps": 4, "checkpointing.merge_adapter": True}))
    merged = AutoModelForCausalLM.from_pretrained(r.run_dir / "merged")
    assert not any("lora" in n for n, _ in merged.named_parameters())
    base, _ = tiny.tiny_glm4(seed=0)  # the run's base (seed 0, fp32)
    ids = torch.randint(0, 300, (2, 24), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        base_logits = base(input_ids=ids).logits
        adapted = PeftModel.from_pretrained(base, r.run_dir / "adapter")
        adapted_logits = adapted(input_ids=ids).logits
        merged_logits = merged(input_ids=ids).logits
    torch.testing.assert_close(merged_logits, adapted_logits, rtol=1e-4, atol=1e-5)  # fp32 sums in another order
    assert (merged_logits - base_logits).abs().max() > 1e-3  # the adapter changed the model


def test_a_checkpoint_of_the_older_one_process_layout_still_resumes(make_cfg, tmp_path):
    """Before one process became a world of one, its checkpoints kept optimizer, scaler and RNG in training.pt
    and had no sharding.json: such a checkpoint still resumes exactly."""
    import shutil

    common = {
        "precision.mode": "fp16",
        "lora.dropout": 0.1,
        "schedule.max_steps": 6,
        "checkpointing.every_steps": 3,
        "precision.growth_interval": 2,
    }
    full = train(make_cfg(**common, **{"output.run_name": "full"}))
    legacy = tmp_path / "legacy" / "step-0000003"
    shutil.copytree(full.run_dir / "checkpoints" / "step-0000003", legacy)
    opt = torch.load(legacy / "optimizer.pt", weights_only=False)
    rng = torch.load(legacy / "rng-rank00000.pt", weights_only=False)
    scheduler = torch.load(legacy / "training.pt", weights_only=False)["scheduler"]
    torch.save(
        {"optimizer": opt["optimizer"], "scheduler": scheduler, "scaler": opt["scaler"], "rng": rng},
        legacy / "training.pt",
    )
    for name in ("optimizer.pt", "rng-rank00000.pt", "sharding.json"):
        (legacy / name).unlink()
    resumed = train(make_cfg(**common, **{"output.run_name": "resumed", "checkpointing.resume_from": str(legacy)}))
    assert resumed.losses == full.losses[3:]


def test_resume_latest_without_a_checkpoint_names_the_field(make_cfg):
    with pytest.raises(ConfigError) as exc:
        train(make_cfg(**{"checkpointing.resume_from": "latest", "output.run_name": "fresh"}))
    assert "holds no checkpoint" in dict(exc.value.problems)["checkpointing.resume_from"]


def test_a_null_learning_rate_is_derived_from_the_model_once_and_recorded(make_cfg):
    """The default learning rate (null) becomes LoRA's small-model rate for tiny-glm4 (well under 1 B parameters):
    the optimizer runs on it, run_started records it, config.json keeps what the user asked for."""
    cfg = make_cfg(**{"schedule.learning_rate": None, "schedule.max_steps": 2, "schedule.warmup_steps": 0})
    r = train(cfg)
    started = events_of(r, "run_started")[0]
    assert started.config["schedule"]["learning_rate"] == 1e-3
    assert events_of(r, "step")[0].lr == pytest.approx(1e-3)  # the peak: no warmup, cosine from step 0
    assert json.loads((r.run_dir / "config.json").read_text())["schedule"]["learning_rate"] is None
    full = train(
        make_cfg(
            **{
                "schedule.learning_rate": None,
                "schedule.max_steps": 1,
                "schedule.warmup_steps": 0,
                "lora.enabled": False,
            }
        )
    )
    assert events_of(full, "step")[0].lr == pytest.approx(5e-5)


def test_the_engine_runs_the_step_type_its_method_names(make_cfg, monkeypatch):
    """A training method is a step type behind ``engine.step.TrainingStep`` (``engine.run.STEP_TYPES``): the engine
    runs one it has never seen, and its window's loss and events reach the run as the engine's own would."""
    from workbench.engine import run as run_module
    from workbench.engine.sft import SftStep
    from workbench.engine.step import Accumulated
    from workbench.events.schema import Eval

    class Counted(SftStep):  # SFT's window, plus an event of its own per step and a resumable count
        windows = 0

        def accumulate(self, stream, step):
            window = super().accumulate(stream, step)
            Counted.windows += 1
            return Accumulated(
                window.loss_sum,
                window.divisor,
                window.target_tokens,
                window.processed_tokens,
                (Eval(step=0, loss=-1.0, tokens=step),),
            )

        def resume_state(self):
            return {"windows": Counted.windows}

    plain = train(make_cfg(**{"schedule.max_steps": 3, "output.run_name": "plain"}))
    monkeypatch.setitem(run_module.STEP_TYPES, "sft", Counted)
    counted = train(make_cfg(**{"schedule.max_steps": 3, "output.run_name": "counted"}))
    assert Counted.windows == 3 and counted.losses == plain.losses
    assert [
        (e.step, e.tokens) for e in iter_events(counted.run_dir / "events.jsonl") if e.type == "eval" and e.loss == -1.0
    ] == [(1, 1), (2, 2), (3, 3)]
    state = json.loads(next((counted.run_dir / "checkpoints").glob("step-*/state.json")).read_text())
    assert state["extra"] == {"windows": 3}
