"""Exports of one run, measured side by side: size on disk, forward latency (1 x 128 tokens), greedy
generation tokens/s, held-out loss and greedy agreement with the fp32 adapter (the parity figures), and
the export's wall time.

    python -m workbench.bench.export runs/NAME [--targets merged,merged-bfloat16,int8,int8-weight,onnx,onnx-int8]

Each export is written with ``workbench.export.export`` under ``OUT`` (default RUN/exports-bench/) and
measured in this process, one at a time, after a warm-up; latency is the median of ``--repeats`` forwards.
Generation: 32 new tokens after a chat prompt, greedy; transformers models decode with their KV cache, the
ONNX runner has none (each token re-runs the whole sequence). A benchmark, not a test: it prints figures.
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

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
        prompt = tok.apply_chat_template([{"role": "user", "content": PROMPT}], tokenize=False, add_generation_prompt=True)
        p = tok(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
        gen = lambda: model.generate(p, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False)  # noqa: E731
        gen_s = _median_s(gen, 1)
    return latency, new_tokens / gen_s


def _measure_onnx(path: Path, repeats: int, new_tokens: int) -> tuple[float, float]:
    import numpy as np

    from ..export.onnx_runner import OnnxCausalLM

    runner = OnnxCausalLM(path)
    ids = np.random.randint(0, runner.tokenizer.vocab_size, (1, 128)).astype(np.int64)
    latency = _median_s(lambda: runner.logits(ids, np.ones_like(ids)), repeats)
    prompt = runner.tokenizer.apply_chat_template([{"role": "user", "content": PROMPT}], tokenize=False,
                                                  add_generation_prompt=True)
    p = runner.tokenizer(prompt, add_special_tokens=False)["input_ids"]
    runner.eos_ids = set()  # always generate new_tokens, as min_new_tokens does for the torch models
    gen_s = _median_s(lambda: runner.generate_ids(p, new_tokens), 1)
    return latency, new_tokens / gen_s


def main(argv: list[str] | None = None) -> int:
    from ..export import ParityFailed, export

    p = argparse.ArgumentParser(prog="python -m workbench.bench.export", description=__doc__.splitlines()[0])
    p.add_argument("run_dir")
    p.add_argument("--targets", default=",".join(TARGETS), help=f"comma-separated, of {', '.join(TARGETS)}")
    p.add_argument("--out", help="where the exports go (default RUN/exports-bench)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    out_root = Path(args.out) if args.out else Path(args.run_dir) / "exports-bench"
    header = (f"{'export':<16} {'MB':>7} {'fwd 1x128 ms':>12} {'gen tok/s':>9} {'loss':>7} {'ref loss':>8} "
              f"{'agree':>6} {'max|dlogit|':>11} {'export s':>8}")
    print(header, flush=True)
    for label in args.targets.split(","):
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
        print(f"{label:<16} {size / 1e6:7.1f} {latency * 1e3:12.1f} {tps:9.1f} {par['export_loss']:7.4f} "
              f"{par['reference_loss']:8.4f} {par['greedy_agreement']:6.3f} {par['max_logit_diff']:11.3g} {wall:8.1f}",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
