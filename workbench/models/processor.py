"""The processor of a vision-language model (GLM-4.1V family): its image processor, tokenizer and chat template.

* ``load_processor(where, tokenizer)``: the model's own processor when ``where`` (a local directory or hub id)
  has one and it loads here; otherwise, and for the tiny test model (``where=None``), an offline processor:
  ``ImageOnlyGlm4vProcessor`` (the stock ``Glm4vProcessor`` without its video processor, which needs
  torchvision) over GLM-4.1V's PIL image processor, with the directory's resize rules when it has them.
* ``GLM4V_CHAT_TEMPLATE``: the chat template the offline processor and the tiny model use (see its comment).
* ``save_processor_files(processor, directory)``: the files a server reads images by, beside a model directory's
  weights and tokenizer, so that the directory loads without the workbench.
* ``image_token_count(processor, width, height)``: tokens one image of that size becomes (the processor's
  resize rules: patch size, merge size, pixel limits), for the planner and the server's length checks.
* ``image_grid(width, height, ...)`` / ``resize_rules(image_processor)``: that resize rule itself (the patch grid),
  shared by the data, the server and the planner; ``grid_token_count(grid_thw, merge_size)``: the language-model
  tokens of one such grid, through ``merged_tokens(patches, merge_size)`` (the one count the data, the server,
  the planner and the benchmarks use).

Turning messages with images into model inputs is ``workbench.data.multimodal`` (training and serving).
"""

from __future__ import annotations

import functools
import json
import warnings
from pathlib import Path
from typing import Any

# Written from GLM-4.1V's published prompt format (the GLM-4.1V-9B model card and its chat_template.jinja):
#   [gMASK]<sop><|system|>\n{system}<|user|>\n{text and <|begin_of_image|><|image|><|end_of_image|> per image}
#   <|assistant|>\n{answer}
# with the generation prompt "<|assistant|>\n". The official file is not available offline (transformers fetches
# it from the hub), so this is a transcription, not a copy. One deliberate difference: GLM-4.1V-Thinking's stock
# template drops the <think>...</think> part of assistant turns (GLM-V issue 125), which would silently remove
# the reasoning from fine-tuning targets; this one renders assistant content whole, so reasoning is trained.
# Each <|image|> is expanded to the image's token count when the conversation is encoded.
GLM4V_CHAT_TEMPLATE = (
    "[gMASK]<sop>"
    "{% for m in messages %}"
    "{{ '<|' + m['role'] + '|>' + '\\n' }}"
    "{% if m['content'] is string %}{{ m['content'] }}"
    "{% else %}{% for part in m['content'] %}"
    "{% if part['type'] == 'text' %}{{ part['text'] }}"
    "{% elif part['type'] in ('image', 'image_url') %}{{ '<|begin_of_image|><|image|><|end_of_image|>' }}"
    "{% elif part['type'] == 'video' %}{{ '<|begin_of_video|><|video|><|end_of_video|>' }}"
    "{% endif %}{% endfor %}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>' + '\\n' }}{% endif %}"
)

_REASONING_PROBE = [
    {"role": "user", "content": "q"},
    {"role": "assistant", "content": "<think>probe-reasoning</think><answer>probe-answer</answer>"},
]


@functools.lru_cache(maxsize=1)
def _image_only_class():
    from transformers import Glm4vProcessor

    class ImageOnlyGlm4vProcessor(Glm4vProcessor):
        """``Glm4vProcessor`` without a video processor: the stock class builds torchvision's video processor,
        and torchvision does not import beside this CPU torch. Images only; ``save_pretrained`` is not
        supported (save the tokenizer and ``image_processor`` separately)."""

        def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
            super().__init__(image_processor, tokenizer, None, chat_template=chat_template)

    return ImageOnlyGlm4vProcessor


def image_only_processor(image_processor, tokenizer, chat_template: str | None = None):
    """An ``ImageOnlyGlm4vProcessor`` over ``image_processor`` and ``tokenizer``."""
    return _image_only_class()(image_processor, tokenizer, chat_template=chat_template or tokenizer.chat_template)


def _glm4v_image_processor(where: str | None):
    """GLM-4.1V's PIL image processor: the directory's resize rules (preprocessor_config.json) when it has
    them, else transformers' GLM-4.1V defaults (patch 14, merge 2, 112x112 .. 28x28x15000 pixels)."""
    from transformers.models.glm4v.image_processing_pil_glm4v import Glm4vImageProcessorPil

    if where is None:
        return Glm4vImageProcessorPil()
    try:
        return Glm4vImageProcessorPil.from_pretrained(where)
    except OSError:  # no preprocessor_config.json there (a malformed one is raised: its resize rules matter)
        return Glm4vImageProcessorPil()


