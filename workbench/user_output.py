"""What reaches the user's terminal (or a worker's log): third-party deprecation notices are for
those libraries' maintainers, not for someone fine-tuning a model, so the command-line entry points
hide them. Library use (notebooks, the Python API, the test suite) keeps Python's own warning
filters: there they stay visible to the developers who can act on them."""
from __future__ import annotations

import warnings

DEPRECATIONS = (DeprecationWarning, PendingDeprecationWarning, FutureWarning)


def hide_third_party_deprecations() -> None:
    """Ignore deprecation warnings raised from modules outside ``workbench`` (ours still show)."""
    for category in DEPRECATIONS:
        warnings.filterwarnings("ignore", category=category, module=r"(?!workbench(\.|$))")
