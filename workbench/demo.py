"""`workbench demo`: fine-tune the packaged model to introduce itself as PhoneMate, then show base and
fine-tuned answers to held-out prompts side by side."""

from __future__ import annotations

import shutil
import textwrap
import time
import unicodedata
from pathlib import Path

from .config import RunConfig
from .config.recipes import load_recipe
from .config.samples import samples_dir
from .runs.layout import EVENTS_FILE, run_config, trained_weights

SAMPLES = samples_dir()
RECIPE = "identity-demo"  # the demo's settings: workbench/config/recipes/identity-demo.yaml


def demo_config(steps: int | None = None, runs_dir: str = "runs", model: str | None = None) -> RunConfig:
    """The identity-demo recipe, in ``runs_dir`` under a demo-TIMESTAMP name; ``steps`` and ``model`` change it."""
    recipe = load_recipe(RECIPE)
    overrides = {"output.runs_dir": runs_dir, "output.run_name": "demo-" + time.strftime("%Y%m%d-%H%M%S")}
    if steps is not None:
        overrides["schedule.max_steps"] = steps
        overrides["schedule.warmup_steps"] = min(recipe.run_config().schedule.resolved_warmup_steps, steps)
    if model is not None:
        overrides["model.source"] = model
    return recipe.run_config(overrides)


def heldout_prompts() -> list[str]:
    path = SAMPLES / "identity" / "heldout_prompts.txt"
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# An answer ends where the model ends it or, from SENTENCE_AFTER tokens on, at the end of a sentence: never mid-
# sentence (48 tokens used to cut Chinese answers, ~2 tokens a character, mid-phrase). MAX_NEW_TOKENS only bounds a
# sentence that will not end; the batch stops as soon as every row has ended, so the demo takes about as long.
SENTENCE_AFTER = 32
MAX_NEW_TOKENS = 128


def generate_answers(model, tokenizer, prompts: list[str], max_new_tokens: int = MAX_NEW_TOKENS) -> list[str]:
    """Greedy answers, batched with left padding (one generate call for all prompts), ending at a sentence end."""
    from .forward.generate import greedy_replies

    return greedy_replies(
        model,
        tokenizer,
        [[{"role": "user", "content": p}] for p in prompts],
        max_new_tokens,
        batch_size=len(prompts),
        sentence_after=min(SENTENCE_AFTER, max_new_tokens),
    )


def compare_answers(run_dir: Path, prompts: list[str]) -> list[tuple[str, str, str]]:
    """(prompt, base answer, fine-tuned answer) of a finished LoRA run: its model built once as it trained
    (``models.build_run_model``), the adapter toggled off for the base."""
    import torch

    from .models import build_run_model

    model = build_run_model(run_config(run_dir), torch.float32, trained_weights(run_dir))
    tuned = generate_answers(model.model, model.tokenizer, prompts)
    with model.model.disable_adapter():
        base = generate_answers(model.model, model.tokenizer, prompts)
    return list(zip(prompts, base, tuned))


def _width(text: str) -> int:
    """Terminal columns: CJK characters take two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _wrap(text: str, col: int) -> list[str]:
    if _width(text) == len(text):
        return textwrap.wrap(text, col) or [""]
    lines, line = [], ""  # wide text has no spaces to break at: break by display width
    for ch in text.replace("\n", " "):
        if _width(line + ch) > col:
            lines.append(line)
            line = ""
        line += ch
    return lines + [line]


def identity_scores(rows: list[tuple[str, str, str]]) -> dict[str, dict]:
    """The identity task's metrics of the base and the tuned answers: introduces PhoneMate, claims no other identity,
    denies none the question did not name, does not loop."""
    from .eval import Example, get_task
    from .serve.remote import ModelReply

    task = get_task("identity")
    return {
        side: task.summarize(
            [
                task.score(Example(i, [{"role": "user", "content": row[0]}], ""), ModelReply(row[col]))
                for i, row in enumerate(rows, 1)
            ]
        )
        for side, col in (("base", 1), ("fine-tuned", 2))
    }


def print_side_by_side(rows: list[tuple[str, str, str]], width: int | None = None) -> None:
    width = width or max(60, min(shutil.get_terminal_size((120, 20)).columns, 160))
    col = (width - 3) // 2
    for prompt, base, tuned in rows:
        print("=" * width)
        print(f"Q: {prompt}")
        print(f"{'base model':<{col}} | fine-tuned")
        print("-" * width)
        left, right = _wrap(base, col), _wrap(tuned, col)
        for i in range(max(len(left), len(right))):
            a = left[i] if i < len(left) else ""
            b = right[i] if i < len(right) else ""
            print(f"{a}{' ' * (col - _width(a))} | {b}")
    print("=" * width)


def run_demo(steps: int | None = None, runs_dir: str = "runs", model: str | None = None) -> dict:
    from .training import train

    t0 = time.time()
    cfg = demo_config(steps, runs_dir, model)
    print(
        f"[demo] fine-tuning {cfg.model.source} on {cfg.data.train} ({cfg.schedule.max_steps} steps, "
        f"precision {cfg.precision.mode}, LoRA r={cfg.lora.r})",
        flush=True,
    )
    result = train(cfg)
    t_train = time.time() - t0
    print(
        f"[demo] trained in {t_train:.0f} s; loss {result.losses[0]:.3f} -> {result.losses[-1]:.3f}; "
        f"eval {', '.join(f'step {s}: {loss:.3f}' for s, loss in result.eval_losses)}",
        flush=True,
    )
    rows = compare_answers(result.run_dir, heldout_prompts())
    print_side_by_side(rows)
    identity = identity_scores(rows)
    print(
        "[demo] identity (introduces PhoneMate; claims, wrongly denies and loops nothing): "
        + ", ".join(
            f"{side} {round(m['identity_rate'] * m['n'])}/{m['n']} (loops {round(m['loop_rate'] * m['n'])}, "
            f"wrong denials {round(m['wrong_denial_rate'] * m['n'])})"
            for side, m in identity.items()
        ),
        flush=True,
    )
    wall = time.time() - t0
    print(f"[demo] run directory: {result.run_dir}  (events: {result.run_dir / EVENTS_FILE})")
    print(f"[demo] wall time {wall:.0f} s (training {t_train:.0f} s)")
    return {
        "run_dir": result.run_dir,
        "rows": rows,
        "identity": identity,
        "wall_s": wall,
        "train_s": t_train,
        "result": result,
    }
