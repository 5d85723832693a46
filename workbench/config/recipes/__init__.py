"""Recipes: packaged starting points, each a partial run configuration with what it is known to reach.

A recipe is one YAML file in this folder (shipped in the wheel; its name is the file's stem):

- ``purpose`` (one line) and ``description``;
- ``config``: a partial ``RunConfig``, only what differs from the defaults (``workbench train --recipe NAME``
  starts from it, ``--config FILE`` and flags apply on top);
- ``evaluation``: the tasks it is judged by (``workbench eval``'s tasks), the rows and answer length, and per
  metric the figure the fine-tuned model reaches (and the base model, when given) with a tolerance;
- ``measured_on``: the machine class those figures were measured on (device, resolved precision, a description)
  and the bench's wall time there;
- ``requirements``: the hardware it needs (CUDA GPUs and their memory, host RAM); ``train --recipe`` on a machine
  without it says so instead of starting;
- ``plan``: what ``workbench plan --recipe NAME`` needs beyond the config (target devices, screenshots per row);
- ``starts_from``: another recipe whose trained model this one starts from (GRPO starts from an SFT model). Its
  ``config`` then sets no ``model.source``: ``train --recipe NAME`` needs ``--model.source`` (the start's trained
  model), and the bench trains the start first and passes its model. One level: the start starts from nothing, and
  it saves a whole model (a full fine-tune, or LoRA with ``checkpointing.merge_adapter``).
- ``baselines``: for a recipe that starts from another, what the bench also trains from that start for the same
  wall time and judges beside it (SFT continued, filtered behaviour cloning, DAgger, DPO on the expert's pairs, DAgger
  then DPO): a claim over the start must beat them; ``baseline_settings``: how the DAgger and DPO ones train.
- ``variant_of``: another recipe whose ``config`` this one's layers over, key by key (a shorter variant writes only
  what it shortens, and follows its recipe's data and model when those change). One level; the variant has its own
  ``evaluation`` and figures, measured on itself.

``python -m workbench.bench.recipes [NAME ...]`` trains each runnable recipe, evaluates it and checks its figures.
Adding a recipe is adding one file here (its figures from that bench).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from ..files import UnreadableFile
from ..loading import ConfigError, apply_overrides, config_from_dict, config_to_dict, merge_config, read_mapping_file
from ..names import EPISODE_TASK, EVAL_TASKS
from ..samples import resolve_sample_path
from ..schema import RunConfig, Section

RECIPES_DIR = Path(__file__).resolve().parent
GiB = 1024**3
EDGE = 1e-9  # a figure's window is closed: a value on the tolerance's edge (up to float rounding) is inside it


class Figure(Section):
    """One expected metric: what the fine-tuned model reaches, within ``tolerance`` either side; or a goal over the
    base model (``above_base_by``), for a recipe whose base is another recipe's result and moves with it."""

    value: float | None = Field(None, description="The fine-tuned model's figure; null: a goal only (above_base_by).")
    tolerance: float | None = Field(
        None,
        ge=0,
        description="Accepted distance from value (either side), for the fine-tuned and the base figure alike.",
    )
    base: float | None = Field(
        None, description="The base model's figure on the same rows (no fine-tuning); checked too when given."
    )
    unchanged: bool = Field(
        False,
        description="The recipe claims no movement of this metric from the base: its "
        "window may hold the base figure. Otherwise it must not (a run that moved nothing would "
        "pass).",
    )
    above_base_by: float | None = Field(
        None,
        ge=0,
        description="The fine-tuned figure must exceed the base "
        "model's, measured beside it, by more than this (the run-to-run spread): "
        "the claim of a method over its start (GRPO over its SFT model), which "
        "holds from any start; a run that moves nothing fails it.",
    )

    @model_validator(mode="after")
    def _a_claimed_movement_excludes_the_base(self) -> Figure:
        if self.value is None:
            if self.above_base_by is None:
                raise ValueError("give value and tolerance (a measured figure) or above_base_by (a goal over the base)")
            if self.base is not None:
                raise ValueError("base is checked within value's tolerance: give value and tolerance too, or drop base")
            return self
        if self.tolerance is None:
            raise ValueError(f"value {self.value:g} needs a tolerance (the run-to-run spread either side)")
        if self.base is not None and not self.unchanged and self.holds(self.base, self.value):
            raise ValueError(
                f"the window {self.value:g} ± {self.tolerance:g} holds the base figure {self.base:g}: a "
                "run that changes nothing would pass; narrow the tolerance, or say `unchanged: true` "
                "when the recipe claims no movement"
            )
        return self

    def holds(self, figure: float | None, centre: float | None) -> bool:
        """Whether the window ``centre`` ± tolerance holds ``figure``: the one rule for the fine-tuned figure, the base
        figure, and a claimed move's base (which must lie outside, edge included); no centre: nothing to hold to."""
        return centre is None or (figure is not None and abs(figure - centre) <= self.tolerance + EDGE)

    def text(self) -> str:
        """What is expected, in one cell: ``0.516 ± 0.1 (base 0.000)``, ``> base + 0.1``, or both."""
        parts = (
            []
            if self.value is None
            else [
                f"{self.value:.3f} ± {self.tolerance:g}" + (f" (base {self.base:.3f})" if self.base is not None else "")
            ]
        )
        if self.above_base_by is not None:
            parts.append(f"> base + {self.above_base_by:g}")
        return ", ".join(parts)


