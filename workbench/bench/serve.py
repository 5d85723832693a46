"""Serving benchmark: ``python -m workbench.bench.serve``.

Measures, on the same model and thread count:
  * ``model.generate`` called directly (the floor): time to first token and decode tokens/s;
  * this server at concurrency 1 (same figures, so the HTTP + scheduling overhead shows) and the
    aggregate throughput at concurrency N vs 1;
  * ``transformers serve`` (the peer) with the same requests, without and with continuous batching.
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


def _direct(source: str, tokens: int, repeats: int) -> dict:
    import torch
    from transformers.generation.streamers import BaseStreamer

    from ..data.multimodal import encode_prompt
    from ..models import load_for_inference

    loaded = load_for_inference(source)
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
    body = chat_request(model, [{"role": "user", "content": PROMPT}], max_tokens=tokens, temperature=0,
                        stream_options={"include_usage": True}, **extra)
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
    return {"ttft_s": first - start, "decode_tok_s": (n - 1) / (last - first) if last > first else float("nan"),
            "total_s": last - start, "tokens": n, "start": start, "end": last}


def _client_figures(url: str, model: str, tokens: int, repeats: int, concurrency: int, extra: dict) -> dict:
    with ServerClient(url) as client:
        _stream_once(client, model, tokens, extra)  # warm-up
        single = [_stream_once(client, model, tokens, extra) for _ in range(repeats)]
        c1 = _median(single)
        c1_throughput = statistics.median(r["tokens"] / r["total_s"] for r in single)
        with ThreadPoolExecutor(concurrency) as pool:
            t0 = time.perf_counter()
            many = list(pool.map(lambda _: _stream_once(client, model, tokens, extra), range(concurrency)))
            wall = max(r["end"] for r in many) - t0
    cn_throughput = sum(r["tokens"] for r in many) / wall
    return {"c1_ttft_s": c1["ttft_s"], "c1_decode_tok_s": c1["decode_tok_s"], "c1_tok_s": c1_throughput,
            f"c{concurrency}_tok_s": cn_throughput, f"c{concurrency}_vs_c1": cn_throughput / c1_throughput,
            f"c{concurrency}_median_ttft_s": statistics.median(r["ttft_s"] for r in many),
            "tokens_per_request": statistics.median(r["tokens"] for r in single + many)}


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


def _peer(model_dir: str, tokens: int, repeats: int, concurrency: int, threads: int, continuous: bool) -> dict:
    from ..distributed.context import free_port

    port = free_port()
    exe = Path(sys.executable).with_name("transformers")
    args = [str(exe), "serve", model_dir, "--port", str(port), "--host", "127.0.0.1", "--device", "cpu",
            "--dtype", "float32", "--continuous-batching" if continuous else "--no-continuous-batching"]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    log = open(os.devnull, "w")
    proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        with ServerClient(url) as client:
            client.wait_ready(300, check=_exited(proc))
        # transformers serve takes generation settings as a JSON generation_config string
        extra = {"generation_config": json.dumps({"min_new_tokens": tokens, "max_new_tokens": tokens,
                                                  "do_sample": False})}
        return _client_figures(url, model_dir, tokens, repeats, concurrency, extra)
    finally:
        proc.terminate()
        proc.wait(30)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m workbench.bench.serve", description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument("--tokens", type=int, default=64, help="tokens generated per request (default: %(default)s)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--threads", type=int, default=1, help="torch threads for every contender (default: %(default)s)")
    p.add_argument("--no-peer", action="store_true", help="skip transformers serve")
    p.add_argument("--json", action="store_true", help="print the figures as JSON only")
    args = p.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    results: dict = {"config": vars(args)}
    results["direct_generate"] = _direct(args.model, args.tokens, args.repeats)

    from ..serve import start_server

    with start_server(args.model, subprocess_mode=True, threads=args.threads, max_batch=max(8, args.concurrency),
                      log_level="error") as srv:
        results["workbench_serve"] = _client_figures(srv.url, args.model, args.tokens, args.repeats,
                                                     args.concurrency, {"ignore_eos": True})
        model_dir = srv.client.models()[args.model]["root"]  # the peer loads the same files
    if not args.no_peer:
        import tempfile

        model_dir = _peer_model_dir(model_dir, Path(tempfile.mkdtemp(prefix="wb-bench-")))
        for name, cb in (("transformers_serve", False), ("transformers_serve_cb", True)):
            try:
                results[name] = _peer(model_dir, args.tokens, args.repeats, args.concurrency, args.threads, cb)
            except Exception as err:  # the peer failing is a finding, not a crash of the benchmark
                results[name] = {"error": f"{type(err).__name__}: {str(err)[:300]}"}

    d, w = results["direct_generate"], results["workbench_serve"]
    results["overhead_vs_generate"] = {"ttft": w["c1_ttft_s"] / d["ttft_s"] - 1,
                                       "decode_tok_s": 1 - w["c1_decode_tok_s"] / d["decode_tok_s"]}
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        _report(results, args.concurrency)
    return 0


def _report(r: dict, n: int) -> None:
    d = r["direct_generate"]
    print(f"model {r['config']['model']}, {r['config']['tokens']} tokens/request, threads {r['config']['threads']}")
    print(f"{'':24} {'TTFT c=1':>10} {'decode tok/s c=1':>17} {'tok/s c=1':>10} {f'tok/s c={n}':>11} {f'c={n}/c=1':>9}")
    print(f"{'model.generate direct':24} {d['ttft_s'] * 1000:8.0f}ms {d['decode_tok_s']:17.1f} {'':>10} {'':>11} {'':>9}")
    for name in ("workbench_serve", "transformers_serve", "transformers_serve_cb"):
        if name not in r:
            continue
        x = r[name]
        if "error" in x:
            print(f"{name:24} failed: {x['error']}")
            continue
        print(f"{name:24} {x['c1_ttft_s'] * 1000:8.0f}ms {x['c1_decode_tok_s']:17.1f} {x['c1_tok_s']:10.1f} "
              f"{x[f'c{n}_tok_s']:11.1f} {x[f'c{n}_vs_c1']:8.2f}x")
    o = r["overhead_vs_generate"]
    print(f"workbench serve vs model.generate at c=1: TTFT {o['ttft'] * 100:+.1f}%, "
          f"decode tok/s {-o['decode_tok_s'] * 100:+.1f}% (positive = faster than generate)")


if __name__ == "__main__":
    sys.exit(main())
