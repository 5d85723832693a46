"""A request as the decoder takes it: the chat rendered to prompt ids by the model's template (images decoded by
``workbench.image_io`` and ``workbench.data.multimodal``, the path training rows take: base64 ``data:`` URLs; local paths only with
``allow_local_images``; remote URLs refused, never fetched), the completion's token limit checked against the
context (image tokens included), and each choice's sampling parameters. Every problem is an ``APIError`` 400
naming the field."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from . import protocol as P
from .batcher import SamplingParams
from .errors import APIError
from .registry import ServedModels


def _message_text(content) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.text for part in content)


@dataclass
class ChatPrompt:
    text: str
    ids: list[int]
    vision: Any = None  # the images' VisionInputs (workbench.data.multimodal) when the messages hold images

    @property
    def image_tokens(self) -> int:
        return self.vision.image_tokens if self.vision is not None else 0

    def prefill_inputs(self) -> dict:
        """Pixel values, image grids and token types for the prefill forward (computed on demand: the costly
        part of an image request, done once the request passed every check)."""
        import torch

        from ..data.multimodal import vision_batch

        return vision_batch(torch.tensor([self.ids]), [self.vision])


def image_parts(body: P.ChatCompletionRequest) -> list[tuple[int, int]]:
    """(message, part) positions of the image parts."""
    return [
        (i, j)
        for i, m in enumerate(body.messages)
        if isinstance(m.content, list)
        for j, part in enumerate(m.content)
        if part.type == "image_url"
    ]


def _image_messages(served: ServedModels, body: P.ChatCompletionRequest, where: list[tuple[int, int]]) -> list[dict]:
    """The messages with their images decoded; a 400 naming the reason for anything that cannot be used."""
    from ..image_io import ImageSourceError, resolve_images

    i, j = where[0]
    if served.processor is None:
        raise APIError(
            400,
            f"The model {body.model!r} is a text-only model and cannot read images "
            f"(messages[{i}].content[{j}] is an image part): send text only, or ask a "
            "vision-language model (e.g. a server started with --model tiny-glm4v).",
            param=f"messages.{i}.content.{j}",
            code="image_input_not_supported",
        )
    for i, j in where:
        if body.messages[i].role != "user":
            raise APIError(
                400,
                f"Image parts are only accepted in user messages; messages[{i}] has role {body.messages[i].role!r}.",
                param=f"messages.{i}.content.{j}",
            )
    messages = [
        {
            "role": _template_role(m.role),
            "content": [p.model_dump(exclude_none=True) for p in m.content]
            if isinstance(m.content, list)
            else (m.content or ""),
        }
        for m in body.messages
    ]
    try:
        return resolve_images(messages, allow_local_files=served.config.allow_local_images)
    except ImageSourceError as err:
        hint = (
            ""
            if served.config.allow_local_images or "local image paths" not in str(err)
            else " (this server was not started with --allow-local-images)"
        )
        raise APIError(
            400, f"Invalid image in the messages: {err}{hint}", param="messages", code="invalid_image"
        ) from None


def _template_role(role: str) -> str:
    """The chat template's role of a message: OpenAI's "developer" messages are system messages to the model."""
    return "system" if role == "developer" else role


def _template_problem(err: Exception) -> APIError:
    # template errors (e.g. "roles must alternate") come from the input
    return APIError(
        400,
        f"The chat template rejected the messages: {str(err).splitlines()[0] if str(err) else type(err).__name__}",
        param="messages",
    )


def render_chat(served: ServedModels, body: P.ChatCompletionRequest) -> ChatPrompt:
    kwargs: dict[str, Any] = dict(body.chat_template_kwargs or {})
    for reserved in (
        "conversation",
        "messages",
        "tokenize",
        "add_generation_prompt",
        "return_dict",
        "tools",
        "documents",
        "chat_template",
        "continue_final_message",
        "return_tensors",
    ):
        if reserved in kwargs:
            raise APIError(400, f"chat_template_kwargs may not set {reserved!r}", param="chat_template_kwargs")
    if body.enable_thinking is not None:
        kwargs["enable_thinking"] = body.enable_thinking
    from jinja2 import TemplateError

    from ..data.multimodal import encode_prompt
    from ..image_io import ImageSourceError

    images = image_parts(body)
    if images:
        messages = _image_messages(served, body, images)
    else:
        messages = [{"role": _template_role(m.role), "content": _message_text(m.content)} for m in body.messages]
    try:
        example = encode_prompt(served.tokenizer, messages, served.processor, template_kwargs=kwargs)
    except ImageSourceError as err:  # e.g. an aspect ratio the image processor cannot resize
        raise APIError(400, f"Invalid image in the messages: {err}", param="messages", code="invalid_image") from None
    except (TemplateError, ValueError, TypeError) as err:  # what a template raises on messages it cannot render
        raise _template_problem(err) from None
    if not example.input_ids:
        raise APIError(400, "The messages render to an empty prompt", param="messages")
    return ChatPrompt(served.tokenizer.decode(example.input_ids), example.input_ids, example.vision)


def max_new_tokens(
    served: ServedModels, prompt_len: int, requested: int | None, param: str, prompt_param: str, image_tokens: int = 0
) -> int:
    limit = served.decoder.max_context
    of_images = f", {image_tokens} of them image tokens" if image_tokens else ""
    fix = " (or use fewer or smaller images)" if image_tokens else ""
    if requested is None:
        requested = served.config.default_max_tokens or (limit - prompt_len)
        requested = min(requested, limit - prompt_len)
        if requested < 1:
            raise APIError(
                400,
                f"This model's maximum context length is {limit} tokens. However, your messages "
                f"resulted in {prompt_len} tokens{of_images}. Please reduce the length of the "
                f"messages{fix}.",
                param=prompt_param,
                code="context_length_exceeded",
            )
        return requested
    if prompt_len + requested > limit:
        raise APIError(
            400,
            f"This model's maximum context length is {limit} tokens. However, you requested "
            f"{prompt_len + requested} tokens ({prompt_len} in the messages{of_images}, {requested} "
            f"in the completion). Please reduce the length of the messages or completion{fix}.",
            param=prompt_param,
            code="context_length_exceeded",
        )
    return requested


def _sampling(body: P.SamplingFields, max_new: int, logprobs: int | None = None) -> SamplingParams:
    # the model's validation caps the list (else a 400 naming 'stop'); StopStringMatcher drops empty strings
    stops = [body.stop] if isinstance(body.stop, str) else list(body.stop or [])
    return SamplingParams(
        max_new_tokens=max_new,
        temperature=1.0 if body.temperature is None else body.temperature,
        top_p=1.0 if body.top_p is None else body.top_p,
        seed=body.seed,
        stop=stops,
        ignore_eos=body.ignore_eos,
        frequency_penalty=body.frequency_penalty or 0.0,
        presence_penalty=body.presence_penalty or 0.0,
        repetition_penalty=1.0 if body.repetition_penalty is None else body.repetition_penalty,
        logprobs=logprobs,
    )


def choice_params(body: P.SamplingFields, max_new: int, logprobs: int | None) -> list[SamplingParams]:
    """One SamplingParams per requested choice: choice i samples with seed + i, so that n seeded choices differ
    from each other and each is reproducible."""
    base = _sampling(body, max_new, logprobs)
    return [replace(base, seed=None if base.seed is None else base.seed + i) for i in range(body.n or 1)]
