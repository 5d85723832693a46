"""The messenger (Telegram): the conversations (a row each, the last message under the name; it scrolls), and a
chat: the messages, newest at the bottom, the message box (a tap focuses it and opens the keyboard) and Send."""

from __future__ import annotations

from ..screen import KEYBOARD_TOP, Screen, keyboard
from ..state import MESSAGES_APP
from .common import GREEN, LIST_BOTTOM, LIST_TOP, App, AppHost, Page, Theme, list_rows, title_bar

ROW_HEIGHT = 100  # a conversation's row
BUBBLE_HEIGHT, BUBBLE_PITCH = 80, 100  # a message and from one to the one above it
MINE, THEIRS = (380, 960), (40, 620)  # a bubble's left and right: my messages on the right
MINE_GREEN, FOCUS_BLUE = (149, 236, 105), (66, 133, 244)
BOX_TOP, BOX_TOP_TYPING = 880, KEYBOARD_TOP - 110  # the message box's top, keyboard closed / open
BOX_HEIGHT, BOX_LEFT, BOX_RIGHT = 90, 40, 770
SEND_LEFT, SEND_RIGHT = 790, 960


def send(phone: AppHost, name: str) -> str | None:
    text = phone.drafts.get("chat", "").strip()
    if not text:
        return None  # nothing typed: the Send button does nothing (an invalid tap)
    phone.state.threads.setdefault(name, []).append(("me", text))
    phone.drafts["chat"] = ""
    phone.focus = None
    return f"sent {text!r} to {name}"


def _list(phone: AppHost, s: Screen, page: Page, t: Theme) -> None:
    names = list(phone.state.threads)
    for i, y in list_rows(page, len(names), ROW_HEIGHT):
        name = names[i]
        last = phone.state.threads[name][-1][1] if phone.state.threads[name] else ""
        s.rect(
            (20, y + 5, 980, y + 95), t.card, radius=14, element=name, tap=lambda n=name: phone.push(Page("chat", n))
        )
        s.text((60, y + 32), name, 30, t.fg, anchor="lm")
        s.text((60, y + 70), last[:40], 22, t.sub, anchor="lm")
    title_bar(phone, s, t, MESSAGES_APP, back=False)


def _chat(phone: AppHost, s: Screen, page: Page, t: Theme) -> None:
    name = page.arg
    title_bar(phone, s, t, name, back=True)
    focused = phone.focus == "chat"
    box_top = BOX_TOP_TYPING if focused else BOX_TOP
    thread = phone.state.threads.get(name, [])
    y = box_top - 20
    for sender, text in reversed(thread):  # newest at the bottom, older above while they fit
        y -= BUBBLE_PITCH
        if y < LIST_TOP:
            break
        mine = sender == "me"
        left, right = MINE if mine else THEIRS
        box = (left, y, right, y + BUBBLE_HEIGHT)
        s.rect(box, MINE_GREEN if mine else t.card, radius=18)
        s.text((box[0] + 25, y + 40), text[:34], 26, (20, 20, 20) if mine else t.fg, anchor="lm")
    if not thread:
        s.text((500, 400), f"No messages with {name} yet", 26, t.sub, anchor="mm")
    draft = phone.drafts.get("chat", "")
    s.rect((0, box_top - 10, 1000, box_top + 100), t.bg)
    s.rect(
        (BOX_LEFT, box_top, BOX_RIGHT, box_top + BOX_HEIGHT),
        t.card,
        radius=16,
        outline=FOCUS_BLUE if focused else t.line,
        element="Message box",
        tap=lambda: phone.focus_field("chat"),
    )
    shown = (draft + "|") if focused else (draft or "Message")
    s.text((70, box_top + 45), shown[-30:], 26, t.fg if draft else t.sub, anchor="lm")
    s.rect(
        (SEND_LEFT, box_top, SEND_RIGHT, box_top + BOX_HEIGHT),
        GREEN,
        radius=16,
        element="Send",
        tap=lambda: send(phone, name),
    )
    s.text((875, box_top + 45), "Send", 26, (255, 255, 255), anchor="mm")
    if focused:
        keyboard(s)


def draw(phone: AppHost, s: Screen, page: Page, t: Theme) -> None:
    (_list if page.kind == "root" else _chat)(phone, s, page, t)


def rows(phone: AppHost, page: Page):
    return (len(phone.state.threads), ROW_HEIGHT, LIST_BOTTOM) if page.kind == "root" else None


APP = App(draw, rows)
