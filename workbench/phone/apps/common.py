"""What every app of the simulated phone shares: the page it shows (``Page``), its look (``Theme``), the geometry of
an app's screen on the 0-999 grid (the title bar, the content area a list scrolls in), the title bar, the rows of a
scrolled list, and the context menu a long press opens over a page."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from ..screen import Screen
from ..state import POPUP_ACCEPT, POPUP_DISMISS, PhoneState

# ---- geometry (grid units) ---------------------------------------------------------------------------------------
STATUS_BAR_BOTTOM = 50  # the status bar above every page
TITLE_BAR = (0, 50, 1000, 140)  # an app's title bar
BACK_ARROW = (20, 62, 110, 128)  # the title bar's "<" (pages below an app's first one)
TITLE_LEFT, TITLE_LEFT_AFTER_BACK, TITLE_MIDDLE = 50, 130, 95  # the title's x without / with the arrow; its y
LIST_TOP, LIST_BOTTOM = 150, 990  # the content area below an app's title bar
MENU_CARD_LEFT, MENU_CARD_RIGHT, MENU_CARD_TOP = 100, 900, 330  # a context menu's card
MENU_OPTION_TOP, MENU_OPTION_HEIGHT, MENU_OPTION_PITCH = 440, 90, 110  # its options, one under the other

ICON_COLORS = [
    (95, 99, 104),
    (0, 150, 136),
    (52, 168, 83),
    (66, 133, 244),
    (60, 60, 60),
    (63, 81, 181),
    (229, 57, 53),
    (3, 169, 244),
    (22, 119, 255),
    (41, 98, 255),
    (0, 188, 212),
    (121, 85, 72),
    (236, 64, 122),
    (255, 112, 67),
    (255, 202, 40),
    (38, 50, 56),
    (233, 30, 99),
    (109, 76, 65),
    (244, 81, 30),
    (156, 39, 176),
    (0, 137, 123),
    (255, 87, 34),
    (194, 24, 91),
    (251, 140, 0),
]
PHOTO_COLORS = [
    (79, 195, 247),
    (121, 134, 203),
    (255, 183, 77),
    (244, 143, 177),
    (255, 138, 101),
    (69, 90, 100),
    (102, 187, 106),
    (161, 136, 127),
    (224, 224, 224),
    (240, 98, 146),
    (144, 164, 174),
    (77, 182, 172),
]
BLUE, GREEN, RED, WHITE = (26, 115, 232), (7, 193, 96), (229, 57, 53), (255, 255, 255)


@dataclass
class Page:
    kind: str  # what the app shows: "root", "contact", "chat", "results", "article", "player", "photo", a Settings page
    arg: str | None = None  # whose page: a contact, a query, a song, a photo...
    scroll: int = 0
    loading: float = 0.0  # seconds it still loads (a perturbed phone's slow app): nothing on it yet


@dataclass
class Theme:
    bg: tuple = (245, 245, 247)
    card: tuple = (255, 255, 255)
    fg: tuple = (20, 20, 20)
    sub: tuple = (120, 120, 125)
    line: tuple = (220, 220, 225)


LIGHT, DARK = Theme(), Theme((24, 24, 27), (44, 44, 48), (235, 235, 235), (160, 160, 165), (70, 70, 75))


@dataclass(frozen=True)
class Menu:
    """A context menu over the page (a long press opens it) or a pop-up: its title and its options, each a label
    and what picking it does to the phone it is given (returns the effect, in words)."""

    title: str
    options: tuple[tuple[str, Callable[[AppHost], str]], ...] = ()


class AppHost(Protocol):
    """The phone as its apps reach it (``phone.sim.SimPhone``): its data, what is on show, and the navigation an
    element's tap does."""

    state: PhoneState
    app: str  # the app on show
    home_page: int
    stack: list[Page]  # the app's pages, the one on show last
    focus: str | None  # the focused text field
    drafts: dict[str, str]  # the text typed into each field
    menu: Menu | None  # the open context menu

    def push(self, page: Page) -> str: ...

    def open_app(self, app: str, *pages: Page) -> str: ...

    def focus_field(self, fieldname: str) -> str: ...

    def back(self): ...


