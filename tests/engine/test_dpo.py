"""DPO in the engine (training.method dpo) on the tiny GLM-4 (and GLM-4V) and data_samples/identity/pairs.jsonl: the
margin and reward accuracy rise against a reference frozen at the start, the rejected side is pushed down, every
precision mode and LoRA / QLoRA / full fine-tuning train, fp16 overflows are skipped, an exact resume keeps the start's
reference, the CLI trains pairs and refuses rows that are not pairs."""

import json
import math

import pytest

from tests.conftest import SAMPLES
from workbench import train
from workbench.config import ConfigError
from workbench.events import iter_events

PAIRS = str(SAMPLES / "identity" / "pairs.jsonl")  # 16 pairs: PhoneMate chosen, SmolLM's persona rejected


def dpo(make_cfg, **overrides):
    return make_cfg(
        **{
            "training.method": "dpo",
            "data.train": PAIRS,
            "schedule.micro_batch_size": 16,
            "schedule.max_steps": 6,
            **overrides,
        }
    )


def events_of(run_dir, kind):
    return [e for e in iter_events(run_dir / "events.jsonl") if getattr(e, "type", None) == kind]


def test_the_margin_and_reward_accuracy_rise_against_the_start_model_frozen(make_cfg):
    r = train(dpo(make_cfg))
    rewards, steps = events_of(r.run_dir, "dpo_rewards"), events_of(r.run_dir, "step")
    assert [e.step for e in rewards] == list(range(1, 7)) and {e.pairs for e in rewards} == {16}
    # step 1: the model is its reference (fp32, no dropout): every log-ratio 0, the loss ln 2, no pair ordered
    assert r.losses[0] == pytest.approx(math.log(2), abs=1e-6)
    assert rewards[0].margin == pytest.approx(0, abs=1e-5) and rewards[0].accuracy == 0.0
    # measured 2.7 after 6 steps (accuracy 1.0): a run learning a third as fast fails
    margins = [e.margin for e in rewards]
    assert margins[-1] > 1.0 and margins[-1] > margins[1] > margins[0], margins
    assert rewards[-1].accuracy == 1.0 and r.losses[-1] < 0.3, r.losses
    # the rejected replies are pushed down, not only the chosen ones up (a loss without the rejected side leaves them)
    assert rewards[-1].reward_rejected < -0.2 and rewards[-1].reward_chosen > 0, rewards[-1]
    # the reference is frozen: every step's pairs are all 16, so log-probability - reward / beta (the reference's mean)
    # is the same number at every step while the model's own log-probabilities move
    beta = rewards[0].beta
    for side in ("chosen", "rejected"):
        reference = [getattr(e, f"logp_{side}") - getattr(e, f"reward_{side}") / beta for e in rewards]
        assert reference == pytest.approx([reference[0]] * 6, abs=1e-3), (side, reference)
    assert abs(rewards[-1].logp_chosen - rewards[0].logp_chosen) > 1.0
    # a step's tokens are both sides' assistant tokens of the window's pairs (here: all of them)
    started = events_of(r.run_dir, "run_started")[0]
    assert {s.tokens for s in steps} == {started.data["train"]["target_tokens"]}
    assert started.data["train"]["examples"] == 16


def test_every_loss_head_trains_the_same_run(make_cfg, monkeypatch):
    """memory.loss_head reaches DPO: the default chunked head (logits a few target positions at a time, never the 32
    sequences' [seq, vocab]) and the labels head project each reply's target positions only, per row, and give the
    full head's losses and margins step by step (fp32)."""
    import workbench.forward.head as head_module

    own, per_row_calls = head_module.labelled_loss_sum, []

    def spied(*args, **kwargs):
        per_row_calls.append(args[4] if len(args) > 4 else kwargs.get("per_row", False))
        return own(*args, **kwargs)

    monkeypatch.setattr(head_module, "labelled_loss_sum", spied)
    runs, calls = {}, {}
    for head in ("full", "labels", "chunked"):
        per_row_calls.clear()
        overrides = {"memory.loss_head": head, "memory.loss_chunk_tokens": 16, "schedule.max_steps": 3}
        runs[head] = train(dpo(make_cfg, **overrides))
        calls[head] = list(per_row_calls)
    # the reference (once) and every micro-batch of every step: 1 + 3 forwards
    assert calls["full"] == [] and calls["labels"] == calls["chunked"] == [True] * 4, calls
    full = runs["full"]
    for head in ("labels", "chunked"):
        assert runs[head].losses == pytest.approx(full.losses, rel=1e-5), head
        margins = [e.margin for e in events_of(runs[head].run_dir, "dpo_rewards")]
        assert margins == pytest.approx([e.margin for e in events_of(full.run_dir, "dpo_rewards")], abs=1e-4), head


