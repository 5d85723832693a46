"""The panels without a browser: set values, click buttons, assert the config, the launched run and what is shown."""

import asyncio
import time

import yaml

from tests.conftest import SAMPLES
from workbench.cli.main import _resolved, build_parser
from workbench.events import Census, EventWriter, Memory, Overflow, RunFinished, RunStarted
from workbench.plan import DeviceSet
from workbench.ui.config_panel import ConfigPanel
from workbench.ui.monitor_panel import RunMonitor
from workbench.ui.plan_panel import PlanPanel
from workbench.ui.run_poller import MAX_REDRAWS_PER_S
from workbench.ui.runs_panel import RunsPanel, config_diff

from .run_logs import step_event


def test_config_panel_is_generated_from_the_schema():
    from workbench.config import RunConfig
    from workbench.config import leaf_fields as schema_leaves

    panel = ConfigPanel()
    assert set(panel.editors) == {p for p, _ in schema_leaves(RunConfig)}
    assert [t for t in panel.tabs.titles][:2] == ["model", "data"]
    assert panel.editors["precision.mode"].widget.options == ("auto", "fp32", "fp16", "bf16", "pure-bf16")
    assert panel.problems == [] and panel.config == RunConfig()  # the defaults validate: the sample data ships


def test_set_values_give_the_config_and_invalid_values_show_inline():
    panel = ConfigPanel()
    panel.set("lora.r", 8)
    panel.set("lora.target_modules", "q_proj, v_proj")
    panel.set("precision.mode", "fp16")
    panel.set("schedule.grad_accum_steps", 4)
    panel.set("data.eval", "")
    cfg = panel.config
    assert cfg.lora.r == 8 and cfg.lora.target_modules == ["q_proj", "v_proj"] and cfg.precision.mode == "fp16"
    assert cfg.schedule.grad_accum_steps == 4 and cfg.data.eval is None

    panel.set("lora.r", 0)
    panel.set("schedule.warmup_steps", "500")
    assert panel.config is None
    assert "greater than or equal to 1" in panel.editors["lora.r"].error.value
    assert "exceeds max_steps" in panel.editors["schedule.warmup_steps"].error.value
    assert "2 problem(s)" in panel.status.value
    panel.set("lora.r", 4)
    panel.set("schedule.warmup_steps", "")
    assert panel.config is not None and panel.editors["lora.r"].error.value == ""


def test_equivalent_cli_command_reproduces_the_config():
    panel = ConfigPanel()
    panel.set("lora.r", 8)
    panel.set("lora.target_modules", "[q_proj, v_proj]")
    panel.set("precision.mode", "bf16")
    panel.set("data.eval", "")
    panel.set("schedule.learning_rate", 0.001)
    import shlex

    argv = shlex.split(panel.cli_command.replace("\\\n", " "))
    assert argv[:2] == ["workbench", "train"]
    assert _resolved(build_parser().parse_args(argv[1:])) == panel.config


def test_load_and_save(tmp_path):
    panel = ConfigPanel()
    panel.set("lora.r", 12)
    assert panel.save(tmp_path / "c.yaml")
    assert yaml.safe_load((tmp_path / "c.yaml").read_text())["lora"]["r"] == 12
    other = ConfigPanel()
    (tmp_path / "partial.yaml").write_text("lora: {alpha: 7}\nschedule: {max_steps: 9}\n")
    cfg = other.load(tmp_path / "partial.yaml")
    assert cfg.lora.alpha == 7 and cfg.schedule.max_steps == 9 and cfg.lora.r == 16
    assert other.load(tmp_path / "c.yaml").lora.r == 12
    assert other.load(tmp_path / "missing.yaml") is None and "file not found" in other.file_message.value
    other.set("lora.r", -1)
    assert not other.save(tmp_path / "bad.yaml") and not (tmp_path / "bad.yaml").exists()


def test_data_preview_marks_trained_tokens_through_the_engines_loading():
    panel = ConfigPanel()
    panel.set("model.source", "tiny-glm4")
    preview = panel.preview.refresh()
    assert len(preview.examples) == 3 and preview.stats.examples >= 3  # counts of the whole file, 3 shown
    for tokens in preview.examples:
        trained = "".join(t for t, on in tokens if on)
        context = "".join(t for t, on in tokens if not on)
        assert 0 < len(trained) < len(trained + context) and "user" in context.lower() and trained.strip()
    assert "background:#c8e6c9" in panel.preview.output.value and "example 3" in panel.preview.output.value


