"""A check to run first on a CUDA GPU: GLM-4.1V at the real widths, one 1080x2400 screenshot per row.

    python -m workbench.bench.gpu_check [--out runs/gpu_check.json] [--cases NAME,...] [--steps 3] [--budget-s 480]

**It has never run on a GPU.** It was written, and its CPU-side logic (the case list, the skip without a GPU, the
JSON report) tested, on machines without one; run it first when a CUDA GPU is lent, and fix what it finds.

What it does (at most ``--budget-s``, default 8 minutes, on one GPU; without CUDA it says so in one line, writes
nothing and exits 0): first runs the test suite's GPU-marked tests (``pytest -m gpu tests/``, from a source
checkout; ``--no-tests`` skips them), then writes a randomly initialised GLM-4.1V (``Glm4vConfig()``'s widths: hidden
4096, vocabulary 151,552, the vision tower's 1536) with 4 decoder and 4 vision layers to a temporary directory as a
local model (bf16 safetensors, the byte tokenizer with GLM-4.1V's markup, GLM-4.1V's published image processor
settings), renders the phone-screen rows at 1080x2400 (``data_samples/make_phone_screens.py``, 3,354 image tokens
each), then trains each case for ``--steps`` optimizer steps (micro-batch 1, LoRA r=16, gradient checkpointing):

* ``fp16-overflow``: fp16 AMP + GradScaler from a scale of 2^40, so the first steps overflow; the diagnosis replays
  them and its ``overflow_origin`` event must name a module;
* ``bf16-full-head`` / ``bf16-labels-head`` / ``bf16-chunked-head``: bf16 autocast, each ``memory.loss_head``;
* ``fsdp2``: FSDP2 ``fully_shard`` (zero3) at world size 1 (torchrun, one rank);
* ``deepspeed-zero3-offload``: DeepSpeed ZeRO-3 with optimizer and parameters offloaded to the CPU, world size 1.

Then the full-depth cases, AutoGLM-Phone-9B's real size (``Glm4vConfig()`` whole: 40 decoder layers, the 24-block
vision tower, 10.29 B parameters; random bf16 weights built on the GPU, written once to the temporary directory, no
download), one 1080x2400 screenshot a row, the process capped at an RTX 4090's 24,564 MiB
(``torch.cuda.set_per_process_memory_fraction``: a larger GPU behaves as a 4090 would, a smaller one is not one):

* ``9b-lora-bf16-24gib``: LoRA over the bf16 base, gradient checkpointing (the planner says it does not fit: an
  out-of-memory error is then the expected finding, recorded, not a failure of the check);
* ``9b-qlora-nf4-24gib``: LoRA over an nf4 base (quantization.base nf4), gradient checkpointing;
* ``9b-qlora-int8-24gib``: LoRA over an int8 base (quantization.base int8), gradient checkpointing.

Then the inference cases (``--inference also|only|no``; ``only`` fits a 15-minute lease): the built-in server started
with ``--device auto`` on CUDA answers a 1080x2400 screenshot request from a tiny GLM-4V and from the full-size random
GLM-4.1V in bf16 (where it was placed, in what dtype, the reply), and ``workbench eval --task heldout_loss`` of the
first training case's run on CUDA.

Per case: the peak CUDA memory the run's ``memory`` events report (``torch.cuda.max_memory_allocated``) against
the planner's per-GPU prediction for the same setting (``plan.predict_for_run`` with the screenshot) and whether
it said the setting fits the cap, the losses, seconds per step, overflow events and wall time; everything, the GPU
tests' outcome included, in one JSON file (``--out``, named on the last line). Exit status 1 when a GPU test failed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "data_samples"
TESTS = REPO / "tests"
DEFAULT_OUT = "runs/gpu_check.json"  # runs/ is git-ignored: a check leaves the checkout clean
IMAGE_SIZE = "1080x2400"
TEXT_LAYERS = VISION_LAYERS = 4
RTX4090_BYTES = 24564 * 2**20  # what an RTX 4090 reports (workbench.plan.planner.RTX4090_BYTES)


@dataclass(frozen=True)
class Case:
    name: str
    overrides: dict
    what: str
    needs: tuple = ()  # importable modules the case needs beyond torch
    expects_overflow: bool = False
    full_depth: bool = False  # AutoGLM-Phone-9B's every layer, not the 4-layer model
    cap_bytes: int | None = None  # the process's CUDA memory capped at this (a 24 GB card's)


CASES = (
    Case(
        "fp16-overflow",
        {"precision.mode": "fp16", "precision.init_scale": 2.0**40, "memory.loss_head": "chunked"},
        "fp16 AMP + GradScaler, a forced overflow (scale 2^40) traced to a module",
        expects_overflow=True,
    ),
    Case("bf16-full-head", {"precision.mode": "bf16", "memory.loss_head": "full"}, "bf16 autocast, full loss head"),
    Case(
        "bf16-labels-head",
        {"precision.mode": "bf16", "memory.loss_head": "labels"},
        "bf16 autocast, loss head at labelled positions",
    ),
    Case(
        "bf16-chunked-head",
        {"precision.mode": "bf16", "memory.loss_head": "chunked"},
        "bf16 autocast, chunked loss head (the default)",
    ),
    Case(
        "fsdp2",
        {
            "precision.mode": "bf16",
            "sharding.strategy": "fsdp",
            "sharding.fsdp_stage": "zero3",
            "sharding.nproc_per_node": 1,
        },
        "FSDP2 zero3 at world size 1, bf16, chunked head",
    ),
    Case(
        "deepspeed-zero3-offload",
        {
            "precision.mode": "bf16",
            "sharding.strategy": "deepspeed",
            "sharding.deepspeed_stage": 3,
            "sharding.offload": "optimizer+params",
            "sharding.nproc_per_node": 1,
        },
        "DeepSpeed ZeRO-3, optimizer and parameters offloaded to the CPU, world size 1, bf16, chunked head",
        needs=("deepspeed",),
    ),
    Case(
        "9b-lora-bf16-24gib",
        {"precision.mode": "bf16"},
        "AutoGLM-Phone-9B's full depth, LoRA over the bf16 base, checkpointing, capped at 24 GiB (planned not to fit)",
        full_depth=True,
        cap_bytes=RTX4090_BYTES,
    ),
    Case(
        "9b-qlora-nf4-24gib",
        {"precision.mode": "bf16", "quantization.base": "nf4"},
        "AutoGLM-Phone-9B's full depth, LoRA over an nf4 base, checkpointing, capped at 24 GiB",
        needs=("bitsandbytes",),
        full_depth=True,
        cap_bytes=RTX4090_BYTES,
    ),
    Case(
        "9b-qlora-int8-24gib",
        {"precision.mode": "bf16", "quantization.base": "int8"},
        "AutoGLM-Phone-9B's full depth, LoRA over an int8 base, checkpointing, capped at 24 GiB",
        needs=("bitsandbytes",),
        full_depth=True,
        cap_bytes=RTX4090_BYTES,
    ),
)


@dataclass(frozen=True)
class InferenceCase:
    """The built-in server on CUDA answering one screenshot request, or ``workbench eval`` of a run on CUDA."""

    name: str
    model: str  # tiny-glm4v | model (the 4-layer random GLM-4.1V at real widths) | model-9b (every layer)
    what: str
    dtype: str = "auto"
    evaluate_run: bool = False  # eval heldout_loss of the first training case's run on CUDA, not a server


INFERENCE_CASES = (
    InferenceCase(
        "serve-tiny-glm4v-cuda",
        "tiny-glm4v",
        "workbench serve --device auto on CUDA: a tiny GLM-4V answers "
        "a 1080x2400 screenshot request (device and dtype resolved as training's)",
    ),
    InferenceCase(
        "serve-9b-random-bf16",
        "model-9b",
        "the built-in server with AutoGLM-Phone-9B's full-size random "
        "GLM-4.1V in bf16 on CUDA answers a 1080x2400 screenshot request",
        dtype="bfloat16",
    ),
    InferenceCase(
        "eval-run-cuda", "model", "workbench eval --task heldout_loss of a run on CUDA (in process)", evaluate_run=True
    ),
)


def screenshot_request(size: tuple = (1080, 2400)) -> list[dict]:
    """One user turn with a phone screenshot (the simulated phone's home screen at ``size``) as a data: URL."""
    import base64
    import io

    from ..phone.sim import SimPhone

    buffer = io.BytesIO()
    SimPhone(size=size).screenshot().save(buffer, "PNG")
    url = "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()
    return [
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": url}},
                {"type": "text", "text": "Open Settings. What is the next action?"},
            ],
        }
    ]


