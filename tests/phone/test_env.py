"""The gymnasium interface: gymnasium's own checker passes, a reply that does not parse ends the episode as a
finish without reward, the step limit truncates, and the registered id builds the environment."""

from __future__ import annotations

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

from workbench.phone.env import ENV_ID, PhoneEnv
from workbench.phone.sim import SimPhone
from workbench.phone.tasks import TASKS


def small_env(**kw) -> PhoneEnv:
    return PhoneEnv(SimPhone((112, 252)), **kw)


def test_gymnasium_checker_passes():
    check_env(small_env(), skip_render_check=True)


def test_observation_is_screenshot_and_current_app():
    env = small_env()
    obs, info = env.reset(options={"task": "open_app/settings"})
    assert obs["screenshot"].shape == (252, 112, 3) and obs["current_app"] == "System Home"
    assert info == {"task": "open_app/settings", "instruction": "Open Settings"}
    assert env.observation_space.contains(obs)
    obs, *_ = env.step('do(action="Launch", app="Settings")')
    assert obs["current_app"] == "AndroidSystemSettings"  # as Open-AutoGLM names com.android.settings


def test_a_reply_that_does_not_parse_finishes_the_episode_without_reward():
    env = small_env()
    env.reset(options={"task": "open_app/settings"})
    env.step('do(action="Launch", app="Settings")')  # the goal holds already...
    obs, reward, terminated, truncated, info = env.step("<think>done</think>\n<answer>I opened it")
    assert (
        terminated and not truncated and reward == 0.0 and not info["success"]
    )  # ...but a parse failure is no success
    # as the runtime: the message is the text its client cut out of the reply (here the <answer> part)
    assert info["action"].type == "finish" and info["action"].args["message"] == "I opened it"
    assert "neither do(...) nor finish(...)" in info["parse_error"]
    assert info["checks"] == {"app_open": True, "nothing_else_changed": True}


@pytest.mark.parametrize(
    "reply",
    [
        'do(action="Fly")',
        'do(action="Note", message="True")',
        'do(action="Tap")',
        'do(action="Launch")',
        'do(action="Tap", element=[1500,500])',
    ],
)
def test_a_call_the_runtime_parses_but_does_nothing_with_is_a_step_and_the_episode_goes_on(reply):
    """Open-AutoGLM's handler answers an action it does not know, or one missing its argument, and goes on; a point
    off the grid taps off the screen."""
    env = small_env()
    env.reset(options={"task": "open_app/settings"})
    *_, terminated, truncated, info = env.step(f"<think>x</think>\n<answer>{reply}")
    assert not terminated and not truncated and not info["valid"] and info["parse_error"] is None
    assert env.device.app == "System Home"


def test_the_step_limit_truncates_and_an_invalid_action_is_reported():
    env = small_env(max_steps=2)
    env.reset(options={"task": "open_app/settings"})
    *_, terminated, truncated, info = env.step('do(action="Tap", element=[500,990])')
    assert not terminated and not truncated and not info["valid"] and "hit no element" in info["effect"]
    *_, terminated, truncated, info = env.step('do(action="Wait", duration="1 seconds")')
    assert truncated and not terminated and info["checks"] is not None and not info["success"]
    with pytest.raises(ValueError, match="max_steps must be at least 1"):
        small_env(max_steps=0)


def test_seeded_reset_draws_the_same_task_and_the_registered_id_builds_one():
    assert small_env().reset(seed=3)[1] == small_env().reset(seed=3)[1]
    env = gymnasium.make(ENV_ID, device=SimPhone((112, 252)), tasks=TASKS[:3])
    _, info = env.reset(seed=0)
    assert info["task"] in {t.id for t in TASKS[:3]}
    with pytest.raises(ValueError, match="unknown task id 'nope'"):
        small_env().reset(options={"task": "nope"})
