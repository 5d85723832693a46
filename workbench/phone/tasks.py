"""Phone tasks: templates over the simulated apps, each task judged on the phone's final state, each with an
oracle solution.

A template (``TEMPLATES``) turns parameters (an app, a setting, a contact and a text, a song...) into a task: its
instruction, the state it starts from (a setting to change starts the other way round), the checks of the final
state (``check``: the goal holds and nothing else changed that the task did not ask for) and an oracle: the
actions (with a short reasoning each) that solve it, found by driving a scratch phone, so they are right for the
screens as drawn. ``TASKS`` is the built-in set: each template's values are split into train and held-out ones
(and one template is held out whole), so a held-out task is never a training task renamed; a second held-out set,
``combos``, pairs trained values in ways no training task does (a contact messaged in training, now to be made a
favorite; a song played only after a setting, now on its own; an app launched on the way to other tasks, now the
task): it asks whether a model recombines what it learned, where ``heldout`` also asks it to read names it never
saw.

Task files (``load_task_file``): JSONL, one ``{"template": NAME, ...parameters}`` object a line (optionally
``"id"`` and ``"split"``), or ``{"instruction": "..."}``: a free-form task for a real phone (your own app's), with no
start state, checks or oracle (``FREE_FORM``: its episodes are judged by a person or by step metrics); a bad row is a
``TaskFileError`` naming file:line and the fix.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..config.files import UnreadableFile, jsonl_lines
from .actions import Action
from .openautoglm import HOME
from .sim import SimPhone
from .state import (
    BROWSER_APP,
    CONTACTS_APP,
    DEFAULT_CONTENTS,
    LOAD_SECONDS,
    MESSAGES_APP,
    MUSIC_APP,
    PHOTOS_APP,
    POPUP_DISMISS,
    SETTINGS_APP,
    SETTINGS_PAGES,
    SONGS,
    TOGGLES,
    Perturbation,
    PhoneContents,
    PhoneState,
    web_results,
)

# heldout: values no training task has (a contact, song, setting, app, message never seen); combos: every value is
# trained, in another template or another pairing, the combination never is (does the model recombine what it knows?);
# perturbed: training tasks on a phone whose screens no demonstration shows (pop-ups, slow apps, renamed buttons,
# shuffled layouts: perturbed_tasks)
SPLITS = ("train", "heldout", "combos", "perturbed")


@dataclass(frozen=True)
class OracleStep:
    thinking: str
    action: Action


@dataclass(frozen=True)
class PhoneTask:
    id: str
    template: str
    params: dict = field(hash=False)
    split: str = "train"
    phone: PhoneContents = DEFAULT_CONTENTS  # the catalogues of the phone the task runs on (names it may use)

    @property
    def spec(self) -> Template:
        return FREE_FORM if self.template == FREE_FORM.name else TEMPLATES[self.template]

    @property
    def free_form(self) -> bool:
        """An instruction of the user's own: no simulated start state, no final-state checks, no oracle."""
        return self.template == FREE_FORM.name

    @property
    def instruction(self) -> str:
        return self.spec.instruction(self.params)

    @property
    def apps(self) -> tuple[str, ...]:
        return self.spec.apps(self.params)

    def initial_state(self) -> PhoneState:
        state = PhoneState.of(self.phone)
        self.spec.setup(state, self.params)
        return state

    def check(self, phone: SimPhone, start: PhoneState) -> dict[str, bool]:
        """The final-state checks: the template's goals, and that nothing changed that the task did not ask for."""
        checks = self.spec.goals(phone, self.params)
        extra = sorted(phone.state.changed_keys(start) - set(self.spec.changes(self.params)))
        checks["nothing_else_changed"] = not extra
        return checks

    def oracle(self) -> list[OracleStep]:
        """The actions that solve the task from its initial state, ending with finish."""
        recorder = _OracleRecorder(self)
        self.spec.solve(recorder, self.params)
        return recorder.steps


@dataclass(frozen=True)
class Template:
    name: str
    params: tuple[str, ...]
    instruction: Callable[[dict], str]
    apps: Callable[[dict], tuple[str, ...]]
    goals: Callable[[SimPhone, dict], dict[str, bool]]
    changes: Callable[[dict], tuple[str, ...]]  # the state keys the task may change (PhoneState.changed_keys)
    solve: Callable[[_OracleRecorder, dict], None]
    validate: Callable[[dict, PhoneContents], str | None]  # why the parameters are unusable on that phone, or None
    setup: Callable[[PhoneState, dict], None] = lambda state, params: None


