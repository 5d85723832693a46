"""`workbench serve --model EXPORT_DIR`: a merged and an int8 export answer through the openai client."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("export_fixture", ["glm4_merged", "glm4_int8"])
def test_served_export_answers_through_openai_client(export_fixture, request):
    from workbench.models import load_for_inference
    from workbench.serve import start_server

    export_dir = request.getfixturevalue(export_fixture).path
    local = load_for_inference(str(export_dir))
    prompt = local.tokenizer.apply_chat_template(
        [{"role": "user", "content": "Who are you?"}], tokenize=False, add_generation_prompt=True
    )
    ids = local.tokenizer(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
    out = local.model.generate(ids, max_new_tokens=6, do_sample=False)[0, ids.shape[1] :]
    expected = local.tokenizer.decode(out, skip_special_tokens=True)
    with start_server(str(export_dir), model_id="exported", threads=1, max_batch=2, dtype="float32") as srv:
        reply = srv.openai_client(max_retries=0).chat.completions.create(
            model="exported", messages=[{"role": "user", "content": "Who are you?"}], max_tokens=6, temperature=0
        )
    assert reply.model == "exported"
    assert reply.choices[0].message.content == expected
