"""The chat panel's "Exports of a run" section: a run's merged fp32, int8 and GGUF exports, each on a server of its
own (ours, or llama-server for a GGUF), and its adapter on the chat's server, asked side by side.

Which exports are offered and what each server is started with is tested here without llama.cpp; the test that starts
llama-server is marked ``gguf`` (CI's gguf step, after ``bash scripts/setup.sh --llama-cpp``; it fails without it)."""

import json
from pathlib import Path

import pytest

from tests.conftest import SAMPLES, tiny_run_overrides
from workbench.export import ParityFailed, ParityGate, export
from workbench.serve import start_server
from workbench.ui.chat_exports import ExportChatSection, servable_exports
from workbench.ui.chat_panel import ChatComparePanel


def _tuned_run(runs_dir: Path) -> Path:
    from workbench.config import load_config
    from workbench.training import train

    overrides = {"data.eval": str(SAMPLES / "identity" / "heldout.jsonl"), "output.run_name": "tuned"}
    return train(load_config(None, tiny_run_overrides(runs_dir, **overrides, **{"schedule.max_steps": 2}))).run_dir


def _answers(chat: ChatComparePanel, ids: list[str]) -> dict[str, str]:
    """Every model's greedy answer to one identity prompt, each asked on its own server; none may fail or be empty."""
    replies = chat.ask("Who are you?", models=ids)
    assert all(r.content and not r.error for r in replies.values()), {m: r.error for m, r in replies.items()}
    return {model: reply.content for model, reply in replies.items()}


def _fake_export(run: Path, name: str, target: str, status: str = "passed", quant: str = "f16", files=()) -> Path:
    """An export directory as ``export`` leaves it: its manifest (the fields the section reads) and its files."""
    out = run / "exports" / name
    out.mkdir(parents=True)
    manifest = {
        "status": status,
        "target": target,
        "options": {"dtype": "float32", "int8_mode": "dynamic", "quant": quant},
    }
    (out / "manifest.json").write_text(json.dumps(manifest))
    for file in files:
        (out / file).write_bytes(b"")
    return out


@pytest.fixture
def run_with_every_export(tmp_path) -> Path:
    """A run (its event log makes it one) with an export of each kind, a failed one among them."""
    run = tmp_path / "runs" / "tuned"
    run.mkdir(parents=True)
    (run / "events.jsonl").write_text("")
    _fake_export(run, "merged-float32", "merged", files=["model.safetensors"])
    _fake_export(run, "int8-dynamic", "int8", files=["model.safetensors"])
    _fake_export(run, "int8-weight.failed", "int8", status="failed parity")
    _fake_export(run, "onnx", "onnx", files=["model.onnx"])
    _fake_export(run, "gguf-q4_k_m", "gguf", quant="q4_k_m", files=["model-q4_k_m.gguf", "Modelfile"])
    _fake_export(run, "gguf-f16", "gguf", files=["model-f16.gguf", "mmproj-f16.gguf"])  # a GLM-4.1V run's
    _fake_export(run, "gguf-lora", "gguf-lora", files=["model-f16.gguf", "adapter-f16.gguf"])
    return run


def test_gguf_exports_are_started_on_llama_server_and_the_others_on_ours(run_with_every_export):
    """merged / int8: our server over the directory; gguf: llama-server over the quantization's file, with the
    mmproj when there is one; failed, ONNX and gguf-lora exports are not offered."""
    run = run_with_every_export
    exports = run / "exports"
    assert servable_exports(run, subprocess_mode=False) == {
        "gguf-f16": {
            "model": str(exports / "gguf-f16" / "model-f16.gguf"),
            "engine": "llama-cpp",
            "mmproj": str(exports / "gguf-f16" / "mmproj-f16.gguf"),
        },
        "gguf-q4_k_m": {"model": str(exports / "gguf-q4_k_m" / "model-q4_k_m.gguf"), "engine": "llama-cpp"},
        "int8-dynamic": {"model": str(exports / "int8-dynamic"), "subprocess_mode": False},
        "merged-float32": {"model": str(exports / "merged-float32"), "subprocess_mode": False},
    }


class _Chat:
    """The section's chat target, recording what it is offered (no server: the adapter is left out here)."""

    def __init__(self):
        self.offered: dict = {}

    def add_run_adapter(self, run_dir: Path) -> str:
        raise AssertionError("not asked for")

    def offer_models(self, endpoints: dict, served_here: list[str]) -> list[str]:
        self.offered.update(endpoints)
        return [*endpoints, *served_here]

    def remove_endpoint(self, model_id: str) -> None:
        self.offered.pop(model_id)


