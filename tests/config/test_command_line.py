"""A config written back as the ``workbench train`` command line that reproduces it."""

import shlex

from workbench.cli.main import _resolved, build_parser
from workbench.config import RunConfig, load_config
from workbench.config.command_line import command_line, flag_value


def _parse(command: str) -> RunConfig:
    argv = shlex.split(command.replace("\\\n", " "))
    assert argv[:2] == ["workbench", "train"]
    return _resolved(build_parser().parse_args(argv[1:]))


def test_defaults_give_the_bare_command():
    assert command_line(RunConfig()) == "workbench train"


def test_the_command_line_parses_back_to_the_same_config():
    cfg = load_config(
        None,
        {
            "lora.r": 8,
            "lora.target_modules": ["q_proj", "v_proj"],
            "precision.mode": "bf16",
            "data.eval": None,
            "data.system_prompt": 'It\'s "PhoneMate"; be brief.',
            "output.run_name": "007",
            "schedule.learning_rate": 0.001,
        },
    )
    line = command_line(cfg)
    assert "--lora.alpha" not in line and "--output.run_name 007" in line
    assert _parse(line) == cfg
    assert _parse(command_line(cfg, multiline=False)) == cfg


def test_a_partial_dict_leaves_other_fields_at_their_defaults():
    assert command_line({"lora": {"r": 4}}, multiline=False) == "workbench train --lora.r 4"
    assert flag_value(None) == "null" and flag_value(True) == "true" and flag_value([1, 2]) == "'[1, 2]'"
