"""The browser (Chrome): its start page and the results page under the search bar (a tap on the search box focuses
it, Go searches what was typed), and an article (a result opened)."""

from __future__ import annotations

from ..screen import KEYBOARD_TOP, Screen, keyboard
from ..state import BROWSER_APP, web_results
from .common import BLUE, App, AppHost, Page, Theme, title_bar

SEARCH_BAR = (0, 50, 1000, 150)
BACK_ARROW = (20, 65, 100, 135)  # on the results page, left of the search box
SEARCH_BOX_LEFT, SEARCH_BOX_LEFT_AFTER_BACK, SEARCH_BOX_RIGHT = 30, 110, 800
SEARCH_ROW_TOP, SEARCH_ROW_BOTTOM = 65, 135  # the search box and Go
GO_BUTTON = (820, 65, 970, 135)
RESULT_TOP, RESULT_HEIGHT, RESULT_PITCH = 180, 130, 150  # the first result, a result, from one to the next
LINK_BLUE, FOCUS_BLUE = (26, 90, 200), (66, 133, 244)
TILES = ["News", "Weather", "Maps", "Videos"]  # the start page's tiles (nothing to tap)


def search(phone: AppHost) -> str | None:
    query = phone.drafts.get("browser", "").strip()
    if not query:
        return None  # nothing typed: Go does nothing
    phone.state.searches.append(query)
    phone.focus = None
    if phone.stack[-1].kind == "results":
        phone.stack[-1] = Page("results", query)
    else:
        phone.stack.append(Page("results", query))
    return f"searched the web for {query!r}"


def read(phone: AppHost, title: str) -> str:
    phone.state.read_pages.append(title)
    return phone.push(Page("article", title))


def _article(phone: AppHost, s: Screen, page: Page, t: Theme) -> None:
    title_bar(phone, s, t, page.arg[:28], back=True)
    snippet = next((sn for q in phone.state.searches for title, sn in web_results(q) if title == page.arg), "")
    s.text((60, 200), page.arg[:36], 34, t.fg)
    for i, line in enumerate(
        [snippet, "", "This page is a stand-in for the real web page.", "Scroll, read, or go back to the results."]
    ):
        s.text((60, 280 + i * 60), line[:46], 26, t.sub)


def _search_bar(phone: AppHost, s: Screen, page: Page, t: Theme, focused: bool) -> None:
    s.rect(SEARCH_BAR, t.card)
    if page.kind == "results":
        s.rect(BACK_ARROW, t.card, element="Back arrow", tap=lambda: phone.back().effect)
        s.text((45, 100), "<", 40, t.fg, anchor="lm")
    left = SEARCH_BOX_LEFT_AFTER_BACK if page.kind == "results" else SEARCH_BOX_LEFT
    draft = phone.drafts.get("browser", "")
    s.rect(
        (left, SEARCH_ROW_TOP, SEARCH_BOX_RIGHT, SEARCH_ROW_BOTTOM),
        t.bg,
        radius=35,
        outline=FOCUS_BLUE if focused else t.line,
        element="Search box",
        tap=lambda: phone.focus_field("browser"),
    )
    shown = (draft + "|") if focused else (draft or "Search the web")
    s.text((left + 40, 100), shown[-28:], 26, t.fg if draft else t.sub, anchor="lm")
    s.rect(GO_BUTTON, BLUE, radius=35, element="Go", tap=lambda: search(phone))
    s.text((895, 100), "Go", 28, (255, 255, 255), anchor="mm")


def draw(phone: AppHost, s: Screen, page: Page, t: Theme) -> None:
    focused = phone.focus == "browser"
    if page.kind == "article":
        _article(phone, s, page, t)
        return
    _search_bar(phone, s, page, t, focused)  # root and results: the search bar on top
    if page.kind == "results":
        for i, (title, snippet) in enumerate(web_results(page.arg)):
            y = RESULT_TOP + i * RESULT_PITCH
            if focused and y + RESULT_HEIGHT > KEYBOARD_TOP:
                break
            s.rect(
                (30, y, 970, y + RESULT_HEIGHT), t.card, radius=16, element=title, tap=lambda ti=title: read(phone, ti)
            )
            s.text((60, y + 40), title[:40], 28, LINK_BLUE, anchor="lm")
            s.text((60, y + 90), snippet[:48], 22, t.sub, anchor="lm")
    else:
        s.text((500, 260), BROWSER_APP, 60, t.fg, anchor="mm")
        for i, tile in enumerate(TILES):
            x = 60 + i * 225
            s.rect((x, 340, x + 200, 460), t.card, radius=20)
            s.text((x + 100, 400), tile, 24, t.sub, anchor="mm")
    if focused:
        keyboard(s)


APP = App(draw)
