"""The JupyterLab defaults of a workbench session, read back through jupyterlab_server's own settings reader."""
from __future__ import annotations

import json
import sys

from jupyterlab.commands import get_app_dir
from jupyterlab_server.settings_utils import get_settings

from workbench.ui import lab_settings

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
    assert path.is_file(), (f"{path} is missing: scripts/setup.sh installs it ({sys.executable} -m "
                            "workbench.ui.lab_settings does it alone)")
    # what this environment's JupyterLab serves as the defaults (its app dir; a user without settings of their own)
    assert notification_defaults(path.parents[2], tmp_path / "user")["fetchNews"] == "false"


# ---- the charts follow JupyterLab's theme (issue 22 item 5) ------------------------------------------------------

def _dark_user_settings(root):
    path = root / "@jupyterlab" / "apputils-extension" / "themes.jupyterlab-settings"
    path.parent.mkdir(parents=True)
    path.write_text('{\n    // JupyterLab writes comments into its settings files\n    "theme": "JupyterLab Dark"\n}\n')
    return root


def test_the_chart_template_follows_the_theme_jupyterlab_applies(tmp_path):
    user, app = tmp_path / "user", tmp_path / "app"
    assert lab_settings.lab_theme(user, app) == "JupyterLab Light"  # nothing set: JupyterLab's default
    (app / "settings").mkdir(parents=True)
    (app / "settings" / "overrides.json").write_text(
        '{"@jupyterlab/apputils-extension:themes": {"theme": "JupyterLab Dark"}}')
    assert lab_settings.lab_theme(user, app) == "JupyterLab Dark"  # the environment's default
    user.mkdir()
    (user / "@jupyterlab" / "apputils-extension").mkdir(parents=True)
    (user / lab_settings.THEMES_SETTINGS).write_text('{"theme": "JupyterLab Light"}')
    assert lab_settings.lab_theme(user, app) == "JupyterLab Light"  # the user's own choice wins
    assert lab_settings.chart_template("JupyterLab Dark") == "plotly_dark"
    assert lab_settings.chart_template("JupyterLab Light") == "plotly_white"


def test_the_panels_charts_are_dark_on_a_dark_theme(tmp_path, monkeypatch):
    import plotly.io as pio

    from workbench.ui.monitor import RunMonitor
    from workbench.ui.runs_panel import RunsPanel

    dark_bg = pio.templates["plotly_dark"].layout.paper_bgcolor
    (tmp_path / "none").mkdir()
    monkeypatch.setenv("JUPYTERLAB_SETTINGS_DIR", str(tmp_path / "none"))  # no theme chosen: light
    assert RunMonitor().loss_fig.layout.template.layout.paper_bgcolor != dark_bg
    monkeypatch.setenv("JUPYTERLAB_SETTINGS_DIR", str(_dark_user_settings(tmp_path / "user")))
    monitor, panel = RunMonitor(), RunsPanel(str(tmp_path / "runs"))
    for fig in (*monitor.figures.values(), panel.compare_fig, panel.metrics_fig):
        assert fig.layout.template.layout.paper_bgcolor == dark_bg
