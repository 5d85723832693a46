"""The charts follow the JupyterLab theme the user chose."""

from __future__ import annotations

from workbench.ui import lab_settings

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
        '{"@jupyterlab/apputils-extension:themes": {"theme": "JupyterLab Dark"}}'
    )
    assert lab_settings.lab_theme(user, app) == "JupyterLab Dark"  # the environment's default
    user.mkdir()
    (user / "@jupyterlab" / "apputils-extension").mkdir(parents=True)
    (user / lab_settings.THEMES_SETTINGS).write_text('{"theme": "JupyterLab Light"}')
    assert lab_settings.lab_theme(user, app) == "JupyterLab Light"  # the user's own choice wins
    assert lab_settings.chart_template("JupyterLab Dark") == "plotly_dark"
    assert lab_settings.chart_template("JupyterLab Light") == "plotly_white"


def test_the_panels_charts_are_dark_on_a_dark_theme(tmp_path, monkeypatch):
    import plotly.io as pio

    from workbench.ui.monitor_panel import RunMonitor
    from workbench.ui.runs_panel import RunsPanel

    dark_bg = pio.templates["plotly_dark"].layout.paper_bgcolor
    (tmp_path / "none").mkdir()
    monkeypatch.setenv("JUPYTERLAB_SETTINGS_DIR", str(tmp_path / "none"))  # no theme chosen: light
    assert RunMonitor().charts.loss_fig.layout.template.layout.paper_bgcolor != dark_bg
    monkeypatch.setenv("JUPYTERLAB_SETTINGS_DIR", str(_dark_user_settings(tmp_path / "user")))
    monitor, panel = RunMonitor(), RunsPanel(str(tmp_path / "runs"))
    for fig in (*monitor.charts.figures.values(), panel.compare_fig, panel.metrics_fig):
        assert fig.layout.template.layout.paper_bgcolor == dark_bg
