"""The agent's conversation, exactly as Open-AutoGLM's runtime (``phone_agent.PhoneAgent``) builds it at every step,
so that what a model is trained on is what the deployed runtime sends it:

- one system message: the runtime's own system prompt (``phone.openautoglm.runtime_system_prompt``: ``cn`` or ``en``, its
  ``--lang``), whose first line is the date;
- the first user turn: the screenshot (an ``image_url`` part, a base64 PNG data: URL), then the text
  ``"{task}\\n\\n{screen_info}"``; each later user turn: the new screenshot, then ``"** Screen Info **\\n\\n{screen_info}"``;
  ``screen_info`` is the JSON ``{"current_app": "<name>"}``, the name as the runtime reports it (its app table's, "System
  Home" for an app it does not know: ``SimPhone.current_app``);
- once the model has replied, the screenshot leaves that user turn (its text part stays, in a list), so the model sees
  only the latest screenshot and the text of every earlier turn;
- each reply is kept as ``<think>{thinking}</think><answer>{action}</answer>`` of what the runtime's client cut out of
  the reply's content (``phone.openautoglm.runtime_split``): for a reply in the model's own form the thinking keeps
  its tags (``<think>X</think>\\n<answer>``), since the client cuts at ``do(action=``.

The model's reply (``assistant_target``) is written as AutoGLM-Phone writes it (Open-AutoGLM's README):
``<think>{thinking}</think>\\n<answer>{action}`` with no closing tag: the runtime keeps everything from ``do(action=``
on as the action, so a closing ``</answer>`` would reach its action parser and fail.

Observation modes (``OBSERVATIONS``): ``screenshot`` is the runtime's. ``ui_tree`` (no image; the screen's compact
accessibility tree, ``workbench.phone.uitree``, follows the JSON in ``screen_info`` on its own lines) and ``both``
(screenshot and tree) are this workbench's, for text models in our runner and AndroidLab-style runtimes:
Open-AutoGLM sends screenshots only. Their system prompt is the runtime's with the sentence on what the model sees
changed; the tree, like the screenshot, stays in the latest user turn only.

``Conversation`` builds it turn by turn (the episode runner, the recorder of training rows, GRPO's prompts);
``runtime_problems`` says how a training row departs from it (the data linter); ``legacy_rows`` rewrites rows of the
form this workbench wrote before (``meta.format`` ``autoglm-runtime``: its own system prompt, replies closed by
``</answer>``) into it.
"""

from __future__ import annotations

import copy
import datetime
import json
import re

from .actions import ActionSyntaxError, format_action, parse_action, parse_legacy_action, split_answer
from .openautoglm import ACTION_MARKERS, check_lang, history_reply, runtime_action, runtime_split, runtime_system_prompt

LATER_TURN_PREFIX = "** Screen Info **\n\n"
FORMAT_NAME = "open-autoglm"  # meta.format of training rows in Open-AutoGLM's runtime format
LEGACY_FORMAT_NAME = "autoglm-runtime"  # meta.format of the rows written before it (see legacy_rows)
CONTEXT_TOKENS = 25_480  # Open-AutoGLM's recommended server context (--max-model-len)
MAX_STEPS = 100  # Open-AutoGLM's default step limit
REPEAT_LIMIT = 3  # the same action on the same screen this many times in a row ends an episode (stuck)
OBSERVATIONS = ("screenshot", "ui_tree", "both")  # what the model is shown of each screen
DEFAULT_LANG = "en"  # the prompt the workbench's English tasks use; AutoGLM-Phone-9B was trained on cn

