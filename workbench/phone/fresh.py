"""Phones of other names: contacts, songs, photos and app labels drawn at random, none of them (nor any word of
them) on the default phone.

Why: every built-in task runs on the one default phone, and training tasks may only name its non-held-out values,
so 540 training tasks name 16 apps, 15 contacts, 20 songs and 9 photos, each many times; a model fits each name's
line and never learns to find a name it has not seen (docs/agent.md, "Why held-out names are not read yet"). On a
fresh phone the name in the instruction is new, and so is where it sits: only reading the screen finds it. The
apps that have state (``phone.apps.APP_PAGES``) keep their names, as on every phone, and move about the launcher with
the others; the other apps' names are made up, so Open-AutoGLM's runtime knows none of them: it cannot ``Launch``
them (a tap on the icon opens them) and reports "System Home" while one is open, as it does for any app missing from
its table on a real phone.
"""

from __future__ import annotations

import random
import re

from .apps import APP_PAGES
from .state import APPS, CONTACTS, DEFAULT_CONTENTS, PHOTOS, SONGS, PhoneContents

# The apps the simulator gives real pages; every phone has them, under these names
STATEFUL_APPS = tuple(APP_PAGES)

_FIRST = (
    "Adele Anton Bianca Bruno Camila Carlos Daria Elena Emil Fatima Felix Gabriel Hana Hugo Ines Isaac Jonas "
    "Kai Kamala Lars Lena Lucas Malik Mateo Mila Nadia Nina Omar Oscar Paula Pedro Rafael Rosa Ruth Sara "
    "Selin Simon Sofia Tariq Tomas Uma Vera Victor Yara Yusuf Zara Leon Amara Boris"
).split()
_LAST = (
    "Abbott Baker Bauer Becker Costa Dubois Eriksen Fischer Garcia Haas Hansen Ito Jansen Kaur Kowalski Lopez "
    "Meyer Moreau Murphy Nakamura Novak Okafor Oliveira Patel Quinn Reyes Sato Schmidt Singh Sousa Suzuki "
    "Torres Varga Vogel Walsh Weber Yilmaz Young Zimmer Andersen Bianchi Cruz Duarte Fontaine Gomez"
).split()
_TITLE_WORDS = (
    "Amber Autumn Bright Broken Candle Cedar Copper Crystal Desert Distant Echoes Electric Ember Falling "
    "Feather Fire Frozen Garden Gentle Harbor Hollow Island Ivory Lantern Little Lonely Lucky Marble "
    "Meadow Mirror Misty Ocean Painted Quiet Rainbow Restless Rose Secret Shadow Shallow Silent Sparrow "
    "Spring Steady Summer Sweet Thunder Velvet Violet Wander Winter Yellow Valley Canyon Coral"
).split()
_BANDS = (
    "Arrows Beacons Cinders Comets Drifters Embers Falcons Foxes Harbors Kites Locals Magnets Meteors Nomads "
    "Orchards Pilots Rangers Ravens Rivals Sailors Satellites Sparks Strangers Voyagers Wolves"
).split()
_PHOTOS = (
    "Garden Harbor Picnic Waterfall Castle Desert Fireworks Horse Island Lighthouse Market Meadow Parrot "
    "Rainbow Sailboat Temple Tulips Volcano Canyon Glacier Kitten Puppy Pier Vineyard Windmill Balloon Cabin "
    "Carnival Concert Harvest Orchard Pumpkins Rooftop Skyline Station Stadium Sunrise Tractor Valley"
).split()
_PHOTOS += ["Road trip", "Old town", "Night market", "Spring picnic", "First snow", "Family dinner"]
_APPS = (
    "Podcasts Radio Compass Recorder Fitness Travel Tickets Bank Stocks Magnifier Scanner Tips Games Store "
    "Cloud Drive Taxi Hotels Recipes Dictionary Alarm Timer Reminders Journal Budget Garden Tracker Learn "
    "Chess Puzzles Karaoke Vault Coupons Fuel Parking Trains Flights Lottery Library Pharmacy Sleep "
    "Meditate Pets Plants Recycle Forum Chat Radar Tides Stars"
).split()


def _words(values) -> set[str]:
    """The words of names, "the" aside (bands are "The X" on both kinds of phone; it names nothing)."""
    return {w for v in values for w in re.findall(r"[a-z0-9]+", v.casefold())} - {"the"}


# No word of the default phone's catalogues: a fresh phone's names are new words altogether, held-out ones included
_TAKEN = _words(CONTACTS) | _words(SONGS) | _words(PHOTOS) | _words(APPS)


def _free(pool) -> list[str]:
    return [v for v in dict.fromkeys(pool) if not _words([v]) & _TAKEN]


FIRST_NAMES, LAST_NAMES, TITLE_WORDS, BANDS = _free(_FIRST), _free(_LAST), _free(_TITLE_WORDS), _free(_BANDS)
PHOTO_NAMES, APP_NAMES = _free(_PHOTOS), [a for a in _free(_APPS) if a not in STATEFUL_APPS]


def fresh_phone(rng: random.Random) -> PhoneContents:
    """A phone of as many contacts, songs, photos and apps as the default one, every name new (``Mom`` aside: she
    is on every phone and a favorite), the launcher order shuffled, threads with a few of the contacts."""
    d = DEFAULT_CONTENTS
    people = set()
    while len(people) < len(d.contacts) - 1:
        people.add(f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}")
    contacts = tuple(sorted(people | {"Mom"}))
    titles = set()
    while len(titles) < len(d.songs):
        titles.add(" ".join(rng.sample(TITLE_WORDS, rng.choice([1, 2, 2]))))
    artists = [
        rng.choice([f"The {rng.choice(BANDS)}", f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"]) for _ in titles
    ]
    order = sorted(titles)  # not the set's order: that changes with the process's string hashing
    rng.shuffle(order)
    songs = tuple(f"{t} - {a}" for t, a in zip(order, artists))
    photos = tuple(rng.sample(PHOTO_NAMES, len(d.photos)))
    apps = list(STATEFUL_APPS) + rng.sample(APP_NAMES, len(d.apps) - len(STATEFUL_APPS))
    rng.shuffle(apps)
    texts = [messages for _, messages in d.threads]  # the default threads' messages, Mom's first, re-addressed
    others = rng.sample([c for c in contacts if c != "Mom"], len(d.threads) - 1)
    threads = tuple(zip(["Mom"] + others, texts))
    return PhoneContents(contacts, threads, songs, photos, tuple(apps), ("Mom",))
