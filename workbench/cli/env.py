"""``workbench env`` (like ``transformers env`` / ``ds_report``): versions, devices, their bf16/fp16
support and what ``precision.mode=auto`` resolves to on each (asked of the precision policy
itself), and whether the notebook side (JupyterLab, the extension, a browser) is installed."""

from __future__ import annotations

import json
import os
import platform
import shutil
import sys
import warnings
from importlib import metadata
from pathlib import Path

from .. import __version__

PACKAGES = (
    "torch",
    "transformers",
    "peft",
    "accelerate",
    "deepspeed",
    "pydantic",
    "gguf",
    "ipywidgets",
    "anywidget",
    "plotly",
    "fastapi",
    "uvicorn",
    "openai",
)
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "firefox", "microsoft-edge")


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _devices() -> list:
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return [torch.device("cpu")] + [torch.device("cuda", i) for i in range(gpus)]


def _device_lines(device) -> list[str]:
    import torch

    from ..config import RunConfig
    from ..hardware import cpu_has_fast_bf16, device_supports_bf16
    from ..precision import resolve_precision

    if device.type == "cpu":
        native = cpu_has_fast_bf16()
        head = f"cpu: {platform.machine()}, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads"
        bf16 = "yes, native (AVX512-BF16/AMX)" if native else "emulated (no AVX512-BF16/AMX): slow"
        fp16 = "autocast + GradScaler work, emulated: slow"
    else:
        props = torch.cuda.get_device_properties(device)
        head = (
            f"{device}: {props.name}, compute capability {props.major}.{props.minor}, "
            f"{props.total_memory / 2**30:.1f} GiB"
        )
        bf16 = "yes" if device_supports_bf16(device) else "no"
        fp16 = "yes (autocast + GradScaler)"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the policy's notes are printed below
        policy = resolve_precision(RunConfig(), device)
    lines = [head, f"  bf16: {bf16}", f"  fp16: {fp16}", f"  precision.mode=auto -> {policy.mode}"]
    lines += [f"    ({note})" for note in policy.notes]
    return lines


def _lab_extension() -> str:
    folder = Path(sys.prefix) / "share" / "jupyter" / "labextensions"
    found = sorted(folder.glob("*workbench*")) if folder.is_dir() else []
    if not found:
        return "not installed (bash scripts/setup.sh installs extensions/jupyterlab)"
    return ", ".join(f"{p.name} {_package_version(p / 'package.json')}".strip() for p in found)


def _package_version(package_json: Path) -> str:
    try:
        return json.loads(package_json.read_text())["version"]
    except (OSError, ValueError, KeyError):
        return ""


def _browser() -> str:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return "none found on PATH (open JupyterLab's URL in any browser)"


def environment_report() -> str:
    lines = [
        f"workbench {__version__}",
        f"python {sys.version.split()[0]} ({sys.executable})",
        f"platform {platform.platform()}",
        "packages:",
    ]
    lines += [f"  {dist:<13} {_version(dist)}" for dist in PACKAGES]
    lines.append("devices:")
    for device in _devices():
        lines += [f"  {line}" for line in _device_lines(device)]
    lines += [
        "notebooks:",
        f"  jupyterlab    {_version('jupyterlab')}",
        f"  extension     {_lab_extension()}",
        f"  browser       {_browser()}",
    ]
    return "\n".join(lines)
