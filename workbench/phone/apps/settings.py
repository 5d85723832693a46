"""Settings: its list (the switches kept on the first page, then the sub-pages), and each sub-page (Display, Sound,
Battery, About phone) with its switches and a few lines of information. A tap on a switch's row flips it."""

from __future__ import annotations

from ..screen import Screen
from ..state import SETTINGS_APP, SETTINGS_PAGES, TOGGLES
from .common import LIST_TOP, App, AppHost, Page, Theme, title_bar

ROW_HEIGHT, ROW_PITCH = 85, 95  # a row of the list and from one row to the next
ROW_LEFT, ROW_RIGHT = 30, 970
SWITCH_LEFT, SWITCH_RIGHT = 820, 930  # a switch's track; its knob slides from 820 (off) to 888 (on)
ON_GREEN, OFF_GREY = (52, 168, 83), (170, 170, 175)
INFO = {
    "Sound": ["Ringtone: Chimes", "Volume: 60%"],
    "Battery": ["Battery: 82%", "About 14 h left"],
    "Display": ["Screen timeout: 1 minute"],
    "About phone": ["Model: Workbench Phone", "Android version: 14", "Build: WB.2026.12"],
}


def flip(phone: AppHost, key: str) -> str:
    phone.state.toggles[key] = not phone.state.toggles[key]
    return f"turned {TOGGLES[key][0]} {'on' if phone.state.toggles[key] else 'off'}"


def _toggle_row(phone: AppHost, s: Screen, t: Theme, y: int, key: str) -> None:
    label, on = TOGGLES[key][0], phone.state.toggles[key]
    s.rect(
        (ROW_LEFT, y, ROW_RIGHT, y + ROW_HEIGHT),
        t.card,
        radius=18,
        outline=t.line,
        element=label,
        tap=lambda k=key: flip(phone, k),
    )
    s.text((70, y + 42), label, 30, t.fg, anchor="lm")
    s.rect((SWITCH_LEFT, y + 22, SWITCH_RIGHT, y + 64), ON_GREEN if on else OFF_GREY, radius=21)
    knob = 888 if on else SWITCH_LEFT
    s.rect((knob + 4, y + 26, knob + 38, y + 60), (255, 255, 255), radius=17)
    s.text((800, y + 42), "On" if on else "Off", 22, t.sub, anchor="rm")


def draw(phone: AppHost, s: Screen, page: Page, t: Theme) -> None:
    if page.kind == "root":
        title_bar(phone, s, t, SETTINGS_APP, back=False)
        rows = list(phone.state.contents.perturbation.settings_order) or [
            k for k, (_, where) in TOGGLES.items() if where == "Settings"
        ] + list(SETTINGS_PAGES)
        for i, row in enumerate(rows):
            y = LIST_TOP + i * ROW_PITCH
            if row in TOGGLES:
                _toggle_row(phone, s, t, y, row)
            else:
                s.rect(
                    (ROW_LEFT, y, ROW_RIGHT, y + ROW_HEIGHT),
                    t.card,
                    radius=18,
                    outline=t.line,
                    element=row,
                    tap=lambda r=row: phone.push(Page(r)),
                )
                s.text((70, y + 42), row, 30, t.fg, anchor="lm")
                s.text((930, y + 42), ">", 30, t.sub, anchor="rm")
        return
    title_bar(phone, s, t, page.kind, back=True)
    y = LIST_TOP
    for key in [k for k, (_, where) in TOGGLES.items() if where == page.kind]:
        _toggle_row(phone, s, t, y, key)
        y += ROW_PITCH
    for line in INFO[page.kind]:
        s.rect((ROW_LEFT, y, ROW_RIGHT, y + ROW_HEIGHT), t.card, radius=18, outline=t.line)
        s.text((70, y + 42), line, 28, t.sub, anchor="lm")
        y += ROW_PITCH


APP = App(draw)