def test_data_preview_stops_at_a_bad_row_as_the_run_would(tmp_path):
    good = (SAMPLES / "identity" / "train.jsonl").read_text().splitlines()[0]
    (tmp_path / "bad.jsonl").write_text(good + "\n" + "{not json\n")
    panel = ConfigPanel()
    panel.set("model.source", "tiny-glm4")
    panel.set("data.train", str(tmp_path / "bad.jsonl"))
    assert panel.config is not None and panel.preview.refresh() is None
    assert "bad.jsonl:2" in panel.preview.output.value and "not valid JSON" in panel.preview.output.value
    panel.set("data.skip_bad_rows", True)  # the engine's own switch: the preview then counts the row
    preview = panel.preview.refresh()
    assert (
        len(preview.examples) == 1
        and preview.stats.skipped_bad == 1
        and "1 bad row(s) skipped" in panel.preview.output.value
    )


def test_plan_panel_follows_the_config():
    panel = ConfigPanel()
    panel.set("model.source", "tiny-glm4")
    plan = PlanPanel(panel.config)
    panel.on_change(plan.set_config)
    assert plan.plan is not None and plan.plan.fits and "fits" in plan.output.value
    plan.devices_text.value = "1x0.001GiB"
    assert not plan.plan.fits and "does not fit" in plan.output.value
    plan.devices_text.value = "2x24GiB"
    before = plan.plan.gpu_total
    panel.set("schedule.micro_batch_size", 32)
    assert plan.plan.gpu_total > before  # activations grow with the batch
    panel.set("lora.r", 0)
    assert plan.plan is None and "problems" in plan.output.value


def test_plan_panel_reads_the_sharding_section():
    panel = ConfigPanel()
    panel.set("model.source", "tiny-glm4")
    panel.set("sharding.strategy", "fsdp")
    panel.set("sharding.nproc_per_node", 2)
    plan = PlanPanel(panel.config, DeviceSet.parse("2x24GiB"))
    assert plan.plan.setting.strategy == "fsdp" and plan.plan.setting.world_size == 2 and plan.plan.setting.stage == 3
    assert plan.what_if.layout.display == "none"


def _write_synthetic_run(run_dir, lora_r=4):
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text('{"model": {"source": "tiny-glm4"}}')
    with EventWriter(run_dir / "events.jsonl") as w:
        w.emit(
            RunStarted(
                run_dir=str(run_dir),
                config={"model": {"source": "tiny-glm4"}, "lora": {"r": lora_r}},
                hardware={},
                versions={},
                precision={"mode": "fp16", "use_grad_scaler": True},
                total_steps=4,
            )
        )
        w.emit(
            Census(
                step=0,
                rows=[
                    {"group": "decoder", "dtype": "float16", "trainable": False, "count": 100, "bytes": 200},
                    {"group": "lora", "dtype": "float32", "trainable": True, "count": 8, "bytes": 32},
                ],
                totals={"float16": 100, "float32": 8},
            )
        )
        w.emit(
            Memory(
                step=0,
                devices=[{"device": "cuda:0", "allocated": 2**20, "reserved": 2**21, "peak": 2**21}],
                host_rss=2**30,
                params_bytes=2**20,
                grads_bytes=0,
                optimizer_bytes=0,
            )
        )
        w.emit(Overflow(step=1, scale_before=65536.0, scale_after=32768.0, nonfinite_params=["x"], nonfinite_count=1))
        for n, skipped in ((1, True), (2, False), (3, False), (4, False)):
            w.emit(
                step_event(
                    n,
                    loss=3.0 - 0.5 * n,
                    grad_norm=float("nan") if skipped else 1.0,
                    loss_scale=32768.0,
                    skipped=skipped,
                    eta_s=4.0 - n,
                )
            )
        # the closing memory event: gradients as the engine records them, at the last step's peak
        w.emit(
            Memory(
                step=4,
                devices=[{"device": "cuda:0", "allocated": 2**20, "reserved": 2**21, "peak": 2**21}],
                host_rss=2**30,
                params_bytes=2**20,
                grads_bytes=2**19,
                optimizer_bytes=2**20,
            )
        )
        w.emit_raw = None
    with open(run_dir / "events.jsonl", "a") as fh:
        fh.write(
            '{"type": "diagnosis", "v": 1, "time": 1.0, "rank": 0, "step": 3, "cause": "loss-scale collapse", '
            '"fix": "switch to bf16", "module": "lm_head", "kind": "scale_collapse"}\n'
        )
    with EventWriter(run_dir / "events.jsonl") as w:
        w.emit(RunFinished(step=4, final_loss=1.0, adapter_path=None, wall_s=4.0))


