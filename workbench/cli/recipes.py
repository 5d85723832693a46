"""``workbench recipes``: list the packaged recipes, show one, copy one to edit (registered by workbench.cli.main)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from ..config import ConfigError
from ..config.arguments import CommandInputError
from ..config.command_line import command_line
from ..config.recipes import Recipe, all_recipes, load_recipe, recipe_text


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "recipes",
        help="packaged starting points with the figures they reach: list, show, copy",
        description="Recipes are packaged run configurations, each with what it is for, how it is judged (a "
        "`workbench eval` task) and the figures it reaches there. `workbench train --recipe NAME` runs one; "
        "`python -m workbench.bench.recipes NAME` trains, evaluates and checks its figures.",
    )
    p.add_argument(
        "action",
        nargs="?",
        choices=("list", "show", "copy"),
        default="list",
        help="list (default): every recipe, its purpose and figures; show NAME: the recipe file and its "
        "command line; copy NAME FILE: an editable run configuration for --config",
    )
    p.add_argument("name", nargs="?", help="the recipe (show, copy)")
    p.add_argument("file", nargs="?", help="copy: the YAML file to write")
    p.add_argument("--force", action="store_true", help="copy: overwrite FILE if it exists")
    return p


def run(args) -> int:
    if args.action == "list":
        if args.name:
            raise CommandInputError(f"recipes list takes no name (got {args.name!r}): did you mean recipes show?")
        for r in all_recipes():
            print(f"{r.name}\n  {r.purpose}\n  figures: {r.summary()}\n  needs: {r.requirements.describe()}")
        return 0
    if not args.name:
        raise CommandInputError(f"recipes {args.action} needs a recipe name (`workbench recipes` lists them)")
    recipe = load_recipe(args.name)
    if args.action == "show":
        print(recipe_text(args.name).rstrip())
        print(
            f"\n# as a command line (the recipe's settings; the rest are the defaults):\n"
            f"{command_line(recipe.settings(), 'workbench train')}\n# which is: workbench train --recipe {recipe.name}"
        )
        if recipe.starts_from:
            print(
                f"# it starts from the model recipe {recipe.starts_from} trains: add --model.source RUN/model "
                f"(python -m workbench.bench.recipes {recipe.name} trains both)"
            )
        return 0
    if not args.file:
        raise CommandInputError("recipes copy needs the file to write: workbench recipes copy NAME run.yaml")
    return _copy(recipe, Path(args.file), args.force)


def copy_text(recipe: Recipe) -> str:
    """The recipe's configuration as a run configuration file, headed by what the recipe is and reaches."""
    head = [f"# From recipe {recipe.name}: {recipe.purpose}", f"# Expected figures: {recipe.summary()}"]
    if recipe.measured_on is not None:
        head.append(
            f"#   measured as {recipe.measured_on.device}/{recipe.measured_on.precision} on "
            f"{recipe.measured_on.description}"
        )
    if recipe.starts_from:
        head.append(
            f"# Starts from the model recipe {recipe.starts_from} trains: set model.source to it "
            f"(workbench train --recipe {recipe.starts_from}, then RUN/model)"
        )
    head += [
        f"# Needs: {recipe.requirements.describe()}",
        f"# Run it: workbench train --config THIS_FILE [--section.field value ...]; check the original's figures: "
        f"python -m workbench.bench.recipes {recipe.name}",
    ]
    return "\n".join(head) + "\n" + yaml.safe_dump(recipe.settings(), sort_keys=False, allow_unicode=True)


def _copy(recipe: Recipe, path: Path, force: bool) -> int:
    if path.exists() and not force:
        raise CommandInputError(f"{path} exists: give another file name, or --force to overwrite it")
    if path.suffix not in (".yaml", ".yml"):
        raise CommandInputError(f"{path}: the copy is YAML, name it .yaml or .yml")
    try:
        path.write_text(copy_text(recipe), encoding="utf-8")
    except OSError as err:
        raise CommandInputError(f"cannot write {path}: {err.strerror or err}") from None
    print(f"wrote {path}: edit it, then workbench train --config {path}", file=sys.stderr)
    return 0


__all__ = ["add_parser", "run", "copy_text", "ConfigError"]
