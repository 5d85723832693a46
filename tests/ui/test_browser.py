"""End to end in a real browser: JupyterLab + Debian Chromium driven by playwright.

The monitor attached to a run over an nf4 base shows the quantized weights in its census (``qlora-census.png``).

Opens notebooks/01_quickstart.ipynb (short parameters), runs all cells, checks that the panels render,
clicks Launch in the page, watches the loss chart gain points while the run goes, waits for the run to
finish, then asks the chat compare panel and waits for two answers. The recorder panel records a demonstration by
clicks on its phone screen and buttons; its rows are checked and trained on. Then every notebooks/*.ipynb (the run
parameters of tests/notebooks/nbrun.py) runs all its cells in the page: no traceback in any output, one screenshot
per notebook (``notebook-NAME.png``), and what each shows is checked on the copy the page saved
(tests/notebooks/checks.py: the only run of the notebooks in CI). Screenshots go to
``$WORKBENCH_TEST_ARTIFACTS/browser`` (default: ``test-artifacts/browser`` in the repository).

    python -m pytest -m browser tests/ui/test_browser.py     # or: python tests/ui/test_browser.py
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("WORKBENCH_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(os.environ.get("WORKBENCH_TEST_ARTIFACTS", REPO / "test-artifacts")) / "browser"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

pytestmark = pytest.mark.browser


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def require_browser() -> None:
    """A missing browser fails the test (it is opt-in: -m browser), never skips it."""
    missing = (
        f"no Chromium at {CHROMIUM} (apt-get install -y chromium)"
        if not Path(CHROMIUM).exists()
        else None
        if importlib.util.find_spec("playwright")
        else "no playwright (pip install -e '.[test]')"
    )
    if missing:
        pytest.fail(missing)


@contextlib.contextmanager
def running_jupyter_lab(tmp_path: Path, root: Path, extra_args: tuple = ()):
    """``jupyter lab`` serving ``root`` with this venv's kernels and extensions, fresh settings and no news prompt;
    yields (url, token)."""
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(tmp_path / "jcfg"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "jrt"),
        JUPYTER_DATA_DIR=str(tmp_path / "jdata"),
        TOKENIZERS_PARALLELISM="false",
    )
    # Notebook windowing detaches cells scrolled out of view and re-renders their widgets on return,
    # which can leave a plotly view blank: render every cell for the test.
    settings = tmp_path / "lab-settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    (settings / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
    # no "get notified about Jupyter news?" toast over the charts in the screenshots
    apputils = tmp_path / "lab-settings" / "@jupyterlab" / "apputils-extension"
    apputils.mkdir(parents=True)
    (apputils / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    env["JUPYTERLAB_SETTINGS_DIR"] = str(tmp_path / "lab-settings")
    # the venv's kernelspec and lab extensions (widgets, plotly/anywidget, workbench's) live under sys.prefix
    env["JUPYTER_PATH"] = str(Path(sys.prefix) / "share" / "jupyter")
    log = open(tmp_path / "jupyter.log", "wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter",
            "lab",
            "--no-browser",
            "--allow-root",
            "--ip=127.0.0.1",
            f"--port={port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}",
            *extra_args,
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=root,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2).read()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"jupyter lab did not start:\n{(tmp_path / 'jupyter.log').read_text()[-3000:]}")
            time.sleep(0.5)
    try:
        yield url, token
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


# Long enough that the loss chart is seen growing while the run goes, also on a loaded machine: with 40 steps (~20 s)
# and the browser tests in two workers, the first draw seen came at step 21 and the run ended before the next one
# (300 steps took 152 s beside a busy core: too long for what it shows)
QUICKSTART_STEPS = 120


@pytest.fixture
def jupyter_lab(tmp_path):
    require_browser()
    from tests.notebooks.nbrun import prepare

    root = tmp_path / "lab"
    prepare(
        "01_quickstart.ipynb",
        root,
        MODEL="tiny-glm4",
        MAX_STEPS=QUICKSTART_STEPS,
        MICRO_BATCH=2,
        MAX_LENGTH=64,
        MAX_TOKENS=8,
        AUTO_LAUNCH=False,
        WAIT_FOR_RUN=False,
    )
    with running_jupyter_lab(tmp_path, root) as (url, token):
        yield url, token, root


def wait_accepting_dialogs(page, ready, timeout_s: float = 180.0) -> None:
    """Wait until ``ready`` holds: a CSS selector in the page, or a function of the page that returns true.
    JupyterLab may ask which kernel to start (even with kernelspec metadata): accept the preselected kernel whenever
    that dialog shows."""
    holds = ready if callable(ready) else (lambda p: p.locator(ready).count() > 0)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        dialog = page.locator(".jp-Dialog .jp-mod-accept")
        if dialog.count() and dialog.first.is_visible():
            dialog.first.click()
        if holds(page):
            return
        time.sleep(0.25)
    what = ready if isinstance(ready, str) else ready.__name__
    raise TimeoutError(f"{what} did not appear in {timeout_s:.0f} s")


def kernel_idle(page) -> bool:
    """The status bar says the notebook's kernel is up and idle ("Python 3 (ipykernel) | Idle")."""
    status = page.evaluate("() => document.querySelector('#jp-main-statusbar')?.innerText || ''")
    return re.search(r"\|\s*Idle\b", status) is not None


