"""Chat messages with images -> model inputs: one path for training rows and for served requests.

Messages are OpenAI-style. A message's ``content`` is a string or a list of parts::

    {"type": "text", "text": "..."}
    {"type": "image_url", "image_url": {"url": "screens/home.png" | "data:image/png;base64,..."}}

(training rows may also use the shortcut ``"images": ["a.png"]`` with ``<image>`` placeholders in the text:
``workbench.data.formats``). The processor is ``workbench.models.processor.load_processor``'s.

API
* ``ImageSourceError`` (a ValueError): why an image reference cannot be used, in words a user can act on.
  The data loader adds ``file:line``; the server answers it as a 400.
* ``load_image(url, base_dir=None, allow_local_files=True)`` -> an RGB ``PIL.Image``: a ``data:`` URL
  (base64) or a file path (relative to ``base_dir``: the JSONL file's folder). Remote ``http(s)`` URLs are
  refused and never fetched; local paths are refused when ``allow_local_files`` is False (the server's default).
* ``image_data_url(source, name=None)``: an image file's (or raw bytes') base64 ``data:`` URL, what an OpenAI
  client sends; ``inline_images(messages, base_dir=None)``: the messages with every image part's file path read
  here and sent inline that way (how rows become requests any OpenAI-compatible server accepts).
* ``png_bytes(image)``: a screenshot (a PIL image or an HxWx3 array) as PNG bytes, the one PNG encoder;
  ``thumbnail_png(image, box, colors=None)``: a PIL image shrunk into ``box`` as PNG bytes;
  ``last_image_url(messages)``: the url of the conversation's latest image part (None without one).
* ``content_parts(content)``: validates a message's content and returns it as a string or a list of
  normalised parts (text / image_url); ValueError saying what is wrong.
* ``resolve_images(messages, base_dir=None, allow_local_files=True)``: the messages with every image part
  decoded to ``{"type": "image", "image": PIL.Image}`` (what ``encode_chat`` takes).
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

import base64
import binascii
import io
import mimetypes
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import torch

from ..models.processor import grid_token_count
from .tokenize import IGNORE_INDEX, TokenizedExample, tokenize_messages

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
PART_TYPES = ("text", "image_url")


class ImageSourceError(ValueError):
    """An image reference that cannot be used, and why (no traceback: the reason is the message)."""


def load_image(url: Any, base_dir: Optional[str | Path] = None, allow_local_files: bool = True):
    """An RGB image from a ``data:`` URL or a local file path; ImageSourceError saying why not."""
    from PIL import Image, UnidentifiedImageError

    if not isinstance(url, str) or not url.strip():
        raise ImageSourceError(f"an image URL must be a non-empty string, got {url!r}")
    match = _SCHEME.match(url)
    scheme = match.group(1).lower() if match and len(match.group(1)) > 1 else ""  # "C:\..." is a path
    shown = url if len(url) <= 80 else url[:77] + "..."
    if scheme in ("http", "https"):
        raise ImageSourceError(f"remote image URLs are not fetched ({shown}): send the image inline as a "
                               "base64 data: URL")
    if scheme == "data":
        data, where = _decode_data_url(url), "the data: URL"
        source = io.BytesIO(data)
    elif scheme:
        raise ImageSourceError(f"unsupported image URL scheme {scheme!r} ({shown}): use a base64 data: URL or a file path")
    else:
        if not allow_local_files:
            raise ImageSourceError(f"local image paths are not accepted here ({shown}): send the image inline as a "
                                   "base64 data: URL")
        path = Path(url)
        if not path.is_absolute() and base_dir is not None:
            path = Path(base_dir) / path
        if not path.is_file():
            what = "is a directory" if path.is_dir() else "not found"
            raise ImageSourceError(f"image file {what}: {path} (paths are relative to the JSONL file's folder)")
        source, where = path, str(path)
    try:
        with Image.open(source) as img:
            img.load()
            return img.convert("RGB")
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as err:
        reason = "not an image PIL can read" if isinstance(err, UnidentifiedImageError) else str(err) or type(err).__name__
        raise ImageSourceError(f"cannot read the image in {where}: {reason}") from None


def image_data_url(source: "str | Path | bytes", name: Optional[str] = None) -> str:
    """An image as a base64 ``data:`` URL (what OpenAI-compatible servers accept by default): a data: URL as is,
    a file's or raw bytes (``name`` or the path gives the media type; PNG when unknown)."""
    if isinstance(source, str) and source.startswith("data:"):
        return source
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
    else:
        data, name = Path(source).read_bytes(), name or str(source)
    media = mimetypes.guess_type(name or "")[0] if name else None
    media = media if media and media.startswith("image/") else "image/png"
    return f"data:{media};base64,{base64.b64encode(data).decode()}"


