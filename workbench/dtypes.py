"""The dtype names configs, events and messages use, in one leaf module every layer may import."""

from __future__ import annotations

import torch

# The dtype names configs use (model.dtype, precision.module_rules[].storage, inference dtype).
DTYPE_BY_NAME = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.bfloat16`` -> ``"bfloat16"``: how events, configs and messages name a dtype."""
    return str(dtype).replace("torch.", "")
