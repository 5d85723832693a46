"""Greedy answers from a model in memory (no server): what the demo compares, what ``eval.tasks`` scores while a
run trains, what the notebooks ask a tuned vision model. Text and screenshot prompts alike.

The pieces every answerer shares, the server's batched engine and the ONNX runner included:
* the prompt: ``workbench.data.multimodal.encode_prompt`` (chat template up to the answer, images expanded);
* the stop rule: ``stop_token_ids`` (the generation config's end-of-sequence ids and the tokenizer's);
* the answer: ``answer_text``, the tokens before the first stop token, special tokens such as ``<think>`` kept
  (what the server answers, and what reasoning scorers read).

``greedy_replies(model, tokenizer, conversations, max_new_tokens, processor=None)`` batches conversations with
left padding and decodes them with ``model.generate``; ``greedy_tokens(next_logits, prompt_ids, ...)`` is the same
greedy rule for a model outside torch (the ONNX runner's session): the only other greedy decoder is the server's
batched engine; ``sample_completions`` samples groups of completions at a
temperature and keeps each token's log-probability as the sampler computed it (reinforcement fine-tuning).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from transformers import StoppingCriteria, StoppingCriteriaList

from ..data.multimodal import encode_prompt, image_token_types, vision_batch


def stop_token_ids(tokenizer, generation_eos=None) -> list[int]:
    """The ids that end an answer: ``generation_eos`` (a generation config's ``eos_token_id``: an id, a list or
    None; GLM-4 lists several) and the tokenizer's end-of-sequence token."""
    ids = set(generation_eos if isinstance(generation_eos, (list, tuple)) else [generation_eos])
    ids.add(tokenizer.eos_token_id)
    return sorted(ids - {None})


def model_stop_token_ids(model, tokenizer) -> list[int]:
    """``stop_token_ids`` of a transformers model (its generation config's end-of-sequence ids)."""
    config = getattr(model, "generation_config", None)
    return stop_token_ids(tokenizer, getattr(config, "eos_token_id", None) if config is not None else None)


def without_cut_character(text: str) -> str:
    """``text`` ending before a character its last tokens only began: a byte-level tokenizer's answer cut by
    ``max_tokens`` inside a multi-byte character decodes to a trailing U+FFFD, which is no text (vLLM's answers
    end before it too). The one rule for answers in process and served."""
    return text.rstrip("\ufffd")


def answer_text(tokenizer, token_ids: Iterable[int], stops: Iterable[int]) -> str:
    """The text of generated ``token_ids`` up to (without) the first stop token, special tokens kept, ending
    before a character the tokens only began (``without_cut_character``)."""
    stops, kept = set(stops), []
    for token in token_ids:
        if int(token) in stops:
            break
        kept.append(int(token))
    return without_cut_character(tokenizer.decode(kept, skip_special_tokens=False)).strip()


# a sentence ends at 。！？!? or at a period after a letter (not "3." of a number), closing quotes/brackets after it
_SENTENCE_END = re.compile(r"(?:[。！？!?…]|(?<=[^\s\d.])\.)[\"'”’)）」]*$")


def ends_sentence(text: str) -> bool:
    return bool(_SENTENCE_END.search(text.rstrip()))


def whole_sentences(text: str) -> str:
    """``text`` up to the end of its last whole sentence (all of it when none ends): an answer a token limit cut."""
    text = text.rstrip()
    for end in range(len(text), 0, -1):
        if ends_sentence(text[:end]):
            return text[:end].rstrip()
    return text


def greedy_tokens(next_logits, prompt_ids: Sequence[int], max_new_tokens: int, stops: Iterable[int]) -> list[int]:
    """The greedy continuation of ``prompt_ids`` (without the stop token that ends it). ``next_logits(new_ids, past)``
    returns the logits (one vector, any array type) of the position after ``new_ids`` and the state to pass back as
    ``past`` (None at first): a model's cache, or the sequence so far for one without."""
    stops, out = set(stops), []
    new, past = list(prompt_ids), None
    for _ in range(max_new_tokens):
        logits, past = next_logits(new, past)
        token = int(logits.argmax())
        if token in stops:
            break
        out.append(token)
        new = [token]
    return out