def png_bytes(image, optimize: bool = False) -> bytes:
    """PNG bytes of an image (a PIL image or an HxWx3 uint8 array). ``optimize``: smaller, slower to write."""
    from PIL import Image

    image = image if isinstance(image, Image.Image) else Image.fromarray(image)
    buf = io.BytesIO()
    image.save(buf, format="PNG", optimize=optimize)
    return buf.getvalue()


def thumbnail_png(image, box: tuple[int, int], colors: Optional[int] = None) -> bytes:
    """A PIL image shrunk to fit ``box`` (width, height; aspect kept, never enlarged) as PNG bytes: a preview;
    ``colors`` makes it a palette image of that many colours (a third of the bytes for a screenshot)."""
    small = image.copy()
    small.thumbnail(box)
    return png_bytes(small.quantize(colors) if colors else small, optimize=True)


def last_image_url(messages: list[dict]) -> Optional[str]:
    """The url of the conversation's last image part (the latest screenshot), None when it has none."""
    urls = [p["image_url"]["url"] for m in messages if isinstance(m.get("content"), list)
            for p in m["content"] if isinstance(p, dict) and p.get("type") == "image_url"]
    return urls[-1] if urls else None


def inline_images(messages: list[dict], base_dir: Optional[str | Path] = None,
                  cache: Optional[dict] = None) -> list[dict]:
    """The messages with every image part's url a base64 data: URL: a file path (relative to ``base_dir``, the
    JSONL file's folder) is read here, as an OpenAI client would, because a server must not read files on a
    client's behalf (ours refuses by default, as vLLM does); data: URLs are kept. ImageSourceError (naming the
    image's position and why) for a missing file or a remote URL, which is never fetched. ``cache`` (path -> URL)
    shares one string among the rows showing the same screenshot."""
    cache = {} if cache is None else cache
    out, n = [], 0
    for m in messages:
        if not isinstance(m.get("content"), list):
            out.append(m)
            continue
        parts = []
        for p in m["content"]:
            if isinstance(p, dict) and p.get("type") == "image_url":
                n += 1
                image = p["image_url"]
                url = image.get("url") if isinstance(image, dict) else image
                if not (isinstance(url, str) and url.startswith("data:")):
                    try:
                        url = _file_data_url(url, base_dir, cache)
                    except ImageSourceError as err:
                        raise ImageSourceError(f"image {n}: {err}") from None
                p = {**p, "image_url": {**(image if isinstance(image, dict) else {}), "url": url}}
            parts.append(p)
        out.append({**m, "content": parts})
    return out


def _file_data_url(url: Any, base_dir: Optional[str | Path], cache: dict) -> str:
    key = (str(base_dir), url)
    if key not in cache:
        load_image(url, base_dir)  # checks it: a remote URL, a missing file or no image says why, here
        path = Path(url)
        cache[key] = image_data_url(path if path.is_absolute() or base_dir is None else Path(base_dir) / path)
    return cache[key]


def _decode_data_url(url: str) -> bytes:
    head, sep, payload = url.partition(",")
    if not sep:
        raise ImageSourceError("a data: URL needs a comma before its data (data:image/png;base64,...)")
    media = head[5:].split(";")
    if not media[0].lower().startswith("image/"):
        raise ImageSourceError(f"a data: URL of media type {media[0] or '(none)'!r} is not an image: use image/png or image/jpeg")
    if "base64" not in [m.lower() for m in media[1:]]:
        raise ImageSourceError("an image data: URL must be base64 encoded (data:image/png;base64,...)")
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise ImageSourceError("the data: URL's payload is not valid base64") from None


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
            raise ValueError(f"{at} is {type(part).__name__}, not a part object ({{\"type\": \"text\", ...}})")
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