class Evaluation(Section):
    """How a recipe is judged: one ``workbench eval`` task on the fine-tuned run (and its base model)."""

    task: str = Field(..., description="A `workbench eval` task (see `workbench eval --help`).")
    data: str | None = Field(None, description="The rows to score; null: the task's own held-out set.")
    rows: int | None = Field(None, ge=1, description="The first N rows; null: all.")
    max_tokens: int = Field(96, ge=1, le=4096, description="Answer length limit (answer-scoring tasks).")
    figures: dict[str, Figure] = Field(default_factory=dict, description="metric -> expected figure.")
    observation: Literal["screenshot", "ui_tree", "both"] = Field(
        "screenshot", description=f"{EPISODE_TASK} only: what the model is shown of each screen."
    )
    lang: Literal["cn", "en"] = Field(
        "en",
        description=f"{EPISODE_TASK} only: Open-AutoGLM's system prompt (its --lang), as the training rows have it.",
    )
    max_steps: int = Field(20, ge=1, le=100, description=f"{EPISODE_TASK} only: the step limit of an episode.")
    date: str | None = Field(
        None,
        description=f"{EPISODE_TASK} only: the system prompt's date (YYYY-MM-DD; "
        "that of the training rows keeps the prompts as trained); null: today.",
    )

    @field_validator("data")
    @classmethod
    def _packaged_samples(cls, value: str | None, info) -> str | None:
        if value is None or info.data.get("task") == EPISODE_TASK:  # the tasks to play, not a file
            return value
        return resolve_sample_path(value)

    @property
    def label(self) -> str:
        """The task, and the file when it is not the task's own: one recipe may score one task on two sets."""
        return self.task if self.data is None else f"{self.task} ({Path(self.data).stem})"

    def problems(self, path: str) -> list[tuple[str, str]]:
        if self.task == EPISODE_TASK:  # the tasks (a split, a template, ids) are checked where they are played
            return [] if self.data else [(f"{path}.data", f"{EPISODE_TASK} plays tasks: give them (e.g. heldout)")]
        out = EVAL_TASKS.unknown(f"{path}.task", [self.task])
        if self.data is not None and not Path(self.data).is_file():
            out.append((f"{path}.data", f"file not found: {self.data!r} (give an existing JSONL file, or null)"))
        return out


class MachineClass(Section):
    """Where a recipe's figures were measured: another class of machine may land outside the tolerances."""

    device: Literal["cpu", "cuda"] = Field(..., description="The device the run trained on.")
    precision: Literal["fp32", "fp16", "bf16", "pure-bf16"] = Field(
        ..., description="The precision the run resolved to there (precision.mode auto differs between machines)."
    )
    description: str = Field(..., description="The machine, e.g. 2 x86-64 cores with AVX2, no GPU.")
    threads: int | None = Field(
        None,
        ge=1,
        description="Torch CPU threads the bench ran with, and runs with again "
        "(a thread count changes summation order: on the phone recipe one answer of 23); "
        "null: torch's choice.",
    )
    wall_s: float | None = Field(None, gt=0, description="The bench's wall time there (train + evaluate), seconds.")
    cpu_s: float | None = Field(
        None,
        gt=0,
        description="The bench's CPU time there (train + evaluate), seconds: "
        "on a shared machine, closer than wall_s to what an idle one takes.",
    )


