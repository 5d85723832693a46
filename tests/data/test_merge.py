"""`workbench data merge`: demonstrations joined to an agent's rows in one file the linter and the loader accept, the
screenshots found from the merged file's folder; a bad input writes nothing and every problem is reported."""

from __future__ import annotations

import json
import shutil

from workbench.cli.main import main
from workbench.data.check import check_file

from ..conftest import SAMPLES

DEMOS = SAMPLES / "own_app" / "train.jsonl"
SCREENS = SAMPLES / "phone_screens" / "train.jsonl"


def test_merged_rows_keep_their_screenshots_and_repeat_on_request(tmp_path, capsys):
    out = tmp_path / "data" / "mix.jsonl"
    assert main(["data", "merge", "--out", str(out), str(SCREENS), str(DEMOS), "--repeat", f"{DEMOS}=3"]) == 0
    printed = capsys.readouterr().out
    screens, demos = (len(p.read_text().splitlines()) for p in (SCREENS, DEMOS))
    assert f"{demos} rows x 3" in printed and f"{screens + 3 * demos} rows: {out}" in printed
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows[screens : screens + demos] == rows[screens + demos : screens + 2 * demos]  # the repeats
    first = rows[screens]["messages"][1]["content"][0]["image_url"]["url"]
    assert first.startswith("../../") and (out.parent / first).resolve().is_file()
    assert rows[screens]["meta"] == json.loads(DEMOS.read_text().splitlines()[0])["meta"]  # the rest as it was
    assert check_file(out).problems == []


def test_a_bad_input_writes_nothing_and_every_problem_is_named(tmp_path, capsys):
    broken = tmp_path / "demos" / "rows.jsonl"
    broken.parent.mkdir()
    lines = DEMOS.read_text().splitlines()[:2]
    shutil.copytree(SAMPLES / "own_app" / "images", tmp_path / "demos" / "images")
    bad = json.loads(lines[1])
    bad["messages"][-1]["content"] = '<think>x</think>\n<answer>do(action="Tap", element=[1200,5])'
    broken.write_text(lines[0] + "\n" + json.dumps(bad) + "\n{not json\n")
    out = tmp_path / "mix.jsonl"
    assert main(["data", "merge", "--out", str(out), str(DEMOS), str(broken), "--repeat", "other.jsonl=2"]) == 1
    printed = capsys.readouterr()
    assert (
        f"{broken}:2: runtime format: assistant turn 2:" in printed.out and f"{broken}:3: not valid JSON" in printed.out
    )
    assert "--repeat other.jsonl: not one of the files to merge" in printed.out
    assert "3 problem(s); nothing written" in printed.err and not out.exists()
    assert main(["data", "merge", "--out", str(DEMOS), str(DEMOS)]) == 1
    assert "the output is one of the inputs" in capsys.readouterr().out


def test_inline_screenshots_are_merged_as_they_are(tmp_path, capsys):
    """A row whose screenshot is inline (a data: URL, as rows read from a phone without files are) keeps it byte for
    byte in the merged file, and the merged file still checks and shows that screenshot."""
    import base64
    import io

    from PIL import Image

    from workbench.image_io import load_image

    row = json.loads(DEMOS.read_text().splitlines()[0])
    screen = Image.open(DEMOS.parent / row["messages"][1]["content"][0]["image_url"]["url"]).convert("RGB")
    buffer = io.BytesIO()
    screen.save(buffer, format="PNG")
    inline = "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()
    row["messages"][1]["content"][0]["image_url"]["url"] = inline
    source = tmp_path / "phone" / "inline.jsonl"
    source.parent.mkdir()
    source.write_text(json.dumps(row) + "\n")
    out = tmp_path / "data" / "mix.jsonl"
    assert main(["data", "merge", "--out", str(out), str(source)]) == 0
    (merged,) = (json.loads(line) for line in out.read_text().splitlines())
    url = merged["messages"][1]["content"][0]["image_url"]["url"]
    assert url == inline
    assert check_file(out).problems == []
    assert list(load_image(url).getdata()) == list(screen.getdata())  # the screenshot it was recorded with