def test_monitor_shows_every_chart_and_alert_of_a_run(tmp_path):
    _write_synthetic_run(tmp_path / "runs" / "synthetic")
    m = RunMonitor()
    m.attach(tmp_path / "runs" / "synthetic")
    m.wait_sync(10)
    assert list(m.charts.loss_fig.data[0].x) == [1, 2, 3, 4]
    assert (
        tuple(m.charts.loss_fig.layout.xaxis.range) == (0, 4) == tuple(m.charts.memory_fig.layout.xaxis.range)
    )  # the whole run
    assert list(m.charts.scale_fig.data[1].x) == [1] and m.charts.scale_fig.layout.yaxis.type == "log"
    assert list(m.charts.grad_fig.data[0].y) == [None, 1.0, 1.0, 1.0]
    assert {t.name for t in m.charts.memory_fig.data} == {
        "cuda:0 allocated",
        "cuda:0 reserved",
        "cuda:0 peak",
        "rank0 host RSS",
    }
    assert list(m.charts.breakdown_fig.data[0].y) == [1.0, 0.5, 1.0, 0.0]  # MiB: weights, gradients, optimizer, master
    assert m.charts.breakdown_fig.layout.title.text == "model state at the step's peak (rank 0)"
    census = {t.name: dict(zip(t.x, t.y)) for t in m.charts.census_fig.data}
    assert census == {"float16": {"decoder": 100, "lora (trained)": 0}, "float32": {"decoder": 0, "lora (trained)": 8}}
    assert "wb-alert-diagnosis" in m.charts.alerts.value and "switch to bf16" in m.charts.alerts.value
    assert "wb-alert-overflow" in m.charts.alerts.value and "run finished" in m.charts.alerts.value
    assert m.progress.value == 1.0 and "finished" in m.status.value and m.stop_button.disabled


def test_monitor_redraws_census_and_alerts_only_when_they_change(tmp_path):
    for name in ("a", "b"):
        _write_synthetic_run(tmp_path / "runs" / name)
    m = RunMonitor()
    m.attach(tmp_path / "runs" / "a")
    m.wait_sync(10)
    assert "wb-census" in m.charts.census_table.value and "run finished" in m.charts.alerts.value
    m.charts.census_table.value = m.charts.alerts.value = "untouched"
    m.state.version += 1
    m.poller.redraw()  # neither the census nor the alerts changed: both are left as drawn
    assert m.charts.census_table.value == m.charts.alerts.value == "untouched"
    m.state.apply(
        [
            Census(
                step=5,
                rows=[{"group": "lm_head", "dtype": "bfloat16", "trainable": False, "count": 3, "bytes": 6}],
                totals={"bfloat16": 3},
            )
        ]
    )
    m.poller.redraw()  # a new census: redrawn; still no new alert
    assert "lm_head" in m.charts.census_table.value and "(step 5)" in m.charts.census_fig.layout.title.text
    assert m.charts.alerts.value == "untouched"
    m.state.apply([{"type": "diagnosis", "step": 5, "cause": "something new"}])
    m.poller.redraw()
    assert "something new" in m.charts.alerts.value and "run finished" in m.charts.alerts.value
    m.charts.census_table.value = m.charts.alerts.value = "untouched"
    m.attach(tmp_path / "runs" / "b")  # a new run always draws
    m.wait_sync(10)
    assert "wb-census" in m.charts.census_table.value and "run finished" in m.charts.alerts.value
    assert {t.name for t in m.charts.census_fig.data} == {"float16", "float32"}