def open_and_run_all(page, url: str, token: str, name: str) -> None:
    """Open notebook ``name`` in JupyterLab and start Run > Run All Cells."""
    # ?reset: a fresh workspace, not the tabs an earlier test left open (their hidden notebooks would match first)
    page.goto(f"{url}/lab/tree/{name}?reset&token={token}")
    page.locator(".jp-Notebook").first.wait_for()
    # Run All only once the kernel is up and idle: clicked while it was still starting (seen with the browser tests
    # in two workers loading the machine), nothing ran, or a late kernel dialog started a second kernel halfway
    # through (cells 1-5 in one, cell 6 in the other, as "In [1]" with a NameError)
    wait_accepting_dialogs(page, kernel_idle, 180)
    time.sleep(1)
    run_all(page)


def run_all(page) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()


def _loss_points(page) -> int:
    return page.evaluate("""() => {
        const gd = document.querySelector('.wb-fig-loss .js-plotly-plot');
        if (!gd || !gd.data || !gd.data.length || !gd.data[0].x) return -1;
        return gd.data[0].x.length;
    }""")


def _report_latency(draws: list, events_path: Path) -> None:
    """Print (and save next to the screenshots) each step's time from its event to the first redraw in the
    page that showed it: the whole path, kernel and browser. A figure, not a pass/fail threshold."""
    steps = [json.loads(line) for line in events_path.read_text().splitlines()]
    latencies = []
    for e in (e for e in steps if e["type"] == "step"):
        shown = [t for t, last in draws if last >= e["step"]]
        if shown:
            latencies.append(min(shown) - e["time"])
    latencies.sort()
    if latencies:
        pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))]  # noqa: E731
        figures = {
            "steps": len(latencies),
            "p50_s": round(pick(0.5), 3),
            "p95_s": round(pick(0.95), 3),
            "max_s": round(latencies[-1], 3),
        }
        print(f"event -> chart drawn in the browser: {figures}")
        (ARTIFACTS / "latency.json").write_text(json.dumps(figures) + "\n")


