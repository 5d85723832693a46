"""export(): a run's adapter -> a deployable directory with a manifest, accepted only if it passes parity.

The export is written to ``OUT.partial``, read back from disk and compared with the unexported model
(fp32 base + adapter) on held-out examples. It is renamed to ``OUT`` only when the figures are inside
the gate; otherwise it is left as ``OUT.failed`` (manifest included, for inspection) and ParityFailed
carries the figures.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..config.packages import missing_packages
from ..forward import collated, load_heldout
from ..models.processor import save_processor_files
from ..runs.layout import exports_dir
from .parity import (
    ParityFailed,
    ParityGate,
    ParityReport,
    ReferenceActions,
    compare,
    reference_logits,
    torch_logits,
)
from .source import ExportInputError, Reference, RunSource, load_reference, open_run
from .targets import DTYPES, INT8_MODES, TARGET_MODULES, TARGETS, WRITERS, TargetSpec, read_export, unsupported_reason

MANIFEST = "manifest.json"
MANIFEST_VERSION = 1
DEFAULT_MAX_EXAMPLES = 16
# what export() does, in order (its ``progress`` callback names them)
PHASES = (
    "loading the base and the adapter",
    "computing the reference logits",
    "writing the export",
    "reading it back and checking parity",
)


@dataclass
class ExportResult:
    path: Path
    manifest: dict

    @property
    def parity(self) -> dict:
        return self.manifest["parity"]


def _spec(target: str, dtype: str, int8_mode: str, quant: str = "f16") -> TargetSpec:
    from .targets import GGUF_QUANTS

    problems = []
    if target not in TARGETS:
        problems.append(f"unsupported target {target!r}: choose one of {', '.join(TARGETS)}")
    if dtype not in DTYPES:
        problems.append(f"dtype {dtype!r}: choose one of {', '.join(DTYPES)}")
    elif dtype != "float32" and target != "merged":
        problems.append(f"dtype {dtype} applies to --target merged only ({target} starts from the fp32 merge)")
    if int8_mode not in INT8_MODES:
        problems.append(f"int8 mode {int8_mode!r}: choose one of {', '.join(INT8_MODES)}")
    if quant not in GGUF_QUANTS:
        problems.append(f"quant {quant!r}: choose one of {', '.join(GGUF_QUANTS)}")
    elif quant != "f16" and target != "gguf":
        problems.append(f"quant {quant} applies to --target gguf only (gguf-lora: f16)")
    if target.startswith("gguf"):
        problems += llama_cpp_problems()
    if target in TARGETS:
        problems += [
            f"--target {target} needs the export extra: {msg}" for msg in missing_packages(*TARGET_MODULES[target])
        ]
    if problems:
        raise ExportInputError("; ".join(problems))
    return TargetSpec(target, dtype, int8_mode, quant)


def writer(spec: TargetSpec) -> Callable:
    """The function that writes ``spec``'s export (the GGUF targets' live in export.gguf)."""
    if spec.target.startswith("gguf"):
        from .gguf import write_gguf, write_gguf_lora

        return write_gguf_lora if spec.target == "gguf-lora" else write_gguf
    return WRITERS[spec.target]


def llama_cpp_problems() -> list[str]:
    """The one line saying what to run when llama.cpp is not set up (checked before any work starts)."""
    from ..serve.llama_cpp import LlamaCppMissing, find_llama_cpp

    try:
        find_llama_cpp()
    except LlamaCppMissing as err:
        return [f"--target gguf needs {err}"]
    return []


def _phase(progress: Callable[[int, str], None] | None, i: int) -> None:
    if progress is not None:
        progress(i, PHASES[i - 1])


def _files(directory: Path) -> dict[str, int]:
    return {str(p.relative_to(directory)): p.stat().st_size for p in sorted(directory.rglob("*")) if p.is_file()}


def _versions(spec: TargetSpec) -> dict:
    import importlib.metadata as md

    out = {}
    if spec.target.startswith("gguf"):
        from ..serve.llama_cpp import find_llama_cpp

        out["llama.cpp"] = f"{find_llama_cpp().version}: convert_hf_to_gguf.py, llama-quantize, llama-server"
    for dist in ("torch", "transformers", "peft", "torchao", "onnx", "onnxruntime", "onnxscript"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            pass  # not installed: the export did not use it
    return out


def export(
    run_dir: str | Path,
    target: str = "merged",
    out: str | Path | None = None,
    *,
    dtype: str = "float32",
    int8_mode: str = "dynamic",
    quant: str = "f16",
    heldout: str | Path | None = None,
    max_examples: int = DEFAULT_MAX_EXAMPLES,
    gate: ParityGate | None = None,
    overwrite: bool = False,
    progress: Callable[[int, str], None] | None = None,
    device: str = "auto",
) -> ExportResult:
    """Export a run's adapter (merged, int8 or ONNX), measure its parity with the run and write its manifest.

    Args:
        run_dir: the finished run.
        target: ``merged``, ``int8`` or ``onnx`` (``export.targets``).
        out: the export's directory (default ``RUN/exports/<target>``); overwrite: replace one that exists.
        dtype: a merged export's dtype; int8_mode: ``dynamic`` or ``weight`` (an int8 export's activations);
            quant: a gguf export's quantization (``f16``, ``q8_0``, ``q4_k_m``).
        heldout: the JSONL parity is measured on (default: the run's data.eval); max_examples: its first rows.
        gate: the parity bounds (default: the target's, ``TargetSpec.default_gate``).
        progress: ``progress(i, what)`` as each of the PHASES starts (i counts from 1).
        device: where the fp32 reference and a merged export compute their parity logits (``reference_device``).

    Returns:
        The ``ExportResult`` (path, manifest, parity figures); ExportInputError for a run, target or option that
        cannot be exported, ParityFailed (with the figures) when the written export misses its gate.
    """
    spec = _spec(target, dtype, int8_mode, quant)
    source = open_run(run_dir)
    out = Path(out) if out else exports_dir(source.run_dir) / spec.name
    if out.exists() and not overwrite:
        raise ExportInputError(f"{out} exists: choose another output directory, or overwrite it (--force)")
    held = _heldout_file(source, heldout, max_examples)

    t0 = time.perf_counter()
    _phase(progress, 1)
    where = reference_device(source, device)
    ref = load_reference(source, where)
    if reason := unsupported_reason(spec, ref.family):
        raise ExportInputError(reason)
    batches = parity_batches(held, source, ref, max_examples)
    _phase(progress, 2)
    reference = reference_logits(torch_logits(ref.model), batches)
    actions = reference_actions(spec, ref, held, source, max_examples)
    gate = gate or spec.default_gate()

    partial, failed = out.with_name(out.name + ".partial"), out.with_name(out.name + ".failed")
    for stale in (partial, failed):
        shutil.rmtree(stale, ignore_errors=True)
    partial.mkdir(parents=True)
    reference_bytes, write_s = _write(spec, ref, partial, progress)
    t_check = time.perf_counter()
    _phase(progress, 4)
    report = check_parity(reference, partial, spec, batches, gate, where, source, held, max_examples, actions)
    manifest = _manifest(
        source,
        ref,
        spec,
        partial,
        report,
        heldout=held,
        reference_bytes=reference_bytes,
        wall={"write_s": write_s, "parity_s": time.perf_counter() - t_check, "total_s": time.perf_counter() - t0},
    )
    (partial / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    if not report.passed:
        partial.rename(failed)
        raise ParityFailed(failed, report)
    if out.exists():
        shutil.rmtree(out)
    partial.rename(out)
    return ExportResult(out, manifest)


def check_parity(
    reference: list,
    export_dir: Path,
    spec: TargetSpec,
    batches: list[dict],
    gate: ParityGate,
    where,
    source: RunSource,
    heldout: Path,
    max_examples: int,
    actions: ReferenceActions | None = None,
) -> ParityReport:
    """The written export, read back as it will run (a GGUF: served by llama-server, its screenshots through the
    mmproj written beside it), against the reference; a GGUF's greedy actions against ``actions``, the reference's."""
    if spec.target.startswith("gguf"):
        from .gguf import LORA_FILE, gguf_file, gguf_parity, mmproj_file, screenshot_prompts

        lora = export_dir / LORA_FILE
        return gguf_parity(
            reference,
            batches,
            gguf_file(export_dir, spec.quant),
            gate,
            mmproj=mmproj_file(export_dir),
            lora=lora if spec.target == "gguf-lora" else None,
            prompts=screenshot_prompts(Path(heldout), max_examples, source.config.data.system_prompt),
            reference_actions=actions,
        )
    return compare(reference, read_export(export_dir, spec, where), batches, gate)


def _write(spec: TargetSpec, ref: Reference, partial: Path, progress) -> tuple[int, float]:
    """The export's files into ``partial``: (the fp32 bytes of the model it was written from, seconds writing)."""
    # a GGUF LoRA is written from the base without its adapter, and the adapter itself
    merged = ref.adapter_and_base() if spec.target == "gguf-lora" else ref.merged_copy()
    reference_bytes = sum(p.numel() * p.element_size() for p in getattr(merged, "base", merged).parameters())
    t_write = time.perf_counter()
    _phase(progress, 3)
    if ref.processor is not None:  # a vision-language export reads images without the workbench too
        save_processor_files(ref.processor, partial)
    writer(spec)(merged, ref.tokenizer, ref.base_path, partial, spec)
    return reference_bytes, time.perf_counter() - t_write


def _heldout_file(source: RunSource, heldout: str | Path | None, max_examples: int) -> Path:
    """The held-out JSONL parity is measured on: ``heldout``, else the run's data.eval; ExportInputError naming the
    flag when there is none, it is missing, or ``max_examples`` asks for none of it."""
    held = Path(heldout) if heldout else (Path(source.config.data.eval) if source.config.data.eval else None)
    if held is None:
        raise ExportInputError(
            f"{source.run_dir} was trained without data.eval: name the held-out JSONL parity is "
            "measured on (--heldout FILE)"
        )
    if not held.is_file():
        raise ExportInputError(f"held-out file {str(held)!r} not found (--heldout FILE)")
    if max_examples < 1:
        raise ExportInputError(f"max_examples must be at least 1 (got {max_examples})")
    return held


def reference_actions(
    spec: TargetSpec, ref: Reference, heldout: Path, source: RunSource, max_examples: int
) -> ReferenceActions | None:
    """A GGUF export's action parity (``export.parity.ActionParity``): the reference's greedy replies to the held-out
    rows whose answer is a phone action; None for other targets or when no row's answer is one."""
    if not spec.target.startswith("gguf"):
        return None
    from ..forward.generate import greedy_replies
    from .gguf import action_max_tokens, action_rows

    rows = action_rows(heldout, max_examples, source.config.data.system_prompt)
    if not rows:
        return None
    n = action_max_tokens(ref.tokenizer, rows)
    replies = greedy_replies(ref.model, ref.tokenizer, [r.prompt for r in rows], n, processor=ref.processor)
    return ReferenceActions(rows, replies, n)


def reference_device(source: RunSource, device: str = "auto"):
    """Where the fp32 reference of ``source`` computes: ``device`` resolved as a server resolves it
    (``serve.registry.placement``); ExportInputError, before loading, when the planner says the fp32 model does not fit
    there."""
    from ..config import ConfigError
    from ..plan.inference import fit_problem
    from ..serve.registry import placement

    try:
        where, _ = placement(device, "float32")
    except ConfigError as err:
        raise ExportInputError(str(err)) from None
    if problem := fit_problem(source.base, "float32", where):
        raise ExportInputError(f"the fp32 reference parity is measured against cannot be loaded: {problem}")
    return where


def parity_batches(
    path: str | Path, source: RunSource, ref: Reference, max_examples: int, batch_size: int = 4
) -> list[dict]:
    """The first ``max_examples`` examples of a held-out file as the run's eval batches them: its truncation and
    system prompt, the base's processor for rows with screenshots."""
    data = source.config.data
    examples = load_heldout(path, ref.tokenizer, data.max_length, ref.processor, data.system_prompt, max_examples)
    return collated(examples, ref.tokenizer.pad_token_id, batch_size)


def _manifest(
    source,
    ref,
    spec: TargetSpec,
    directory: Path,
    report: ParityReport,
    *,
    heldout: Path,
    reference_bytes: int,
    wall: dict,
) -> dict:
    files = _files(directory)
    weights = sum(
        size for name, size in files.items() if name.endswith((".safetensors", ".onnx", ".onnx.data", ".bin", ".gguf"))
    )
    return {
        "format_version": MANIFEST_VERSION,
        "status": "passed" if report.passed else "failed parity",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "target": spec.target,
        "precision": spec.precision,
        "options": {"dtype": spec.dtype, "int8_mode": spec.int8_mode, "quant": spec.quant},
        "source_run": str(source.run_dir.resolve()),
        "adapter": str(source.adapter_dir.resolve()),
        "base": source.base,
        "base_path": ref.base_path,
        "family": ref.family,
        "sizes": {
            "total_bytes": sum(files.values()),
            "weights_bytes": weights,
            "reference_fp32_bytes": reference_bytes,
            "files": files,
        },
        "parity": {
            **report.to_dict(),
            "heldout": str(Path(heldout).resolve()),
            "reference": "fp32 base + adapter (unmerged peft model)",
        },
        "wall_s": wall,
        "versions": _versions(spec),
    }


def read_manifest(export_dir: str | Path) -> dict:
    path = Path(export_dir) / MANIFEST
    if not path.is_file():
        raise ExportInputError(f"{str(export_dir)!r} is not an export (it holds no {MANIFEST})")
    return json.loads(path.read_text())


def verify(export_dir: str | Path, max_examples: int | None = None, device: str = "auto") -> ParityReport:
    """Re-check an existing export against its source run, on the held-out data and gate its manifest names
    (e.g. after copying it, or to catch a corrupted file). Raises ParityFailed with the figures."""
    export_dir = Path(export_dir)
    m = read_manifest(export_dir)
    spec = TargetSpec(m["target"], **m["options"])
    source = open_run(m["source_run"])
    where = reference_device(source, device)
    ref = load_reference(source, where)
    parity = m["parity"]
    examples = max_examples or parity["examples"]
    heldout = Path(parity["heldout"])
    batches = parity_batches(heldout, source, ref, examples)
    report = check_parity(
        reference_logits(torch_logits(ref.model), batches),
        export_dir,
        spec,
        batches,
        ParityGate(**parity["gate"]),
        where,
        source,
        heldout,
        examples,
        reference_actions(spec, ref, heldout, source, examples),
    )
    if not report.passed:
        raise ParityFailed(export_dir, report)
    return report


def run_exports(run_dir: str | Path) -> list[tuple[Path, dict]]:
    """(directory, manifest) of each export under ``RUN/exports/``, failed ones (``*.failed``) included and
    unfinished ones (``*.partial``, no manifest yet) left out, in name order."""
    root = exports_dir(run_dir)
    if not root.is_dir():
        return []
    return [(d, json.loads((d / MANIFEST).read_text())) for d in sorted(root.iterdir()) if (d / MANIFEST).is_file()]