_TREE_LINES = {
    "en": "one a line: name, texts, bounds [left,top][right,bottom], the point a tap uses and the other gestures",
    "cn": "每行一个元素：名称、文本、边界 [左,上][右,下]、点击所用的点和其他手势",
}
# The sentence of each prompt that says what the model sees, and what it says in the workbench's text modes
_SEES = {
    "en": "Given a screenshot of the Android interface at each step,",
    "cn": "可以根据操作历史和当前状态图执行一系列操作来完成任务。",
}
_SEES_AS = {
    (
        "en",
        "ui_tree",
    ): "Given the Android interface at each step as text (the app on screen and its elements, {lines}),",
    ("en", "both"): "Given a screenshot of the Android interface at each step and its elements as text ({lines}),",
    ("cn", "ui_tree"): "可以根据操作历史和当前界面的文本（当前应用及其元素，{lines}）执行一系列操作来完成任务。",
    ("cn", "both"): "可以根据操作历史、当前状态图和界面元素的文本（{lines}）执行一系列操作来完成任务。",
}
_DATE_LINE = {
    "en": re.compile(r"^The current date: (\d{4}-\d{2}-\d{2}), \w+\n"),
    "cn": re.compile(r"^今天的日期是: (\d{4})年(\d{2})月(\d{2})日 星期.\n"),
}
_TARGET = re.compile(r"<think>(.*?)</think>\n<answer>(.*)", re.S)
_KEPT = re.compile(r"<think>(.*)</think><answer>(.*)</answer>", re.S)


def check_observation(observation: str) -> str:
    if observation not in OBSERVATIONS:
        raise ValueError(f"observation {observation!r}: give one of {', '.join(OBSERVATIONS)}")
    return observation


def repeat_limit_problem(limit: int) -> str | None:
    """Why ``limit`` is no repeat limit (0 never ends an episode; 1 would end it at its first action), else None."""
    return None if limit == 0 or limit >= 2 else f"repeat_limit must be 0 (never) or at least 2, got {limit}"


def system_prompt(date: datetime.date | None = None, observation: str = "screenshot", lang: str = DEFAULT_LANG) -> str:
    """The system message: the runtime's prompt in ``lang`` for ``date`` (default: today); in the text modes with the
    sentence on what the model sees changed."""
    prompt = runtime_system_prompt(date, check_lang(lang))
    if check_observation(observation) == "screenshot":
        return prompt
    return prompt.replace(_SEES[lang], _SEES_AS[lang, observation].format(lines=_TREE_LINES[lang]), 1)


def prompt_date_lang(prompt: str) -> tuple[datetime.date, str] | None:
    """(date, lang) of a system prompt in the runtime's form (by its date line); None for any other text."""
    for lang, pattern in _DATE_LINE.items():
        match = pattern.match(prompt)
        if match:
            parts = match.group(1).split("-") if lang == "en" else match.groups()
            try:
                return datetime.date(*map(int, parts)), lang
            except ValueError:
                return None
    return None


def screen_info(current_app: str, tree: str | None = None) -> str:
    """``{"current_app": ...}``, then the screen's tree on the lines below when there is one."""
    info = json.dumps({"current_app": current_app}, ensure_ascii=False)
    return info if tree is None else f"{info}\n{tree}"


def assistant_target(thinking: str, action_text: str) -> str:
    """A reply as the model writes it: ``<think>{thinking}</think>\\n<answer>{action}``, no closing tag."""
    return f"<think>{thinking}</think>\n<answer>{action_text}"


def _image_part(url: str) -> dict:
    return {"type": "image_url", "image_url": {"url": url}}


def message_text(message: dict) -> str:
    """A message's text: its content, or the text parts of a multimodal one."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if isinstance(p, dict) and p.get("type") == "text")


def message_image(message: dict) -> str | None:
    """The image URL (or file path) of a message's first image part; None without one."""
    content = message.get("content")
    for part in content if isinstance(content, list) else []:
        if isinstance(part, dict) and part.get("type") == "image_url":
            return (part.get("image_url") or {}).get("url")
        if isinstance(part, dict) and part.get("type") == "image":
            return part.get("image") or part.get("url")
    return None


def _images_of(message: dict) -> int:
    content = message.get("content")
    return (
        0
        if isinstance(content, str)
        else sum(1 for p in content or [] if isinstance(p, dict) and p.get("type") in ("image_url", "image"))
    )


