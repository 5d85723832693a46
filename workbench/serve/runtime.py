"""What the server serves: the base model, its adapters under their own ids, and the engine running them."""
from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


class ServeError(ValueError):
    """A problem with what the user asked to serve (bad adapter path, wrong base...)."""


@dataclass
class ServeConfig:
    model: str = "smollm2-135m-instruct"  # a built-in name, a local HF directory or a hub id
    model_id: str | None = None  # the id clients use for the base; default: ``model``
    dtype: str = "float32"
    adapters: dict[str, str] = field(default_factory=dict)  # id -> adapter or run directory
    host: str = "127.0.0.1"
    port: int = 8000
    api_key: str | None = None
    max_batch: int = 16
    max_context: int | None = None  # default: the model's max_position_embeddings
    default_max_tokens: int | None = None  # when a request names none: default fills the context
    threads: int | None = None  # torch intra-op threads; None leaves torch's default
    loaded: Any = None  # a workbench.models.LoadedModel to serve instead of loading ``model`` (tests, notebooks)

    @property
    def base_id(self) -> str:
        return self.model_id or self.model


@dataclass
class AdapterEntry:
    id: str
    internal: str  # the peft adapter name (peft names cannot hold dots or slashes)
    path: str
    created: int


def adapter_dir(path: str | Path) -> tuple[Path, dict | None]:
    """The peft adapter directory for ``path`` (an adapter directory or a run directory) and the run's
    config.json when there is one."""
    p = Path(path).expanduser()
    if not p.exists():
        raise ServeError(f"adapter path {str(p)!r} does not exist")
    if (p / "adapter" / "adapter_config.json").is_file():
        run_dir, adir = p, p / "adapter"
    elif (p / "adapter_config.json").is_file():
        adir = p
        run_dir = p.parent if (p.parent / "config.json").is_file() and p.name == "adapter" else None
    else:
        raise ServeError(f"{str(p)!r} holds no peft adapter (adapter_config.json, or adapter/adapter_config.json "
                         "in a run directory)")
    run_config = None
    if run_dir is not None and (run_dir / "config.json").is_file():
        try:
            run_config = json.loads((run_dir / "config.json").read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise ServeError(f"cannot read {run_dir / 'config.json'}: {err}") from None
    return adir, run_config


def run_base_mismatch(run_config: dict | None, *served: str) -> str | None:
    """The base model a run's config.json names when it is none of ``served``; None when it matches, names
    none, or there is no run config."""
    if run_config is None:
        return None
    base = (run_config.get("model") or {}).get("source")
    return base if base and base not in served else None


def check_adapter_base(adapter_id: str, run_config: dict | None, adir: Path, served_source: str,
                       served_root: str) -> None:
    """Refuse an adapter trained on another base: it would load (if shapes happen to match) and talk nonsense."""
    if run_config is not None:
        base = run_base_mismatch(run_config, served_source, served_root)
        if base:
            raise ServeError(f"adapter {adapter_id!r} was trained on {base!r} but this server serves "
                             f"{served_source!r}: serve that base model for it")
        return
    try:
        declared = json.loads((adir / "adapter_config.json").read_text()).get("base_model_name_or_path") or ""
    except (OSError, json.JSONDecodeError) as err:
        raise ServeError(f"cannot read {adir / 'adapter_config.json'}: {err}") from None
    if declared and declared not in (served_source, served_root) and Path(declared).name != Path(served_root).name:
        raise ServeError(f"adapter {adapter_id!r} declares base {declared!r} but this server serves "
                         f"{served_source!r}: serve that base model for it")


def default_adapter_id(path: str | Path) -> str:
    """``runs/NAME`` and ``runs/NAME/adapter`` are both served as NAME."""
    p = Path(path).expanduser().resolve()
    return p.parent.name if p.name == "adapter" else p.name


def add_run_adapters(adapters: dict[str, str], runs) -> dict[str, str]:
    """Add each run directory of ``runs`` to ``adapters`` under its default id (``--run`` / ``runs=``)."""
    for run in runs:
        adapters[default_adapter_id(run)] = str(run)
    return adapters


class Runtime:
    """Loads in the background (so /health can answer 503 meanwhile) and then owns the engine."""

    def __init__(self, config: ServeConfig):
        self.config = config
        self.status = "loading"
        self.error: str | None = None
        self.engine = None
        self.tokenizer = None
        self.base_root = config.model
        self.created = int(time.time())
        self.adapters: dict[str, AdapterEntry] = {}
        self._names = (f"a{i}" for i in itertools.count())
        self._lock = threading.Lock()

    # ---- loading ----------------------------------------------------------------------------

    def load(self) -> None:
        try:
            self._load()
            self.status = "ok"
        except Exception as err:
            log.exception("loading failed")
            self.status, self.error = "error", f"{type(err).__name__}: {err}"

    def _load(self) -> None:
        import torch

        from .engine import Engine

        cfg = self.config
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        loaded = cfg.loaded
        if loaded is None:
            from ..models import load_for_inference

            loaded = load_for_inference(cfg.model, dtype=cfg.dtype)
        self.base_root = str(loaded.source)
        self.tokenizer = loaded.tokenizer
        self.engine = Engine(loaded.model, loaded.tokenizer, max_batch=cfg.max_batch, max_context=cfg.max_context)
        for adapter_id, path in cfg.adapters.items():
            self.add_adapter(adapter_id, path)
        self.engine.start()

    def shutdown(self) -> None:
        if self.engine is not None:
            self.engine.shutdown()

    # ---- model ids --------------------------------------------------------------------------

    def resolve(self, model_id: str) -> str | None | bool:
        """Internal adapter name for ``model_id``; None for the base; False when unknown."""
        if model_id == self.config.base_id:
            return None
        entry = self.adapters.get(model_id)
        return entry.internal if entry is not None else False

    def cards(self) -> list[dict]:
        cards = [{"id": self.config.base_id, "object": "model", "created": self.created, "owned_by": "workbench",
                  "root": self.base_root, "parent": None}]
        for e in self.adapters.values():
            cards.append({"id": e.id, "object": "model", "created": e.created, "owned_by": "workbench",
                          "root": e.path, "parent": self.config.base_id})
        return cards

    def add_adapter(self, adapter_id: str, path: str | Path) -> AdapterEntry:
        with self._lock:
            if adapter_id == self.config.base_id or adapter_id in self.adapters:
                raise ServeError(f"model id {adapter_id!r} is already served")
            adir, run_config = adapter_dir(path)
            check_adapter_base(adapter_id, run_config, adir, self.config.model, self.base_root)
            entry = AdapterEntry(adapter_id, next(self._names), str(adir.resolve()), int(time.time()))
            try:
                self.engine.add_adapter(entry.internal, str(adir))
            except Exception as err:  # e.g. shapes that do not fit this base
                raise ServeError(f"adapter {adapter_id!r} does not load onto {self.config.model!r}: "
                                 f"{str(err).splitlines()[0][:300]}") from None
            self.adapters[adapter_id] = entry
            return entry

    def remove_adapter(self, adapter_id: str) -> None:
        with self._lock:
            entry = self.adapters.pop(adapter_id, None)
            if entry is None:
                raise KeyError(adapter_id)
            self.engine.remove_adapter(entry.internal)
