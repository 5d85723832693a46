"""Short tiny-model runs (with a held-out set) that the export tests export, trained once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import SAMPLES, tiny_run_overrides


def _train(runs_dir: Path, model: str) -> Path:
    from workbench.config import load_config
    from workbench.training import train

    cfg = load_config(
        None,
        tiny_run_overrides(
            runs_dir,
            **{
                "model.source": model,
                "data.eval": str(SAMPLES / "identity" / "heldout.jsonl"),
                "output.run_name": model,
            },
        ),
    )
    return train(cfg).run_dir


@pytest.fixture(scope="session")
def glm4_run(tmp_path_factory) -> Path:
    return _train(tmp_path_factory.mktemp("export-runs"), "tiny-glm4")


@pytest.fixture(scope="session")
def glm4v_run(tmp_path_factory) -> Path:
    return _train(tmp_path_factory.mktemp("export-runs"), "tiny-glm4v")


@pytest.fixture(scope="session")
def glm4_merged(glm4_run, tmp_path_factory):
    from workbench.export import export

    return export(glm4_run, "merged", tmp_path_factory.mktemp("exports") / "merged")


@pytest.fixture(scope="session")
def glm4_int8(glm4_run, tmp_path_factory):
    from workbench.export import export

    return export(glm4_run, "int8", tmp_path_factory.mktemp("exports") / "int8")
