"""The JupyterLab extension in a real browser, installed as the README's set-up installs it.

JupyterLab + Debian Chromium (playwright): the side panel and the status-bar item show; a run launched from a
notebook appears in the side panel and its step advances without a page reload; Stop in the side panel stops it
(status stopped, a checkpoint on disk); the events view, the monitor and compare notebooks, the launcher's commands; screenshots in the light and dark
themes under ``$WORKBENCH_TEST_ARTIFACTS/browser`` (default ``test-artifacts/browser``), and the event -> side-panel
latency (a figure, printed and saved as lab-extension-latency.json; never asserted).

    python -m pytest -m browser tests/extensions/jupyterlab/test_lab_browser.py
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbformat import v4

from tests.conftest import tiny_run_overrides
from tests.ui.test_browser import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    require_browser,
    running_jupyter_lab,
    wait_accepting_dialogs,
)

pytestmark = pytest.mark.browser
BUILT = Path(__file__).resolve().parents[3] / "extensions" / "jupyterlab" / "workbench_jupyterlab" / "labextension"


def _launch_notebook(root: Path) -> None:
    """A notebook that launches a long tiny-GLM-4 run in a worker process (the side panel's Stop ends it)."""
    overrides = tiny_run_overrides(root / "runs", **{"schedule.max_steps": 3000, "checkpointing.every_steps": 0})
    overrides["output.runs_dir"] = "runs"
    nb = v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        v4.new_code_cell(
            f"from workbench import launch\nfrom workbench.config import load_config\n\n"
            f"handle = launch(load_config(None, {overrides!r}))\nprint('launched', handle.run_dir)"
        )
    ]
    nbformat.write(nb, root / "launch.ipynb")


def _installed_like_the_setup() -> None:
    """The extension JupyterLab loads is the one the set-up installed in this venv, and it is the current build."""
    installed = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "workbench-jupyterlab" / "package.json"
    assert installed.is_file(), (
        f"no {installed}: run `bash scripts/setup.sh --test` (it installs extensions/jupyterlab)"
    )
    current = json.loads((BUILT / "package.json").read_text())["workbench"]
    assert json.loads(installed.read_text()).get("workbench") == current, (
        f"{installed} is an older build than {BUILT}: re-run `bash scripts/setup.sh --test`"
    )
    config = Path(sys.prefix) / "etc" / "jupyter" / "jupyter_server_config.d" / "workbench_jupyterlab.json"
    assert json.loads(config.read_text())["ServerApp"]["jpserver_extensions"]["workbench_jupyterlab"] is True


def _report_latency(seen: list, events_path: Path) -> dict:
    """Each step's time from its event (written by the worker) to the first side-panel card showing it."""
    steps = [e for e in map(json.loads, events_path.read_text().splitlines()) if e["type"] == "step"]
    latencies = sorted(
        min(t for t, s in seen if s >= e["step"]) - e["time"]
        for e in steps
        if any(s >= e["step"] for _, s in seen) and e["time"] >= seen[0][0]
    )
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))]  # noqa: E731
    figures = (
        {
            "steps": len(latencies),
            "p50_s": round(pick(0.5), 3),
            "p95_s": round(pick(0.95), 3),
            "max_s": round(latencies[-1], 3),
        }
        if latencies
        else {"steps": 0}
    )
    print(f"event -> side panel in the browser: {figures}")
    (ARTIFACTS / "lab-extension-latency.json").write_text(json.dumps(figures) + "\n")
    return figures


