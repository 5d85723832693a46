"""A phone screen as drawing operations on AutoGLM-Phone's 0-999 grid, drawn with PIL at any resolution.

A ``Screen`` is a list of rectangles and texts in grid units plus its named elements (the boxes a Tap can hit),
so the same screen is the same task at 112x252 and at 1080x2400: only the pixels change. The simulated phone
(``workbench.phone.sim``) builds one per state; ``data_samples/make_phone_screens.py`` builds its sample screens
with it. Elements may carry what Tap, Long Press and Double Tap do on them (``handlers``); the drawing ignores them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

from PIL import Image, ImageDraw, ImageFont

GRID = 1000  # grid units per axis when drawing; action coordinates are 0..999

Box = tuple[int, int, int, int]
Color = tuple[int, int, int]


def parse_size(text: str) -> tuple[int, int]:
    """``"1080x2400"`` -> (1080, 2400); ValueError saying what to give. A side under 28 pixels is refused: it is less
    than one merged image patch of GLM-4.1V's processor."""
    try:
        width, height = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"{text!r}: give WIDTHxHEIGHT in pixels, e.g. 1080x2400") from None
    if min(width, height) < 28:
        raise ValueError(f"{text!r}: each side must be at least 28 pixels (one merged image patch)")
    return width, height


@functools.lru_cache(maxsize=64)
def _font(size_px: float):
    return ImageFont.load_default(size=size_px)


@dataclass
class Handlers:
    """What a gesture on an element does: each a callable taking no argument (the phone binds its state)."""

    tap: Callable[[], None] | None = None
    long_press: Callable[[], None] | None = None
    double_tap: Callable[[], None] | None = None


@dataclass
class Screen:
    name: str
    background: Color = (245, 245, 247)
    ops: list[tuple] = field(default_factory=list)
    elements: dict[str, Box] = field(default_factory=dict)  # label -> box, in drawing order
    handlers: dict[str, Handlers] = field(default_factory=dict)
    keyboard: bool = False  # the on-screen keyboard is up (a text field has the focus)

    def rect(
        self,
        box: Box,
        fill: Color,
        radius: int = 0,
        outline: Color | None = None,
        element: str | None = None,
        **gestures,
    ) -> None:
        """A filled rectangle; ``element`` names it as a target, ``tap=``/``long_press=``/``double_tap=`` say what
        those gestures do on it."""
        self.ops.append(("rect", box, fill, radius, outline))
        if element:
            self.elements[element] = box
            if gestures:
                self.handlers[element] = Handlers(**gestures)

    def text(self, xy: tuple[int, int], text: str, size: int, fill: Color = (20, 20, 20), anchor: str = "la") -> None:
        self.ops.append(("text", xy, text, size, fill, anchor))

    def rename(self, old: str, new: str) -> None:
        """Call the element ``old`` ``new`` (in its place in the drawing order, with what its gestures do) and draw
        every text that reads exactly ``old`` as ``new``."""
        if old in self.elements:
            self.elements = {new if name == old else name: box for name, box in self.elements.items()}
            if old in self.handlers:
                self.handlers = {new if name == old else name: h for name, h in self.handlers.items()}
        self.ops = [op[:2] + (new,) + op[3:] if op[0] == "text" and op[2] == old else op for op in self.ops]

    def hit(self, point: tuple[int, int]) -> str | None:
        """The element under ``point``: the last drawn (topmost) whose box holds it; None when none does."""
        for name in reversed(list(self.elements)):
            x1, y1, x2, y2 = self.elements[name]
            if x1 <= point[0] <= x2 and y1 <= point[1] <= y2:
                return name
        return None

    def draw(self, size: tuple[int, int]) -> Image.Image:
        w, h = size
        img = Image.new("RGB", size, self.background)
        d = ImageDraw.Draw(img)
        px = lambda x, y: (round(x * w / GRID), round(y * h / GRID))  # noqa: E731
        for op in self.ops:
            if op[0] == "rect":
                _, (x1, y1, x2, y2), fill, radius, outline = op
                a, b = px(x1, y1), px(x2, y2)
                r = round(radius * w / GRID)
                d.rounded_rectangle(
                    [a, (max(a[0], b[0] - 1), max(a[1], b[1] - 1))], radius=r, fill=fill, outline=outline
                )
            else:
                _, (x, y), text, size_units, fill, anchor = op
                d.text(px(x, y), text, fill=fill, font=_font(max(4, size_units * h / GRID)), anchor=anchor)
        return img


def status_bar(s: Screen, dark: bool = False, clock: str = "9:41") -> None:
    fg = (250, 250, 250) if dark else (30, 30, 30)
    s.text((40, 12), clock, 18, fg)
    s.rect((860, 16, 950, 34), fg, radius=4)


KEYBOARD_TOP = 700  # the on-screen keyboard covers y 700..1000 while a text field is focused


def keyboard(s: Screen, enter: Callable[[], None] | None = None, enter_label: str = "") -> None:
    """The on-screen keyboard (its letter keys are drawn, not targets: text comes with Type). ``enter`` makes its
    action key (bottom right, ``enter_label``) a target."""
    s.keyboard = True
    s.rect((0, KEYBOARD_TOP, 1000, 1000), (209, 212, 217))
    for r, row in enumerate(["qwertyuiop", "asdfghjkl", "zxcvbnm"]):
        width = 1000 // 10
        x0 = (1000 - width * len(row)) // 2
        for c, ch in enumerate(row):
            x1, y1 = x0 + c * width + 6, 712 + r * 72
            s.rect((x1, y1, x1 + width - 12, y1 + 62), (255, 255, 255), radius=8)
            s.text((x1 + (width - 12) // 2, y1 + 31), ch, 22, anchor="mm")
    s.rect((250, 932, 750, 988), (255, 255, 255), radius=8)
    if enter is not None:
        s.rect((780, 932, 990, 988), (26, 115, 232), radius=8, element=enter_label, tap=enter)
        s.text((885, 960), enter_label, 22, (255, 255, 255), anchor="mm")
