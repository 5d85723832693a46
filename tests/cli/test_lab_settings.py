"""The JupyterLab defaults of a workbench session, read back through jupyterlab_server's own settings reader."""

from __future__ import annotations

import json
import sys

from jupyterlab.commands import get_app_dir
from jupyterlab_server.settings_utils import get_settings

from workbench.cli import lab_settings
from workbench.cli.main import main

NOTIFICATION = "@jupyterlab/apputils-extension:notification"


def notification_defaults(app_dir, user_settings_dir) -> dict:
    schemas = f"{get_app_dir()}/schemas"  # the installed JupyterLab's schemas
    found, _ = get_settings(str(app_dir / "settings"), schemas, str(user_settings_dir), schema_name=NOTIFICATION)
    return {name: prop["default"] for name, prop in found["schema"]["properties"].items()}


def test_no_news_prompt_and_a_users_own_overrides_still_win(tmp_path):
    app_dir = tmp_path / "lab"
    assert notification_defaults(app_dir, tmp_path / "user")["fetchNews"] == "none"  # JupyterLab asks by default
    path = lab_settings.install(app_dir)
    assert path == app_dir / "settings" / "overrides.d" / "workbench.json"
    defaults = notification_defaults(app_dir, tmp_path / "user")
    assert defaults["fetchNews"] == "false" and defaults["checkForUpdates"] is False

    (app_dir / "settings" / "overrides.json").write_text(json.dumps({NOTIFICATION: {"checkForUpdates": True}}))
    lab_settings.install(app_dir)  # a second set-up rewrites only its own file
    defaults = notification_defaults(app_dir, tmp_path / "user")
    assert defaults["fetchNews"] == "false" and defaults["checkForUpdates"] is True


def test_the_set_up_installed_them_into_this_environment(tmp_path):
    path = lab_settings.overrides_file()
    assert path.is_file(), (
        f"{path} is missing: scripts/setup.sh installs it ({sys.executable} -m workbench lab-settings does it alone)"
    )
    # what this environment's JupyterLab serves as the defaults (its app dir; a user without settings of their own)
    assert notification_defaults(path.parents[2], tmp_path / "user")["fetchNews"] == "false"


def test_the_command_installs_them(tmp_path, capsys):
    assert main(["lab-settings", str(tmp_path / "lab")]) == 0
    assert (tmp_path / "lab" / "settings" / "overrides.d" / "workbench.json").is_file()
    assert "overrides.d/workbench.json" in capsys.readouterr().out
