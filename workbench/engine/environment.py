"""The library versions a run records (``run_started``'s ``versions``); its hardware is ``workbench.hardware``'s."""

from __future__ import annotations

import sys

import torch

from .. import __version__


def versions() -> dict:
    import peft
    import transformers

    return {
        "workbench": __version__,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "peft": peft.__version__,
    }