def test_quickstart_in_jupyterlab(jupyter_lab):
    from playwright.sync_api import expect, sync_playwright

    url, token, root = jupyter_lab
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shots = lambda name: page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=False)  # noqa: E731
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        # 1400 px: a laptop-sized window with JupyterLab's file browser open (a ~1000 px wide notebook)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(120_000)
        try:
            open_and_run_all(page, url, token, "01_quickstart.ipynb")

            # the panels render
            wait_accepting_dialogs(page, ".wb-config-panel", 180)
            for panel in (
                ".wb-config-panel",
                ".wb-plan-panel",
                ".wb-monitor-panel",
                ".wb-chat-panel",
                ".wb-runs-panel",
            ):
                page.locator(panel).first.wait_for(state="attached", timeout=180_000)
            expect(page.locator(".wb-config-status").first).to_contain_text("valid configuration", timeout=60_000)
            expect(page.locator(".wb-plan-verdict").first).to_be_visible(timeout=120_000)
            page.locator(".wb-fig-loss .js-plotly-plot").first.wait_for(state="attached")
            page.locator(".wb-config-panel").first.scroll_into_view_if_needed()
            shots("0-config")
            assert page.locator(".wb-config-panel input[placeholder^='run.yaml']").first.input_value() == ""
            # every section tab shows its whole name (in one row ipywidgets cut them to ~7 characters)
            labels = page.evaluate(
                "() => [...document.querySelectorAll('.wb-config-panel .lm-TabBar-tabLabel')]"
                ".map(e => [e.textContent, e.scrollWidth > e.clientWidth])"
            )
            assert len(labels) > 10 and not [name for name, cut in labels if cut], labels
            page.locator(".wb-monitor-panel").first.scroll_into_view_if_needed()
            shots("1-panels")
            # the monitor uses the notebook's width: more than one column, and every chart readable
            # (plotly sizes a chart to its cell after the first draw: on a loaded machine, seconds later; so the
            # layout is read until it settles, 60 s at most)
            settle = time.monotonic() + 60
            while True:
                grid = page.evaluate("""() => {
                    const grid = document.querySelector('.wb-monitor-grid');
                    const charts = [...grid.querySelectorAll('[class*=wb-fig-] .js-plotly-plot')]
                        .map(p => p.getBoundingClientRect().width).filter(w => w > 0);
                    return {columns: getComputedStyle(grid).gridTemplateColumns.split(' ').length, widths: charts};
                }""")
                overflow = page.evaluate("""() => [...document.querySelectorAll('[class*=wb-fig-]')].map(box => {
                    const plot = box.querySelector('.js-plotly-plot');
                    return plot ? plot.getBoundingClientRect().right - box.getBoundingClientRect().right : 0;
                }).filter(px => px > 1)""")
                if (not overflow and len(grid["widths"]) >= 6) or time.monotonic() > settle:
                    break
                time.sleep(0.5)
            assert grid["columns"] > 1, f"the monitor draws its charts in {grid['columns']} column at 1400 px"
            assert len(grid["widths"]) >= 6 and min(grid["widths"]) >= 420, f"chart widths {grid['widths']} px"
            assert not overflow, f"charts spill out of their grid cells by {overflow} px"

            # every redraw of the loss chart in the page, with its newest step: the browser side of event -> chart
            page.evaluate("""() => {
                const gd = document.querySelector('.wb-fig-loss .js-plotly-plot');
                window.wbDraws = [];
                gd.on('plotly_afterplot', () => {
                    const x = (gd.data[0] && gd.data[0].x) || [];
                    if (x.length) window.wbDraws.push([Date.now() / 1000, x[x.length - 1]]);
                });
            }""")

            # a run starts from the Launch button
            page.locator(".wb-launch").first.click()
            expect(page.locator(".wb-run-status").first).to_contain_text("running", timeout=120_000)

            # the loss chart gains points while the run goes
            deadline = time.monotonic() + 240
            first = -1
            while time.monotonic() < deadline:
                first = _loss_points(page)
                if first >= 1:
                    break
                time.sleep(0.2)
            assert first >= 1, "no loss point drawn"
            page.locator(".wb-fig-loss").first.scroll_into_view_if_needed()
            shots("2-running")
            grew = False
            while time.monotonic() < deadline:
                status = page.locator(".wb-run-status").first.inner_text()
                n = _loss_points(page)
                if n > first and "running" in status:
                    grew = True
                    break
                if "finished" in status:
                    break
                time.sleep(0.2)
            assert grew, f"the loss chart did not gain points while running (had {first})"
            shots("3-growing")

            expect(page.locator(".wb-run-status").first).to_contain_text("finished", timeout=300_000)
            assert _loss_points(page) == QUICKSTART_STEPS
            # what is drawn, not only what is held: the step axis spans the whole run
            shown = page.evaluate(
                "() => document.querySelector('.wb-fig-loss .js-plotly-plot')._fullLayout.xaxis.range"
            )
            assert shown[0] <= 1 and shown[1] >= QUICKSTART_STEPS, f"the chart shows {shown}, not 1..{QUICKSTART_STEPS}"
            shots("4-finished")
            # no empty loss-scale axes in a precision without a scaler (tiny-glm4 here: fp32 or bf16)
            expect(page.locator(".wb-no-loss-scaling").first).to_contain_text("no loss scaling in")
            page.locator(".wb-fig-census").first.scroll_into_view_if_needed()
            shots("4b-memory-and-census")
            _report_latency(page.evaluate("() => window.wbDraws"), next((root / "runs").iterdir()) / "events.jsonl")

            # chat compare: the finished run's adapter is served next to the base; ask both
            chat = page.locator(".wb-chat-panel").first
            chat.scroll_into_view_if_needed()
            expect(chat.locator("select[multiple] option")).to_have_count(2, timeout=60_000)
            chat.locator("textarea").fill("Who are you?")
            chat.locator(".wb-ask").click()
            columns = chat.locator(".wb-answer-column")
            expect(columns).to_have_count(2, timeout=60_000)
            for i in range(2):
                expect(columns.nth(i).locator(".wb-answer-status")).to_contain_text(
                    re.compile(r"\d s$"), timeout=180_000
                )
                assert columns.nth(i).locator(".wb-answer-text").inner_text().strip(), f"answer {i} is empty"
            chat.scroll_into_view_if_needed()
            shots("5-chat")
            runs = page.locator(".wb-runs-panel").first
            runs.scroll_into_view_if_needed()
            expect(runs.locator(".wb-runs")).to_contain_text("finished")
            assert not runs.locator(".wb-compare-chart").first.is_visible()  # nothing compared: no empty chart
            shots("6-runs")
        except BaseException:
            shots("failure")
            raise
        finally:
            browser.close()


