"""The runs panel's Export section without a browser: pick a run and a target, export in a child process
(the kernel's loop keeps running meanwhile), read the manifest; a missed gate and bad input are shown as such."""

import asyncio

from tests.conftest import SAMPLES, tiny_run_overrides
from workbench.export import ParityGate
from workbench.ui.runs_panel import RunsPanel


def _tiny_run(runs_dir):
    from workbench.config import load_config
    from workbench.training import train

    cfg = load_config(
        None,
        tiny_run_overrides(
            runs_dir,
            **{
                "data.eval": str(SAMPLES / "identity" / "heldout.jsonl"),
                "output.run_name": "tuned",
                "schedule.max_steps": 2,
            },
        ),
    )
    return train(cfg).run_dir


def test_export_section_exports_a_run_and_shows_its_manifest_and_failures(tmp_path):
    run = _tiny_run(tmp_path / "runs")
    (tmp_path / "runs" / "no-adapter").mkdir()  # a run that never finished: not offered
    (tmp_path / "runs" / "no-adapter" / "config.json").write_text("{}")
    panel = RunsPanel(str(tmp_path / "runs"))
    section = panel.export
    assert section.run.options == ("tuned",) and section.run.value == "tuned"
    assert {
        "merged-float32",
        "merged-bfloat16",
        "merged-float16",
        "int8-dynamic",
        "int8-weight",
        "onnx",
        "onnx-int8",
        "gguf-f16",
        "gguf-q8_0",
        "gguf-q4_k_m",
        "gguf-lora",
    } == set(section.specs)
    assert "no exports of this run yet" in section.exports.value

    job = section.start(target="merged-bfloat16", max_examples=4)
    assert job is not None and section.export_button.disabled and not section.cancel_button.disabled
    state = section.wait_sync(300)
    assert state.status == "passed", state.message
    assert state.phase == 4 and section.progress.value == 1.0 and not section.export_button.disabled
    assert [line for line in state.log if "] " in line][-1].endswith("[4/4] reading it back and checking parity")
    manifest = state.manifest
    assert (
        manifest["options"]["dtype"] == "bfloat16" and (run / "exports" / "merged-bfloat16" / "manifest.json").is_file()
    )
    shown = section.result.value
    assert "parity passed" in shown and f"{manifest['sizes']['total_bytes'] / 1e6:.1f} MB" in shown
    assert f"{manifest['parity']['greedy_agreement']:.4f}" in shown and "merged-bfloat16" in section.exports.value

    # a gate the int8 export cannot meet: a failed export with its figures, and the loop kept running meanwhile
    async def export_while_ticking():
        ticks = 0

        async def tick():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.05)

        ticker = asyncio.get_running_loop().create_task(tick())
        job = section.start(target="int8-dynamic", max_examples=4, gate=ParityGate(0.0, 0.5, 1.0))
        assert not job.state.done  # start() returned at once; the loop polls the child
        state = await section.wait(300)
        ticker.cancel()
        return state, ticks

    state, ticks = asyncio.run(export_while_ticking())
    assert ticks > 2
    assert state.status == "failed" and state.path.name == "int8-dynamic.failed"
    assert state.manifest["parity"]["max_logit_diff"] > 0.0 and not state.manifest["parity"]["passed"]
    assert "FAILED its parity gate" in section.status.value and "FAILED its parity gate" in section.result.value
    assert (
        "max |logit diff|" in section.result.value
        and f"{state.manifest['parity']['max_logit_diff']:.3g}" in section.result.value
    )
    assert "failed parity" in section.exports.value and "merged-bfloat16" in section.exports.value

    # bad input (the export exists, overwrite off): the CLI's error, not a traceback
    state = section.start(target="merged-bfloat16").wait(300)
    section.poll_once()
    assert state.status == "error" and "exists" in state.message and "--force" in state.message
    assert "exists" in section.status.value and section.result.value == ""


def test_export_section_exports_the_screenshot_run_merged_and_int8(glm4v_screens_run):
    """The runs panel exports the GLM-4V screenshot run (notebook 05's), merged then int8: parity on its screenshot
    rows passes for both, and both are listed as the run's exports."""
    panel = RunsPanel(str(glm4v_screens_run.parent))
    section = panel.export
    assert section.run.options == ("screens",)
    for target in ("merged-float32", "int8-dynamic"):
        section.start(target=target, max_examples=4)
        state = section.wait_sync(300)
        assert state.status == "passed", state.message
        parity = state.manifest["parity"]
        assert state.manifest["family"] == "glm4v" and parity["passed"] and parity["examples"] == 4
        assert (glm4v_screens_run / "exports" / target / "manifest.json").is_file()
        assert "parity passed" in section.result.value and target in section.exports.value
    assert "merged-float32" in section.exports.value  # the first export still listed beside the second
