"""Our GRPO against TRL's ``GRPOTrainer``, side by side: the same model (the packaged SmolLM2-135M-Instruct with the
same LoRA), prompts (the rows of ``--data``), rewards (``workbench.rewards`` by name, wrapped for TRL), group size,
completion length, temperature, learning rate, clip range and KL coefficient, in fp32, for ``--steps`` optimizer
steps of one prompt x ``--group`` completions, over ``--seeds`` seeds each. Prints seconds per step (the median
step of each run, timed around the optimizer step by each trainer's own events) and the mean reward of the last
step, per seed and the ratio of the medians. The data order differs (each trainer shuffles with its own seed).

    python -m workbench.bench.grpo [--model smollm2-135m-instruct --steps 3 --seeds 3 --group 4 --max-new-tokens 16
                                    --rewards format,action_type]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_DATA = "data_samples/phone_actions_reasoning/train.jsonl"


def ours(args, seed: int, runs_dir: Path) -> dict:
    from ..config import load_config
    from ..events import iter_events
    from ..runs.layout import EVENTS_FILE
    from ..training import train

    cfg = load_config(
        None,
        {
            "model.source": args.model,
            "training.method": "grpo",
            "data.train": args.data,
            "data.eval": None,
            "precision.mode": "fp32",
            "lora.dropout": 0.0,
            "schedule.max_steps": args.steps,
            "schedule.micro_batch_size": 1,
            "schedule.learning_rate": args.lr,
            "schedule.warmup_steps": 0,
            "schedule.seed": seed,
            "rl.group_size": args.group,
            "rl.max_new_tokens": args.max_new_tokens,
            "rl.temperature": args.temperature,
            "rl.rewards": {name: 1.0 for name in args.rewards},
            "rl.kl_coef": args.kl,
            "rl.clip_range": args.clip,
            "diagnosis.enabled": False,
            "output.runs_dir": str(runs_dir),
            "output.run_name": f"ours-{seed}",
            "output.progress_bar": False,
        },
    )
    result = train(cfg)
    events = list(iter_events(result.run_dir / EVENTS_FILE))
    steps = [e.step_time_s for e in events if getattr(e, "type", "") == "step"]
    rewards = [e.reward_mean for e in events if getattr(e, "type", "") == "rollout"]
    return {"step_s": statistics.median(steps), "last_reward": rewards[-1], "rewards": rewards}


def trl(args, seed: int, out_dir: Path) -> dict:
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from ..eval.phone import PhoneActionsTask
    from ..eval.task_protocol import load_eval_examples
    from ..models.loading import _where
    from ..rewards import REWARD_FUNCTIONS
    from ..serve.remote import ModelReply

    examples = load_eval_examples(args.data)
    task = PhoneActionsTask()

    def wrap(name):
        def reward(prompts, completions, row, **_):
            out = []
            for completion, index in zip(completions, row):
                text = completion[0]["content"] if isinstance(completion, list) else completion
                verdict = task.score(examples[index], ModelReply(content=text))
                out.append(float(REWARD_FUNCTIONS[name](examples[index], text, verdict)))
            return out

        reward.__name__ = name
        return reward

    data = Dataset.from_list([{"prompt": e.messages, "row": i} for i, e in enumerate(examples)])
    where = _where(args.model)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(where, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(where)
    times: list[float] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, *a, **k):
            self.t0 = time.perf_counter()

        def on_step_end(self, *a, **k):
            times.append(time.perf_counter() - self.t0)

    config = GRPOConfig(
        output_dir=str(out_dir / f"trl-{seed}"),
        use_cpu=True,
        bf16=False,
        seed=seed,
        per_device_train_batch_size=args.group,
        num_generations=args.group,
        max_completion_length=args.max_new_tokens,
        temperature=args.temperature,
        top_k=0,
        top_p=1.0,
        learning_rate=args.lr,
        lr_scheduler_type="constant",
        beta=args.kl,
        epsilon=args.clip,
        max_steps=args.steps,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        disable_tqdm=True,
    )
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=[wrap(n) for n in args.rewards],
        args=config,
        train_dataset=data,
        peft_config=LoraConfig(
            r=16, lora_alpha=32, lora_dropout=0.0, target_modules="all-linear", task_type="CAUSAL_LM"
        ),
    )
    trainer.add_callback(Timer())
    with contextlib.redirect_stdout(sys.stderr):  # TRL prints its logs to stdout: keep --json's output JSON
        trainer.train()
    rewards = [log["reward"] for log in trainer.state.log_history if "reward" in log]
    return {"step_s": statistics.median(times), "last_reward": rewards[-1], "rewards": rewards}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--model",
        default="smollm2-135m-instruct",
        help="model source of both sides: the packaged "
        "model, or a Hugging Face directory such as an SFT run's merged model (runs/NAME/merged)",
    )
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--group", type=int, default=4)
    p.add_argument("--max-new-tokens", type=int, default=16)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--kl", type=float, default=0.0)
    p.add_argument("--clip", type=float, default=0.2)
    p.add_argument("--rewards", type=lambda s: s.split(","), default=["format", "action_type"])
    p.add_argument("--data", default=DEFAULT_DATA)
    p.add_argument("--only", choices=["ours", "trl"], default=None, help="run one side only")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    import torch

    torch.set_num_threads(1)  # both sides alike; the machine's other jobs share the cores
    from ..config.samples import resolve_sample_path

    args.data = resolve_sample_path(args.data)
    results: dict[str, list[dict]] = {"ours": [], "trl": []}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(args.seeds):
            for side, fn in (("ours", ours), ("trl", trl)):
                if args.only and side != args.only:
                    continue
                r = fn(args, seed, Path(tmp))
                results[side].append(r)
                print(
                    f"{side:4s} seed {seed}: {r['step_s']:.2f} s/step, reward after {args.steps} steps "
                    f"{r['last_reward']:.3f} (per step {', '.join(f'{x:.2f}' for x in r['rewards'])})",
                    file=sys.stderr,
                )
    summary = {
        side: {
            "step_s_median": statistics.median(r["step_s"] for r in rs),
            "last_reward_mean": statistics.fmean(r["last_reward"] for r in rs),
        }
        for side, rs in results.items()
        if rs
    }
    if len(summary) == 2:
        summary["steps_per_s_ratio_ours_over_trl"] = summary["trl"]["step_s_median"] / summary["ours"]["step_s_median"]
    if args.json:
        print(
            json.dumps(
                {"settings": {k: v for k, v in vars(args).items() if k != "json"}, "summary": summary, "runs": results},
                indent=1,
            )
        )
    else:
        for side, s in summary.items():
            print(f"{side}: {s}" if isinstance(s, dict) else f"{side}: {s:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