@dataclass(frozen=True)
class App:
    """An app's pages: ``draw(phone, screen, page, theme)`` draws the page on show and binds what its elements do;
    ``list_rows(phone, page)`` is (rows, row height, the list's bottom) of a page that scrolls, None for one that
    does not."""

    draw: Callable[[AppHost, Screen, Page, Theme], None]
    list_rows: Callable[[AppHost, Page], tuple[int, int, int] | None] = lambda phone, page: None


def status_text(state: PhoneState) -> str:
    """The status bar's text: the clock and the switches that show there (named as the phone names them)."""
    on = [
        state.contents.perturbation.label(label)
        for key, label in (("airplane", "Airplane"), ("wifi", "Wi-Fi"), ("bluetooth", "BT"), ("do_not_disturb", "DND"))
        if state.toggles[key]
    ]
    return "9:41   " + " ".join(on)


def title_bar(phone: AppHost, s: Screen, t: Theme, title: str, back: bool) -> None:
    """An app's title bar; with ``back``, the "<" arrow that goes one page back."""
    s.rect(TITLE_BAR, t.card)
    if back:
        s.rect(BACK_ARROW, t.card, element="Back arrow", tap=lambda: phone.back().effect)
        s.text((45, TITLE_MIDDLE), "<", 40, t.fg, anchor="lm")
        s.text((TITLE_LEFT_AFTER_BACK, TITLE_MIDDLE), title, 34, t.fg, anchor="lm")
    else:
        s.text((TITLE_LEFT, TITLE_MIDDLE), title, 40, t.fg, anchor="lm")


def list_rows(page: Page, count: int, height: int, bottom: int = LIST_BOTTOM) -> Iterator[tuple[int, int]]:
    """(index, top y) of the list rows entirely inside the content area at the page's scroll."""
    for i in range(count):
        y = LIST_TOP + i * height - page.scroll
        if y >= LIST_TOP and y + height <= bottom:
            yield i, y


def draw_menu(phone: AppHost, s: Screen) -> None:
    """The open context menu over the page: the page under it is dimmed and cannot be hit; picking an option closes
    the menu and does the option."""
    menu = phone.menu
    s.elements.clear()
    s.handlers.clear()
    s.rect((0, 0, 1000, 1000), (90, 90, 95))
    s.rect(
        (MENU_CARD_LEFT, MENU_CARD_TOP, MENU_CARD_RIGHT, 450 + MENU_OPTION_PITCH * len(menu.options)), WHITE, radius=24
    )
    s.text((150, 390), menu.title, 32, (20, 20, 20), anchor="lm")
    for i, (label, do) in enumerate(menu.options):
        y = MENU_OPTION_TOP + i * MENU_OPTION_PITCH
        s.rect(
            (130, y, 870, y + MENU_OPTION_HEIGHT),
            (240, 240, 244),
            radius=16,
            element=label,
            tap=lambda d=do: _pick(phone, d),
        )
        s.text((170, y + 45), label, 30, (20, 20, 20), anchor="lm")


def _pick(phone: AppHost, do: Callable[[AppHost], str]) -> str:
    phone.menu = None
    return do(phone)


def popup(app: str) -> Menu:
    """The pop-up a perturbed phone's app greets its first opening with: either button closes it."""
    return Menu(
        f"Enjoying {app}? Rate it",
        (
            (POPUP_DISMISS, lambda phone: "dismissed the pop-up"),
            (POPUP_ACCEPT, lambda phone: "closed the pop-up (rated the app)"),
        ),
    )


def draw_loading(phone: AppHost, s: Screen, t: Theme) -> None:
    """A page still loading: the app's title and "Loading...", nothing to tap."""
    title_bar(phone, s, t, phone.app, back=False)
    s.text((500, 480), "Loading...", 36, t.sub, anchor="mm")
