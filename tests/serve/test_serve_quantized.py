"""A run trained over a quantized base (quantization.base nf4) is served as it trained: `workbench serve --run` builds
the base quantized the same way with the adapter on it. The served log-probabilities are those of the run's model
built by hand (tests/conftest.py: qlora_reference) and not those of its adapter on the 16-bit base, which is what a
server that silently left the base unquantized would give: this test fails then (checked by breaking it)."""

from __future__ import annotations

import pytest

from workbench.serve.config import ServeError

from ..conftest import qlora_reference, reference_logprobs
from .test_serve_images import streamed

MESSAGES = [{"role": "user", "content": "Who are you?"}]


def test_a_qlora_run_is_served_on_its_quantized_base(qlora_run):
    from workbench.serve import start_server

    with start_server("tiny-glm4", runs=[str(qlora_run)], threads=1, dtype="float32") as srv:
        tokens, logprobs, _ = streamed(srv.openai_client(max_retries=0), "qlora", MESSAGES, 8)
    quantized, tok = qlora_reference(qlora_run)
    unquantized, _ = qlora_reference(qlora_run, quantized=False)
    # 1e-4: float32 sums in another order (batched decode with a KV cache against one teacher-forced forward)
    assert logprobs == pytest.approx(reference_logprobs(quantized, tok, MESSAGES, tokens), abs=1e-4)
    on_16_bit = reference_logprobs(unquantized, tok, MESSAGES, tokens)
    # the near-uniform tiny model's log-probabilities move by 4.4e-3 (measured) between the nf4 and the bf16 base: ten
    # times the tolerance above
    assert max(abs(a - b) for a, b in zip(logprobs, on_16_bit)) > 1e-3


def test_a_server_of_the_16_bit_base_refuses_a_qlora_adapter(qlora_run):
    from workbench.serve import start_server

    with start_server("tiny-glm4", threads=1) as srv:
        with pytest.raises(Exception, match="quantized as nf4") as err:
            srv.add_adapter("qlora", str(qlora_run))
        assert "none (not quantized)" in str(err.value)
        assert "qlora" not in srv.models()


def test_vllm_is_not_handed_a_qlora_adapter_for_a_16_bit_base(qlora_run):
    from workbench.config import config_from_dict
    from workbench.serve.config import ServeConfig
    from workbench.serve.vllm import build_launch

    config = config_from_dict({"engine": "vllm", "model": "tiny-glm4", "runs": [str(qlora_run)]}, ServeConfig)
    with pytest.raises(ServeError, match="merged") as err:
        build_launch(config, "/venv/bin/python")
    assert "--quantization --vllm-arg bitsandbytes" in str(err.value)


@pytest.mark.parametrize(
    "field,value",
    [("double_quant", False), ("skip_modules", ["lm_head", "visual", "mlp"])],
    ids=["double_quant", "skip_modules"],
)
def test_a_server_of_a_qlora_base_refuses_an_adapter_trained_on_another_quantization_of_it(
    qlora_run, tmp_path, field, value
):
    """What makes an nf4 base is part of it: its block scales quantized or not (quantization.double_quant), the layers
    left in 16-bit (quantization.skip_modules: here the MLPs too). The adapter of a run trained on another is refused
    by a server of the run that trained on the default one, and the refusal says both."""
    import json
    import shutil

    from workbench.serve import start_server

    other = tmp_path / "other"
    shutil.copytree(qlora_run, other)
    config = json.loads((other / "config.json").read_text())
    served = config["quantization"][field]
    assert served != value
    config["quantization"][field] = value
    (other / "config.json").write_text(json.dumps(config))
    with start_server("tiny-glm4", runs=[str(qlora_run)], threads=1) as srv:
        with pytest.raises(Exception, match="quantized as nf4") as err:
            srv.add_adapter("other", str(other))
        assert f"{field} {value}" in str(err.value) and f"{field} {served}" in str(err.value)
        assert "other" not in srv.models()
