#!/usr/bin/env python3
"""Build and check data_samples/own_app/: a small recorded set of demonstrations (notebook 09, `workbench eval --task
phone_steps`, docs/own_app.md), so that what needs a person's clicks runs unattended.

    python data_samples/make_own_app.py            # rewrite own_app/, then check it
    python data_samples/make_own_app.py --check    # only check the files on disk

The demonstrations are of the held-out tasks of two families the trained agents fail (docs/agent.md): a setting no
training task names (`toggle_setting`, held-out values) and a setting, then a message (`setting_then_message`, held
out whole). They are recorded through the same plain-Python API the recorder panel calls
(``workbench.agent.demonstrate.Demonstrator``), one call per click: each tap at a point inside the element a person
means, off its centre as a finger lands (drawn from a fixed seed), with a thought in a person's words, on the
simulated phone at 112x252 (the screenshot agent's screens), with a fixed date. Every demonstration passes its task's
final-state checks.

    own_app/demonstrations/   the episodes (episodes.jsonl, screens/): what the panel saves
    own_app/train.jsonl       rows of the demonstrations to train on (TRAIN_TASKS), screenshots in own_app/images/
    own_app/heldout.jsonl     rows of the others: the step metrics' default data (workbench eval --task phone_steps)
    own_app/train_tree.jsonl, heldout_tree.jsonl   the same steps with the screen as text (ui_tree), for text models

Rows come from the one recorder of rows (``agent.record.record_rows``), so a change of the runtime format reaches them
by running this script again (its check fails until then).
"""

from __future__ import annotations

import argparse
import datetime
import filecmp
import json
import random
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run from a checkout: the workbench package beside data_samples/
from workbench.agent.demonstrate import Demonstrator  # noqa: E402
from workbench.data.check import check_file  # noqa: E402
from workbench.phone.sim import SimPhone  # noqa: E402

OUT = HERE / "own_app"
SIZE = (112, 252)  # the screenshot agent's screens (tiny-glm4v-agent: 36 image tokens)
DATE = datetime.date(2026, 12, 1)  # the system prompt's date line, fixed so the files do not change by the day
SEED = 0  # where in each element a tap lands

# What a person did, step by step: (gesture, what, thought). tap: an element's name on the screen on show; launch: an
# app; swipe: a direction; type: the text; finish: the message.
DEMONSTRATIONS = {
    "toggle_setting/do-not-disturb-on": [
        ("launch", "Settings", "Do not disturb is a phone setting, so I open Settings."),
        ("tap", "Sound", "It is not on the main list; it belongs with the sound options, so I open Sound."),
        ("tap", "Do not disturb", "There it is, switched off. I tap it to turn it on."),
        ("finish", "Do not disturb is on.", "The switch says On now."),
    ],
    "toggle_setting/large-text-on": [
        ("launch", "Settings", "Large text is a setting: I open Settings."),
        ("tap", "Display", "Text size is a display option, so I go to Display."),
        ("tap", "Large text", "Large text is off; I tap its row to switch it on."),
        ("finish", "Large text is on.", "Large text now reads On."),
    ],
    "toggle_setting/auto-brightness-off": [
        ("launch", "Settings", "Brightness is set in Settings, so I open it."),
        ("tap", "Display", "Brightness belongs to the display; I open Display."),
        ("tap", "Auto brightness", "Auto brightness is on; one tap turns it off."),
        ("finish", "Auto brightness is off.", "It shows Off now, which is what was asked."),
    ],
    "toggle_setting/airplane-on": [
        ("launch", "Settings", "Airplane mode is a setting; I open Settings."),
        ("tap", "Airplane mode", "Airplane mode is right on the main list and it is off; I tap it."),
        ("finish", "Airplane mode is on.", "Airplane mode shows On."),
    ],
    "setting_then_message/battery-saver-on-mom-phone-battery-is-low": [
        ("launch", "Settings", "First the setting: Battery saver is in Settings."),
        ("tap", "Battery", "Battery saver lives on the Battery page."),
        ("tap", "Battery saver", "It is off; I tap it to turn it on."),
        ("launch", "Contacts", "Setting done. Now the message to Mom: I find her in Contacts."),
        ("swipe", "up", "Mom is further down the list; I scroll."),
        ("swipe", "up", "Not yet; I scroll again."),
        ("tap", "Mom", "Mom is on screen now; I open her card."),
        ("tap", "Message", "I start a message from her card."),
        ("tap", "Message box", "I tap the message box to type."),
        ("type", "Phone battery is low", "I type the message."),
        ("tap", "Send", "The text is in the box; I send it."),
        ("finish", "Battery saver is on and Mom got 'Phone battery is low'.", "Both parts are done."),
    ],
    "setting_then_message/dark-mode-on-wang-fang-good-night": [
        ("launch", "Settings", "Dark mode first; it is a Settings option."),
        ("tap", "Display", "Dark mode is a display option."),
        ("tap", "Dark mode", "Dark mode is off; I tap it."),
        ("launch", "Contacts", "Now the message: Wang Fang is in my contacts."),
        ("swipe", "up", "The list is alphabetical and Wang Fang is near the end; I scroll."),
        ("swipe", "up", "Still not there; scrolling on."),
        ("swipe", "up", "Once more."),
        ("tap", "Wang Fang", "Wang Fang is visible; I open the card."),
        ("tap", "Message", "I tap Message to open the chat."),
        ("tap", "Message box", "I tap the box to write."),
        ("type", "Good night", "I type the text."),
        ("tap", "Send", "I send it."),
        ("finish", "Dark mode is on and 'Good night' went to Wang Fang.", "Dark mode is on and the message is sent."),
    ],
    "setting_then_message/do-not-disturb-on-noah-kim-busy-call-you-later": [
        ("launch", "Settings", "The setting first: Do not disturb, in Settings."),
        ("tap", "Sound", "Do not disturb is with the sound options."),
        ("tap", "Do not disturb", "It is off; I switch it on."),
        ("launch", "Contacts", "Now Noah Kim: I open Contacts."),
        ("swipe", "up", "N is further down; I scroll."),
        ("swipe", "up", "A little further."),
        ("tap", "Noah Kim", "Noah Kim is on screen; I open the card."),
        ("tap", "Message", "I open the chat from the card."),
        ("tap", "Message box", "I tap the message box."),
        ("type", "Busy, call you later", "I type the message."),
        ("tap", "Send", "I send it."),
        ("finish", "Do not disturb is on; Noah Kim got 'Busy, call you later'.", "Both are done."),
    ],
}
# The demonstrations a run trains on; the others are held out for the step metrics (one family member of each kind)
TRAIN_TASKS = (
    "toggle_setting/do-not-disturb-on",
    "toggle_setting/large-text-on",
    "setting_then_message/battery-saver-on-mom-phone-battery-is-low",
)
FILES = {
    "train": ("train.jsonl", "screenshot"),
    "heldout": ("heldout.jsonl", "screenshot"),
    "train_tree": ("train_tree.jsonl", "ui_tree"),
    "heldout_tree": ("heldout_tree.jsonl", "ui_tree"),
}