def run_inference_case(case: InferenceCase, model_dir: Path | None, run_dir: Path | None) -> dict:
    """One inference case's figures: where the model answered, in what, the reply's length and its seconds."""
    from ..serve import start_server

    out: dict = {"case": case.name, "what": case.what}
    t0 = time.time()
    try:
        if case.evaluate_run:
            from ..eval.runner import evaluate

            report = evaluate("heldout_loss", runs=[str(run_dir)], device="cuda", progress=False, write=False)
            out["metrics"] = {m: by["default"] for m, by in report.metrics.items()}
        else:
            source = case.model if model_dir is None else str(model_dir)
            with start_server(source, device="cuda", dtype=case.dtype, max_context=8192, log_level="warning") as srv:
                out["placed"] = {"device": str(srv.served.device), "dtype": srv.served.dtype}
                reply = srv.openai_client(max_retries=0).chat.completions.create(
                    model=source, messages=screenshot_request(), max_tokens=16, temperature=0
                )
                out["reply"] = reply.choices[0].message.content
                out["usage"] = {
                    "prompt_tokens": reply.usage.prompt_tokens,
                    "completion_tokens": reply.usage.completion_tokens,
                }
    except Exception as err:  # noqa: BLE001 - one case failing must not lose the others' figures
        out["error"] = f"{type(err).__name__}: {err}"
    out["wall_s"] = round(time.time() - t0, 1)
    return out


