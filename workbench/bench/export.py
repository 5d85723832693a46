"""Exports of one run, measured side by side: size on disk, forward latency (1 x 128 tokens), greedy
generation tokens/s, held-out loss and greedy agreement with the fp32 adapter (the parity figures), and
the export's wall time; then, with ``--qat-runs``, quantization-aware training against post-training int8.

    python -m workbench.bench.export runs/NAME [--targets merged,merged-bfloat16,int8,int8-weight,onnx,onnx-int8]
    python -m workbench.bench.export runs/PLAIN --targets "" --qat-runs runs/QAT-int8-dynamic,runs/QAT-int8-weight

Each export is written with ``workbench.export.export`` under ``OUT`` (default RUN/exports-bench/) and
measured in this process, one at a time, after a warm-up; latency is the median of ``--repeats`` forwards.
Generation: 32 new tokens after a chat prompt, greedy, each with its KV cache (transformers' own; the ONNX
graph's past/present tensors). A benchmark, not a test: it prints figures.

QAT vs post-training int8 (``--qat-runs``): RUN is a plain LoRA run, each QAT run the same data and settings
with ``quantization.qat``. Every row is measured on RUN's held-out examples against RUN's fp32 adapter (the
model a float fine-tune would deploy): held-out loss and greedy agreement of RUN's int8 exports
(post-training quantization of the merge) and, per QAT run, its adapter in float, the QAT model as trained
and converted (int8 base layers + float adapter: what ``qat_converted`` reports) and its int8 export.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from ..data.multimodal import encode_prompt

TARGETS = {  # label -> export() arguments
    "merged": dict(target="merged"),
    "merged-bfloat16": dict(target="merged", dtype="bfloat16"),
    "int8": dict(target="int8", int8_mode="dynamic"),
    "int8-weight": dict(target="int8", int8_mode="weight"),
    "onnx": dict(target="onnx"),
    "onnx-int8": dict(target="onnx-int8"),
}
PROMPT = "Who exactly are you?"


def _median_s(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _measure_torch(path: Path, dtype: str, repeats: int, new_tokens: int) -> tuple[float, float]:
    from ..models import load_for_inference

    loaded = load_for_inference(str(path), dtype=dtype)
    model, tok = loaded.model, loaded.tokenizer
    ids = torch.randint(0, tok.vocab_size, (1, 128))
    with torch.no_grad():
        latency = _median_s(lambda: model(input_ids=ids, use_cache=False), repeats)
        p = torch.tensor([encode_prompt(tok, [{"role": "user", "content": PROMPT}]).input_ids])
        gen = lambda: model.generate(p, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False)  # noqa: E731
        gen_s = _median_s(gen, 1)
    return latency, new_tokens / gen_s


def _measure_onnx(path: Path, repeats: int, new_tokens: int) -> tuple[float, float]:
    import numpy as np

    from ..export.onnx_runner import OnnxCausalLM

    runner = OnnxCausalLM(path)
    ids = np.random.randint(0, runner.tokenizer.vocab_size, (1, 128)).astype(np.int64)
    latency = _median_s(lambda: runner.logits(ids, np.ones_like(ids)), repeats)
    p = encode_prompt(runner.tokenizer, [{"role": "user", "content": PROMPT}]).input_ids
    runner.eos_ids = set()  # always generate new_tokens, as min_new_tokens does for the torch models
    gen_s = _median_s(lambda: runner.generate_ids(p, new_tokens), 1)
    return latency, new_tokens / gen_s


PTQ_LABEL = {"dynamic": "int8", "weight": "int8-weight"}  # where the exports table above puts them: made once
QAT_EXPORT_MODE = {"int8-dynamic": "dynamic", "int8-weight": "weight"}  # QAT scheme -> int8 export of the same kind


def _export_once(run_dir: Path, out: Path, **kw):
    """The export at ``out`` when a passed one of this run and kind is there already (the table above made it),
    else a new one."""
    from ..export import export, read_manifest

    manifest = out / "manifest.json"
    if manifest.is_file():
        m = read_manifest(out)
        if (
            m["status"] == "passed"
            and m["source_run"] == str(run_dir.resolve())
            and m["target"] == kw["target"]
            and all(m["options"].get(k) == v for k, v in kw.items() if k != "target")
        ):
            from ..export.exporter import ExportResult

            return ExportResult(out, m)
    return export(run_dir, out=out, overwrite=True, **kw)


def qat_comparison(
    plain_run: str | Path, qat_runs: list[str | Path], out_root: Path, max_examples: int = 16
) -> list[dict]:
    """Rows of (label, held-out loss, greedy agreement with the plain run's fp32 adapter, max |logit diff|),
    printed as they are measured."""
    from ..export import ParityFailed, ParityGate
    from ..export.exporter import parity_batches
    from ..export.parity import compare, reference_logits, torch_logits
    from ..export.source import load_reference, open_run
    from ..export.targets import TargetSpec, read_export
    from ..precision.qat import convert_qat, prepare_qat

    plain = open_run(plain_run)
    ref = load_reference(plain)
    batches = parity_batches(plain.config.data.eval, plain, ref, max_examples)
    reference = reference_logits(torch_logits(ref.model), batches)
    del ref
    measure_only = ParityGate(float("inf"), 0.0, float("inf"))  # figures, no verdict
    rows: list[dict] = []

    def row(label: str, logits, note: str = "") -> None:
        r = compare(reference, logits, batches, measure_only)
        if not rows:  # the reference itself heads the table
            print(
                f"\nQAT vs post-training int8: held-out loss and greedy agreement with {plain.run_dir.name}'s fp32 adapter "
                f"({r.positions} positions of {r.examples} examples of {Path(plain.config.data.eval).name})",
                flush=True,
            )
            print(f"{'model':<58} {'loss':>7} {'agree':>6} {'max|dlogit|':>11}", flush=True)
            rows.append(
                {
                    "label": f"{plain.run_dir.name}: fp32 adapter (the reference)",
                    "loss": r.reference_loss,
                    "agreement": 1.0,
                    "max_logit_diff": 0.0,
                }
            )
            print(f"{rows[0]['label']:<58} {r.reference_loss:7.4f} {1.0:6.3f} {0.0:11.3g}", flush=True)
        rows.append(
            {"label": label, "loss": r.export_loss, "agreement": r.agreement, "max_logit_diff": r.max_logit_diff}
        )
        print(f"{label:<58} {r.export_loss:7.4f} {r.agreement:6.3f} {r.max_logit_diff:11.3g}  {note}", flush=True)

    def export_row(label: str, run_dir: Path, out: Path, mode: str, note: str) -> None:
        """An int8 export's row; one that misses its default gate is measured all the same, from OUT.failed."""
        try:
            where = _export_once(run_dir, out, target="int8", int8_mode=mode).path
        except ParityFailed as err:  # the figures still count here
            where, note = err.where, f"{note}; FAILED its default gate: {'; '.join(err.report.failures())}"
        row(label, read_export(where, TargetSpec("int8", int8_mode=mode)), note)

    for mode in ("dynamic", "weight"):
        export_row(
            f"{plain.run_dir.name}: post-training int8-{mode} export",
            plain.run_dir,
            out_root / PTQ_LABEL[mode],
            mode,
            "merged, then quantized",
        )
    for qat_run in qat_runs:
        source = open_run(qat_run)
        scheme = source.config.quantization.qat
        name = f"{source.run_dir.name} (QAT {scheme})"
        qat = load_reference(source)
        row(f"{name}: adapter in float", torch_logits(qat.model))
        prepare_qat(qat.model, scheme)
        convert_qat(qat.model, scheme)
        row(f"{name}: converted, as trained", torch_logits(qat.model), "int8 base layers + float adapter")
        del qat
        if scheme in QAT_EXPORT_MODE:
            mode = QAT_EXPORT_MODE[scheme]
            export_row(
                f"{name}: int8-{mode} export",
                source.run_dir,
                out_root / f"{source.run_dir.name}-int8-{mode}",
                mode,
                "merged, then quantized",
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    from ..export import ParityFailed, export

    p = argparse.ArgumentParser(prog="python -m workbench.bench.export", description=__doc__.splitlines()[0])
    p.add_argument("run_dir")
    p.add_argument("--targets", default=",".join(TARGETS), help=f"comma-separated, of {', '.join(TARGETS)}")
    p.add_argument("--out", help="where the exports go (default RUN/exports-bench)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    p.add_argument(
        "--qat-runs",
        default="",
        help="comma-separated QAT runs of RUN's data and settings: print QAT vs "
        "post-training int8 (held-out loss, greedy agreement with RUN's fp32 adapter)",
    )
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    out_root = Path(args.out) if args.out else Path(args.run_dir) / "exports-bench"
    header = (
        f"{'export':<16} {'MB':>7} {'fwd 1x128 ms':>12} {'gen tok/s':>9} {'loss':>7} {'ref loss':>8} "
        f"{'agree':>6} {'max|dlogit|':>11} {'export s':>8}"
    )
    targets = [t for t in args.targets.split(",") if t]
    if targets:
        print(header, flush=True)
    for label in targets:
        kw = TARGETS[label]
        t = time.perf_counter()
        try:
            result = export(args.run_dir, out=out_root / label, overwrite=True, **kw)
        except ParityFailed as err:  # a figure to report, not a reason to stop measuring the others
            print(f"{label:<16} FAILED: {err}", flush=True)
            continue
        wall = time.perf_counter() - t
        if kw["target"].startswith("onnx"):
            latency, tps = _measure_onnx(result.path, args.repeats, args.new_tokens)
        else:
            latency, tps = _measure_torch(result.path, kw.get("dtype", "float32"), args.repeats, args.new_tokens)
        par, size = result.parity, result.manifest["sizes"]["total_bytes"]
        # one row as each export is measured: a long benchmark interrupted still leaves its figures
        print(
            f"{label:<16} {size / 1e6:7.1f} {latency * 1e3:12.1f} {tps:9.1f} {par['export_loss']:7.4f} "
            f"{par['reference_loss']:8.4f} {par['greedy_agreement']:6.3f} {par['max_logit_diff']:11.3g} {wall:8.1f}",
            flush=True,
        )
    if args.qat_runs:
        qat_comparison(args.run_dir, [r for r in args.qat_runs.split(",") if r], out_root)
    print(f"exports in {out_root}")  # where this bench wrote (--out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
