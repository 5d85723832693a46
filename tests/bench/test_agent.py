"""bench.agent tokens: the prompt after ten steps at 1080x2400 (docs/agent.md's figures) and what one screenshot costs
to draw and encode, printed."""

import argparse
from pathlib import Path

from workbench.bench import agent as bench


def test_tokens_counts_the_latest_screenshot_only_and_times_one():
    out = bench.tokens(argparse.Namespace(size="1080x2400", steps=10))
    assert out["image_tokens_latest_screenshot"] == 3354
    assert out["total_bpe_estimate"] == 3354 + out["text_tokens_bpe_estimate"] < out["context"]
    assert out["if_every_screenshot_were_kept"] > out["context"]
    assert 0 < out["screenshot_draw_cpu_s"] < 5 and 0 < out["screenshot_png_encode_cpu_s"] < 5


def _grounding_with(monkeypatch, answer) -> dict:
    """bench.agent grounding with a stand-in model: ``answer(conversation, recorded_row)`` gives each reply."""
    import json

    import workbench.models as models
    from workbench.config.samples import resolve_sample_path
    from workbench.forward import generate

    with open(resolve_sample_path(bench.GROUNDING_ROWS), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    key = lambda messages: json.dumps(messages[:-1]) + messages[-1]["content"].split('"}\n')[0]  # noqa: E731
    recorded = {key([{"role": m["role"], "content": m["content"]} for m in r["messages"][:-1]]): r for r in rows}
    monkeypatch.setattr(
        models, "load_for_inference", lambda source, device="cpu": argparse.Namespace(model=None, tokenizer=None)
    )
    monkeypatch.setattr(
        generate,
        "greedy_replies",
        lambda model, tok, conversations, *a, **k: [answer(c, recorded[key(c)]) for c in conversations],
    )
    return bench.grounding(
        argparse.Namespace(model="stand-in", rows=bench.GROUNDING_ROWS, limit=12, seed=0, max_tokens=64)
    )


def test_grounding_tells_a_model_that_reads_the_tree_from_one_that_remembers_points(monkeypatch):
    import re

    def remembers(conversation, row):  # the recorded reply, whatever the tree says
        return row["messages"][-1]["content"]

    def reads(conversation, row):  # the recorded element's name, looked up in the tree it is shown
        box = row["meta"]["target_box"]
        tree = row["messages"][-2]["content"]
        name = next(line for line in tree.split("\n") if f"[{box[0]},{box[1]}][{box[2]},{box[3]}]" in line).split(" [")[
            0
        ]
        line = next(line for line in conversation[-1]["content"].split("\n") if line.startswith(name + " ["))
        x, y = re.search(r"tap \[(\d+),(\d+)\]", line).groups()
        return f'<think>x</think>\n<answer>do(action="Tap", element=[{x},{y}])'

    memory = _grounding_with(monkeypatch, remembers)
    assert memory["probes"] == 12 and memory["recorded_in_target"] == 12
    assert memory["swapped_taps_old_point"] == 12 and memory["swapped_follows_name"] == 0
    reader = _grounding_with(monkeypatch, reads)
    assert reader["recorded_in_target"] == 12 and reader["swapped_follows_name"] == 12
    assert reader["swapped_taps_old_point"] == 0 and "open_result" not in reader["templates"]


def test_paired_compares_two_folders_of_episodes_task_by_task(tmp_path):
    import pytest

    from workbench.config.samples import resolve_sample_path

    stored = Path(resolve_sample_path("data_samples/phone_agent_text")) / "episodes"
    sft, base = (str(stored / f"phone_agent-heldout--{role}") for role in ("sft", "base"))
    m = bench.compare(argparse.Namespace(a=sft, b=base))
    # the stored SFT episodes finish 16 of the 31 held-out tasks, the base none: far beyond the tasks' noise
    assert (m["tasks"], m["only_a"], m["only_b"], m["both"]) == (31, 16, 0, 0) and m["sign_test_p"] < 1e-4
    assert m["success_a"] == 16 / 31 and m["success_b"] == 0.0
    # how each ended and what each did: the base's replies never parse, so it acts not once
    assert m["end_reasons_b"] == {"parse_failure": 31} and m["action_types_b"] == {}
    assert sum(m["end_reasons_a"].values()) == 31 and m["end_reasons_a"]["finish"] >= 16
    assert m["action_types_a"]["Tap"] > 0 and set(m["action_types_a"]) <= {
        "Launch",
        "Tap",
        "Type",
        "Swipe",
        "Back",
        "Home",
        "Long Press",
        "Double Tap",
        "Wait",
    }
    with pytest.raises(SystemExit, match="paired: the two sets of episodes are of different tasks"):
        bench.compare(argparse.Namespace(a=sft, b=str(stored / "phone_agent-combos--base")))


def test_expert_compares_its_paths_with_the_oracles_and_times_the_states_a_careless_agent_visits():
    out = bench.expert(argparse.Namespace(tasks="toggle_setting,send_message", noise=0.3, max_steps=8, seed=0))
    assert out["tasks"] == 26 and out["longer"] == 0 and out["shorter"] >= 2 and out["equal"] >= 10
    assert sum(out["expert_minus_oracle_steps"].values()) == 26 and out["states"] >= 40
    ms = out["ms_per_state"]
    assert 0 <= ms["median"] <= ms["p90"] <= ms["max"] and out["searches"] >= 20
