"""Shared fixtures: tiny-model run configs writing into a temporary runs directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # The suite runs in two workers (README's test command: pytest -n 2, pytest-xdist) on a 2-core machine: two
    # torch processes of two OpenMP threads each spin against each other (notebook 05's training went 163 s -> over
    # 600 s), so each worker, and every kernel and training process it starts, computes on one thread. Set before
    # anything imports torch.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "data_samples"
EXTENSION_TESTS = REPO / "tests" / "extensions" / "jupyterlab"


# The JupyterLab extension is its own package (extensions/jupyterlab), which `pip install -e ".[test]"` does not
# install (an extra cannot name a local folder). When its tests are about to be collected without it, they are left
# out and collection stops with one line saying what installs it, instead of an ImportError's traceback per module; a
# run that does not collect them (`--ignore=tests/extensions`, other folders named) never meets the check.
EXTENSION_PACKAGE_MISSING = (
    "tests/extensions/jupyterlab need the workbench_jupyterlab package, which "
    "`bash scripts/setup.sh --test` installs (or: pip install -e extensions/jupyterlab)"
)
_EXTENSION_WITHOUT_PACKAGE = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_ignore_collect(collection_path, config):
    ignored = yield  # --ignore and the rest decide first: a folder they leave out is not collected
    path = Path(collection_path)
    if not ignored and (path == EXTENSION_TESTS or EXTENSION_TESTS in path.parents):
        import importlib.util

        if importlib.util.find_spec("workbench_jupyterlab") is None:
            config.stash[_EXTENSION_WITHOUT_PACKAGE] = True
            return True
    return ignored


def pytest_collection_finish(session):
    if session.config.stash.get(_EXTENSION_WITHOUT_PACKAGE, False):
        raise pytest.UsageError(EXTENSION_PACKAGE_MISSING)


# The longest tests and modules (pytest --durations: minutes each) go first: with -n 2 (README's test command) the
# workers start on them and the many short tests fill the gaps, instead of one worker finishing a long one alone.
LONGEST_FIRST = (
    "tests/notebooks/test_notebooks.py::test_07",
    "tests/notebooks/test_notebooks.py::test_05",
    "tests/distributed/test_strategies.py",
    "tests/notebooks/test_notebooks.py::test_0",
)


def pytest_collection_modifyitems(config, items):
    items.sort(
        key=lambda item: next((i for i, p in enumerate(LONGEST_FIRST) if item.nodeid.startswith(p)), len(LONGEST_FIRST))
    )


def tiny_run_overrides(runs_dir: Path, **overrides) -> dict:
    """Dotted-key overrides of a short tiny-GLM-4 run on the identity set, writing into ``runs_dir``."""
    return {
        "model.source": "tiny-glm4",
        "data.train": str(SAMPLES / "identity" / "train.jsonl"),
        "data.eval": None,
        "data.max_length": 128,
        "schedule.max_steps": 6,
        "schedule.micro_batch_size": 4,
        "schedule.learning_rate": 3e-3,
        "schedule.warmup_steps": 0,
        "schedule.eval_loss_every": 0,
        "output.runs_dir": str(runs_dir),
        "output.progress_bar": False,
        "precision.mode": "fp32",
        **overrides,
    }


@pytest.fixture(scope="session")
def glm4v_screens_run(tmp_path_factory) -> Path:
    """A finished tiny GLM-4V LoRA run on the phone screenshots (data_samples/phone_screens: every row holds one),
    its held-out set with screenshots too: what notebook 05 trains, shortened. Shared by the export tests."""
    from workbench.config import load_config
    from workbench.training import train

    screens = SAMPLES / "phone_screens"
    cfg = load_config(
        None,
        tiny_run_overrides(
            tmp_path_factory.mktemp("screens-runs"),
            **{
                "model.source": "tiny-glm4v",
                "data.train": str(screens / "train.jsonl"),
                "data.eval": str(screens / "heldout.jsonl"),
                "data.max_length": 512,
                "schedule.max_steps": 4,
                "output.run_name": "screens",
            },
        ),
    )
    return train(cfg).run_dir


@pytest.fixture
def make_cfg(tmp_path):
    """A tiny-GLM-4 run config; keyword overrides use dotted keys: make_cfg(**{"precision.mode": "fp16"})."""
    from workbench.config import load_config

    return lambda **overrides: load_config(None, tiny_run_overrides(tmp_path / "runs", **overrides))


@pytest.fixture
def fail_forward(monkeypatch):
    """``fail_forward(n, exc)``: the n-th training forward pass of this process raises ``exc`` (a crash or a
    Ctrl-C at a chosen point of a chosen step); ``undo()`` on the returned monkeypatch lifts it."""
    from workbench.engine.sft import SftStep

    def arm(n: int, exc: BaseException):
        forward, calls = SftStep.forward_loss_sum, []

        def failing(step, batch):
            calls.append(1)
            if len(calls) == n:
                raise exc
            return forward(step, batch)

        monkeypatch.setattr(SftStep, "forward_loss_sum", failing)
        return monkeypatch

    return arm


def write_jsonl(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# ---- a tiny whole-model screenshot agent: what DAgger and the bench's baselines start from ------------------------

AGENT_ROWS = SAMPLES / "phone_episodes" / "train.jsonl"
AGENT_START_ROWS = 12  # the first rows of AGENT_ROWS, the start's training rows (agent_rows)


@pytest.fixture(scope="session")
def agent_rows(tmp_path_factory) -> Path:
    """The first ``AGENT_START_ROWS`` oracle episode rows of the screenshot agent, their screenshots beside them."""
    import json
    import shutil

    data = tmp_path_factory.mktemp("agent-rows")
    lines = AGENT_ROWS.read_text(encoding="utf-8").splitlines()[:AGENT_START_ROWS]
    for line in lines:
        for part in [p for m in json.loads(line)["messages"] if isinstance(m["content"], list) for p in m["content"]]:
            if part["type"] == "image_url":
                (data / part["image_url"]["url"]).parent.mkdir(exist_ok=True)
                shutil.copy(AGENT_ROWS.parent / part["image_url"]["url"], data / part["image_url"]["url"])
    return write_jsonl(data / "train.jsonl", lines)


@pytest.fixture(scope="session")
def agent_start_run(tmp_path_factory, agent_rows) -> Path:
    """A whole-model tiny screenshot agent (tiny GLM-4V, every weight), trained a step on ``agent_rows``."""
    from workbench.config import load_config
    from workbench.training import train

    cfg = load_config(
        None,
        tiny_run_overrides(
            tmp_path_factory.mktemp("agent-runs"),
            **{
                "model.source": "tiny-glm4v-agent",
                "lora.enabled": False,
                "data.train": str(agent_rows),
                "data.max_length": 1024,
                "schedule.max_steps": 1,
                "schedule.micro_batch_size": 1,
                "output.run_name": "start",
            },
        ),
    )
    return train(cfg).run_dir


# ---- a run over a quantized base (quantization.base nf4), and its model built by hand ------------------------------

QLORA_STEPS = 8


@pytest.fixture(scope="session")
def qlora_run(tmp_path_factory) -> Path:
    """A finished tiny-GLM-4 LoRA run over an nf4 base, in fp32 (so that serving, evaluating and exporting it can be
    compared with its own figures to float rounding), with its eval loss on the identity held-out set."""
    from workbench.config import load_config
    from workbench.training import train

    cfg = load_config(
        None,
        tiny_run_overrides(
            tmp_path_factory.mktemp("qlora-runs"),
            **{
                "quantization.base": "nf4",
                "schedule.max_steps": QLORA_STEPS,
                "schedule.learning_rate": 1e-2,
                "lora.dropout": 0.0,
                "data.eval": str(SAMPLES / "identity" / "heldout.jsonl"),
                "output.run_name": "qlora",
            },
        ),
    )
    return train(cfg).run_dir


def qlora_reference(run_dir: Path, quantized: bool = True):
    """(model, tokenizer) of ``run_dir``'s tiny-GLM-4 built here rather than by ``models.build_run_model`` (which serving,
    chat, eval and export rebuild a run with): the base drawn from seed 0 in bf16, its linear layers quantized as
    training quantized them (``quantized``; else left in bf16: what a path that silently skipped the quantization
    would serve), the rest in fp32, the run's adapter on it (peft, unmerged), in eval mode."""
    import torch
    from peft import PeftModel

    from workbench.models import tiny
    from workbench.models.quantize import cast_unquantized, quantize_base

    model, tok = tiny.tiny_glm4(seed=0, dtype=torch.bfloat16)
    if quantized:
        quantize_base(model, "nf4", torch.float32)
    cast_unquantized(model, torch.float32)
    return PeftModel.from_pretrained(model, str(run_dir / "adapter")).eval(), tok


def reference_logprobs(model, tokenizer, messages: list[dict], tokens: list[int]) -> list[float]:
    """The log-probability ``model`` gives each of ``tokens`` after the chat prompt of ``messages`` (rendered as the
    server renders it), teacher-forced."""
    import torch

    from workbench.data.multimodal import encode_prompt

    prompt = encode_prompt(tokenizer, messages, None).input_ids
    ids = torch.tensor([prompt + tokens])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
    return torch.log_softmax(logits, -1).gather(1, torch.tensor(tokens)[:, None])[:, 0].tolist()
