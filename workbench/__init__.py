"""Workbench: mixed-precision LoRA fine-tuning with the precision machinery in plain sight.

``workbench.train(cfg)`` runs a fine-tune in this process, ``workbench.launch(cfg)`` in a worker
process (both with the instruments the config asks for). ``%load_ext workbench`` in IPython/Jupyter
registers the magics (``workbench.ui.magics``).
"""

__version__ = "0.1.0"

# keep `import workbench` light: these load their modules on first use
_LAZY = {"train": "workbench.training", "launch": "workbench.training", "load_ipython_extension": "workbench.ui.magics"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'workbench' has no attribute {name!r}")
