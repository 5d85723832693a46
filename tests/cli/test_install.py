"""A non-editable install (a wheel built from this checkout) run from another directory: the sample
data and the defaults pointing at it must come from the installed package, and `workbench demo`,
the README's main command, must run end to end (tiny model, 2 steps)."""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

BUILD_INPUTS = ("pyproject.toml", "setup.py", "README.md", "workbench", "data_samples")


def _run(cmd: list[str], cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(the installed ``workbench`` command, its environment, a working directory outside the checkout)."""
    tmp = tmp_path_factory.mktemp("install")
    src = tmp / "src"  # a copy, so the build leaves no build/ or egg-info in the checkout
    src.mkdir()
    for name in BUILD_INPUTS:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(REPO / name, src / name)
    built = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp / "dist"),
            str(src),
        ],
        cwd=tmp,
    )
    assert built.returncode == 0, built.stderr
    wheel = next((tmp / "dist").glob("workbench-*.whl"))
    venv = tmp / "venv"
    assert _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp).returncode == 0
    python = venv / "bin" / "python"
    purelib = _run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=tmp
    ).stdout.strip()
    # The test environment's packages (torch, transformers, ...) are visible, after the venv's own: the
    # installed wheel, not this checkout (nor an editable install of it), provides `workbench`.
    Path(purelib, "test-environment.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    installed = _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q", str(wheel)],
        cwd=tmp,
    )
    assert installed.returncode == 0, installed.stderr
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONWARNINGS")}
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    where = _run([str(python), "-c", "import workbench; print(workbench.__file__)"], cwd=elsewhere, env=env)
    assert where.stdout.strip().startswith(purelib), where.stdout + where.stderr
    return venv / "bin" / "workbench", env, elsewhere


def test_defaults_find_the_packaged_samples_from_another_directory(installed):
    workbench, env, cwd = installed
    res = _run(
        [
            str(workbench),
            "train",
            "--model.source",
            "tiny-glm4",
            "--schedule.max_steps",
            "2",
            "--schedule.micro_batch_size",
            "2",
            "--data.max_length",
            "64",
            "--output.progress_bar",
            "false",
            "--output.run_name",
            "from-wheel",
        ],
        cwd=cwd,
        env=env,
    )
    assert res.returncode == 0, res.stderr
    cfg = json.loads((cwd / "runs" / "from-wheel" / "config.json").read_text())
    site_packages = str(Path(workbench).parent.parent / "lib")
    for key in ("train", "eval"):  # the defaults, resolved to the installed package's copy
        assert cfg["data"][key].startswith(site_packages) and Path(cfg["data"][key]).is_file(), cfg["data"]


def test_demo_runs_on_the_tiny_model(installed):
    workbench, env, cwd = installed
    res = _run(
        [str(workbench), "demo", "--model", "tiny-glm4", "--steps", "2", "--runs-dir", "demo-runs"], cwd=cwd, env=env
    )
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr and "FutureWarning" not in res.stderr, res.stderr
    out = res.stdout
    assert "[demo] fine-tuning tiny-glm4" in out and "(2 steps" in out
    prompts = [p for p in (REPO / "data_samples/identity/heldout_prompts.txt").read_text().splitlines() if p.strip()]
    assert all(f"Q: {p.strip()}" in out for p in prompts)  # every held-out prompt, base and fine-tuned side by side
    run_dir = cwd / next(line for line in out.splitlines() if line.startswith("[demo] run directory:")).split()[3]
    assert run_dir.parent == cwd / "demo-runs" and (run_dir / "adapter" / "adapter_config.json").is_file()
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert [e["step"] for e in events if e["type"] == "step"] == [1, 2]
    assert events[-1]["type"] == "run_finished"


def test_the_installed_metadata_declares_the_event_exporters(installed):
    """pyproject's entry points reach the installed package's metadata: export-events finds csv and tensorboard."""
    workbench, env, cwd = installed
    run = cwd / "runs" / "from-wheel"  # trained by the test above; a run of its own when run alone
    if not run.is_dir():
        assert (
            _run(
                [
                    str(workbench),
                    "train",
                    "--model.source",
                    "tiny-glm4",
                    "--schedule.max_steps",
                    "2",
                    "--data.max_length",
                    "64",
                    "--output.run_name",
                    "from-wheel",
                ],
                cwd=cwd,
                env=env,
            ).returncode
            == 0
        )
    unknown = _run([str(workbench), "export-events", str(run), "--to", "nope"], cwd=cwd, env=env)
    assert unknown.returncode == 2 and "the installed exporters are csv, tensorboard;" in unknown.stderr, unknown.stderr
    exported = _run([str(workbench), "export-events", str(run), "--to", "tensorboard"], cwd=cwd, env=env)
    assert exported.returncode == 0, exported.stderr
    assert list((run / "tensorboard").glob("events.out.tfevents.*.workbench"))


def test_the_installed_package_ships_its_recipes(installed):
    """The recipes are package data: an installed user lists them and trains from one, its sample paths resolved
    into the installed package."""
    from workbench.config.recipes import recipe_names

    workbench, env, cwd = installed
    listed = _run([str(workbench), "recipes"], cwd=cwd, env=env)
    assert listed.returncode == 0, listed.stderr
    assert [line for line in listed.stdout.splitlines() if not line.startswith(" ")] == recipe_names()
    shown = _run([str(workbench), "train", "--recipe", "phone-actions-smollm2", "--print-config"], cwd=cwd, env=env)
    assert shown.returncode == 0, shown.stderr
    train_file = json.loads(shown.stdout)["data"]["train"]
    assert train_file.startswith(str(Path(workbench).parent.parent / "lib")) and Path(train_file).is_file()
