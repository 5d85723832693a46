"""Serving benchmark: ``python -m workbench.bench.serve``.

Measures, on the same model and thread count:
  * ``model.generate`` called directly (the floor): time to first token and decode tokens/s;
  * this server at concurrency 1 (same figures, so the HTTP + scheduling overhead shows) and the
    aggregate throughput at concurrency N vs 1;
  * ``transformers serve`` (the peer) with the same requests, without and with continuous batching;
  * vLLM (``--engines ...,vllm``: its own environment, ``bash scripts/setup.sh --vllm``) given the same options.
Every request generates exactly ``--tokens`` tokens where the server allows it (``ignore_eos``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..serve.remote import ServerClient, chat_request

PROMPT = "Write a long story about a dragon who learns to paint."


def _direct(source: str, tokens: int, repeats: int, dtype: str = "float32") -> dict:
    import torch
    from transformers.generation.streamers import BaseStreamer

    from ..data.multimodal import encode_prompt
    from ..models import load_for_inference

    loaded = load_for_inference(source, dtype=dtype)
    x = torch.tensor([encode_prompt(loaded.tokenizer, [{"role": "user", "content": PROMPT}]).input_ids])

    class Stamps(BaseStreamer):
        def __init__(self):
            self.times = []

        def put(self, value):
            self.times.append(time.perf_counter())

        def end(self):
            pass

    runs = []
    for i in range(repeats + 1):  # the first run warms up
        s = Stamps()
        start = time.perf_counter()
        with torch.no_grad():
            loaded.model.generate(x, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False, streamer=s)
        # put() #0 is the prompt, #1 the first new token
        ttft, end = s.times[1] - start, s.times[-1]
        if i:
            runs.append({"ttft_s": ttft, "decode_tok_s": (tokens - 1) / (end - s.times[1]), "total_s": end - start})
    return _median(runs)


def _median(runs: list[dict]) -> dict:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def _stream_once(client: ServerClient, model: str, tokens: int, extra: dict) -> dict:
    body = chat_request(
        model,
        [{"role": "user", "content": PROMPT}],
        max_tokens=tokens,
        temperature=0,
        stream_options={"include_usage": True},
        **extra,
    )
    start = time.perf_counter()
    first = last = None
    chunks = 0
    usage = None
    for obj in client.stream_chat(body):
        if obj.get("usage"):
            usage = obj["usage"]
        if obj.get("choices") and obj["choices"][0]["delta"].get("content"):
            now = time.perf_counter()
            first = first or now
            last = now
            chunks += 1
    n = (usage or {}).get("completion_tokens") or chunks
    return {
        "ttft_s": first - start,
        "decode_tok_s": (n - 1) / (last - first) if last > first else float("nan"),
        "total_s": last - start,
        "tokens": n,
        "start": start,
        "end": last,
    }


def _client_figures(url: str, model: str, tokens: int, repeats: int, concurrency: int | list[int], extra: dict) -> dict:
    """c=1 (the median of ``repeats`` streams) and, for each concurrency, that many streams at once: aggregate and
    per-request tokens/s, median TTFT."""
    with ServerClient(url) as client:
        _stream_once(client, model, tokens, extra)  # warm-up
        single = [_stream_once(client, model, tokens, extra) for _ in range(repeats)]
        c1 = _median(single)
        c1_throughput = statistics.median(r["tokens"] / r["total_s"] for r in single)
        out = {"c1_ttft_s": c1["ttft_s"], "c1_decode_tok_s": c1["decode_tok_s"], "c1_tok_s": c1_throughput}
        done = list(single)
        for n in [concurrency] if isinstance(concurrency, int) else concurrency:
            with ThreadPoolExecutor(n) as pool:
                t0 = time.perf_counter()
                many = list(pool.map(lambda _: _stream_once(client, model, tokens, extra), range(n)))
                wall = max(r["end"] for r in many) - t0
            cn_throughput = sum(r["tokens"] for r in many) / wall
            out.update(
                {
                    f"c{n}_tok_s": cn_throughput,
                    f"c{n}_vs_c1": cn_throughput / c1_throughput,
                    f"c{n}_median_ttft_s": statistics.median(r["ttft_s"] for r in many),
                    f"c{n}_request_tok_s": statistics.median(r["tokens"] / (r["end"] - r["start"]) for r in many),
                }
            )
            done += many
    out["tokens_per_request"] = statistics.median(r["tokens"] for r in done)
    return out


def _vllm(model: str, dtype: str, tokens: int, repeats: int, concurrency: list[int], threads: int) -> dict:
    """vLLM's OpenAI server on the same model directory and dtype (workbench.serve.vllm builds its command)."""
    from ..config import config_from_dict
    from ..serve.config import ServeConfig
    from ..serve.vllm import start_vllm

    config = config_from_dict(
        {
            "engine": "vllm",
            "model": model,
            "dtype": dtype,
            "port": 0,
            "threads": threads,
            "max_batch": max(concurrency),
            "max_context": 2048,
        },
        ServeConfig,
    )
    with start_vllm(config) as srv:
        return _client_figures(srv.url, config.base_id, tokens, repeats, concurrency, {"ignore_eos": True})


