"""A fake causal LM that writes a fixed script: next token = table[last token].

It lets the server's reasoning handling be tested end to end with output known in advance (a random
tiny model never writes <think> tags). It keeps a real KV cache (of zeros) so the engine's batching
code runs unchanged.
"""

from __future__ import annotations

import torch

from workbench.models import LoadedModel
from workbench.models.tiny import byte_tokenizer

TEMPLATE = (
    "[gMASK]<sop>{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n"
    "{% if enable_thinking is defined and not enable_thinking %}<think></think>{% endif %}{% endif %}"
)


class ScriptedLM(torch.nn.Module):
    def __init__(self, tokenizer, chains: list[list[int]]):
        super().__init__()
        from transformers import GenerationConfig, LlamaConfig

        self.config = LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=8,
            num_hidden_layers=1,
            num_attention_heads=1,
            num_key_value_heads=1,
            intermediate_size=8,
            max_position_embeddings=256,
        )
        self.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id)
        self.anchor = torch.nn.Parameter(torch.zeros(1))
        self.vocab = len(tokenizer)
        self.prompts: list[list[int]] = []  # the token ids of each prefilled row (left padding included)
        self.next = {}
        for chain in chains:
            for a, b in zip(chain, chain[1:]):
                assert self.next.get(a, b) == b, "script chains must not disagree"
                self.next[a] = b

    def forward(self, input_ids, attention_mask=None, position_ids=None, cache=None, logits_to_keep=0, **kw):
        b, t = input_ids.shape
        if t > 1:  # a prefill (a decode step feeds one token)
            self.prompts += input_ids.tolist()
        cache.update(torch.zeros(b, 1, t, 1), torch.zeros(b, 1, t, 1), 0)
        logits = torch.full((b, 1, self.vocab), -1e4)
        for row in range(b):
            logits[row, 0, self.next.get(int(input_ids[row, -1]), 0)] = 0.0

        class Out:
            pass

        out = Out()
        out.logits = logits
        return out


def scripted_model() -> LoadedModel:
    """With thinking: "<think>abc</think>XYZ" (the closing tag written byte by byte, so it spans stream
    chunks); with enable_thinking=false the template closes the think block and the answer is "Q"."""
    tok = byte_tokenizer()
    tok.chat_template = TEMPLATE

    def ids(text):
        return tok(text, add_special_tokens=False)["input_ids"]

    newline, think, end_think = (
        ids("\n")[0],
        tok.convert_tokens_to_ids("<think>"),
        tok.convert_tokens_to_ids("</think>"),
    )
    eos = tok.eos_token_id
    thinking = [newline, think, *ids("abc"), *ids("<"), *ids("/think>"), *ids("XYZ"), eos]
    # the byte-level pieces of "</think>" must be single bytes for the chain to be unambiguous
    assert len(thinking) == 2 + 3 + 8 + 3 + 1
    plain = [end_think, *ids("Q"), eos]
    return LoadedModel(ScriptedLM(tok, [thinking, plain]).eval(), tok, "scripted", "scripted")


class _ScriptedVisionModel(torch.nn.Module):
    """What the server asks of a GLM-4.1V-style model's inner ``model``: its rotary rule for a prompt with images
    (positions 0..n-1 here: the script reads only the last token)."""

    def get_rope_index(self, input_ids, **inputs):
        n = input_ids.shape[-1]
        return torch.arange(n).view(1, 1, n).expand(3, 1, n), torch.zeros(1, dtype=torch.long)


def answering_model(answer: str, vision: bool = False) -> LoadedModel:
    """A model that answers every chat with ``answer`` (thinking in ``<think>...</think>`` included, as written):
    the answer is one added token that follows the generation prompt's last token, then end of text. ``vision``
    serves it as a vision-language model (a processor for images; ``model.seen_images`` counts the prefill
    forwards that received pixel values), so image parts travel through the server's image path."""
    from workbench.models.processor import load_processor

    tok = byte_tokenizer(vision=vision)
    tok.add_tokens([answer])
    prompt_end = tok("<|assistant|>\n", add_special_tokens=False)["input_ids"][-1]
    lm = ScriptedLM(tok, [[prompt_end, tok.convert_tokens_to_ids(answer), tok.eos_token_id]])
    processor = None
    if vision:
        lm.model, lm.seen_images = _ScriptedVisionModel(), 0
        forward = lm.forward

        def counting(*args, pixel_values=None, **kw):
            lm.seen_images += pixel_values is not None
            return forward(*args, **kw)

        lm.forward = counting
        processor = load_processor(None, tok)
    return LoadedModel(lm.eval(), tok, "scripted", "scripted", processor)