@pytest.fixture
def lab_with_a_qlora_run(tmp_path):
    """JupyterLab over a folder holding a finished tiny-GLM-4 run over an nf4 base and a notebook that attaches the
    monitor to it."""
    import nbformat

    require_browser()
    from tests.conftest import tiny_run_overrides
    from workbench.config import load_config
    from workbench.training import train

    root = tmp_path / "lab"
    root.mkdir()
    train(
        load_config(
            None,
            tiny_run_overrides(
                root / "runs",
                **{
                    "quantization.base": "nf4",
                    "precision.mode": "bf16",
                    "schedule.max_steps": 4,
                    "output.run_name": "qlora",
                },
            ),
        )
    )
    nb = nbformat.v4.new_notebook(
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    )
    nb.cells = [
        nbformat.v4.new_code_cell(
            "from workbench.ui import RunMonitor\n\nmonitor = RunMonitor()\nmonitor.attach('runs/qlora')\nmonitor"
        )
    ]
    nbformat.write(nb, root / "qlora.ipynb")
    with running_jupyter_lab(tmp_path, root) as (url, token):
        yield url, token, root


def test_the_monitor_shows_a_quantized_base_in_its_census(lab_with_a_qlora_run):
    """The census of a run over an nf4 base: the base's weights are an nf4 bar and nf4 rows beside bfloat16 / float32
    (screenshot qlora-census.png)."""
    from playwright.sync_api import expect, sync_playwright

    url, token, _ = lab_with_a_qlora_run
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        page = laptop_page(pw)
        try:
            open_and_run_all(page, url, token, "qlora.ipynb")
            expect(page.locator(".wb-census").first).to_contain_text("nf4", timeout=180_000)
            traces = page.evaluate(
                "() => document.querySelector('.wb-fig-census .js-plotly-plot').data.map(t => t.name)"
            )
            assert "nf4" in traces and "bfloat16" in traces, traces
            page.locator(".wb-fig-census").first.scroll_into_view_if_needed()
            time.sleep(2)  # the chart finishes drawing
            page.screenshot(path=str(ARTIFACTS / "qlora-census.png"), full_page=False)
        except BaseException:
            page.screenshot(path=str(ARTIFACTS / "qlora-census-failure.png"), full_page=False)
            raise
        finally:
            page.context.browser.close()


