"""The simulated phone: apps with real state behind screens drawn with PIL, driven by AutoGLM-Phone actions.

``SimPhone`` is deterministic: the same task and the same actions give the same screens and the same final
state. What each action does:

- Tap: the element whose box holds the point (the topmost) does its tap; a point on no element does nothing.
- Double Tap: the element's double-tap (a photo: like it), else its tap; Long Press: its long-press (a contact or
  a song: a context menu), else nothing.
- Swipe: vertical on a list scrolls it by the swiped distance (until its end); horizontal on the home screen
  turns the page.
- Type: replaces the text of the focused field (as AutoGLM's ADB keyboard clears it first); no focused field:
  nothing. Tap a text field to focus it (the keyboard opens).
- Back: closes a menu, then the keyboard, then goes one page back, then to the home screen. Home: the home
  screen. Launch: the app's first page, for a name of Open-AutoGLM's app table whose package is installed (as its
  runtime resolves a name on a phone: ``phone.openautoglm``); any other name does nothing. Wait: nothing.

Every action reports an ``Outcome``: whether it did something (``valid``: an invalid action is a tap on nothing, a
Type without a focused field, a scroll at a list's end, an unknown app...) and what, in words. ``finish`` is the
episode's business (``workbench.phone.env``), not the phone's.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from PIL import Image

from .actions import Action
from .openautoglm import current_app_name, launch_package
from .uitree import screen_tree
from .screen import KEYBOARD_TOP, Box, Screen, keyboard, status_bar
from .state import (APPS, APPS_PER_PAGE, BROWSER_APP, CONTACTS_APP, HOME, MESSAGES_APP, MUSIC_APP, PHOTOS_APP,
                    SETTINGS_APP, SETTINGS_PAGES, TOGGLES, PhoneState, web_results)

PHONE_SIZE = (1080, 2400)  # a common Android phone's screen in pixels

LAUNCHER_PACKAGE = "com.android.launcher3"  # the home screen's package: not in the runtime's table ("System Home")

ICON_COLORS = [(95, 99, 104), (0, 150, 136), (52, 168, 83), (66, 133, 244), (60, 60, 60), (63, 81, 181),
               (229, 57, 53), (3, 169, 244), (22, 119, 255), (41, 98, 255), (0, 188, 212), (121, 85, 72),
               (236, 64, 122), (255, 112, 67), (255, 202, 40), (38, 50, 56), (233, 30, 99), (109, 76, 65),
               (244, 81, 30), (156, 39, 176), (0, 137, 123), (255, 87, 34), (194, 24, 91), (251, 140, 0)]
PHOTO_COLORS = [(79, 195, 247), (121, 134, 203), (255, 183, 77), (244, 143, 177), (255, 138, 101), (69, 90, 100),
                (102, 187, 106), (161, 136, 127), (224, 224, 224), (240, 98, 146), (144, 164, 174), (77, 182, 172)]

# The apps drawn by a page builder of their own (the method named); any other installed app shows _other_app's screen
APP_PAGES = {SETTINGS_APP: "_settings", CONTACTS_APP: "_contacts", MESSAGES_APP: "_messages", BROWSER_APP: "_browser",
             MUSIC_APP: "_music", PHOTOS_APP: "_photos"}

LIST_TOP, LIST_BOTTOM = 150, 990  # the content area below an app's title bar
SWIPE_MIN = 50  # a swipe shorter than this (grid units) moves nothing


@dataclass
class Page:
    kind: str  # what the app shows: "root", "contact", "chat", "results", "article", "player", "photo", a Settings page
    arg: Optional[str] = None  # whose page: a contact, a query, a song, a photo...
    scroll: int = 0


@dataclass
class Outcome:
    valid: bool  # the action did something
    effect: str  # what happened, in words
    element: Optional[str] = None  # the element a Tap / Long Press / Double Tap hit
    box: Optional[Box] = None  # its box on the grid


@dataclass
class Theme:
    bg: tuple = (245, 245, 247)
    card: tuple = (255, 255, 255)
    fg: tuple = (20, 20, 20)
    sub: tuple = (120, 120, 125)
    line: tuple = (220, 220, 225)


LIGHT, DARK = Theme(), Theme((24, 24, 27), (44, 44, 48), (235, 235, 235), (160, 160, 165), (70, 70, 75))


@dataclass
class _Menu:
    title: str
    options: list[tuple[str, Callable[[], str]]] = field(default_factory=list)  # label -> does it, returns the effect


class SimPhone:
    """A simulated Android phone: ``reset(state)``, ``screenshot()``, ``current_app()``, ``execute(action)``."""

    judges_state = True  # its final state can be checked (a real phone's cannot)

    def __init__(self, size: tuple[int, int] = PHONE_SIZE):
        self.size = tuple(size)
        self.reset()

    # ---- the device interface -------------------------------------------------------------------------------
    def reset(self, state: Optional[PhoneState] = None) -> None:
        """Start again from ``state`` (default: a fresh phone) on the first home page."""
        self.state = (state or PhoneState()).copy()
        self.app = HOME
        self.home_page = 0
        self.stack: list[Page] = []
        self.focus: Optional[str] = None  # the focused text field ("chat", "browser")
        self.drafts: dict[str, str] = {}  # text typed into each field
        self.menu: Optional[_Menu] = None

    def current_app(self) -> str:
        """The app on screen as Open-AutoGLM's runtime names it (the first name of its table for the focused
        package; "System Home" for the launcher and for an app it does not know). ``app`` is the phone's own name."""
        return current_app_name(self.focused_package())

    def focused_package(self) -> str:
        """The package of the focused window (what ``dumpsys window`` names on a phone)."""
        return LAUNCHER_PACKAGE if self.app == HOME else app_package(self.app)

    def screen(self) -> Screen:
        """The screen on show, on the grid: what is drawn and which elements a gesture can hit."""
        return self._build()

    def screenshot(self, size: Optional[tuple[int, int]] = None) -> Image.Image:
        return self._build().draw(tuple(size or self.size))

    def ui_tree(self) -> str:
        """The screen on show as the compact accessibility tree (``workbench.phone.uitree``): exact, since the
        screen is drawn from these elements."""
        return screen_tree(self._build())

    def execute(self, action: Action) -> Outcome:
        kind = action.type
        if kind in ("Tap", "Double Tap", "Long Press"):
            return self._gesture(kind, tuple(action.args["element"]))
        if kind == "Swipe":
            return self._swipe(action.args["start"], action.args["end"])
        if kind == "Type":
            return self._type(action.args["text"])
        if kind == "Back":
            return self._back()
        if kind == "Home":
            self._go_home()
            return Outcome(True, "went to the home screen")
        if kind == "Launch":
            app = installed_app(action.args["app"], self.state.contents.apps)
            if app is None:
                return Outcome(False, f"App not found: {action.args['app']} (no installed app has that name in "
                                      "Open-AutoGLM's app table)")
            self.open_app(app)
            return Outcome(True, f"launched {app}")
        if kind == "Wait":
            return Outcome(True, "waited; nothing changed")
        return Outcome(True, "finished")  # finish: the episode ends; the phone stays as it is

    def open_app(self, app: str) -> str:
        """Open an installed app on its first page, as a launcher intent does (Launch, a tap on its icon)."""
        return self._open(app)

    # ---- actions --------------------------------------------------------------------------------------------
    def _gesture(self, kind: str, point: tuple[int, int]) -> Outcome:
        screen = self._build()
        name = screen.hit(point)
        if name is None:
            if self.menu is not None:
                self.menu = None
                return Outcome(True, "closed the menu (tapped outside it)")
            return Outcome(False, f"the {kind.lower()} at {list(point)} hit no element")
        box, handlers = screen.elements[name], screen.handlers.get(name)
        do = None
        if handlers is not None:
            do = {"Tap": handlers.tap, "Double Tap": handlers.double_tap or handlers.tap,
                  "Long Press": handlers.long_press}[kind]
        if do is None:
            return Outcome(False, f"a {kind.lower()} on {name!r} does nothing", name, box)
        effect = do()  # None: the element had nothing to do (Send with an empty box)
        if effect is None:
            return Outcome(False, f"a {kind.lower()} on {name!r} changed nothing", name, box)
        return Outcome(True, effect, name, box)

    def _swipe(self, start, end) -> Outcome:
        dx, dy = end[0] - start[0], end[1] - start[1]
        if max(abs(dx), abs(dy)) < SWIPE_MIN:
            return Outcome(False, "the swipe was too short to move anything")
        if self.menu is not None:
            return Outcome(False, "a menu is open: nothing scrolls under it")
        if abs(dx) > abs(dy):
            if self.app != HOME:
                return Outcome(False, "nothing scrolls sideways here")
            pages = (len(self.state.contents.apps) + APPS_PER_PAGE - 1) // APPS_PER_PAGE
            target = self.home_page + (1 if dx < 0 else -1)
            if not 0 <= target < pages:
                return Outcome(False, f"there is no home page {'after' if dx < 0 else 'before'} this one")
            self.home_page = target
            return Outcome(True, f"turned to home page {target + 1}")
        extent = self._scroll_extent()
        if extent is None:
            return Outcome(False, "nothing scrolls here")
        page = self.stack[-1]
        new = max(0, min(extent, page.scroll - dy))
        if new == page.scroll:
            return Outcome(False, f"the list is already at its {'end' if dy < 0 else 'top'}")
        page.scroll = new
        return Outcome(True, f"scrolled the list {'down' if dy < 0 else 'up'}")

    def _type(self, text: str) -> Outcome:
        if self.focus is None:
            return Outcome(False, "no text field is focused: tap one first")
        self.drafts[self.focus] = text
        return Outcome(True, f"typed {text!r}")

    def _back(self) -> Outcome:
        if self.menu is not None:
            self.menu = None
            return Outcome(True, "closed the menu")
        if self.focus is not None:
            self.focus = None
            return Outcome(True, "closed the keyboard")
        if len(self.stack) > 1:
            self.stack.pop()
            return Outcome(True, "went back one page")
        if self.app != HOME:
            self._go_home()
            return Outcome(True, "went back to the home screen")
        return Outcome(False, "already on the home screen: Back does nothing")

    # ---- navigation -----------------------------------------------------------------------------------------
    def _go_home(self) -> None:
        self.app, self.home_page, self.stack, self.focus, self.menu = HOME, 0, [], None, None

    def _open(self, app: str, *pages: Page) -> str:
        self.app, self.stack, self.focus, self.menu = app, [Page("root"), *pages], None, None
        return f"opened {app}"

    def _push(self, page: Page) -> str:
        self.focus, self.menu = None, None
        self.stack.append(page)
        return f"opened {page.arg or page.kind}"

    def _scroll_extent(self) -> Optional[int]:
        """How far the page on show scrolls (grid units); None when it does not."""
        if self.app == HOME or not self.stack or self.focus is not None:
            return None
        page = self.stack[-1]
        rows = {(CONTACTS_APP, "root"): (len(self.state.contents.contacts), 90),
                (MUSIC_APP, "root"): (len(self.state.contents.songs), 80),
                (MESSAGES_APP, "root"): (len(self.state.threads), 100)}.get((self.app, page.kind))
        if rows is None:
            return None
        bottom = LIST_BOTTOM - (90 if self.app == MUSIC_APP and self.state.now_playing else 0)
        return max(0, LIST_TOP + rows[0] * rows[1] - bottom)

    # ---- drawing --------------------------------------------------------------------------------------------
    def _build(self) -> Screen:
        if self.app == HOME:
            s = self._home()
        else:
            theme = DARK if self.state.toggles["dark_mode"] else LIGHT
            page = self.stack[-1]
            s = Screen(f"{self.app}:{page.kind}:{page.arg or ''}", background=theme.bg)
            status_bar(s, dark=theme is DARK, clock=self._status_text())
            getattr(self, APP_PAGES.get(self.app, "_other_app"))(s, page, theme)
        if self.menu is not None:
            self._draw_menu(s)
        return s

    def _status_text(self) -> str:
        on = [label for key, label in (("airplane", "Airplane"), ("wifi", "Wi-Fi"), ("bluetooth", "BT"),
                                        ("do_not_disturb", "DND")) if self.state.toggles[key]]
        return "9:41   " + " ".join(on)

    def _title_bar(self, s: Screen, t: Theme, title: str, back: bool) -> None:
        s.rect((0, 50, 1000, 140), t.card)
        if back:
            s.rect((20, 62, 110, 128), t.card, element="Back arrow", tap=self._back_tap)
            s.text((45, 95), "<", 40, t.fg, anchor="lm")
            s.text((130, 95), title, 34, t.fg, anchor="lm")
        else:
            s.text((50, 95), title, 40, t.fg, anchor="lm")

    def _back_tap(self) -> str:
        return self._back().effect

    def _home(self) -> Screen:
        p = self.home_page
        s = Screen(f"{HOME}:{p}", background=(34 + 20 * p, 64, 110 - 20 * p))
        status_bar(s, dark=True, clock=self._status_text())
        s.text((500, 110), "9:41", 80, (255, 255, 255), anchor="mm")
        s.text((500, 175), "Tuesday, December 1", 24, (230, 230, 240), anchor="mm")
        apps = self.state.contents.apps
        for k, app in enumerate(apps[p * APPS_PER_PAGE:(p + 1) * APPS_PER_PAGE]):
            col, row = k % 4, k // 4
            x1, y1 = 50 + col * 235, 260 + row * 200
            box = (x1, y1, x1 + 195, y1 + 105)
            s.rect(box, ICON_COLORS[apps.index(app) % len(ICON_COLORS)], radius=40, element=app,
                   tap=lambda a=app: self._open(a))
            s.text(((box[0] + box[2]) // 2, (box[1] + box[3]) // 2), app[0], 44, (255, 255, 255), anchor="mm")
            # a long name in a smaller font, as a launcher fits it under its icon (12 characters at 20)
            s.text(((box[0] + box[2]) // 2, box[3] + 14), app, min(20, 240 // max(1, len(app))), (255, 255, 255),
                   anchor="ma")
        pages = (len(apps) + APPS_PER_PAGE - 1) // APPS_PER_PAGE
        for i in range(pages):  # page dots
            x = 500 + (i - (pages - 1) / 2) * 40
            s.rect((int(x) - 8, 900, int(x) + 8, 916), (255, 255, 255) if i == p else (140, 150, 170), radius=8)
        s.text((500, 950), "Swipe left or right for more apps", 18, (220, 220, 230), anchor="mm")
        return s

    def _toggle_row(self, s: Screen, t: Theme, y: int, key: str) -> None:
        label, on = TOGGLES[key][0], self.state.toggles[key]
        s.rect((30, y, 970, y + 85), t.card, radius=18, outline=t.line, element=label,
               tap=lambda k=key: self._flip(k))
        s.text((70, y + 42), label, 30, t.fg, anchor="lm")
        s.rect((820, y + 22, 930, y + 64), (52, 168, 83) if on else (170, 170, 175), radius=21)
        knob = 888 if on else 820
        s.rect((knob + 4, y + 26, knob + 38, y + 60), (255, 255, 255), radius=17)
        s.text((800, y + 42), "On" if on else "Off", 22, t.sub, anchor="rm")

    def _flip(self, key: str) -> str:
        self.state.toggles[key] = not self.state.toggles[key]
        return f"turned {TOGGLES[key][0]} {'on' if self.state.toggles[key] else 'off'}"

    def _settings(self, s: Screen, page: Page, t: Theme) -> None:
        if page.kind == "root":
            self._title_bar(s, t, SETTINGS_APP, back=False)
            rows = [k for k, (_, where) in TOGGLES.items() if where == "Settings"] + list(SETTINGS_PAGES)
            for i, row in enumerate(rows):
                y = LIST_TOP + i * 95
                if row in TOGGLES:
                    self._toggle_row(s, t, y, row)
                else:
                    s.rect((30, y, 970, y + 85), t.card, radius=18, outline=t.line, element=row,
                           tap=lambda r=row: self._push(Page(r)))
                    s.text((70, y + 42), row, 30, t.fg, anchor="lm")
                    s.text((930, y + 42), ">", 30, t.sub, anchor="rm")
            return
        self._title_bar(s, t, page.kind, back=True)
        y = LIST_TOP
        for key in [k for k, (_, where) in TOGGLES.items() if where == page.kind]:
            self._toggle_row(s, t, y, key)
            y += 95
        info = {"Sound": ["Ringtone: Chimes", "Volume: 60%"], "Battery": ["Battery: 82%", "About 14 h left"],
                "Display": ["Screen timeout: 1 minute"],
                "About phone": ["Model: Workbench Phone", "Android version: 14", "Build: WB.2026.12"]}[page.kind]
        for line in info:
            s.rect((30, y, 970, y + 85), t.card, radius=18, outline=t.line)
            s.text((70, y + 42), line, 28, t.sub, anchor="lm")
            y += 95

    def _rows(self, page: Page, count: int, height: int, bottom: int = LIST_BOTTOM):
        """(index, top y) of the list rows entirely inside the content area at the page's scroll."""
        for i in range(count):
            y = LIST_TOP + i * height - page.scroll
            if y >= LIST_TOP and y + height <= bottom:
                yield i, y

    def _contacts(self, s: Screen, page: Page, t: Theme) -> None:
        if page.kind == "root":
            contacts = self.state.contents.contacts
            for i, y in self._rows(page, len(contacts), 90):
                name = contacts[i]
                s.rect((20, y + 4, 980, y + 86), t.card, radius=14, element=name,
                       tap=lambda n=name: self._push(Page("contact", n)),
                       long_press=lambda n=name: self._favorite_menu(n))
                s.rect((40, y + 15, 100, y + 75), ICON_COLORS[i % len(ICON_COLORS)], radius=30)
                s.text((70, y + 45), name[0], 30, (255, 255, 255), anchor="mm")
                s.text((130, y + 45), name, 30, t.fg, anchor="lm")
                if name in self.state.favorites:
                    s.text((940, y + 45), "Favorite", 22, (230, 160, 0), anchor="rm")
            self._title_bar(s, t, CONTACTS_APP, back=False)  # over rows scrolled under it
            return
        name = page.arg
        self._title_bar(s, t, name, back=True)
        index = self.state.contents.contacts.index(name)
        s.rect((400, 190, 600, 390), ICON_COLORS[index % len(ICON_COLORS)], radius=100)
        s.text((500, 290), name[0], 90, (255, 255, 255), anchor="mm")
        s.text((500, 440), name, 40, t.fg, anchor="mm")
        s.text((500, 500), f"Mobile +1 555 01{index:02d}", 26, t.sub, anchor="mm")
        s.rect((80, 580, 480, 670), (26, 115, 232), radius=20, element="Message",
               tap=lambda: self._open(MESSAGES_APP, Page("chat", name)))
        s.text((280, 625), "Message", 30, (255, 255, 255), anchor="mm")
        fav = name in self.state.favorites
        label = "Remove from favorites" if fav else "Add to favorites"
        s.rect((520, 580, 920, 670), t.card, radius=20, outline=t.line, element=label,
               tap=lambda: self._set_favorite(name, not fav))
        s.text((720, 625), label, 24, t.fg, anchor="mm")

    def _set_favorite(self, name: str, on: bool) -> str:
        (self.state.favorites.add if on else self.state.favorites.discard)(name)
        return f"{'added' if on else 'removed'} {name} {'to' if on else 'from'} favorites"

    def _favorite_menu(self, name: str) -> str:
        fav = name in self.state.favorites
        self.menu = _Menu(name, [("Remove from favorites" if fav else "Add to favorites",
                                  lambda: self._set_favorite(name, not fav)),
                                 ("Open contact", lambda: self._push(Page("contact", name)))])
        return f"opened the menu of {name}"

    def _like_menu(self, song: str) -> str:
        liked = song in self.state.liked_songs
        self.menu = _Menu(song.split(" - ")[0], [("Unlike song" if liked else "Like song",
                                                 lambda: self._like_song(song, not liked)),
                                                ("Play", lambda: self._play(song))])
        return f"opened the menu of {song}"

    def _draw_menu(self, s: Screen) -> None:
        s.elements.clear()  # the page under the menu is dimmed and cannot be hit
        s.handlers.clear()
        s.rect((0, 0, 1000, 1000), (90, 90, 95))
        s.rect((100, 330, 900, 450 + 110 * len(self.menu.options)), (255, 255, 255), radius=24)
        s.text((150, 390), self.menu.title, 32, (20, 20, 20), anchor="lm")
        for i, (label, do) in enumerate(self.menu.options):
            y = 440 + i * 110
            s.rect((130, y, 870, y + 90), (240, 240, 244), radius=16, element=label, tap=lambda d=do: self._menu_pick(d))
            s.text((170, y + 45), label, 30, (20, 20, 20), anchor="lm")

    def _menu_pick(self, do: Callable[[], str]) -> str:
        self.menu = None
        return do()

    def _messages(self, s: Screen, page: Page, t: Theme) -> None:
        if page.kind == "root":
            names = list(self.state.threads)
            for i, y in self._rows(page, len(names), 100):
                name = names[i]
                last = self.state.threads[name][-1][1] if self.state.threads[name] else ""
                s.rect((20, y + 5, 980, y + 95), t.card, radius=14, element=name,
                       tap=lambda n=name: self._push(Page("chat", n)))
                s.text((60, y + 32), name, 30, t.fg, anchor="lm")
                s.text((60, y + 70), last[:40], 22, t.sub, anchor="lm")
            self._title_bar(s, t, MESSAGES_APP, back=False)
            return
        name = page.arg
        self._title_bar(s, t, name, back=True)
        focused = self.focus == "chat"
        box_top = KEYBOARD_TOP - 110 if focused else 880
        thread = self.state.threads.get(name, [])
        y = box_top - 20
        for sender, text in reversed(thread):  # newest at the bottom, older above while they fit
            y -= 100
            if y < LIST_TOP:
                break
            mine = sender == "me"
            box = (380, y, 960, y + 80) if mine else (40, y, 620, y + 80)
            s.rect(box, (149, 236, 105) if mine else t.card, radius=18)
            s.text((box[0] + 25, y + 40), text[:34], 26, (20, 20, 20) if mine else t.fg, anchor="lm")
        if not thread:
            s.text((500, 400), f"No messages with {name} yet", 26, t.sub, anchor="mm")
        draft = self.drafts.get("chat", "")
        s.rect((0, box_top - 10, 1000, box_top + 100), t.bg)
        s.rect((40, box_top, 770, box_top + 90), t.card, radius=16, outline=(66, 133, 244) if focused else t.line,
               element="Message box", tap=lambda: self._focus("chat"))
        shown = (draft + "|") if focused else (draft or "Message")
        s.text((70, box_top + 45), shown[-30:], 26, t.fg if draft else t.sub, anchor="lm")
        s.rect((790, box_top, 960, box_top + 90), (7, 193, 96), radius=16, element="Send",
               tap=lambda: self._send(name))
        s.text((875, box_top + 45), "Send", 26, (255, 255, 255), anchor="mm")
        if focused:
            keyboard(s)

    def _focus(self, fieldname: str) -> str:
        self.focus = fieldname
        return f"focused the {'message box' if fieldname == 'chat' else 'search box'}; the keyboard is open"

    def _send(self, name: str) -> Optional[str]:
        text = self.drafts.get("chat", "").strip()
        if not text:
            return None  # nothing typed: the Send button does nothing (an invalid tap)
        self.state.threads.setdefault(name, []).append(("me", text))
        self.drafts["chat"] = ""
        self.focus = None
        return f"sent {text!r} to {name}"

    def _browser(self, s: Screen, page: Page, t: Theme) -> None:
        focused = self.focus == "browser"
        if page.kind == "article":
            self._title_bar(s, t, page.arg[:28], back=True)
            snippet = next((sn for q in self.state.searches for title, sn in web_results(q) if title == page.arg), "")
            s.text((60, 200), page.arg[:36], 34, t.fg)
            for i, line in enumerate([snippet, "", "This page is a stand-in for the real web page.",
                                      "Scroll, read, or go back to the results."]):
                s.text((60, 280 + i * 60), line[:46], 26, t.sub)
            return
        # root and results: the search bar on top
        s.rect((0, 50, 1000, 150), t.card)
        if page.kind == "results":
            s.rect((20, 65, 100, 135), t.card, element="Back arrow", tap=self._back_tap)
            s.text((45, 100), "<", 40, t.fg, anchor="lm")
        left = 110 if page.kind == "results" else 30
        draft = self.drafts.get("browser", "")
        s.rect((left, 65, 800, 135), t.bg, radius=35, outline=(66, 133, 244) if focused else t.line,
               element="Search box", tap=lambda: self._focus("browser"))
        shown = (draft + "|") if focused else (draft or "Search the web")
        s.text((left + 40, 100), shown[-28:], 26, t.fg if draft else t.sub, anchor="lm")
        s.rect((820, 65, 970, 135), (26, 115, 232), radius=35, element="Go", tap=self._search)
        s.text((895, 100), "Go", 28, (255, 255, 255), anchor="mm")
        if page.kind == "results":
            for i, (title, snippet) in enumerate(web_results(page.arg)):
                y = 180 + i * 150
                if focused and y + 130 > KEYBOARD_TOP:
                    break
                s.rect((30, y, 970, y + 130), t.card, radius=16, element=title, tap=lambda ti=title: self._read(ti))
                s.text((60, y + 40), title[:40], 28, (26, 90, 200), anchor="lm")
                s.text((60, y + 90), snippet[:48], 22, t.sub, anchor="lm")
        else:
            s.text((500, 260), BROWSER_APP, 60, t.fg, anchor="mm")
            for i, tile in enumerate(["News", "Weather", "Maps", "Videos"]):
                x = 60 + i * 225
                s.rect((x, 340, x + 200, 460), t.card, radius=20)
                s.text((x + 100, 400), tile, 24, t.sub, anchor="mm")
        if focused:
            keyboard(s)

    def _search(self) -> Optional[str]:
        query = self.drafts.get("browser", "").strip()
        if not query:
            return None  # nothing typed: Go does nothing
        self.state.searches.append(query)
        self.focus = None
        if self.stack[-1].kind == "results":
            self.stack[-1] = Page("results", query)
        else:
            self.stack.append(Page("results", query))
        return f"searched the web for {query!r}"

    def _read(self, title: str) -> str:
        self.state.read_pages.append(title)
        return self._push(Page("article", title))

    def _music(self, s: Screen, page: Page, t: Theme) -> None:
        if page.kind == "player":
            song = page.arg
            title, artist = song.split(" - ")
            self._title_bar(s, t, "Now playing", back=True)
            cover = PHOTO_COLORS[self.state.contents.songs.index(song) % len(PHOTO_COLORS)]
            s.rect((200, 190, 800, 460), cover, radius=30)
            s.text((500, 520), title, 40, t.fg, anchor="mm")
            s.text((500, 575), artist, 28, t.sub, anchor="mm")
            playing = self.state.playing and self.state.now_playing == song
            s.rect((300, 650, 700, 740), (26, 115, 232), radius=45, element="Pause" if playing else "Play",
                   tap=lambda: self._pause() if playing else self._play(song))
            s.text((500, 695), "Pause" if playing else "Play", 32, (255, 255, 255), anchor="mm")
            liked = song in self.state.liked_songs
            s.rect((300, 780, 700, 860), t.card, radius=40, outline=t.line, element="Unlike" if liked else "Like",
                   tap=lambda: self._like_song(song, not liked))
            s.text((500, 820), "Liked" if liked else "Like", 28, (229, 57, 53) if liked else t.fg, anchor="mm")
            return
        bottom = LIST_BOTTOM - (90 if self.state.now_playing else 0)
        songs = self.state.contents.songs
        for i, y in self._rows(page, len(songs), 80, bottom):
            song = songs[i]
            title, artist = song.split(" - ")
            s.rect((20, y + 4, 980, y + 76), t.card, radius=12, element=title,
                   tap=lambda so=song: self._play(so, show=True), long_press=lambda so=song: self._like_menu(so))
            s.text((50, y + 27), title, 28, t.fg, anchor="lm")
            s.text((50, y + 58), artist, 20, t.sub, anchor="lm")
            if song == self.state.now_playing:
                s.text((940, y + 40), "Playing" if self.state.playing else "Paused", 22, (26, 115, 232), anchor="rm")
        self._title_bar(s, t, MUSIC_APP, back=False)
        if self.state.now_playing:
            s.rect((0, bottom, 1000, 1000), t.card)
            s.text((40, bottom + 45), self.state.now_playing.split(" - ")[0], 28, t.fg, anchor="lm")
            s.text((960, bottom + 45), "Playing" if self.state.playing else "Paused", 24, t.sub, anchor="rm")

    def _play(self, song: str, show: bool = False) -> str:
        self.state.now_playing, self.state.playing = song, True
        if show:
            self._push(Page("player", song))
        return f"playing {song}"

    def _pause(self) -> str:
        self.state.playing = False
        return "paused the music"

    def _like_song(self, song: str, on: bool) -> str:
        (self.state.liked_songs.add if on else self.state.liked_songs.discard)(song)
        return f"{'liked' if on else 'unliked'} {song}"

    def _photos(self, s: Screen, page: Page, t: Theme) -> None:
        if page.kind == "photo":
            name = page.arg
            self._title_bar(s, t, name, back=True)
            liked = name in self.state.liked_photos
            colour = PHOTO_COLORS[self.state.contents.photos.index(name) % len(PHOTO_COLORS)]
            s.rect((40, 170, 960, 760), colour, radius=10, element="Photo",
                   double_tap=lambda: self._like_photo(name, not liked))
            s.text((500, 465), name, 48, (255, 255, 255), anchor="mm")
            s.rect((350, 800, 650, 880), t.card, radius=40, outline=t.line, element="Unlike" if liked else "Like",
                   tap=lambda: self._like_photo(name, not liked))
            s.text((500, 840), "Liked" if liked else "Like", 28, (229, 57, 53) if liked else t.fg, anchor="mm")
            s.text((500, 930), "Double tap the photo to like it", 20, t.sub, anchor="mm")
            return
        self._title_bar(s, t, PHOTOS_APP, back=False)
        for i, name in enumerate(self.state.contents.photos):
            col, row = i % 3, i // 3
            x, y = 30 + col * 320, 170 + row * 200
            s.rect((x, y, x + 300, y + 150), PHOTO_COLORS[i % len(PHOTO_COLORS)], radius=8, element=name,
                   tap=lambda n=name: self._push(Page("photo", n)))
            s.text((x + 150, y + 170), name, 22, t.fg, anchor="mm")
            if name in self.state.liked_photos:
                s.text((x + 280, y + 20), "Liked", 18, (229, 57, 53), anchor="ra")

    def _like_photo(self, name: str, on: bool) -> str:
        (self.state.liked_photos.add if on else self.state.liked_photos.discard)(name)
        return f"{'liked' if on else 'unliked'} the photo {name}"

    def _other_app(self, s: Screen, page: Page, t: Theme) -> None:
        self._title_bar(s, t, self.app, back=False)
        for i in range(4):
            y = 180 + i * 170
            s.rect((30, y, 970, y + 150), t.card, radius=20)
            s.rect((60, y + 30, 150, y + 120), t.line, radius=12)
            s.rect((180, y + 45, 700 - 80 * i, y + 70), t.line)
            s.rect((180, y + 95, 560, y + 110), t.line)
        s.text((500, 900), f"{self.app} has nothing to do in this simulator", 22, t.sub, anchor="mm")


def app_package(app: str) -> str:
    """The Android package of an installed app: the runtime's table's for a name it lists, else one of the
    simulator's own that holds no package of the table (the runtime then reports "System Home", as it does for any
    app it does not know)."""
    return launch_package(app) or "org.workbench.sim." + ("".join(c for c in app.casefold() if c.isalnum()) or "app")


def installed_app(name: str, apps: Sequence[str] = APPS) -> Optional[str]:
    """The installed app (of ``apps``) that ``do(action="Launch", app=name)`` opens: the one whose package the
    runtime's table gives for exactly this name (another name of the same app works too); None if none."""
    package = launch_package(name)
    return next((app for app in apps if package is not None and app_package(app) == package), None)