def resolve_images(messages: list[dict], base_dir: Optional[str | Path] = None,
                   allow_local_files: bool = True) -> list[dict]:
    """The messages with image_url parts decoded (ImageSourceError naming the image's position)."""
    out, n = [], 0
    for m in messages:
        if not isinstance(m["content"], list):
            out.append(m)
            continue
        parts = []
        for p in m["content"]:
            if p["type"] == "image_url":
                n += 1
                try:
                    p = {"type": "image", "image": load_image(p["image_url"]["url"], base_dir, allow_local_files)}
                except ImageSourceError as err:
                    raise ImageSourceError(f"image {n}: {err}") from None
            parts.append(p)
        out.append({**m, "content": parts})
    return out


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


def encode_chat(processor, messages: list[dict], max_length: Optional[int] = None,
                add_generation_prompt: bool = False, template_kwargs: Optional[dict] = None) -> TokenizedExample:
    """Token ids, labels and images of ``messages`` (images already decoded by ``resolve_images``)."""
    images = [p["image"] for m in messages if isinstance(m["content"], list) for p in m["content"] if p["type"] == "image"]
    grids = _image_grids(processor, images)
    counts = [grid_token_count(grid, processor.image_processor.merge_size) for grid in grids.tolist()]
    image_token = processor.image_token
    for i, (img, n) in enumerate(zip(images, counts), start=1):
        if max_length is not None and n > max_length:
            raise ValueError(f"image {i} ({img.width}x{img.height}) is {n} tokens alone, more than data.max_length="
                             f"{max_length}: raise data.max_length or use smaller images")
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
        text = expand(tok.apply_chat_template(messages, chat_template=processor.chat_template, tokenize=False,
                                              add_generation_prompt=True, **(template_kwargs or {})))
        ids = tok(text, add_special_tokens=False)["input_ids"]
        example = TokenizedExample(ids, [IGNORE_INDEX] * len(ids), False)
    else:
        example = tokenize_messages(tok, messages, max_length if max_length is not None else 1 << 62,
                                    chat_template=processor.chat_template, expand=expand)
    image_token_id = processor.image_token_id
    if images:
        kept = sum(1 for t in example.input_ids if t == image_token_id)
        if kept != sum(counts):
            raise ValueError(f"the row is longer than data.max_length={max_length} and truncation would cut its image "
                             f"tokens ({kept} of {sum(counts)} kept, {len(images)} image(s)): raise data.max_length, "
                             "shorten the text or use smaller images")
        example.vision = VisionInputs(tuple(images), grids, processor.image_processor, image_token_id)
    return example


def vision_batch(input_ids: torch.Tensor, visions: list[VisionInputs]) -> dict[str, torch.Tensor]:
    """Pixel values and grids of the images of ``visions`` (the batch's rows with images, in row order), and
    the token-type ids (1 on image tokens) that GLM-4.1V's 3D rotary positions need."""
    images = [img for v in visions for img in v.images]
    out = visions[0].image_processor(images=images, return_tensors="pt")
    return {"pixel_values": out["pixel_values"], "image_grid_thw": out["image_grid_thw"],
            "mm_token_type_ids": image_token_types(input_ids, visions[0].image_token_id)}


def image_token_types(input_ids: torch.Tensor, image_token_id: int) -> torch.Tensor:
    """The token-type ids of a batch (1 on image tokens): also for sequences that grew past their prompt (a sampled
    completion after a screenshot prompt, which the trainer's forward reads again)."""
    return (input_ids == image_token_id).long()


def count_image_tokens(example: TokenizedExample) -> int:
    return example.vision.image_tokens if example.vision is not None else 0


def encode_prompt(tokenizer, messages: list[dict], processor=None, template_kwargs: Optional[dict] = None) -> TokenizedExample:
    """The prompt a model answers ``messages`` from: the conversation rendered up to the assistant's answer
    (generation prompt), every label ignored. Messages with images (decoded by ``resolve_images``) go through
    ``processor`` (``encode_chat``: image tokens expanded, ``vision`` set); text goes through ``tokenizer``'s chat
    template. The one prompt encoding of in-process answers, the server and the ONNX runner.
    ``template_kwargs`` (e.g. ``enable_thinking``) reach the chat template."""
    if has_images(messages):
        if processor is None:
            raise ValueError("the messages hold images, but the model is text-only (no processor): send text only, "
                             "or use a vision-language model")
        return encode_chat(processor, messages, add_generation_prompt=True, template_kwargs=template_kwargs)
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **(template_kwargs or {}))
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return TokenizedExample(ids, [IGNORE_INDEX] * len(ids), False)