class Conversation:
    """One episode's messages in the runtime format: ``observe`` a screen, then ``reply``; repeat."""

    def __init__(
        self, task: str, date: datetime.date | None = None, observation: str = "screenshot", lang: str = DEFAULT_LANG
    ):
        self.task, self.observation, self.lang = task, check_observation(observation), check_lang(lang)
        self.messages: list[dict] = [{"role": "system", "content": system_prompt(date, observation, lang)}]

    @property
    def steps(self) -> int:
        return sum(1 for m in self.messages if m["role"] == "assistant")

    def observe(self, image_url: str | None, current_app: str, tree: str | None = None) -> list[dict]:
        """Add the user turn showing a screen (``image_url``: a data: URL, or a file path in training rows;
        ``tree``: the screen's compact tree), each as the observation mode asks; the messages to send the model."""
        if self.messages[-1]["role"] == "user":
            raise RuntimeError("observe() twice without a reply in between")
        wants_image, wants_tree = self.observation != "ui_tree", self.observation != "screenshot"
        if (wants_image and image_url is None) or (wants_tree and tree is None):
            raise ValueError(
                f"observation {self.observation!r} needs "
                f"{'a screenshot' if wants_image and image_url is None else 'the screen tree'}"
            )
        text = (f"{self.task}\n\n" if self.steps == 0 else LATER_TURN_PREFIX) + screen_info(
            current_app, tree if wants_tree else None
        )
        # without an image the turn is plain text: what a text-only model's chat template takes
        content = [_image_part(image_url), {"type": "text", "text": text}] if wants_image else text
        self.messages.append({"role": "user", "content": content})
        return self.messages

    def reply(self, content: str) -> None:
        """Keep a reply as the runtime keeps it (``history_reply`` of its content, as the server returned it); the
        screenshot, and in the text modes the tree, leave the turn it answered."""
        if self.messages[-1]["role"] != "user":
            raise RuntimeError("reply() without a screen observed first")
        last = self.messages[-1]
        if isinstance(last["content"], str):
            last["content"] = _without_tree(last["content"])
        else:
            last["content"] = [
                {**p, "text": _without_tree(p["text"])} for p in last["content"] if p.get("type") == "text"
            ]
        self.messages.append({"role": "assistant", "content": history_reply(content or "")})


def replayable_reply(kept: str) -> str:
    """A reply whose content the runtime keeps as ``kept`` (an assistant turn of its history, ``history_reply``):
    replaying it takes the same action and leaves the same history."""
    match = _KEPT.fullmatch(kept)
    return match.group(1) + match.group(2) if match else kept


def replied_actions(messages: list[dict]) -> list:
    """What the runtime carried out for each reply of a conversation so far (its assistant turns, kept as the
    runtime keeps them or written as the model writes them): the ``Action``, None for a reply it parsed but did
    nothing with. Replayed from a task's start (``phone.expert.replay``) they rebuild the phone the conversation
    shows last."""
    out = []
    for message in messages:
        if message["role"] == "assistant":
            try:
                out.append(runtime_action(runtime_split(replayable_reply(message_text(message)))[1]))
            except ActionSyntaxError:  # a reply the runtime could not parse ends its episode: nothing after it
                out.append(None)
    return out


def _without_tree(text: str) -> str:
    """A user turn's text with the screen tree cut off after the screen info's JSON line (an answered turn keeps no
    tree)."""
    head, sep, info = text.rpartition("\n\n")
    return head + sep + info.split("\n", 1)[0]


