"""Episodes into training rows: one row per step, the step's own reply the only training target."""

import json

import torch

from workbench.agent import OraclePolicy, run_episodes, sim_devices
from workbench.agent.record import record_rows
from workbench.config import ModelSection
from workbench.data.dataset import load_training_examples
from workbench.data.tokenize import IGNORE_INDEX
from workbench.models import load_base_model
from workbench.phone.tasks import select_tasks


def test_each_row_trains_its_own_step_and_reads_the_earlier_ones_as_context(tmp_path):
    tasks = select_tasks("send_message")[:1]
    out = tmp_path / "rows.jsonl"
    result = record_rows(run_episodes(tasks, OraclePolicy(tasks), sim_devices((112, 252))), out)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert result.rows == len(rows) == len(tasks[0].oracle()) >= 5
    for i, row in enumerate(rows):
        weights = [m["weight"] for m in row["messages"] if m["role"] == "assistant"]
        assert weights == [0] * i + [1]
    loaded = load_base_model(ModelSection(source="tiny-glm4v"), torch.float32)
    examples, _ = load_training_examples(out, loaded.tokenizer, 4096, processor=loaded.processor)
    tok = loaded.tokenizer
    for row, example in zip(rows, examples):
        trained = tok.decode([t for t, label in zip(example.input_ids, example.labels) if label != IGNORE_INDEX])
        assert trained.startswith(row["messages"][-1]["content"])  # the step's reply (and the end-of-text after it)
        assert trained.count("<answer>") == 1  # earlier replies are not targets again


def test_episodes_played_in_chinese_become_rows_in_chinese(tmp_path):
    """Episodes played with Open-AutoGLM's Chinese prompt (agent run --lang cn) are recorded (agent record, no --lang)
    with that prompt: the rows teach the model the conversation it was in, and data check holds them to it."""
    import datetime

    from workbench.agent.store import EpisodeWriter, read_episodes
    from workbench.data.check import check_file
    from workbench.phone.conversation import system_prompt

    tasks = select_tasks("open_app")[:1]
    date = datetime.date(2026, 12, 1)
    writer = EpisodeWriter(tmp_path / "episodes")  # as agent run stores them, and agent record --episodes reads them
    for episode in run_episodes(tasks, OraclePolicy(tasks), sim_devices((112, 252)), date=date, lang="cn"):
        writer.write(episode)
    writer.close()
    out = tmp_path / "rows.jsonl"
    record_rows(read_episodes(tmp_path / "episodes"), out, tmp_path / "episodes")
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows and all(r["messages"][0]["content"] == system_prompt(date, lang="cn") for r in rows)
    assert {r["meta"]["lang"] for r in rows} == {"cn"} and check_file(out).problems == []
