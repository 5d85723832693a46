"""The GRPO benchmark's own side runs end to end (TRL's side needs a model on disk: the bench's default)."""

import json

from workbench.bench import grpo


def test_ours_side_reports_step_time_and_rewards_per_step(capsys):
    assert (
        grpo.main(
            [
                "--only",
                "ours",
                "--model",
                "tiny-glm4",
                "--steps",
                "2",
                "--seeds",
                "1",
                "--group",
                "2",
                "--max-new-tokens",
                "4",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    ours = out["runs"]["ours"][0]
    assert ours["step_s"] > 0 and len(ours["rewards"]) == 2 and "trl" not in out["summary"]
    assert out["settings"]["model"] == "tiny-glm4" and out["settings"]["rewards"] == ["format", "action_type"]
