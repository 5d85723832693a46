"""One episode: a task, each step as the model saw and answered it, what the phone did, and how it ended.

``end_reason`` is one of ``END_REASONS``: ``finish`` (the agent said finish), ``parse_failure`` (a reply that does
not parse: AutoGLM's runtime turns it into finish, and it counts as no success), ``step_limit``, ``repeated`` (the
same action on the same screen ``phone.conversation.REPEAT_LIMIT`` times in a row: stuck, no success), ``context_overflow``
(the server refused the conversation as longer than its context) or ``error`` (the request failed). ``success``
is the final-state checks all holding after a parsed finish; None when the device cannot judge its state (a real
phone).

A person's demonstration (``workbench.agent.demonstrate``) is an episode too, of model ``demonstration``; a correction
continues a model's episode from the step it got wrong: its first ``context_steps`` steps are the model's own, kept as
the context of the steps a person demonstrated after them and never a training target themselves.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

END_REASONS = ("finish", "parse_failure", "step_limit", "repeated", "context_overflow", "error")


@dataclass
class Turn:
    index: int  # 1-based
    current_app: str  # the app on screen when the model was asked
    screenshot: str | None = None  # the screen it saw: a file name in the episodes folder once stored
    prompt_tokens: int | None = None  # the server's count of this request's prompt
    content: str = ""  # the reply as the server returned it (reasoning split off)
    reasoning: str = ""
    answer: str = ""  # the text parsed as the action (the <answer> part)
    action: str | None = None  # the action as executed (format_action); None when the request failed
    parse_error: str | None = None
    valid: bool | None = None  # the action did something on the phone
    effect: str = ""  # what happened, in words
    element: str | None = None  # the element a Tap / Long Press / Double Tap hit
    target_box: list[int] | None = None  # its box on the 0-999 grid
    error: str | None = None
    ui_tree: str | None = None  # the screen's compact tree, when the model was shown it
    png: bytes | None = field(default=None, repr=False, compare=False)  # the screenshot until it is stored


@dataclass
class Episode:
    task: str  # the task id
    template: str
    split: str
    apps: list[str]
    instruction: str
    model: str
    date: str  # the date the system prompt was stamped with (YYYY-MM-DD)
    observation: str = "screenshot"  # what the model was shown of each screen (phone.conversation.OBSERVATIONS)
    lang: str = "en"  # the runtime's system prompt it was sent (phone.openautoglm.LANGS)
    steps: list[Turn] = field(default_factory=list)
    end_reason: str | None = None
    success: bool | None = None
    checks: dict | None = None
    message: str | None = None  # finish's message, or why the episode ended otherwise
    final_app: str | None = None
    final_screenshot: str | None = None
    final_png: bytes | None = field(default=None, repr=False, compare=False)
    context_steps: int = (
        0  # a correction: its first steps are the corrected model's, context only (no rows of their own)
    )

    @property
    def prompt_tokens_last(self) -> int | None:
        counts = [s.prompt_tokens for s in self.steps if s.prompt_tokens is not None]
        return counts[-1] if counts else None

    def to_dict(self) -> dict:
        out = asdict(self)
        out.pop("final_png")
        for step in out["steps"]:
            step.pop("png")
        return out

    @classmethod
    def from_dict(cls, data: dict) -> Episode:
        data = dict(data)
        steps = [Turn(**s) for s in data.pop("steps", [])]
        return cls(**data, steps=steps)
