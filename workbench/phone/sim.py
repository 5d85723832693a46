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

from collections.abc import Sequence
from dataclasses import dataclass

from PIL import Image

from .actions import Action
from .apps import APP_PAGES, OTHER_APP, Menu, Page, home
from .apps.common import DARK, LIGHT, LIST_TOP, draw_loading, draw_menu, popup, status_text
from .openautoglm import HOME, current_app_name, launch_package, wait_seconds
from .screen import Box, Screen, status_bar
from .state import APPS, LOAD_SECONDS, PhoneState
from .uitree import screen_tree

PHONE_SIZE = (1080, 2400)  # a common Android phone's screen in pixels

LAUNCHER_PACKAGE = "com.android.launcher3"  # the home screen's package: not in the runtime's table ("System Home")

SWIPE_MIN = 50  # a swipe shorter than this (grid units) moves nothing


@dataclass(frozen=True)
class PhoneSnapshot:
    """Everything a ``SimPhone`` holds, to ``restore`` later (onto it or onto another phone of the same size)."""

    state: PhoneState
    app: str
    home_page: int
    stack: tuple[Page, ...]
    focus: str | None
    drafts: tuple[tuple[str, str], ...]
    menu: Menu | None
    greeted: frozenset[str]


@dataclass
class Outcome:
    valid: bool  # the action did something
    effect: str  # what happened, in words
    element: str | None = None  # the element a Tap / Long Press / Double Tap hit
    box: Box | None = None  # its box on the grid


