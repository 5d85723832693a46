"""The tiny models built from code; the agent model's tokenizer fitted on the phone agent's training text."""

import json

from workbench.config.samples import sample_path
from workbench.models import tiny


def test_the_agent_tokenizer_is_fitted_deterministically_and_keeps_every_text():
    tok = tiny.agent_tokenizer()
    tiny._agent_bpe_json.cache_clear()
    assert tiny.agent_tokenizer().get_vocab() == tok.get_vocab()  # fitted again: the same vocabulary
    row = json.loads(sample_path("phone_episodes", "train.jsonl").read_text(encoding="utf-8").splitlines()[5])
    reply = row["messages"][-1]["content"]
    ids = tok(reply, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == reply and len(ids) < len(reply) / 3  # the oracle's phrases are long tokens
    pieces = tok.convert_ids_to_tokens(tok("element=[147,312]", add_special_tokens=False)["input_ids"])
    assert [p for p in pieces if p.isdigit()] == list("147312")  # one token per digit of a coordinate
    unseen = "发送 'Zürich 9:45' to Kofi"
    assert tok.decode(tok(unseen, add_special_tokens=False)["input_ids"]) == unseen


def test_the_agent_model_covers_its_tokenizer_and_is_bigger_than_the_test_model():
    model, tok = tiny.tiny_glm4v_agent()
    small, _ = tiny.tiny_glm4v()
    assert model.config.text_config.vocab_size >= len(tok)
    assert tok.convert_tokens_to_ids("<|image|>") == model.config.image_token_id
    assert sum(p.numel() for p in model.parameters()) > 5 * sum(p.numel() for p in small.parameters())
