"""What a run records about where it ran: the hardware and the library versions."""
from __future__ import annotations

import os
import platform
import sys

import torch

from .. import __version__


def hardware(device: torch.device) -> dict:
    hw = {"device": str(device), "platform": platform.platform(), "cpu_count": os.cpu_count(),
          "torch_threads": torch.get_num_threads()}
    if device.type == "cuda":
        hw["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return hw


def versions() -> dict:
    import peft
    import transformers

    return {"workbench": __version__, "python": sys.version.split()[0], "torch": torch.__version__,
            "transformers": transformers.__version__, "peft": peft.__version__}


def machine_memory() -> tuple[list[int], int]:
    """(total bytes of each visible CUDA GPU, host RAM bytes): what a recipe's requirements are checked against."""
    import psutil

    gpus = [torch.cuda.get_device_properties(i).total_memory for i in range(torch.cuda.device_count())] \
        if torch.cuda.is_available() else []
    return gpus, psutil.virtual_memory().total
