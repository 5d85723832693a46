"""Every installed app without pages of its own (``APP_PAGES`` names those): a screen of placeholder cards that
says so; nothing on it does anything."""

from __future__ import annotations

from ..screen import Screen
from .common import App, AppHost, Page, Theme, title_bar

CARD_TOP, CARD_HEIGHT, CARD_PITCH = 180, 150, 170


def draw(phone: AppHost, s: Screen, page: Page, t: Theme) -> None:
    title_bar(phone, s, t, phone.app, back=False)
    for i in range(4):
        y = CARD_TOP + i * CARD_PITCH
        s.rect((30, y, 970, y + CARD_HEIGHT), t.card, radius=20)
        s.rect((60, y + 30, 150, y + 120), t.line, radius=12)
        s.rect((180, y + 45, 700 - 80 * i, y + 70), t.line)
        s.rect((180, y + 95, 560, y + 110), t.line)
    s.text((500, 900), f"{phone.app} has nothing to do in this simulator", 22, t.sub, anchor="mm")


APP = App(draw)