class Requirements(Section):
    gpus: int = Field(0, ge=0, description="CUDA GPUs needed (0: runs on a CPU).")
    gpu_memory_gib: float | None = Field(None, gt=0, description="Memory each of those GPUs needs, GiB.")
    host_memory_gib: float | None = Field(None, gt=0, description="Host RAM needed, GiB (offloaded state).")

    def describe(self) -> str:
        parts = []
        if self.gpus:
            each = (
                f" with >= {self.gpu_memory_gib:g} GiB{' each' if self.gpus > 1 else ''}" if self.gpu_memory_gib else ""
            )
            parts.append(f"{self.gpus} CUDA GPU{'s' if self.gpus > 1 else ''}{each}")
        if self.host_memory_gib:
            parts.append(f">= {self.host_memory_gib:g} GiB host RAM")
        return " and ".join(parts) or "a CPU (no GPU needed)"

    def unmet(self, gpu_bytes: list[int], host_bytes: int) -> str | None:
        """Why a machine with these GPUs (total memory of each) and host RAM cannot run the recipe, or None."""
        big_enough = [b for b in gpu_bytes if self.gpu_memory_gib is None or b >= self.gpu_memory_gib * GiB]
        short = []
        if len(big_enough) < self.gpus:
            short.append(
                "no CUDA GPU" if not gpu_bytes else "GPUs of " + ", ".join(f"{b / GiB:.1f}" for b in gpu_bytes) + " GiB"
            )
        if self.host_memory_gib and host_bytes < self.host_memory_gib * GiB:
            short.append(f"{host_bytes / GiB:.0f} GiB host RAM")
        return f"needs {self.describe()}; this machine has {' and '.join(short)}" if short else None


class PlanInputs(Section):
    """What ``workbench plan --recipe`` needs that a run configuration does not say."""

    devices: str = Field("2x24564MiB", description="COUNTxSIZE of the target GPUs (default: 2x RTX 4090).")
    host_ram: str = Field("64GiB", description="Host RAM of the target machine.")
    images_per_row: int = Field(0, ge=0, le=64, description="Screenshots per example.")
    image_size: str = Field("1080x2400", description="WIDTHxHEIGHT of each screenshot before the processor resizes it.")


BASELINES = ("sft_continued", "filtered_bc", "dagger", "dpo", "dagger_dpo")
PLAYING_BASELINES = ("filtered_bc", "dagger", "dpo", "dagger_dpo")  # the start plays the recipe's RL tasks first


class BaselineSettings(Section):
    """How the baselines that learn from the start's mistakes train (``bench.baselines``); everything else is the
    start recipe's configuration."""

    dagger_rounds: int = Field(
        3,
        ge=1,
        le=20,
        description="DAgger's rounds at most (dagger, and dagger_dpo's DAgger part): a further round is played only "
        "while each round still trains at least as long as a round plays.",
    )
    dagger_label_share: float = Field(
        0.5,
        gt=0,
        lt=1,
        description="The share of DAgger's training rows that are the expert's labels (repeated among the start "
        "recipe's rows): tens of labels among thousands of rows would hardly be drawn in a round of a few dozen "
        "steps.",
    )
    dpo_learning_rate: float = Field(
        1.0e-5,
        gt=0,
        le=1,
        description="DPO's peak learning rate (dpo, and dagger_dpo's DPO part): DPO moves a model an order or two "
        "less than SFT does (TRL's default 1e-6), and the SFT start's own rate would push both replies down within "
        "a few steps.",
    )


