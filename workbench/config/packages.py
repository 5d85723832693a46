"""Packages a feature needs beyond the core install: whether they are here, and the one line that says how to get them.

The core install (``bash scripts/setup.sh``) includes the ``export`` and ``qlora`` extras; ``distributed`` (DeepSpeed) and
``phone`` (adbutils, a real phone over ADB) stay optional. A feature whose package is missing is refused before any
work starts, with a message naming the package and the install command, never an ImportError's traceback.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util

# module imported -> (distribution on PyPI, the workbench extra that lists it)
OPTIONAL_PACKAGES = {
    "torchao": ("torchao", "export"),
    "onnx": ("onnx", "export"),
    "onnxscript": ("onnxscript", "export"),
    "onnxruntime": ("onnxruntime", "export"),
    "sentencepiece": ("sentencepiece", "export"),  # llama.cpp's converter (--target gguf, gguf-lora)
    "deepspeed": ("deepspeed", "distributed"),
    "adbutils": ("adbutils", "phone"),
    "bitsandbytes": ("bitsandbytes", "qlora"),
}


def _requirement(distribution: str, extra: str) -> str:
    """The version range pyproject.toml gives the package in that extra (read from the installed metadata, so the
    range is written once); the bare name when workbench runs from a checkout that is not installed."""
    try:
        requires = importlib.metadata.requires("workbench") or []
    except importlib.metadata.PackageNotFoundError:
        return distribution
    for line in requires:
        spec, _, marker = line.partition(";")
        name = spec.strip().split("[")[0]
        for op in ("<", ">", "=", "!", "~"):
            name = name.split(op)[0]
        if name == distribution and f'extra == "{extra}"' in marker:
            return spec.strip()
    return distribution


def missing_package(module: str) -> str | None:
    """None when ``module`` imports here; otherwise what to run: ``"torchao is not installed: pip install ..."``."""
    if importlib.util.find_spec(module) is not None:
        return None
    distribution, extra = OPTIONAL_PACKAGES.get(module, (module, None))
    spec = _requirement(distribution, extra) if extra else distribution
    also = f" (or the '{extra}' extra: pip install -e '.[{extra}]' in the checkout)" if extra else ""
    return f"{distribution} is not installed: pip install '{spec}'{also}"


def missing_packages(*modules: str) -> list[str]:
    """``missing_package`` of each module, those that are missing."""
    return [msg for msg in map(missing_package, modules) if msg]
