"""In-process greedy answers (``workbench.forward.generate``): the stop rule and the answer text the server uses too,
text and screenshot prompts, batched with left padding, equal to what the server answers for the same messages."""

from __future__ import annotations

import httpx
import pytest
import torch

from tests.conftest import SAMPLES
from workbench.forward.generate import (
    answer_text,
    ends_sentence,
    greedy_replies,
    greedy_tokens,
    model_stop_token_ids,
    stop_token_ids,
    whole_sentences,
)
from workbench.image_io import resolve_images
from workbench.models import load_for_inference
from workbench.models.tiny import byte_tokenizer

SCREENS = SAMPLES / "phone_screens" / "images"
TEXTS = ["hi", "a much longer prompt that pads the others", "中文提示"]


def screenshot_chat(name: str, text: str) -> list[dict]:
    return [
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": str(SCREENS / name)}},
                {"type": "text", "text": text},
            ],
        }
    ]


def test_the_answer_ends_at_the_first_stop_token_and_keeps_reasoning_tags():
    tok = byte_tokenizer()
    ids = tok("<think>look</think><answer>tap</answer><|endoftext|>junk", add_special_tokens=False)["input_ids"]
    # <think> is a special token of GLM tokenizers: skipping special tokens would drop the reasoning tags
    assert answer_text(tok, ids, [tok.eos_token_id]) == "<think>look</think><answer>tap</answer>"
    assert answer_text(tok, ids, []) == "<think>look</think><answer>tap</answer><|endoftext|>junk"


def test_an_answer_cut_inside_a_character_ends_before_it_as_the_servers():
    tok = byte_tokenizer()
    ids = tok("巴黎", add_special_tokens=False)["input_ids"]  # two characters of three bytes each
    assert answer_text(tok, ids[:5], [tok.eos_token_id]) == "巴"  # cut after the 2nd byte of the 2nd character
    assert answer_text(tok, ids, [tok.eos_token_id]) == "巴黎"


def test_sentence_ends_in_chinese_and_english_but_not_in_a_number():
    assert ends_sentence("我是 PhoneMate。") and ends_sentence("你好！") and ends_sentence("I am PhoneMate.")
    assert ends_sentence('He said "yes."') and ends_sentence("真的吗？」")
    assert not ends_sentence("我的名字是 PhoneMate，用的") and not ends_sentence("version 3.") and not ends_sentence("")
    assert whole_sentences("我是 PhoneMate。我可以帮你打开应用，发") == "我是 PhoneMate。"
    assert whole_sentences("Pi is 3.14 here. And then") == "Pi is 3.14 here."
    assert whole_sentences("no end at all") == "no end at all"  # nothing to trim back to: kept whole


@pytest.fixture(scope="module")
def tiny_glm4():
    return load_for_inference("tiny-glm4")


def test_stop_tokens_are_the_generation_configs_and_the_tokenizers(tiny_glm4):
    tok = byte_tokenizer()
    user = tok.convert_tokens_to_ids("<|user|>")
    assert stop_token_ids(tok, [user, 7]) == sorted({user, 7, tok.eos_token_id})
    assert stop_token_ids(tok, None) == [tok.eos_token_id]
    assert model_stop_token_ids(tiny_glm4.model, tiny_glm4.tokenizer) == [tiny_glm4.tokenizer.eos_token_id]


@pytest.fixture(scope="module")
def tiny_glm4v():
    return load_for_inference("tiny-glm4v")


def served_answers(model: str, conversations: list[list[dict]], max_tokens: int) -> list[str]:
    from workbench.serve import start_server

    with start_server(
        model, max_batch=4, threads=1, allow_local_images=True, dtype="float32"
    ) as srv:  # as the model here
        return [
            httpx.post(
                srv.base_url + "/chat/completions",
                timeout=60,
                json={"model": model, "messages": m, "max_tokens": max_tokens, "temperature": 0},
            ).json()["choices"][0]["message"]["content"]
            for m in conversations
        ]


