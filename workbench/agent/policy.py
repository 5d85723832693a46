"""Policies: what answers the phone agent's turns. A policy maps a batch of conversations in AutoGLM's runtime format
(``workbench.phone.conversation``) to one reply each, as a server would return them (``ModelReply``: content, the
reasoning it split off, an error, the prompt's token count).

- ``ServedPolicy``: a model behind any OpenAI-compatible server; the batch goes out as concurrent requests, which
  the server decodes together.
- ``OraclePolicy``: the tasks' oracle solutions, found from the conversation alone (the task's instruction in the
  first user turn, the step from the replies so far): the same loop, no model.
- ``ExpertPolicy``: the expert (``phone.expert``) on the phone the conversation shows: the task found by its
  instruction, the phone rebuilt by replaying the conversation's replies from the task's start, whoever wrote them
  (so it answers after another agent's mistakes too: DAgger's labels).
- ``InProcessPolicy``: a model in this process (the reinforcement-learning loop's model under training), greedy
  answers of ``workbench.forward.generate``; any other callable of the same shape (``Policy``) plugs in too.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from ..phone.actions import Action, format_action
from ..phone.conversation import assistant_target, message_text, replied_actions
from ..phone.expert import Expert, ExpertStep, replay
from ..phone.tasks import PhoneTask
from ..phone.uitree import quoted_target, turn_tree
from ..serve.remote import ModelReply, ServerClient, chat_request


class Policy(Protocol):
    name: str

    def __call__(self, conversations: list[list[dict]]) -> list[ModelReply]: ...


# What Open-AutoGLM's client asks of the server for every reply (phone_agent.model.ModelConfig's defaults, 0.1.1):
# greedy, but with nucleus 0.85 and a frequency penalty of 0.2
RUNTIME_SAMPLING = {"temperature": 0.0, "top_p": 0.85, "frequency_penalty": 0.2}


class ServedPolicy:
    def __init__(
        self,
        client: ServerClient,
        model: str,
        *,
        temperature: float = 0.0,
        max_tokens: int = 512,
        seed: int | None = None,
        concurrency: int = 8,
        **sampling,
    ):
        """``sampling``: more request fields (``top_p``, ``frequency_penalty``: ``RUNTIME_SAMPLING`` asks as
        Open-AutoGLM's client does)."""
        self.client, self.name = client, model
        self.sampling = {"temperature": temperature, "max_tokens": max_tokens, "seed": seed, **sampling}
        self.pool = ThreadPoolExecutor(max(1, concurrency), thread_name_prefix=f"policy-{model}")

    def __call__(self, conversations: list[list[dict]]) -> list[ModelReply]:
        return list(
            self.pool.map(
                lambda messages: self.client.chat(chat_request(self.name, messages, **self.sampling)), conversations
            )
        )

    def close(self) -> None:
        self.pool.shutdown(wait=False)


def first_instruction(messages: list[dict]) -> str:
    """The task instruction of a runtime-format conversation: the first user turn's text before its screen info."""
    return message_text(next(m for m in messages if m["role"] == "user")).rpartition("\n\n")[0]


def _answer(messages: list[dict], thinking: str, action: Action) -> ModelReply:
    """A scripted reply to ``messages``: shown the screen as text, it quotes the line of the element it taps
    (``phone.uitree.quoted_target``), as the oracle's rows do."""
    tree = turn_tree(message_text(messages[-1]))[1]
    thinking = quoted_target(thinking, tree, action) if tree else thinking
    return ModelReply(assistant_target(thinking, format_action(action)))


class OraclePolicy:
    name = "oracle"

    def __init__(self, tasks: Iterable[PhoneTask]):
        self.solutions: dict[str, list] = {}
        for task in tasks:
            steps = task.oracle()
            # it finds a task by its instruction: two tasks of one instruction would be played as one
            if self.solutions.setdefault(task.instruction, steps) != steps:
                raise ValueError(
                    f"two tasks read {task.instruction!r} and need different actions (one is "
                    f"{task.id}): give each task its own instruction"
                )

    def __call__(self, conversations: list[list[dict]]) -> list[ModelReply]:
        replies = []
        for messages in conversations:
            steps = self.solutions.get(first_instruction(messages))
            done = sum(1 for m in messages if m["role"] == "assistant")
            if steps is None:
                replies.append(ModelReply(error="the oracle knows no task with this instruction"))
                continue
            step = steps[done] if done < len(steps) else None
            if step is None:  # past its solution (a phone that does not behave as simulated): give up
                replies.append(
                    ModelReply(
                        assistant_target(
                            "The plan is used up.", format_action(Action("finish", {"message": "gave up"}))
                        )
                    )
                )
                continue
            replies.append(_answer(messages, step.thinking, step.action))
        return replies


class ExpertPolicy:
    """The expert's next step on the phone each conversation shows (``expert``: one ``phone.expert.Expert``, whose
    answers are kept across calls; default a new one)."""

    name = "expert"

    def __init__(self, tasks: Iterable[PhoneTask], expert: Expert | None = None):
        self.tasks: dict[str, PhoneTask] = {}
        for task in tasks:  # it finds a task by its instruction: two tasks of one instruction would be played as one
            if self.tasks.setdefault(task.instruction, task) != task:
                raise ValueError(
                    f"two tasks read {task.instruction!r} and start differently (one is {task.id}): "
                    "give each task its own instruction"
                )
        self.expert = expert or Expert()

    def phone(self, messages: list[dict]):
        """(task, the phone ``messages`` show: the instruction's task, its replies replayed from the task's start);
        (None, None) for a conversation of no task it knows."""
        task = self.tasks.get(first_instruction(messages))
        return (task, replay(task, replied_actions(messages))) if task is not None else (None, None)

    def step(self, messages: list[dict]) -> ExpertStep | None:
        """The expert's step on the phone ``messages`` show; None for a conversation of no task it knows."""
        task, phone = self.phone(messages)
        return self.expert.step(task, phone) if task is not None else None

    def reply(self, messages: list[dict], step: ExpertStep) -> ModelReply:
        """``step`` as the reply to ``messages``."""
        return _answer(messages, step.thinking, step.action)

    def __call__(self, conversations: list[list[dict]]) -> list[ModelReply]:
        replies = []
        for messages in conversations:
            step = self.step(messages)
            replies.append(
                ModelReply(error="the expert knows no task with this instruction")
                if step is None
                else self.reply(messages, step)
            )
        return replies


def default_batch_size(device) -> int:
    """Conversations a forward for a model on ``device``: 8 on a CPU (more only queue behind its cores), 48 on an
    accelerator, where a batch costs about what one conversation does and a split's episodes (31 held-out tasks)
    then take one forward a step instead of four."""
    import torch

    return 8 if torch.device(device).type == "cpu" else 48


class InProcessPolicy:
    """A model loaded in this process (e.g. the one a reinforcement-learning loop trains): its greedy answers, or with
    ``temperature`` > 0 answers sampled from its distribution at that temperature (``forward.generate
    .sample_completions``; seed torch's generator for samples that repeat), ``batch_size`` conversations per forward
    (default: ``default_batch_size`` of the model's device). The screenshots' data: URLs are decoded here; no token
    counts."""

    def __init__(
        self,
        model,
        tokenizer,
        processor=None,
        *,
        name: str = "in-process",
        max_tokens: int = 256,
        batch_size: int | None = None,
        autocast=None,
        temperature: float = 0.0,
    ):
        self.model, self.tokenizer, self.processor, self.name = model, tokenizer, processor, name
        if batch_size is None:
            batch_size = default_batch_size(next(model.parameters()).device)
        self.max_tokens, self.batch_size, self.autocast = max_tokens, batch_size, autocast  # autocast: a run's policy
        self.temperature = temperature

    def __call__(self, conversations: list[list[dict]]) -> list[ModelReply]:
        from ..forward.generate import greedy_replies, sample_completions
        from ..image_io import resolve_images

        resolved = [resolve_images(c) for c in conversations]
        if self.temperature <= 0:
            answers = greedy_replies(
                self.model,
                self.tokenizer,
                resolved,
                self.max_tokens,
                processor=self.processor,
                batch_size=self.batch_size,
                autocast=self.autocast,
            )
        else:
            answers = [
                text
                for i in range(0, len(resolved), self.batch_size)
                for text in sample_completions(
                    self.model,
                    self.tokenizer,
                    resolved[i : i + self.batch_size],
                    1,
                    self.max_tokens,
                    temperature=self.temperature,
                    autocast=self.autocast,
                    processor=self.processor,
                ).texts
            ]
        return [ModelReply(answer) for answer in answers]
