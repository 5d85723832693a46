"""Task metrics while a run trains (``eval.tasks``) on screenshot rows: the rows' inline images are decoded for the
run's processor and answered in process."""

from __future__ import annotations

import json

from ..conftest import SAMPLES, tiny_run_overrides


def test_a_screenshot_task_is_scored_while_a_vision_run_trains(tmp_path):
    from workbench.config import load_config
    from workbench.config.names import EVAL_TASKS
    from workbench.eval import register_task
    from workbench.eval.phone import PhoneActionsTask
    from workbench.eval.registry import _TASKS
    from workbench.training import train

    screens = SAMPLES / "phone_screens"
    register_task(PhoneActionsTask("screens_probe", screens / "heldout.jsonl"))
    try:
        cfg = load_config(
            None,
            tiny_run_overrides(
                tmp_path / "runs",
                **{
                    "model.source": "tiny-glm4v",
                    "data.train": str(screens / "train.jsonl"),
                    "data.max_length": 512,
                    "schedule.max_steps": 2,
                    "eval.tasks": ["screens_probe"],
                    "eval.limit": 2,
                    "eval.max_new_tokens": 4,
                    "output.run_name": "probe",
                },
            ),
        )
        run_dir = train(cfg).run_dir
    finally:
        _TASKS.pop("screens_probe")
        EVAL_TASKS._names.discard("screens_probe")
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    scored = [e for e in events if e["type"] == "eval_task"]
    assert [(e["task"], e["step"], e["metrics"]["n"]) for e in scored] == [("screens_probe", 2, 2)]
    assert scored[0]["metrics"]["by_type"]  # each row got a verdict from an answer generated on its screenshot
