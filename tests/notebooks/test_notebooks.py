"""Every walkthrough notebook runs top to bottom in a real kernel (nbclient), with short-run parameters. What 05's and
07's full-length training shows is checked where they train at full length, the browser step (claims.py)."""
import json
import re

import nbformat
import pytest

from .claims import AGENT_LEARNED, NOT_LEARNED, SCREENS_LEARNED, agent_replies, screens_scores
from .nbrun import NOTEBOOKS, SHORT_PARAMETERS, all_text, execute, notebook_names, parameters_cell, short_parameters

NAMES = notebook_names()


def test_every_notebook_has_short_run_parameters():
    assert len(NAMES) >= 6 and sorted(SHORT_PARAMETERS) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_committed_clean_with_kernelspec_and_parameters(name):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    assert parameters_cell(nb) == 1
    raw = json.loads((NOTEBOOKS / name).read_text())  # nbformat.read fills missing ids in (with a warning)
    assert all("id" in cell for cell in raw["cells"]), f"{name}: a cell without an id (a future nbformat error)"
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, f"{name}: commit notebooks with outputs cleared"


def test_01_quickstart(tmp_path):
    nb = execute("01_quickstart.ipynb", tmp_path, **short_parameters("01_quickstart.ipynb", tmp_path))
    text = all_text(nb)
    assert "finished | step 3/3" in text
    answers = [line for line in text.splitlines() if line.startswith(("tiny-glm4:", "demo-"))]
    assert len(answers) == 2, text
    widgets = [o for c in nb.cells for o in c.get("outputs", []) if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert len(widgets) >= 5  # config, plan, monitor, chat, runs


def test_02_precision_lab(tmp_path):
    nb = execute("02_precision_lab.ipynb", tmp_path, **short_parameters("02_precision_lab.ipynb", tmp_path))
    text = all_text(nb)
    for mode in ("fp32", "fp16", "bf16"):
        assert f"{mode} finished | step 2/2" in text
    # the forced collapse: every step skipped, and the diagnosis names a cause and a fix
    skipped = re.search(r"finished \| step 4/4 .*\| (\d+) overflow\(s\)", text)
    assert skipped and int(skipped.group(1)) == 4, text
    diagnosed = re.search(r"(\d+) diagnosis event\(s\)", text)
    assert diagnosed and int(diagnosed.group(1)) >= 1, text
    assert "[diagnosis]" in text


def test_03_zero_and_offload(tmp_path):
    nb = execute("03_zero_and_offload.ipynb", tmp_path, **short_parameters("03_zero_and_offload.ipynb", tmp_path))
    html = "".join(o["data"].get("text/html", "") for c in nb.cells for o in c.get("outputs", []) if "data" in o)
    assert "DS-ZeRO3" in html and "fits" in html
    assert "finished | step 2/2 | " in all_text(nb) and "ranks seen: [0, 1]" in all_text(nb)


def test_04_side_by_side_chat(tmp_path):
    nb = execute("04_side_by_side_chat.ipynb", tmp_path, **short_parameters("04_side_by_side_chat.ipynb", tmp_path))
    text = all_text(nb)
    assert text.count("thinking=True") >= 2 and text.count("thinking=False") >= 2
    assert "thinking=on: {" in text and "thinking=off: {" in text  # the chat panel's thinking choices


def test_05_screenshots_to_actions(tmp_path):
    nb = execute("05_screenshots_to_actions.ipynb", tmp_path, **short_parameters("05_screenshots_to_actions.ipynb", tmp_path))
    text = all_text(nb)
    assert "178 training rows, 40 held-out rows" in text
    assert re.search(r"one 1080x2400 screenshot = 3354 image tokens", text), text
    assert re.search(r"cheapest fitting LoRA setting for autoglm-phone-9b, one 1080x2400 screenshot \+ 512 text tokens per row: "
                     r".+/1img@1080x2400: .+ GiB per GPU", text), text
    steps = SHORT_PARAMETERS["05_screenshots_to_actions.ipynb"]["MAX_STEPS"]
    assert f"finished | step {steps}/{steps}" in text
    # a few steps only here (what 300 steps show is checked by the browser step: claims.py): both models judged on
    # every held-out screen, the random base's answers never parse, and the notebook does not call this run fine-tuned
    assert screens_scores(text)[0] == 0, text
    assert NOT_LEARNED in text and SCREENS_LEARNED not in text, text
    assert re.search(r"^base: +'", text, re.M) and re.search(r"^trained: +'", text, re.M), text
    served = dict(re.findall(r"^ +(\S+): ('.*')$", text, re.M))  # the served replies, right-aligned model ids
    assert "tiny-glm4v-agent" in served and len(served) == 2, text  # base and trained model answered through servers
    images = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) == 2  # the browsed screenshots and the base / fine-tuned pair, targets drawn


