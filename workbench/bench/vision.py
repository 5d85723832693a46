"""Training steps/s of the tiny GLM-4V with and without screenshots: the same phone_screens rows, once with
their image parts (36 image tokens each at 112x252) and once with the images removed (text only).

    python -m workbench.bench.vision [--steps 20] [--warmup 3] [--micro-batch 4] [--precision fp32] [--size WxH]

Each condition is one engine run in this process (diagnosis off, events on), timed from its step events after
the warm-up steps; the two conditions alternate for ``--repeats`` rounds and the medians are printed with the
load average (the machine may be shared). ``--size`` renders the screenshots at another size first (e.g.
224x504) to see how the cost grows with image tokens.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

from ..config.files import read_jsonl
from ..config.samples import samples_dir

SAMPLES = samples_dir()


def _rows(folder: Path, with_images: bool, out: Path) -> Path:
    """The training rows of ``folder`` with absolute image paths, or with their image parts dropped."""
    lines = []
    for row in read_jsonl(folder / "train.jsonl"):
        user = row["messages"][0]
        if with_images:
            for part in user["content"]:
                if part["type"] == "image_url":
                    part["image_url"]["url"] = str(folder / part["image_url"]["url"])
        else:
            user["content"] = [p for p in user["content"] if p["type"] == "text"]
        lines.append(json.dumps(row))
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def _steps_per_s(args, train_path: Path, runs_dir: Path) -> tuple[float, float]:
    """(steps/s over the timed steps, image tokens per screenshot) of one engine run."""
    from ..config import load_config
    from ..events import iter_events
    from ..runs.layout import EVENTS_FILE
    from ..training import train

    cfg = load_config(
        None,
        {
            "model.source": "tiny-glm4v",
            "data.train": str(train_path),
            "data.eval": None,
            "data.max_length": 512,
            "precision.mode": args.precision,
            "schedule.max_steps": args.warmup + args.steps,
            "schedule.micro_batch_size": args.micro_batch,
            "schedule.warmup_steps": 0,
            "schedule.eval_loss_every": 0,
            "lora.dropout": 0.0,
            "diagnosis.enabled": False,
            "output.runs_dir": str(runs_dir),
            "output.progress_bar": False,
        },
    )
    result = train(cfg)
    events = list(iter_events(result.run_dir / EVENTS_FILE))
    steps = [e for e in events if e.type == "step"]
    timed = steps[args.warmup - 1 :]
    started = next(e for e in events if e.type == "run_started")
    stats = started.data["train"]
    return (len(timed) - 1) / (timed[-1].time - timed[0].time), stats["image_tokens"] / max(1, stats["images"])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"])
    p.add_argument("--size", default=None, help="render the screenshots at WxH first (default: the committed 112x252)")
    args = p.parse_args(argv)
    warnings.filterwarnings("ignore")
    with tempfile.TemporaryDirectory(prefix="wb-vision-bench-") as tmp:
        tmp = Path(tmp)
        folder = SAMPLES / "phone_screens"
        if args.size:
            folder = tmp / "screens"
            subprocess.run(
                [sys.executable, str(SAMPLES / "make_phone_screens.py"), "--size", args.size, "--out", str(folder)],
                check=True,
                capture_output=True,
            )
        paths = {
            "with images": _rows(folder, True, tmp / "images.jsonl"),
            "text only": _rows(folder, False, tmp / "text.jsonl"),
        }
        rates: dict = {name: [] for name in paths}
        image_tokens = 0.0
        for _ in range(args.repeats):
            for name, path in paths.items():
                rate, tokens = _steps_per_s(args, path, tmp / "runs")
                rates[name].append(rate)
                image_tokens = max(image_tokens, tokens)
    load = os.getloadavg()
    print(
        f"tiny-glm4v LoRA, {args.precision}, micro-batch {args.micro_batch}, {args.steps} timed steps after "
        f"{args.warmup} warm-up, {args.repeats} alternating runs per condition; {image_tokens:.0f} image tokens per "
        f"screenshot ({args.size or '112x252'})"
    )
    for name, values in rates.items():
        print(f"  {name:12s} {statistics.median(values):6.2f} steps/s (runs: {', '.join(f'{v:.2f}' for v in values)})")
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