def _point(box, rng: random.Random) -> list[int]:
    """Where a finger lands in ``box``: inside it, between 30% and 70% of its width and height."""
    x1, y1, x2, y2 = box
    return [round(x1 + (x2 - x1) * rng.uniform(0.3, 0.7)), round(y1 + (y2 - y1) * rng.uniform(0.3, 0.7))]


def demonstrate(folder: Path) -> None:
    """Record every demonstration of DEMONSTRATIONS into ``folder`` through the Demonstrator, as clicks."""
    phone = SimPhone(SIZE)
    recorder = Demonstrator(folder, phone, date=DATE)
    for task, steps in DEMONSTRATIONS.items():
        rng = random.Random(f"{SEED}:{task}")
        recorder.start(task)
        for kind, what, thought in steps:
            if kind == "tap":
                elements = phone.screen().elements
                if what not in elements:
                    raise SystemExit(f"{task}: no element {what!r} on {phone.current_app()}: {sorted(elements)}")
                recorder.tap(*_point(elements[what], rng), thought)
            elif kind == "launch":
                recorder.launch(what, thought)
            elif kind == "swipe":
                recorder.swipe_direction(what, thought)
            elif kind == "type":
                recorder.type_text(what, thought)
            else:
                episode = recorder.finish(what, thought)
                if not episode.success:
                    raise SystemExit(f"{task}: the demonstration fails its checks {episode.checks}")


def write(out: Path, verbose: bool = True) -> None:
    shutil.rmtree(out, ignore_errors=True)
    demonstrate(out / "demonstrations")
    recorder = Demonstrator(out / "demonstrations")
    for name, (file, observation) in FILES.items():
        held = name.startswith("heldout")
        tasks = [t for t in DEMONSTRATIONS if (t in TRAIN_TASKS) != held]
        result = recorder.write_rows(out / file, observation, tasks=tasks)
        if verbose:
            print(f"{file}: {result.rows} rows from {result.episodes} demonstrations")


def check(out: Path) -> list[str]:
    """Problems of the files in ``out``: each passes ``workbench data check``, the train and held-out files hold
    their own tasks, and a rewrite gives the same bytes."""
    problems = []
    for name, (file, observation) in FILES.items():
        problems += check_file(out / file).problems
        rows = [json.loads(line) for line in (out / file).read_text(encoding="utf-8").splitlines()]
        wanted = {t for t in DEMONSTRATIONS if (t in TRAIN_TASKS) != name.startswith("heldout")}
        if {r["meta"]["task"] for r in rows} != wanted:
            problems.append(f"{file} does not hold the demonstrations of {sorted(wanted)}")
        if {r["meta"].get("observation", "screenshot") for r in rows} != {observation}:
            problems.append(f"{file} holds rows of another observation than {observation}")
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / "own_app"
        write(fresh, verbose=False)
        for path in sorted(p for p in fresh.rglob("*") if p.is_file()):
            mine = out / path.relative_to(fresh)
            if not mine.is_file() or not filecmp.cmp(path, mine, shallow=False):
                problems.append(
                    f"{mine.relative_to(HERE)} differs from a fresh recording: run python data_samples/make_own_app.py"
                )
        extra = {p.relative_to(out) for p in out.rglob("*") if p.is_file()} - {
            p.relative_to(fresh) for p in fresh.rglob("*") if p.is_file()
        }
        problems += [f"{OUT.name}/{p}: not written by a fresh recording (remove it)" for p in sorted(map(str, extra))]
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only check the files on disk")
    args = parser.parse_args()
    if not args.check:
        write(OUT)
    problems = check(OUT)
    for line in problems:
        print(line, file=sys.stderr)
    print(f"{OUT.name}: {'ok' if not problems else f'{len(problems)} problem(s)'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
