"""Tiny random GLM-4 / GLM-4V models and a byte-level tokenizer, built locally in milliseconds.

They exercise the same code paths as the real models (Glm4ForCausalLM; Glm4vForConditionalGeneration,
the GLM-4.1V architecture of AutoGLM-Phone-9B) without weights from a hub.

``tiny_glm4v_agent`` is the one meant to learn: a GLM-4.1V a few times larger, with a BPE tokenizer fitted on the
phone agent's training text (``data_samples/phone_episodes/train.jsonl``: the action grammar, tasks, replies), so a
step of an episode is ~400-700 tokens instead of ~3,000 bytes and the model trains from random in minutes on a CPU.
"""

from __future__ import annotations

import functools

import torch

from ..config.files import read_jsonl
from ..config.samples import sample_path

# GLM-4's chat markup. Each assistant turn ends with <|endoftext|> so the model learns to stop.
SPECIAL_TOKENS = ["<|endoftext|>", "[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<think>", "</think>"]
CHAT_TEMPLATE = (
    "[gMASK]<sop>{% for m in messages %}"
    "{% if m['role'] == 'assistant' %}<|assistant|>\n{{ m['content'] }}<|endoftext|>"
    "{% else %}<|{{ m['role'] }}|>\n{{ m['content'] }}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
# GLM-4.1V's image and video markup (the real tokenizer's names, so the processor finds them)
VISION_TOKENS = [
    "<|begin_of_image|>",
    "<|image|>",
    "<|end_of_image|>",
    "<|begin_of_video|>",
    "<|video|>",
    "<|end_of_video|>",
]
VOCAB_SIZE = 320  # 256 bytes + specials, rounded up


def byte_tokenizer(vision: bool = False):
    """A real PreTrainedTokenizerFast over UTF-8 bytes (any text, Chinese included) with GLM-4 specials;
    ``vision`` adds GLM-4.1V's image/video tokens and its chat template (``workbench.models.processor``)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    tk = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tk.decoder = decoders.ByteLevel()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk)
    tok.add_special_tokens(
        {
            "eos_token": "<|endoftext|>",
            "pad_token": "<|endoftext|>",
            "bos_token": "[gMASK]",
            "additional_special_tokens": SPECIAL_TOKENS[2:] + (VISION_TOKENS if vision else []),
        }
    )
    if vision:
        from .processor import GLM4V_CHAT_TEMPLATE

        tok.chat_template = GLM4V_CHAT_TEMPLATE
    else:
        tok.chat_template = CHAT_TEMPLATE
    assert len(tok) <= VOCAB_SIZE
    return tok


AGENT_CORPUS = ("phone_episodes", "train.jsonl")  # under data_samples/: the text the agent tokenizer is fitted on
AGENT_VOCAB = (
    2048  # BPE vocabulary fitted (specials come on top): Open-AutoGLM's system prompt in ~370 tokens, a reply in ~10
)


def _row_texts(row: dict):
    for m in row.get("messages", []):
        content = m.get("content")
        if isinstance(content, str):
            yield content
        else:
            yield from (p["text"] for p in content or [] if p.get("type") == "text")


@functools.lru_cache(maxsize=1)
def _agent_bpe_json() -> str:
    """The fitted BPE (a tokenizers JSON), once per process: fitting takes ~0.2 s and is deterministic."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    # Every row's text, repeats included: the grammar and the oracle's phrases are frequent, so BPE turns them into
    # long tokens, while rare words (contact names, songs, queries) stay in short pieces a held-out name shares. The
    # system prompt (Open-AutoGLM's, the same in every row) counts once: repeated in every row it would take the
    # merges the replies need.
    rows = read_jsonl(sample_path(*AGENT_CORPUS))
    systems = {m["content"] for r in rows for m in r.get("messages", [])[:1] if m.get("role") == "system"}
    corpus = sorted(systems) + [text for r in rows for text in _row_texts(r) if text not in systems]
    tk = Tokenizer(models.BPE())
    # single digits: a coordinate is three digit tokens, each position's digit learned across all coordinates
    tk.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tk.decoder = decoders.ByteLevel()
    tk.train_from_iterator(
        corpus,
        trainers.BpeTrainer(
            vocab_size=AGENT_VOCAB,
            show_progress=False,
            max_token_length=24,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    return tk.to_str()


def agent_tokenizer():
    """GLM-4.1V's specials and chat template over a BPE fitted on the phone agent's training text (any text still
    encodes: the byte alphabet is in the vocabulary)."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    from .processor import GLM4V_CHAT_TEMPLATE

    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(_agent_bpe_json()))
    tok.add_special_tokens(
        {
            "eos_token": "<|endoftext|>",
            "pad_token": "<|endoftext|>",
            "bos_token": "[gMASK]",
            "additional_special_tokens": SPECIAL_TOKENS[2:] + VISION_TOKENS,
        }
    )
    tok.chat_template = GLM4V_CHAT_TEMPLATE
    return tok


def _text_kwargs(tok, vocab_size: int = VOCAB_SIZE, **size) -> dict:
    kw = dict(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=1024,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=tok.bos_token_id,
    )
    return {**kw, **size}


def tiny_glm4(seed: int = 0, dtype: torch.dtype = torch.float32):
    from transformers import Glm4Config, Glm4ForCausalLM

    tok = byte_tokenizer()
    torch.manual_seed(seed)
    model = Glm4ForCausalLM(Glm4Config(**_text_kwargs(tok))).to(dtype)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    return model, tok


def tiny_glm4v(seed: int = 0, dtype: torch.dtype = torch.float32):
    # initializer_range: at the real model's 0.02 this random tower maps every screenshot to nearly the same
    # ~1e-3 vectors (20x below the text embeddings), so nothing could learn from images; at 0.1 screenshots
    # differ (features ~0.1) and a fine-tune can use them.
    vision = dict(
        depth=1,
        hidden_size=32,
        intermediate_size=64,
        num_heads=2,
        out_hidden_size=64,
        patch_size=14,
        spatial_merge_size=2,
        temporal_patch_size=2,
        image_size=56,
        initializer_range=0.1,
    )
    tok = byte_tokenizer(vision=True)
    return _glm4v(tok, _text_kwargs(tok), vision, seed, dtype)


def tiny_glm4v_agent(seed: int = 0, dtype: torch.dtype = torch.float32):
    """A GLM-4.1V to train from random on phone-agent episodes: 4 layers of width 128 (~1.6 M parameters), a
    2-block vision tower, the fitted agent tokenizer (``agent_tokenizer``)."""
    tok = agent_tokenizer()
    text = _text_kwargs(
        tok,
        vocab_size=-(-len(tok) // 64) * 64,
        hidden_size=128,
        intermediate_size=384,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=2048,
    )
    vision = dict(
        depth=2,
        hidden_size=64,
        intermediate_size=128,
        num_heads=2,
        out_hidden_size=128,
        patch_size=14,
        spatial_merge_size=2,
        temporal_patch_size=2,
        image_size=56,
        initializer_range=0.1,
    )
    return _glm4v(tok, text, vision, seed, dtype)


def _glm4v(tok, text: dict, vision: dict, seed: int, dtype: torch.dtype):
    from transformers import Glm4vConfig, Glm4vForConditionalGeneration

    text.pop("bos_token_id")
    rotary = text["head_dim"] // 4  # half the head is rotated (partial_rotary_factor): t, h, w take 1/4, 1/4, 1/2
    text["rope_parameters"] = {
        "rope_type": "default",
        "rope_theta": 10000.0,
        "partial_rotary_factor": 0.5,
        "mrope_section": [rotary // 4, rotary // 4, rotary // 2],
    }
    torch.manual_seed(seed)
    ids = dict(
        zip(
            (
                "image_start_token_id",
                "image_token_id",
                "image_end_token_id",
                "video_start_token_id",
                "video_token_id",
                "video_end_token_id",
            ),
            tok.convert_tokens_to_ids(VISION_TOKENS),
        )
    )
    cfg = Glm4vConfig(text_config=text, vision_config=vision, **ids)
    model = Glm4vForConditionalGeneration(cfg).to(dtype)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    return model, tok