def test_workbench_launch_watch_and_chat_compare(make_cfg):
    """The quickstart path without a browser: Launch button -> live charts -> adapter served -> two answers."""
    from workbench.serve import start_server
    from workbench.ui import Workbench

    cfg = make_cfg(
        **{
            "schedule.max_steps": 4,
            "output.memory_every": 2,
            "schedule.eval_loss_every": 0,
            "data.eval": str(SAMPLES / "identity" / "heldout.jsonl"),
        }
    )
    with start_server("tiny-glm4", default_max_tokens=6) as srv:
        wb = Workbench(cfg, server=srv, max_tokens=6)
        assert wb.chat.models.options == ("tiny-glm4",) and wb.chat.max_tokens.value == 6
        assert wb.plan.plan is not None and wb.plan.plan.fits
        wb.monitor.launch_button.click()
        m = wb.monitor
        assert m.handle is not None and (m.handle.run_dir / "config.json").exists()
        state = m.wait_sync(180)
        assert state.status == "finished"
        assert (
            list(m.charts.loss_fig.data[0].x) == [1, 2, 3, 4] and len(m.charts.loss_fig.data[1].x) == 1
        )  # eval at the end
        assert m.charts.census_fig.data and "finished" in m.status.value and m.progress.value == 1.0
        assert m.poller.latencies and max(m.poller.latencies) < 5
        run_id = m.handle.run_dir.name
        assert run_id in srv.models() and set(wb.chat.models.value) == {"tiny-glm4", run_id}
        assert run_id in {r.name for r in wb.runs.runs}
        # the chat's export section, made before the run existed, lists it once it has finished (was: "no run ... yet")
        assert wb.chat.export_models.run.value == run_id and "yet" not in wb.chat.export_models.status.value
        wb.chat.prompt.value = "Who are you?"
        replies = wb.chat.ask()  # no event loop here: answers synchronously
        assert set(replies) == {"tiny-glm4", run_id}
        assert all(r.content and not r.error for r in replies.values())
        assert len(wb.chat.answers.children) == 2
        assert all(col.answer.value for col in wb.chat.answers.children)


def test_chat_panel_needs_two_to_three_models():
    from workbench.ui.chat_panel import ChatComparePanel

    panel = ChatComparePanel(base_url="http://127.0.0.1:9/v1", models=["a", "b", "c", "d"])
    panel.models.value = ("a",)
    panel.prompt.value = "hi"
    assert panel.ask() == {} and "pick 2 to 3" in panel.message.value
    panel.models.value = ("a", "b", "c", "d")
    assert panel.ask() == {}
    replies = panel.ask(models=["a", "b"])  # nothing listens on port 9: each column shows its error
    assert set(replies) == {"a", "b"} and all(r.error for r in replies.values())


def test_launch_refuses_an_invalid_config():
    m = RunMonitor(lambda: None)
    m.launch_button.click()
    assert m.handle is None and "problems" in m.message.value


def test_stop_button_and_async_polling(make_cfg):
    cfg = make_cfg(**{"schedule.max_steps": 2000})

    async def scenario():
        m = RunMonitor(lambda: cfg)
        m.t0 = time.monotonic()
        m.launch_button.click()
        assert m.poller._task is not None  # polled by an asyncio task on this loop
        while len(m.charts.loss_fig.data[0].x) < 2:
            await asyncio.sleep(0.1)
        assert not m.stop_button.disabled
        m.stop_button.click()
        state = await asyncio.wait_for(m.wait(), 120)
        return m, state

    m, state = asyncio.run(scenario())
    assert state.status == "stopped" and 2 <= state.step < 2000
    elapsed = time.monotonic() - m.t0
    # throttled: MAX_REDRAWS_PER_S over the run's life, plus the few forced ones (launch, stop, the end)
    assert 2 <= m.poller.redraws <= MAX_REDRAWS_PER_S * elapsed + 5, (m.poller.redraws, elapsed)


def test_runs_panel_lists_compares_and_attaches(tmp_path):
    for name, r in (("a", 4), ("b", 8)):
        _write_synthetic_run(tmp_path / "runs" / name, lora_r=r)
    m = RunMonitor()
    panel = RunsPanel(str(tmp_path / "runs"), monitor=m)
    assert panel.select.options == ("a", "b") and "finished" in panel.table.value
    panel.select.value = ("a", "b")
    diff = panel.compare()
    assert [t.name for t in panel.compare_fig.data] == ["a", "b"]
    # the runs' configurations as they started: the one field that differs, shown in the diff table
    assert diff == {"lora.r": {"a": 4, "b": 8}}
    assert "<td>lora.r</td><td>4</td><td>8</td>" in panel.diff.value and "model.source" not in panel.diff.value
    panel.attach_button.click()
    assert m.state.run_dir.endswith("a") and m.state.status == "finished"
    assert config_diff({"a": {"lora": {"r": 4}, "x": 1}, "b": {"lora": {"r": 8}, "x": 1}}) == {
        "lora.r": {"a": 4, "b": 8}
    }


