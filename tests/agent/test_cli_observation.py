"""``workbench agent run --observation`` and ``--lang`` against a real server (``workbench serve --model tiny-glm4v``):
what the model is shown of each screen, and the system prompt in its language, reach the server. The server's own
prompt count tells: a screenshot costs the image's tokens, the screen tree its text's, each prompt its own."""

from __future__ import annotations

import json

import pytest

from workbench.agent.store import read_episodes
from workbench.cli.main import main
from workbench.phone.conversation import OBSERVATIONS, system_prompt

SIZE = (112, 252)


@pytest.fixture(scope="module")
def tiny_vision_server():
    from workbench.serve import start_server

    # the tiny model's own context (1024) is shorter than the system prompt alone in its byte tokens
    with start_server("tiny-glm4v", max_batch=8, max_context=8192, threads=1) as srv:
        yield srv


def test_agent_run_sends_what_observation_asks_for(tiny_vision_server, tmp_path, capsys):
    """The first request of one task in each mode: ui_tree shows the tree and no screenshot, both shows the two. The
    server counts the prompt's tokens (the tiny model's tokenizer is one token a byte): the screenshot adds its image
    tokens, the tree at least its bytes."""
    from workbench.models.processor import image_token_count, load_processor
    from workbench.models.tiny import byte_tokenizer

    first = {}
    for observation in OBSERVATIONS:
        code = main(
            [
                "agent",
                "run",
                "--server",
                tiny_vision_server.url,
                "--tasks",
                "open_app/settings",
                "--size",
                "x".join(map(str, SIZE)),
                "--max-steps",
                "1",
                "--max-tokens",
                "8",
                "--observation",
                observation,
                "--out",
                str(tmp_path / observation),
                "--no-write",
                "--json",
            ]
        )
        report = json.loads(capsys.readouterr().out)
        assert code == 0
        [folder] = report["episodes"].values()
        [episode] = read_episodes(folder)
        assert episode.observation == observation and episode.steps[0].prompt_tokens, episode
        assert (episode.steps[0].ui_tree is not None) == (observation != "screenshot")
        first[observation] = episode.steps[0]
    image = image_token_count(load_processor(None, byte_tokenizer(vision=True)), *SIZE)
    tree = len(first["both"].ui_tree.encode())
    assert image > 0 and tree > image
    # each mode's system prompt says what the model sees: count what follows it (a byte a token)
    tokens = {
        observation: step.prompt_tokens - len(system_prompt(observation=observation).encode())
        for observation, step in first.items()
    }
    assert tokens["both"] - tokens["ui_tree"] >= image, tokens  # both: the screenshot besides the tree
    assert tokens["both"] - tokens["screenshot"] >= tree, tokens  # both: the tree besides the screenshot
    # ui_tree: the tree instead of the image and its two markers (<|begin_of_image|>, <|end_of_image|>)
    assert tokens["ui_tree"] - tokens["screenshot"] >= tree - image - 2, tokens


def test_agent_run_lang_cn_sends_the_chinese_prompt(tiny_vision_server, tmp_path, capsys):
    """``--lang cn``: the server is sent Open-AutoGLM's Chinese system prompt, not the English one. The same first turn
    in each language costs the server its prompt's tokens (the tiny tokenizer's, about one a byte) and the same rest."""
    from workbench.models.tiny import byte_tokenizer

    first = {}
    for lang in ("en", "cn"):
        code = main(
            [
                "agent",
                "run",
                "--server",
                tiny_vision_server.url,
                "--tasks",
                "open_app/settings",
                "--size",
                "x".join(map(str, SIZE)),
                "--max-steps",
                "1",
                "--max-tokens",
                "8",
                "--lang",
                lang,
                "--out",
                str(tmp_path / lang),
                "--no-write",
                "--json",
            ]
        )
        report = json.loads(capsys.readouterr().out)
        assert code == 0 and report["settings"]["lang"] == lang
        [folder] = report["episodes"].values()
        [episode] = read_episodes(folder)
        assert episode.lang == lang
        first[lang] = episode.steps[0].prompt_tokens
    prompt = {
        lang: len(byte_tokenizer(vision=True)(system_prompt(lang=lang), add_special_tokens=False)["input_ids"])
        for lang in first
    }
    assert prompt["cn"] > 3 * prompt["en"]  # Chinese characters are three bytes each
    assert first["cn"] - prompt["cn"] == first["en"] - prompt["en"], (first, prompt)
