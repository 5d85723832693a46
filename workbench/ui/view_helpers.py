"""Plain-Python helpers of the panels (no widgets): a redraw throttle, and the chat panel's image (the picker widget
only shows it)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path


class Throttle:
    """At most one action per ``interval`` seconds: ``ready()`` says whether to act now."""

    def __init__(self, interval: float, clock=time.monotonic):
        self.interval = interval
        self.clock = clock
        self.last = -math.inf

    def ready(self) -> bool:
        now = self.clock()
        if now - self.last >= self.interval:
            self.last = now
            return True
        return False


@dataclass(frozen=True)
class ChatImage:
    """An image to send with a chat prompt: the base64 data: URL every compared model gets, its size, and a
    small PNG thumbnail to show. Built only from images the server's decoder reads (``load_image``), so a
    picked file that is no image is refused here, with the reason, before anything is sent."""

    name: str
    data_url: str
    width: int
    height: int
    thumbnail: bytes  # PNG, at most THUMBNAIL_SIDE pixels on its longer side

    THUMBNAIL_SIDE = 160

    @classmethod
    def from_source(cls, source: str | Path | bytes, name: str | None = None) -> ChatImage:
        """From a file path or an upload's bytes (``name``: its file name); ValueError saying why not."""
        from ..image_io import load_image, thumbnail_png
        from ..serve.client import image_data_url

        raw = isinstance(source, (bytes, bytearray, memoryview))
        label = name or ("upload" if raw else Path(source).name)
        try:
            url = image_data_url(source, name)
            image = load_image(url, allow_local_files=False)
        except OSError as err:
            raise ValueError(f"cannot read {label}: {err.strerror or err}") from None
        except ValueError as err:  # ImageSourceError: e.g. not an image
            raise ValueError(f"{label}: {err}") from None
        return cls(
            label, url, image.width, image.height, thumbnail_png(image, (cls.THUMBNAIL_SIDE, cls.THUMBNAIL_SIDE))
        )


def sample_screenshots() -> dict[str, Path]:
    """The sample phone screenshots (data_samples/phone_screens/images), by file name."""
    from ..config.samples import sample_path

    folder = sample_path("phone_screens", "images")
    return {p.name: p for p in sorted(folder.glob("*.png"))} if folder.is_dir() else {}