# ---- layout and empty states (issue #14.5) ---------------------------------------------------------------
def _write_bf16_run(run_dir, steps=3):
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text("{}")
    with EventWriter(run_dir / "events.jsonl") as w:
        w.emit(
            RunStarted(
                run_dir=str(run_dir),
                config={"model": {"source": "tiny-glm4"}},
                hardware={},
                versions={},
                precision={"mode": "bf16", "use_grad_scaler": False},
                total_steps=steps,
            )
        )
        for n in range(1, steps + 1):
            w.emit(step_event(n, loss=2.0, eta_s=0.0))
        w.emit(RunFinished(step=steps, final_loss=2.0, adapter_path=None, wall_s=1.0))


def test_monitor_lays_its_charts_in_a_grid_of_readable_columns():
    from workbench.ui.monitor_charts import CHART_WIDTH_PX

    m = RunMonitor()
    assert CHART_WIDTH_PX >= 420 and {f.layout.width for f in m.charts.figures.values()} == {CHART_WIDTH_PX}
    # as many columns as fit: 2 on a ~1000 px notebook, 1 on a narrow one (the browser test measures it)
    assert m.charts.grid.layout.grid_template_columns == f"repeat(auto-fill, {CHART_WIDTH_PX + 10}px)"
    assert (
        len(m.charts.grid.children) == len(m.charts.figures) + 2
    )  # the charts, the census table, GRPO's samples table
    # before a run: every chart says it waits, no bare axes
    for fig in m.charts.figures.values():
        assert fig.layout.annotations[0].visible and fig.layout.annotations[0].text.startswith("waiting")
        assert fig.layout.xaxis.visible is False


def test_monitor_says_there_is_no_loss_scaling_instead_of_an_empty_chart(tmp_path):
    _write_bf16_run(tmp_path / "runs" / "bf16")
    m = RunMonitor()
    m.attach(tmp_path / "runs" / "bf16")
    m.wait_sync(10)
    assert m.charts.figure_boxes["loss_scale"].layout.display == "none" and m.charts.scale_note.layout.display is None
    assert "no loss scaling in bf16" in m.charts.scale_note.value
    assert (
        not m.charts.loss_fig.layout.annotations[0].visible and m.charts.loss_fig.layout.xaxis.visible
    )  # data: axes back
    assert m.charts.census_fig.layout.annotations[0].visible  # this run logged no census: that chart still waits

    _write_synthetic_run(tmp_path / "runs" / "fp16")  # an fp16 run on the same monitor: the chart comes back
    m.attach(tmp_path / "runs" / "fp16")
    m.wait_sync(10)
    assert m.charts.figure_boxes["loss_scale"].layout.display is None and m.charts.scale_note.layout.display == "none"
    assert list(m.charts.scale_fig.data[0].y) == [32768.0] * 4 and not m.charts.scale_fig.layout.annotations[0].visible
    assert "1 overflow(s)" in m.charts.scale_fig.layout.title.text


def test_runs_panel_shows_no_chart_until_runs_are_compared(tmp_path):
    for name in ("a", "b"):
        _write_synthetic_run(tmp_path / "runs" / name)
    (tmp_path / "runs" / "empty").mkdir()
    (tmp_path / "runs" / "empty" / "config.json").write_text("{}")
    (tmp_path / "runs" / "empty" / "events.jsonl").write_text("")
    panel = RunsPanel(str(tmp_path / "runs"))
    assert panel.compare_box.layout.display == "none" and not panel.compare_fig.data
    assert [(r.name, r.step, r.loss) for r in panel.runs][:2] == [("a", 4, 1.0), ("b", 4, 1.0)]
    panel.compare(["a"])
    assert "two or more" in panel.message.value and panel.compare_box.layout.display == "none"
    panel.compare(["a", "b"])
    assert panel.compare_box.layout.display is None and [t.name for t in panel.compare_fig.data] == ["a", "b"]
    panel.compare(["a"])  # back to one: the old curves do not stay up
    assert panel.compare_box.layout.display == "none" and not panel.compare_fig.data


def test_config_panel_file_box_starts_empty_and_says_what_to_type(tmp_path):
    panel = ConfigPanel()
    assert panel.path_text.value == "" and panel.path_text.placeholder.startswith("run.yaml")
    assert panel.load(panel.path_text.value) is None and "type the path" in panel.file_message.value
    assert not panel.save("") and "type a file name" in panel.file_message.value
    panel.path_text.value = str(tmp_path / "run.yaml")
    panel.set("lora.r", 12)
    panel.save_button.click()
    assert (tmp_path / "run.yaml").exists() and "saved" in panel.file_message.value
    panel.set("lora.r", 4)
    panel.load_button.click()  # the widgets show what was loaded
    assert panel.editors["lora.r"].widget.value == 12 and panel.config.lora.r == 12


