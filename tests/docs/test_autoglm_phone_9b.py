"""docs/autoglm_phone_9b.md, walked as a user walks it: every command of its bash blocks, in order, in a fresh clone of
this repository, against a stand-in for AutoGLM-Phone-9B with its real config and module names. A command that would
download, train or load 20 GB is stood in for (``STAND_INS``: the download writes the stand-in's config, training runs
its meta-device dry run and leaves the run directory's config and adapter config, a server start is validated as the
server validates it); every other command runs as written and must exit 0. A command of the guide that fails, or one
no rule here knows, fails the test."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from .commands import page_commands

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "autoglm_phone_9b.md"


def guide_commands(page: Path) -> list[list[str]]:
    """The commands of the guide's bash blocks, in order, as the shell splits them (``tests/docs/commands.py``)."""
    return [list(c.argv) for c in page_commands(page)]


def _flag(argv: list[str], name: str):
    return argv[argv.index(name) + 1] if name in argv else None


def _download(argv: list[str]) -> None:
    """`hf download REPO --local-dir DIR`: the hub id is the built-in model's, `hf` takes these arguments, and DIR gets
    the stand-in: the 9B's config (the planner's: GLM-4.1V's published widths, rotary settings and token ids)."""
    from workbench.models import BUILTIN
    from workbench.plan.arch import autoglm_phone_9b_config

    assert argv[1] == "download" and argv[2] == BUILTIN["autoglm-phone-9b"].hub_id, argv
    helped = subprocess.run(
        [str(Path(__import__("sys").executable).parent / "hf"), "download", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert helped.returncode == 0 and "--local-dir" in helped.stdout
    local = Path(_flag(argv, "--local-dir"))
    local.mkdir(parents=True, exist_ok=True)
    (local / "config.json").write_text(json.dumps(autoglm_phone_9b_config().to_dict()))


def _train(argv: list[str]) -> None:
    """The dry run of the command; the run directory it names keeps what serving reads of a finished run."""
    from workbench.cli.main import _resolved, build_parser, main
    from workbench.config import save_config

    dry = argv if "--dry-run" in argv else [*argv, "--dry-run"]
    assert main(dry[1:]) == 0, dry
    name = _flag(argv, "--output.run_name")
    if name is not None:
        cfg = _resolved(build_parser().parse_args(argv[1:]))
        run = Path("runs") / name
        (run / "adapter").mkdir(parents=True)
        save_config(cfg, run / "config.json")
        (run / "adapter" / "adapter_config.json").write_text(
            json.dumps({"r": cfg.lora.r, "base_model_name_or_path": cfg.model.source, "peft_type": "LORA"})
        )
        (run / "events.jsonl").write_text(json.dumps({"type": "run_started", "time": 0.0, "rank": 0}) + "\n")


def _serve(argv: list[str]) -> None:
    """A server start validated as `workbench serve` validates it (the base, the run's adapter on it, the options)."""
    from workbench.cli.main import build_parser
    from workbench.serve.cli import config_from_args

    config = config_from_args(build_parser().parse_args(argv[1:]))
    assert config.problems() == [] and config.device == "auto" and config.dtype == "auto"


def _eval(argv: list[str]) -> None:
    """`workbench eval` parsed as the command parses it (the run holds an adapter; the task and file exist)."""
    from workbench.cli.main import build_parser

    args = build_parser().parse_args(argv[1:])
    assert Path(args.data).is_file() and args.device == "auto"


def _open_autoglm(argv: list[str]) -> None:
    """Open-AutoGLM's main.py: its --lang is one the runtime has, the rows' own, and the model id is the served run's."""
    from workbench.phone.openautoglm import LANGS

    assert _flag(argv, "--lang") in LANGS and _flag(argv, "--lang") == "cn"
    assert Path("runs", _flag(argv, "--model")).is_dir()


def _install(argv: list[str]) -> None:
    """`pip install -e '.[phone]'` from the checkout: the extra exists (installed in this test's environment)."""
    import tomllib

    extras = tomllib.loads(Path("pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert argv[1:] == ["install", "-e", ".[phone]"] and "phone" in extras


STAND_INS = [
    (lambda a: a[:2] == ["bash", "scripts/setup.sh"], lambda a: Path(a[1]).is_file()),
    (lambda a: a[0] == "source", lambda a: None),  # this test runs in the environment the set-up makes
    (lambda a: a[:2] == ["pip", "install"], lambda a: _install(a)),
    (lambda a: a[0] == "hf", _download),
    (lambda a: a[:2] == ["workbench", "train"], lambda a: _train(a)),
    (lambda a: a[:2] == ["workbench", "serve"] and "--print-command" not in a, lambda a: _serve(a)),
    (lambda a: a[:2] == ["workbench", "eval"], lambda a: _eval(a)),
    (lambda a: a[:2] == ["python", "main.py"], lambda a: _open_autoglm(a)),
]


def run_command(argv: list[str], capsys) -> None:
    from workbench.cli.main import main

    for matches, stand_in in STAND_INS:
        if matches(argv):
            stand_in(argv)
            return
    assert argv[0] == "workbench", f"no rule runs this command of the guide: {argv}"
    assert main(argv[1:]) == 0, (argv, capsys.readouterr())


@pytest.mark.slow
def test_every_command_of_the_guide_runs_in_order_from_a_fresh_clone(tmp_path, monkeypatch, capsys):
    clone = tmp_path / "workbench"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True, timeout=300)
    monkeypatch.chdir(clone)
    monkeypatch.setenv("PATH", f"{Path(__import__('sys').executable).parent}:{__import__('os').environ['PATH']}")
    commands = guide_commands(clone / "docs" / "autoglm_phone_9b.md")
    assert len(commands) >= 15
    for command in commands:
        run_command(command, capsys)
    assert "in Open-AutoGLM's runtime format" in capsys.readouterr().err  # data check said so


def test_the_guide_is_linked_from_the_readmes_first_screen_and_its_commands_parse():
    head = "\n".join((REPO / "README.md").read_text(encoding="utf-8").splitlines()[:40])
    assert "docs/autoglm_phone_9b.md" in head
    commands = guide_commands(GUIDE)
    unknown = [c for c in commands if not any(m(c) for m, _ in STAND_INS) and c[0] != "workbench"]
    assert not unknown, unknown
    assert not any(word.startswith("workbench[") for c in commands for word in c)
