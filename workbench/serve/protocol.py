"""Request and response bodies of the OpenAI-compatible API, as pydantic models.

The constraints live in the models (not only in handler code) so that /openapi.json tells clients
exactly what is accepted: a field the server does not implement is typed so that only its neutral
value validates (``tools`` empty, ``logit_bias`` empty...), and anything else is a 400
naming the field. Unknown fields are ignored, as clients add new ones faster than servers. Known fields
are strict about their JSON type (``"stream": "yes"`` or ``"max_tokens": "10"`` is a 400, not a guess).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

_IGNORE_EXTRA = ConfigDict(extra="ignore", strict=True)


class TextPart(BaseModel):
    model_config = _IGNORE_EXTRA
    type: Literal["text"]
    text: str


class ImageUrl(BaseModel):
    model_config = _IGNORE_EXTRA
    url: str = Field(
        min_length=1,
        description="A base64 `data:image/...;base64,` URL; a local file path only on a "
        "server started with --allow-local-images. Remote http(s) URLs are refused, never fetched.",
    )
    detail: Literal["auto", "low", "high"] | None = Field(
        None, description="Accepted and ignored: the model's image processor decides the resolution"
    )


class ImagePart(BaseModel):
    model_config = _IGNORE_EXTRA
    type: Literal["image_url"]
    image_url: ImageUrl


ContentPart = Annotated[
    TextPart | ImagePart,
    Field(
        discriminator="type",
        description="A text part, or an image part (vision-language models only; audio and files are not supported)",
    ),
]


class ChatMessage(BaseModel):
    model_config = _IGNORE_EXTRA
    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[ContentPart] | None = None
    name: str | None = None


class StreamOptions(BaseModel):
    model_config = _IGNORE_EXTRA
    include_usage: bool = False


class ResponseFormat(BaseModel):
    model_config = _IGNORE_EXTRA
    type: Literal["text"] = "text"


class SamplingFields(BaseModel):
    """Fields shared by chat and text completions."""

    model_config = _IGNORE_EXTRA
    model: str = Field(description="A model id from GET /v1/models: the base model or an adapter")
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: float | None = Field(None, ge=0, le=2, description="0 is greedy decoding")
    top_p: float | None = Field(None, ge=0, le=1)
    max_tokens: int | None = Field(None, ge=1)
    stop: str | Annotated[list[str], Field(max_length=16)] | None = Field(
        None, description="Up to 16 stop strings, never included in the output"
    )
    seed: int | None = Field(None, description="Makes sampling reproducible for the same request")
    n: int | None = Field(
        None,
        ge=1,
        le=16,
        description="Choices to generate (decoded together; with a seed, choice i samples with seed + i)",
    )
    frequency_penalty: float | None = Field(
        None,
        ge=-2,
        le=2,
        description="Subtracted from a token's logit once per time it already appears in the output (OpenAI)",
    )
    presence_penalty: float | None = Field(
        None,
        ge=-2,
        le=2,
        description="Subtracted from the logit of every token that already appears in the output (OpenAI)",
    )
    repetition_penalty: float | None = Field(
        None,
        gt=0,
        le=2,
        description="Extension (vLLM, transformers): "
        "logits of tokens already in the prompt or output are divided by it "
        "when positive, multiplied when negative; 1 is off",
    )
    logit_bias: dict[str, float] | None = Field(None, max_length=0, description="Not implemented: only empty")
    user: str | None = None
    ignore_eos: bool = Field(False, description="Keep generating past the end-of-sequence token (benchmarks; as vLLM)")
    return_tokens_as_token_ids: bool = Field(
        False,
        description="In logprobs, name each token 'token_id:ID' instead "
        "of its text (as vLLM): exact where a token is no whole character",
    )


class ChatCompletionRequest(SamplingFields):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(None, ge=1, description="Preferred over max_tokens when both are given")
    logprobs: bool | None = Field(
        None, description="Return each output token's log-probability (the model's, before penalties and temperature)"
    )
    top_logprobs: int | None = Field(
        None, ge=0, le=20, description="With logprobs: the most likely tokens at each position"
    )
    tools: list[dict[str, Any]] | None = Field(None, max_length=0, description="Not implemented: only empty")
    tool_choice: Literal["none"] | None = None
    functions: list[dict[str, Any]] | None = Field(None, max_length=0, description="Not implemented")
    response_format: ResponseFormat | None = None
    enable_thinking: bool | None = Field(
        None,
        description="Passed to the chat template (as clients send it through extra_body); overrides "
        "chat_template_kwargs.enable_thinking",
    )
    return_reasoning: bool | None = Field(
        None,
        description="true: reasoning in message.reasoning_content (and .reasoning), answer in content; "
        "false: the raw text with its <think> tags in content; null: the server's --reasoning",
    )
    chat_template_kwargs: dict[str, Any] | None = Field(None, description="Extra variables for the chat template")


class CompletionRequest(SamplingFields):
    prompt: (
        Annotated[str, Field(min_length=1)]
        | Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1, max_length=1)]
    ) = Field(description="One non-empty prompt (a list must hold exactly one)")
    echo: Literal[False] | None = Field(None, description="Not implemented")
    suffix: Literal[""] | None = Field(None, description="Not implemented")
    best_of: int | None = Field(None, ge=1, le=1)
    logprobs: int | None = Field(
        None,
        ge=0,
        le=5,
        description="Return each token's log-probability and the this many most likely tokens at each position",
    )


class LoadAdapterRequest(BaseModel):
    lora_name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$")
    lora_path: str = Field(min_length=1, description="A peft adapter directory or a run directory (runs/NAME)")


class UnloadAdapterRequest(BaseModel):
    lora_name: str = Field(min_length=1)


# ---- responses (documentation for /openapi.json; handlers build the same shapes) ------------


class ErrorBody(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorBody


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str | None
    reasoning_content: str | None = Field(None, description="Present when the model reasoned and return_reasoning")
    reasoning: str | None = Field(None, description="Same as reasoning_content (the newer field name)")


class TopLogprob(BaseModel):
    token: str
    logprob: float
    bytes: list[int] | None


class TokenLogprob(TopLogprob):
    top_logprobs: list[TopLogprob]


class ChoiceLogprobs(BaseModel):
    content: list[TokenLogprob] | None


class ChatChoice(BaseModel):
    index: int
    message: AssistantMessage
    finish_reason: Literal["stop", "length"]
    logprobs: ChoiceLogprobs | None = None


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    usage: Usage


class ChunkDelta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None


class ChunkChoice(BaseModel):
    index: int
    delta: ChunkDelta
    finish_reason: Literal["stop", "length"] | None = None
    logprobs: ChoiceLogprobs | None = None


class ChatCompletionChunk(BaseModel):
    """One ``data:`` line of a streamed chat completion (the stream ends with ``data: [DONE]``)."""

    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: Usage | None = None


class CompletionLogprobs(BaseModel):
    tokens: list[str]
    token_logprobs: list[float]
    top_logprobs: list[dict[str, float]] | None
    text_offset: list[int]


class CompletionChoice(BaseModel):
    index: int
    text: str
    finish_reason: Literal["stop", "length"] | None
    logprobs: CompletionLogprobs | None = None


class Completion(BaseModel):
    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: Usage | None = None


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "workbench"
    root: str = Field(description="What was loaded: the base model's source or the adapter's directory")
    parent: str | None = Field(None, description="For an adapter: the id of the base model it runs on")


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class Health(BaseModel):
    """Open to anyone, also on a server with an API key. ``model`` is the served base model's id; null only when
    the server has an API key and ``health_hides_model`` (GET /v1/models names it then, with the key)."""

    status: Literal["ok", "loading", "error"]
    model: str | None = Field(None, description="The served base model's id (null when hidden behind the API key)")
    running: int = 0
    waiting: int = 0
    peak_batch: int = Field(0, description="The most requests decoded in one step since the server started")
    detail: str | None = None