def inference_cases(model_dirs: dict, tmp: Path, left_s: float, report: dict, out: str) -> list[dict]:
    """Every inference case within ``left_s`` seconds: the random GLM-4.1V directories the training cases wrote
    (written here when they did not run), the first finished training run for the eval case."""
    results, t0 = [], time.time()
    runs = sorted(p for p in (tmp / "runs").glob("*") if (p / "adapter").is_dir()) if (tmp / "runs").exists() else []
    for case in INFERENCE_CASES:
        if left_s - (time.time() - t0) < 60:
            results.append({"case": case.name, "what": case.what, "skipped": "time budget spent"})
            continue
        if case.evaluate_run and not runs:
            results.append({"case": case.name, "what": case.what, "skipped": "no training case finished a run"})
            continue
        full = case.model == "model-9b"
        if case.model != "tiny-glm4v" and full not in model_dirs:
            model_dirs[full] = write_model(tmp / case.model, full_depth=full)
        results.append(
            run_inference_case(
                case, model_dirs.get(full) if case.model != "tiny-glm4v" else None, runs[0] if runs else None
            )
        )
        print(f"  {case.name}: {results[-1].get('error') or 'done'} ({results[-1]['wall_s']} s)", flush=True)
        write_report(Path(out), {**report, "inference": results})
    return results


