"""Chat messages with images -> model inputs: one path for training rows and for served requests.

Messages are OpenAI-style. A message's ``content`` is a string or a list of parts::

    {"type": "text", "text": "..."}
    {"type": "image_url", "image_url": {"url": "screens/home.png" | "data:image/png;base64,..."}}

(training rows may also use the shortcut ``"images": ["a.png"]`` with ``<image>`` placeholders in the text:
``workbench.data.formats``). The processor is ``workbench.models.processor.load_processor``'s.

API (reading and decoding the images themselves is ``workbench.image_io``'s)
* ``content_parts(content)``: validates a message's content and returns it as a string or a list of
  normalised parts (text / image_url); ValueError saying what is wrong.
* ``encode_chat(processor, messages, max_length=None, add_generation_prompt=False, template_kwargs=None)`` ->
  ``TokenizedExample``:
  rendered with the processor's chat template, each ``<|image|>`` expanded to the image's token count.
  Training (default): labels on assistant tokens only (their ``<think>`` reasoning included), image and
  prompt tokens are context; a row whose image tokens would be cut by ``max_length`` is a ValueError.
  Generation (``add_generation_prompt=True``): the prompt up to the assistant tag, every label ignored;
  ``template_kwargs`` (e.g. ``enable_thinking``) reach the chat template.
  The example's ``vision`` (``VisionInputs``) holds the images and their grids; pixel values are computed
  when a batch is made.
* ``vision_batch(input_ids, visions)`` -> ``{"pixel_values", "image_grid_thw", "mm_token_type_ids"}``: what a
  batch adds for the rows with images (``collate`` calls it; a server batching prompts can call it on its
  left-padded ids). Pass the dict to the model with ``input_ids`` and ``attention_mask``.
  ``image_token_types(input_ids, image_token_id)``: those token types alone (ids that grew past the prompt).
* ``count_image_tokens(example)``: the image tokens in an encoded example (usage counts, length checks).
* ``encode_prompt(tokenizer, messages, processor=None, template_kwargs=None)`` -> ``TokenizedExample``: the
  generation prompt of a conversation, text or with images (in-process answers, the server, the ONNX runner).
  Generating the answer is ``workbench.forward.generate``'s (data does not run models).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import torch

from ..image_io import ImageSourceError
from ..models.processor import grid_token_count
from .tokenize import IGNORE_INDEX, TokenizedExample, tokenize_messages

PART_TYPES = ("text", "image_url")


def content_parts(content: Any, where: str = "content") -> str | list[dict]:
    """A message content as a string or a list of normalised parts; ValueError naming what is wrong."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list) or not content:
        raise ValueError(f"{where} must be a string or a non-empty list of parts, got {type(content).__name__}")
    parts = []
    for j, part in enumerate(content):
        at = f"{where}[{j}]"
        if not isinstance(part, dict):
            raise ValueError(f'{at} is {type(part).__name__}, not a part object ({{"type": "text", ...}})')
        kind = part.get("type")
        if kind == "text":
            if not isinstance(part.get("text"), str):
                raise ValueError(f"{at}.text must be a string")
            parts.append({"type": "text", "text": part["text"]})
        elif kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if not isinstance(url, str) or not url.strip():
                raise ValueError(f"{at}.image_url.url must be a non-empty string (a path or a data: URL)")
            parts.append({"type": "image_url", "image_url": {"url": url}})
        else:
            raise ValueError(f"{at}.type is {kind!r}; expected one of {', '.join(PART_TYPES)}")
    return parts


def has_images(messages: list[dict]) -> bool:
    return any(isinstance(m["content"], list) and any(p["type"] != "text" for p in m["content"]) for m in messages)


@dataclass(frozen=True)
class VisionInputs:
    """The images of one encoded conversation: pixel values are made per batch (kept small in memory)."""

    images: tuple  # PIL images, in order of appearance
    grid_thw: torch.Tensor  # (images, 3): patches in time, height, width per image
    image_processor: Any
    image_token_id: int

    @property
    def image_tokens(self) -> int:
        return sum(grid_token_count(grid, self.image_processor.merge_size) for grid in self.grid_thw.tolist())


def _image_grids(processor, images: list) -> torch.Tensor:
    """(images, 3) grids by the processor's resize rules, without computing pixel values (a 1080x2400
    screenshot takes ~0.5 s to preprocess; the grid is what the token counts need)."""
    from ..models.processor import image_grid, resize_rules

    rules = resize_rules(processor.image_processor)
    grids = []
    for i, img in enumerate(images, start=1):
        try:
            grids.append(image_grid(img.width, img.height, **rules))
        except ValueError as err:  # e.g. an aspect ratio over 200
            raise ImageSourceError(f"image {i} ({img.width}x{img.height}) cannot be used: {err}") from None
    return torch.tensor(grids, dtype=torch.long).reshape(-1, 3)


