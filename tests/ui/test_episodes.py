"""Episode replay: the step slider over the screens the model saw with its action drawn, what happened, and the end;
two models' episodes of one task side by side on one slider; the action drawing itself."""

from __future__ import annotations

import io

from PIL import Image

from workbench.agent import OraclePolicy, run_episodes, sim_devices
from workbench.agent.store import EpisodeWriter
from workbench.phone.tasks import select_tasks
from workbench.serve.remote import ModelReply
from workbench.ui.drawing import ACTION_COLOR, BOX_COLOR, draw_action
from workbench.ui.episodes_panel import EpisodeCompare, EpisodeReplay

TASKS = select_tasks("toggle_setting/wifi-off,like_photo/cat")


def stored(tmp_path, policy, name):
    writer = EpisodeWriter(tmp_path / name)
    for episode in run_episodes(TASKS, policy, sim_devices((112, 252))):
        writer.write(episode)
    writer.close()
    return tmp_path / name


class Confused:
    name = "base"

    def __call__(self, conversations):
        return [
            ModelReply('<think>maybe here</think>\n<answer>do(action="Tap", element=[500,990])')
            if sum(m["role"] == "assistant" for m in c) < 2
            else ModelReply("I am not sure")
            for c in conversations
        ]


def pixels(widget_image) -> Image.Image:
    return Image.open(io.BytesIO(widget_image.value)).convert("RGB")


def test_replay_steps_through_an_episode_from_its_folder(tmp_path):
    replay = EpisodeReplay(stored(tmp_path, OraclePolicy(TASKS), "oracle"), scale=2)
    assert [label for label, _ in replay.picker.options] == [
        "toggle_setting/wifi-off: success (3 steps)",
        "like_photo/cat: success (4 steps)",
    ]
    assert replay.slider.max == 4  # three steps and the end
    first = replay.image.value
    assert pixels(replay.image).size == (224, 504) and "on System Home" in replay.info.value
    assert "thinking: Wi-Fi is a setting. I launch Settings." in replay.info.value
    replay.slider.value = 2  # the tap on the Wi-Fi switch: drawn over its row
    assert replay.image.value != first and "did on Wi-Fi: turned Wi-Fi off" in replay.info.value
    img = pixels(replay.image)
    x, y = 500 * 224 // 1000, 192 * 504 // 1000
    assert any(img.getpixel((x + dx, y)) == ACTION_COLOR for dx in range(-14, 15))
    assert img.getpixel((int(30 * 224 / 1000), int(200 * 504 / 1000))) == BOX_COLOR
    replay.slider.value = 4
    assert "success</b>: ended by finish after 3 steps" in replay.info.value and "wifi_off: yes" in replay.info.value
    assert replay.select("like_photo/cat") and replay.slider.value == 1 and replay.slider.max == 5
    assert not replay.select("nope")


def test_failures_are_shown_as_such(tmp_path):
    replay = EpisodeReplay(stored(tmp_path, Confused(), "base"))
    replay.slider.value = 1
    assert "did nothing" in replay.info.value and "hit no element" in replay.info.value
    replay.slider.value = 3
    assert "does not parse" in replay.info.value and "the episode ends" in replay.info.value
    replay.slider.value = 4
    assert "failed</b>: ended by parse_failure" in replay.info.value and "wifi_off: no" in replay.info.value


def test_compare_shows_one_task_of_each_model_on_one_slider(tmp_path):
    compare = EpisodeCompare(
        {"base": stored(tmp_path, Confused(), "base"), "tuned": stored(tmp_path, OraclePolicy(TASKS), "tuned")}
    )
    base, tuned = compare.replays["base"], compare.replays["tuned"]
    assert list(compare.task.options) == [t.id for t in TASKS]
    compare.task.value = "like_photo/cat"
    assert base.episode.task == tuned.episode.task == "like_photo/cat" and compare.slider.max == 5
    compare.slider.value = 5  # the base model's episode ended at step 3: it stays on its end
    assert "failed" in base.info.value and "success" in tuned.info.value


def test_draw_action_marks_points_swipes_and_nothing_for_other_actions():
    screen = Image.new("RGB", (100, 200), (255, 255, 255))
    tap = draw_action(screen, 'do(action="Long Press", element=[500,500])')
    assert tap.getpixel((50, 100)) == ACTION_COLOR
    swipe = draw_action(screen, '<answer>do(action="Swipe", start=[500,800], end=[500,200])', scale=2)
    assert swipe.size == (200, 400) and swipe.getpixel((100, 300)) == ACTION_COLOR
    assert list(draw_action(screen, 'do(action="Back")').getdata()) == list(screen.getdata())
    assert list(draw_action(screen, "not an action").getdata()) == list(screen.getdata())


def test_the_chat_panel_compares_episode_folders_of_a_runs_directory(tmp_path):
    from workbench.ui.chat_panel import ChatComparePanel

    runs = tmp_path / "runs"
    panel = ChatComparePanel(runs_dir=str(runs))
    section = panel.episodes
    assert section in panel.children and section.folders.options == () and "no episodes under" in section.message.value
    stored(runs / "episodes" / "20261201-120000", Confused(), "base")
    stored(runs / "tuned-run" / "episodes", OraclePolicy(TASKS), "20261201-130000")
    section.refresh()
    labels = [label for label, _ in section.folders.options]
    assert sorted(labels) == [
        "base: 0/2 solved (episodes/20261201-120000/base)",
        "oracle: 2/2 solved (tuned-run/episodes/20261201-130000)",
    ]
    assert section.compare([section.folders.options[0][1]]) is None and "pick 2 or 3" in section.message.value
    view = section.compare([value for _, value in section.folders.options])
    assert section.view.children == (view,) and set(view.replays) == {"base", "oracle"}
    assert list(view.task.options) == [t.id for t in TASKS]


def test_a_text_agents_episode_shows_the_tree_it_read_beside_the_screenshot(tmp_path):
    """observation ui_tree: each step shows the screen's compact tree (the line of the element the action hit in
    bold) next to the screenshot; a screenshot agent's replay shows no tree."""
    writer = EpisodeWriter(tmp_path / "tree")
    for episode in run_episodes(TASKS, OraclePolicy(TASKS), sim_devices((112, 252)), observation="ui_tree"):
        writer.write(episode)
    writer.close()
    replay = EpisodeReplay(tmp_path / "tree")
    assert replay.tree.layout.display is None and "Settings [" in replay.tree.value  # the home screen's icons
    replay.slider.value = 2  # the tap on the Wi-Fi switch
    assert "<b style='color:#1565c0'>Wi-Fi" in replay.tree.value
    assert replay.tree.value.count("<b style") == 1
    replay.slider.value = replay.slider.max  # the end: no step, no tree
    assert replay.tree.layout.display == "none"
    assert EpisodeReplay(stored(tmp_path, OraclePolicy(TASKS), "shots")).tree.layout.display == "none"