def test_06_export_and_quantize(tmp_path):
    nb = execute("06_export_and_quantize.ipynb", tmp_path, **short_parameters("06_export_and_quantize.ipynb", tmp_path))
    text = all_text(nb)
    for target in ("merged", "int8", "onnx"):
        assert re.search(rf"^{target} +parity passed \| +[\d.]+ MB on disk", text, re.M), text
        assert len(re.findall(rf"^  {target} +['\"]", text, re.M)) == 2, text  # an answer to each of the two prompts


def test_07_phone_agent_episodes(tmp_path):
    nb = execute("07_phone_agent_episodes.ipynb", tmp_path, **short_parameters("07_phone_agent_episodes.ipynb", tmp_path))
    text = all_text(nb)
    assert "106 tasks, 60 train / 31 held-out / 15 combos" in text
    assert re.search(r"oracle: 106 of 106 tasks solved; steps per episode: median \d", text), text
    steps = SHORT_PARAMETERS["07_phone_agent_episodes.ipynb"]["MAX_STEPS"]
    assert f"finished | step {steps}/{steps}" in text
    rows = dict(re.findall(r"^(base|trained) +(\d+) ", text, re.M))
    assert rows == {"base": "2", "trained": "2"}, text  # both models played both tasks: the metrics table
    # a few steps only here (what 300 steps show is checked by the browser step: claims.py): the random base's replies
    # never parse (each episode ends on its first reply), and the notebook does not call this run trained
    assert agent_replies(text)["base"] == (0, 2), text
    assert NOT_LEARNED in text and AGENT_LEARNED not in text, text
    assert len(list((tmp_path / "runs").glob("*/episodes/trained/screens/*/01.png"))) == 2  # stored for the replay
    images = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) == 1  # the rendered phone screen
    widgets = [o for c in nb.cells for o in c.get("outputs", []) if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert len(widgets) >= 3  # the run monitor, the episode replay and the text agent's replay
    # the text agent's section: each recorded folder summarised; the base's replies never parse, the fine-tuned ones do
    agent = {name: (int(n), float(success), float(parse)) for name, n, success, parse in
             re.findall(r"^phone_agent-(\w+--\w+) +(\d+) +([\d.]+) +([\d.]+) ", text, re.M)}
    assert set(agent) == {"heldout--base", "heldout--tuned", "combos--base", "combos--tuned"}, text
    assert agent["heldout--base"] == (31, 0.0, 1.0) and agent["combos--base"] == (15, 0.0, 1.0)
    assert agent["heldout--tuned"][2] < 0.5 and agent["heldout--tuned"][1] > 0  # parses, and finishes some unseen task


def test_08_grpo_phone_actions(tmp_path):
    nb = execute("08_grpo_phone_actions.ipynb", tmp_path, MODEL="tiny-glm4", SFT_STEPS=2, GRPO_STEPS=2, MISMATCH_STEPS=1,
                 MICRO_BATCH=1, GROUP=2, MAX_NEW_TOKENS=6, EVAL_ROWS=2, MODES=["fp32", "bf16"],
                 RUNS_DIR=str(tmp_path / "runs"))
    text = all_text(nb)
    assert "SFT finished | step 2/2" in text and "GRPO finished | step 2/2" in text
    assert len(re.findall(r"^step \d: reward .* parse rate", text, re.M)) == 2, text
    assert re.search(r"^mismatch fp32: mean \|logp sampler - logp trainer\| = ", text, re.M), text
    assert re.search(r"^mismatch bf16: ", text, re.M), text
    # the compare view of the same-seed runs: labelled by precision, no other setting differing
    assert re.search(r"^compared: fp32, bf16 \| differences besides precision: none$", text, re.M), text
    assert len(re.findall(r"^held-out \w+: SFT \S+ -> SFT\+GRPO \S+$", text, re.M)) == 4, text
