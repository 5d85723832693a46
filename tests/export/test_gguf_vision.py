"""The tiny GLM models as llama.cpp runs them: a tiny GLM-4 run's GGUF (its byte tokenizer through the converter, its
Chinese held-out rows through llama-server), and a tiny GLM-4.1V screenshot run: the text GGUF and the vision projector (mmproj) exported beside
it by llama.cpp's converter, its parity measured through llama-server with each held-out screenshot encoded by the
mmproj, and the GGUF served with --mmproj answering a screenshot request.

Marked ``gguf`` (CI's gguf step, after ``bash scripts/setup.sh --llama-cpp``; fails without llama.cpp)."""

from __future__ import annotations

import pytest

from tests.conftest import SAMPLES

pytestmark = pytest.mark.gguf


def test_a_tiny_glm4_run_exports_and_answers_as_its_adapter(glm4_run, tmp_path):
    """GLM-4's architecture through llama.cpp: every measurable answer position agrees (a position whose top token ends
    inside a UTF-8 character, a byte of the Chinese rows, comes back from llama-server without probabilities and is
    left out)."""
    from workbench.export import export

    result = export(glm4_run, "gguf", tmp_path / "glm4", max_examples=16)
    parity = result.parity
    assert result.manifest["status"] == "passed" and parity["greedy_agreement"] == 1.0, parity
    assert 0 < parity["max_logit_diff"] < 0.05 and parity["positions"] > 1000, parity


@pytest.fixture(scope="module")
def screens_gguf(glm4v_screens_run, tmp_path_factory):
    from workbench.export import export

    return export(glm4v_screens_run, "gguf", tmp_path_factory.mktemp("gguf-vision") / "f16", max_examples=4)


def test_the_mmproj_is_exported_beside_the_text_gguf_and_parity_runs_through_it(screens_gguf):
    """Every held-out row holds a screenshot: parity compares llama.cpp's first answer token, the screenshot encoded by
    the mmproj, with the adapter's in transformers (the mmproj left out, llama-server has no image path: the export
    fails; a wrong projector: the figures leave the gate)."""
    from workbench.export.gguf import MMPROJ_FILE, MODELFILE, parse_modelfile

    out, m = screens_gguf.path, screens_gguf.manifest
    assert sorted(p.name for p in out.glob("*.gguf")) == [MMPROJ_FILE, "model-f16.gguf"]
    assert m["status"] == "passed" and m["parity"]["positions"] == m["parity"]["examples"] == 4
    assert m["parity"]["max_logit_diff"] < 0.05 and m["parity"]["greedy_agreement"] == 1.0, m["parity"]
    froms = [a for k, a in parse_modelfile((out / MODELFILE).read_text(encoding="utf-8")) if k == "FROM"]
    assert froms == ["./model-f16.gguf", f"./{MMPROJ_FILE}"]  # Ollama's vision model: the projector a second FROM


def _screenshot_request(model: str) -> dict:
    from workbench.image_io import image_data_url

    image = image_data_url(SAMPLES / "phone_screens" / "images" / "home_00.png")
    content = [{"type": "image_url", "image_url": {"url": image}}, {"type": "text", "text": "Task: Open WeChat"}]
    return {"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": 8, "temperature": 0}


def test_served_with_its_mmproj_it_answers_a_screenshot_and_without_it_refuses(screens_gguf):
    from workbench.export.gguf import MMPROJ_FILE
    from workbench.serve import start_server
    from workbench.serve.remote import ServerClient

    model = str(screens_gguf.path / "model-f16.gguf")
    with start_server(
        model, engine="llama-cpp", model_id="screens", mmproj=str(screens_gguf.path / MMPROJ_FILE)
    ) as srv:
        reply = ServerClient(srv.url).chat(_screenshot_request("screens"))
        assert reply.error is None and reply.finish_reason in ("stop", "length"), reply
        with_image = reply.prompt_tokens
    with start_server(model, engine="llama-cpp", model_id="screens") as srv:
        refused = ServerClient(srv.url).chat(_screenshot_request("screens"))
    assert refused.error and "image" in refused.error, refused
    assert with_image > 40  # the screenshot's image tokens are in the prompt
