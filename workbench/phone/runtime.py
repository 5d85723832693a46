"""AutoGLM-Phone's runtime message format: the conversation the agent loop sends the model at every step, as
Open-AutoGLM's ``phone_agent`` builds it (the facts matched here; the wording of the system prompt is ours).

- one system message: the action grammar, stamped with the date (``system_prompt``);
- the first user turn: ``"{task}\\n\\n{screen_info}"`` after the screenshot (an ``image_url`` part); each later
  user turn: ``"** Screen Info **\\n\\n{screen_info}"`` after the new screenshot; ``screen_info`` is the JSON
  ``{"current_app": "<app name>"}``;
- once the model has replied, the screenshot is removed from that user turn, so the model sees only the latest
  screenshot and the text of every earlier turn;
- each reply is stored back as ``<think>{thinking}</think><answer>{action}</answer>``.

Observation modes (``OBSERVATIONS``): ``screenshot`` (the above), ``ui_tree`` (no image; the screen's compact
accessibility tree, ``workbench.phone.uitree``, follows the JSON in ``screen_info`` on its own lines) and ``both``
(the screenshot and the tree). The tree, like the screenshot, stays in the latest user turn only: once answered,
that turn keeps the JSON line.

``Conversation`` builds it turn by turn (the episode runner, the recorder of training rows); ``runtime_problems``
says how a message list departs from it (the data linter).
"""
from __future__ import annotations

import datetime
import json
import re
from typing import Optional

from .actions import ActionSyntaxError, parse_action, split_answer

LATER_TURN_PREFIX = "** Screen Info **\n\n"
FORMAT_NAME = "autoglm-runtime"  # meta.format of training rows in this format
CONTEXT_TOKENS = 25_480  # Open-AutoGLM's recommended server context (--max-model-len)
MAX_STEPS = 100  # Open-AutoGLM's default step limit
REPEAT_LIMIT = 3  # the same action on the same screen this many times in a row ends an episode (stuck)
OBSERVATIONS = ("screenshot", "ui_tree", "both")  # what the model is shown of each screen

_GRAMMAR = """# Setup
You operate an Android phone to complete the user's task. At each step you see the current screenshot and the name of the app on screen. Look at the screen, reason briefly, then give exactly one action.

# Output format
<think>your short reasoning</think>
<answer>one action</answer>

# Actions (points are [x,y] on a 0-999 grid from the top-left to the bottom-right corner of the screen)
do(action="Launch", app="xxx")    open an app by its name
do(action="Tap", element=[x,y])    tap a point
do(action="Double Tap", element=[x,y])    tap a point twice quickly
do(action="Long Press", element=[x,y])    press and hold a point
do(action="Type", text="xxx")    type into the focused text field (tap the field first; its old text is replaced)
do(action="Swipe", start=[x1,y1], end=[x2,y2])    drag from start to end: scroll a list, turn a page
do(action="Back")    go back one screen
do(action="Home")    go to the home screen
do(action="Wait", duration="x seconds")    wait for the screen to load
finish(message="xxx")    end the task and say what was done

Answer with one action per turn. Check that the last action worked before the next one. Finish only when the task is done."""

_TREE_LINES = ("one a line: name, texts, bounds [left,top][right,bottom], the point a tap uses and the other "
               "gestures.")
_SETUPS = {"ui_tree": "At each step you see the name of the app on screen and its elements as text, " + _TREE_LINES,
           "both": "At each step you see the current screenshot, the name of the app on screen and its elements as "
                   "text, " + _TREE_LINES}
_SCREENSHOT_SETUP = "At each step you see the current screenshot and the name of the app on screen."
_DATE_LINE = re.compile(r"^The current date: (\d{4}-\d{2}-\d{2}), \w+\n")


def check_observation(observation: str) -> str:
    if observation not in OBSERVATIONS:
        raise ValueError(f"observation {observation!r}: give one of {', '.join(OBSERVATIONS)}")
    return observation