class SimPhone:
    """A simulated Android phone: ``reset(state)``, ``screenshot()``, ``current_app()``, ``execute(action)``. Its apps'
    pages are ``phone.apps``'s; the phone keeps what is on show (the app, its pages, the focused field, the typed
    drafts, an open menu) and carries out the actions."""

    judges_state = True  # its final state can be checked (a real phone's cannot)

    def __init__(self, size: tuple[int, int] = PHONE_SIZE):
        self.size = tuple(size)
        self.reset()

    # ---- the device interface -------------------------------------------------------------------------------
    def reset(self, state: PhoneState | None = None) -> None:
        """Start again from ``state`` (default: a fresh phone) on the first home page."""
        self.state = (state or PhoneState()).copy()
        self.app = HOME
        self.home_page = 0
        self.stack: list[Page] = []
        self.focus: str | None = None  # the focused text field ("chat", "browser")
        self.drafts: dict[str, str] = {}  # text typed into each field
        self.menu: Menu | None = None  # a context menu or a pop-up over the page
        self.greeted: set[str] = set()  # the apps whose pop-up has shown this episode (a perturbed phone's)

    def snapshot(self) -> PhoneSnapshot:
        """What the phone holds now: ``restore`` brings it back (the state is copied, so later actions leave it)."""
        return PhoneSnapshot(
            self.state.copy(),
            self.app,
            self.home_page,
            tuple(Page(p.kind, p.arg, p.scroll, p.loading) for p in self.stack),
            self.focus,
            tuple(self.drafts.items()),
            self.menu,
            frozenset(self.greeted),
        )

    def restore(self, snap: PhoneSnapshot) -> None:
        self.state, self.app, self.home_page = snap.state.copy(), snap.app, snap.home_page
        self.stack = [Page(p.kind, p.arg, p.scroll, p.loading) for p in snap.stack]
        self.focus, self.drafts, self.menu, self.greeted = snap.focus, dict(snap.drafts), snap.menu, set(snap.greeted)

    def key(self) -> tuple:
        """A hashable value equal for phones that hold the same (data, screen on show, field, drafts, menu): what
        the next actions do depends on nothing else."""
        menu = None if self.menu is None else (self.menu.title, tuple(label for label, _ in self.menu.options))
        return (
            self.state.key(),
            self.app,
            self.home_page,
            tuple((p.kind, p.arg, p.scroll, p.loading) for p in self.stack),
            self.focus,
            tuple(sorted(self.drafts.items())),
            menu,
            frozenset(self.greeted),
        )

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

    def screenshot(self, size: tuple[int, int] | None = None) -> Image.Image:
        return self._build().draw(tuple(size or self.size))

    def ui_tree(self) -> str:
        """The screen on show as the compact accessibility tree (``workbench.phone.uitree``): exact, since the
        screen is drawn from these elements."""
        return screen_tree(self._build())

    def execute(self, action: Action, screen: Screen | None = None) -> Outcome:
        """Carry ``action`` out. ``screen``: the screen on show, where the caller has built it since the phone last
        changed (a search trying many actions from one state saves building it again for each gesture)."""
        kind = action.type
        if kind in ("Tap", "Double Tap", "Long Press"):
            return self._gesture(kind, tuple(action.args["element"]), screen)
        if kind == "Swipe":
            return self._swipe(action.args["start"], action.args["end"])
        if kind == "Type":
            return self._type(action.args["text"])
        if kind == "Back":
            return self.back()
        if kind == "Home":
            self._go_home()
            return Outcome(True, "went to the home screen")
        if kind == "Launch":
            app = installed_app(action.args["app"], self.state.contents.apps)
            if app is None:
                return Outcome(
                    False,
                    f"App not found: {action.args['app']} (no installed app has that name in Open-AutoGLM's app table)",
                )
            self.open_app(app)
            return Outcome(True, f"launched {app}")
        if kind == "Wait":
            return self._wait(wait_seconds(action.args["duration"]))
        return Outcome(True, "finished")  # finish: the episode ends; the phone stays as it is

    def open_app(self, app: str, *pages: Page) -> str:
        """Open an installed app on its first page (as a launcher intent does: Launch, a tap on its icon), or on
        ``pages`` above its first one (an app opened at a page of its own, as Contacts' Message opens a chat)."""
        self.app, self.stack, self.focus, self.menu = app, [Page("root"), *pages], None, None
        if app in self.state.contents.perturbation.slow:
            self.stack[-1].loading = LOAD_SECONDS
        else:
            self._greet()
        return f"opened {app}"

    def _greet(self) -> None:
        """A perturbed phone's pop-up over the app just opened (or just loaded), the first time this episode."""
        if self.app in self.state.contents.perturbation.popups and self.app not in self.greeted:
            self.greeted.add(self.app)
            self.menu = popup(self.app)

    def _wait(self, seconds: float) -> Outcome:
        page = self.stack[-1] if self.app != HOME and self.stack else None
        if page is None or page.loading <= 0:
            return Outcome(True, "waited; nothing changed")
        page.loading = max(0.0, page.loading - seconds)
        if page.loading:
            return Outcome(True, f"waited; {self.app} is still loading")
        self._greet()
        return Outcome(True, f"waited; {self.app} has loaded")

    def push(self, page: Page) -> str:
        """Open ``page`` above the one on show (the keyboard and any menu close)."""
        self.focus, self.menu = None, None
        self.stack.append(page)
        return f"opened {page.arg or page.kind}"

    def focus_field(self, fieldname: str) -> str:
        """Focus a text field ("chat": a chat's message box, "browser": the search box): the keyboard opens."""
        self.focus = fieldname
        return f"focused the {'message box' if fieldname == 'chat' else 'search box'}; the keyboard is open"

    def back(self) -> Outcome:
        """Back: closes a menu, then the keyboard, then goes one page back, then to the home screen."""
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

    # ---- actions --------------------------------------------------------------------------------------------
    def _gesture(self, kind: str, point: tuple[int, int], screen: Screen | None = None) -> Outcome:
        screen = screen or self._build()
        name = screen.hit(point)
        if name is None:
            if self.menu is not None:
                self.menu = None
                return Outcome(True, "closed the menu (tapped outside it)")
            return Outcome(False, f"the {kind.lower()} at {list(point)} hit no element")
        box, handlers = screen.elements[name], screen.handlers.get(name)
        do = None
        if handlers is not None:
            do = {
                "Tap": handlers.tap,
                "Double Tap": handlers.double_tap or handlers.tap,
                "Long Press": handlers.long_press,
            }[kind]
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
            pages = home.pages(self)
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

    # ---- navigation -----------------------------------------------------------------------------------------
    def _go_home(self) -> None:
        self.app, self.home_page, self.stack, self.focus, self.menu = HOME, 0, [], None, None

    def _scroll_extent(self) -> int | None:
        """How far the page on show scrolls (grid units); None when it does not."""
        if self.app == HOME or not self.stack or self.focus is not None or self.stack[-1].loading:
            return None
        rows = APP_PAGES.get(self.app, OTHER_APP).list_rows(self, self.stack[-1])
        if rows is None:
            return None
        count, height, bottom = rows
        return max(0, LIST_TOP + count * height - bottom)

    # ---- drawing --------------------------------------------------------------------------------------------
    def _build(self) -> Screen:
        if self.app == HOME:
            s = home.draw(self)
        else:
            theme = DARK if self.state.toggles["dark_mode"] else LIGHT
            page = self.stack[-1]
            s = Screen(f"{self.app}:{page.kind}:{page.arg or ''}", background=theme.bg)
            status_bar(s, dark=theme is DARK, clock=status_text(self.state))
            if page.loading:
                draw_loading(self, s, theme)
            else:
                APP_PAGES.get(self.app, OTHER_APP).draw(self, s, page, theme)
        if self.menu is not None:
            draw_menu(self, s)
        for old, new in self.state.contents.perturbation.renamed:
            s.rename(old, new)
        return s


def app_package(app: str) -> str:
    """The Android package of an installed app: the runtime's table's for a name it lists, else one of the
    simulator's own that holds no package of the table (the runtime then reports "System Home", as it does for any
    app it does not know)."""
    return launch_package(app) or "org.workbench.sim." + ("".join(c for c in app.casefold() if c.isalnum()) or "app")


def installed_app(name: str, apps: Sequence[str] = APPS) -> str | None:
    """The installed app (of ``apps``) that ``do(action="Launch", app=name)`` opens: the one whose package the
    runtime's table gives for exactly this name (another name of the same app works too); None if none."""
    package = launch_package(name)
    return next((app for app in apps if package is not None and app_package(app) == package), None)
