"""The extension's dark-theme rules for plotly charts keep every chart visible: only plotly's first <svg> layer (the
one holding the traces) gets the theme's background; the layers stacked above it stay transparent. (They once all
got it, and every chart of the dark monitor showed blank: the top layer covered the traces.) A plain page with
plotly.js and the extension's stylesheet, in Chromium: seconds, no JupyterLab."""

from __future__ import annotations

from pathlib import Path

import plotly
import plotly.graph_objects as go
import pytest

from tests.conftest import REPO
from tests.ui.test_browser import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, require_browser

pytestmark = pytest.mark.browser
CSS = REPO / "extensions" / "jupyterlab" / "style" / "base.css"
TRANSPARENT = "rgba(0, 0, 0, 0)"


def test_a_dark_chart_shows_its_traces(tmp_path):
    require_browser()
    from playwright.sync_api import sync_playwright

    (tmp_path / "plotly.min.js").write_bytes(
        (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_bytes()
    )
    (tmp_path / "base.css").write_bytes(CSS.read_bytes())
    fig = go.Figure(
        [go.Scatter(x=list(range(50)), y=[i * i for i in range(50)], mode="lines", line=dict(color="#00ff00"))],
        layout=dict(template="plotly_dark", width=440, height=280, title=dict(text="loss")),
    )
    (tmp_path / "page.html").write_text(
        "<html><head><script src='plotly.min.js'></script><link rel='stylesheet' href='base.css'><style>:root {"
        "--jp-layout-color0: #111111; --jp-layout-color1: #222222; --jp-ui-font-color1: #eeeeee;"
        "--jp-border-color2: #444444}</style></head><body data-jp-theme-light='false'><div class='jp-OutputArea'>"
        f"<div id='chart'></div></div><script>const f = {fig.to_json()}; Plotly.newPlot('chart', f.data, f.layout)"
        ".then(() => document.body.dataset.drawn = 'yes')</script></body></html>"
    )
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 480, "height": 300})
        page.goto((tmp_path / "page.html").as_uri())
        page.wait_for_function("() => document.body.dataset.drawn === 'yes'")
        layers = page.evaluate(
            "() => [...document.querySelectorAll('#chart .main-svg')].map(s => getComputedStyle(s).backgroundColor)"
        )
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "dark-chart-css.png"))
        # the green line is what the page shows where the chart is: some pixels of it reach the screen
        shot = page.screenshot(clip={"x": 60, "y": 60, "width": 360, "height": 180})
        browser.close()
    assert len(layers) >= 2 and layers[0] == "rgb(17, 17, 17)" and all(c == TRANSPARENT for c in layers[1:]), layers
    import io

    from PIL import Image

    pixels = Image.open(io.BytesIO(shot)).convert("RGB").getdata()
    assert sum(1 for r, g, b in pixels if g > 200 and r < 80 and b < 80) > 100, "the line is not on the screen"
