"""What notebooks 05 and 07 say their training shows, checked where they train at full length.

05 and 07 train a tiny GLM-4.1V from random, and only after ~300 steps does it answer in the action format (0 of 2
replies parse at 300 steps of 4 or 2 rows, nor at 150 steps at a larger learning rate: tests/notebooks/nbrun.py).
Those two trainings were 280 of the suite's ~1,300 worker-seconds, and the browser step trained them again. Now they
train at full length once, in the browser step (tests/ui/test_browser.py, `.ci/run` step 2), which checks these
claims on the notebook JupyterLab saved; the headless suite (test_notebooks.py) runs them for a few steps and checks
that every cell works and that the notebook then says "not learned yet" instead of calling noise fine-tuned.
"""
from __future__ import annotations

import re

SCREENS_SCORES = (r"^held-out screens: 40; answers that parse as an action: base (\d+)/40, trained (\d+)/40; "
                  r"taps in the target element: base (\d+)/\d+, trained (\d+)/\d+$")
AGENT_REPLIES = r"^(base|trained): (\d+) of (\d+) replies parse as an action; \d+ of \d+ tasks done$"
SCREENS_LEARNED = "verdict: the trained model answers in the action format where the base does not"
AGENT_LEARNED = "verdict: the trained agent answers in AutoGLM's action format where the base does not"
NOT_LEARNED = "verdict: not learned yet"


def screens_scores(text: str) -> tuple[int, int, int, int]:
    """Notebook 05's held-out line: (base parsed, trained parsed, base taps in the target, trained taps in it)."""
    scores = re.search(SCREENS_SCORES, text, re.M)
    assert scores, text
    return tuple(map(int, scores.groups()))


def agent_replies(text: str) -> dict[str, tuple[int, int]]:
    """Notebook 07's per-model line: {model: (replies that parse, replies)}."""
    parsed = {name: (int(k), int(n)) for name, k, n in re.findall(AGENT_REPLIES, text, re.M)}
    assert set(parsed) == {"base", "trained"}, text
    return parsed


def screenshots_to_actions_learned(text: str) -> None:
    """05 at full length: the random base's answers never parse, most of the trained model's do (>= 30 of 40: 40 of 40
    measured at 300 steps), some of its taps land in the target element, and the notebook says so."""
    base_parsed, trained_parsed, base_taps, trained_taps = screens_scores(text)
    assert base_parsed == 0 and trained_parsed >= 30 and trained_taps > base_taps, text
    assert SCREENS_LEARNED in text, text


def phone_agent_learned(text: str) -> None:
    """07 at full length: the trained agent's replies parse as actions (at least one an episode: 4 of 4 measured at
    250 steps), the base's never do (each of its episodes ends on its first reply), and the notebook says so."""
    parsed = agent_replies(text)
    assert parsed["base"] == (0, 2) and parsed["trained"][0] >= 2, text
    assert AGENT_LEARNED in text, text


# notebook -> the check of what its full-length training shows (the browser step runs these notebooks at full length)
LEARNING_CLAIMS = {
    "05_screenshots_to_actions.ipynb": screenshots_to_actions_learned,
    "07_phone_agent_episodes.ipynb": phone_agent_learned,
}
