"""What a run records about where it ran: the hardware and the library versions."""
from __future__ import annotations

import os
import platform
import re
import sys
from typing import Optional

import torch

from .. import __version__
from ..precision.policy import cpu_flags, read_cpuinfo


def cpu_class(cpuinfo: Optional[str] = None) -> str:
    """The CPU's model name and its widest vector unit (AMX, AVX-512 BF16, AVX-512, AVX2). Recorded because an fp32
    run's figures depend on it: each class's kernels sum in another order, and hundreds of steps carry the difference
    (the tiny-glm4v recipes' windows hold the classes measured). ``cpuinfo``: /proc/cpuinfo's text (read when None)."""
    info = read_cpuinfo() if cpuinfo is None else cpuinfo
    if info is None:
        return platform.processor() or "unknown CPU"
    name = re.search(r"^model name\s*:\s*(.+)$", info, re.M)
    flags = cpu_flags(info)
    widest = next((label for flag, label in (("amx_bf16", "AMX"), ("avx512_bf16", "AVX-512 BF16"),
                                             ("avx512f", "AVX-512"), ("avx2", "AVX2")) if flag in flags), "no AVX2")
    return f"{name.group(1).strip() if name else 'unknown CPU'} ({widest})"


def hardware(device: torch.device) -> dict:
    hw = {"device": str(device), "platform": platform.platform(), "cpu": cpu_class(), "cpu_count": os.cpu_count(),
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