def load_processor(where: str | None, tokenizer, trust_remote_code: bool = False) -> Any:
    """The processor for a GLM-4.1V model at ``where`` (None: the tiny test model), using ``tokenizer``'s
    chat template unless the model's processor brings one. A template that drops reasoning from assistant
    turns is replaced by ``GLM4V_CHAT_TEMPLATE`` (with a warning), so that fine-tuning keeps ``<think>``."""
    processor = None
    if where is not None:
        from transformers import AutoProcessor

        try:
            processor = AutoProcessor.from_pretrained(where, trust_remote_code=trust_remote_code)
        except (ImportError, OSError, ValueError, TypeError, AttributeError):
            processor = None  # e.g. no torchvision for the video processor: build the image-only one below
        if processor is not None and not hasattr(processor, "image_processor"):
            processor = None  # a directory with only a tokenizer: AutoProcessor returned the tokenizer
    if processor is None:
        processor = image_only_processor(_glm4v_image_processor(where), tokenizer)
    if getattr(processor, "chat_template", None) is None:
        processor.chat_template = tokenizer.chat_template
    if not keeps_reasoning(processor.tokenizer, processor.chat_template):
        warnings.warn(
            f"the chat template of {where} drops <think> reasoning from assistant turns; using "
            "workbench's GLM-4.1V template so that reasoning stays in the training targets",
            stacklevel=2,
        )
        processor.chat_template = GLM4V_CHAT_TEMPLATE
    processor.tokenizer.chat_template = processor.chat_template  # one template for text-only and image rows
    return processor


def save_processor_files(processor, directory: str | Path) -> None:
    """Beside a GLM-4.1V model directory's weights and tokenizer (whose save writes the chat template): the image
    processor's ``preprocessor_config.json`` (AutoImageProcessor's, and AutoVideoProcessor's fallback) and a
    ``processor_config.json`` naming the stock ``Glm4vProcessor``, not the image-only subclass that exists only here,
    so that ``AutoProcessor.from_pretrained(directory)`` builds transformers' own processor wherever torchvision
    imports (the stock processor always builds a video processor, which needs torchvision). A file already there,
    copied from a base model's directory, is kept."""
    from transformers.utils import IMAGE_PROCESSOR_NAME, PROCESSOR_NAME

    directory = Path(directory)
    if not (directory / IMAGE_PROCESSOR_NAME).exists():
        processor.image_processor.save_pretrained(directory)
    if not (directory / PROCESSOR_NAME).exists():
        stock = {"processor_class": "Glm4vProcessor", "image_processor": processor.image_processor.to_dict()}
        (directory / PROCESSOR_NAME).write_text(json.dumps(stock, indent=2) + "\n", encoding="utf-8")


def keeps_reasoning(tokenizer, template: str | None) -> bool:
    """Whether ``template`` renders an assistant turn's ``<think>`` part (a template without one: True, as
    there is nothing to replace here; the data loader reports the missing template)."""
    if not template:
        return True
    text = tokenizer.apply_chat_template(_REASONING_PROBE, chat_template=template, tokenize=False)
    return "probe-reasoning" in text


def image_grid(
    width: int,
    height: int,
    patch_size: int,
    merge_size: int,
    temporal_patch_size: int,
    min_pixels: int,
    max_pixels: int,
) -> tuple[int, int, int]:
    """The vision tower's patch grid (temporal, height, width) of one ``width`` x ``height`` image under GLM-4.1V's
    resize rule (transformers' ``smart_resize``: sides rounded to ``patch_size * merge_size``, pixels kept between
    the limits; an image is one temporal patch). The one place the training data, the server's token counts and
    the planner take it from. ValueError when the image cannot be resized (e.g. an aspect ratio over 200)."""
    from transformers.models.glm4v.image_processing_pil_glm4v import smart_resize

    h, w = smart_resize(
        num_frames=temporal_patch_size,
        height=height,
        width=width,
        temporal_factor=temporal_patch_size,
        factor=patch_size * merge_size,
        min_pixels=min_pixels,
        max_pixels=max_pixels,
    )
    return 1, h // patch_size, w // patch_size


def resize_rules(image_processor) -> dict:
    """An image processor's parameters of ``image_grid`` (its ``size`` is a dict or a SizeDict)."""
    ip, size = image_processor, image_processor.size
    low, high = (
        (size["shortest_edge"], size["longest_edge"])
        if isinstance(size, dict)
        else (size.shortest_edge, size.longest_edge)
    )
    return {
        "patch_size": ip.patch_size,
        "merge_size": ip.merge_size,
        "temporal_patch_size": ip.temporal_patch_size,
        "min_pixels": low,
        "max_pixels": high,
    }


def merged_tokens(patches: int, merge_size: int) -> int:
    """Language-model tokens of ``patches`` vision patches: the tower merges ``merge_size`` x ``merge_size``
    patches into one token (the one image-token count; the others go through it)."""
    return patches // merge_size**2


def grid_token_count(grid_thw, merge_size: int) -> int:
    """Language-model tokens of one image whose patch grid is ``grid_thw`` (temporal, height, width)."""
    t, h, w = (int(n) for n in grid_thw)
    return merged_tokens(t * h * w, merge_size)


def image_token_count(processor, width: int, height: int) -> int:
    """Language-model tokens one ``width`` x ``height`` image becomes under ``processor``'s resize rules."""
    rules = resize_rules(processor.image_processor)
    return grid_token_count(image_grid(width, height, **rules), rules["merge_size"])
