#!/usr/bin/env python3
"""Build phone_actions_reasoning/ from phone_actions/: the same rows, each answer in AutoGLM-Phone's output form
``<think>one or two short sentences</think>\n<answer>do(...)`` (as the model writes it for Open-AutoGLM's runtime: no
closing tag).

    python3 data_samples/make_reasoning_samples.py          # rewrite the files, then check them
    python3 data_samples/make_reasoning_samples.py --check  # only check the files on disk

The reasoning is written from the row itself (the action, the screen's element at the tapped point, the typed
text), in the task's language, by fixed templates: deterministic, standard library only.
"""

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE, TARGET = HERE / "phone_actions", HERE / "phone_actions_reasoning"
SPLITS = ("train", "heldout")
ACTION = re.compile(r'^(?:do\(action="(?P<kind>[^"]+)"(?P<args>.*)\)|finish\(message="(?P<message>.*)"\))$')
ELEMENT = re.compile(r"([^,;:]+?)\s*\[(\d+),(\d+)\]")
TEXT_ARG = re.compile(r'(?:app|text)="([^"]*)"')
POINT_ARG = re.compile(r"element=\[(\d+),(\d+)\]")
CJK = re.compile(r"[\u4e00-\u9fff]")

EN = {
    "Launch": "The task needs {app}, which is not open yet. I will launch it.",
    "Tap": "{label} is on the screen and the task needs it next. I will tap it.",
    "Long Press": "The task needs the menu of {label}. I will long-press it.",
    "Type": 'The text field is focused and the keyboard is open. I will type "{text}".',
    "Swipe": "What the task needs is not on the screen yet. I will swipe to bring it into view.",
    "Back": "This is not the page the task needs. I will go back.",
    "Home": "The task asks for the home screen. I will press Home.",
    "Wait": "The screen is still loading. I will wait for it.",
    "finish": "The screen shows that the task is done. I will finish and report it.",
}
ZH = {
    "Launch": "任务需要{app}，它还没有打开。我先启动它。",
    "Tap": "屏幕上的{label}是任务下一步需要的。我点击它。",
    "Long Press": "任务需要{label}的菜单。我长按它。",
    "Type": "输入框已聚焦，键盘已打开。我输入“{text}”。",
    "Swipe": "任务需要的内容还不在屏幕上。我滑动屏幕把它显示出来。",
    "Back": "这不是任务需要的页面。我返回上一页。",
    "Home": "任务要回到主屏幕。我按主屏幕键。",
    "Wait": "屏幕还在加载。我等它加载完。",
    "finish": "屏幕显示任务已经完成。我结束任务并报告结果。",
}


def reasoning(row: dict) -> str:
    match = ACTION.match(row["output"])
    if match is None:
        raise ValueError(f"not an action: {row['output']!r}")
    kind = match.group("kind") or "finish"
    zh = bool(CJK.search(row["instruction"]))
    fields = {}
    if kind == "Launch" or kind == "Type":
        fields["app" if kind == "Launch" else "text"] = TEXT_ARG.search(match.group("args")).group(1)
    if kind in ("Tap", "Long Press"):
        x, y = POINT_ARG.search(match.group("args")).groups()
        labels = [m.group(1).strip() for m in ELEMENT.finditer(row.get("input") or "") if m.group(2, 3) == (x, y)]
        if not labels:
            raise ValueError(f"no element at [{x},{y}] in the input: {row['input']!r}")
        # "elements: Label" / "apps visible: Label": keep the label only
        fields["label"] = labels[0].split(": ")[-1]
    return (ZH if zh else EN)[kind].format(**fields)


def convert(row: dict) -> dict:
    return {**row, "output": f"<think>{reasoning(row)}</think>\n<answer>{row['output']}"}


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def check() -> list[str]:
    problems = []
    for split in SPLITS:
        source, target = read(SOURCE / f"{split}.jsonl"), read(TARGET / f"{split}.jsonl")
        if target != [convert(r) for r in source]:
            problems.append(
                f"{TARGET.name}/{split}.jsonl is not the conversion of {SOURCE.name}/{split}.jsonl: rerun this script"
            )
    return problems


def main(argv: list[str]) -> int:
    if "--check" not in argv:
        TARGET.mkdir(exist_ok=True)
        for split in SPLITS:
            rows = [convert(r) for r in read(SOURCE / f"{split}.jsonl")]
            (TARGET / f"{split}.jsonl").write_text(
                "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
            )
    problems = check()
    for p in problems:
        print(f"problem: {p}", file=sys.stderr)
    if not problems:
        print(f"{TARGET.name}: ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
