"""``start_server`` for either engine: our server (``workbench.serve.server``) or vLLM (``workbench.serve.vllm``),
given the same arguments; ``workbench.serve.start_server`` is this one."""

from __future__ import annotations

from ..config import config_from_dict
from . import llama_cpp, server, vllm
from .config import ServeConfig


def start_server(model: str = "smollm2-135m-instruct", *, engine: str = "workbench", **options):
    """Start an OpenAI-compatible server in the background (``with start_server() as srv: ...``).

    Args:
        model: the base model (a built-in name, a local directory or a hub id).
        engine: "workbench" (ours), "vllm" (a vLLM server in its own environment, always a subprocess; ``timeout``
            defaults to 900 s there, its start takes minutes on a small CPU) or "llama-cpp" (llama-server over the
            GGUF file ``model``, a subprocess; ``mmproj`` and ``loras`` as ServeConfig has them).
        **options: ``serve.server.start_server``'s: ``adapters`` (id -> adapter or run directory), ``runs``,
            ``port`` (0: a free one), ``host``, ``api_key``, ``subprocess_mode``, ``wait``, ``timeout``, ``loaded``
            and any ``ServeConfig`` field (max_batch, dtype, threads...).

    Returns:
        The server's handle (``url``, ``models()``, ``add_adapter``, ``stop``); ConfigError naming every bad option.
    """
    if engine not in ("vllm", "llama-cpp"):
        return server.start_server(model, engine=engine, **options)
    wait, timeout = options.pop("wait", True), options.pop("timeout", 900.0 if engine == "vllm" else 300.0)
    data = {"model": model, "engine": engine, "port": options.pop("port", 0), "log_level": "warning", **options}
    data["adapters"] = {k: str(v) for k, v in (data.get("adapters") or {}).items()}
    data["runs"] = [str(r) for r in data.get("runs") or []]
    config = config_from_dict(data, ServeConfig)
    if engine == "llama-cpp":
        return llama_cpp.start_llama_server(config, wait=wait, timeout=timeout)
    return vllm.start_vllm(config, wait=wait, timeout=timeout)
