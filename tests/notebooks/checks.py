"""What each walkthrough notebook shows when run with its parameters (nbrun.PARAMETERS), checked on its executed copy.

One check per notebook, used by both runners: the browser step (tests/ui/test_browser.py, `.ci/run` step 2) runs every
notebook in JupyterLab as a user does, saves it, and checks it here; `pytest -m notebooks tests/notebooks` runs them
headless (nbclient) with the same parameters and checks, for a machine without Chromium. Each notebook so runs once in
CI: the default suite ran all eight again headless (~510 of its ~1,340 worker-seconds, 05 and 07 training 300 steps
each), and the browser step then ran them a second time with 05 and 07 cut to 20 steps.
"""

from __future__ import annotations

import re
from pathlib import Path

from .nbrun import PARAMETERS, all_text

SCREENS_LEARNED = "verdict: the trained model answers in the action format where the base does not"
AGENT_LEARNED = "verdict: the trained agent answers in AutoGLM's action format where the base does not"


def _widgets(nb) -> list:
    return [
        o
        for c in nb.cells
        for o in c.get("outputs", [])
        if "application/vnd.jupyter.widget-view+json" in o.get("data", {})
    ]


def _images(nb) -> list:
    return [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]


def _finished(name: str, text: str) -> None:
    steps = PARAMETERS[name]["MAX_STEPS"]
    assert f"finished | step {steps}/{steps}" in text, text


def check_01_quickstart(nb, workdir: Path) -> None:
    text = all_text(nb)
    _finished("01_quickstart.ipynb", text)
    answers = [line for line in text.splitlines() if line.startswith(("tiny-glm4:", "demo-"))]
    assert len(answers) == 2, text
    assert len(_widgets(nb)) >= 5  # config, plan, monitor, chat, runs


def check_02_precision_lab(nb, workdir: Path) -> None:
    text = all_text(nb)
    for mode in ("fp32", "fp16", "bf16"):
        assert f"{mode} finished | step 2/2" in text, text
    # the forced collapse: every step skipped, and the diagnosis names a cause and a fix
    skipped = re.search(r"finished \| step 4/4 .*\| (\d+) overflow\(s\)", text)
    assert skipped and int(skipped.group(1)) == 4, text
    diagnosed = re.search(r"(\d+) diagnosis event\(s\)", text)
    assert diagnosed and int(diagnosed.group(1)) >= 1, text
    assert "[diagnosis]" in text


def check_03_zero_and_offload(nb, workdir: Path) -> None:
    html = "".join(o["data"].get("text/html", "") for c in nb.cells for o in c.get("outputs", []) if "data" in o)
    assert "DS-ZeRO3" in html and "fits" in html
    assert "finished | step 2/2 | " in all_text(nb) and "ranks seen: [0, 1]" in all_text(nb)


def check_04_side_by_side_chat(nb, workdir: Path) -> None:
    text = all_text(nb)
    assert text.count("thinking=True") >= 2 and text.count("thinking=False") >= 2
    assert "thinking=on: {" in text and "thinking=off: {" in text  # the chat panel's thinking choices


def check_05_screenshots_to_actions(nb, workdir: Path) -> None:
    text = all_text(nb)
    assert "178 training rows, 40 held-out rows" in text
    assert re.search(r"one 1080x2400 screenshot = 3354 image tokens", text), text
    assert re.search(
        r"cheapest fitting LoRA setting for autoglm-phone-9b, one 1080x2400 screenshot \+ 512 text tokens per row: "
        r".+/1img@1080x2400: .+ GiB per GPU",
        text,
    ), text
    _finished("05_screenshots_to_actions.ipynb", text)
    # the model visibly learned: the base's answers to the held-out screens do not parse as actions, most of the
    # trained model's do (40 of 40 measured at 300 steps), and some of its taps land in the target element
    scores = re.search(
        r"^held-out screens: 40; answers that parse as an action: base (\d+)/40, trained (\d+)/40; "
        r"taps in the target element: base (\d+)/\d+, trained (\d+)/\d+$",
        text,
        re.M,
    )
    assert scores, text
    base_parsed, trained_parsed, base_taps, trained_taps = map(int, scores.groups())
    assert base_parsed == 0 and trained_parsed >= 30 and trained_taps > base_taps, text
    assert SCREENS_LEARNED in text, text
    assert re.search(r"^base: +'", text, re.M) and re.search(r"^trained: +'<think>", text, re.M), text
    served = dict(re.findall(r"^ +(\S+): ('.*')$", text, re.M))  # the served replies, right-aligned model ids
    assert "tiny-glm4v-agent" in served and len(served) == 2, text  # base and trained model answered through servers
    assert len(_images(nb)) == 2  # the browsed screenshots and the base / fine-tuned pair, targets drawn


