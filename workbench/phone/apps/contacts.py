"""Contacts: the alphabetical list (longer than a screen: it scrolls), each contact's card (Message, Add to /
Remove from favorites); a long press on a row opens its menu (the same two choices as the card's, then Open)."""

from __future__ import annotations

from ..screen import Screen
from ..state import CONTACTS_APP, MESSAGES_APP
from .common import BLUE, ICON_COLORS, LIST_BOTTOM, WHITE, App, AppHost, Menu, Page, Theme, list_rows, title_bar

ROW_HEIGHT = 90  # a row of the list
MESSAGE_BUTTON = (80, 580, 480, 670)  # on a contact's card
FAVORITE_BUTTON = (520, 580, 920, 670)
FAVORITE_GOLD = (230, 160, 0)


def set_favorite(phone: AppHost, name: str, on: bool) -> str:
    (phone.state.favorites.add if on else phone.state.favorites.discard)(name)
    return f"{'added' if on else 'removed'} {name} {'to' if on else 'from'} favorites"


def favorite_menu(phone: AppHost, name: str) -> str:
    fav = name in phone.state.favorites
    phone.menu = Menu(
        name,
        (
            ("Remove from favorites" if fav else "Add to favorites", lambda p: set_favorite(p, name, not fav)),
            ("Open contact", lambda p: p.push(Page("contact", name))),
        ),
    )
    return f"opened the menu of {name}"


def _list(phone: AppHost, s: Screen, page: Page, t: Theme) -> None:
    contacts = phone.state.contents.contacts
    for i, y in list_rows(page, len(contacts), ROW_HEIGHT):
        name = contacts[i]
        s.rect(
            (20, y + 4, 980, y + 86),
            t.card,
            radius=14,
            element=name,
            tap=lambda n=name: phone.push(Page("contact", n)),
            long_press=lambda n=name: favorite_menu(phone, n),
        )
        s.rect((40, y + 15, 100, y + 75), ICON_COLORS[i % len(ICON_COLORS)], radius=30)
        s.text((70, y + 45), name[0], 30, WHITE, anchor="mm")
        s.text((130, y + 45), name, 30, t.fg, anchor="lm")
        if name in phone.state.favorites:
            s.text((940, y + 45), "Favorite", 22, FAVORITE_GOLD, anchor="rm")
    title_bar(phone, s, t, CONTACTS_APP, back=False)  # over rows scrolled under it


def _card(phone: AppHost, s: Screen, page: Page, t: Theme) -> None:
    name = page.arg
    title_bar(phone, s, t, name, back=True)
    index = phone.state.contents.contacts.index(name)
    s.rect((400, 190, 600, 390), ICON_COLORS[index % len(ICON_COLORS)], radius=100)
    s.text((500, 290), name[0], 90, WHITE, anchor="mm")
    s.text((500, 440), name, 40, t.fg, anchor="mm")
    s.text((500, 500), f"Mobile +1 555 01{index:02d}", 26, t.sub, anchor="mm")
    s.rect(
        MESSAGE_BUTTON, BLUE, radius=20, element="Message", tap=lambda: phone.open_app(MESSAGES_APP, Page("chat", name))
    )
    s.text((280, 625), "Message", 30, WHITE, anchor="mm")
    fav = name in phone.state.favorites
    label = "Remove from favorites" if fav else "Add to favorites"
    s.rect(
        FAVORITE_BUTTON,
        t.card,
        radius=20,
        outline=t.line,
        element=label,
        tap=lambda: set_favorite(phone, name, not fav),
    )
    s.text((720, 625), label, 24, t.fg, anchor="mm")


def draw(phone: AppHost, s: Screen, page: Page, t: Theme) -> None:
    (_list if page.kind == "root" else _card)(phone, s, page, t)


def rows(phone: AppHost, page: Page):
    return (len(phone.state.contents.contacts), ROW_HEIGHT, LIST_BOTTOM) if page.kind == "root" else None


APP = App(draw, rows)
