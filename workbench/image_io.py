"""Image I/O, for everyone who reads, decodes or encodes a screenshot: files and ``data:`` URLs in, PIL images out,
PNG bytes and base64 ``data:`` URLs back. The phone, the agent, the data loader, the server and the panels use it;
turning messages with images into model inputs is ``workbench.data.multimodal``'s.

* ``ImageSourceError`` (a ValueError): why an image reference cannot be used, in words a user can act on.
  The data loader adds ``file:line``; the server answers it as a 400.
* ``load_image(url, base_dir=None, allow_local_files=True)`` -> an RGB ``PIL.Image``: a ``data:`` URL
  (base64) or a file path (relative to ``base_dir``: the JSONL file's folder). Remote ``http(s)`` URLs are
  refused and never fetched; local paths are refused when ``allow_local_files`` is False (the server's default).
  ``image_from_bytes(data)``: an RGB image from encoded bytes (a PNG screenshot); ``url_scheme(url)``: a URL's
  scheme, "" for a file path.
* ``image_data_url(source, name=None)``: an image file's (or raw bytes') base64 ``data:`` URL, what an OpenAI
  client sends; ``inline_images(messages, base_dir=None)``: the messages with every image part's file path read
  here and sent inline that way (how rows become requests any OpenAI-compatible server accepts).
* ``png_bytes(image)``: a screenshot (a PIL image or an HxWx3 array) as PNG bytes, the one PNG encoder;
  ``thumbnail_png(image, box, colors=None)``: a PIL image shrunk into ``box`` as PNG bytes;
  ``last_image_url(messages)``: the url of the conversation's latest image part (None without one).
* ``resolve_images(messages, base_dir=None, allow_local_files=True)``: the messages with every image part
  decoded to ``{"type": "image", "image": PIL.Image}`` (what ``data.multimodal.encode_chat`` takes).
"""

from __future__ import annotations

import base64
import binascii
import io
import mimetypes
import re
from pathlib import Path
from typing import Any

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


def url_scheme(url: str) -> str:
    """The scheme of ``url`` in lower case (``data``, ``http``, ...); "" for a file path (``C:\\...`` included)."""
    match = _SCHEME.match(url)
    return match.group(1).lower() if match and len(match.group(1)) > 1 else ""


class ImageSourceError(ValueError):
    """An image reference that cannot be used, and why (no traceback: the reason is the message)."""


def load_image(url: Any, base_dir: str | Path | None = None, allow_local_files: bool = True):
    """An RGB image from a ``data:`` URL or a local file path; ImageSourceError saying why not."""
    from PIL import Image, UnidentifiedImageError

    if not isinstance(url, str) or not url.strip():
        raise ImageSourceError(f"an image URL must be a non-empty string, got {url!r}")
    scheme = url_scheme(url)
    shown = url if len(url) <= 80 else url[:77] + "..."
    if scheme in ("http", "https"):
        raise ImageSourceError(
            f"remote image URLs are not fetched ({shown}): send the image inline as a base64 data: URL"
        )
    if scheme == "data":
        data, where = _decode_data_url(url), "the data: URL"
        source = io.BytesIO(data)
    elif scheme:
        raise ImageSourceError(
            f"unsupported image URL scheme {scheme!r} ({shown}): use a base64 data: URL or a file path"
        )
    else:
        if not allow_local_files:
            raise ImageSourceError(
                f"local image paths are not accepted here ({shown}): send the image inline as a base64 data: URL"
            )
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
        reason = (
            "not an image PIL can read" if isinstance(err, UnidentifiedImageError) else str(err) or type(err).__name__
        )
        raise ImageSourceError(f"cannot read the image in {where}: {reason}") from None


def image_from_bytes(data: bytes):
    """An RGB ``PIL.Image`` from an encoded image's bytes (a PNG screenshot), read whole."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as img:
        img.load()
        return img.convert("RGB")


def image_data_url(source: str | Path | bytes, name: str | None = None) -> str:
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


def thumbnail_png(image, box: tuple[int, int], colors: int | None = None) -> bytes:
    """A PIL image shrunk to fit ``box`` (width, height; aspect kept, never enlarged) as PNG bytes: a preview;
    ``colors`` makes it a palette image of that many colours (a third of the bytes for a screenshot)."""
    small = image.copy()
    small.thumbnail(box)
    return png_bytes(small.quantize(colors) if colors else small, optimize=True)


def last_image_url(messages: list[dict]) -> str | None:
    """The url of the conversation's last image part (the latest screenshot), None when it has none."""
    urls = [
        p["image_url"]["url"]
        for m in messages
        if isinstance(m.get("content"), list)
        for p in m["content"]
        if isinstance(p, dict) and p.get("type") == "image_url"
    ]
    return urls[-1] if urls else None


def inline_images(messages: list[dict], base_dir: str | Path | None = None, cache: dict | None = None) -> list[dict]:
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


def _file_data_url(url: Any, base_dir: str | Path | None, cache: dict) -> str:
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
        raise ImageSourceError(
            f"a data: URL of media type {media[0] or '(none)'!r} is not an image: use image/png or image/jpeg"
        )
    if "base64" not in [m.lower() for m in media[1:]]:
        raise ImageSourceError("an image data: URL must be base64 encoded (data:image/png;base64,...)")
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise ImageSourceError("the data: URL's payload is not valid base64") from None


def resolve_images(
    messages: list[dict], base_dir: str | Path | None = None, allow_local_files: bool = True
) -> list[dict]:
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