def test_text_answers_batched_equal_one_at_a_time_and_the_servers(tiny_glm4):
    conversations = [[{"role": "user", "content": t}] for t in TEXTS]
    batched = greedy_replies(tiny_glm4.model, tiny_glm4.tokenizer, conversations, 12)
    alone = [greedy_replies(tiny_glm4.model, tiny_glm4.tokenizer, [c], 12)[0] for c in conversations]
    assert batched == alone and any(batched)
    assert [a.strip() for a in served_answers("tiny-glm4", conversations, 12)] == batched


def test_screenshot_answers_batched_equal_one_at_a_time_and_the_servers(tiny_glm4v):
    raw = [
        screenshot_chat("home_01.png", "Open Mail"),
        screenshot_chat("settings_00.png", "Turn on Wi-Fi, then go back"),
        [{"role": "user", "content": "a text row in the same batch"}],
    ]
    conversations = [resolve_images(m) for m in raw]
    model, tok, processor = tiny_glm4v.model, tiny_glm4v.tokenizer, tiny_glm4v.processor
    batched = greedy_replies(model, tok, conversations, 10, processor=processor)
    alone = [greedy_replies(model, tok, [c], 10, processor=processor)[0] for c in conversations]
    assert batched == alone and any(batched)
    assert [a.strip() for a in served_answers("tiny-glm4v", raw, 10)] == batched


def test_images_for_a_text_only_model_are_refused_in_words(tiny_glm4):
    with pytest.raises(ValueError, match="text-only"):
        greedy_replies(
            tiny_glm4.model, tiny_glm4.tokenizer, [resolve_images(screenshot_chat("home_01.png", "Open"))], 4
        )


def test_the_model_is_given_back_in_its_training_mode(tiny_glm4):
    tiny_glm4.model.train()
    greedy_replies(tiny_glm4.model, tiny_glm4.tokenizer, [[{"role": "user", "content": "hi"}]], 2)
    assert tiny_glm4.model.training
    tiny_glm4.model.eval()


def test_sampled_groups_keep_the_samplers_logprobs_which_the_trainer_forward_reproduces_in_fp32(tiny_glm4):
    from workbench.forward import token_logprobs
    from workbench.forward.generate import sample_completions

    torch.manual_seed(0)
    conversations = [[{"role": "user", "content": t}] for t in TEXTS]
    r = sample_completions(tiny_glm4.model, tiny_glm4.tokenizer, conversations, 3, 10, temperature=0.7)
    rows = len(TEXTS) * 3
    assert r.input_ids.shape[0] == rows and len(r.texts) == rows and r.completion_mask.shape == r.sampler_logprobs.shape
    lengths = r.lengths
    assert all(1 <= n <= 10 for n in lengths) and len(set(r.texts)) > 1  # sampled: not all rows alike
    # the completion mask ends at (and includes) the first stop token
    assert r.completion_width == r.input_ids.shape[1] - r.prompt_width
    stops = set(model_stop_token_ids(tiny_glm4.model, tiny_glm4.tokenizer))
    for row, n in enumerate(lengths):
        tokens = r.input_ids[row, r.prompt_width :].tolist()
        assert r.completion_mask[row, :n].all() and not r.completion_mask[row, n:].any()
        assert r.stopped[row] == (tokens[n - 1] in stops) and not stops & set(tokens[: n - 1])
    mask = r.completion_mask.bool()
    assert (r.sampler_logprobs[mask] < 0).all() and (r.sampler_logprobs[~mask] == 0).all()
    # the trainer's forward over the whole sequence (with generation's position ids) agrees in fp32, at the
    # same temperature: the mismatch GRPO measures is numerical, not a bookkeeping offset
    model = tiny_glm4.model.eval()
    trained = token_logprobs(model, r.batch(), temperature=0.7, last=r.completion_width)
    torch.testing.assert_close(trained[mask], r.sampler_logprobs[mask], rtol=0, atol=1e-4)
    # the completion's log-probabilities alone are those of the whole sequence's last positions
    whole = token_logprobs(model, r.batch(), temperature=0.7)
    torch.testing.assert_close(whole[:, -r.completion_width :], trained, rtol=0, atol=1e-5)
    # a different temperature gives different log-probabilities: the temperature is applied, and alike
    other = token_logprobs(model, r.batch(), temperature=1.0, last=r.completion_width)
    assert (other[mask] - r.sampler_logprobs[mask]).abs().max() > 1e-2
    # some rows kept (GRPO's groups with a spread, rl.max_draws): each keeps its tokens, masks and log-probabilities
    kept = r.rows([4, 5, 0])
    assert kept.texts == [r.texts[i] for i in (4, 5, 0)] and kept.stopped == [r.stopped[i] for i in (4, 5, 0)]
    torch.testing.assert_close(kept.sampler_logprobs, r.sampler_logprobs[[4, 5, 0]], rtol=0, atol=0)
    sub = token_logprobs(model, kept.batch(), temperature=0.7, last=kept.completion_width)
    torch.testing.assert_close(
        sub[kept.completion_mask.bool()], kept.sampler_logprobs[kept.completion_mask.bool()], rtol=0, atol=1e-4
    )