def cap_fraction(cap_bytes: int, total_bytes: int) -> float:
    """``torch.cuda.set_per_process_memory_fraction``'s argument that caps a GPU of ``total_bytes`` at ``cap_bytes``;
    ValueError when the GPU is smaller than the cap (it cannot stand in for the capped card)."""
    if cap_bytes > total_bytes:
        raise ValueError(
            f"this GPU has {total_bytes / 2**30:.1f} GiB, less than the {cap_bytes / 2**30:.1f} GiB cap: "
            "it cannot stand in for that card"
        )
    return cap_bytes / total_bytes


@contextlib.contextmanager
def memory_cap(cap_bytes: int | None):
    """This process's CUDA allocations capped at ``cap_bytes`` while inside (None: uncapped); the cap is lifted and
    the cache emptied on the way out, so the next case starts on the whole GPU."""
    import torch

    if cap_bytes is None:
        yield
        return
    torch.cuda.empty_cache()
    torch.cuda.set_per_process_memory_fraction(
        cap_fraction(cap_bytes, torch.cuda.get_device_properties(0).total_memory)
    )
    try:
        yield
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
        torch.cuda.empty_cache()


def skip_reason() -> str | None:
    """Why the whole check cannot run here, or None."""
    import torch

    if not torch.cuda.is_available():
        return (
            "no CUDA device here (torch.cuda.is_available() is False): this check needs one CUDA GPU with "
            "~40 GiB; nothing was run and nothing written"
        )
    return None


def case_skip_reason(case: Case) -> str | None:
    import importlib.util

    missing = [m for m in case.needs if importlib.util.find_spec(m) is None]
    return f"{', '.join(missing)} not installed" if missing else None


def select_cases(names: str | None) -> list[Case]:
    if not names:
        return list(CASES)
    by_name = {c.name: c for c in CASES}
    unknown = [n for n in names.split(",") if n not in by_name]
    if unknown:
        raise ValueError(f"--cases: unknown {', '.join(unknown)}; the cases are {', '.join(by_name)}")
    return [by_name[n] for n in names.split(",")]


def model_config(text_layers: int = TEXT_LAYERS, vision_layers: int = VISION_LAYERS):
    """GLM-4.1V's config at the real widths (``Glm4vConfig()``) with reduced depth (``None``: the real depth); the
    vision markup's token ids are the byte tokenizer's, the vocabulary stays 151,552."""
    from transformers import Glm4vConfig

    from ..models.tiny import VISION_TOKENS, byte_tokenizer
    from ..plan.arch import autoglm_phone_9b_config

    tok = byte_tokenizer(vision=True)
    ids = dict(
        zip(
            (
                "image_start_token_id",
                "image_token_id",
                "image_end_token_id",
                "video_start_token_id",
                "video_token_id",
                "video_end_token_id",
            ),
            tok.convert_tokens_to_ids(VISION_TOKENS),
        )
    )
    base = autoglm_phone_9b_config()  # its rotary settings: Glm4vConfig()'s alone fail the decoder's forward
    text = base.text_config.to_dict()
    text.update(
        num_hidden_layers=text_layers or text["num_hidden_layers"],
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
    )
    vision = base.vision_config.to_dict()
    vision.update(depth=vision_layers or vision["depth"])
    return Glm4vConfig(text_config=text, vision_config=vision, **ids), tok


def write_model(directory: Path, seed: int = 0, full_depth: bool = False) -> Path:
    """The random model as a local Hugging Face directory (what every strategy's worker can load); ``full_depth``:
    every layer of AutoGLM-Phone-9B (20.6 GB of bf16 safetensors)."""
    import torch
    from transformers import Glm4vForConditionalGeneration
    from transformers.models.glm4v.image_processing_pil_glm4v import Glm4vImageProcessorPil

    from ..plan.images import GLM41V_PREPROCESSOR

    cfg, tok = model_config(None, None) if full_depth else model_config()
    torch.manual_seed(seed)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        default = torch.get_default_dtype()
        torch.set_default_dtype(torch.bfloat16)  # built in bf16: the 9B's fp32 copy would not fit beside it
        try:
            model = Glm4vForConditionalGeneration(cfg)
        finally:
            torch.set_default_dtype(default)
    model.save_pretrained(directory)
    tok.save_pretrained(directory)
    p = GLM41V_PREPROCESSOR
    Glm4vImageProcessorPil(
        size=p["size"],
        patch_size=p["patch_size"],
        merge_size=p["merge_size"],
        temporal_patch_size=p["temporal_patch_size"],
    ).save_pretrained(directory)
    del model
    return directory