def test_side_panel_follows_and_stops_a_run_launched_from_a_notebook(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    require_browser()
    _installed_like_the_setup()
    root = tmp_path / "lab"
    root.mkdir()
    _launch_notebook(root)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    # expose_app_in_browser: the test switches themes and opens the launcher through JupyterLab's own commands
    with (
        running_jupyter_lab(tmp_path, root, ("--LabApp.expose_app_in_browser=True",)) as (url, token),
        sync_playwright() as pw,
    ):
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.set_default_timeout(60_000)
        shot = lambda name: page.screenshot(path=str(ARTIFACTS / f"lab-extension-{name}.png"))  # noqa: E731
        # started, not awaited (a command may wait on a dialog the test answers next)
        command = lambda cmd, args=None: page.evaluate(  # noqa: E731
            "([cmd, args]) => { window.jupyterapp.commands.execute(cmd, args || {}); }", [cmd, args]
        )
        try:
            page.goto(f"{url}/lab/tree/launch.ipynb?token={token}")
            page.locator(".jp-Notebook").first.wait_for()
            # the status-bar item is there before any run
            status = page.locator(".wb-RunsStatus")
            expect(status).to_have_text("Workbench: no run going")
            time.sleep(2)  # let the kernel session settle before using the menu
            wait_accepting_dialogs(page, ".jp-Notebook", 10)
            page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
            page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
            # a click on the status-bar item opens the side panel
            status.click()
            panel = page.locator(".wb-RunsPanel")
            expect(panel).to_be_visible()
            # the run launched from the notebook shows up in the panel, running
            wait_accepting_dialogs(page, ".wb-run[data-status=running]", 120)  # JupyterLab may ask for the kernel
            card = panel.locator(".wb-run").first
            name = card.get_attribute("data-run")
            card = panel.locator(f'.wb-run[data-run="{name}"]')  # this run's card, wherever later runs put it
            run_dir = root / "runs" / name
            # every change of the card's step, as the page saw it: the browser end of event -> side panel
            page.evaluate("""() => {
                window.wbSeen = [];
                const list = document.querySelector('.wb-RunsPanel-list');
                const note = () => { const c = list.querySelector('.wb-run');
                    if (c) window.wbSeen.push([Date.now() / 1000, Number(c.dataset.step)]); };
                new MutationObserver(note).observe(list, {attributes: true, subtree: true, childList: true,
                                                          attributeFilter: ['data-step']});
                note();
            }""")
            # its step advances without a reload (the page's own object survives: no navigation happened)
            page.evaluate("() => { window.wbNoReload = true; }")
            first = int(card.get_attribute("data-step"))
            page.wait_for_function(
                f"() => Number(document.querySelector('.wb-run').dataset.step) >= {first + 5}", timeout=120_000
            )
            assert page.evaluate("() => window.wbNoReload") is True
            expect(status).to_contain_text(re.compile(rf"Workbench {re.escape(name)}: step \d+/3000 · loss \d"))
            assert card.locator(".wb-sparkline polyline").count() == 1
            expect(card.locator(".wb-scale .wb-metric-value")).to_have_text("none")  # fp32: no loss scaling
            time.sleep(3)  # a few more steps for the latency figures
            shot("light-running")

            # the dark theme: the panel follows JupyterLab's theme variables
            command("apputils:change-theme", {"theme": "JupyterLab Dark"})
            page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'")
            time.sleep(1)
            background = page.evaluate(
                "() => getComputedStyle(document.querySelector('.wb-RunsPanel')).backgroundColor"
            )
            rgb = [int(v) for v in re.findall(r"\d+", background)[:3]]
            assert sum(rgb) < 3 * 100, f"the side panel is {background} in the dark theme"
            shot("dark-running")

            # Stop from the side panel (confirmed in JupyterLab's dialog): the run stops and leaves a checkpoint
            card.locator(".wb-stop").click()
            page.locator(".jp-Dialog .jp-mod-accept").click()
            expect(card).to_have_attribute("data-status", "stopped", timeout=120_000)
            expect(card.locator(".wb-stop")).to_be_hidden()
            expect(status).to_have_text("Workbench: no run going")
            events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
            end = events[-1]
            assert end["type"] == "run_finished" and end["stopped"], end
            saved = [e for e in events if e["type"] == "checkpoint" and e["kind"] == "resumable"]
            # (the path as the worker wrote it: relative to its working directory, the notebook's folder)
            assert saved and saved[-1]["step"] == end["step"] and (root / saved[-1]["path"]).is_dir()
            expect(card.locator(".wb-step .wb-metric-value")).to_have_text(f"{end['step']}/3000")
            _report_latency(page.evaluate("() => window.wbSeen"), run_dir / "events.jsonl")

            # the run's events, in a main-area view that read the log to its end
            card.locator(".wb-events").click()
            view = page.locator(".wb-EventsView")
            expect(view.locator(".wb-event-run_finished")).to_have_count(1)
            expect(view.locator(".wb-EventsView-state")).to_contain_text("the run is stopped")
            shot("dark-stopped-events")

            # Monitor: a notebook with the run's monitor attached opens and runs (the stopped run's whole log drawn)
            card.locator(".wb-monitor").click()
            wait_accepting_dialogs(page, ".wb-monitor-panel", 120)
            expect(page.locator(".wb-monitor-panel .wb-run-status").first).to_contain_text("stopped", timeout=120_000)
            assert (root / f"monitor-{name}.ipynb").is_file()
            # its loss chart drawn, and seen: plotly's layers above the traces stay transparent in the dark theme
            loss_plot = page.locator(".wb-monitor-panel .wb-fig-loss .js-plotly-plot").first
            drawn = "p => (p.querySelector('.scatterlayer .js-line')?.getAttribute('d') || '').length > 20"
            page.wait_for_function(drawn, arg=loss_plot.element_handle(timeout=60_000), timeout=60_000)
            layers = loss_plot.evaluate(
                "p => [...p.querySelectorAll('.main-svg')].map(s => getComputedStyle(s).backgroundColor)"
            )
            assert len(layers) > 1 and all(c == "rgba(0, 0, 0, 0)" for c in layers[1:]), (
                f"layers cover traces: {layers}"
            )
            shot("dark-monitor-notebook")

            # Compare: a second (copied) run appears; tick both, Compare opens a notebook with both loss curves
            shutil.copytree(run_dir, root / "runs" / f"{name}-copy")
            copy = panel.locator(f'.wb-run[data-run="{name}-copy"]')
            expect(copy).to_have_attribute("data-status", "stopped")
            compare = panel.locator(".wb-compare")
            expect(compare).to_be_disabled()
            card.locator(".wb-run-pick").check()
            copy.locator(".wb-run-pick").check()
            expect(compare).to_have_text("Compare (2/2)")
            compare.click()
            wait_accepting_dialogs(page, ".wb-compare-chart .js-plotly-plot", 120)
            assert (root / f"compare-{name}-copy-vs-{name}.ipynb").is_file() or (
                root / f"compare-{name}-vs-{name}-copy.ipynb"
            ).is_file()
            shot("dark-compare-notebook")

            # the launcher's Workbench commands, in the light theme again; New fine-tune notebook opens the template
            command("apputils:change-theme", {"theme": "JupyterLab Light"})
            page.wait_for_function("() => document.body.dataset.jpThemeLight === 'true'")
            command("launcher:create")
            fine_tune = page.locator(".jp-LauncherCard", has_text="New fine-tune notebook")
            expect(page.locator(".jp-LauncherCard", has_text="Open Workbench dashboard")).to_be_visible()
            time.sleep(0.5)
            shot("light-launcher")
            fine_tune.click()
            expect(page.locator(".jp-Notebook", has_text='RUNS_DIR = "runs"')).to_be_visible()
            assert (root / "fine-tune.ipynb").is_file()
            shot("light-fine-tune-notebook")
        except BaseException:
            shot("failure")
            raise
        finally:
            for run in (root / "runs").glob("*"):  # never leave a 3000-step worker behind a failed assertion
                from workbench.runs import attach

                if attach(run).is_running():
                    attach(run).stop(timeout=60)
            browser.close()


if __name__ == "__main__":
    sys.exit(pytest.main(["-m", "browser", "-v", __file__]))


APPENDER = """
import os, sys, time
from workbench.bench.long_run import write_log
from pathlib import Path
run, step = Path(sys.argv[1]), int(sys.argv[2])
(run / "foreground.pid").write_text(str(os.getpid()))  # the run is going while this process appends to it
while True:
    write_log(run, 20, start=step)  # ~100 steps a second: far more than a real 9B fine-tune logs
    step += 20
    time.sleep(0.2)
"""


def test_the_monitor_and_the_side_panel_follow_a_growing_100k_step_log(tmp_path):
    """Issue 25: a 100,000-step log that keeps growing, followed by the monitor (in a notebook) and the side panel:
    the charts hold a bounded number of points and keep up with the newest step, the kernel redraws within its
    throttle, and the page stays responsive (animation frames keep coming)."""
    import subprocess

    from playwright.sync_api import sync_playwright

    from workbench.bench.long_run import write_log
    from workbench.ui.run_poller import MAX_REDRAWS_PER_S
    from workbench.ui.run_state import CHART_POINTS, RECENT_STEPS

    require_browser()
    root = tmp_path / "lab"
    run = root / "runs" / "long-100k"
    write_log(run, 100_000, total_steps=200_000)
    nb = v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        v4.new_code_cell(
            "from workbench.ui.monitor_panel import RunMonitor\n"
            "monitor = RunMonitor()\nmonitor.attach('runs/long-100k')\n"
            "monitor"
        )
    ]
    nbformat.write(nb, root / "long.ipynb")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    appender = subprocess.Popen([sys.executable, "-c", APPENDER, str(run), "100001"])
    bound = CHART_POINTS + RECENT_STEPS + 1
    # the loss trace as plotly.js holds it (_fullData: the arrays it draws, however the widget sent them)
    chart = """() => { const gd = document.querySelector('.wb-fig-loss .js-plotly-plot');
                       const t = gd && gd._fullData && gd._fullData[0];
                       const x = t && t.x;
                       return x && x.length ? [x.length, Number(x[x.length - 1])] : [0, 0]; }"""
    try:
        with running_jupyter_lab(tmp_path, root) as (url, token), sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(60_000)
            try:
                page.goto(f"{url}/lab/tree/long.ipynb?token={token}")
                page.locator(".jp-Notebook").first.wait_for()
                time.sleep(2)
                wait_accepting_dialogs(page, ".jp-Notebook", 10)
                prompt = page.locator(".jp-InputPrompt").first
                for _ in range(3):  # a click that lands while the notebook still settles is lost: run it again
                    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
                    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
                    deadline = time.monotonic() + 20
                    while time.monotonic() < deadline and prompt.inner_text().strip() == "[ ]:":
                        time.sleep(0.5)
                    if prompt.inner_text().strip() != "[ ]:":
                        break
                wait_accepting_dialogs(page, ".wb-fig-loss .js-plotly-plot", 240)
                page.wait_for_function(f"() => ({chart})()[0] > 0", timeout=120_000)
                page.locator(".wb-RunsStatus").click()  # the side panel
                card = page.locator('.wb-run[data-run="long-100k"]')
                card.wait_for(timeout=60_000)
                # in the page: the longest gap between two animation frames, and each redraw of the loss chart (a
                # change of its newest point) while both views follow the log
                page.evaluate(
                    """(chart) => { window.wbGap = 0; window.wbDraws = 0; let last = performance.now();
                    const frame = (t) => { window.wbGap = Math.max(window.wbGap, t - last); last = t;
                                           requestAnimationFrame(frame); };
                    requestAnimationFrame(frame);
                    const newest = eval(chart); let seen = newest()[1];
                    setInterval(() => { const n = newest()[1]; if (n !== seen) { seen = n; window.wbDraws += 1; } }, 20);
                    }""",
                    chart,
                )
                t0, samples = time.monotonic(), []
                for _ in range(15):
                    time.sleep(1)
                    t = time.monotonic()
                    points, newest = page.evaluate(chart)
                    samples.append(
                        {
                            "points": points,
                            "newest": newest,
                            "evaluate_s": round(time.monotonic() - t, 3),
                            "panel_step": int(card.get_attribute("data-step")),
                        }
                    )
                gap_ms, draws = page.evaluate("() => [window.wbGap, window.wbDraws]")
                elapsed = time.monotonic() - t0
                page.screenshot(path=str(ARTIFACTS / "lab-long-run.png"))
            except Exception:
                page.screenshot(path=str(ARTIFACTS / "lab-long-run-failed.png"))
                print("cell outputs:", page.locator(".jp-OutputArea").all_inner_texts())
                raise
            figures = {
                "samples": samples,
                "max_frame_gap_ms": round(gap_ms),
                "loss_chart_redraws": draws,
                "elapsed_s": round(elapsed, 2),
            }
            print(f"a growing 100k-step log in the browser: {figures}")
            (ARTIFACTS / "lab-long-run.json").write_text(json.dumps(figures) + "\n")
            browser.close()
    finally:
        appender.terminate()
        appender.wait(10)
    assert all(0 < s["points"] <= bound for s in samples), samples  # bounded however long the log
    assert samples[-1]["newest"] > samples[0]["newest"] > 100_000  # the chart follows the growing log
    assert samples[-1]["panel_step"] > samples[0]["panel_step"] > 100_000  # and so does the side panel
    assert 0 < draws <= MAX_REDRAWS_PER_S * elapsed + 2  # redrawn, within the throttle
    assert max(s["evaluate_s"] for s in samples) < 2.0 and gap_ms < 2000  # responsive: frames keep coming
