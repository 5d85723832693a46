#!/usr/bin/env python3
"""Build and check data_samples/phone_screens/: synthetic phone screenshots (drawn with PIL) and tasks whose
answers are one AutoGLM-Phone action with a short reasoning, as the model writes it for Open-AutoGLM's runtime:
``<think>...</think>\n<answer>do(...)`` (no closing tag: ``workbench.phone.conversation.assistant_target``).

    python data_samples/make_phone_screens.py                      # rewrite phone_screens/ (112x252 images), then check
    python data_samples/make_phone_screens.py --check              # only check the files on disk
    python data_samples/make_phone_screens.py --size 1080x2400 --out /tmp/screens_full   # the same rows, phone resolution

Screens are laid out on AutoGLM-Phone's 0-999 grid and drawn at any size, so the rows (and their
coordinates) are the same at every resolution. Four kinds: home screens with labelled app icons, a settings
list, a chat screen and an app with a search box (the last two unfocused -> Tap the field, or focused with the
keyboard open -> Type). Every Tap target is the centre of the element it names, inside the drawn element;
``meta.target_box`` keeps that element's box for notebooks and scorers. Held-out rows use screens that no
training row shows. Deterministic: no randomness, fixed layouts, PNGs written by PIL.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from PIL import Image

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run from a checkout: the workbench package beside data_samples/
from workbench.phone.screen import GRID, Screen, keyboard, parse_size, status_bar  # noqa: E402

OUT = HERE / "phone_screens"
SMALL = (112, 252)  # 4x9 merged patches for GLM-4.1V's processor: 36 image tokens, seconds on a CPU

APPS = [
    "WeChat",
    "Settings",
    "Maps",
    "Chrome",
    "Camera",
    "Clock",
    "Alipay",
    "Music",
    "Photos",
    "Mail",
    "Notes",
    "Phone",
    "Weather",
    "Files",
    "Shop",
    "Video",
    "Calendar",
    "Books",
    "Health",
    "Wallet",
    "Taxi",
    "Food",
    "News",
    "Translate",
]
COLORS = [
    (52, 168, 83),
    (95, 99, 104),
    (66, 133, 244),
    (251, 188, 5),
    (60, 60, 60),
    (234, 67, 53),
    (22, 119, 255),
    (236, 64, 122),
    (255, 112, 67),
    (41, 98, 255),
    (255, 202, 40),
    (0, 150, 136),
    (3, 169, 244),
    (121, 85, 72),
    (255, 87, 34),
    (156, 39, 176),
    (229, 57, 53),
    (109, 76, 65),
    (233, 30, 99),
    (38, 50, 56),
    (255, 193, 7),
    (244, 81, 30),
    (63, 81, 181),
    (0, 188, 212),
]
SETTINGS = [
    "Wi-Fi",
    "Bluetooth",
    "Display",
    "Sound",
    "Notifications",
    "Battery",
    "Storage",
    "Privacy",
    "Apps",
    "About phone",
]
CONTACTS = ["Alice", "Bob", "Chen Wei", "Dana", "Li Na", "Mom", "Sam", "Zhang San", "Team", "Wang Fang"]
REPLIES = ["On my way", "See you at 7", "Thanks!", "I'll call you later", "Sounds good", "Running 10 min late"]
SEARCH_APPS = [
    ("Maps", ["coffee near me", "train station", "gas station"]),
    ("Shop", ["bluetooth earbuds", "phone case", "running shoes"]),
    ("Music", ["jazz playlist", "lo-fi beats", "piano covers"]),
    ("Video", ["cooking videos", "news today", "cat videos"]),
    ("Food", ["milk tea", "noodles", "pizza"]),
    ("Books", ["science fiction", "history of rome", "poetry"]),
    ("Taxi", ["airport", "city library", "central park"]),
    ("News", ["weather storm", "football scores", "stock market"]),
    ("Mail", ["invoice", "flight booking", "meeting notes"]),
    ("Notes", ["shopping list", "passwords", "ideas"]),
]


# ---------------------------------------------------------------------------------------------------------
# Screens: drawing ops on the 0-999 grid and named elements (boxes) that tasks can target (workbench.phone.screen)
# ---------------------------------------------------------------------------------------------------------
def home_screen(index: int) -> Screen:
    s = Screen(f"home_{index:02d}", background=(30 + 8 * (index % 5), 60 + 10 * (index % 3), 110 + 12 * (index % 4)))
    status_bar(s, dark=True)
    apps = [APPS[(index * 5 + k) % len(APPS)] for k in range(12)]
    for k, app in enumerate(apps):  # 4 columns x 3 rows of icons with labels
        col, row = k % 4, k // 4
        x1, y1 = 50 + col * 235, 110 + row * 190
        box = (x1, y1, x1 + 195, y1 + 95)
        color = COLORS[APPS.index(app)]
        s.rect(box, color, radius=40, element=app)
        s.text(((box[0] + box[2]) // 2, (box[1] + box[3]) // 2), app[0], 40, (255, 255, 255), anchor="mm")
        s.text(((box[0] + box[2]) // 2, box[3] + 14), app, 17, (255, 255, 255), anchor="ma")
    s.rect((120, 900, 880, 960), (255, 255, 255), radius=30)
    return s


def settings_screen(index: int) -> Screen:
    s = Screen(f"settings_{index:02d}")
    status_bar(s)
    s.text((50, 70), "Settings", 40)
    items = [SETTINGS[(index * 3 + k) % len(SETTINGS)] for k in range(7)]
    for k, item in enumerate(items):
        y1 = 150 + k * 115
        box = (30, y1, 970, y1 + 100)
        s.rect(box, (255, 255, 255), radius=20, outline=(220, 220, 225), element=item)
        s.rect((60, y1 + 25, 110, y1 + 75), COLORS[(k + index) % len(COLORS)], radius=12)
        s.text((140, y1 + 50), item, 30, anchor="lm")
        s.text((930, y1 + 50), ">", 30, (150, 150, 150), anchor="rm")
    return s


def chat_screen(index: int, focused: bool) -> Screen:
    contact = CONTACTS[index % len(CONTACTS)]
    s = Screen(f"chat_{index:02d}_{'typing' if focused else 'idle'}", background=(237, 237, 237))
    status_bar(s)
    s.rect((0, 50, 1000, 130), (247, 247, 247))
    s.text((500, 90), contact, 32, anchor="mm")
    s.text((40, 90), "<", 32, anchor="lm")
    for k in range(3):  # a few message bubbles, alternating sides
        y1 = 170 + k * 110
        box = (40, y1, 600, y1 + 80) if k % 2 == 0 else (400, y1, 960, y1 + 80)
        s.rect(box, (255, 255, 255) if k % 2 == 0 else (149, 236, 105), radius=18)
        s.text((box[0] + 25, y1 + 40), ["Hi!", "Hello", "Are you coming?"][k], 26, anchor="lm")
    bottom = 560 if focused else 880
    s.rect((0, bottom - 20, 1000, bottom + 110), (247, 247, 247))
    s.rect(
        (40, bottom, 780, bottom + 90),
        (255, 255, 255),
        radius=16,
        outline=(66, 133, 244) if focused else None,
        element="message box",
    )
    s.text((70, bottom + 45), "|" if focused else "Message", 26, (150, 150, 150), anchor="lm")
    s.rect((810, bottom, 960, bottom + 90), (7, 193, 96), radius=16, element="Send")
    s.text((885, bottom + 45), "Send", 24, (255, 255, 255), anchor="mm")
    if focused:
        keyboard(s)
    return s


def search_screen(index: int, focused: bool) -> Screen:
    app, _ = SEARCH_APPS[index % len(SEARCH_APPS)]
    s = Screen(f"search_{index:02d}_{'typing' if focused else 'idle'}")
    status_bar(s)
    s.rect((0, 50, 1000, 140), COLORS[APPS.index(app)])
    s.text((50, 95), app, 36, (255, 255, 255), anchor="lm")
    s.rect(
        (40, 170, 960, 260),
        (255, 255, 255),
        radius=40,
        outline=(66, 133, 244) if focused else (200, 200, 200),
        element="search box",
    )
    s.text((90, 215), "|" if focused else f"Search {app}", 28, (140, 140, 140), anchor="lm")
    for k in range(3 if focused else 5):  # content cards below the search box
        y1 = 300 + k * 130
        s.rect((40, y1, 960, y1 + 110), (255, 255, 255), radius=16)
        s.rect((60, y1 + 15, 160, y1 + 95), (210, 215, 225), radius=10)
        s.rect((190, y1 + 30, 700 - 60 * k, y1 + 50), (200, 200, 205))
        s.rect((190, y1 + 65, 560, y1 + 80), (225, 225, 228))
    if focused:
        keyboard(s)
    return s


# ---------------------------------------------------------------------------------------------------------
# Tasks and rows
# ---------------------------------------------------------------------------------------------------------
def centre(box) -> list[int]:
    return [(box[0] + box[2]) // 2, (box[1] + box[3]) // 2]


def tap(screen: Screen, element: str, task: str, why: str) -> dict:
    box = screen.elements[element]
    x, y = centre(box)
    return {
        "screen": screen,
        "task": task,
        "target_box": list(box),
        "answer": f'<think>{why}</think>\n<answer>do(action="Tap", element=[{x},{y}])',
    }


def type_text(screen: Screen, text: str, task: str, why: str) -> dict:
    return {
        "screen": screen,
        "task": task,
        "target_box": None,
        "answer": f'<think>{why}</think>\n<answer>do(action="Type", text="{text}")',
    }


OPEN_PHRASES = ["Open {app}", "Launch {app}", "Start the {app} app", "Go to {app}"]


def all_tasks() -> list[tuple[str, dict]]:
    """(split, task) for every row, in a fixed order. Held out: screens 0 of each kind."""
    tasks = []
    for i in range(12):
        s = home_screen(i)
        split = "heldout" if i in (0, 6) else "train"
        apps = list(s.elements)
        for k in range(9):
            app = apps[(k * 5 + i) % len(apps)]
            phrase = OPEN_PHRASES[(i + k) % len(OPEN_PHRASES)].format(app=app)
            tasks.append((split, tap(s, app, phrase, f"The {app} icon is on the home screen, so I tap it.")))
    for i in range(5):
        s = settings_screen(i)
        split = "heldout" if i == 0 else "train"
        for k, item in enumerate(list(s.elements)[:6]):
            task = [f"Open {item} settings", f"Show me the {item} page", f"Change {item} options"][k % 3]
            tasks.append((split, tap(s, item, task, f"The Settings list shows {item}; I tap that row.")))
    for i in range(10):
        split = "heldout" if i in (0, 5) else "train"
        contact = CONTACTS[i % len(CONTACTS)]
        idle, typing = chat_screen(i, False), chat_screen(i, True)
        for k in range(2):
            reply = REPLIES[(i + k * 3) % len(REPLIES)]
            task = f"Send '{reply}' to {contact}"
            tasks.append(
                (
                    split,
                    tap(
                        idle,
                        "message box",
                        task,
                        f"The chat with {contact} is open but the message box is not focused; I tap it.",
                    ),
                )
            )
            tasks.append(
                (
                    split,
                    type_text(
                        typing, reply, task, "The message box is focused and the keyboard is open; I type the reply."
                    ),
                )
            )
    for i in range(10):
        split = "heldout" if i in (0, 5) else "train"
        app, queries = SEARCH_APPS[i % len(SEARCH_APPS)]
        idle, typing = search_screen(i, False), search_screen(i, True)
        for k in range(2):
            q = queries[(i + k) % len(queries)]
            task = f"Search for {q} in {app}"
            tasks.append((split, tap(idle, "search box", task, f"{app} is open; I tap its search box first.")))
            tasks.append((split, type_text(typing, q, task, "The search box is focused; I type the query.")))
    return tasks


def to_row(task: dict) -> dict:
    screen = task["screen"]
    return {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": f"images/{screen.name}.png"}},
                    {"type": "text", "text": f"Task: {task['task']}\nWhat is the next action?"},
                ],
            },
            {"role": "assistant", "content": task["answer"]},
        ],
        "meta": {"screen": screen.name, "target_box": task["target_box"]},
    }


def write(out: Path, size: tuple[int, int]) -> None:
    (out / "images").mkdir(parents=True, exist_ok=True)
    tasks = all_tasks()
    screens = {t["screen"].name: t["screen"] for _, t in tasks}
    for name, screen in screens.items():
        screen.draw(size).save(out / "images" / f"{name}.png", optimize=True)
    for split in ("train", "heldout"):
        with open(out / f"{split}.jsonl", "w", encoding="utf-8") as fh:
            for s, t in tasks:
                if s == split:
                    fh.write(json.dumps(to_row(t), ensure_ascii=False) + "\n")


# ---------------------------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------------------------
def check(out: Path) -> list[str]:
    """Problems of the files in ``out`` (empty when fine): counts, actions parse (workbench.phone.actions),
    Tap targets inside their element both on the grid and in the drawn pixels, held-out screens unseen."""
    from workbench.phone.actions import parse_action, split_answer

    problems, screens = [], {}
    for split, minimum in (("train", 150), ("heldout", 40)):
        rows = [json.loads(line) for line in (out / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()]
        if len(rows) < minimum:
            problems.append(f"{split}: {len(rows)} rows, fewer than {minimum}")
        screens[split] = {r["meta"]["screen"] for r in rows}
        for n, row in enumerate(rows, start=1):
            where = f"{split}.jsonl:{n}"
            image = out / row["messages"][0]["content"][0]["image_url"]["url"]
            if not image.is_file():
                problems.append(f"{where}: missing image {image}")
                continue
            parts = split_answer(row["messages"][1]["content"])
            if not (parts.has_reasoning and parts.has_answer_tag) or row["messages"][1]["content"].endswith(
                "</answer>"
            ):
                problems.append(f"{where}: the answer needs <think>...</think>\\n<answer>do(...), no closing tag")
            action = parse_action(parts.answer)
            box = row["meta"]["target_box"]
            if action.type == "Tap":
                x, y = action.point()
                if not (box and box[0] <= x <= box[2] and box[1] <= y <= box[3]):
                    problems.append(f"{where}: Tap {x},{y} outside its element {box}")
                    continue
                with Image.open(image) as img:  # the drawn element differs from the background at the target
                    w, h = img.size
                    pixel = img.convert("RGB").getpixel((min(w - 1, x * w // GRID), min(h - 1, y * h // GRID)))
                    corner = img.convert("RGB").getpixel(
                        (min(w - 1, (box[0] - 5) * w // GRID) if box[0] > 5 else 0, min(h - 1, y * h // GRID))
                    )
                if pixel == corner and box[0] > 5:
                    problems.append(
                        f"{where}: the pixel at the Tap target looks like the background beside the element"
                    )
    if screens["train"] & screens["heldout"]:
        problems.append(f"held-out screens also in train: {sorted(screens['train'] & screens['heldout'])}")
    return problems


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="only check the files in --out")
    p.add_argument("--size", default=f"{SMALL[0]}x{SMALL[1]}", help="image size WxH (1080x2400: the phone's)")
    p.add_argument("--out", default=str(OUT), help="output folder (default: data_samples/phone_screens)")
    args = p.parse_args()
    out = Path(args.out)
    try:
        size = parse_size(args.size)
    except ValueError as err:
        p.error(f"--size {err}")
    if not args.check:
        write(out, size)
    problems = check(out)
    for line in problems:
        print(line, file=sys.stderr)
    if not problems:
        print(f"{out}: ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