def repeat_limit_problem(limit: int) -> Optional[str]:
    """Why ``limit`` is no repeat limit (0 never ends an episode; 1 would end it at its first action), else None."""
    return None if limit == 0 or limit >= 2 else f"repeat_limit must be 0 (never) or at least 2, got {limit}"


def system_prompt(date: Optional[datetime.date] = None, observation: str = "screenshot") -> str:
    """The system message: the date line, then the action grammar (its first lines say what the model sees)."""
    today = date or datetime.date.today()
    grammar = _GRAMMAR
    if check_observation(observation) != "screenshot":
        grammar = grammar.replace(_SCREENSHOT_SETUP, _SETUPS[observation])
    return f"The current date: {today:%Y-%m-%d, %A}\n{grammar}"


def screen_info(current_app: str, tree: Optional[str] = None) -> str:
    """``{"current_app": ...}``, then the screen's tree on the lines below when there is one."""
    info = json.dumps({"current_app": current_app}, ensure_ascii=False)
    return info if tree is None else f"{info}\n{tree}"


def assistant_content(thinking: str, action_text: str) -> str:
    return f"<think>{thinking}</think><answer>{action_text}</answer>"


def _image_part(url: str) -> dict:
    return {"type": "image_url", "image_url": {"url": url}}


def message_text(message: dict) -> str:
    """A message's text: its content, or the text parts of a multimodal one."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if isinstance(p, dict) and p.get("type") == "text")


def _images_of(message: dict) -> int:
    content = message.get("content")
    return 0 if isinstance(content, str) else sum(1 for p in content or [] if isinstance(p, dict)
                                                   and p.get("type") in ("image_url", "image"))


class Conversation:
    """One episode's messages in the runtime format: ``observe`` a screen, then ``reply``; repeat."""

    def __init__(self, task: str, date: Optional[datetime.date] = None, observation: str = "screenshot"):
        self.task, self.observation = task, check_observation(observation)
        self.messages: list[dict] = [{"role": "system", "content": system_prompt(date, observation)}]

    @property
    def steps(self) -> int:
        return sum(1 for m in self.messages if m["role"] == "assistant")

    def observe(self, image_url: Optional[str], current_app: str, tree: Optional[str] = None) -> list[dict]:
        """Add the user turn showing a screen (``image_url``: a data: URL, or a file path in training rows;
        ``tree``: the screen's compact tree), each as the observation mode asks; the messages to send the model."""
        if self.messages[-1]["role"] == "user":
            raise RuntimeError("observe() twice without a reply in between")
        wants_image, wants_tree = self.observation != "ui_tree", self.observation != "screenshot"
        if (wants_image and image_url is None) or (wants_tree and tree is None):
            raise ValueError(f"observation {self.observation!r} needs "
                             f"{'a screenshot' if wants_image and image_url is None else 'the screen tree'}")
        text = (f"{self.task}\n\n" if self.steps == 0 else LATER_TURN_PREFIX) + \
            screen_info(current_app, tree if wants_tree else None)
        # without an image the turn is plain text: what a text-only model's chat template takes
        content = [_image_part(image_url), {"type": "text", "text": text}] if wants_image else text
        self.messages.append({"role": "user", "content": content})
        return self.messages

    def reply(self, thinking: str, action_text: str) -> None:
        """Store the model's reply; the screenshot leaves the turn it answered."""
        if self.messages[-1]["role"] != "user":
            raise RuntimeError("reply() without a screen observed first")
        last = self.messages[-1]
        if isinstance(last["content"], str):
            last["content"] = _without_tree(last["content"])
        else:
            last["content"] = [{**p, "text": _without_tree(p["text"])} for p in last["content"] if p.get("type") == "text"]
        self.messages.append({"role": "assistant", "content": assistant_content(thinking, action_text)})