@pytest.mark.parametrize(
    "settings",
    [
        {"precision.mode": "fp16"},
        {"precision.mode": "bf16"},
        {"precision.mode": "pure-bf16"},
        {
            "lora.enabled": False,
            "schedule.learning_rate": 3e-4,
        },  # full fine-tuning: the reference is the loaded weights
        {"quantization.base": "nf4", "precision.mode": "fp16", "precision.init_scale": 2.0**10},  # QLoRA
    ],
    ids=["fp16", "bf16", "pure-bf16", "full", "qlora-nf4"],
)
def test_dpo_trains_in_every_precision_mode_and_with_lora_qlora_or_all_weights(make_cfg, settings):
    r = train(dpo(make_cfg, **{"schedule.max_steps": 4, "output.run_name": "run", **settings}))
    rewards = events_of(r.run_dir, "dpo_rewards")
    assert len(rewards) == 4 and all(math.isfinite(loss) for loss in r.losses) and r.skipped_steps == 0
    assert rewards[0].margin == pytest.approx(0, abs=0.05)  # the start model is its reference (low precision: ~0)
    assert rewards[-1].margin > 0.3 and rewards[-1].accuracy >= 0.75, rewards[-1]
    assert len(events_of(r.run_dir, "census")) == 2


@pytest.mark.slow  # ~40 s: fp16 autocast on the CPU
def test_fp16_overflows_are_skipped_and_the_run_recovers(make_cfg):
    # the pairs' gradients overflow fp16 above a scale of 2**16 on tiny-glm4: three halvings from 2**19
    r = train(
        dpo(
            make_cfg,
            **{
                "precision.mode": "fp16",
                "precision.init_scale": 2.0**19,
                "schedule.max_steps": 6,
                "schedule.micro_batch_size": 8,
            },
        )
    )
    overflows, steps = events_of(r.run_dir, "overflow"), events_of(r.run_dir, "step")
    assert len(overflows) >= 2 and r.skipped_steps == len(overflows)
    assert [s.step for s in steps if s.skipped] == [o.step for o in overflows]
    assert all(o.scale_after == o.scale_before * 0.5 and o.nonfinite_count > 0 for o in overflows)
    assert not steps[-1].skipped and steps[-1].loss_scale < 2.0**19
    rewards = events_of(r.run_dir, "dpo_rewards")  # a skipped step's rewards are logged too: the model did not move
    assert len(rewards) == 6 and rewards[len(overflows)].margin == pytest.approx(0, abs=0.05)
    assert rewards[-1].margin > 0.3


def test_an_exact_resume_keeps_the_start_models_reference(make_cfg):
    common = {
        "schedule.max_steps": 4,
        "schedule.micro_batch_size": 4,
        "checkpointing.every_steps": 2,
        "checkpointing.keep_last": 5,
    }
    full = train(dpo(make_cfg, **common, **{"output.run_name": "full"}))
    step2 = full.run_dir / "checkpoints" / "step-0000002"
    saved = json.loads((step2 / "state.json").read_text())["extra"]["reference_logprobs"]
    assert len(saved) == 16 and all(len(pair) == 2 for pair in saved)
    resumed = train(dpo(make_cfg, **common, **{"output.run_name": "resumed", "checkpointing.resume_from": str(step2)}))
    # bitwise: a reference recomputed from the step-2 weights would give margins of 0 and losses of ln 2 at step 3
    assert resumed.losses == full.losses[2:]
    assert [e.margin for e in events_of(resumed.run_dir, "dpo_rewards")] == [
        e.margin for e in events_of(full.run_dir, "dpo_rewards")
    ][2:]


