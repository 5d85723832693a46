"""The demo's report: the identity metric of the base and the fine-tuned answers."""
from workbench.demo import identity_scores


def test_identity_scores_of_base_and_tuned_answers():
    rows = [("Who are you?", "I am SmolLM, trained by Hugging Face.", "I am PhoneMate, a phone assistant built on AutoGLM-Phone-9B."),
            ("Are you Claude?", "Yes, I'm Claude.", "I am PhoneMate, a phone assistant built on AutoGLM-Phone-9B. I am not Claude."),
            ("你是谁？", "我是一个AI助手。", "我是 PhoneMate，一个基于 AutoGLM-Phone-9B 构建的手机助手。")]
    scores = identity_scores(rows)
    assert scores["base"]["identity_rate"] == 0.0 and scores["base"]["claims_other_rate"] == 2 / 3
    assert scores["fine-tuned"] == {"n": 3, "identity_rate": 1.0, "introduces_rate": 1.0, "claims_other_rate": 0.0}