def write_rows(directory: Path) -> Path:
    """The phone-screen rows rendered at 1080x2400; returns the training JSONL."""
    subprocess.run(
        [sys.executable, str(SAMPLES / "make_phone_screens.py"), "--size", IMAGE_SIZE, "--out", str(directory)],
        check=True,
        capture_output=True,
    )
    return directory / "train.jsonl"


def case_config(case: Case, model_dir: Path, train_file: Path, runs_dir: Path, steps: int):
    from ..config import load_config

    return load_config(
        None,
        {
            "model.source": str(model_dir),
            "model.gradient_checkpointing": True,
            "data.train": str(train_file),
            "data.eval": None,
            "data.max_length": 4096,
            "schedule.micro_batch_size": 1,
            "schedule.max_steps": steps,
            "schedule.warmup_steps": 0,
            "schedule.eval_loss_every": 0,
            "lora.enabled": True,
            "lora.dropout": 0.0,
            "device": "cuda",
            "output.runs_dir": str(runs_dir),
            "output.run_name": case.name,
            "output.progress_bar": False,
            "output.memory_every": 1,
            "checkpointing.every_steps": 0,
            **case.overrides,
        },
    )


def row_shape(cfg) -> dict:
    """The longest row's text and labelled tokens (what the planner is given; the screenshot adds its own)."""
    from ..data import load_training_examples
    from ..models import load_tokenizer

    loaded = load_tokenizer(cfg.model.source)
    examples, _ = load_training_examples(
        cfg.data.train, loaded.tokenizer, cfg.data.max_length, processor=loaded.processor
    )
    image_id = loaded.tokenizer.convert_tokens_to_ids("<|image|>")
    longest = max(examples, key=lambda e: len(e.input_ids))
    images = sum(1 for t in longest.input_ids if t == image_id) + 2  # the image tokens and their two markers
    return {
        "tokens": len(longest.input_ids),
        "text_tokens": len(longest.input_ids) - images,
        "label_tokens": longest.target_tokens,
    }


def prediction(cfg, shape: dict) -> dict:
    import torch

    from ..plan import predict_for_run
    from ..precision import resolve_precision

    precision = resolve_precision(cfg, torch.device("cuda"))
    plan = predict_for_run(
        cfg,
        precision,
        world_size=1,
        seq_len=shape["text_tokens"],
        images_per_row=1,
        image_size=IMAGE_SIZE,
        label_tokens=shape["label_tokens"],
    )
    return {
        "label": plan.setting.label,
        "gpu_total": plan.gpu_total,
        "gpu": plan.gpu,
        "activations_peak": plan.activations.get("peak"),
    }


def measured(run_dir: Path) -> dict:
    """Figures a finished run's events hold: peak CUDA memory (every rank's memory events), losses, overflows."""
    from ..events import iter_events
    from ..runs.layout import EVENTS_FILE

    events = list(iter_events(run_dir / EVENTS_FILE, typed=False))
    peaks = [d.get("peak", 0) for e in events if e["type"] == "memory" for d in e.get("devices") or []]
    return {
        "cuda_peak": max(peaks) if peaks else None,
        "losses": [e["loss"] for e in events if e["type"] == "step"],
        "skipped_steps": sum(1 for e in events if e["type"] == "step" and e.get("skipped")),
        "overflow_origins": [
            {"step": e["step"], "phase": e.get("phase"), "module": e.get("module")}
            for e in events
            if e["type"] == "overflow_origin"
        ],
        "s_per_step": [e["step_time_s"] for e in events if e["type"] == "step" and "step_time_s" in e],
        "failed": next((e.get("error") for e in events if e["type"] == "run_failed"), None),
    }


