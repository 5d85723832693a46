#!/usr/bin/env python3
"""Build and check data_samples/phone_episodes/: the oracle's episodes on the simulated phone, recorded as training
rows in AutoGLM's runtime format (one row per step: the earlier turns as text, the latest screenshot, the reply
with <think>), exactly what ``workbench agent record --oracle`` writes.

    python data_samples/make_phone_episodes.py            # rewrite phone_episodes/ (112x252 screens), then check
    python data_samples/make_phone_episodes.py --check    # only check the files on disk
    python data_samples/make_phone_episodes.py --observation ui_tree   # phone_episodes_tree/: the screens as text

train.jsonl holds the training tasks' episodes, heldout.jsonl the held-out tasks' (workbench.phone.tasks splits them
by template values, and holds one template out whole), combos.jsonl those of the tasks held out as new pairings of
trained values. train_more.jsonl holds the training tasks' and MORE further
training tasks' episodes (``more_training_tasks``: no value a held-out task uses, new messages and queries): the
trajectories the screenshot agent (recipe screenshots-to-actions-tiny-glm4v) learns from; for the text agent three
quarters of the further tasks run on phones of new names (``FRESH_PHONES``, ``workbench.phone.fresh``). Deterministic: a fixed date in the system prompt, the
simulated phone, PNGs written by PIL and named by their content's hash (a screen shown twice is stored once).
With ``--observation ui_tree`` the same episodes are written to phone_episodes_tree/ with each screen as its compact
accessibility tree in the screen info (``workbench.phone.uitree``), no image, and each tap's reasoning ending with the
tapped element's line copied from the tree (``phone.uitree.quoted_target``): what the text agent (recipe
phone-agent-smollm2) learns from.
"""

from __future__ import annotations

import argparse
import datetime
import filecmp
import json
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run from a checkout: the workbench package beside data_samples/
from workbench.agent import OraclePolicy, run_episodes, sim_devices  # noqa: E402
from workbench.agent.record import IMAGES_DIR, record_rows  # noqa: E402
from workbench.data.check import check_file  # noqa: E402
from workbench.phone.tasks import MORE_FRESH_SHARE, more_training_tasks, select_tasks  # noqa: E402

OUTS = {"screenshot": HERE / "phone_episodes", "ui_tree": HERE / "phone_episodes_tree"}
SIZE = (112, 252)  # as phone_screens/: 36 image tokens for GLM-4.1V's processor, seconds on a CPU
DATE = datetime.date(2026, 12, 1)  # the system prompt's date line, fixed so the files do not change by the day
MORE = 480  # further training tasks in train_more.jsonl: enough messages and queries that copying is learned
# The share of those on phones of new names (phone.fresh) for the text agent: a name it must find by reading, not
# by having seen it at one place; a quarter stay on the default phone, whose trained values the combos tasks pair
FRESH_PHONES = {"screenshot": 0.0, "ui_tree": MORE_FRESH_SHARE}
SETS = {
    "train": lambda fresh: select_tasks("train"),
    "heldout": lambda fresh: select_tasks("heldout"),
    "combos": lambda fresh: select_tasks("combos"),
    "train_more": lambda fresh: select_tasks("train") + more_training_tasks(MORE, fresh_phones=fresh),
}


def write(out: Path, verbose: bool = True, observation: str = "screenshot") -> None:
    shutil.rmtree(out / IMAGES_DIR, ignore_errors=True)
    for split, tasks_of in SETS.items():
        tasks = tasks_of(FRESH_PHONES[observation])
        episodes = run_episodes(tasks, OraclePolicy(tasks), sim_devices(SIZE), date=DATE, observation=observation)
        result = record_rows(episodes, out / f"{split}.jsonl")
        if verbose:
            print(f"{split}: {result.rows} rows from {result.episodes} episodes")


def check(out: Path, observation: str = "screenshot") -> list[str]:
    """Problems of the files in ``out``: each row passes ``workbench data check`` (runtime format, actions, taps in
    their element's box, images), the splits hold their own tasks, and a rewrite gives the same bytes."""
    problems = []
    tasks = {}
    for split in SETS:
        report = check_file(out / f"{split}.jsonl")
        problems += report.problems
        rows = [json.loads(line) for line in (out / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()]
        tasks[split] = {r["meta"]["task"] for r in rows}
        if {r["meta"]["split"] for r in rows} != {split.split("_")[0]}:
            problems.append(f"{split}.jsonl holds rows of another split")
        if tasks[split] != {t.id for t in SETS[split](FRESH_PHONES[observation])}:
            problems.append(f"{split}.jsonl does not hold one episode of every {split} task")
        if {r["meta"].get("observation", "screenshot") for r in rows} != {observation}:
            problems.append(f"{split}.jsonl holds rows of another observation than {observation}")
    for held in [s for s in SETS if not s.startswith("train")]:
        if tasks["train"] & tasks[held]:
            problems.append(f"tasks in train and {held}: {sorted(tasks['train'] & tasks[held])}")
    with tempfile.TemporaryDirectory() as tmp:
        write(Path(tmp), verbose=False, observation=observation)
        images = sorted(p.name for p in (Path(tmp) / IMAGES_DIR).iterdir()) if observation != "ui_tree" else []
        for name in [f"{split}.jsonl" for split in SETS] + images:
            path = name if name.endswith(".jsonl") else f"{IMAGES_DIR}/{name}"
            if not (out / path).is_file() or not filecmp.cmp(out / path, Path(tmp) / path, shallow=False):
                problems.append(f"{path} differs from a fresh rewrite: run make_phone_episodes.py")
                break
        if observation == "ui_tree" and (out / IMAGES_DIR).exists():
            problems.append(f"{IMAGES_DIR}/ exists beside ui_tree rows, which show no image: remove it")
        elif observation != "ui_tree" and len(list((out / IMAGES_DIR).iterdir())) != len(
            list((Path(tmp) / IMAGES_DIR).iterdir())
        ):
            problems.append(f"{IMAGES_DIR}/ holds images no row uses: run make_phone_episodes.py")
    return problems


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="only check the files in --out")
    p.add_argument(
        "--observation",
        choices=sorted(OUTS),
        default="screenshot",
        help="what the rows show of each screen (default screenshot)",
    )
    p.add_argument(
        "--out",
        help="output folder (default: data_samples/phone_episodes, with --observation ui_tree "
        "data_samples/phone_episodes_tree)",
    )
    args = p.parse_args()
    out = Path(args.out or OUTS[args.observation])
    if not args.check:
        write(out, observation=args.observation)
    problems = check(out, args.observation)
    for line in problems:
        print(line, file=sys.stderr)
    if not problems:
        size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
        print(f"{out}: ok ({size / 1e6:.1f} MB)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
