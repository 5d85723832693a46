"""Episodes on disk: the replay key (what a greedy evaluation's episodes follow from) and finding episodes played
with the same key in a runs folder."""

import json
from pathlib import Path

from workbench.agent.store import REPLAY_KEY, SUMMARY_FILE, EpisodeWriter, find_replay, replay_key

SETTINGS = {"tasks": "heldout", "max_tokens": 128}
NUMERICS = {"device": "cpu", "torch": "2.x", "threads": 2}


def _model(folder, weights=b"\x00" * 64):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.safetensors").write_bytes(weights)
    (folder / "config.json").write_text("{}")
    return folder


def test_the_key_changes_with_the_weights_settings_tasks_and_numerics_and_not_with_the_folder(tmp_path):
    model = _model(tmp_path / "a")
    key = replay_key(model, SETTINGS, ["t1", "t2"], NUMERICS)
    assert key == replay_key(_model(tmp_path / "copy"), SETTINGS, ["t1", "t2"], NUMERICS)  # bytes, not the path
    assert key != replay_key(_model(tmp_path / "b", b"\x00" * 63 + b"\x01"), SETTINGS, ["t1", "t2"], NUMERICS)
    assert key != replay_key(model, {**SETTINGS, "max_tokens": 64}, ["t1", "t2"], NUMERICS)
    assert key != replay_key(model, SETTINGS, ["t2", "t1"], NUMERICS)  # the order decides the batches
    assert key != replay_key(model, SETTINGS, ["t1", "t2"], {**NUMERICS, "threads": 1})
    assert replay_key("HuggingFaceTB/SmolLM2-135M-Instruct", SETTINGS, ["t1"], NUMERICS) is None  # no bytes here


def test_the_key_changes_with_the_workbench_source_and_the_cpu_class(tmp_path, monkeypatch):
    """A code change, or another class of CPU (its kernels sum in another order), may change greedy episodes: a base's
    episodes played before either must not be copied after it."""
    import torch

    import workbench
    from workbench.agent import store

    assert store.SOURCE_ROOT == Path(workbench.__file__).resolve().parent  # the key hashes the package's source
    model, source = _model(tmp_path / "m"), tmp_path / "workbench"
    (source / "agent").mkdir(parents=True)
    (source / "agent" / "runner.py").write_text("STEPS = 1\n")
    monkeypatch.setattr(store, "SOURCE_ROOT", source)
    numerics = store.replay_numerics("cpu")
    key = replay_key(model, SETTINGS, ["t1"], numerics)
    (source / "agent" / "runner.py").write_text("STEPS = 2\n")
    assert replay_key(model, SETTINGS, ["t1"], numerics) != key

    monkeypatch.setattr("workbench.hardware.cpu_class", lambda: "AMD EPYC 9B14 (AVX-512 BF16)")
    avx512 = store.replay_numerics("cpu")
    monkeypatch.setattr("workbench.hardware.cpu_class", lambda: "AMD EPYC 7B13 (AVX2)")
    assert replay_key(model, SETTINGS, ["t1"], store.replay_numerics("cpu")) != replay_key(
        model, SETTINGS, ["t1"], avx512
    )
    assert avx512["device"] == "cpu" and avx512["threads"] == torch.get_num_threads()


def test_episodes_are_found_in_a_run_beside_by_their_key_and_lost_once_rewritten(tmp_path):
    name = "phone_agent-heldout--base"
    for run, key in (("run-a", "k1"), ("run-b", "k2")):
        writer = EpisodeWriter(tmp_path / run / "episodes" / name)
        writer.close({"metrics": {}, REPLAY_KEY: key})
    assert find_replay(tmp_path, name, "k2") == tmp_path / "run-b" / "episodes" / name
    assert find_replay(tmp_path, name, "k3") is None
    assert find_replay(tmp_path, "phone_agent-combos--base", "k1") is None  # another evaluation's episodes
    (tmp_path / "run-c" / "episodes" / name).mkdir(parents=True)
    (tmp_path / "run-c" / "episodes" / name / SUMMARY_FILE).write_text("{not json")  # skipped, not an error
    assert find_replay(tmp_path, name, "k1") == tmp_path / "run-a" / "episodes" / name
    # playing into a folder again drops its summary at once: a crash then leaves no key beside partial episodes
    EpisodeWriter(tmp_path / "run-a" / "episodes" / name)
    assert not (tmp_path / "run-a" / "episodes" / name / SUMMARY_FILE).exists()
    assert find_replay(tmp_path, name, "k1") is None
    assert json.loads((tmp_path / "run-b" / "episodes" / name / SUMMARY_FILE).read_text())[REPLAY_KEY] == "k2"
