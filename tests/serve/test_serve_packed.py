"""The batch decoder with oneDNN-packed linear weights (the server's own model on the CPU): same greedy answers as the
plain model, alone, batched and with a LoRA adapter in the batch; a model handed to the server is left alone."""

from __future__ import annotations

import torch

from workbench.models import load_for_inference
from workbench.serve.batcher import BatchDecoder, SamplingParams
from workbench.serve.packed import packing_available

from .test_serve_batcher import _prompts, _run


def _answers(pack: bool, adapter_dir=None):
    loaded = load_for_inference("tiny-glm4")  # its own copy: packing changes the modules for good
    decoder = BatchDecoder(loaded.model, loaded.tokenizer, max_batch=8, pack_weights=pack)
    if adapter_dir is not None:
        decoder.add_adapter("a0", str(adapter_dir))
    greedy = SamplingParams(max_new_tokens=10, temperature=0)
    prompts = _prompts(loaded.tokenizer, 4)
    try:
        alone = _run(decoder, [(p, greedy, None) for p in prompts[:1]], start=True)
        batched = _run(decoder, [(p, greedy, a) for p in prompts for a in (None, "a0" if adapter_dir else None)])
    finally:
        decoder.shutdown()
    return decoder.stats()["packed_linears"], alone, batched


def test_packed_weights_give_the_same_greedy_answers(tmp_path):
    from .helpers import make_adapter

    assert packing_available(load_for_inference("tiny-glm4").model)  # the CPU build of torch has oneDNN
    run = make_adapter("tiny-glm4", tmp_path / "tiny-run", seed=3)
    packed, alone_p, batched_p = _answers(True, run / "adapter")
    plain, alone, batched = _answers(False, run / "adapter")
    assert plain == 0 and packed >= 8  # every linear layer of the decoder and the head
    assert alone_p == alone and batched_p == batched
    assert batched[0] != batched[1]  # the adapter rows differ from the base rows: both paths were exercised


def test_the_server_packs_only_a_model_it_loaded_itself():
    from workbench.serve.config import ServeConfig
    from workbench.serve.registry import ServedModels

    loaded = load_for_inference("tiny-glm4")
    handed_in = ServedModels(ServeConfig(model="tiny-glm4"), loaded=loaded)
    handed_in.load()
    own = ServedModels(ServeConfig(model="tiny-glm4", dtype="float32"))  # packing is for fp32 weights
    own.load()
    try:
        assert handed_in.decoder.stats()["packed_linears"] == 0
        assert "forward" not in vars(next(m for m in loaded.model.modules() if isinstance(m, torch.nn.Linear)))
        assert own.decoder.stats()["packed_linears"] > 0
    finally:
        handed_in.shutdown()
        own.shutdown()