def test_config_panel_loads_a_deepspeed_json_and_shows_its_warnings(tmp_path):
    panel = ConfigPanel()
    panel.deepspeed_text.value = str(SAMPLES / "deepspeed" / "seed000_ds_config.json")
    panel.deepspeed_button.click()
    assert panel.editors["precision.mode"].widget.value == "fp16"
    assert panel.editors["sharding.deepspeed_stage"].widget.value == 3
    assert panel.editors["schedule.grad_accum_steps"].widget.value == 16
    assert (
        "wb-deepspeed-warning" in panel.deepspeed_message.value and "fp16.loss_scale" in panel.deepspeed_message.value
    )
    assert "--precision.mode fp16" in panel.cli.value
    (tmp_path / "bad.json").write_text('{"fp16": ')
    panel.deepspeed_text.value = str(tmp_path / "bad.json")
    panel.deepspeed_button.click()
    assert "not valid JSON" in panel.deepspeed_message.value and "bad.json" in panel.deepspeed_message.value
    assert panel.editors["precision.mode"].widget.value == "fp16"  # a bad file changes nothing


def test_config_panel_shows_a_loaded_value_its_widget_cannot_hold(tmp_path):
    (tmp_path / "c.yaml").write_text("lora: {r: abc}\nprecision: {mode: fp8}\n")
    panel = ConfigPanel()
    panel.load(tmp_path / "c.yaml")
    assert panel.config is None and "valid integer" in panel.editors["lora.r"].error.value
    assert "fp8" in panel.editors["precision.mode"].error.value and "2 problem(s)" in panel.status.value


def test_chat_thinking_starts_on_the_template_default_and_passes_the_choice():
    """Through the real request path: two scripted servers (tests/serve/scripted.py) whose template opens a think
    block unless enable_thinking is false; their answers show which choice reached them."""
    from tests.serve.scripted import scripted_model
    from workbench.serve import start_server
    from workbench.ui import chat_panel

    with (
        start_server("a", loaded=scripted_model(), max_batch=2) as a,
        start_server("b", loaded=scripted_model(), max_batch=2) as b,
    ):
        panel = chat_panel.ChatComparePanel(server=a, models=["a", "b"])
        panel.endpoints["b"] = b
        assert panel.thinking.label == "template default" and panel.thinking.index == 0
        expected = {"template default": ("abc", "XYZ"), "on": ("abc", "XYZ"), "off": ("", "Q")}

        async def every_choice():  # one event loop, as in a kernel
            out = {}
            for choice in expected:
                panel.thinking.value = choice
                out[choice] = await panel.ask_async("hi", ["a", "b"])
            return out

        for choice, replies in asyncio.run(every_choice()).items():
            assert set(replies) == {"a", "b"}
            got = {(r.error, r.reasoning, r.content) for r in replies.values()}
            assert got == {(None, *expected[choice])}, (choice, replies)


def test_config_panel_starts_from_a_recipe():
    from workbench.config.recipes import recipe_names

    panel = ConfigPanel()
    assert [v for _, v in panel.recipe_choice.options][1:] == recipe_names()
    panel.recipe_button.click()  # nothing picked yet
    assert "pick a recipe first" in panel.recipe_message.value
    panel.recipe_choice.value = "autoglm-phone-9b-lora-2x4090"
    panel.recipe_button.click()
    assert panel.editors["model.source"].widget.value == "autoglm-phone-9b"
    assert panel.editors["model.gradient_checkpointing"].widget.value is True
    assert "needs: 2 CUDA GPUs with &gt;= 23.8 GiB each" in panel.recipe_message.value
    assert "--sharding.strategy fsdp" in panel.cli_command
    assert "starts from the model recipe" not in panel.recipe_message.value
    panel.recipe_choice.value = "grpo-phone-tasks-tiny-glm4v"  # GRPO from an SFT model: which model to give is said
    panel.recipe_button.click()
    assert (
        "starts from the model recipe screenshots-to-actions-tiny-glm4v trains</b>: set model.source"
        in panel.recipe_message.value
    )