class Recipe(Section):
    config_title: ClassVar[str] = "recipe"
    help_command: ClassVar[str] = "workbench recipes show NAME"

    purpose: str = Field(..., min_length=1, description="One line: what the recipe teaches which model.")
    description: str = Field("", description="Why its settings are what they are.")
    config: dict[str, Any] = Field(..., description="A partial run configuration: what differs from the defaults.")
    evaluation: list[Evaluation] = Field(default_factory=list, description="The tasks it is judged by.")
    measured_on: MachineClass | None = Field(None, description="Where the figures were measured.")
    requirements: Requirements = Field(default_factory=Requirements, description="The hardware it needs.")
    plan: PlanInputs = Field(default_factory=PlanInputs, description="Inputs of `workbench plan --recipe`.")
    starts_from: str | None = Field(
        None,
        description="A recipe whose trained model this one starts from (its "
        "model.source); null: the config's model.source.",
    )
    baselines: list[Literal[BASELINES]] = Field(
        default_factory=list,
        description="For a recipe that starts_from another: what else the bench trains from the "
        "same start, for the same wall time as this recipe's training, and judges on the same episodes beside it: "
        "sft_continued = the start recipe's training continued; filtered_bc = the start recipe's training on the "
        "start model's own successful episodes of this recipe's RL tasks (DigiRL's filtered behaviour cloning); "
        "dagger = DAgger's rounds from the start on the RL tasks (it plays, the expert labels every state it reached, "
        "it trains on its rows and those labels); dpo = DPO on the expert's preference pairs at the states where the "
        "start's own episodes of the RL tasks left a shortest path; dagger_dpo = DAgger for half the time, then DPO "
        "on its pairs. Playing and labelling count in each one's time. An above_base_by goal is then judged against "
        "the best of the start and these.",
    )
    baseline_settings: BaselineSettings = Field(
        default_factory=lambda: BaselineSettings(),
        description="How the baselines dagger, dpo and dagger_dpo train (the rest is the start recipe's configuration).",
    )
    variant_of: str | None = Field(
        None,
        description="A recipe whose config this one's layers over (config is then "
        "the merge; only what differs is written in the file); null: none.",
    )
    # set by load_recipe, not by the file
    name: str = Field("", description="The file's stem.")
    path: str = Field("", description="The file.")

    def problems(self, path: str) -> list[tuple[str, str]]:
        out = _config_problems(self.config)
        for i, evaluation in enumerate(self.evaluation):  # a list: the validator recurses only into sections
            out += evaluation.problems(f"evaluation[{i}]")
        if self.measured_figures and self.measured_on is None:
            out.append(
                (
                    "measured_on",
                    "figures need the machine class they were measured on: add measured_on "
                    "{device, precision, description}",
                )
            )
        if self.starts_from is not None:
            out += self._start_problems()
        elif self.baselines:
            out.append(
                (
                    "baselines",
                    "baselines start from the model this recipe starts from: give starts_from, or remove them",
                )
            )
        playing = [b for b in self.baselines if b in PLAYING_BASELINES]
        if playing and (self.config.get("rl") or {}).get("prompts") != "phone_tasks":
            out.append(
                (
                    "baselines",
                    f"{', '.join(playing)}: the start plays the RL tasks (its successes cloned, its mistakes "
                    "labelled by the expert): they need config.rl.prompts phone_tasks",
                )
            )
        return out

    def _start_problems(self) -> list[tuple[str, str]]:
        start = self.starts_from
        if "source" in (self.config.get("model") or {}):
            return [("config.model.source", f"set by starts_from (the model recipe {start} trains): remove it")]
        if start == self.name:
            return [("starts_from", "a recipe cannot start from itself")]
        if start not in recipe_names():
            return [("starts_from", f"unknown recipe {start!r}: use one of {', '.join(recipe_names())}")]
        data = _with_variant_config(_file_data(start))
        if data.get("starts_from"):
            return [
                (
                    "starts_from",
                    f"recipe {start} starts from {data['starts_from']} itself: start from a recipe "
                    "that trains from a model source (one level)",
                )
            ]
        config = data.get("config") or {}
        lora = (config.get("lora") or {}).get("enabled", True)
        merged = (config.get("checkpointing") or {}).get("merge_adapter", False)
        if lora and not merged:
            return [
                (
                    "starts_from",
                    f"recipe {start} trains a LoRA adapter and saves no whole model to start from: "
                    "give it checkpointing.merge_adapter true, or lora.enabled false",
                )
            ]
        return []

    def start_problems(self, settings: Mapping[str, Any]) -> list[tuple[str, str]]:
        """What a run of this recipe lacks with ``settings`` (the merged configuration it is started with): a
        recipe that starts from another's model needs that model as model.source."""
        if self.starts_from is None or "source" in (settings.get("model") or {}):
            return []
        return [
            (
                "model.source",
                f"recipe {self.name} starts from the model recipe {self.starts_from} trains: train "
                f"that first (workbench train --recipe {self.starts_from}) and give its model, --model.source "
                f"RUN/model; python -m workbench.bench.recipes {self.name} does both",
            )
        ]

    @property
    def figures(self) -> int:
        return sum(len(e.figures) for e in self.evaluation)

    @property
    def measured_figures(self) -> int:
        """Figures with a value measured somewhere (not goals over the base only)."""
        return sum(f.value is not None for e in self.evaluation for f in e.figures.values())

    def run_config(self, overrides: Mapping[str, Any] | list[str] = (), *, checks: bool = True) -> RunConfig:
        """The recipe's run configuration with dotted ``overrides`` on top, validated with every check (a recipe
        that ``starts_from`` another needs ``model.source`` among them). ``checks=False``: the schema only, for a
        configuration compared rather than run here (a 2-rank recipe on a machine of one GPU)."""
        data = apply_overrides(self.config, overrides)
        if problems := self.start_problems(data):
            raise ConfigError(problems)
        return config_from_dict(data, checks=checks)

    def settings(self) -> dict:
        """The partial configuration with its numbers and switches as the schema reads them (YAML's ``1e-3`` is
        text; this is 0.001), paths and lists as written."""
        full = config_to_dict(config_from_dict(self.config, checks=False))

        def normalized(part: dict, resolved: dict) -> dict:
            return {
                k: normalized(v, resolved[k])
                if isinstance(v, dict) and isinstance(resolved.get(k), dict)
                else (resolved[k] if isinstance(resolved.get(k), (int, float, bool)) else v)
                for k, v in part.items()
            }

        return normalized(self.config, full)

    def summary(self) -> str:
        """The expected figures in one line: ``task: metric 0.913 ± 0.05 (base 0.000), metric > base + 0.1, ...``."""
        parts = []
        for e in self.evaluation:
            figures = ", ".join(f"{m} {f.text()}" for m, f in e.figures.items())
            parts.append(f"{e.label}: {figures or 'no figures'}")  # the label: one task may be scored on two sets
        return "; ".join(parts) or "no evaluation"


