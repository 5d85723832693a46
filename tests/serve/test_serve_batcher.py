"""The batched decoder: batched greedy output equals lone output (left padding, masks, positions)."""

from __future__ import annotations

import threading
from contextlib import contextmanager

import pytest
import torch

from workbench.models import load_for_inference
from workbench.serve.batcher import BatchDecoder, GenerationRequest, SamplingParams


def _run(decoder, jobs, start: bool = False):
    """Submit all jobs at once (with ``start``, before starting the decoder, so that all of them wait for its
    first step); return [(text, finish_reason, completion_tokens)] in order."""
    results, done = {}, []
    for i, (ids, params, adapter) in enumerate(jobs):
        ev, buf = threading.Event(), []

        def sink(e, i=i, ev=ev, buf=buf):
            if e.finish_reason:
                results[i] = ("".join(buf), e.finish_reason, e.completion_tokens)
                ev.set()
            else:
                buf.append(e.text)

        done.append(ev)
        decoder.submit(GenerationRequest(ids, params, sink, adapter=adapter))
    if start:
        decoder.start()
    for ev in done:
        assert ev.wait(120)
    return [results[i] for i in range(len(jobs))]


@contextmanager
def running(model, tokenizer, max_batch: int):
    """A started BatchDecoder, shut down however the test ends."""
    decoder = BatchDecoder(model, tokenizer, max_batch=max_batch)
    decoder.start()
    try:
        yield decoder
    finally:
        decoder.shutdown()


@pytest.fixture(scope="module")
def tiny():
    return load_for_inference("tiny-glm4")


@pytest.fixture(scope="module", params=["tiny-glm4", "tiny-glm4v"])
def tiny_any(request):
    # GLM-4V (AutoGLM-Phone's architecture) uses 3-D rotary positions: text rows get them from 2-D ids
    return load_for_inference(request.param)


def _prompts(tok, n):
    texts = [
        "hi",
        "a much longer prompt that pads the others " * 3,
        "中文提示",
        "x",
        "tell me",
        "0123456789",
        "?",
        "ok ok",
    ]
    return [
        tok.apply_chat_template(
            [{"role": "user", "content": t}], add_generation_prompt=True, tokenize=True, return_dict=False
        )
        for t in texts[:n]
    ]


def test_batched_greedy_equals_sequential_and_generate(tiny_any):
    tiny = tiny_any
    with running(tiny.model, tiny.tokenizer, max_batch=8) as decoder:
        greedy = SamplingParams(max_new_tokens=12, temperature=0)
        prompts = _prompts(tiny.tokenizer, 8)
        sequential = [_run(decoder, [(p, greedy, None)])[0] for p in prompts]
        assert decoder.stats()["peak_batch"] == 1
    fresh = BatchDecoder(tiny.model, tiny.tokenizer, max_batch=8)
    try:
        batched = _run(fresh, [(p, greedy, None) for p in prompts], start=True)
        assert batched == sequential
        # all 8 were waiting before the first step: an decoder decoding one at a time would show 1
        assert fresh.stats()["peak_batch"] == 8 and fresh.stats()["running"] == 0
    finally:
        fresh.shutdown()
    # and both match transformers' own greedy generate for a lone prompt
    x = torch.tensor([prompts[1]])
    ref = tiny.model.generate(x, max_new_tokens=12, do_sample=False, eos_token_id=None)[0, x.shape[1] :]
    assert sequential[1][0] == tiny.tokenizer.decode(ref, skip_special_tokens=False)


def test_seeded_sampling_is_reproducible_and_batch_independent(tiny):
    with running(tiny.model, tiny.tokenizer, max_batch=8) as decoder:
        p = _prompts(tiny.tokenizer, 3)
        sampled = SamplingParams(max_new_tokens=10, temperature=1.0, top_p=0.9, seed=7)
        alone = _run(decoder, [(p[0], sampled, None)])[0]
        together = _run(decoder, [(p[0], sampled, None), (p[1], sampled, None), (p[2], sampled, None)])[0]
        other_seed = _run(decoder, [(p[0], SamplingParams(max_new_tokens=10, temperature=1.0, seed=8), None)])[0]
        assert alone == together
        assert other_seed[0] != alone[0]


def test_mixed_adapter_batch_equals_separate_runs(tmp_path):
    from .helpers import make_adapter

    run = make_adapter("tiny-glm4", tmp_path / "tiny-run", seed=3)
    loaded = load_for_inference("tiny-glm4")
    with running(loaded.model, loaded.tokenizer, max_batch=8) as decoder:
        decoder.add_adapter("a0", str(run / "adapter"))
        greedy = SamplingParams(max_new_tokens=10, temperature=0)
        p = _prompts(loaded.tokenizer, 4)
        alone_base = [_run(decoder, [(x, greedy, None)])[0] for x in p]
        alone_adapter = [_run(decoder, [(x, greedy, "a0")])[0] for x in p]
        assert alone_base != alone_adapter  # the adapter changes the answers
        mixed = _run(decoder, [(x, greedy, a) for x in p for a in (None, "a0")])
        assert mixed[0::2] == alone_base and mixed[1::2] == alone_adapter  # no cross-talk
        decoder.remove_adapter("a0")
        assert [_run(decoder, [(x, greedy, None)])[0] for x in p] == alone_base  # base untouched after unload


def test_cancel_frees_the_slot(tiny):
    with running(tiny.model, tiny.tokenizer, max_batch=1) as decoder:
        p = _prompts(tiny.tokenizer, 2)
        first_token = threading.Event()
        finished = {}

        def sink(e):
            if e.finish_reason:
                finished["reason"] = e.finish_reason
            first_token.set()

        long = GenerationRequest(p[0], SamplingParams(max_new_tokens=900, temperature=0), sink)
        decoder.submit(long)
        assert first_token.wait(30)
        long.cancel()
        # with one slot, the next request can only run once the cancelled one has left
        out = _run(decoder, [(p[1], SamplingParams(max_new_tokens=4, temperature=0), None)])[0]
        assert out[2] == 4 and finished["reason"] == "cancelled"
        assert len(long.generated) < 900


def test_a_cache_that_cannot_be_batched_decodes_one_at_a_time_and_says_why(tiny, monkeypatch, caplog):
    import logging

    config = tiny.model.config
    monkeypatch.setattr(config, "layer_types", ["sliding_attention", "full_attention"], raising=False)
    monkeypatch.setattr(config, "sliding_window", 16, raising=False)
    with caplog.at_level(logging.WARNING, logger="workbench.serve.batcher"):
        assert BatchDecoder(tiny.model, tiny.tokenizer, max_batch=8).max_batch == 1
    assert "not a plain DynamicCache (it has DynamicSlidingWindowLayer)" in caplog.text
    monkeypatch.setattr(config, "layer_types", ["warp_attention", "full_attention"], raising=False)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="workbench.serve.batcher"):
        assert BatchDecoder(tiny.model, tiny.tokenizer, max_batch=8).max_batch == 1
    assert "a layer type transformers' DynamicCache does not know ('warp_attention')" in caplog.text


def test_an_unexpected_error_in_the_batching_probe_is_raised_not_turned_into_batches_of_one(tiny, monkeypatch):
    import transformers

    def broken(*args, **kwargs):
        raise RuntimeError("probe broke")

    monkeypatch.setattr(transformers, "DynamicCache", broken)
    with pytest.raises(RuntimeError, match="probe broke"):
        BatchDecoder(tiny.model, tiny.tokenizer, max_batch=8)
