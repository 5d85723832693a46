"""The machine at hand, read in one place: the CPU (its flags, its class), native bf16, the devices and their memory.

Everything that asks what this machine can do reads it here: the precision policy (``Hardware``), the engine (the
device a run trains on, the hardware a run records), the agent's replay key (the CPU class), the benchmarks and the
CLI (a recipe's memory requirements, ``workbench env``).
"""

from __future__ import annotations

import os
import platform
import re
from dataclasses import dataclass

import torch

from .config import ConfigError


def read_cpuinfo() -> str | None:
    """/proc/cpuinfo's text; None where there is none (not Linux)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            return fh.read()
    except OSError:
        return None


def cpu_flags(cpuinfo: str | None = None) -> set[str]:
    """The CPU's feature flags, whole words of the ``flags`` line of ``cpuinfo`` (/proc/cpuinfo's text when None)."""
    info = read_cpuinfo() if cpuinfo is None else cpuinfo
    listed = re.search(r"^flags\s*:\s*(.+)$", info or "", re.M)
    return set(listed.group(1).split()) if listed else set()


def cpu_has_fast_bf16() -> bool:
    """Native bf16 matmuls (AVX512-BF16 or AMX). Without them bf16 is emulated: on an AVX2-only
    CPU we measured a bf16-autocast LoRA step of SmolLM2 ~25x slower than fp32."""
    return bool({"avx512_bf16", "amx_bf16"} & cpu_flags())


def cpu_class(cpuinfo: str | None = None) -> str:
    """The CPU's model name and its widest vector unit (AMX, AVX-512 BF16, AVX-512, AVX2). Recorded because an fp32
    run's figures depend on it: each class's kernels sum in another order, and hundreds of steps carry the difference
    (the tiny-glm4v recipes' windows hold the classes measured). ``cpuinfo``: /proc/cpuinfo's text (read when None)."""
    info = read_cpuinfo() if cpuinfo is None else cpuinfo
    if info is None:
        return platform.processor() or "unknown CPU"
    name = re.search(r"^model name\s*:\s*(.+)$", info, re.M)
    flags = cpu_flags(info)
    widest = next(
        (
            label
            for flag, label in (
                ("amx_bf16", "AMX"),
                ("avx512_bf16", "AVX-512 BF16"),
                ("avx512f", "AVX-512"),
                ("avx2", "AVX2"),
            )
            if flag in flags
        ),
        "no AVX2",
    )
    return f"{name.group(1).strip() if name else 'unknown CPU'} ({widest})"


def device_supports_bf16(device: torch.device) -> bool:
    """Whether bf16 runs at all (CPU autocast emulates it everywhere; see cpu_has_fast_bf16)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    return device.type == "cpu"


def resolve_device(name: str) -> torch.device:
    """The device a config's ``device`` value names (``auto``: the first CUDA GPU when one is visible, else the CPU),
    one resolution for training and inference; ConfigError naming ``device`` for a GPU that is not there."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(name)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError([("device", f"{name} requested but no CUDA device is visible: use cpu or auto")])
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ConfigError([("device", f"{name} does not exist: {torch.cuda.device_count()} CUDA device(s) visible")])
    return dev


@dataclass(frozen=True)
class Hardware:
    """What resolving a precision mode needs to know about the devices a run will use: read from a live
    device (``Hardware.of``), or described (the planner's target GPUs, ``Hardware.gpu``)."""

    device_type: str  # cpu | cuda
    bf16: bool  # bfloat16 runs at all
    fast_bf16: bool  # bfloat16 matmuls are native (on a CPU without them bf16 and fp16 are emulated)

    @classmethod
    def of(cls, device: torch.device) -> Hardware:
        bf16 = device_supports_bf16(device)
        return cls(device.type, bf16, bf16 if device.type != "cpu" else cpu_has_fast_bf16())

    @classmethod
    def gpu(cls, bf16: bool = True) -> Hardware:
        return cls("cuda", bf16, bf16)


def describe_hardware(device: torch.device) -> dict:
    """What a run records about the hardware it ran on (``run_started``'s ``hardware``): the device, the platform,
    the CPU class, the cores and torch's threads, and the GPUs' names on a CUDA device."""
    hw = {
        "device": str(device),
        "platform": platform.platform(),
        "cpu": cpu_class(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
    }
    if device.type == "cuda":
        hw["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return hw


def machine_memory() -> tuple[list[int], int]:
    """(total bytes of each visible CUDA GPU, host RAM bytes): what a recipe's requirements are checked against."""
    import psutil

    gpus = (
        [torch.cuda.get_device_properties(i).total_memory for i in range(torch.cuda.device_count())]
        if torch.cuda.is_available()
        else []
    )
    return gpus, psutil.virtual_memory().total