def _config_problems(config: Mapping) -> list[tuple[str, str]]:
    """The schema problems of a recipe's partial configuration, under ``config.``."""
    try:
        config_from_dict(config, checks=False)
    except ConfigError as err:
        return [(f"config.{p}" if p else "config", m) for p, m in err.problems]
    return []


def recipe_names() -> list[str]:
    return sorted(p.stem for p in RECIPES_DIR.glob("*.yaml"))


def recipe_file(name: str) -> Path:
    path = RECIPES_DIR / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError(
            [
                (
                    "recipe",
                    f"unknown recipe {name!r}: use one of {', '.join(recipe_names())} (`workbench recipes` lists them)",
                )
            ]
        )
    return path


def load_recipe(name: str) -> Recipe:
    """The packaged recipe ``name``; ConfigError naming every problem of its file at once."""
    path = recipe_file(name)
    data = read_mapping_file(path, f"recipe {name}", "a recipe (purpose, config, ...)")
    for key in ("name", "path"):
        if key in data:
            raise ConfigError([(key, "set from the file's name, not written in it: remove it")], f"recipe {path}")
    if problems := _variant_problems(name, data):
        raise ConfigError(problems, f"recipe {path}")
    data = _with_variant_config(data)
    try:
        return config_from_dict({**data, "name": name, "path": str(path)}, Recipe)
    except ConfigError as err:
        problems = err.problems
        if isinstance(data.get("config"), Mapping) and not any(p.startswith("config") for p, _ in problems):
            problems += _config_problems(data["config"])  # the rest of the file failed: still show these
        raise ConfigError(problems, f"recipe {path}") from None


def _file_data(name: str) -> dict:
    """Recipe ``name``'s file as written (no variant layered in): what another recipe's checks read of it."""
    return read_mapping_file(recipe_file(name), f"recipe {name}", "a recipe")


def _variant_problems(name: str, data: Mapping) -> list[tuple[str, str]]:
    base = data.get("variant_of")
    if base is None:
        return []
    if base == name:
        return [("variant_of", "a recipe cannot be a variant of itself")]
    if base not in recipe_names():
        return [("variant_of", f"unknown recipe {base!r}: use one of {', '.join(recipe_names())}")]
    if _file_data(base).get("variant_of"):
        return [("variant_of", f"recipe {base} is a variant itself: name the recipe it varies (one level)")]
    return []


def _with_variant_config(data: Mapping) -> dict:
    """``data`` with its ``config`` layered over that of the recipe it is a variant of (if any)."""
    base, own = data.get("variant_of"), data.get("config") or {}
    if base is None or not isinstance(own, Mapping):  # not a mapping: the schema says so, naming config
        return dict(data)
    base_config = _file_data(base).get("config") or {}
    return {**data, "config": merge_config(base_config, own)}


def all_recipes() -> list[Recipe]:
    return [load_recipe(n) for n in recipe_names()]


def recipe_text(name: str) -> str:
    """The recipe's file as shipped (with its comments)."""
    try:
        from ..files import read_text

        return read_text(recipe_file(name))
    except UnreadableFile as err:
        raise ConfigError([("recipe", str(err))]) from None


__all__ = [
    "Evaluation",
    "Figure",
    "MachineClass",
    "PlanInputs",
    "Recipe",
    "Requirements",
    "RECIPES_DIR",
    "all_recipes",
    "load_recipe",
    "recipe_file",
    "recipe_names",
    "recipe_text",
]
