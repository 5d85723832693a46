"""The chat panel's "Exports of a run" section: a run's merged fp32 and int8 exports, each on a server of its
own, and its adapter on the chat's server, asked side by side."""

from tests.conftest import SAMPLES, tiny_run_overrides
from workbench.export import ParityFailed, ParityGate, export
from workbench.serve import start_server
from workbench.ui.chat_panel import ChatComparePanel


def test_exports_and_the_adapter_answer_side_by_side(tmp_path):
    from workbench.config import load_config
    from workbench.training import train

    run = train(
        load_config(
            None,
            tiny_run_overrides(
                tmp_path / "runs",
                **{
                    "data.eval": str(SAMPLES / "identity" / "heldout.jsonl"),
                    "output.run_name": "tuned",
                    "schedule.max_steps": 2,
                },
            ),
        )
    ).run_dir
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
            replies = chat.ask("Who are you?", models=ids)
            assert all(r.content and not r.error for r in replies.values()), {m: r.error for m, r in replies.items()}
            # the fp32 merge computes what the adapter does (max |logit diff| ~1e-6): the same greedy answer
            assert replies["tuned:merged-float32"].content == replies["tuned"].content
        finally:
            section.stop_servers()
        assert not chat.endpoints and "tuned:int8-dynamic" not in chat.models.options