# ---- the oracle's recorder --------------------------------------------------------------------------------------
def centre(box) -> list[int]:
    return [(box[0] + box[2]) // 2, (box[1] + box[3]) // 2]


class _OracleRecorder:
    """Drives a scratch phone from the task's initial state, recording each action with its reasoning."""

    def __init__(self, task: PhoneTask):
        self.task = task
        self.phone = SimPhone()
        self.phone.reset(task.initial_state())
        self.steps: list[OracleStep] = []

    def act(self, thinking: str, action: Action) -> None:
        outcome = self.phone.execute(action)
        if not outcome.valid:
            raise AssertionError(f"oracle of {self.task.id}: {action} did nothing ({outcome.effect})")
        self.steps.append(OracleStep(thinking, action))
        self.settle()

    def settle(self) -> None:
        """A perturbed phone's detours after an action: wait while the app loads, dismiss a pop-up."""
        phone = self.phone
        if phone.app != HOME and phone.stack and phone.stack[-1].loading:
            self.act(
                f"{phone.app} is still loading and shows nothing to tap yet; I wait for it.",
                Action("Wait", {"duration": f"{LOAD_SECONDS:g} seconds"}),
            )
        elif phone.menu is not None and any(label == POPUP_DISMISS for label, _ in phone.menu.options):
            self.gesture(
                POPUP_DISMISS,
                f"A pop-up over {phone.app} asks me to rate it; it is in the way, so I "
                f"dismiss it with {POPUP_DISMISS}.",
            )

    def reveal(self, label: str, what: str) -> None:
        """Swipe until ``label`` is on screen: home pages to the left, lists upwards."""
        for _ in range(12):
            if label in self.phone.screen().elements:
                return
            if self.phone.app == HOME:
                self.act(
                    f"{what} is not on this home page; I swipe left to the next page.",
                    Action("Swipe", {"start": [800, 600], "end": [200, 600]}),
                )
            else:
                self.act(
                    f"{what} is not in the visible part of the list; I swipe up to scroll further down.",
                    Action("Swipe", {"start": [500, 800], "end": [500, 350]}),
                )
        raise AssertionError(f"oracle of {self.task.id}: {label!r} never appeared")

    def gesture(self, label: str, thinking: str, kind: str = "Tap", what: str | None = None) -> None:
        shown = self.phone.state.contents.perturbation.label(label)  # a perturbed phone may call it otherwise
        if shown != label:
            thinking, what = thinking.replace(label, shown), (what or label).replace(label, shown)
        self.reveal(shown, what or shown)
        box = self.phone.screen().elements[shown]
        self.act(thinking, Action(kind, {"element": centre(box)}))

    def launch(self, app: str, why: str) -> None:
        self.act(f"{why} I launch {app}.", Action("Launch", {"app": app}))

    def type(self, text: str, where: str) -> None:
        self.act(f"The {where} is focused and the keyboard is open; I type the text.", Action("Type", {"text": text}))

    def finish(self, thinking: str, message: str) -> None:
        self.steps.append(OracleStep(thinking, Action("finish", {"message": message})))


# ---- the templates --------------------------------------------------------------------------------------------
def _choice(value, allowed, what: str) -> str | None:
    if value not in allowed:
        shown = ", ".join(map(str, allowed))
        return f"unknown {what} {value!r}; known: {shown}"
    return None


def _text(value, what: str = "text") -> str | None:
    if not isinstance(value, str) or not value.strip() or len(value) > 60:
        return f"'{what}' must be a non-empty string of at most 60 characters"
    return None


def _on_off(on: bool) -> str:
    return "on" if on else "off"


def _phrase(params: dict, variants: list[str]) -> str:
    """One of ``variants`` (format strings over the parameters), chosen by the parameters so that it is fixed."""
    key = sum(map(ord, json.dumps(params, sort_keys=True)))
    return variants[key % len(variants)].format(**params)


def _solve_open(p: _OracleRecorder, params: dict) -> None:
    app = params["app"]
    p.gesture(app, f"The {app} icon is on this home page; I tap it.", what=f"The {app} icon")
    p.finish(f"{app} is open; the task is done.", f"{app} is open.")


def _toggle_parts(params: dict):
    label, page = TOGGLES[params["setting"]]
    return label, page, _on_off(params["on"])


def _solve_toggle(p: _OracleRecorder, params: dict, then: str = "") -> None:
    label, page, want = _toggle_parts(params)
    p.launch(SETTINGS_APP, f"{label} is a setting.")
    if page != SETTINGS_APP:
        p.gesture(page, f"The {label} switch is on the {page} page of Settings; I open {page}.")
    p.gesture(label, f"{label} is {_on_off(not params['on'])}; I tap its switch to turn it {want}.")
    if not then:
        p.finish(f"{label} now shows {want.capitalize()}; the task is done.", f"{label} is {want}.")


def _solve_message(p: _OracleRecorder, params: dict) -> None:
    contact, text = params["contact"], params["text"]
    p.launch(CONTACTS_APP, f"I need {contact}'s contact card to message them.")
    p.gesture(contact, f"{contact} is in the contact list; I open the card.")
    p.gesture("Message", f"This is {contact}'s card; I tap Message to open the chat.")
    p.gesture("Message box", "The chat is open but the message box is not focused; I tap it.")
    p.type(text, "message box")
    p.gesture("Send", "The message is typed; I tap Send.")
    p.finish(f"The message to {contact} shows in the chat; the task is done.", f"Sent {text!r} to {contact}.")


def _solve_reply(p: _OracleRecorder, params: dict) -> None:
    contact, text = params["contact"], params["text"]
    p.launch(MESSAGES_APP, f"The conversation with {contact} is in {MESSAGES_APP}.")
    p.gesture(contact, f"{contact}'s conversation is in the list; I open it.")
    p.gesture("Message box", "The chat is open but the message box is not focused; I tap it.")
    p.type(text, "message box")
    p.gesture("Send", "The reply is typed; I tap Send.")
    p.finish(f"My reply shows in the chat with {contact}; the task is done.", f"Replied {text!r} to {contact}.")


def _solve_search(p: _OracleRecorder, params: dict, open_first: bool = False) -> None:
    query = params["query"]
    p.launch(BROWSER_APP, f"Web searches happen in {BROWSER_APP}.")
    p.gesture("Search box", f"{BROWSER_APP} is open; I tap the search box first.")
    p.type(query, "search box")
    p.gesture("Go", "The query is typed; I tap Go to search.")
    if open_first:
        title = web_results(query)[0][0]
        p.gesture(title, f"The results for {query!r} are listed; I open the first one, {title!r}.")
        p.finish(f"The page {title!r} is open; the task is done.", f"Opened {title!r}.")
    else:
        p.finish(f"The results for {query!r} are on screen; the task is done.", f"Searched for {query!r}.")


def _solve_song(p: _OracleRecorder, params: dict, why: str = f"Songs are played in {MUSIC_APP}.") -> None:
    title = params["song"].split(" - ")[0]
    p.launch(MUSIC_APP, why)
    p.gesture(title, f"{title} is in the library; I tap it to play it.", what=title)
    p.finish(f"{title} is playing; the task is done.", f"Playing {title}.")


def _solve_photo(p: _OracleRecorder, params: dict) -> None:
    photo = params["photo"]
    p.launch(PHOTOS_APP, f"The photo is in {PHOTOS_APP}.")
    p.gesture(photo, f"The {photo} photo is in the grid; I open it.")
    p.gesture("Photo", "The photo is open; I double-tap it to like it.", kind="Double Tap")
    p.finish(f"The {photo} photo shows Liked; the task is done.", f"Liked the {photo} photo.")


def _solve_favorite(p: _OracleRecorder, params: dict) -> None:
    contact = params["contact"]
    p.launch(CONTACTS_APP, f"Favorites are kept in {CONTACTS_APP}.")
    p.gesture(contact, f"{contact} is in the list; I long-press the entry for its menu.", kind="Long Press")
    p.gesture("Add to favorites", "The menu is open; I tap Add to favorites.")
    p.finish(f"{contact} is marked Favorite; the task is done.", f"Added {contact} to favorites.")


def _song_of(title: str) -> str | None:
    return next((s for s in SONGS if s.split(" - ")[0].casefold() == str(title).strip().casefold()), None)


def _valid(**checks: Callable[[object, PhoneContents], str | None]) -> Callable[[dict, PhoneContents], str | None]:
    """The parameters' checks, each given the value and the phone's catalogues; the first problem found."""

    def validate(params: dict, contents: PhoneContents) -> str | None:
        for name, check in checks.items():
            why = check(params.get(name), contents)
            if why:
                return why
        return None

    return validate


def _setting(v, contents=None) -> str | None:
    return _choice(v, list(TOGGLES), "setting")


def _bool(v, contents=None) -> str | None:
    return None if isinstance(v, bool) else f"'on' must be true or false, got {v!r}"


def _song(v, contents: PhoneContents) -> str | None:
    return _choice(v, contents.songs, "song")


def _contact(v, contents: PhoneContents) -> str | None:
    return _choice(v, contents.contacts, "contact")


def _setup_toggle(state: PhoneState, params: dict) -> None:
    state.toggles[params["setting"]] = not params["on"]


def _toggle_goal(phone: SimPhone, params: dict) -> dict[str, bool]:
    return {f"{params['setting']}_{_on_off(params['on'])}": phone.state.toggles[params["setting"]] == params["on"]}


def _sent(phone: SimPhone, params: dict) -> dict[str, bool]:
    thread = phone.state.threads.get(params["contact"], [])
    return {"message_sent": bool(thread) and thread[-1] == ("me", params["text"].strip())}


def _playing(phone: SimPhone, params: dict) -> dict[str, bool]:
    return {"song_playing": phone.state.now_playing == params["song"] and phone.state.playing}


TEMPLATES: dict[str, Template] = {
    t.name: t
    for t in [
        Template(
            "open_app",
            ("app",),
            lambda p: _phrase(p, ["Open {app}", "Launch the {app} app", "Go to {app}", "Start {app}"]),
            lambda p: (p["app"],),
            lambda phone, p: {"app_open": phone.app == p["app"]},
            lambda p: (),
            _solve_open,
            _valid(app=lambda v, c: _choice(v, c.apps, "app")),
        ),
        Template(
            "toggle_setting",
            ("setting", "on"),
            lambda p: _phrase(
                {**p, "label": TOGGLES[p["setting"]][0], "state": _on_off(p["on"])},
                ["Turn {state} {label}", "Switch {label} {state}", "Set {label} to {state}"],
            ),
            lambda p: (SETTINGS_APP,),
            _toggle_goal,
            lambda p: (f"toggles.{p['setting']}",),
            _solve_toggle,
            _valid(setting=_setting, on=_bool),
            _setup_toggle,
        ),
        Template(
            "send_message",
            ("contact", "text"),
            lambda p: _phrase(
                p, ["Send '{text}' to {contact}", "Text {contact}: {text}", "Message {contact} saying '{text}'"]
            ),
            lambda p: (CONTACTS_APP, MESSAGES_APP),
            _sent,
            lambda p: (f"threads.{p['contact']}",),
            _solve_message,
            _valid(contact=_contact, text=lambda v, c: _text(v)),
        ),
        Template(
            "reply_message",
            ("contact", "text"),
            lambda p: _phrase(
                p, ["Reply '{text}' to {contact} in " + MESSAGES_APP, "Answer {contact}'s message with '{text}'"]
            ),
            lambda p: (MESSAGES_APP,),
            _sent,
            lambda p: (f"threads.{p['contact']}",),
            _solve_reply,
            _valid(
                contact=lambda v, c: _choice(v, [who for who, _ in c.threads], "conversation"),
                text=lambda v, c: _text(v),
            ),
        ),
        Template(
            "web_search",
            ("query",),
            lambda p: _phrase(p, ["Search the web for {query}", "Look up {query} in " + BROWSER_APP]),
            lambda p: (BROWSER_APP,),
            lambda phone, p: {
                "results_shown": phone.app == BROWSER_APP
                and bool(phone.stack)
                and phone.stack[-1].kind == "results"
                and phone.stack[-1].arg.casefold() == p["query"].strip().casefold()
            },
            lambda p: ("searches",),
            _solve_search,
            _valid(query=lambda v, c: _text(v, "query")),
        ),
        Template(
            "open_result",
            ("query",),
            lambda p: _phrase(
                p,
                [
                    "Search for {query} and open the first result",
                    "Find {query} in " + BROWSER_APP + " and open the top result",
                ],
            ),
            lambda p: (BROWSER_APP,),
            lambda phone, p: {
                "first_result_open": phone.app == BROWSER_APP
                and bool(phone.stack)
                and phone.stack[-1].kind == "article"
                and phone.stack[-1].arg == web_results(p["query"])[0][0]
            },
            lambda p: ("searches", "read_pages"),
            lambda pl, p: _solve_search(pl, p, open_first=True),
            _valid(query=lambda v, c: _text(v, "query")),
        ),
        Template(
            "play_song",
            ("song",),
            lambda p: _phrase(
                {**p, "title": p["song"].split(" - ")[0], "artist": p["song"].split(" - ")[1]},
                ["Play {title} in " + MUSIC_APP, "Play the song {title} by {artist}"],
            ),
            lambda p: (MUSIC_APP,),
            _playing,
            lambda p: ("now_playing", "playing"),
            _solve_song,
            _valid(song=_song),
        ),
        Template(
            "like_photo",
            ("photo",),
            lambda p: _phrase(p, ["Like the photo {photo} in " + PHOTOS_APP, "Open the {photo} photo and like it"]),
            lambda p: (PHOTOS_APP,),
            lambda phone, p: {"photo_liked": p["photo"] in phone.state.liked_photos},
            lambda p: ("liked_photos",),
            _solve_photo,
            _valid(photo=lambda v, c: _choice(v, c.photos, "photo")),
        ),
        Template(
            "favorite_contact",
            ("contact",),
            lambda p: _phrase(p, ["Add {contact} to favorites", "Mark {contact} as a favorite contact"]),
            lambda p: (CONTACTS_APP,),
            lambda phone, p: {"favorite": p["contact"] in phone.state.favorites},
            lambda p: ("favorites",),
            _solve_favorite,
            _valid(contact=lambda v, c: f"{v} is a favorite already" if v in c.favorites else _contact(v, c)),
        ),
        Template(
            "setting_then_song",
            ("setting", "on", "song"),
            lambda p: _phrase(
                {**p, "label": TOGGLES[p["setting"]][0], "state": _on_off(p["on"]), "title": p["song"].split(" - ")[0]},
                ["Turn {state} {label}, then play {title}", "Switch {label} {state} and play {title}"],
            ),
            lambda p: (SETTINGS_APP, MUSIC_APP),
            lambda phone, p: {**_toggle_goal(phone, p), **_playing(phone, p)},
            lambda p: (f"toggles.{p['setting']}", "now_playing", "playing"),
            lambda pl, p: (
                _solve_toggle(pl, p, then="song"),
                _solve_song(pl, p, f"Now the song: it is in {MUSIC_APP}."),
            ),
            _valid(setting=_setting, on=_bool, song=_song),
            _setup_toggle,
        ),
        Template(
            "setting_then_message",
            ("setting", "on", "contact", "text"),
            lambda p: _phrase(
                {**p, "label": TOGGLES[p["setting"]][0], "state": _on_off(p["on"])},
                ["Turn {state} {label}, then send '{text}' to {contact}"],
            ),
            lambda p: (SETTINGS_APP, CONTACTS_APP, MESSAGES_APP),
            lambda phone, p: {**_toggle_goal(phone, p), **_sent(phone, p)},
            lambda p: (f"toggles.{p['setting']}", f"threads.{p['contact']}"),
            lambda pl, p: (_solve_toggle(pl, p, then="message"), _solve_message(pl, p)),
            _valid(setting=_setting, on=_bool, contact=_contact, text=lambda v, c: _text(v)),
            _setup_toggle,
        ),
    ]
}


def _slug(value) -> str:
    if isinstance(value, bool):
        return _on_off(value)
    return re.sub(r"[^a-z0-9]+", "-", str(value).casefold()).strip("-")[:24]


def _no_oracle(recorder, params: dict) -> None:
    raise ValueError(
        f"a free-form task ({params['instruction']!r}) has no oracle: demonstrate it (the recorder) or "
        "run a model on a phone"
    )


def _an_instruction(params: dict, phone: PhoneContents) -> str | None:
    text = params.get("instruction")
    return None if isinstance(text, str) and text.strip() else "'instruction' is the task in words: a non-empty string"


# A task in the user's own words, for a real phone (not in TEMPLATES: the simulated phone cannot judge it).
FREE_FORM = Template(
    "instruction",
    ("instruction",),
    lambda p: p["instruction"].strip(),
    lambda p: (),
    lambda phone, p: {},
    lambda p: (),
    _no_oracle,
    _an_instruction,
)


def free_form_task(instruction: str, split: str = "train", task_id: str | None = None) -> PhoneTask:
    """A task of the user's own words (``FREE_FORM``); ValueError for an empty instruction."""
    if why := _an_instruction({"instruction": instruction}, DEFAULT_CONTENTS):
        raise ValueError(why)
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    return PhoneTask(
        task_id or f"instruction/{_slug(instruction)[:60]}", FREE_FORM.name, {"instruction": instruction.strip()}, split
    )


def make_task(
    template: str,
    params: dict,
    split: str = "train",
    task_id: str | None = None,
    phone: PhoneContents = DEFAULT_CONTENTS,
) -> PhoneTask:
    """A task of ``template`` with ``params`` on a phone holding ``phone``; ValueError saying what is wrong (unknown
    template, missing or bad parameter, with the known values)."""
    if template not in TEMPLATES:
        raise ValueError(f"unknown template {template!r}; templates: {', '.join(TEMPLATES)}")
    spec = TEMPLATES[template]
    missing = [n for n in spec.params if n not in params]
    extra = [n for n in params if n not in spec.params]
    if missing or extra:
        raise ValueError(
            f"template {template} takes {', '.join(spec.params)}"
            + (f"; missing {', '.join(missing)}" if missing else "")
            + (f"; unknown {', '.join(extra)}" if extra else "")
        )
    why = spec.validate(params, phone)
    if why:
        raise ValueError(why)
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    tid = task_id or f"{template}/" + "-".join(_slug(params[n]) for n in spec.params)
    return PhoneTask(tid, template, dict(params), split, phone)


# ---- the built-in set: values split by template -----------------------------------------------------------------
def _songs(*titles: str) -> list[str]:
    return [_song_of(t) for t in titles]


_TRAIN_TEXTS = [
    "On my way",
    "See you at 7",
    "Running 10 min late",
    "Happy birthday!",
    "Call me back please",
    "Thanks for dinner",
    "I'll be there soon",
    "Got it",
]
_BUILTIN: list[tuple[str, str, list[dict]]] = [
    (
        "open_app",
        "train",
        [
            {"app": a}
            for a in [
                SETTINGS_APP,
                BROWSER_APP,
                "AudioRecorder",
                "Google Maps",
                "WhatsApp",
                PHOTOS_APP,
                "Bluecoins",
                "Reddit",
            ]
        ],
    ),
    ("open_app", "heldout", [{"app": a} for a in ["Clock", "Gmail", "Broccoli", "VLC"]]),
    (
        "toggle_setting",
        "train",
        [
            {"setting": s, "on": on}
            for s, on in [
                ("wifi", False),
                ("wifi", True),
                ("bluetooth", True),
                ("dark_mode", True),
                ("dark_mode", False),
                ("vibrate", False),
                ("battery_saver", True),
                ("location", False),
            ]
        ],
    ),
    (
        "toggle_setting",
        "heldout",
        [
            {"setting": s, "on": on}
            for s, on in [
                ("airplane", True),
                ("large_text", True),
                ("do_not_disturb", True),
                ("auto_brightness", False),
            ]
        ],
    ),
    (
        "send_message",
        "train",
        [
            {"contact": c, "text": t}
            for c, t in zip(
                [
                    "Alice Chen",
                    "Dana Lee",
                    "Emma Wood",
                    "Ivan Petrov",
                    "Li Na",
                    "Olivia Brown",
                    "Sam Taylor",
                    "Zhang San",
                ],
                _TRAIN_TEXTS,
            )
        ],
    ),
    (
        "send_message",
        "heldout",
        [
            {"contact": c, "text": t}
            for c, t in [
                ("Chen Wei", "Meeting at noon?"),
                ("Hiro Tanaka", "Where are you?"),
                ("Noah Kim", "Back in 5 minutes"),
                ("Wang Fang", "Love the new place"),
            ]
        ],
    ),
    (
        "reply_message",
        "train",
        [
            {"contact": c, "text": t}
            for c, t in [
                ("Mom", "Landed safely"),
                ("Alice Chen", "Yes, see you then"),
                ("Ben Carter", "No problem"),
                ("Sam Taylor", "Sure, no rush"),
            ]
        ],
    ),
    (
        "reply_message",
        "heldout",
        [{"contact": c, "text": t} for c, t in [("Grace Liu", "They look great"), ("Zhang San", "3pm works for me")]],
    ),
    (
        "web_search",
        "train",
        [
            {"query": q}
            for q in ["weather tomorrow", "pasta recipe", "train to shanghai", "football scores", "coffee near me"]
        ],
    ),
    ("web_search", "heldout", [{"query": q} for q in ["museum opening hours", "how to tie a tie", "exchange rate"]]),
    ("open_result", "train", [{"query": q} for q in ["flight status", "yoga for beginners", "weather tomorrow"]]),
    ("open_result", "heldout", [{"query": q} for q in ["exchange rate"]]),
    (
        "play_song",
        "train",
        [
            {"song": s}
            for s in _songs(
                "Blue Avenue",
                "City Rain",
                "Slow Motion",
                "Wild Honey",
                "Glass Houses",
                "Open Road",
                "River Song",
                "Paper Planes",
                "Homecoming",
            )
        ],
    ),
    ("play_song", "heldout", [{"song": s} for s in _songs("Golden Hour", "Tidal", "Midnight Drive", "Window Seat")]),
    ("like_photo", "train", [{"photo": p} for p in ["Beach", "Cat", "Sunset", "Forest", "Snow", "Bridge"]]),
    ("like_photo", "heldout", [{"photo": p} for p in ["Mountains", "Dog", "Lake"]]),
    (
        "favorite_contact",
        "train",
        [{"contact": c} for c in ["Aaron Park", "Diego Ruiz", "Julia Rossi", "Maria Silva", "Priya Shah"]],
    ),
    ("favorite_contact", "heldout", [{"contact": c} for c in ["Farah Khan", "Kofi Mensah", "Olivia Brown"]]),
    (
        "setting_then_song",
        "train",
        [
            {"setting": s, "on": on, "song": _song_of(t)}
            for s, on, t in [
                ("bluetooth", True, "Orange Sky"),
                ("dark_mode", True, "Satellites"),
                ("vibrate", False, "Starlight"),
                ("location", False, "Morning Light"),
            ]
        ],
    ),
    # held out whole: its parts are trained, the combination is not
    (
        "setting_then_message",
        "heldout",
        [
            {"setting": s, "on": on, "contact": c, "text": t}
            for s, on, c, t in [
                ("do_not_disturb", True, "Noah Kim", "Busy, call you later"),
                ("dark_mode", True, "Wang Fang", "Good night"),
                ("battery_saver", True, "Mom", "Phone battery is low"),
            ]
        ],
    ),
    # combos: each value below is in training tasks (the comment says where), this pairing is in none
    ("favorite_contact", "combos", [{"contact": c} for c in ["Dana Lee", "Li Na", "Sam Taylor"]]),  # send_message
    ("play_song", "combos", [{"song": s} for s in _songs("Orange Sky", "Satellites", "Starlight")]),  # after a setting
    ("open_app", "combos", [{"app": a} for a in [CONTACTS_APP, MESSAGES_APP, MUSIC_APP]]),  # launched in other tasks
    (
        "setting_then_song",
        "combos",
        [
            {"setting": s, "on": on, "song": _song_of(t)}
            for s, on, t in [("wifi", False, "Blue Avenue"), ("battery_saver", True, "City Rain")]
        ],
    ),  # toggle_setting, play_song
    (
        "send_message",
        "combos",
        [{"contact": c, "text": t} for c, t in [("Priya Shah", "Got it"), ("Diego Ruiz", "Happy birthday!")]],
    ),  # favorite_contact; send_message's texts
    ("web_search", "combos", [{"query": "flight status"}]),  # open_result's query
    ("open_result", "combos", [{"query": "pasta recipe"}]),  # web_search's query
]
TASKS: list[PhoneTask] = [make_task(name, params, split) for name, split, values in _BUILTIN for params in values]


# ---- the perturbed split: training tasks on phones whose screens no demonstration shows -------------------------
PERTURBATIONS = ("popup", "slow", "renamed", "shuffled")
# what a phone of another maker or version calls the same buttons (WLAN: what Chinese Android phones call Wi-Fi)
RENAMED = (
    ("Wi-Fi", "WLAN"),
    ("Bluetooth", "BT"),
    ("Dark mode", "Dark theme"),
    ("Display", "Screen"),
    ("Message", "Chat"),
    ("Message box", "Write a message"),
    ("Send", "Post"),
    ("Go", "Search"),
    ("Search box", "Address bar"),
    ("Add to favorites", "Star contact"),
    ("Like", "Love"),
)
PERTURBED_PER_TEMPLATE = 2


def perturbed(task: PhoneTask, kind: str) -> PhoneTask:
    """``task`` on a phone perturbed by ``kind`` (``PERTURBATIONS``): ``popup`` (each app of the task greets its
    first opening with a pop-up), ``slow`` (each app of the task loads before it shows anything: a Wait),
    ``renamed`` (``RENAMED``'s buttons under other names), ``shuffled`` (the launcher, the photos, the songs, the
    conversations and Settings' rows in another order, drawn from the task's id). Its id is
    ``perturbed/KIND/<task id>``, its split ``perturbed``."""
    import dataclasses
    import random

    c = task.phone
    if kind == "popup":
        phone = dataclasses.replace(c, perturbation=Perturbation(popups=task.apps))
    elif kind == "slow":
        phone = dataclasses.replace(c, perturbation=Perturbation(slow=task.apps))
    elif kind == "renamed":
        phone = dataclasses.replace(c, perturbation=Perturbation(renamed=RENAMED))
    elif kind == "shuffled":
        rng = random.Random(task.id)
        shuffled = lambda values: tuple(rng.sample(list(values), len(values)))  # noqa: E731
        rows = [k for k, (_, where) in TOGGLES.items() if where == SETTINGS_APP] + list(SETTINGS_PAGES)
        phone = dataclasses.replace(
            c,
            apps=shuffled(c.apps),
            photos=shuffled(c.photos),
            songs=shuffled(c.songs),
            threads=shuffled(c.threads),
            perturbation=Perturbation(settings_order=shuffled(rows)),
        )
    else:
        raise ValueError(f"unknown perturbation {kind!r}: give one of {', '.join(PERTURBATIONS)}")
    return PhoneTask(f"perturbed/{kind}/{task.id}", task.template, dict(task.params), "perturbed", phone)


def perturbed_tasks() -> list[PhoneTask]:
    """The ``perturbed`` split: the first ``PERTURBED_PER_TEMPLATE`` training tasks of each template, each on a phone
    of another perturbation (turning through ``PERTURBATIONS``: every kind five times, no template twice the same)."""
    out = []
    templates = list(dict.fromkeys(t.template for t in TASKS if t.split == "train"))
    for k, template in enumerate(templates):
        base = [t for t in TASKS if t.split == "train" and t.template == template][:PERTURBED_PER_TEMPLATE]
        out += [perturbed(t, PERTURBATIONS[(k + 2 * j) % len(PERTURBATIONS)]) for j, t in enumerate(base)]
    return out


PERTURBED_TASKS: list[PhoneTask] = perturbed_tasks()


class TaskFileError(ValueError):
    """A bad row of a task file, at file:line."""


def load_task_file(path: str | Path) -> list[PhoneTask]:
    """The tasks of a JSONL task file: ``{"template": NAME, <its parameters>, "id"?: ..., "split"?: ...}`` or
    ``{"instruction": "...", "id"?: ..., "split"?: ...}`` (free form) a line."""
    path = Path(path)
    try:
        lines = list(jsonl_lines(path))
    except UnreadableFile as err:
        raise TaskFileError(f"{path}: cannot read the task file: {err.reason}") from None
    tasks, seen = [], {}
    for line in lines:
        number, row = line.number, line.value
        try:
            if line.error is not None:
                raise ValueError(line.error)
            if not isinstance(row, dict):
                raise ValueError('a row is a JSON object such as {"template": "open_app", "app": "Settings"}')
            row = dict(row)
            template = row.pop("template", None)
            if template is None and "instruction" in row:
                extra = sorted(set(row) - {"instruction", "id", "split"})
                if extra:
                    raise ValueError(
                        f"a free-form row takes 'instruction' (and 'id', 'split'); unknown {', '.join(extra)}"
                    )
                task = free_form_task(row["instruction"], row.get("split", "train"), row.get("id"))
            elif template is None:
                raise ValueError(
                    f"no 'template': give one of {', '.join(TEMPLATES)}, or your own task in words as "
                    '{"instruction": "..."} (a real phone\'s task: no simulator checks)'
                )
            else:
                task = make_task(
                    template,
                    {k: v for k, v in row.items() if k not in ("id", "split")},
                    row.get("split", "train"),
                    row.get("id"),
                )
        except ValueError as err:
            raise TaskFileError(f"{path}:{number}: {err}") from None
        if task.id in seen:
            raise TaskFileError(
                f"{path}:{number}: task id {task.id!r} already used on line {seen[task.id]}: give the row its own 'id'"
            )
        seen[task.id] = number
        tasks.append(task)
    if not tasks:
        raise TaskFileError(f"{path}: no tasks in the file")
    return tasks


# ``more:COUNT:SEED`` in a task spec: further training tasks (``more_training_tasks``) with this share on phones of
# new names, as the text agent's training rows have them (seed 0: those very tasks; another seed: a new draw)
MORE_FRESH_SHARE = 0.75
_MORE_SPEC = re.compile(r"more:(\d+)(?::(\d+))?")


def select_tasks(spec: str, tasks: list[PhoneTask] | None = None) -> list[PhoneTask]:
    """Tasks named by ``spec``: ``all`` (the built-in tasks: train, heldout and combos), a split (``train``,
    ``heldout``, ``combos``, or ``perturbed``: ``PERTURBED_TASKS``, which share their instructions with training
    tasks and so are asked for by name, never by ``all``), a template, a task id,
    ``more:COUNT[:SEED]`` (COUNT further training tasks, ``more_training_tasks`` with ``MORE_FRESH_SHARE`` of them on
    phones of new names; SEED 0, the default, draws the text agent's training tasks, another seed tasks it never
    trained on, never a held-out value), or several of these separated by commas; or a task file (``.jsonl``).
    ValueError naming what is unknown and what is known."""
    if spec.endswith(".jsonl") or Path(spec).is_file():
        return load_task_file(spec)
    pool = TASKS if tasks is None else tasks
    named = pool + PERTURBED_TASKS if tasks is None else pool  # what a split or an id may name
    chosen: dict[str, PhoneTask] = {}
    for part in [p.strip() for p in spec.split(",") if p.strip()]:
        more = _MORE_SPEC.fullmatch(part)
        if more:
            found = more_training_tasks(int(more.group(1)), int(more.group(2) or 0), MORE_FRESH_SHARE)
            if not found:
                raise ValueError(f"{part!r} selects no tasks: give more:COUNT[:SEED] with COUNT >= 1")
        elif part == "all":
            found = pool
        elif part in SPLITS:
            found = [t for t in named if t.split == part]
        elif part in TEMPLATES:
            found = [t for t in pool if t.template == part]
        else:
            found = [t for t in named if t.id == part]
            if not found:
                raise ValueError(
                    f"unknown tasks {part!r}: give all, {', '.join(SPLITS)}, a template "
                    f"({', '.join(TEMPLATES)}), a task id (e.g. {pool[0].id}), more:COUNT[:SEED] "
                    "or a .jsonl task file"
                )
        chosen.update((t.id, t) for t in found)
    if not chosen:
        raise ValueError(f"no tasks selected by {spec!r}")
    return list(chosen.values())


# ---- more training tasks: as many as a model needs, never a held-out value ------------------------------------
_WORDS = (
    "apple bag blue book bread call car cat city coffee cold day dinner door dog early email film find fish "
    "friday garden gift good green happy help home hot house idea jacket key late later lunch map market "
    "milk money monday moon morning music new night note ok open orange park party pay phone photo pizza "
    "plan quick rain ready red road run school see shop sleep slow snow soon sorry sport station study "
    "sun sure table taxi tea thanks ticket time today tonight train trip walk wait water week window work "
    "yes yellow"
).split()
# More words, so that a model trained on these messages must copy what the task says rather than recall a phrase it
# has seen (held-out messages and queries are made of other words, and names it has never read).
_MORE_WORDS = (
    "about after again air all almost along also always animal answer april arrive ask aunt autumn away "
    "baby back bake band bank basket beach bed before begin best better bike bird birthday black boat "
    "bottle box boy bring brother brown build bus busy buy cake camera camp cancel card care carry cheap "
    "cheese chicken child class clean clock close cloud coat come cook corner could cousin cream cup "
    "dance dark date dear desk doctor done down dream dress drink drive each east eat egg empty end enjoy "
    "evening every face fall family far farm fast father feel fine finish fire first floor flower fly food "
    "forest forget free fresh friend front fruit full fun game gate girl give glass go gold grand grass "
    "great group grow guess hair half hall hand hat have hear heavy hello here hill hold holiday hope horse "
    "hour hungry ice inside island join juice jump just keep kind kitchen knock know lake lamp large last "
    "laugh leave left lemon letter library light like line listen little long look lost love lucky make "
    "many march meet message minute mirror miss moment month more mother move much museum name near need "
    "never next nice noon north number ocean office old only other outside page paint paper pass pen "
    "people piano picture place plant play please pocket post print quiet radio read remember rest rice "
    "right river room round safe salt same sand save say sea seat send seven share shirt shoe short show "
    "sing sister sit six sky small smile soup south space speak spring star start stay still stone stop "
    "store story street strong summer sweet swim talk tall team tell ten thank thing think three tired "
    "together tomorrow top town toy tree true try turn two uncle under until up visit voice wake want warm "
    "wash watch way wear west wet white wide win wind winter wish with wood word world write year young"
).split()


def _phrase_of(rng, capitalize: bool, words_held: set) -> str:
    words = rng.sample([w for w in _WORDS + _MORE_WORDS if w not in words_held], rng.randint(1, 4))
    number = str(rng.randint(1, 12)) + rng.choice(["", "", "pm", "am"])
    if rng.random() < 0.15 and number not in words_held:  # numbers too, as messages have them
        words.insert(rng.randrange(len(words) + 1), number)
    text = " ".join(words)
    return text.capitalize() if capitalize else text


def _pairing(template: str, params: dict) -> tuple:
    """What makes a task the combination it is: its template and values, a message's text aside (texts are made
    up anew for more training tasks) and a query kept (the query is the task)."""
    return (template,) + tuple(sorted((k, str(v)) for k, v in params.items() if k != "text"))


def more_training_tasks(count: int, seed: int = 0, fresh_phones: float = 0.0) -> list[PhoneTask]:
    """``count`` training tasks beyond the built-in ones, for a model that needs more trajectories than 60 tasks
    give: the templates (``setting_then_message`` is held out whole) over values no held-out task uses, in any
    template (settings: none that ``toggle_setting`` holds out), with new messages and queries made of common
    words that no held-out message or query holds, and no pairing of a ``combos`` task (its values, yes).
    A ``fresh_phones`` share of them (drawn at random) run on phones of new names (``phone.fresh``), naming those:
    tasks a model solves only by reading the screen. Deterministic for a ``seed`` (with 0, the default, the tasks
    are those of earlier versions, on the default phone); ids ``more/N`` (seed 0) or ``more-SEED/N``."""
    import random

    from .fresh import fresh_phone

    rng = random.Random(seed)
    phones = random.Random(f"{seed}/phones")  # its own stream: the share changes which phones, not the tasks' draws
    held: dict[str, set] = {}
    # a combos task's values stay in training; its own pairing must not (template and parameters, the text aside)
    held_pairs = {_pairing(t.template, t.params) for t in TASKS if t.split == "combos"}
    for t in TASKS:
        if t.split == "heldout":
            for name, value in t.params.items():
                if name not in ("on", "setting") or t.template == "toggle_setting" and name == "setting":
                    held.setdefault(name, set()).add(value)

    # no word of a held-out message or query either: copying it into Type is then something the model must do
    words_held = {w.strip(",.?!'").lower() for name in ("text", "query") for v in held.get(name, ()) for w in v.split()}

    def pick(template: str, name: str, values) -> object:
        return rng.choice([v for v in values if v not in held.get(name, set())])

    def params_of(template: str, c: PhoneContents) -> dict:
        if template == "open_app":
            return {"app": pick(template, "app", c.apps)}
        if template in ("toggle_setting", "setting_then_song"):  # 'on' is held out both ways: the setting decides
            extra = {"song": pick(template, "song", c.songs)} if template == "setting_then_song" else {}
            return {"setting": pick(template, "setting", list(TOGGLES)), "on": rng.random() < 0.5, **extra}
        if template == "send_message":
            return {"contact": pick(template, "contact", c.contacts), "text": _phrase_of(rng, True, words_held)}
        if template == "reply_message":
            return {
                "contact": pick(template, "contact", [who for who, _ in c.threads]),
                "text": _phrase_of(rng, True, words_held),
            }
        if template in ("web_search", "open_result"):
            return {"query": _phrase_of(rng, False, words_held)}
        if template == "play_song":
            return {"song": pick(template, "song", c.songs)}
        if template == "like_photo":
            return {"photo": pick(template, "photo", c.photos)}
        return {
            "contact": pick(template, "contact", [n for n in c.contacts if n not in c.favorites])
        }  # favorite_contact

    templates = [name for name in TEMPLATES if name != "setting_then_message"]
    prefix = "more" if seed == 0 else f"more-{seed}"  # ids of two draws never collide
    tasks = []
    phone_of = {t.instruction: t.phone for t in TASKS}  # an instruction means one task (the oracle finds it by it)
    while len(tasks) < count:
        template = templates[len(tasks) % len(templates)]
        phone = fresh_phone(phones) if phones.random() < fresh_phones else DEFAULT_CONTENTS
        params = params_of(template, phone)
        if any(params.get(k) in held.get(k, ()) for k in ("text", "query")):
            continue  # a generated text or query that happens to be held out
        if _pairing(template, params) in held_pairs:
            continue  # a combos task's pairing
        instruction = TEMPLATES[template].instruction(params)
        if phone_of.setdefault(instruction, phone) != phone:
            continue  # the same words on another phone ("Open Settings" elsewhere on its launcher)
        tasks.append(make_task(template, params, "train", f"{prefix}/{len(tasks) + 1}", phone))
    return tasks