def check_06_export_and_quantize(nb, workdir: Path) -> None:
    text = all_text(nb)
    for target in ("merged", "int8", "onnx"):
        assert re.search(rf"^{target} +parity passed \| +[\d.]+ MB on disk", text, re.M), text
        assert len(re.findall(rf"^  {target} +['\"]", text, re.M)) == 2, text  # an answer to each of the two prompts
    # section 4: the q4_k_m GGUF's line, its parity measured through llama-server (no gate: reported). On the tiny
    # GLM-4 of the test's parameters it agreed with the adapter at 0.79 of the answer positions, held-out loss -0.009;
    # a GGUF that computes another model agrees by chance (a byte vocabulary: ~1/256) and its loss moves by whole units
    gguf = re.search(
        r"^gguf q4_k_m parity reported \| +[\d.]+ MB on disk \| max \|logit diff\| \S+ \| greedy agreement ([\d.]+) \| "
        r"held-out loss ([\d.]+) \(fp32 adapter ([\d.]+)\) \| [\d.]+ s$",
        text,
        re.M,
    )
    assert gguf, text
    agreement, loss, reference = map(float, gguf.groups())
    assert agreement > 0.5 and abs(loss - reference) < 0.2, text
    # quantized: q4_k_m weights take 0.22 of the fp32 merge's bytes (SmolLM2: 0.20); f16 would take half
    ratio = re.search(r"^gguf q4_k_m: [\d.]+ MB of weights, ([\d.]+) of the fp32 merge's [\d.]+ MB$", text, re.M)
    assert ratio and float(ratio.group(1)) < 0.3, text
    # the adapter (our server) and the GGUF (llama-server) answered each held-out prompt, side by side in the panel
    asked = re.findall(r"^Q: (.+)\n  adapter +('.*'|\".*\")\n  gguf q4_k_m +('.*'|\".*\")$", text, re.M)
    assert len(asked) == 2, text
    assert [w for w in _widgets(nb) if w["data"]["text/plain"].startswith("ChatComparePanel(")], text  # shown
    # where the run learned to introduce itself, the GGUF did too (the notebook's defaults, SmolLM2 at 24 steps: both
    # answer "I am PhoneMate, ..." to both prompts); the 3-step random tiny GLM-4 of the test's parameters learns no
    # identity, its answers are a few bytes
    for _, adapter, gguf_answer in asked:
        assert ("PhoneMate" in gguf_answer) >= ("PhoneMate" in adapter), text


def check_07_phone_agent_episodes(nb, workdir: Path) -> None:
    text = all_text(nb)
    assert "106 tasks, 60 train / 31 held-out / 15 combos" in text
    assert re.search(r"oracle: 106 of 106 tasks solved; steps per episode: median \d", text), text
    _finished("07_phone_agent_episodes.ipynb", text)
    rows = dict(re.findall(r"^(base|trained) +(\d+) ", text, re.M))
    assert rows == {"base": "2", "trained": "2"}, text  # both models played both tasks: the metrics table
    # the trained agent visibly learned: its replies parse as actions (4 of 4 measured at 250 steps), the random
    # base's never do (each of its episodes ends on its first reply)
    parsed = {
        name: (int(k), int(n))
        for name, k, n in re.findall(
            r"^(base|trained): (\d+) of (\d+) replies parse as an action; \d+ of 2 tasks done$", text, re.M
        )
    }
    assert parsed["base"] == (0, 2) and parsed["trained"][0] >= 2, text
    assert AGENT_LEARNED in text, text
    assert len(list((workdir / "runs").glob("*/episodes/trained/screens/*/01.png"))) == 2  # stored for the replay
    assert len(_images(nb)) == 1  # the rendered phone screen
    assert len(_widgets(nb)) >= 3  # the run monitor, the episode replay and the text agent's replay
    # the text agent's section: each recorded folder summarised; the base's replies never parse, the fine-tuned ones do
    agent = {
        name: (int(n), float(success), float(parse), float(reached))
        for name, n, success, parse, reached in re.findall(
            r"^phone_agent-(\w+--\w+) +(\d+) +([\d.]+) +([\d.]+) +[\d.]+ +([\d.]+)$", text, re.M
        )
    }
    assert set(agent) == {
        f"{split}--{model}" for split in ("heldout", "combos") for model in ("base", "sft", "sft150", "grpo")
    }, text  # with the recorded GRPO run's
    assert agent["heldout--base"] == (31, 0.0, 1.0, 0.0) and agent["combos--base"] == (15, 0.0, 1.0, 0.0)
    # parses, and finishes half the unseen tasks (the goal of issue 33; 16 of 31 in the stored episodes)
    assert agent["heldout--sft"][2] < 0.5 and agent["heldout--sft"][1] >= 0.5, text
    assert agent["heldout--sft"][3] > 0.25 and agent["combos--sft"][0] == 15  # gets to the apps; every task judged
    assert [agent[f"{s}--{m}"][0] for s in ("heldout", "combos") for m in ("sft150", "grpo")] == [31, 31, 15, 15]