class _SentenceStop(StoppingCriteria):
    """A transformers stopping criterion: a row is done once it has ``after`` new tokens and ends a sentence (only
    the last few tokens are decoded each step: cheap beside a forward)."""

    def __init__(self, tokenizer, prompt_width: int, after: int):
        self.tokenizer, self.width, self.after = tokenizer, prompt_width, after

    def __call__(self, input_ids: torch.Tensor, scores, **kwargs) -> torch.Tensor:
        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        if input_ids.shape[1] - self.width >= self.after:
            for row, ids in enumerate(input_ids[:, -6:].tolist()):
                done[row] = ends_sentence(self.tokenizer.decode(ids, skip_special_tokens=True))
        return done


def left_padded(prompts: list, pad_id: int, device) -> dict[str, torch.Tensor]:
    width = max(len(p.input_ids) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, p in enumerate(prompts):
        ids[row, width - len(p.input_ids) :] = torch.tensor(p.input_ids, dtype=torch.long)
        mask[row, width - len(p.input_ids) :] = 1
    inputs = {"input_ids": ids, "attention_mask": mask}
    visions = [p.vision for p in prompts if p.vision is not None]
    if visions:
        inputs.update(vision_batch(ids, visions))
    return {k: v.to(device) for k, v in inputs.items()}


@torch.no_grad()
def greedy_replies(
    model,
    tokenizer,
    conversations: Sequence[list[dict]],
    max_new_tokens: int = 64,
    *,
    processor=None,
    batch_size: int = 8,
    autocast=None,
    repetition_penalty: float | None = None,
    template_kwargs: dict | None = None,
    sentence_after: int | None = None,
) -> list[str]:
    """The greedy answer to each conversation (its messages up to the answer), ``batch_size`` at a time.

    ``processor``: a vision-language model's (conversations with images, decoded by ``resolve_images``, need
    it). ``autocast``: a context manager factory the forward runs under (a training run's precision policy).
    ``sentence_after``: once a row has this many new tokens it stops at the end of a sentence, and an answer
    ``max_new_tokens`` still cut is trimmed to its last whole sentence (the demo's answers: never cut mid-sentence,
    however long the model would go on). The model is put in eval mode for the call and given back in the mode it
    was in."""
    stops = model_stop_token_ids(model, tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stops[0]
    device = next(model.parameters()).device
    extra = {"repetition_penalty": repetition_penalty} if repetition_penalty else {}
    was_training = model.training
    model.eval()
    answers: list[str] = []
    try:
        for start in range(0, len(conversations), batch_size):
            prompts = [
                encode_prompt(tokenizer, list(messages), processor, template_kwargs)
                for messages in conversations[start : start + batch_size]
            ]
            inputs = left_padded(prompts, pad_id, device)
            width = inputs["input_ids"].shape[1]
            if sentence_after is not None:
                extra["stopping_criteria"] = StoppingCriteriaList([_SentenceStop(tokenizer, width, sentence_after)])
            with autocast() if autocast is not None else contextlib.nullcontext():
                out = model.generate(
                    **inputs,
                    max_new_tokens=max_new_tokens,
                    do_sample=False,
                    eos_token_id=stops,
                    pad_token_id=pad_id,
                    **extra,
                )
            for row in out.tolist():
                new = row[width:]
                ended = any(t in stops for t in new)
                while new and new[-1] == pad_id:  # rows a sentence stopped are padded while the others go on
                    new.pop()
                text = answer_text(tokenizer, new, stops)
                answers.append(whole_sentences(text) if sentence_after is not None and not ended else text)
    finally:
        model.train(was_training)
    return answers


@dataclass
class Rollouts:
    """Sampled completions, ``group_size`` per prompt, group after group, with each token's log-probability as the
    sampler computed it. ``input_ids`` and the masks are [rows, width] over the left-padded prompt and the
    completion; ``batch()`` is what ``token_logprobs(..., last=completion_width)`` recomputes the completion's
    log-probabilities on, lining up with ``sampler_logprobs`` and ``completion_mask`` ([rows, completion_width]).
    Screenshot prompts: ``vision`` holds the pixel values and grids the sampler was given (one per row), which the
    trainer's forward gets too."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor  # the prompt's, then 1 for each completion token up to its stop token
    position_ids: torch.Tensor  # as generation numbered them (left padding skipped)
    completion_mask: torch.Tensor  # [rows, completion_width]: 1 up to and including the stop token
    sampler_logprobs: torch.Tensor  # [rows, completion_width], 0 past the stop token
    texts: list[str]  # each completion's answer text (``answer_text``)
    prompt_width: int
    stopped: list[bool]  # ended on a stop token (else cut at max_new_tokens)
    vision: dict | None = None  # pixel_values, image_grid_thw of the rows' screenshots (None: text prompts)
    image_token_id: int | None = None
    suppressed: tuple[int, ...] = ()  # token ids the sampler could not draw (``token_logprobs(suppress=...)``)

    @property
    def completion_width(self) -> int:
        return self.completion_mask.shape[1]

    @property
    def lengths(self) -> list[int]:
        return [int(n) for n in self.completion_mask.sum(dim=1)]

    def rows(self, keep: list[int]) -> Rollouts:
        """These rollouts restricted to the rows ``keep`` (in that order); the widths stay as sampled."""
        idx = torch.tensor(keep, dtype=torch.long)
        vision = None
        if self.vision is not None:  # pixel_values holds each row's patches one row after the other
            counts = [int(n) for n in self.vision["image_grid_thw"].prod(dim=1)]
            patches = torch.split(self.vision["pixel_values"], counts)
            vision = {
                "pixel_values": torch.cat([patches[i] for i in keep]),
                "image_grid_thw": self.vision["image_grid_thw"][idx.to(self.vision["image_grid_thw"].device)],
            }
        on = lambda t: t[idx.to(t.device)]  # noqa: E731
        return Rollouts(
            on(self.input_ids),
            on(self.attention_mask),
            on(self.position_ids),
            on(self.completion_mask),
            on(self.sampler_logprobs),
            [self.texts[i] for i in keep],
            self.prompt_width,
            [self.stopped[i] for i in keep],
            vision,
            self.image_token_id,
            self.suppressed,
        )

    def replaced(self, rows: dict[int, list[int]], tokenizer, stops: list[int]) -> Rollouts:
        """These rollouts with the completions of ``rows`` (row -> token ids, up to and including a stop token)
        put in place of what was sampled there (a reply replayed from an earlier step); the replaced rows' sampler
        log-probabilities are 0 (no sampler drew them: the trainer supplies its own)."""
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stops[0]
        generated = self.input_ids[:, self.prompt_width :]
        width = max([generated.shape[1]] + [len(ids) for ids in rows.values()])
        grown = torch.full((generated.shape[0], width), pad_id, dtype=generated.dtype, device=generated.device)
        grown[:, : generated.shape[1]] = generated
        sampled = torch.zeros(grown.shape, dtype=self.sampler_logprobs.dtype, device=self.sampler_logprobs.device)
        sampled[:, : generated.shape[1]] = self.sampler_logprobs
        for row, ids in rows.items():
            grown[row] = pad_id
            grown[row, : len(ids)] = torch.tensor(ids, dtype=grown.dtype)
            sampled[row] = 0.0
        inputs = {
            "input_ids": self.input_ids[:, : self.prompt_width],
            "attention_mask": self.attention_mask[:, : self.prompt_width],
            **(self.vision or {}),
        }
        return _assembled(tokenizer, inputs, grown, sampled, stops, self.suppressed, self.image_token_id)

    def completion_ids(self, row: int) -> list[int]:
        """The token ids of one row's completion, up to and including its stop token."""
        keep = self.completion_mask[row].bool()
        return [int(t) for t in self.input_ids[row, self.prompt_width :][keep]]

    def batch(self) -> dict[str, torch.Tensor]:
        out = {"input_ids": self.input_ids, "attention_mask": self.attention_mask}
        if self.vision is None:
            return {**out, "position_ids": self.position_ids}
        # GLM-4.1V numbers its 3D rotary positions itself from the grids, the image tokens and the attention mask,
        # as its generation did: 1D position ids would override them
        return {**out, **self.vision, "mm_token_type_ids": image_token_types(self.input_ids, self.image_token_id)}


# a vision-language model's placeholders: an image token in a completion would claim pixels no image supplies
_VISION_PLACEHOLDERS = (
    "image_token_id",
    "image_start_token_id",
    "image_end_token_id",
    "video_token_id",
    "video_start_token_id",
    "video_end_token_id",
)


def vision_placeholder_ids(model) -> tuple[int, ...]:
    """The image / video placeholder token ids of a vision-language model's config: never sampled in a completion
    (a trained model does not emit them; an untrained one might, and the next forward would count an image
    token with no image behind it). Removed from the sampler's and the trainer's distribution alike."""
    config = getattr(model, "config", None)
    ids = {getattr(config, name, None) for name in _VISION_PLACEHOLDERS}
    return tuple(sorted(i for i in ids if isinstance(i, int)))


def _position_ids(attention_mask: torch.Tensor) -> torch.Tensor:
    """Position ids of left-padded rows, numbered as transformers' generation numbers them."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0) * attention_mask.long()


@torch.no_grad()
def sample_completions(
    model,
    tokenizer,
    conversations: Sequence[list[dict]],
    group_size: int,
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    autocast=None,
    template_kwargs: dict | None = None,
    processor=None,
) -> Rollouts:
    """``group_size`` sampled completions of each conversation (its messages up to the answer), all rows decoded in
    one batch, from the model's full distribution at ``temperature`` (no top-k / top-p: the log-probabilities are
    those of the distribution sampled). ``processor``: a vision-language model's, for conversations with
    screenshots (decoded by ``resolve_images``). The model is put in eval mode for the call and given back as it was."""
    stops = model_stop_token_ids(model, tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stops[0]
    device = next(model.parameters()).device
    prompts = [encode_prompt(tokenizer, list(messages), processor, template_kwargs) for messages in conversations]
    # each prompt repeated for its group before decoding (what num_return_sequences does): the pixel values are
    # made once, per row, and the trainer's forward gets the very tensors the sampler got
    inputs = left_padded([p for p in prompts for _ in range(group_size)], pad_id, device)
    suppressed = vision_placeholder_ids(model) if processor is not None else ()
    extra = {"suppress_tokens": list(suppressed)} if suppressed else {}
    was_training = model.training
    model.eval()
    try:
        with autocast() if autocast is not None else contextlib.nullcontext():
            out = model.generate(
                **inputs,
                max_new_tokens=max_new_tokens,
                do_sample=True,
                temperature=temperature,
                top_k=0,
                top_p=1.0,
                min_p=None,
                repetition_penalty=None,
                eos_token_id=stops,
                pad_token_id=pad_id,
                output_scores=True,
                return_dict_in_generate=True,
                **extra,
            )
    finally:
        model.train(was_training)
    width = inputs["input_ids"].shape[1]
    generated = out.sequences[:, width:]
    # the sampler's log-probabilities: its processed scores (logits / temperature, fp32) normalised
    sampled = (
        torch.stack(
            [
                torch.log_softmax(s.float(), dim=-1).gather(-1, generated[:, t : t + 1]).squeeze(-1)
                for t, s in enumerate(out.scores)
            ],
            dim=1,
        )
        if generated.shape[1]
        else generated.float()
    )
    return rollouts_of(tokenizer, inputs, prompts, generated, sampled, stops, suppressed)


def rollouts_of(
    tokenizer,
    inputs: dict,
    prompts: list,
    generated: torch.Tensor,
    sampled: torch.Tensor,
    stops: list[int],
    suppressed: tuple = (),
) -> Rollouts:
    """Rollouts of ``generated`` [rows, steps] completion ids (each row up to its first stop token, padded after it)
    and their sampler log-probabilities, after the left-padded prompt ``inputs`` (``_left_padded``) of ``prompts``:
    whichever engine sampled them (this process's ``generate``, or a vLLM server)."""
    image_token_id = next((p.vision.image_token_id for p in prompts if p.vision is not None), None)
    return _assembled(tokenizer, inputs, generated, sampled, stops, suppressed, image_token_id)


def _assembled(
    tokenizer,
    inputs: dict,
    generated: torch.Tensor,
    sampled: torch.Tensor,
    stops: list[int],
    suppressed: tuple,
    image_token_id: int | None,
) -> Rollouts:
    width = inputs["input_ids"].shape[1]
    sequences = torch.cat([inputs["input_ids"], generated.to(inputs["input_ids"].device)], dim=1)
    is_stop = torch.isin(generated, torch.tensor(stops, device=generated.device))
    # a completion runs up to and including its first stop token
    before_stop = (is_stop.long().cumsum(dim=1) - is_stop.long()) == 0
    keep = before_stop.long()
    attention = torch.cat([inputs["attention_mask"], keep], dim=1)
    texts = [answer_text(tokenizer, row.tolist(), stops) for row in generated]
    vision = {k: inputs[k] for k in ("pixel_values", "image_grid_thw") if k in inputs} or None
    return Rollouts(
        sequences,
        attention,
        _position_ids(attention),
        keep,
        sampled * keep,
        texts,
        width,
        [bool(x) for x in is_stop.any(dim=1)],
        vision,
        image_token_id,
        suppressed,
    )
