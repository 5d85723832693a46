"""The one place a run config is built from what a user gives: a packaged recipe < a config file (or a notebook
cell) < a DeepSpeed JSON < ``--set KEY=VALUE`` < ``--section.field`` flags, each layer over the ones before it;
``sharding.nproc_per_node`` x ``nnodes`` > 1 without a ``sharding.strategy`` means DDP.

``workbench train`` (``cli.main``), the ``%%workbench_train`` magic (``ui.magics``) and the config panel's form
(``ui.config_form``) all assemble through here, so the same inputs give the same ``RunConfig`` everywhere:

    inputs = RunInputs(recipe="phone-agent-smollm2-short", deepspeed="ds.json", sets=["lora.r=8"])
    cfg = assemble(inputs)                      # validated; ConfigError naming every problem
    assembled = assemble_settings(inputs)       # the merged settings before validation, the recipe, the import

``add_run_input_arguments`` adds the inputs' command-line options to a parser (the command's and the magic's),
``run_inputs(args, config)`` reads them back.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .deepspeed_import import DeepSpeedImport, import_deepspeed_file
from .flags import add_config_arguments, overrides_from_args
from .loading import ConfigError, apply_overrides, config_from_dict, merge_config
from .schema import RunConfig

# The process shortcuts of --sharding.* (flag, field): what `torchrun` users type.
PROCESS_FLAGS = (
    ("--nproc", "nproc_per_node"),
    ("--nnodes", "nnodes"),
    ("--node-rank", "node_rank"),
    ("--master-addr", "master_addr"),
    ("--master-port", "master_port"),
)


@dataclass(frozen=True)
class RunInputs:
    """What a run config is assembled from, lowest precedence first.

    Args:
        recipe: a packaged recipe's name (``workbench recipes``), or None.
        config: a config file's (or a notebook cell's) settings, already read: a partial nested mapping.
        deepspeed: a DeepSpeed JSON file, imported with warnings where DeepSpeed would not do what it says.
        sets: dotted ``KEY=VALUE`` overrides (``--set``), values read as YAML.
        flags: dotted overrides of ``--section.field`` flags, typed (``flags.overrides_from_args``).
        deepspeed_field: how a problem of the DeepSpeed file names it (``--deepspeed``; the panel's ``file``).
    """

    recipe: str | None = None
    config: Mapping[str, Any] = field(default_factory=dict)
    deepspeed: str | Path | None = None
    sets: Sequence[str] = ()
    flags: Mapping[str, Any] = field(default_factory=dict)
    deepspeed_field: str = "--deepspeed"


@dataclass
class AssembledSettings:
    """The inputs merged: ``settings`` (a partial config, not yet validated), the ``recipe`` they start from and the
    DeepSpeed ``imported`` (its ``warnings`` and ``notes``: ``(DeepSpeed key, message)``)."""

    settings: dict
    recipe: Any = None  # config.recipes.Recipe
    imported: DeepSpeedImport | None = None
    deepspeed_file: str | None = None

    def notices(self) -> list[str]:
        """The DeepSpeed importer's warnings and notes as lines to show (``warning: FILE: KEY: MESSAGE``)."""
        if self.imported is None:
            return []
        return [f"warning: {self.deepspeed_file}: {key}: {msg}" for key, msg in self.imported.warnings] + [
            f"note: {self.deepspeed_file}: {key}: {msg}" for key, msg in self.imported.notes
        ]

    def start_problems(self) -> list[tuple[str, str]]:
        """What a run of the recipe lacks with these settings (a recipe that starts from another's model)."""
        return self.recipe.start_problems(self.settings) if self.recipe is not None else []

    def config(self) -> RunConfig:
        """The validated RunConfig; ConfigError naming every problem (the recipe's start problems first)."""
        if problems := self.start_problems():
            raise ConfigError(problems)
        return config_from_dict(self.settings)


def world_size_given(sharding: Mapping[str, Any]) -> int | None:
    """nproc_per_node x nnodes as given (None when either is not a number yet: validation reports it)."""
    counts = [sharding.get(k, 1) for k in ("nproc_per_node", "nnodes")]
    return counts[0] * counts[1] if all(isinstance(c, int) for c in counts) else None


def process_default(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The strategy a process count implies: ``{"sharding.strategy": "ddp"}`` when ``settings`` (a partial config)
    give more than one process (nproc_per_node x nnodes) and no strategy, else nothing."""
    sharding = settings.get("sharding") or {}
    if "strategy" not in sharding and (world_size_given(sharding) or 1) > 1:
        return {"sharding.strategy": "ddp"}
    return {}


def assemble_settings(inputs: RunInputs) -> AssembledSettings:
    """The inputs' layers merged in their order, the DDP default applied; nothing validated yet.

    Args:
        inputs: the recipe, config, DeepSpeed file, ``--set`` overrides and flags.

    Returns:
        The merged settings, the recipe and the DeepSpeed import; ConfigError for an unknown recipe or an unusable
        DeepSpeed file.
    """
    from .recipes import load_recipe

    def with_command_line(data: dict) -> dict:
        return apply_overrides(apply_overrides(data, inputs.sets), inputs.flags)

    recipe = load_recipe(inputs.recipe) if inputs.recipe else None
    data = merge_config(recipe.settings() if recipe else {}, inputs.config)
    imported = None
    if inputs.deepspeed:
        # A process count given anywhere is the world size that splits the JSON's train_batch_size.
        sharding = with_command_line(data).get("sharding") or {}
        world = world_size_given(sharding) if {"nproc_per_node", "nnodes"} & set(sharding) else None
        imported = import_deepspeed_file(inputs.deepspeed, world, inputs.deepspeed_field)
        data = apply_overrides(data, imported.overrides)
    data = with_command_line(data)
    data = apply_overrides(data, process_default(data))
    return AssembledSettings(data, recipe, imported, str(inputs.deepspeed) if inputs.deepspeed else None)


def assemble(inputs: RunInputs) -> RunConfig:
    """The RunConfig of ``inputs`` (``assemble_settings``, then validated).

    Args:
        inputs: the recipe, config, DeepSpeed file, ``--set`` overrides and flags.

    Returns:
        The validated RunConfig; ConfigError naming every problem with its field path.
    """
    return assemble_settings(inputs).config()


def add_run_input_arguments(parser: argparse.ArgumentParser, config_file: bool = True) -> None:
    """The inputs' options: ``--recipe``, ``--config FILE`` (unless ``config_file`` is False: a notebook cell is the
    config), ``--deepspeed``, ``--set``, a flag per config field and the process shortcuts (``--nproc`` ...)."""
    parser.add_argument(
        "--recipe",
        metavar="NAME",
        help="start from a packaged recipe (`workbench recipes` lists "
        "them); the config, --deepspeed and flags apply on top of it, in that order (flags win). A "
        "recipe that needs hardware this machine lacks is refused, saying what it needs",
    )
    if config_file:
        parser.add_argument("--config", metavar="FILE", help="YAML or JSON run configuration (on top of --recipe)")
    parser.add_argument(
        "--deepspeed",
        metavar="FILE",
        help="a DeepSpeed config JSON (as for HF Trainer / "
        "LLaMA-Factory), imported into the run configuration with warnings where DeepSpeed would not "
        "do what it says; it overrides the config, and flags override it",
    )
    parser.add_argument("--set", metavar="KEY=VALUE", action="append", default=[], help="dotted override, repeatable")
    add_config_arguments(parser)
    group = parser.add_argument_group("processes (short for --sharding.*; --nproc N > 1 without a strategy means ddp)")
    for flag, key in PROCESS_FLAGS:
        group.add_argument(
            flag,
            dest=f"cfg:sharding.{key}",
            default=argparse.SUPPRESS,
            metavar="VALUE",
            help=f"same as --sharding.{key}",
        )


def run_inputs(args: argparse.Namespace, config: Mapping[str, Any] | None = None) -> RunInputs:
    """The RunInputs of options ``add_run_input_arguments`` added; ``config``: the config's settings, read by the
    caller (``--config``'s file, a notebook cell)."""
    return RunInputs(
        recipe=args.recipe,
        config=config or {},
        deepspeed=args.deepspeed,
        sets=args.set,
        flags=overrides_from_args(args),
    )