def _exited(proc: subprocess.Popen):
    def check() -> None:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")

    return check


def _peer_model_dir(model_dir: str, workdir: Path) -> str:
    """transformers serve picks the model class from config.json's ``architectures``, which the cached
    SmolLM2 conversion lacks (it fails with "'NoneType' object is not subscriptable"): serve it from a
    copy of the directory (weights symlinked) whose config names the class the weights belong to."""
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    config = json.loads((Path(model_dir) / "config.json").read_text())
    if config.get("architectures"):
        return model_dir
    model_type = AutoConfig.from_pretrained(model_dir).model_type
    config["architectures"] = [MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type]]
    out = workdir / Path(model_dir).name
    out.mkdir(parents=True, exist_ok=True)
    for f in Path(model_dir).iterdir():
        if f.name != "config.json" and not (out / f.name).exists():
            (out / f.name).symlink_to(f.resolve())
    (out / "config.json").write_text(json.dumps(config, indent=2))
    return str(out)


def _peer(
    model_dir: str,
    tokens: int,
    repeats: int,
    concurrency: list[int],
    threads: int,
    continuous: bool,
    dtype: str = "float32",
) -> dict:
    from ..distributed.context import free_port

    port = free_port()
    exe = Path(sys.executable).with_name("transformers")
    args = [
        str(exe),
        "serve",
        model_dir,
        "--port",
        str(port),
        "--host",
        "127.0.0.1",
        "--device",
        "cpu",
        "--dtype",
        dtype,
        "--continuous-batching" if continuous else "--no-continuous-batching",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    log = open(os.devnull, "w")
    proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        with ServerClient(url) as client:
            client.wait_ready(300, check=_exited(proc))
        # transformers serve takes generation settings as a JSON generation_config string
        extra = {
            "generation_config": json.dumps({"min_new_tokens": tokens, "max_new_tokens": tokens, "do_sample": False})
        }
        return _client_figures(url, model_dir, tokens, repeats, concurrency, extra)
    finally:
        proc.terminate()
        proc.wait(30)


ENGINES = ("workbench", "vllm", "transformers")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m workbench.bench.serve", description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument(
        "--engines",
        default="workbench,transformers",
        help=f"comma-separated, of {', '.join(ENGINES)} (default: %(default)s)",
    )
    p.add_argument(
        "--dtype",
        default="float32",
        choices=["float32", "bfloat16", "float16"],
        help="weights dtype of every contender (default: %(default)s)",
    )
    p.add_argument("--tokens", type=int, default=64, help="tokens generated per request (default: %(default)s)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--concurrency", default="8", help="comma-separated concurrencies besides 1 (default: %(default)s)")
    p.add_argument("--threads", type=int, default=1, help="torch threads for every contender (default: %(default)s)")
    p.add_argument("--no-peer", action="store_true", help="skip transformers serve")
    p.add_argument("--json", action="store_true", help="print the figures as JSON only")
    args = p.parse_args(argv)
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    if args.no_peer and "transformers" in engines:
        engines.remove("transformers")
    if unknown := set(engines) - set(ENGINES):
        p.error(f"--engines: unknown {', '.join(sorted(unknown))} (known: {', '.join(ENGINES)})")
    concurrency = sorted({int(c) for c in args.concurrency.split(",") if c.strip()} - {1})

    import torch

    torch.set_num_threads(args.threads)
    results: dict = {"config": {**vars(args), "engines": engines, "concurrency": concurrency}}
    results["direct_generate"] = _direct(args.model, args.tokens, args.repeats, args.dtype)

    from ..serve import start_server

    with start_server(
        args.model,
        subprocess_mode=True,
        threads=args.threads,
        max_batch=max(8, *concurrency),
        dtype=args.dtype,
        log_level="error",
    ) as srv:
        if "workbench" in engines:
            results["workbench_serve"] = _client_figures(
                srv.url, args.model, args.tokens, args.repeats, concurrency, {"ignore_eos": True}
            )
        model_dir = srv.client.models()[args.model]["root"]  # the peer loads the same files
    if "vllm" in engines:
        try:
            results["vllm"] = _vllm(args.model, args.dtype, args.tokens, args.repeats, concurrency, args.threads)
        except Exception as err:  # a contender failing is a finding, not a crash of the benchmark
            results["vllm"] = {"error": f"{type(err).__name__}: {str(err)[-600:]}"}
    if "transformers" in engines:
        import tempfile

        model_dir = _peer_model_dir(model_dir, Path(tempfile.mkdtemp(prefix="wb-bench-")))
        for name, cb in (("transformers_serve", False), ("transformers_serve_cb", True)):
            try:
                results[name] = _peer(model_dir, args.tokens, args.repeats, concurrency, args.threads, cb, args.dtype)
            except Exception as err:
                results[name] = {"error": f"{type(err).__name__}: {str(err)[:300]}"}
    _compare(results, concurrency)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        _report(results, concurrency)
    return 0


