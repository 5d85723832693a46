"""``workbench data check``: recorded episode rows and the sample sets pass; each kind of broken row is reported as
file:line: why, all of them in one pass, exit 1."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from workbench.agent import OraclePolicy, run_episodes, sim_devices
from workbench.agent.record import record_rows
from workbench.cli.main import main
from workbench.data.check import check_file
from workbench.models import load_tokenizer
from workbench.phone.tasks import select_tasks

from ..conftest import SAMPLES


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Oracle rows of two tasks in the runtime format, with their screenshots beside the file."""
    out = tmp_path_factory.mktemp("rec") / "rows.jsonl"
    tasks = select_tasks("toggle_setting/wifi-off,like_photo/cat")
    record_rows(run_episodes(tasks, OraclePolicy(tasks), sim_devices((112, 252))), out)
    return out, [json.loads(line) for line in out.read_text().splitlines()]


def test_recorded_rows_and_the_sample_sets_pass(recorded, capsys):
    out, rows = recorded
    assert check_file(out).problems == [] and len(rows) == 3 + 4
    for sample in ("phone_screens/train.jsonl", "phone_actions/heldout.jsonl", "identity/train.jsonl"):
        assert check_file(SAMPLES / sample).problems == []
    assert main(["data", "check", str(out)]) == 0
    assert capsys.readouterr().err.strip() == (
        f"{out}: 7 rows, 0 problem(s)\n{out}: 7 in Open-AutoGLM's runtime format (7 lang en)"
    )


@pytest.mark.parametrize("recipe", ["autoglm-phone-9b-lora-2x4090", "autoglm-phone-9b-qlora-1x24gb"])
def test_the_9b_recipes_train_on_runtime_format_rows_at_the_phones_resolution(recipe, capsys):
    """Both files of each 9B recipe: every row in Open-AutoGLM's runtime format with its Chinese system prompt (what
    the model was trained on), the screenshots 1080x2400; `workbench data check` says so."""
    from PIL import Image

    from workbench.config.recipes import load_recipe

    data = load_recipe(recipe).run_config().data
    for path in (data.train, data.eval):
        report = check_file(path)
        assert report.problems == [] and report.forms == {"open-autoglm": report.rows} == {
            "open-autoglm": report.langs["cn"]
        }
        assert main(["data", "check", path]) == 0
        assert f"{report.rows} in Open-AutoGLM's runtime format ({report.rows} lang cn)" in capsys.readouterr().err
        rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]
        shots = {
            p["image_url"]["url"]
            for r in rows
            for m in r["messages"]
            if isinstance(m["content"], list)
            for p in m["content"]
            if p["type"] == "image_url"
        }
        assert {Image.open(Path(path).parent / s).size for s in shots} == {(1080, 2400)}


def test_every_broken_row_is_named_with_its_line(recorded, tmp_path, capsys):
    out, rows = recorded
    tap = next(i for i, r in enumerate(rows) if '"Tap"' in r["messages"][-1]["content"])

    def edit(index, change):
        row = copy.deepcopy(rows[index])
        change(row)
        return json.dumps(row)

    def answer(text):
        return lambda r: r["messages"][-1].update(content=f"<think>x</think>\n<answer>{text}")

    lines = [
        json.dumps(rows[0]),  # 1 fine
        "{not json",  # 2
        edit(tap, answer('do(action="Tap", element=[1200,40])')),  # 3 off the grid
        edit(tap, answer('do(action="Tap", element=[10,10])')),  # 4 outside the box
        edit(tap, answer("tap the switch")),  # 5 no action
        edit(tap, lambda r: r["messages"][-2]["content"][0]["image_url"].update(url="images/missing.png")),  # 6
        edit(tap, lambda r: r["messages"][1]["content"].insert(0, r["messages"][-2]["content"][0])),  # 7
        edit(tap, lambda r: r["meta"].update(target_box=[500, 500, 100, 100])),  # 8 bad box
        json.dumps({"messages": [{"role": "user", "content": "hi"}]}),  # 9 nothing to learn
    ]
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "broken.png").write_text("not a png")
    lines.append(
        edit(tap, lambda r: r["messages"][-2]["content"][0]["image_url"].update(url="images/broken.png"))
    )  # 10
    for image in {p.name for p in out.parent.glob("images/*.png")}:
        (tmp_path / "images" / image).write_bytes((out.parent / "images" / image).read_bytes())
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    problems = check_file(bad).problems
    expected = {
        2: "not valid JSON",
        3: "runtime format: assistant turn 2: Tap: element must be [x, y] with integers in 0..999",
        4: "Tap at [10, 10] lies outside meta.target_box",
        5: "runtime format: assistant turn 2: not one call",
        6: "image 1: image file not found",
        7: "runtime format: user turn 1 holds 1 image(s)",
        8: "meta.target_box must be [x1, y1, x2, y2]",
        9: "no assistant message with content",
        10: "image 1: cannot read the image",
    }
    for line, why in expected.items():
        assert any(p.startswith(f"{bad}:{line}: ") and why in p for p in problems), (line, problems)
    assert not any(p.startswith(f"{bad}:1: ") for p in problems)
    assert len(problems) == len(expected)  # one problem each: the grammar is not reported twice for runtime rows
    plain = tmp_path / "plain.jsonl"  # a row of the single-step format: its grammar is checked on its own
    plain.write_text(json.dumps({"instruction": "Open Wi-Fi", "output": 'do(action="Tap", element=[5])'}) + "\n")
    assert [p.split(": ", 1)[1] for p in check_file(plain).problems] == [
        "the answer is not one valid action: Tap: element must be [x, y] with integers in 0..999"
    ]
    assert main(["data", "check", str(bad)]) == 1
    printed = capsys.readouterr().out.splitlines()
    assert printed == problems


def test_token_length_against_the_models_context(recorded, capsys, tmp_path):
    out, _ = recorded
    assert main(["data", "check", str(out), "--model", "tiny-glm4v"]) == 1
    printed = capsys.readouterr()
    # the tiny model's byte tokenizer and 1024-token context: the system prompt alone exceeds it
    assert len(printed.out.splitlines()) == 7 and all(
        "more than the 1024-token context" in p for p in printed.out.splitlines()
    )
    assert "7 problem(s), longest" in printed.err
    assert check_file(out, load_tokenizer("tiny-glm4v"), max_length=25480).problems == []
    assert main(["data", "check", str(out), "--model", str(tmp_path)]) == 2  # a folder with no model in it
    err = capsys.readouterr().err
    assert err.startswith("workbench data check: error: --model: ") and "holds no config.json" in err


def test_missing_file_and_unknown_action_mode(tmp_path, capsys):
    assert main(["data", "check", str(tmp_path / "nope.jsonl")]) == 1
    assert f"{tmp_path / 'nope.jsonl'}: file not found" in capsys.readouterr().out
    with pytest.raises(ValueError, match="actions must be one of auto, all, none"):
        check_file(tmp_path / "nope.jsonl", actions="some")
