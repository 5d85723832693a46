"""What the simulated phone holds: its apps' data (settings, contacts, message threads, songs, photos, browser
history) and the catalogues they are drawn from. Tasks start from ``PhoneState()`` with a few fields changed and
are judged on the state an episode leaves (``changed_keys`` says what differs from the start).

The catalogues (contacts, songs, photos, installed apps, the threads before any task) are a ``PhoneContents``:
``DEFAULT_CONTENTS`` is the phone every built-in task runs on; ``workbench.phone.fresh`` draws phones of other
names, on which training tasks must read the screen to find what they name (a fixed phone lets a model learn where
each name sits instead)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

# Settings switches: key -> (label on screen, the Settings page that shows it)
TOGGLES: dict[str, tuple[str, str]] = {
    "wifi": ("Wi-Fi", "Settings"),
    "bluetooth": ("Bluetooth", "Settings"),
    "airplane": ("Airplane mode", "Settings"),
    "location": ("Location", "Settings"),
    "dark_mode": ("Dark mode", "Display"),
    "large_text": ("Large text", "Display"),
    "auto_brightness": ("Auto brightness", "Display"),
    "vibrate": ("Vibrate", "Sound"),
    "do_not_disturb": ("Do not disturb", "Sound"),
    "battery_saver": ("Battery saver", "Battery"),
}
DEFAULT_TOGGLES = {
    "wifi": True,
    "bluetooth": False,
    "airplane": False,
    "location": True,
    "dark_mode": False,
    "large_text": False,
    "auto_brightness": True,
    "vibrate": True,
    "do_not_disturb": False,
    "battery_saver": False,
}
SETTINGS_PAGES = ("Display", "Sound", "Battery", "About phone")  # sub-pages of the Settings list

# Alphabetical, more than one screen long: the ones after the first nine need a Swipe in Contacts.
CONTACTS = [
    "Aaron Park",
    "Alice Chen",
    "Ben Carter",
    "Chen Wei",
    "Dana Lee",
    "Diego Ruiz",
    "Emma Wood",
    "Farah Khan",
    "Grace Liu",
    "Hiro Tanaka",
    "Ivan Petrov",
    "Julia Rossi",
    "Kofi Mensah",
    "Li Na",
    "Maria Silva",
    "Mom",
    "Noah Kim",
    "Olivia Brown",
    "Priya Shah",
    "Sam Taylor",
    "Wang Fang",
    "Zhang San",
]
# Threads that exist before any task: contact -> [(sender, text)], sender "me" or "them"
THREADS = {
    "Mom": [("them", "Call me when you land")],
    "Alice Chen": [("them", "Lunch tomorrow?")],
    "Ben Carter": [("me", "Got the tickets"), ("them", "Great, thanks!")],
    "Grace Liu": [("them", "Did you see the photos?")],
    "Sam Taylor": [("them", "Running late, sorry")],
    "Zhang San": [("them", "Meeting moved to 3pm")],
}

SONGS = [
    "Morning Light - The Harbors",
    "Blue Avenue - Nina Vale",
    "Paper Moons - Kite Season",
    "City Rain - Low Tides",
    "Golden Hour - Ada Mills",
    "Northern Lines - Fieldwork",
    "Slow Motion - June Park",
    "Satellites - Echo Bay",
    "Wild Honey - The Lanterns",
    "Last Train Home - Miles Crane",
    "Orange Sky - Sunday Club",
    "Glass Houses - Vera Lind",
    "Tidal - Marlow",
    "Silver Screen - The Reels",
    "Open Road - Hannah Cole",
    "Quiet Storm - Blue Fern",
    "Neon Dreams - Static Youth",
    "River Song - Old Pines",
    "Midnight Drive - Cass Monroe",
    "Paper Planes - Small Hours",
    "Evergreen - Lucy Hale",
    "Homecoming - The Porchlights",
    "Starlight - Ora Vance",
    "Window Seat - Theo Grant",
]
PHOTOS = [
    "Beach",
    "Mountains",
    "Cat",
    "Birthday cake",
    "Sunset",
    "City at night",
    "Forest",
    "Dog",
    "Snow",
    "Flowers",
    "Bridge",
    "Lake",
]

# Installed apps in launcher order: two home pages of twelve. Every name is one Open-AutoGLM's runtime launches (its
# app table, phone.openautoglm.APP_PACKAGES: `Launch` opens only a name listed there), so that what a model learns to
# launch here it can launch on a phone through the runtime. Six apps have real pages (phone.apps.APP_PAGES), named for
# their role by the nearest app of the table: the messenger is Telegram, the browser Chrome, the music player
# RetroMusic and the photo album Files (the table has no gallery); Settings and Contacts keep their names. The others
# open a simple screen of their own (so "open X" has many targets): each the table's app nearest to a stock app the
# launcher had before (Gmail for Mail, Google Maps for Maps, VLC for Video...), or another of its apps where it has
# none (Camera, Weather, Phone, Calculator, Health, Translate: AudioRecorder, Expedia, WhatsApp, Broccoli, Quora,
# Duolingo).
SETTINGS_APP, CONTACTS_APP, MESSAGES_APP = "Settings", "Contacts", "Telegram"
BROWSER_APP, MUSIC_APP, PHOTOS_APP = "Chrome", "RetroMusic", "Files"
APPS = [
    SETTINGS_APP,
    CONTACTS_APP,
    MESSAGES_APP,
    BROWSER_APP,
    "AudioRecorder",
    "Clock",
    "Google Calendar",
    "Expedia",
    "Google Maps",
    "Gmail",
    "WhatsApp",
    "Google Drive",
    MUSIC_APP,
    PHOTOS_APP,
    "Joplin",
    "Broccoli",
    "Quora",
    "Bluecoins",
    "Reddit",
    "Google Play Books",
    "Duolingo",
    "Temu",
    "VLC",
    "McDonald",
]
APPS_PER_PAGE = 12

# What the Browser finds: (title, snippet) pages per query; any other query finds generic pages
WEB = {
    "weather tomorrow": [("Weather forecast for tomorrow", "Sunny, 24 C, light wind from the west.")],
    "pasta recipe": [("Easy tomato pasta recipe", "Boil the pasta, simmer tomatoes with garlic, mix.")],
    "train to shanghai": [("Train tickets to Shanghai", "High-speed trains leave every 30 minutes.")],
    "museum opening hours": [("City Museum opening hours", "Open 9:00 to 17:00, closed on Mondays.")],
    "football scores": [("Football scores today", "Results and tables from today's matches.")],
    "flight status": [("Flight status checker", "Enter a flight number to see its status.")],
    "coffee near me": [("Best coffee shops nearby", "Five cafes within 500 meters of you.")],
    "how to tie a tie": [("How to tie a tie in 5 steps", "A simple knot for every occasion.")],
    "exchange rate": [("Currency exchange rates", "Live rates for 150 currencies.")],
    "yoga for beginners": [("Yoga for beginners", "Ten poses to start with at home.")],
}


def web_results(query: str) -> list[tuple[str, str]]:
    """The result pages (title, snippet) the Browser shows for ``query``: its own page first, then generic ones."""
    key = query.strip().casefold()
    own = WEB.get(key, [(f"{query.strip().capitalize()} - overview", f"Everything about {query.strip()}.")])
    return own + [
        (f"{query.strip().capitalize()} on Wikipedia", "The free encyclopedia."),
        (f"News about {query.strip()}", "The latest stories."),
        (f"{query.strip().capitalize()} - videos", "Watch clips and guides."),
    ]


@dataclass(frozen=True)
class Perturbation:
    """How a phone departs from the screens every demonstration shows (the ``perturbed`` tasks,
    ``phone.tasks.perturbed_tasks``): fixed for the episode, like the catalogues.

    - ``popups``: apps that greet their first opening of the episode with a pop-up (``POPUP_DISMISS`` closes it,
      as do Back and a tap outside it);
    - ``slow``: apps whose first page shows "Loading..." each time they open, until the phone has waited
      ``LOAD_SECONDS`` (``Wait``: the phone's clock moves only while the agent waits);
    - ``renamed``: (label, new label) pairs: an element and any text of exactly that label is drawn and named anew
      (Wi-Fi as WLAN, Send as Post...);
    - ``settings_order``: the rows of Settings' first page in another order (empty: the usual one).
    """

    popups: tuple[str, ...] = ()
    slow: tuple[str, ...] = ()
    renamed: tuple[tuple[str, str], ...] = ()
    settings_order: tuple[str, ...] = ()

    def label(self, name: str) -> str:
        """What an element named ``name`` is called on this phone."""
        return dict(self.renamed).get(name, name)


NO_PERTURBATION = Perturbation()
POPUP_DISMISS, POPUP_ACCEPT = "Not now", "Rate now"  # a pop-up's two buttons: both close it, neither changes data
LOAD_SECONDS = 2.0  # how long a slow app's first page loads


@dataclass(frozen=True)
class PhoneContents:
    """The phone's catalogues: what is installed and stored before any task, never changed by one. Contacts are
    listed alphabetically; apps in launcher order (``APPS_PER_PAGE`` a home page). ``perturbation``: how its
    screens depart from the ones the demonstrations show."""

    contacts: tuple[str, ...] = tuple(CONTACTS)
    threads: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = tuple(
        (c, tuple(m)) for c, m in THREADS.items()
    )  # contact -> ((sender, text), ...), as THREADS
    songs: tuple[str, ...] = tuple(SONGS)  # "Title - Artist", titles distinct
    photos: tuple[str, ...] = tuple(PHOTOS)
    apps: tuple[str, ...] = tuple(APPS)
    favorites: tuple[str, ...] = ("Mom",)
    perturbation: Perturbation = NO_PERTURBATION  # how its screens depart from the demonstrations' (none by default)

    def initial_threads(self) -> dict[str, list[tuple[str, str]]]:
        return {contact: list(messages) for contact, messages in self.threads}


DEFAULT_CONTENTS = PhoneContents()


@dataclass
class PhoneState:
    """The data of the phone's apps; the screen on show is the phone's (``SimPhone``), not part of this.
    ``PhoneState.of(contents)`` starts a phone of other catalogues than the default one."""

    toggles: dict[str, bool] = field(default_factory=lambda: dict(DEFAULT_TOGGLES))
    favorites: set[str] = field(default_factory=lambda: {"Mom"})
    threads: dict[str, list[tuple[str, str]]] = field(default_factory=lambda: copy.deepcopy(THREADS))
    now_playing: str | None = None
    playing: bool = False
    liked_songs: set[str] = field(default_factory=set)
    liked_photos: set[str] = field(default_factory=set)
    searches: list[str] = field(default_factory=list)  # Browser queries, in order
    read_pages: list[str] = field(default_factory=list)  # Browser result pages opened, in order

    contents: PhoneContents = DEFAULT_CONTENTS  # fixed for the episode: not among changed_keys

    @classmethod
    def of(cls, contents: PhoneContents) -> PhoneState:
        return cls(favorites=set(contents.favorites), threads=contents.initial_threads(), contents=contents)

    def copy(self) -> PhoneState:
        """A copy that shares nothing mutable (the catalogues, immutable, are shared)."""
        return PhoneState(
            dict(self.toggles),
            set(self.favorites),
            {c: list(m) for c, m in self.threads.items()},
            self.now_playing,
            self.playing,
            set(self.liked_songs),
            set(self.liked_photos),
            list(self.searches),
            list(self.read_pages),
            self.contents,
        )

    def key(self) -> tuple:
        """A hashable value equal for equal states (the catalogues aside: fixed for an episode)."""
        return (
            tuple(sorted(self.toggles.items())),
            frozenset(self.favorites),
            tuple((c, tuple(m)) for c, m in self.threads.items()),
            self.now_playing,
            self.playing,
            frozenset(self.liked_songs),
            frozenset(self.liked_photos),
            tuple(self.searches),
            tuple(self.read_pages),
        )

    def changed_keys(self, before: PhoneState) -> set[str]:
        """What differs from ``before``: ``toggles.<key>``, ``threads.<contact>``, or a field name."""
        keys = {
            f"toggles.{k}"
            for k in set(self.toggles) | set(before.toggles)
            if self.toggles.get(k) != before.toggles.get(k)
        }
        keys |= {
            f"threads.{c}"
            for c in set(self.threads) | set(before.threads)
            if self.threads.get(c, []) != before.threads.get(c, [])
        }
        for name in ("favorites", "now_playing", "playing", "liked_songs", "liked_photos", "searches", "read_pages"):
            if getattr(self, name) != getattr(before, name):
                keys.add(name)
        return keys


# The app whose screens set each field of the state (``PhoneState.changed_keys``' names; toggles.* and threads.* by
# their prefix): where a change can be made, or undone
KEY_APPS = {
    "toggles": SETTINGS_APP,
    "threads": MESSAGES_APP,
    "favorites": CONTACTS_APP,
    "now_playing": MUSIC_APP,
    "playing": MUSIC_APP,
    "liked_songs": MUSIC_APP,
    "liked_photos": PHOTOS_APP,
    "searches": BROWSER_APP,
    "read_pages": BROWSER_APP,
}


def key_app(key: str) -> str:
    """The app that sets a state key of ``changed_keys`` (``toggles.wifi``: Settings)."""
    return KEY_APPS[key.split(".", 1)[0]]
