"""What the server serves: the base model, its adapters under their own ids, and the batch decoder running them."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..config import ConfigError
from .config import ServeConfig, ServeError, base_mismatch, inside_root, inspect_adapter, model_id_problem

log = logging.getLogger(__name__)


def placement(device: str, dtype: str, runs: Sequence = ()) -> tuple:
    """(torch device, dtype name) a model for inference is loaded on and in: ``device`` resolved as training resolves
    it (``hardware.resolve_device``: auto is the first CUDA GPU when one is visible). ``dtype`` auto: the dtype the
    ``runs`` (their RunConfigs) held their base in on that device (their precision policy: an adapter then answers and
    scores as its run did while training), the widest of them; without runs, what training's precision auto decides
    for that device (``precision.inference_dtype``)."""
    from ..config import device_problem
    from ..dtypes import dtype_name
    from ..hardware import Hardware, resolve_device
    from ..precision import inference_dtype, resolve_policy

    if problem := device_problem(device):
        raise ConfigError([("device", problem)])
    resolved = resolve_device(device)
    if dtype != "auto" or not runs:
        return resolved, inference_dtype(dtype, resolved)
    hardware = Hardware.of(resolved)
    stored = {resolve_policy(c.precision, hardware, c.lora.enabled, c.model.dtype).base_dtype for c in runs}
    return resolved, dtype_name(max(stored, key=lambda d: d.itemsize))


def refuse_what_does_not_fit(source: str, dtype: str, device, quantization=None, context: int | None = None) -> None:
    """ServeError, before anything loads, when the planner says ``source`` in ``dtype`` does not fit ``device`` for
    one request (its figure and the fixes in the message)."""
    from ..plan.inference import DEFAULT_CONTEXT, fit_problem

    problem = fit_problem(source, dtype, device, quantization, context or DEFAULT_CONTEXT)
    if problem:
        raise ServeError(f"not loaded: {problem}")


@dataclass
class AdapterEntry:
    id: str
    internal: str  # the peft adapter name (peft names cannot hold dots or slashes)
    path: str
    created: int


class ServedModels:
    """Loads in the background (so /health can answer 503 meanwhile) and then owns the decoder."""

    def __init__(self, config: ServeConfig, loaded=None):
        """``loaded``: a workbench.models.LoadedModel to serve instead of loading ``config.model`` (tests,
        notebooks); a model in memory is not configuration, so it is not a ServeConfig field."""
        self.config = config
        self.loaded = loaded
        self.status = "loading"
        self.error: str | None = None
        self.failure: BaseException | None = None  # why loading failed, for the CLI's exit code
        self.decoder = None
        self.tokenizer = None
        self.processor = None  # vision-language models: images + chat template -> inputs (None: text-only)
        self.base_root = config.model
        self.base_seed = None  # the seed a code-built base loaded here was drawn from (None: a base from files)
        self.base_quantization = None  # the quantization section of a base loaded here (quantization.base)
        self.device = None  # where the base answers, once loaded here (torch.device)
        self.dtype = None  # the dtype its weights are held in (a name), once loaded here
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
            if isinstance(err, (ConfigError, ServeError)):  # bad input: the message says it all
                log.error("loading failed: %s", err)
            else:
                log.exception("loading failed")
            self.status, self.error, self.failure = "error", f"{type(err).__name__}: {err}", err

    def _load(self) -> None:
        import torch

        from .batcher import BatchDecoder

        cfg = self.config
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        loaded = self.loaded if self.loaded is not None else self._load_base()
        if self.device is None:  # a model handed in answers where it is
            param = next(loaded.model.parameters())
            self.device, self.dtype = param.device, str(param.dtype).removeprefix("torch.")
        self.base_root = str(loaded.source)
        self.tokenizer = loaded.tokenizer
        self.processor = loaded.processor
        # weights packed for the CPU decode only in a model loaded here: one handed in may still be trained
        self.decoder = BatchDecoder(
            loaded.model,
            loaded.tokenizer,
            max_batch=cfg.max_batch,
            max_context=cfg.max_context,
            pack_weights=self.loaded is None,
        )
        for adapter_id, path in cfg.served_adapters().items():
            self.add_adapter(adapter_id, path)
        self.decoder.start()

    def _load_base(self):
        """The served base as the runs served on it trained on it (``models.build_run_model`` with their config: a
        code-built base is drawn from their seed), or as a model with no run when none is served."""
        from ..dtypes import DTYPE_BY_NAME
        from ..models import base_seed, build_run_model, shared_base

        cfg = self.config
        runs = cfg.served_runs()
        try:
            base = shared_base(cfg.model, runs)
        except ValueError as err:
            raise ServeError(f"the served runs need different bases: {err}") from None
        self.device, self.dtype = placement(cfg.device, cfg.dtype, runs)
        log.info("loading %s on %s in %s", cfg.model, self.device, self.dtype)
        refuse_what_does_not_fit(cfg.model, self.dtype, self.device, base.quantization, cfg.max_context)
        try:
            loaded = build_run_model(base, DTYPE_BY_NAME[self.dtype], device=self.device)
        except ConfigError as err:  # the loader names its ModelSection field; here the option is "model"
            raise ConfigError(
                [("model" if f == "model.source" else f, m) for f, m in err.problems], ServeConfig.config_title
            ) from None
        self.base_seed = base_seed(base)
        self.base_quantization = base.quantization
        loaded.model.eval().to(self.device)
        return loaded

    def _seed_problem(self, found) -> str | None:
        """Why a run's adapter does not fit the base loaded here: another seed of a code-built base, or another
        quantization of it (quantization.base) (None: it fits, or the base was handed in, its making unknown)."""
        from ..models import base_problem

        if found.run is None or self.loaded is not None:
            return None
        return base_problem(found.run, found.run.model.source, self.base_seed, self.base_quantization)

    def shutdown(self) -> None:
        if self.decoder is not None:
            self.decoder.shutdown()

    # ---- model ids --------------------------------------------------------------------------

    def resolve(self, model_id: str) -> str | None | bool:
        """Internal adapter name for ``model_id``; None for the base; False when unknown."""
        if model_id == self.config.base_id:
            return None
        entry = self.adapters.get(model_id)
        return entry.internal if entry is not None else False

    def cards(self) -> list[dict]:
        cards = [
            {
                "id": self.config.base_id,
                "object": "model",
                "created": self.created,
                "owned_by": "workbench",
                "root": self.base_root,
                "parent": None,
            }
        ]
        for e in self.adapters.values():
            cards.append(
                {
                    "id": e.id,
                    "object": "model",
                    "created": e.created,
                    "owned_by": "workbench",
                    "root": e.path,
                    "parent": self.config.base_id,
                }
            )
        return cards

    def add_adapter(self, adapter_id: str, path: str | Path, *, within: str | Path | None = None) -> AdapterEntry:
        """Serve the adapter (or run directory) at ``path`` as ``adapter_id``; with ``within``, only when the
        path resolves inside that folder (paths that come from HTTP clients)."""
        with self._lock:
            problem = model_id_problem(adapter_id)
            if problem:
                raise ServeError(problem, about="id")
            if adapter_id == self.config.base_id or adapter_id in self.adapters:
                raise ServeError(f"model id {adapter_id!r} is already served", about="id")
            if within is not None:
                path = inside_root(path, within)
            found = inspect_adapter(path)
            base = base_mismatch(found, self.config.model, self.base_root)
            if base:
                raise ServeError(
                    f"adapter {adapter_id!r} was trained on {base!r} but this server serves "
                    f"{self.config.model!r}: serve that base model for it"
                )
            seed = self._seed_problem(found)
            if seed:
                raise ServeError(f"adapter {adapter_id!r} does not fit this server's base: {seed}")
            entry = AdapterEntry(adapter_id, next(self._names), str(found.dir.resolve()), int(time.time()))
            try:
                self.decoder.add_adapter(entry.internal, str(found.dir))
            except (RuntimeError, ValueError, KeyError, OSError) as err:  # e.g. shapes that do not fit this base
                log.warning("adapter %r does not load", adapter_id, exc_info=True)
                raise ServeError(
                    f"adapter {adapter_id!r} does not load onto {self.config.model!r}: {str(err).splitlines()[0][:300]}"
                ) from None
            self.adapters[adapter_id] = entry
            return entry

    def remove_adapter(self, adapter_id: str) -> None:
        with self._lock:
            entry = self.adapters.pop(adapter_id, None)
            if entry is None:
                raise KeyError(adapter_id)
            self.decoder.remove_adapter(entry.internal)