def _compare(results: dict, concurrency: list[int]) -> None:
    """Our server against model.generate at c=1, and against vLLM at every concurrency (ratios of this one run)."""
    d, w, v = results["direct_generate"], results.get("workbench_serve"), results.get("vllm")
    if w:
        results["overhead_vs_generate"] = {
            "ttft": w["c1_ttft_s"] / d["ttft_s"] - 1,
            "decode_tok_s": 1 - w["c1_decode_tok_s"] / d["decode_tok_s"],
        }
    if w and v and "error" not in v:
        results["workbench_vs_vllm"] = {f"c{n}_tok_s": w[f"c{n}_tok_s"] / v[f"c{n}_tok_s"] for n in [1, *concurrency]}


def _report(r: dict, concurrency: list[int]) -> None:
    d, cfg = r["direct_generate"], r["config"]
    print(f"model {cfg['model']}, {cfg['dtype']}, {cfg['tokens']} tokens/request, threads {cfg['threads']}")
    head = "".join(f"{f'tok/s c={n}':>11}{'req tok/s':>10}{f'TTFT c={n}':>10}" for n in concurrency)
    print(f"{'':24} {'TTFT c=1':>10} {'decode tok/s c=1':>17} {'tok/s c=1':>10}{head}")
    print(f"{'model.generate direct':24} {d['ttft_s'] * 1000:8.0f}ms {d['decode_tok_s']:17.1f}")
    for name in ("workbench_serve", "vllm", "transformers_serve", "transformers_serve_cb"):
        if name not in r:
            continue
        x = r[name]
        if "error" in x:
            print(f"{name:24} failed: {x['error']}")
            continue
        cells = "".join(
            f"{x[f'c{n}_tok_s']:11.1f}{x[f'c{n}_request_tok_s']:10.1f}{x[f'c{n}_median_ttft_s'] * 1000:8.0f}ms"
            for n in concurrency
        )
        print(f"{name:24} {x['c1_ttft_s'] * 1000:8.0f}ms {x['c1_decode_tok_s']:17.1f} {x['c1_tok_s']:10.1f}{cells}")
    if o := r.get("overhead_vs_generate"):
        print(
            f"workbench serve vs model.generate at c=1: TTFT {o['ttft'] * 100:+.1f}%, "
            f"decode tok/s {-o['decode_tok_s'] * 100:+.1f}% (positive = faster than generate)"
        )
    if ratio := r.get("workbench_vs_vllm"):
        print("workbench serve / vLLM, aggregate tok/s: " + ", ".join(f"{k[:-6]} {v:.2f}" for k, v in ratio.items()))


if __name__ == "__main__":
    sys.exit(main())
