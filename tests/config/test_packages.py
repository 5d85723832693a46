"""A missing optional package is named with the command that installs it (issue 22: a raw ModuleNotFoundError
was all a new user saw)."""

from __future__ import annotations

import sys

import pytest

from workbench.config import ConfigError, load_config
from workbench.config.packages import missing_package, missing_packages


def test_an_installed_package_is_not_missing():
    assert missing_package("torch") is None and missing_packages("torch", "yaml") == []


def test_a_missing_package_is_named_with_its_range_and_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "torchao", None)  # what find_spec and import see when it is not installed
    msg = missing_package("torchao")
    assert msg.startswith("torchao is not installed: pip install 'torchao")
    assert "'.[export]'" in msg and "\n" not in msg
    assert missing_packages("torch", "torchao") == [msg]


def test_qat_without_torchao_is_a_config_error_naming_the_field_and_the_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "torchao", None)
    with pytest.raises(ConfigError) as err:
        load_config(None, {"quantization.qat": "int8-dynamic"})
    assert "quantization.qat" in str(err.value) and "pip install 'torchao" in str(err.value)
    assert load_config(None, {}).quantization.qat is None  # QAT off needs no torchao


def test_the_readme_set_up_installs_every_package_an_export_target_needs():
    """`bash scripts/setup.sh` (no --test) is the README's first command: notebook 06 and `workbench export --target
    int8|onnx|onnx-int8` must work after it, so the extras those targets' packages come from are in its default."""
    import re

    from tests.conftest import REPO
    from workbench.config.packages import OPTIONAL_PACKAGES
    from workbench.export.targets import TARGET_MODULES, TARGETS

    default = re.search(r'^EXTRAS="\[([a-z,]*)\]"$', (REPO / "scripts" / "setup.sh").read_text(), re.M)
    assert default, 'scripts/setup.sh no longer sets its default EXTRAS="[...]" line'
    needed = {OPTIONAL_PACKAGES[module][1] for target in TARGETS for module in TARGET_MODULES[target]}
    assert needed == {"export"} and needed <= set(default.group(1).split(","))


def test_the_readme_set_up_installs_what_the_qlora_recipe_needs():
    """`workbench train --recipe identity-demo-qlora` right after the README's first command (`bash scripts/setup.sh`):
    its quantization.base needs bitsandbytes, from the extra the default set-up installs."""
    import re

    from tests.conftest import REPO
    from workbench.config.packages import OPTIONAL_PACKAGES
    from workbench.config.recipes import load_recipe

    assert load_recipe("identity-demo-qlora").run_config().quantization.base == "nf4"
    default = re.search(r'^EXTRAS="\[([a-z,]*)\]"$', (REPO / "scripts" / "setup.sh").read_text(), re.M)
    assert OPTIONAL_PACKAGES["bitsandbytes"][1] in default.group(1).split(",")
    pyproject = (REPO / "pyproject.toml").read_text()
    assert re.search(r'^qlora = \["bitsandbytes>=0\.50"\]$', pyproject, re.M)