def check_08_grpo_phone_actions(nb, workdir: Path) -> None:
    text = all_text(nb)
    assert "SFT finished | step 2/2" in text and "GRPO finished | step 2/2" in text
    assert len(re.findall(r"^step \d: reward .* parse rate", text, re.M)) == 2, text
    assert re.search(r"^mismatch fp32: mean \|logp sampler - logp trainer\| = ", text, re.M), text
    assert re.search(r"^mismatch bf16: ", text, re.M), text
    # the compare view of the same-seed runs: labelled by precision, no other setting differing
    assert re.search(r"^compared: fp32, bf16 \| differences besides precision: none$", text, re.M), text
    assert len(re.findall(r"^held-out \w+: SFT \S+ -> SFT\+GRPO \S+$", text, re.M)) == 4, text
    # section 5, the recorded GRPO run on whole episodes: its log read back step by step, both models' episodes of
    # every held-out and combos task compared task by task
    assert (
        len(re.findall(r"^episode step \d+: finished \d+% of 16 sampled episodes, groups without signal", text, re.M))
        == 7
    ), text
    compared = re.findall(
        r"^(heldout|combos): SFT [\d.]+ -> SFT\+GRPO [\d.]+ of (\d+) tasks; GRPO alone \d+, SFT alone "
        r"\d+, both \d+ \(sign test p = [\d.e-]+\)$",
        text,
        re.M,
    )
    assert compared == [("heldout", "31"), ("combos", "15")], text


def check_09_own_app(nb, workdir: Path) -> None:
    text = all_text(nb)
    # the text agent's stored failures per family, then the agent trained here playing the families' held-out tasks
    assert re.search(r"^text agent, held-out toggle_setting: 1 of 4 finished; failed: ", text, re.M), text
    assert re.search(r"^text agent, held-out setting_then_message: 0 of 3 finished", text, re.M), text
    assert len(re.findall(r"^agent: \S+ +(?:finished|failed) \(", text, re.M)) == 7, text
    # the recorded set as rows: both files clean, merged with the agent's rows
    assert re.search(r"^7 demonstrations: ", text, re.M), text
    assert re.search(r"train\.jsonl: 20 rows of 3 demonstrations, 0 problem\(s\)$", text, re.M), text
    assert re.search(r"heldout\.jsonl: 32 rows of 4 demonstrations, 0 problem\(s\)$", text, re.M), text
    assert "training rows: 4685 (20 demonstration rows x 100 among 2685 of the agent's)" in text, text
    steps = PARAMETERS["09_own_app.ipynb"]  # the agent's run, then the control's and the fine-tune's
    assert f"finished | step {steps['AGENT_STEPS']}/{steps['AGENT_STEPS']}" in text, text
    assert text.count(f"finished | step {steps['TUNE_STEPS']}/{steps['TUNE_STEPS']}") == 2, text
    # step metrics through `workbench eval`'s report, its rules named; per action type
    assert text.count("rules: AgentCPM-GUI") == 2 and text.count("per expected action type") == 2, text
    rows = {
        name: (float(held), float(shown), int(d), int(n))
        for name, held, shown, d, n in re.findall(
            r"^(agent|control|tuned) +([\d.]+) +([\d.]+) +(\d) of 3 +(\d) of 4 +[\d.]+$", text, re.M
        )
    }
    assert set(rows) == {"agent", "control", "tuned"}, text
    # the method did something: the demonstrated steps are learned, where the control (as many steps, no
    # demonstrations) is not (0.45 against 0.05 measured); the rest is printed as it is, never asserted
    assert rows["tuned"][1] > max(rows["agent"][1], rows["control"][1]) + 0.1, text
    assert re.search(r"^verdict: the demonstrated steps were learned \(exact", text, re.M), text
    # the serve section: Open-AutoGLM's runner with the prompt the rows were recorded with (English)
    assert re.search(r"python main\.py --base-url http://localhost:8000/v1 --model tuned-\d+ --lang en ", text), text
    assert len(_widgets(nb)) >= 5  # three run monitors, the recorder panel, the episode replay


CHECKS = {
    f"{name[len('check_') :]}.ipynb": check for name, check in dict(globals()).items() if name.startswith("check_0")
}


def check(name: str, nb, workdir: Path) -> None:
    """The check of notebook ``name`` executed in ``workdir`` (its "{runs}" is ``workdir/runs``); a notebook without
    one is an error saying where to add it."""
    if name not in CHECKS:
        raise LookupError(f"{name} has no check: add check_{name[: -len('.ipynb')]} to {__file__}")
    CHECKS[name](nb, Path(workdir))