def run_case(case: Case, cfg, shape: dict, timeout_s: float) -> dict:
    import torch

    from ..config import single_process
    from ..training import launch, train

    out: dict = {"case": case.name, "what": case.what}
    try:
        out["predicted"] = prediction(cfg, shape)
    except Exception as err:  # noqa: BLE001 - a planner gap is a finding, not a reason to skip the run
        out["predicted"] = {"error": f"{type(err).__name__}: {err}"}
    t0 = time.time()
    try:
        if single_process(cfg.sharding.strategy):
            torch.cuda.reset_peak_memory_stats()
            with memory_cap(case.cap_bytes):
                run_dir = train(cfg).run_dir
        else:
            handle = launch(cfg)
            status = handle.wait(timeout_s)
            run_dir = handle.run_dir
            if status != "finished":
                out["error"] = f"run {status}; see {run_dir}/worker.log"
        out.update(measured(run_dir))
    except Exception as err:  # noqa: BLE001 - one case failing must not lose the others' figures
        out["error"] = f"{type(err).__name__}: {err}"
    out["wall_s"] = round(time.time() - t0, 1)
    if case.cap_bytes is not None:
        out["cap_bytes"] = case.cap_bytes
        out["out_of_memory"] = "out of memory" in str(out.get("error") or out.get("failed") or "").lower()
        pred = out["predicted"].get("gpu_total")
        if pred:  # the planner's verdict on the capped card, against what happened
            out["planned_fit"] = pred <= case.cap_bytes
    pred = out["predicted"].get("gpu_total")
    if pred and out.get("cuda_peak"):
        out["measured_over_predicted"] = out["cuda_peak"] / pred
    if case.expects_overflow:
        out["overflow_named"] = any(o["module"] for o in out.get("overflow_origins", []))
    return out


def run_gpu_tests(paths=(TESTS,), timeout_s: float = 300) -> dict:
    """``pytest -m gpu`` over ``paths`` in a subprocess (the repository root as its folder): its exit status (0 all
    passed, 1 a failure, 5 none collected), summary line and last lines."""
    if not all(Path(p).exists() for p in paths):
        return {"skipped": f"no tests at {', '.join(map(str, paths))} (not a source checkout)"}
    cmd = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider", *map(str, paths)]
    t0 = time.time()
    try:
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"command": " ".join(cmd[1:]), "error": f"timed out after {timeout_s:g} s"}
    lines = (done.stdout + done.stderr).strip().splitlines()
    return {
        "command": " ".join(cmd[1:]),
        "rc": done.returncode,
        "summary": lines[-1] if lines else "",
        "tail": lines[-40:],
        "wall_s": round(time.time() - t0, 1),
    }


def gpu_tests_failed(result: dict) -> bool:
    return bool(result.get("error")) or result.get("rc") not in (None, 0, 5)


def write_report(path: Path, report: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1, default=str) + "\n", encoding="utf-8")