def _observation_problems(turn: int, images: int, has_tree: bool, observation: str) -> list[str]:
    """The latest user turn against the observation mode: a screenshot unless ui_tree, a tree unless screenshot."""
    problems = []
    if images != (0 if observation == "ui_tree" else 1):
        problems.append(
            f"user turn {turn + 1} holds {images} image(s); observation {observation} shows "
            f"{'none' if observation == 'ui_tree' else 'exactly one'}"
        )
    if has_tree != (observation != "screenshot"):
        problems.append(
            f"user turn {turn + 1} {'holds a screen tree' if has_tree else 'holds no screen tree'}; "
            f"observation {observation} shows {'it' if observation != 'screenshot' else 'none'}"
        )
    return problems


def _system_problems(messages: list[dict], observation: str | None) -> list[str]:
    first = message_text(messages[0]) if messages and messages[0].get("role") == "system" else None
    found = prompt_date_lang(first) if first is not None else None
    if found is None:
        return [
            "the first message must be Open-AutoGLM's system prompt, its first line the date ('The current "
            "date: YYYY-MM-DD, Day' or '今天的日期是: YYYY年MM月DD日 星期X')"
        ]
    date, lang = found
    modes = [observation] if observation is not None else list(OBSERVATIONS)
    if first not in {system_prompt(date, mode, lang) for mode in modes}:
        return [
            f"the system prompt is not Open-AutoGLM's ({lang}, observation {'/'.join(modes)}) after its date line"
            f"{': it is the legacy workbench prompt (workbench data convert rewrites it)' if '# Output format' in first else ''}"
        ]
    return []


def _user_problems(users: list[dict], observation: str | None) -> list[str]:
    problems = []
    for i, user in enumerate(users):
        text = message_text(user)
        if i == 0:
            task, sep, info = text.rpartition("\n\n")
            if not sep or not task.strip():
                problems.append("the first user turn must be '{task}\\n\\n{screen_info}'")
        else:
            if not text.startswith(LATER_TURN_PREFIX):
                problems.append(f"user turn {i + 1} must start with '** Screen Info **' and a blank line")
            info = text[len(LATER_TURN_PREFIX) :]
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
            problems.append(f'user turn {i + 1}: the screen info must be JSON {{"current_app": "<app name>"}}')
        if latest and observation is not None:
            problems += _observation_problems(i, _images_of(user), bool(tree), observation)
            continue
        want = (0 if tree else 1) if latest else 0  # a ui_tree row's latest turn may hold its tree instead
        if _images_of(user) not in ({want, 1} if latest and tree else {want}):
            problems.append(
                f"user turn {i + 1} holds {_images_of(user)} image(s); only the latest turn holds the "
                "screenshot (exactly one), or its screen tree"
            )
    return problems


def _reply_problems(replies: list[dict]) -> list[str]:
    problems = []
    for i, reply in enumerate(replies):
        content = reply.get("content") if isinstance(reply.get("content"), str) else ""
        last = i == len(replies) - 1
        if last:
            match = _TARGET.fullmatch(content)
            if not match or match.group(2).rstrip().endswith("</answer>"):
                problems.append(
                    f"assistant turn {i + 1} (the reply to learn) must be <think>...</think>\\n<answer>"
                    "do(...), as AutoGLM-Phone writes it: no closing </answer> (the runtime would parse it "
                    "into the action)"
                )
                continue
            action_text = match.group(2)
            if runtime_split(content)[1] != action_text:
                problems.append(
                    f"assistant turn {i + 1}: the runtime cuts the action at the first 'do(action=' or "
                    "'finish(message=', and the thinking holds one"
                )
                continue
        else:
            match = _KEPT.fullmatch(content)
            thinking = match.group(1) if match else ""
            if (
                not match
                or thinking != thinking.strip()
                or any(m in thinking for m in ACTION_MARKERS)
                or not match.group(2).startswith(ACTION_MARKERS)
            ):
                problems.append(
                    f"assistant turn {i + 1} must be the reply as the runtime keeps it: "
                    "<think>...</think><answer>do(...)</answer>"
                )
                continue
            action_text = match.group(2)
        try:
            action = parse_action(action_text)
        except ActionSyntaxError as err:
            problems.append(f"assistant turn {i + 1}: {err}")
            continue
        if action.type == "finish" and not last:
            problems.append(f"assistant turn {i + 1} finishes the episode, yet the conversation goes on")
    return problems


