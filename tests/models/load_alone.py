"""Loads a GLM-4.1V model directory the workbench wrote with plain transformers, in a fresh process that never imports
the workbench, and runs one forward on a screenshot: what vLLM or another server gets from the directory alone.

    python tests/models/load_alone.py DIR   # prints a JSON line of what loaded

``AutoProcessor.from_pretrained(DIR)`` builds the stock ``Glm4vProcessor``, which always builds a video processor, which
needs torchvision; where torchvision does not import (the CPU torch here), it raises ImportError naming torchvision,
and the image processor and the tokenizer are loaded one by one instead (what the image-only processor does)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def loaded_alone(directory: Path) -> dict:
    done = subprocess.run([sys.executable, __file__, str(directory)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(directory: str) -> dict:
    import torch
    from PIL import Image
    from transformers import AutoImageProcessor, AutoModelForImageTextToText, AutoProcessor, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(directory)
    images = AutoImageProcessor.from_pretrained(directory)
    model = AutoModelForImageTextToText.from_pretrained(directory).eval()
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Open Settings"}]}]
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    pixels = images(images=[Image.new("RGB", (112, 224), "white")], return_tensors="pt")
    count = int(pixels["image_grid_thw"].prod()) // images.merge_size**2
    ids = tok(text.replace("<|image|>", "<|image|>" * count), return_tensors="pt", add_special_tokens=False)
    types = (ids["input_ids"] == model.config.image_token_id).long()  # what Glm4vProcessor returns: 1 = image token
    with torch.no_grad():
        logits = model(
            **ids, mm_token_type_ids=types, pixel_values=pixels["pixel_values"], image_grid_thw=pixels["image_grid_thw"]
        ).logits
    out = {
        "prompt": text,
        "image_tokens": count,
        "logits_shape": list(logits.shape),
        "finite": bool(torch.isfinite(logits).all()),
        "patch_size": images.patch_size,
        "workbench_imported": any(name.split(".")[0] == "workbench" for name in sys.modules),
    }
    try:
        out["processor"] = type(AutoProcessor.from_pretrained(directory)).__name__
    except ImportError as err:
        out["processor_error"] = str(err).strip().splitlines()[0]
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
