#!/usr/bin/env python3
"""Build and check data_samples/phone_episodes_1080/: the AutoGLM-Phone-9B recipes' rows. The oracle's episodes on
the simulated phone at a phone's real resolution (1080x2400) in Open-AutoGLM's runtime format with its Chinese system
prompt (``lang cn``, what AutoGLM-Phone-9B was trained on), exactly what this command writes:

    workbench agent record --oracle --tasks TASKS --size 1080x2400 --lang cn --date 2026-12-01 --out DIR/train.jsonl

    python data_samples/make_phone_episodes_1080.py            # rewrite phone_episodes_1080/, then check
    python data_samples/make_phone_episodes_1080.py --check    # only check the files on disk

Small on purpose (a sample, 1080x2400 PNGs are ~70 KB each): one training task of each template in train.jsonl, four
held-out tasks (new values of four templates; short episodes, so that every row's text stays within the recipes'
2,560 text tokens) in heldout.jsonl. Record as many as
you need the same way (``--tasks train`` is 60 episodes), or from your own app (docs/own_app.md).
"""

from __future__ import annotations

import argparse
import datetime
import filecmp
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run from a checkout: the workbench package beside data_samples/
from workbench.agent import OraclePolicy, run_episodes, sim_devices  # noqa: E402
from workbench.agent.record import IMAGES_DIR, record_rows  # noqa: E402
from workbench.data.check import check_file  # noqa: E402
from workbench.phone.tasks import TASKS, select_tasks  # noqa: E402

OUT = HERE / "phone_episodes_1080"
SIZE, LANG, DATE = (1080, 2400), "cn", datetime.date(2026, 12, 1)
HELDOUT = (
    "open_app/clock",
    "toggle_setting/airplane-on",
    "send_message/chen-wei-meeting-at-noon",
    "like_photo/mountains",
)


def task_ids() -> dict[str, str]:
    """{split file: the --tasks value}: the first training task of each template; HELDOUT."""
    first: dict[str, str] = {}
    for task in TASKS:
        if task.split == "train":
            first.setdefault(task.template, task.id)
    return {"train": ",".join(first.values()), "heldout": ",".join(HELDOUT)}


def write(out: Path, verbose: bool = True) -> None:
    for split, spec in task_ids().items():
        tasks = select_tasks(spec)
        episodes = run_episodes(tasks, OraclePolicy(tasks), sim_devices(SIZE), date=DATE, lang=LANG)
        result = record_rows(episodes, out / f"{split}.jsonl")
        if verbose:
            print(f"{split}: {result.rows} rows from {result.episodes} episodes, {result.images} images")


def check(out: Path) -> list[str]:
    """Each row passes `workbench data check` in the runtime format with lang cn, and a rewrite gives the same bytes."""
    problems = []
    for split in task_ids():
        report = check_file(out / f"{split}.jsonl")
        problems += report.problems
        if set(report.forms) != {"open-autoglm"}:
            problems.append(f"{split}.jsonl: rows in another form than the runtime format: {report.forms_line()}")
    with tempfile.TemporaryDirectory() as tmp:
        write(Path(tmp), verbose=False)
        names = [f"{split}.jsonl" for split in task_ids()]
        names += [f"{IMAGES_DIR}/{p.name}" for p in sorted((Path(tmp) / IMAGES_DIR).iterdir())]
        for name in names:
            if not (out / name).is_file() or not filecmp.cmp(out / name, Path(tmp) / name, shallow=False):
                problems.append(f"{name} differs from a fresh rewrite: run make_phone_episodes_1080.py")
                break
        if len(list((out / IMAGES_DIR).iterdir())) != len(names) - len(task_ids()):
            problems.append(f"{IMAGES_DIR}/ holds images no row uses: run make_phone_episodes_1080.py")
    return problems


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="only check the files in --out")
    p.add_argument("--out", default=str(OUT), help=f"output folder (default {OUT.relative_to(HERE.parent)})")
    args = p.parse_args()
    out = Path(args.out)
    if not args.check:
        write(out)
    problems = check(out)
    for line in problems:
        print(line, file=sys.stderr)
    if not problems:
        size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
        print(f"{out}: ok ({size / 1e6:.1f} MB)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
