"""An action drawn over the screenshot it acted on (no widgets: notebooks and panels use it alike).

``draw_action(image, answer, box)``: the target element's box (0-999 grid) in green, a Tap / Double Tap / Long
Press point as a ring (two rings for Double Tap, a filled dot for Long Press), a Swipe as an arrow from start to
end, in red; an answer that is no point action draws nothing but the box.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from PIL import Image, ImageDraw

from ..phone.openautoglm import reply_action

BOX_COLOR = (0, 200, 0)
ACTION_COLOR = (255, 0, 0)


def draw_action(
    image: Image.Image, answer: str | None, box: Sequence[int] | None = None, scale: int = 1, color=ACTION_COLOR
) -> Image.Image:
    """A copy of ``image`` enlarged ``scale`` times with ``box`` and the action of ``answer`` (a reply, with or
    without <think>/<answer>, or a bare action) drawn on it."""
    img = image.convert("RGB").resize((image.width * scale, image.height * scale), Image.NEAREST)
    d = ImageDraw.Draw(img)
    width = max(2, img.width // 120)
    radius = max(5, img.width // 30)

    def px(point):
        return point[0] * img.width / 1000, point[1] * img.height / 1000

    if box:
        d.rectangle([px(box[:2]), px(box[2:])], outline=BOX_COLOR, width=width)
    action = reply_action(answer)
    if action is None:
        return img
    if action.type in ("Tap", "Double Tap", "Long Press"):
        x, y = px(action.point())
        if action.type == "Long Press":
            d.ellipse([x - radius / 2, y - radius / 2, x + radius / 2, y + radius / 2], fill=color)
        rings = 2 if action.type == "Double Tap" else 1
        for k in range(rings):
            r = radius + k * (width + 3)
            d.ellipse([x - r, y - r, x + r, y + r], outline=color, width=width)
    elif action.type == "Swipe":
        (x1, y1), (x2, y2) = px(action.point("start")), px(action.point("end"))
        d.line([(x1, y1), (x2, y2)], fill=color, width=width)
        angle = math.atan2(y2 - y1, x2 - x1)
        for side in (-1, 1):  # the arrow head at the end
            a = angle + math.pi + side * math.pi / 7
            d.line([(x2, y2), (x2 + radius * math.cos(a), y2 + radius * math.sin(a))], fill=color, width=width)
    return img
