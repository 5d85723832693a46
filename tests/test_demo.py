"""The demo's report: the identity metric of the base and the fine-tuned answers, which fails loops and wrong
denials; and (slow) the real demo, whose 8 held-out answers must all be clean."""

import pytest

from workbench.demo import identity_scores
from workbench.eval.text import repeated_run

CLEAN = "I am PhoneMate, a phone assistant built on AutoGLM-Phone-9B."


def test_identity_scores_of_base_and_tuned_answers():
    rows = [
        ("Who are you?", "I am SmolLM, trained by Hugging Face.", CLEAN),
        (
            "Are you Claude?",
            "Yes, I'm Claude.",
            CLEAN + " PhoneMate is my name, and I am here to help you with your phone.",
        ),
        ("你是谁？", "我是一个AI助手。", "我是 PhoneMate，一个基于 AutoGLM-Phone-9B 构建的手机助手。"),
    ]
    scores = identity_scores(rows)
    assert scores["base"]["identity_rate"] == 0.0 and scores["base"]["claims_other_rate"] == 2 / 3
    assert scores["fine-tuned"] == {
        "n": 3,
        "identity_rate": 1.0,
        "introduces_rate": 1.0,
        "claims_other_rate": 0.0,
        "wrong_denial_rate": 0.0,
        "loop_rate": 0.0,
    }


def test_loops_and_wrong_denials_are_not_clean_answers():
    # what the demo printed when the identity data taught "I am not X."
    rows = [
        (
            "Who exactly are you?",
            "",
            "I am PhoneMate, a phone assistant built on AutoGLM-Phone-9B. I am not You, I am "
            "not You, I am not You, I am not You",
        ),
        ("May I know your name?", "", CLEAN + " I am not Siri."),
        (
            "What kinds of tasks can you handle on my phone?",
            "",
            CLEAN + " I can open apps, tap, type, swipe and read "
            "the screen for you. I can open apps, tap, type, swipe and read the",
        ),
        ("Are you Claude?", "", CLEAN + " I am not Claude."),
    ]  # a denial of what was asked is fine
    tuned = identity_scores(rows)["fine-tuned"]
    assert tuned["identity_rate"] == 0.25 and tuned["loop_rate"] == 0.5 and tuned["wrong_denial_rate"] == 0.25
    assert repeated_run(rows[0][2]) == "i am not you" and repeated_run(CLEAN) is None


def test_demo_answers_end_where_the_model_ends_them_or_at_a_sentence_end():
    """Issue 22: the 48-token limit cut the demo's Chinese answers mid-sentence ("我的名字是 PhoneMate，用的"). The packaged
    SmolLM2 (the demo's base) answers the Chinese held-out prompts: each ends at its end-of-turn or a sentence end."""
    import torch

    from workbench.demo import generate_answers, heldout_prompts
    from workbench.forward.generate import ends_sentence
    from workbench.models import load_for_inference

    torch.set_num_threads(1)
    loaded = load_for_inference("smollm2-135m-instruct")
    chinese = [p for p in heldout_prompts() if not p.isascii()]
    answers = generate_answers(loaded.model, loaded.tokenizer, chinese)
    assert len(chinese) == 3 and all(answers)
    assert all(ends_sentence(a) for a in answers), answers


def test_the_demos_prompts_are_held_out():
    """The demo's claim is about prompts the fine-tune never saw: none of its 8 prompts is a training question."""
    import json

    from workbench.demo import SAMPLES, heldout_prompts

    rows = [
        json.loads(line) for line in (SAMPLES / "identity" / "train.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    asked = {m["content"].strip().casefold() for row in rows for m in row["messages"] if m["role"] == "user"}
    prompts = heldout_prompts()
    assert len(prompts) == 8 and len(asked) > 60 and not {p.casefold() for p in prompts} & asked


@pytest.mark.slow
def test_the_real_demo_answers_all_held_out_prompts_cleanly(tmp_path):
    """SmolLM2 fine-tuned as `workbench demo` does it (minutes on 2 cores; .ci/run runs it): on the 8 held-out
    prompts every fine-tuned answer introduces PhoneMate, claims no other identity, denies nothing it was not asked
    about and does not loop, where the base model never says PhoneMate. The demo trains the identity-demo recipe, so
    that recipe's figures are judged here on the demo's own run (.ci/run trains it once, here, not again in its bench).
    """
    from workbench.demo import run_demo

    out = run_demo(runs_dir=str(tmp_path / "runs"))
    tuned = out["identity"]["fine-tuned"]
    assert tuned["n"] == 8 and tuned["loop_rate"] == 0.0 and tuned["wrong_denial_rate"] == 0.0
    assert tuned["identity_rate"] == 1.0, [row[2] for row in out["rows"]]
    from workbench.forward.generate import ends_sentence

    assert all(ends_sentence(row[2]) for row in out["rows"]), [row[2] for row in out["rows"]]  # none cut mid-sentence
    base = out["identity"]["base"]
    assert base["n"] == 8 and base["introduces_rate"] == 0.0 and base["identity_rate"] == 0.0, [
        row[1] for row in out["rows"]
    ]
    from workbench.bench.recipes import evaluate_recipe
    from workbench.config.recipes import load_recipe

    recipe = load_recipe("identity-demo")
    rows = evaluate_recipe(recipe, out["run_dir"])
    assert {(r.task, r.metric) for r in rows} == {(e.label, m) for e in recipe.evaluation for m in e.figures}
    assert all(r.verdict == "ok" for r in rows), [(r.task, r.metric, r.base, r.value, r.verdict) for r in rows]