def test_the_section_starts_llama_server_for_a_gguf_export_and_says_what_to_set_up(
    run_with_every_export, tmp_path, monkeypatch
):
    """The gguf exports are listed beside merged and int8 and Serve starts llama-server for one: on a machine without
    llama.cpp that start fails with the one line naming the set-up command, shown in the section."""
    monkeypatch.setenv("WORKBENCH_LLAMA_CPP_HOME", str(tmp_path / "no-llama-cpp"))
    section = ExportChatSection(_Chat(), runs_dir=str(run_with_every_export.parent))
    assert section.run.options == ("tuned",)
    assert section.exports.options == ("gguf-f16", "gguf-q4_k_m", "int8-dynamic", "merged-float32")
    section.exports.value, section.with_adapter.value = ("gguf-q4_k_m",), False
    assert section.serve() == [] and not section.servers
    assert "gguf-q4_k_m: LlamaCppMissing: llama.cpp is not set up" in section.status.value, section.status.value
    assert "run `bash scripts/setup.sh --llama-cpp`" in section.status.value


def test_exports_and_the_adapter_answer_side_by_side(tmp_path):
    run = _tuned_run(tmp_path / "runs")
    export(run, "merged", max_examples=2)
    export(run, "int8", max_examples=2)
    try:  # a failed export is not offered
        export(run, "int8", int8_mode="weight", max_examples=2, gate=ParityGate(0.0, 1.0, 0.0))
    except ParityFailed:
        pass
    assert (run / "exports" / "int8-weight.failed").is_dir()

    with start_server("tiny-glm4", default_max_tokens=6) as srv:
        # made before any run: it says so, and Refresh finds the run once there is one
        early = ChatComparePanel(server=srv, max_tokens=6, runs_dir=str(tmp_path / "none-yet")).export_models
        assert early.run.options == () and "no run with an adapter or a passed export" in early.status.value
        early.runs_dir.value = str(tmp_path / "runs")
        assert early.refresh() == ["tuned"] and early.status.value == ""

        chat = ChatComparePanel(server=srv, max_tokens=6, runs_dir=str(tmp_path / "runs"))
        section = chat.export_models
        section.subprocess_mode = False  # servers in this process: the test's quicker way to the same handles
        assert section.run.options == ("tuned",)
        assert section.exports.options == ("int8-dynamic", "merged-float32")
        assert set(section.exports.value) == {"int8-dynamic", "merged-float32"}
        try:
            ids = section.serve()  # no event loop here: serves synchronously
            assert ids == ["tuned:int8-dynamic", "tuned:merged-float32", "tuned"], section.status.value
            assert set(chat.models.value) == set(ids) and "tiny-glm4" in chat.models.options
            assert chat.refresh_models()[-2:] == [
                "tuned:int8-dynamic",
                "tuned:merged-float32",
            ]  # kept beside the server's
            answers = _answers(chat, ids)
            # the fp32 merge computes what the adapter does (max |logit diff| ~1e-6): the same greedy answer
            assert answers["tuned:merged-float32"] == answers["tuned"]
        finally:
            section.stop_servers()
        assert not chat.endpoints and "tuned:int8-dynamic" not in chat.models.options


@pytest.mark.gguf
def test_a_gguf_export_answers_on_llama_server_beside_the_adapter(tmp_path):
    """The run's f16 GGUF served by llama-server from the section, next to the adapter on the chat's server: llama.cpp
    computes what the adapter does (greedy agreement 1.0 at parity), so both give the same greedy answer."""
    run = _tuned_run(tmp_path / "runs")
    export(run, "gguf", max_examples=2)
    with start_server("tiny-glm4", default_max_tokens=6) as srv:
        chat = ChatComparePanel(server=srv, max_tokens=6, runs_dir=str(tmp_path / "runs"))
        section = chat.export_models
        assert section.exports.options == ("gguf-f16",) and section.exports.value == ("gguf-f16",)
        try:
            ids = section.serve()
            assert ids == ["tuned:gguf-f16", "tuned"], section.status.value
            assert section.servers["tuned:gguf-f16"].engine == "llama-server"
            answers = _answers(chat, ids)
            assert answers["tuned:gguf-f16"] == answers["tuned"]
        finally:
            section.stop_servers()
        assert not chat.endpoints and "tuned:gguf-f16" not in chat.models.options
