"""``workbench serve --engine llama-cpp``: llama.cpp's own OpenAI server (llama-server) over a GGUF file, behind the
same handle as ours, and where the llama.cpp workbench uses lives.

llama.cpp is built from the pinned llama-cpp-python source distribution on the package index (its
``vendor/llama.cpp``) by ``bash scripts/setup.sh --llama-cpp`` into a cache keyed by that version: ``bin/`` holds
llama-server, llama-mtmd-cli and llama-quantize, ``convert/`` llama.cpp's converter scripts with the gguf-py they
import (``workbench export --target gguf`` runs them). The process is owned as vLLM's is (``serve.child``).

What llama-server does differently from our server, and how it is started for it: it renders the chat template the
GGUF carries (the tokenizer's, written by the converter) with its own Jinja engine (``--jinja``); replies keep their
``<think>`` reasoning inline (``--reasoning-format none``, as Open-AutoGLM's runtime reads them and as vLLM is
started); adapters are applied by index per request (``"lora": [{"id": i, "scale": 1}]``), not by model id.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .child import ChildDied, ChildLaunch, ChildServer, free_port, has_nvidia_gpu, say, serve_in_foreground
from .config import ServeConfig, ServeError
from .server import _url_host

LLAMA_CPP_PYTHON_VERSION = "0.3.36"  # keep equal to scripts/setup_llama_cpp.sh VERSION
LLAMA_CPP_COMMIT = "0c1e57098bba"  # the llama.cpp that sdist vendors
HOME_ENV = "WORKBENCH_LLAMA_CPP_HOME"
SETUP_COMMAND = "bash scripts/setup.sh --llama-cpp"
BINARIES = ("llama-server", "llama-mtmd-cli", "llama-quantize")
STAMP = ".complete"  # written last by the set-up: a build that stopped half-way is not found


class LlamaCppMissing(ServeError):
    """llama.cpp is not set up (one line naming the set-up command)."""


class LlamaServerDied(ChildDied):
    """llama-server exited; the message ends with its last log lines."""


@dataclass(frozen=True)
class LlamaCpp:
    """A set-up llama.cpp: its binaries and its converter scripts."""

    home: Path

    def binary(self, name: str) -> Path:
        return self.home / "bin" / name

    def script(self, name: str) -> Path:
        """``convert_hf_to_gguf.py`` or ``convert_lora_to_gguf.py`` (gguf-py beside them, which they import)."""
        return self.home / "convert" / name

    @property
    def version(self) -> str:
        return f"llama.cpp {LLAMA_CPP_COMMIT} (vendored by llama-cpp-python {LLAMA_CPP_PYTHON_VERSION})"


def llama_cpp_home() -> Path:
    """$WORKBENCH_LLAMA_CPP_HOME, else ~/.cache/workbench/llama.cpp/VERSION (the set-up's default)."""
    if explicit := os.environ.get(HOME_ENV):
        return Path(explicit).expanduser()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "workbench" / "llama.cpp" / LLAMA_CPP_PYTHON_VERSION


def find_llama_cpp() -> LlamaCpp:
    """The set-up llama.cpp; LlamaCppMissing (one line: what to run) when it is not there."""
    found = LlamaCpp(llama_cpp_home())
    wanted = [found.home / STAMP, *(found.binary(b) for b in BINARIES), found.script("convert_hf_to_gguf.py")]
    if not all(p.is_file() for p in wanted):
        raise LlamaCppMissing(f"llama.cpp is not set up (looked in {found.home}): run `{SETUP_COMMAND}`")
    return found


# ---- the command line -------------------------------------------------------------------------------------------


def build_launch(config: ServeConfig, binary: str | Path | None = None) -> ChildLaunch:
    """llama-server for ``config``: the GGUF under the base id, its mmproj, its LoRAs (at scale 0), the chat template
    it carries, reasoning inline. A ``port`` of 0 is replaced by a free one."""
    port = config.port or free_port(config.host)
    argv = [
        str(binary or find_llama_cpp().binary("llama-server")),
        "--model",
        str(Path(config.model).expanduser()),
        "--alias",
        config.base_id,
        "--host",
        config.host,
        "--port",
        str(port),
        "--parallel",
        str(config.max_batch),
        "--jinja",  # the GGUF's own chat template (tokenizer.chat_template), rendered as transformers renders it
        "--reasoning-format",
        "none",  # <think>...</think> stays in content: our inline mode, Open-AutoGLM's runtime
        "--no-webui",
        "--log-colors",
        "off",
    ]
    argv += ["--mmproj", str(Path(config.mmproj).expanduser())] if config.mmproj else []
    for file in config.loras.values():
        argv += ["--lora", str(Path(file).expanduser())]
    # the context per request (llama-server divides its KV pool among the slots otherwise)
    argv += ["--kv-unified-per-slot", str(config.max_context)] if config.max_context else []
    argv += ["--threads", str(config.threads)] if config.threads else []
    argv += ["--n-gpu-layers", "all"] if has_nvidia_gpu() and config.device != "cpu" else ["--n-gpu-layers", "0"]
    env = {"LLAMA_API_KEY": config.api_key} if config.api_key else {}  # not on the command line, where ps shows it
    return ChildLaunch(argv, env, f"http://{_url_host(config.host)}:{port}", secret_env=("LLAMA_API_KEY",))


# ---- the process ------------------------------------------------------------------------------------------------


class LlamaServer(ChildServer):
    """llama-server in a child process (its own process group), behind the same handle as ours."""

    engine = "llama-server"
    died_error = LlamaServerDied
    id_flag = "--alias"

    def after_ready(self) -> None:
        """Every loaded LoRA at scale 0 for requests that name none: llama-server applies each at scale 1 to every
        request otherwise, and this build's --lora-init-without-apply leaves them at 1 (measured: GET /lora-adapters
        says 1.0 and a request without "lora" answered as the adapter)."""
        adapters = self.client.get("/lora-adapters") or []
        if adapters:
            self.client.post("/lora-adapters", [{"id": a["id"], "scale": 0.0} for a in adapters])


def start_llama_server(
    config: ServeConfig, *, wait: bool = True, timeout: float = 300.0, echo: bool = False, progress=None
) -> LlamaServer:
    """Start llama-server for ``config`` in the background (``with start_llama_server(cfg) as srv: ...``)."""
    return LlamaServer(build_launch(config), config.api_key, echo=echo).started(wait, timeout, progress)


def serve_forever(config: ServeConfig, print_command: bool = False) -> int:
    """The CLI: print the command, or run llama-server in the foreground until Ctrl-C / SIGTERM; 1 when it dies."""
    if print_command:  # for a llama.cpp of the user's own: no local build needed
        try:
            binary = find_llama_cpp().binary("llama-server")
        except LlamaCppMissing:
            binary = "llama-server"
        print(build_launch(config, binary).shell())
        return 0
    launch = build_launch(config)
    say(f"starting llama-server: {launch.shell()}")
    return serve_in_foreground(lambda: LlamaServer(launch, config.api_key, echo=True))
