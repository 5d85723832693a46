"""The simulated phone's apps (``phone.sim.SimPhone`` shows them), one module an app: each draws its pages on the
0-999 grid, its geometry named at the top, binds what its elements do, and says which of its pages scroll.

``APP_PAGES`` maps the apps with pages of their own to their module's ``App``; every other installed app shows
``other``'s screen; the launcher is ``home``. What they share (a page, the theme, the title bar, a list's rows, the
context menu) is ``common``."""

from __future__ import annotations

from ..state import BROWSER_APP, CONTACTS_APP, MESSAGES_APP, MUSIC_APP, PHOTOS_APP, SETTINGS_APP
from . import browser, contacts, home, messages, music, other, photos, settings
from .common import App, Menu, Page

APP_PAGES: dict[str, App] = {
    SETTINGS_APP: settings.APP,
    CONTACTS_APP: contacts.APP,
    MESSAGES_APP: messages.APP,
    BROWSER_APP: browser.APP,
    MUSIC_APP: music.APP,
    PHOTOS_APP: photos.APP,
}
OTHER_APP = other.APP

__all__ = ["APP_PAGES", "OTHER_APP", "App", "Menu", "Page", "home"]