def runtime_problems(messages: list[dict], observation: str | None = None) -> list[str]:
    """How ``messages`` (a training row: the conversation up to one reply) departs from the runtime format;
    empty when it conforms. ``observation`` (a row's ``meta.observation``): what the latest turn must show; None
    accepts a screenshot, a screen tree or both."""
    if observation is not None and observation not in OBSERVATIONS:
        return [f"meta.observation {observation!r}: give one of {', '.join(OBSERVATIONS)}"]
    problems = _system_problems(messages, observation)
    if problems:
        return problems
    turns = messages[1:]
    roles = [m.get("role") for m in turns]
    if roles != ["user", "assistant"] * (len(turns) // 2) or not turns:
        return [
            f"after the system prompt, turns must alternate user, assistant and end with the assistant's "
            f"(got {', '.join(map(str, roles)) or 'none'})"
        ]
    return _user_problems(turns[0::2], observation) + _reply_problems(turns[1::2])


# ---- the legacy form ----------------------------------------------------------------------------------------------
def legacy_rows(rows: list[dict], lang: str = DEFAULT_LANG) -> list[dict]:
    """Rows of the legacy form (``meta.format`` ``autoglm-runtime``: the workbench's own system prompt, every reply
    ``<think>..</think><answer>..</answer>`` with a Type's text JSON-escaped) in Open-AutoGLM's runtime form: its
    system prompt in ``lang`` for the row's date, the reply to learn as ``assistant_target``, earlier replies as the
    runtime keeps them. The screens, app names and actions stay as recorded. ValueError naming the row and why for a
    row that is not of that form."""
    out = []
    for number, row in enumerate(rows, 1):
        try:
            out.append(_legacy_row(row, lang))
        except (ValueError, ActionSyntaxError, KeyError, TypeError) as err:
            raise ValueError(f"row {number}: {err}") from None
    return out


def _legacy_row(row: dict, lang: str) -> dict:
    meta = dict(row.get("meta") or {})
    if meta.get("format") != LEGACY_FORMAT_NAME:
        raise ValueError(f"meta.format is {meta.get('format')!r}, not the legacy {LEGACY_FORMAT_NAME!r}")
    messages = row["messages"]
    match = re.match(r"^The current date: (\d{4}-\d{2}-\d{2}), \w+\n", message_text(messages[0]))
    if not match:
        raise ValueError("its system prompt has no 'The current date: YYYY-MM-DD, Day' line")
    observation = meta.get("observation", "screenshot")
    users, replies = messages[1::2], messages[2::2]
    first = message_text(users[0])
    conversation = Conversation(
        first.rpartition("\n\n")[0], datetime.date.fromisoformat(match.group(1)), observation, lang
    )
    new = []
    for i, (user, reply) in enumerate(zip(users, replies)):
        text = message_text(user)
        info = text.rpartition("\n\n")[2] if i == 0 else text[len(LATER_TURN_PREFIX) :]
        info, _, tree = info.partition("\n")
        latest = i == len(replies) - 1  # an answered turn kept neither its image nor its tree: stand-ins, cut again
        conversation.observe(
            message_image(user) or ("" if not latest else None),
            json.loads(info)["current_app"],
            tree or ("" if not latest else None),
        )
        split = split_answer(reply["content"])
        target = assistant_target(split.reasoning, format_action(parse_legacy_action(split.answer)))
        new = copy.deepcopy(conversation.messages)
        if not latest:
            conversation.reply(target)
    for m in new:
        if m["role"] == "assistant":
            m["weight"] = 0
    new.append({"role": "assistant", "content": target, "weight": replies[-1].get("weight", 1)})
    meta["format"], meta["lang"] = FORMAT_NAME, lang
    return {**row, "messages": new, "meta": meta}
