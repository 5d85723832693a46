"""The home screen (the launcher): the installed apps' icons, ``APPS_PER_PAGE`` a page in a grid of four columns,
the page dots; a horizontal swipe turns the page (``SimPhone``), a tap on an icon opens its app."""

from __future__ import annotations

from ..openautoglm import HOME
from ..screen import Screen, status_bar
from ..state import APPS_PER_PAGE
from .common import ICON_COLORS, WHITE, AppHost, status_text

ICON_COLUMNS = 4
ICON_LEFT, ICON_TOP = 50, 260  # the first icon's top left
ICON_SIZE = (195, 105)  # an icon's width and height
ICON_PITCH = (235, 200)  # from one icon to the next across and down
PAGE_DOTS_Y = 900


def pages(phone: AppHost) -> int:
    """How many home pages the installed apps fill."""
    return (len(phone.state.contents.apps) + APPS_PER_PAGE - 1) // APPS_PER_PAGE


def icon_box(k: int) -> tuple[int, int, int, int]:
    """The box of the ``k``-th icon of a home page."""
    col, row = k % ICON_COLUMNS, k // ICON_COLUMNS
    x1, y1 = ICON_LEFT + col * ICON_PITCH[0], ICON_TOP + row * ICON_PITCH[1]
    return x1, y1, x1 + ICON_SIZE[0], y1 + ICON_SIZE[1]


def draw(phone: AppHost) -> Screen:
    p = phone.home_page
    s = Screen(f"{HOME}:{p}", background=(34 + 20 * p, 64, 110 - 20 * p))
    status_bar(s, dark=True, clock=status_text(phone.state))
    s.text((500, 110), "9:41", 80, WHITE, anchor="mm")
    s.text((500, 175), "Tuesday, December 1", 24, (230, 230, 240), anchor="mm")
    apps = phone.state.contents.apps
    for k, app in enumerate(apps[p * APPS_PER_PAGE : (p + 1) * APPS_PER_PAGE]):
        box = icon_box(k)
        s.rect(
            box,
            ICON_COLORS[apps.index(app) % len(ICON_COLORS)],
            radius=40,
            element=app,
            tap=lambda a=app: phone.open_app(a),
        )
        s.text(((box[0] + box[2]) // 2, (box[1] + box[3]) // 2), app[0], 44, WHITE, anchor="mm")
        # a long name in a smaller font, as a launcher fits it under its icon (12 characters at 20)
        s.text(((box[0] + box[2]) // 2, box[3] + 14), app, min(20, 240 // max(1, len(app))), WHITE, anchor="ma")
    count = pages(phone)
    for i in range(count):  # page dots
        x = 500 + (i - (count - 1) / 2) * 40
        s.rect((int(x) - 8, PAGE_DOTS_Y, int(x) + 8, PAGE_DOTS_Y + 16), WHITE if i == p else (140, 150, 170), radius=8)
    s.text((500, 950), "Swipe left or right for more apps", 18, (220, 220, 230), anchor="mm")
    return s