def encode_chat(
    processor,
    messages: list[dict],
    max_length: int | None = None,
    add_generation_prompt: bool = False,
    template_kwargs: dict | None = None,
) -> TokenizedExample:
    """Token ids, labels and images of ``messages`` (images already decoded by ``resolve_images``)."""
    images = [
        p["image"] for m in messages if isinstance(m["content"], list) for p in m["content"] if p["type"] == "image"
    ]
    grids = _image_grids(processor, images)
    counts = [grid_token_count(grid, processor.image_processor.merge_size) for grid in grids.tolist()]
    image_token = processor.image_token
    for i, (img, n) in enumerate(zip(images, counts), start=1):
        if max_length is not None and n > max_length:
            raise ValueError(
                f"image {i} ({img.width}x{img.height}) is {n} tokens alone, more than data.max_length="
                f"{max_length}: raise data.max_length or use smaller images"
            )
    pending = iter(counts)

    def image_tokens(_match) -> str:
        count = next(pending, None)
        if count is None:  # e.g. a literal <|image|> typed in the text
            raise ValueError(f"the messages hold more {image_token} placeholders than images ({len(images)})")
        return image_token * count

    def expand(text: str) -> str:  # each <|image|> of the rendered text -> that image's token count, in order
        return re.sub(re.escape(image_token), image_tokens, text)

    tok = processor.tokenizer
    if add_generation_prompt:
        text = expand(
            tok.apply_chat_template(
                messages,
                chat_template=processor.chat_template,
                tokenize=False,
                add_generation_prompt=True,
                **(template_kwargs or {}),
            )
        )
        ids = tok(text, add_special_tokens=False)["input_ids"]
        example = TokenizedExample(ids, [IGNORE_INDEX] * len(ids), False)
    else:
        example = tokenize_messages(
            tok,
            messages,
            max_length if max_length is not None else 1 << 62,
            chat_template=processor.chat_template,
            expand=expand,
        )
    image_token_id = processor.image_token_id
    if images:
        kept = sum(1 for t in example.input_ids if t == image_token_id)
        if kept != sum(counts):
            raise ValueError(
                f"the row is longer than data.max_length={max_length} and truncation would cut its image "
                f"tokens ({kept} of {sum(counts)} kept, {len(images)} image(s)): raise data.max_length, "
                "shorten the text or use smaller images"
            )
        example.vision = VisionInputs(tuple(images), grids, processor.image_processor, image_token_id)
    return example


def vision_batch(input_ids: torch.Tensor, visions: list[VisionInputs]) -> dict[str, torch.Tensor]:
    """Pixel values and grids of the images of ``visions`` (the batch's rows with images, in row order), and
    the token-type ids (1 on image tokens) that GLM-4.1V's 3D rotary positions need."""
    images = [img for v in visions for img in v.images]
    out = visions[0].image_processor(images=images, return_tensors="pt")
    return {
        "pixel_values": out["pixel_values"],
        "image_grid_thw": out["image_grid_thw"],
        "mm_token_type_ids": image_token_types(input_ids, visions[0].image_token_id),
    }


def image_token_types(input_ids: torch.Tensor, image_token_id: int) -> torch.Tensor:
    """The token-type ids of a batch (1 on image tokens): also for sequences that grew past their prompt (a sampled
    completion after a screenshot prompt, which the trainer's forward reads again)."""
    return (input_ids == image_token_id).long()


def count_image_tokens(example: TokenizedExample) -> int:
    return example.vision.image_tokens if example.vision is not None else 0


def encode_prompt(
    tokenizer, messages: list[dict], processor=None, template_kwargs: dict | None = None
) -> TokenizedExample:
    """The prompt a model answers ``messages`` from: the conversation rendered up to the assistant's answer
    (generation prompt), every label ignored. Messages with images (decoded by ``resolve_images``) go through
    ``processor`` (``encode_chat``: image tokens expanded, ``vision`` set); text goes through ``tokenizer``'s chat
    template. The one prompt encoding of in-process answers, the server and the ONNX runner.
    ``template_kwargs`` (e.g. ``enable_thinking``) reach the chat template."""
    if has_images(messages):
        if processor is None:
            raise ValueError(
                "the messages hold images, but the model is text-only (no processor): send text only, "
                "or use a vision-language model"
            )
        return encode_chat(processor, messages, add_generation_prompt=True, template_kwargs=template_kwargs)
    text = tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True, **(template_kwargs or {})
    )
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return TokenizedExample(ids, [IGNORE_INDEX] * len(ids), False)
