"""What screenshots cost a GLM-4.1V model: the image processor's resize rule applied to an image size,
giving the vision tower's patch grid and the image tokens the language model sees.

The arithmetic is transformers' own ``smart_resize`` (the PIL image processor's module, which imports
without torchvision) with the processor's patch size, merge size, temporal patch size and pixel limits:
read from ``preprocessor_config.json`` when the model is a local directory, else the values published
with the model (below), and checked against the vision config the model is built from.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from ..config import ConfigError

# GLM-4.1V-9B-Thinking's published preprocessor_config.json (the image processor AutoGLM-Phone-9B ships
# with: Glm4vImageProcessor, patch 14, temporal patch 2, merge 2). transformers' class default for
# longest_edge is larger (28*28*15000); the published file is what the model is served with.
GLM41V_PREPROCESSOR = {
    "patch_size": 14,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "size": {"shortest_edge": 12544, "longest_edge": 9633792},
}
# Each image is wrapped as <|begin_of_image|> <|image|> x N <|end_of_image|> by GLM-4.1V's chat template.
MARKER_TOKENS = 2


@dataclass(frozen=True)
class ImageGeometry:
    """The image processor's resize/patch parameters (and where they were read)."""

    patch_size: int
    merge_size: int
    temporal_patch_size: int
    min_pixels: int
    max_pixels: int
    source: str


@dataclass(frozen=True)
class ImageLoad:
    """Screenshots per example at one size, as the processor and the vision tower see them."""

    width: int  # as given
    height: int
    resized_width: int  # after smart_resize
    resized_height: int
    grid_thw: tuple  # patches: (temporal, height, width)
    images_per_row: int
    geometry: ImageGeometry

    @property
    def patches_per_image(self) -> int:
        t, h, w = self.grid_thw
        return t * h * w

    @property
    def tokens_per_image(self) -> int:
        """Image tokens in the language model after the merge_size x merge_size merge."""
        from ..models.processor import grid_token_count

        return grid_token_count(self.grid_thw, self.geometry.merge_size)

    @property
    def tokens_per_row(self) -> int:
        """What the images add to one example's sequence: their tokens plus begin/end markers."""
        return self.images_per_row * (self.tokens_per_image + MARKER_TOKENS)

    def to_dict(self) -> dict:
        return {
            "size": f"{self.width}x{self.height}",
            "resized": f"{self.resized_width}x{self.resized_height}",
            "grid_thw": list(self.grid_thw),
            "patches_per_image": self.patches_per_image,
            "tokens_per_image": self.tokens_per_image,
            "images_per_row": self.images_per_row,
            "tokens_per_row": self.tokens_per_row,
            "geometry": asdict(self.geometry),
        }


def parse_image_size(text: str, field_name: str = "--image-size") -> tuple[int, int]:
    """``WIDTHxHEIGHT`` (a phone's portrait screen: 1080x2400) -> (width, height)."""
    m = re.fullmatch(r"\s*(\d+)\s*[xX*]\s*(\d+)\s*", str(text or ""))
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
        raise ConfigError([(field_name, f"{text!r}: write WIDTHxHEIGHT in pixels, e.g. 1080x2400")])
    return int(m.group(1)), int(m.group(2))


def image_geometry(source: str, config) -> ImageGeometry:
    """The resize/patch parameters for ``source``: its preprocessor_config.json when it is a directory
    holding one, else the published GLM-4.1V values; patch/merge/temporal sizes must agree with the
    model's vision config (the vision tower's patch embedding and merger are built from those)."""
    vision = getattr(config, "vision_config", None)
    if vision is None:
        raise ConfigError(
            [
                (
                    "--images-per-row",
                    f"{source!r} is a text-only model: it takes no images "
                    "(plan screenshots for a vision-language model such as autoglm-phone-9b)",
                )
            ]
        )
    path = Path(source) / "preprocessor_config.json"
    if path.is_file():
        data, where = json.loads(path.read_text()), str(path)
    else:
        data, where = GLM41V_PREPROCESSOR, "GLM-4.1V's published preprocessor_config.json"
    size = data.get("size") or {}
    min_pixels = size.get("shortest_edge", data.get("min_pixels"))
    max_pixels = size.get("longest_edge", data.get("max_pixels"))
    if min_pixels is None or max_pixels is None:
        raise ConfigError(
            [(str(path), "no pixel limits: need size.shortest_edge/longest_edge (or min_pixels/max_pixels)")]
        )
    geo = ImageGeometry(
        patch_size=int(data.get("patch_size", 14)),
        merge_size=int(data.get("merge_size", 2)),
        temporal_patch_size=int(data.get("temporal_patch_size", 2)),
        min_pixels=int(min_pixels),
        max_pixels=int(max_pixels),
        source=where,
    )
    model_side = (vision.patch_size, vision.spatial_merge_size, vision.temporal_patch_size)
    if (geo.patch_size, geo.merge_size, geo.temporal_patch_size) != model_side:
        raise ConfigError(
            [
                (
                    where,
                    f"patch/merge/temporal sizes {geo.patch_size}/{geo.merge_size}/"
                    f"{geo.temporal_patch_size} disagree with the model's vision config {model_side}",
                )
            ]
        )
    return geo


def image_load(geometry: ImageGeometry, width: int, height: int, images_per_row: int) -> ImageLoad:
    """The processor's resize of one ``width`` x ``height`` image (transformers' ``smart_resize``: an
    image is one temporal patch of ``temporal_patch_size`` identical frames) and the resulting grid."""
    from ..models.processor import image_grid

    if images_per_row < 0:
        raise ConfigError([("--images-per-row", f"{images_per_row}: need 0 or more")])
    g = geometry
    try:
        grid = image_grid(
            width,
            height,
            patch_size=g.patch_size,
            merge_size=g.merge_size,
            temporal_patch_size=g.temporal_patch_size,
            min_pixels=g.min_pixels,
            max_pixels=g.max_pixels,
        )
    except ValueError as err:
        raise ConfigError([("--image-size", f"{width}x{height}: {err}")]) from None
    return ImageLoad(
        width=width,
        height=height,
        resized_width=grid[2] * g.patch_size,
        resized_height=grid[1] * g.patch_size,
        grid_thw=grid,
        images_per_row=images_per_row,
        geometry=g,
    )


def images_for(source: str, config, image_size: str | None, images_per_row: int) -> ImageLoad | None:
    """The image load of a plan (None when it has no images)."""
    if not images_per_row:
        return None
    width, height = parse_image_size(image_size or "1080x2400")
    return image_load(image_geometry(source, config), width, height, images_per_row)