def laptop_page(pw):
    """A page of a fresh Chromium, laptop-sized (1400 x 1000: JupyterLab with its file browser, a ~1000 px notebook)."""
    page = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS).new_page(
        viewport={"width": 1400, "height": 1000}
    )
    page.set_default_timeout(120_000)
    return page


def _recorder_notebook(root: Path) -> None:
    """A notebook showing the recorder panel on a simulated 1080x2400 phone, saving to root/demos."""
    import nbformat
    from nbformat import v4

    nb = v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        v4.new_code_cell(
            "from workbench.ui.recorder_panel import RecorderPanel\n\n"
            'panel = RecorderPanel("demos", size=(1080, 2400))\npanel'
        )
    ]
    nbformat.write(nb, root / "recorder.ipynb")


def _click_grid(page, x: int, y: int) -> None:
    """Click the recorder's phone screen at (x, y) of the 0-999 grid, as a person clicks it (playwright's position is
    relative to the element's padding box: the screenshot inside its border)."""
    screen = page.locator(".wb-phone-screen").first
    width, height = screen.evaluate("img => [img.clientWidth, img.clientHeight]")
    screen.click(position={"x": (x + 0.5) / 1000 * width, "y": (y + 0.5) / 1000 * height})


def test_a_demonstration_recorded_by_clicks_becomes_rows_the_linter_accepts_and_a_fine_tune_trains_on(tmp_path):
    """Issue 54: the recorder panel in JupyterLab, clicked as a person clicks it: the task typed, Start, a click on the
    Settings icon, a wrong row (Airplane mode) and Undo, a thought, a click on the Wi-Fi row, Finish with a message, Write rows. Each
    tap's point lands in the element clicked (its row's target box), the rows pass `workbench data check`, and a short
    fine-tune of the screenshot agent trains on them."""
    from playwright.sync_api import expect, sync_playwright

    from workbench.data.check import check_file

    require_browser()
    root = tmp_path / "lab"
    root.mkdir()
    _recorder_notebook(root)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    settings, wifi = (50, 260, 245, 365), (30, 150, 970, 235)  # on the 0-999 grid
    with running_jupyter_lab(tmp_path, root) as (url, token), sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(120_000)
        shot = lambda name: page.screenshot(path=str(ARTIFACTS / f"recorder-{name}.png"))  # noqa: E731
        try:
            open_and_run_all(page, url, token, "recorder.ipynb")
            panel = page.locator(".wb-recorder-panel").first
            panel.wait_for()
            page.locator(".wb-phone-screen").first.wait_for()
            wait_accepting_dialogs(page, kernel_idle, 120)  # clicks reach the kernel only while it is idle
            shot("0-ready")
            page.locator(".wb-recorder-task input").first.fill("Turn off Wi-Fi")
            page.locator(".wb-recorder-start").first.click()
            state = page.locator(".wb-recorder-state").first
            expect(state).to_contain_text("step 1 on System Home")
            steps = page.locator(".wb-recorder-steps").first
            _click_grid(page, 150, 300)  # the Settings icon
            expect(steps).to_contain_text("on Settings")
            expect(state).to_contain_text("step 2 on AndroidSystemSettings")  # the runtime's name for it
            _click_grid(page, 300, 380)  # Airplane mode: the wrong row
            expect(steps).to_contain_text("on Airplane mode")
            shot("1-wrong-row")
            page.locator(".wb-recorder-undo").first.click()
            expect(steps).not_to_contain_text("on Airplane mode")
            page.locator(".wb-recorder-thought textarea").first.fill("Wi-Fi is on; I tap its row to turn it off.")
            _click_grid(page, 600, 200)  # the Wi-Fi row
            expect(steps).to_contain_text("on Wi-Fi")
            shot("2-wifi-off")
            page.locator(".wb-recorder-message input").first.fill("Wi-Fi is off.")
            page.locator(".wb-recorder-finish").first.click()
            status = page.locator(".wb-recorder-status").first
            expect(status).to_contain_text(
                "saved demonstration 1 (toggle_setting/wifi-off, 3 steps; its task's checks hold)"
            )
            page.locator(".wb-recorder-rows").first.click()
            expect(status).to_contain_text("3 training rows from 1 demonstrations")
            panel.scroll_into_view_if_needed()
            shot("3-saved")
        except BaseException:
            shot("failure")
            raise
        finally:
            browser.close()
    rows_file = root / "demos" / "rows.jsonl"
    rows = [json.loads(line) for line in rows_file.read_text().splitlines()]
    answers = [r["messages"][-1]["content"] for r in rows]
    points = [tuple(map(int, re.search(r"element=\[(\d+),(\d+)\]", a).groups())) for a in answers[:2]]
    for point, box, row in zip(points, (settings, wifi), rows):  # each tap maps to the element clicked
        assert row["meta"]["target_box"] == list(box)
        assert box[0] <= point[0] <= box[2] and box[1] <= point[1] <= box[3]
    assert points[0] == (150, 300), points  # the grid point the page was clicked at
    assert answers[1].startswith("<think>Wi-Fi is on; I tap its row to turn it off.</think>")
    assert answers[2].endswith('\n<answer>finish(message="Wi-Fi is off.")')  # AutoGLM-Phone's form: no closing tag
    assert check_file(rows_file).problems == []
    # a fine-tune trains on them: the screenshot agent, every weight, a few steps
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "workbench",
            "train",
            "--model.source",
            "tiny-glm4v-agent",
            "--lora.enabled",
            "false",
            "--precision.mode",
            "fp32",
            "--data.train",
            str(rows_file),
            "--data.eval",
            "null",
            "--data.max_length",
            "4096",
            "--schedule.max_steps",
            "3",
            "--schedule.micro_batch_size",
            "3",
            "--schedule.eval_loss_every",
            "0",
            "--diagnosis.enabled",
            "false",
            "--output.runs_dir",
            str(tmp_path / "runs"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    events = [
        json.loads(line)
        for line in next((tmp_path / "runs").iterdir()).joinpath("events.jsonl").read_text().splitlines()
    ]
    assert [e["step"] for e in events if e["type"] == "step"] == [1, 2, 3]


@pytest.fixture(scope="module")
def lab_of_every_notebook(tmp_path_factory):
    """One JupyterLab serving a copy of every notebook with its run parameters (tests/notebooks/nbrun.py PARAMETERS)."""
    require_browser()
    from tests.notebooks.nbrun import notebook_names, parameters, prepare

    tmp = tmp_path_factory.mktemp("every-notebook")
    root = tmp / "lab"
    for name in notebook_names():
        try:
            prepare(name, root, **parameters(name, root))
        except LookupError:
            pass  # its test fails saying where its parameters go
    with running_jupyter_lab(tmp, root) as (url, token):
        yield url, token, root


def _executed(page) -> dict:
    """The code cells' prompts in the page: how many, how many still running or queued ([*]), how many not run."""
    return page.evaluate("""() => {
        const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')].map(p => p.innerText.trim());
        return {cells: prompts.length, busy: prompts.filter(p => p.includes('*')).length,
                unrun: prompts.filter(p => !/\\d/.test(p) && !p.includes('*')).length};
    }""")


def _outputs_on_disk(path: Path) -> tuple[list[str], int]:
    """(the tracebacks and stderr tracebacks in the saved notebook's outputs, its number of executed code cells)."""
    nb = json.loads(path.read_text())
    problems, executed = [], 0
    for i, cell in enumerate(c for c in nb["cells"] if c["cell_type"] == "code"):
        executed += cell.get("execution_count") is not None
        for out in cell.get("outputs", []):
            text = "".join(out.get("text", "")) if out.get("output_type") == "stream" else ""
            if out.get("output_type") == "error":
                problems.append(f"code cell {i + 1}: {out.get('ename')}: {out.get('evalue')}")
            elif "Traceback (most recent call last)" in text:
                problems.append(f"code cell {i + 1} printed a traceback: {text[-400:]}")
    return problems, executed


def _notebook_names() -> list[str]:
    from tests.notebooks.nbrun import notebook_names

    return notebook_names()


@pytest.mark.parametrize("name", _notebook_names())
def test_every_notebook_runs_in_jupyterlab_and_shows_what_it_says(lab_of_every_notebook, name):
    import nbformat
    from playwright.sync_api import sync_playwright

    from tests.notebooks.checks import check
    from tests.notebooks.nbrun import parameters

    parameters(name, Path("."))  # a notebook without run parameters fails here, saying where they go
    url, token, root = lab_of_every_notebook
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / f"notebook-{Path(name).stem}.png"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(120_000)
        try:
            open_and_run_all(page, url, token, name)
            deadline, state, clicked = time.monotonic() + 900, {}, time.monotonic()  # a hang guard (09: ~6 min in CI)
            while time.monotonic() < deadline:
                dialog = page.locator(".jp-Dialog .jp-mod-accept")
                if dialog.count() and dialog.first.is_visible():
                    dialog.first.click()
                state = _executed(page)
                if state.get("cells") and state["unrun"] == state["cells"] and time.monotonic() - clicked > 30:
                    # the Run All was lost (seen with two workers loading the machine): nothing queued, nothing ran
                    # after 30 s; ask again
                    run_all(page)
                    clicked = time.monotonic()
                if state.get("cells") and not state["busy"] and not state["unrun"]:
                    break
                failed = page.locator(".jp-OutputArea-output").filter(has_text="Traceback")
                if state.get("cells") and not state["busy"] and failed.count():
                    page.screenshot(path=str(shot), full_page=False)
                    pytest.fail(f"{name}: a cell raised, the rest did not run:\n{failed.first.inner_text()[-1500:]}")
                time.sleep(1)
            assert state.get("cells") and not state["busy"] and not state["unrun"], f"{name} did not finish: {state}"
            time.sleep(2)  # widgets and charts finish drawing
            page.screenshot(path=str(shot), full_page=False)
            shown = page.locator(".jp-OutputArea-output").all_inner_texts()
            assert not [t for t in shown if "Traceback" in t], f"{name}: a traceback in the page"
            page.keyboard.press("Control+s")  # the executed notebook, read back from disk
            time.sleep(2)
            problems, executed = _outputs_on_disk(root / name)
            assert executed == state["cells"] and not problems, f"{name}: {problems} ({executed}/{state['cells']} run)"
            check(name, nbformat.read(root / name, as_version=4), root)  # what the notebook shows, as the page saved it
        except BaseException:
            page.screenshot(path=str(ARTIFACTS / f"notebook-{Path(name).stem}-failure.png"), full_page=False)
            raise
        finally:
            browser.close()


if __name__ == "__main__":
    sys.exit(pytest.main(["-m", "browser", "-v", __file__]))