def _observation_problems(turn: int, images: int, has_tree: bool, observation: str) -> list[str]:
    """The latest user turn against the observation mode: a screenshot unless ui_tree, a tree unless screenshot."""
    problems = []
    if images != (0 if observation == "ui_tree" else 1):
        problems.append(f"user turn {turn + 1} holds {images} image(s); observation {observation} shows "
                        f"{'none' if observation == 'ui_tree' else 'exactly one'}")
    if has_tree != (observation != "screenshot"):
        problems.append(f"user turn {turn + 1} {'holds a screen tree' if has_tree else 'holds no screen tree'}; "
                        f"observation {observation} shows {'it' if observation != 'screenshot' else 'none'}")
    return problems


def _without_tree(text: str) -> str:
    """A user turn's text with the screen tree cut off after the screen info's JSON line (an answered turn keeps no
    tree)."""
    head, sep, info = text.rpartition("\n\n")
    return head + sep + info.split("\n", 1)[0]


def runtime_problems(messages: list[dict], observation: Optional[str] = None) -> list[str]:
    """How ``messages`` (a training row: the conversation up to one reply) departs from the runtime format;
    empty when it conforms. ``observation`` (a row's ``meta.observation``): what the latest turn must show; None
    accepts a screenshot, a screen tree or both."""
    if observation is not None and observation not in OBSERVATIONS:
        return [f"meta.observation {observation!r}: give one of {', '.join(OBSERVATIONS)}"]
    problems = []
    if not messages or messages[0].get("role") != "system" or not _DATE_LINE.match(message_text(messages[0])):
        problems.append("the first message must be the system prompt starting 'The current date: YYYY-MM-DD, Day'")
        return problems
    turns = messages[1:]
    roles = [m.get("role") for m in turns]
    expected = ["user", "assistant"] * (len(turns) // 2)
    if roles != expected or not turns:
        problems.append(f"after the system prompt, turns must alternate user, assistant and end with the assistant's "
                        f"(got {', '.join(map(str, roles)) or 'none'})")
        return problems
    users, replies = turns[0::2], turns[1::2]
    for i, user in enumerate(users):
        text = message_text(user)
        if i == 0:
            task, sep, info = text.rpartition("\n\n")
            if not sep or not task.strip():
                problems.append("the first user turn must be '{task}\\n\\n{screen_info}'")
        else:
            if not text.startswith(LATER_TURN_PREFIX):
                problems.append(f"user turn {i + 1} must start with '** Screen Info **' and a blank line")
            info = text[len(LATER_TURN_PREFIX):]
        info, _, tree = info.partition("\n")
        latest = i == len(users) - 1
        if tree and not latest:
            problems.append(f"user turn {i + 1} holds a screen tree; only the latest turn holds one")
        try:
            parsed = json.loads(info)
            ok = isinstance(parsed, dict) and set(parsed) == {"current_app"} and isinstance(parsed["current_app"], str)
        except ValueError:
            ok = False
        if not ok:
            problems.append(f"user turn {i + 1}: the screen info must be JSON {{\"current_app\": \"<app name>\"}}")
        if latest and observation is not None:
            problems += _observation_problems(i, _images_of(user), bool(tree), observation)
            continue
        want = (0 if tree else 1) if latest else 0  # a ui_tree row's latest turn may hold its tree instead
        if _images_of(user) not in ({want, 1} if latest and tree else {want}):
            problems.append(f"user turn {i + 1} holds {_images_of(user)} image(s); only the latest turn holds the "
                            "screenshot (exactly one), or its screen tree")
    for i, reply in enumerate(replies):
        content = reply.get("content") if isinstance(reply.get("content"), str) else ""
        if not re.fullmatch(r"<think>.*</think><answer>.*</answer>", content, re.S):
            problems.append(f"assistant turn {i + 1} must be <think>...</think><answer>...</answer>")
            continue
        try:
            action = parse_action(split_answer(content).answer)
        except ActionSyntaxError as err:
            problems.append(f"assistant turn {i + 1}: {err}")
            continue
        if action.type == "finish" and i < len(replies) - 1:
            problems.append(f"assistant turn {i + 1} finishes the episode, yet the conversation goes on")
    return problems