def summary(report: dict) -> str:
    tests = report.get("gpu_tests") or {}
    lines = [f"gpu tests (pytest -m gpu): {tests.get('error') or tests.get('skipped') or tests.get('summary')}"]
    lines += [f"{'case':<26}{'peak GiB':>10}{'planned GiB':>13}{'ratio':>8}{'s/step':>8}  notes"]
    for r in report.get("cases", []):
        peak, pred = r.get("cuda_peak"), (r.get("predicted") or {}).get("gpu_total")
        notes = r.get("error") or r.get("skipped") or ""
        if "planned_fit" in r:
            notes = (
                f"planned {'to fit' if r['planned_fit'] else 'not to fit'} 24 GiB, "
                f"{'ran out of memory' if r['out_of_memory'] else 'ran'}; {notes}"
            ).rstrip("; ")
        times = r.get("s_per_step") or []
        if "overflow_named" in r:
            notes += f" overflow named: {[o['module'] for o in r.get('overflow_origins', [])][:1] or 'NO'}"
        lines.append(
            f"{r['case']:<26}{peak / 2**30 if peak else float('nan'):>10.2f}"
            f"{pred / 2**30 if pred else float('nan'):>13.2f}{r.get('measured_over_predicted', float('nan')):>8.2f}"
            f"{times[-1] if times else float('nan'):>8.1f}  {notes}"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m workbench.bench.gpu_check",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", default=DEFAULT_OUT, help=f"the JSON report (default {DEFAULT_OUT})")
    p.add_argument("--no-tests", action="store_true", help="skip the test suite's GPU-marked tests")
    p.add_argument("--cases", help="comma-separated subset of: " + ", ".join(c.name for c in CASES))
    p.add_argument("--steps", type=int, default=3, help="optimizer steps per case")
    p.add_argument("--budget-s", type=float, default=480, help="stop starting cases after this many seconds")
    p.add_argument(
        "--inference",
        choices=("also", "only", "no"),
        default="also",
        help="the inference cases (" + ", ".join(c.name for c in INFERENCE_CASES) + "): after the training "
        "cases (also, the default), alone (only: a 15-minute lease) or not at all",
    )
    args = p.parse_args(argv)
    try:
        cases = select_cases(args.cases)
    except ValueError as err:
        p.error(str(err))
    report: dict = {
        "check": "gpu_check",
        "cases_planned": [c.name for c in CASES if c in cases],
        "image_size": IMAGE_SIZE,
        "text_layers": TEXT_LAYERS,
        "vision_layers": VISION_LAYERS,
    }
    reason = skip_reason()
    if reason:
        print(f"gpu_check: skipped: {reason}")
        return 0
    import torch

    report["device"] = torch.cuda.get_device_name(0)
    t0 = time.time()
    report["gpu_tests"] = {"skipped": "--no-tests"} if args.no_tests else run_gpu_tests(timeout_s=args.budget_s / 2)
    print(f"  gpu tests: {summary(report).splitlines()[0]}", flush=True)
    write_report(Path(args.out), report)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model_dirs: dict = {}
        train_file = write_rows(tmp / "screens")
        shape = None
        for case in cases if args.inference != "only" else ():
            left = args.budget_s - (time.time() - t0)
            why = case_skip_reason(case) or (None if left > 30 else f"time budget of {args.budget_s:g} s spent")
            if why:
                results.append({"case": case.name, "what": case.what, "skipped": why})
                continue
            if case.full_depth not in model_dirs:
                model_dirs[case.full_depth] = write_model(
                    tmp / ("model-9b" if case.full_depth else "model"), full_depth=case.full_depth
                )
            cfg = case_config(case, model_dirs[case.full_depth], train_file, tmp / "runs", args.steps)
            shape = shape or row_shape(cfg)  # the same tokenizer and rows at either depth
            report["row"] = shape
            results.append(run_case(case, cfg, shape, timeout_s=left))
            print(f"  {case.name}: {results[-1].get('error') or 'done'} ({results[-1]['wall_s']} s)", flush=True)
            report["cases"] = results
            write_report(Path(args.out), report)  # after every case: a later crash keeps what was measured
        if args.inference != "no":
            report["inference"] = inference_cases(model_dirs, tmp, args.budget_s - (time.time() - t0), report, args.out)
    report["cases"] = results
    report["wall_s"] = round(time.time() - t0, 1)
    write_report(Path(args.out), report)
    print(summary(report))
    print(f"wrote {args.out}")
    return 1 if gpu_tests_failed(report["gpu_tests"]) else 0


if __name__ == "__main__":
    sys.exit(main())