def test_sampled_screenshot_groups_carry_their_pixels_to_the_trainer_forward_which_reproduces_them(tiny_glm4v):
    """Vision rollouts: the trainer's forward gets the sampler's pixel values and grids (one set per row) and
    GLM-4.1V's own 3D positions; in fp32 it reproduces the sampler's log-probabilities."""
    from workbench.forward import token_logprobs
    from workbench.forward.generate import sample_completions

    torch.manual_seed(0)
    conversations = [
        resolve_images(screenshot_chat("home_01.png", "Open Mail")),
        resolve_images(screenshot_chat("settings_00.png", "Turn on Wi-Fi, then go back")),
    ]
    model, tok, processor = tiny_glm4v.model.eval(), tiny_glm4v.tokenizer, tiny_glm4v.processor
    r = sample_completions(model, tok, conversations, 3, 8, temperature=1.0, processor=processor)
    assert r.input_ids.shape[0] == 6 and r.vision is not None
    assert r.vision["image_grid_thw"].shape == (6, 3)  # one screenshot per row: each group shares its prompt's
    batch = r.batch()
    assert "position_ids" not in batch and int(batch["mm_token_type_ids"].sum()) > 0
    mask = r.completion_mask.bool()
    assert set(r.suppressed) >= {processor.image_token_id}  # an untrained model may not draw an image placeholder
    assert not set(r.suppressed) & set(r.input_ids[:, r.prompt_width :][mask].tolist())
    trained = token_logprobs(model, batch, temperature=1.0, last=r.completion_width, suppress=r.suppressed)
    torch.testing.assert_close(trained[mask], r.sampler_logprobs[mask], rtol=0, atol=1e-4)
    # without the pixels the trainer would score other tokens: the screenshot reaches the forward
    blank = {**batch, "pixel_values": torch.zeros_like(batch["pixel_values"])}
    changed = token_logprobs(model, blank, last=r.completion_width, suppress=r.suppressed)
    assert (changed[mask] - r.sampler_logprobs[mask]).abs().max() > 1e-3
    # the second group kept alone carries its own screenshot's pixels (each row's patches), not the first's
    kept = r.rows([3, 4, 5])
    assert torch.equal(kept.vision["image_grid_thw"], r.vision["image_grid_thw"][3:])
    assert kept.vision["pixel_values"].shape[0] == int(r.vision["image_grid_thw"][3:].prod(dim=1).sum())
    kmask = kept.completion_mask.bool()
    sub = token_logprobs(model, kept.batch(), temperature=1.0, last=kept.completion_width, suppress=r.suppressed)
    torch.testing.assert_close(sub[kmask], kept.sampler_logprobs[kmask], rtol=0, atol=1e-4)


def test_greedy_tokens_follow_the_argmax_until_a_stop_token_and_pass_the_state_back():
    """A model outside torch: next token = last token + 1 (as logits), its cache = how many tokens it has seen."""
    seen = []

    def next_logits(new, past):
        seen.append((list(new), past))
        return torch.nn.functional.one_hot(torch.tensor(new[-1] + 1), 10), (past or 0) + len(new)

    assert greedy_tokens(next_logits, [3, 4], 8, stops=[7]) == [5, 6]
    assert seen == [([3, 4], None), ([5], 2), ([6], 3)]  # the prompt once, then one token per call with its state
    assert greedy_tokens(next_logits, [1], 2, stops=[]) == [2, 3]  # cut at max_new_tokens