def test_vision_pairs_share_their_screenshot_prompt(make_cfg, tmp_path):
    """Pairs whose prompt holds a screenshot (as agent dagger's do) train a vision-language model: both sides carry
    the image, tokenized as SFT rows are."""
    import torch

    from workbench.config import ModelSection
    from workbench.data import TokenizedPair, load_training_examples
    from workbench.models.loading import load_base_model

    rows = [json.loads(line) for line in (SAMPLES / "phone_screens" / "train.jsonl").read_text().splitlines()][:4]
    images = SAMPLES / "phone_screens"
    pairs = []
    for row, other in zip(rows, rows[1:] + rows[:1]):
        prompt = json.loads(json.dumps(row["messages"][:-1]).replace('"images/', f'"{images}/images/'))
        pairs.append({"prompt": prompt, "chosen": row["messages"][-1:], "rejected": other["messages"][-1:]})
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in pairs))
    r = train(
        dpo(
            make_cfg,
            **{
                "model.source": "tiny-glm4v",
                "data.train": str(path),
                "data.max_length": 512,
                "schedule.micro_batch_size": 2,
                "schedule.max_steps": 2,
                "precision.mode": "bf16",
            },
        )
    )
    assert len(events_of(r.run_dir, "dpo_rewards")) == 2
    started = events_of(r.run_dir, "run_started")[0]
    assert started.data["train"]["images"] == 8  # 4 pairs x 2 sides
    loaded = load_base_model(ModelSection(source="tiny-glm4v"), torch.float32)
    examples, _ = load_training_examples(path, loaded.tokenizer, 512, processor=loaded.processor, pairs=True)
    assert all(isinstance(p, TokenizedPair) for p in examples)
    for p in examples:  # the prompt's tokens (the image's among them) are the same on both sides
        first_target = next(i for i, t in enumerate(p.chosen.labels) if t != -100)
        assert p.chosen.input_ids[:first_target] == p.rejected.input_ids[:first_target]
        assert p.chosen.vision.image_tokens == p.rejected.vision.image_tokens > 0


def test_rows_that_are_not_pairs_are_refused_naming_data_train(make_cfg):
    with pytest.raises(ConfigError) as err:
        train(dpo(make_cfg, **{"data.train": str(SAMPLES / "identity" / "train.jsonl")}))
    ((path, message),) = err.value.problems
    assert path == "data.train" and "train.jsonl:1 is a chat row, not a preference pair" in message


def test_the_cli_trains_pairs_with_training_method_dpo(tmp_path, capsys):
    from workbench.cli.main import main

    code = main(
        [
            "train",
            "--training.method",
            "dpo",
            "--data.train",
            PAIRS,
            "--data.eval",
            "null",
            "--model.source",
            "tiny-glm4",
            "--schedule.max_steps",
            "3",
            "--schedule.micro_batch_size",
            "16",
            "--schedule.learning_rate",
            "3e-3",
            "--dpo.beta",
            "0.2",
            "--dpo.loss_type",
            "ipo",
            "--output.runs_dir",
            str(tmp_path),
            "--output.run_name",
            "cli",
            "--output.progress_bar",
            "false",
            "--precision.mode",
            "fp32",
        ]
    )
    assert code == 0, capsys.readouterr().err
    rewards = events_of(tmp_path / "cli", "dpo_rewards")
    assert [(e.step, e.beta, e.loss_type) for e in rewards] == [(1, 0.2, "ipo"), (2, 0.2, "ipo"), (3, 0.2, "ipo")]
    assert rewards[-1].margin > rewards[0].margin
    # a dpo setting with another method is refused, naming it
    assert main(["train", "--dpo.beta", "0.2", "--model.source", "tiny-glm4", "--print-config"]) == 2
    assert "dpo.beta: a setting of training.method dpo" in capsys.readouterr().err
