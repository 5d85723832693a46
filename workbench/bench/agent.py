"""Figures of the phone-agent loop: the oracles, episode throughput against a served model, and the prompt's size
after ten steps of AutoGLM's runtime format.

    python -m workbench.bench.agent oracle      [--size 112x252]                 # every oracle solves its task; lengths
    python -m workbench.bench.agent throughput  [--tasks heldout] [--max-tokens 32] [--concurrency 1 8]
    python -m workbench.bench.agent tokens      [--size 1080x2400] [--steps 10]
    python -m workbench.bench.agent grounding   --model DIR [--rows FILE.jsonl] [--limit 24] [--seed 0]
    python -m workbench.bench.agent paired      A_DIR B_DIR                     # two models on the same tasks
    python -m workbench.bench.agent runtime     --model DIR [--tasks heldout] [--size 112x252] [--max-steps 20]
    python -m workbench.bench.agent expert      [--tasks train,heldout,combos,perturbed] [--noise 0.3] [--seed 0]

``throughput`` starts ``workbench serve --model tiny-glm4v`` in its own process (``--max-context 8192``: the tiny
model's own 1024 positions are fewer than the system prompt's bytes) and runs the tasks at each concurrency,
printing episodes and requests per minute with the load average (the machine may be shared: compare the ratio).
The random tiny model's replies do not parse, so its episodes end at their first step: the figure is the loop's and
the server's rate, not a task-solving one. ``tokens`` counts the 10th request of the longest oracle episode: the
image tokens by GLM-4.1V's resize rule (transformers' defaults, patch 14, merge 2), the text with the tiny model's
byte tokenizer (an upper bound: one token per byte) and with SmolLM2's BPE tokenizer (an estimate of a real
tokenizer; GLM-4's own is not available offline), against Open-AutoGLM's recommended 25,480-token context.
``grounding`` asks whether a ui_tree model reads where a name is or remembers where it was: on rows whose answer
taps a named element (``--rows``, default the training rows as text; ``open_result`` left out, its target is a
position: the first result), a model (a whole model directory, e.g. a run's merged/) answers each row as recorded
and again with the target's bounds and tap point swapped with another element of the same size on that screen
(``phone.uitree.moved_elements``: names and texts stay, positions trade). A model that reads the tree follows the
name to its new point; one that learned positions taps the old one. ``paired`` reads two folders of episodes of
the same tasks (``RUN/episodes/<evaluation>-<tuned|base>``, or two ``workbench agent run`` folders) and prints the
tasks each model alone finished and the sign test's p-value (``agent.metrics.paired``): whether one finishes more
than the tasks' own noise; and how each model's episodes ended and the actions each took, by type. ``runtime``
serves a model (a whole model directory, e.g. a run's model/; ``--reasoning inline``, as Open-AutoGLM's vLLM) and
plays each task twice, with Open-AutoGLM's own ``PhoneAgent`` loop and with ``workbench agent run``'s runner asking
the runtime's sampling (``agent.openautoglm.compare_loops``): the success of each and the tasks where they differ.
``expert`` compares the expert's shortest path from each task's start with the fixed oracle's solution (how many
are shorter, equal, longer: longer would be a bug) and times the expert on the states a careless agent visits: each
task played for up to ``--max-steps`` steps by the oracle's next step, replaced with probability ``--noise`` by an
action drawn from those the expert tries there or a tap on any element (from that point on the oracle's plan is lost
and the expert's step is taken instead), every state labelled by one ``phone.expert.Expert`` (its answers kept
across states, as DAgger's labelling keeps them): milliseconds per state (median, mean, 90th percentile, max).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import time

from ..agent import OraclePolicy, ServedPolicy, run_episodes, sim_devices, summarize_episodes
from ..phone.conversation import CONTEXT_TOKENS, Conversation, assistant_target
from ..phone.screen import parse_size
from ..phone.tasks import TASKS, select_tasks


def oracle(args) -> dict:
    start = time.monotonic()
    episodes = run_episodes(TASKS, OraclePolicy(TASKS), sim_devices(parse_size(args.size)), concurrency=8)
    wall = time.monotonic() - start
    lengths = [len(e.steps) for e in episodes]
    by_split = {
        split: sum(e.success for e in episodes if e.split == split) for split in dict.fromkeys(t.split for t in TASKS)
    }
    return {
        "tasks": len(TASKS),
        "solved": sum(bool(e.success) for e in episodes),
        "solved_by_split": by_split,
        "steps_histogram": dict(sorted(collections.Counter(lengths).items())),
        "steps_median": statistics.median(lengths),
        "steps_min": min(lengths),
        "steps_max": max(lengths),
        "at_least_6": sum(n >= 6 for n in lengths),
        "size": args.size,
        "oracle_episodes_per_min": round(len(episodes) / wall * 60, 1),
    }


def throughput(args) -> dict:
    from ..serve import start_server
    from ..serve.remote import ServerClient

    tasks = select_tasks(args.tasks)
    out = {"tasks": len(tasks), "max_tokens": args.max_tokens, "size": args.size, "runs": {}}
    with (
        start_server(
            "tiny-glm4v", subprocess_mode=True, max_batch=max(args.concurrency), max_context=8192, log_level="warning"
        ) as srv,
        ServerClient(srv.url) as client,
    ):
        for concurrency in args.concurrency:
            policy = ServedPolicy(client, "tiny-glm4v", max_tokens=args.max_tokens, concurrency=concurrency)
            run_episodes(
                tasks[:concurrency], policy, sim_devices(parse_size(args.size)), concurrency=concurrency
            )  # warm
            load = os.getloadavg()[0]
            start = time.monotonic()
            episodes = run_episodes(tasks, policy, sim_devices(parse_size(args.size)), concurrency=concurrency)
            wall = time.monotonic() - start
            policy.close()
            requests = sum(len(e.steps) for e in episodes)
            metrics = summarize_episodes(episodes)
            out["runs"][concurrency] = {
                "wall_s": round(wall, 1),
                "episodes_per_min": round(len(episodes) / wall * 60, 1),
                "requests_per_min": round(requests / wall * 60, 1),
                "end_reasons": metrics["end_reasons"],
                "load_avg_1min": round(load, 2),
            }
    c = args.concurrency
    if len(c) >= 2:
        out["speedup"] = round(out["runs"][c[-1]]["episodes_per_min"] / out["runs"][c[0]]["episodes_per_min"], 2)
    return out


def tokens(args) -> dict:
    import base64

    from ..data.multimodal import encode_chat
    from ..image_io import image_data_url, png_bytes, resolve_images
    from ..models import load_tokenizer, packaged
    from ..models.processor import image_token_count
    from ..phone.actions import format_action
    from ..phone.env import PhoneEnv
    from ..phone.sim import SimPhone

    size = parse_size(args.size)
    task = max(TASKS, key=lambda t: len(t.oracle()))
    steps = task.oracle()
    if len(steps) < args.steps:
        raise SystemExit(f"the longest oracle episode has {len(steps)} steps, fewer than --steps {args.steps}")
    phone = SimPhone(size)
    env = PhoneEnv(phone, tasks=[task])
    obs, _ = env.reset(options={"task": task})
    conversation = Conversation(task.instruction)
    for step in steps[: args.steps - 1]:
        conversation.observe(image_data_url(png_bytes(obs["screenshot"])), obs["current_app"])
        conversation.reply(assistant_target(step.thinking, format_action(step.action)))
        obs, *_ = env.step(step.action)
    messages = conversation.observe(image_data_url(png_bytes(obs["screenshot"])), obs["current_app"])
    vision = load_tokenizer("tiny-glm4v")
    example = encode_chat(vision.processor, resolve_images(messages), add_generation_prompt=True)
    image = image_token_count(vision.processor, *size)
    text_bytes = len(example.input_ids) - image
    text = "".join(
        p["text"] if p.get("type") == "text" else ""
        for m in messages
        for p in (m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}])
    )
    bpe = len(load_tokenizer(packaged.NAME).tokenizer(text)["input_ids"])
    screenshot_kb = len(base64.b64decode(messages[-1]["content"][0]["image_url"]["url"].split(",", 1)[1])) / 1024
    draw_s, encode_s = [], []  # the cost of one step's screenshot at this size: drawing it, then its PNG
    for _ in range(3):
        t0 = time.process_time()
        shot = phone.screenshot()
        t1 = time.process_time()
        png_bytes(shot)
        draw_s.append(t1 - t0)
        encode_s.append(time.process_time() - t1)
    return {
        **_tree_tokens(load_tokenizer(packaged.NAME).tokenizer, task, args.steps),
        "task": task.id,
        "request": args.steps,
        "size": args.size,
        "image_tokens_latest_screenshot": image,
        "text_tokens_byte_upper_bound": text_bytes,
        "text_tokens_bpe_estimate": bpe,
        "total_upper_bound": image + text_bytes,
        "total_bpe_estimate": image + bpe,
        "context": CONTEXT_TOKENS,
        "share_of_context_bpe": round((image + bpe) / CONTEXT_TOKENS, 3),
        "if_every_screenshot_were_kept": args.steps * image + bpe,
        "screenshot_png_kb": round(screenshot_kb, 1),
        "screenshot_draw_cpu_s": round(statistics.median(draw_s), 4),
        "screenshot_png_encode_cpu_s": round(statistics.median(encode_s), 4),
    }


GROUNDING_ROWS = "data_samples/phone_episodes_tree/train.jsonl"


def _tap_probe(row: dict, rng) -> dict | None:
    """A row as a grounding probe: its prompt as recorded and with the target swapped with a same-size element, or
    None (no Tap on a named element, a position target, no other element of its size on the screen)."""
    from ..phone.uitree import POSITION_TARGETS, moved_elements, same_size_boxes, tree_boxes, turn_tree

    meta, messages = row.get("meta", {}), row["messages"]
    box = tuple(meta["target_box"]) if meta.get("target_box") else None
    if box is None or meta.get("template") in POSITION_TARGETS or 'action="Tap"' not in messages[-1]["content"]:
        return None
    head, tree = turn_tree(messages[-2]["content"])
    group = same_size_boxes([b for b in tree_boxes(tree) if b is not None]).get((box[2] - box[0], box[3] - box[1]), [])
    others = [b for b in group if b != box]
    if not others or box not in group:
        return None
    other = rng.choice(others)
    prompt = [{"role": m["role"], "content": m["content"]} for m in messages[:-1]]
    swapped = [*prompt[:-1], {"role": "user", "content": head + moved_elements(tree, {box: other, other: box})}]
    return {"template": meta.get("template"), "box": box, "other": other, "prompt": prompt, "swapped": swapped}


def _tapped(reply: str) -> tuple[int, int] | None:
    from ..phone.openautoglm import reply_action

    action = reply_action(reply)
    return action.point() if action else None


def grounding(args) -> dict:
    import random

    from ..config.files import read_jsonl
    from ..config.samples import resolve_sample_path
    from ..forward.generate import greedy_replies
    from ..hardware import resolve_device
    from ..models import load_for_inference
    from ..phone.actions import in_box

    rng = random.Random(args.seed)
    rows = read_jsonl(resolve_sample_path(args.rows))
    rng.shuffle(rows)
    probes = [p for p in (_tap_probe(row, rng) for row in rows) if p is not None][: args.limit]
    if not probes:
        raise SystemExit(f"{args.rows}: no row taps a named element with another of its size on the screen")
    loaded = load_for_inference(args.model, device=resolve_device("auto"))  # the GPU when one is visible
    start = time.monotonic()
    replies = greedy_replies(
        loaded.model,
        loaded.tokenizer,
        [p[k] for p in probes for k in ("prompt", "swapped")],
        args.max_tokens,
        batch_size=8,
    )
    counts = collections.Counter()
    for probe, (as_recorded, swapped) in zip(probes, zip(replies[0::2], replies[1::2])):
        point, moved = _tapped(as_recorded), _tapped(swapped)
        counts["recorded_in_target"] += bool(point and in_box(point, probe["box"]))
        # after the swap the target's name sits in the other box: reading follows it, memory stays
        counts["swapped_follows_name"] += bool(moved and in_box(moved, probe["other"]))
        counts["swapped_taps_old_point"] += bool(moved and in_box(moved, probe["box"]))
    return {
        "model": args.model,
        "rows": args.rows,
        "probes": len(probes),
        "templates": dict(collections.Counter(p["template"] for p in probes)),
        **counts,
        "swapped_elsewhere": len(probes) - counts["swapped_follows_name"] - counts["swapped_taps_old_point"],
        "wall_s": round(time.monotonic() - start, 1),
    }


def compare(args) -> dict:
    """Two folders of episodes of the same tasks, task by task (``agent.metrics.paired``; a is the first)."""
    from ..agent.metrics import paired
    from ..agent.store import read_episodes

    try:
        a, b = read_episodes(args.a), read_episodes(args.b)
        sa, sb = summarize_episodes(a), summarize_episodes(b)
        return {
            "a": args.a,
            "b": args.b,
            "success_a": sa["success_rate"],
            "success_b": sb["success_rate"],
            **paired(a, b),
            **{f"{k}_{side}": s[k] for k in ("end_reasons", "action_types") for side, s in (("a", sa), ("b", sb))},
        }
    except ValueError as err:
        raise SystemExit(f"paired: {err}") from None


def _tree_tokens(tokenizer, task, steps: int) -> dict:
    """The ui_tree observation's cost in SmolLM2's BPE: the tree of every screen of every oracle episode (per screen:
    median, mean, max), and the whole request of ``task`` at step ``steps`` shown as trees (system prompt, earlier
    turns as text, the latest tree)."""
    counts = [
        len(tokenizer(step.ui_tree)["input_ids"])
        for episode in run_episodes(TASKS, OraclePolicy(TASKS), sim_devices((112, 252)), observation="ui_tree")
        for step in episode.steps
    ]
    conversation = Conversation(task.instruction, observation="ui_tree")
    (episode,) = run_episodes([task], OraclePolicy([task]), sim_devices((112, 252)), observation="ui_tree")
    for step in episode.steps[: steps - 1]:
        conversation.observe(None, step.current_app, step.ui_tree)
        conversation.reply(assistant_target(step.reasoning, step.answer))
    conversation.observe(None, episode.steps[steps - 1].current_app, episode.steps[steps - 1].ui_tree)
    prompt = tokenizer.apply_chat_template(conversation.messages, add_generation_prompt=True, tokenize=False)
    request = len(tokenizer(prompt)["input_ids"])
    return {
        "ui_tree_screens": len(counts),
        "ui_tree_tokens_per_screen_median": statistics.median(counts),
        "ui_tree_tokens_per_screen_mean": round(statistics.mean(counts), 1),
        "ui_tree_tokens_per_screen_max": max(counts),
        "ui_tree_request_tokens": request,
    }


def runtime(args) -> dict:
    from ..agent.openautoglm import compare_loops
    from ..serve import start_server

    tasks = select_tasks(args.tasks)
    with start_server(
        args.model, model_id="agent", reasoning="inline", max_context=args.max_context, threads=args.threads
    ) as srv:
        pairs = compare_loops(
            tasks,
            srv.base_url,
            "agent",
            lang=args.lang,
            max_steps=args.max_steps,
            size=parse_size(args.size),
            max_tokens=args.max_tokens,
            progress=True,
        )
    return {
        "model": args.model,
        "tasks": args.tasks,
        "n": len(pairs),
        "size": args.size,
        "max_steps": args.max_steps,
        "runtime_success": sum(p.runtime.success for p in pairs),
        "runner_success": sum(bool(p.runner.success) for p in pairs),
        "ended_alike": sum(p.same for p in pairs),
        "different": [p.task for p in pairs if not p.same],
        "runtime_ends": dict(collections.Counter(p.runtime.end for p in pairs)),
        "runner_ends": dict(collections.Counter(p.runner.end_reason for p in pairs)),
    }


def expert(args) -> dict:
    import random

    from ..phone.expert import Expert, moves, replay

    tasks, rng, labeller = select_tasks(args.tasks), random.Random(args.seed), Expert()
    diffs, times = collections.Counter(), []
    for task in tasks:
        diffs[labeller.shortest(task) - len(task.oracle())] += 1
    start = time.monotonic()
    for task in tasks:
        phone, plan = replay(task, []), [s.action for s in task.oracle()]
        for _ in range(args.max_steps):
            t0 = time.perf_counter()
            label = labeller.step(task, phone)
            times.append(time.perf_counter() - t0)
            action = plan.pop(0) if plan else label.action
            if rng.random() < args.noise:
                screen = phone.screen()
                action, plan = (
                    rng.choice(
                        list(moves(phone, task, screen))
                        + [
                            type(action)("Tap", {"element": [(b[0] + b[2]) // 2, (b[1] + b[3]) // 2]})
                            for b in screen.elements.values()
                        ]
                    ),
                    [],
                )
            if action.type == "finish":
                break
            phone.execute(action)
    times.sort()
    ms = [t * 1000 for t in times]
    return {
        "tasks": len(tasks),
        "expert_minus_oracle_steps": dict(sorted(diffs.items())),
        "shorter": sum(n for d, n in diffs.items() if d < 0),
        "equal": diffs[0],
        "longer": sum(n for d, n in diffs.items() if d > 0),
        "states": len(ms),
        "ms_per_state": {
            "median": round(statistics.median(ms), 2),
            "mean": round(statistics.mean(ms), 2),
            "p90": round(ms[int(0.9 * (len(ms) - 1))], 2),
            "max": round(ms[-1], 1),
        },
        "searches": labeller.searches,
        "states_expanded": labeller.expanded,
        "labelling_wall_s": round(time.monotonic() - start, 1),
        "noise": args.noise,
        "seed": args.seed,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="part", required=True)
    o = sub.add_parser("oracle")
    o.add_argument("--size", default="112x252")
    t = sub.add_parser("throughput")
    t.add_argument("--tasks", default="heldout")
    t.add_argument("--max-tokens", type=int, default=32)
    t.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    t.add_argument("--size", default="112x252")
    k = sub.add_parser("tokens")
    k.add_argument("--size", default="1080x2400")
    k.add_argument("--steps", type=int, default=10)
    g = sub.add_parser("grounding")
    g.add_argument("--model", required=True, help="a whole model directory (a run's merged/) or a model name")
    g.add_argument(
        "--rows",
        default=GROUNDING_ROWS,
        help="ui_tree rows in the runtime format (default: the "
        "training rows; data_samples/phone_episodes_tree/heldout.jsonl for unseen names)",
    )
    g.add_argument("--limit", type=int, default=24, help="rows probed, each answered twice (default 24)")
    g.add_argument("--seed", type=int, default=0, help="which rows, and which same-size element each swaps with")
    g.add_argument(
        "--max-tokens", type=int, default=128, help="reply length limit (default 128, as the recipe's episodes)"
    )
    c = sub.add_parser("paired")
    c.add_argument("a", help="a folder of episodes (RUN/episodes/<evaluation>-tuned, or `workbench agent run`'s)")
    c.add_argument("b", help="a folder of episodes of the same tasks by another model")
    r = sub.add_parser("runtime")
    r.add_argument("--model", required=True, help="a whole model directory (a run's model/ or merged/)")
    r.add_argument("--tasks", default="heldout")
    r.add_argument("--size", default="112x252", help="the screenshots' size (the tiny screenshot model's: 112x252)")
    r.add_argument("--max-steps", type=int, default=20)
    r.add_argument("--max-tokens", type=int, default=64)
    r.add_argument("--max-context", type=int, default=2048)
    r.add_argument("--threads", type=int, default=1)
    r.add_argument("--lang", default="en", choices=("cn", "en"))
    e = sub.add_parser("expert")
    e.add_argument("--tasks", default="train,heldout,combos,perturbed")
    e.add_argument("--noise", type=float, default=0.3, help="the chance that a step is a random action")
    e.add_argument("--max-steps", type=int, default=15)
    e.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    parts = {
        "oracle": oracle,
        "throughput": throughput,
        "tokens": tokens,
        "grounding": grounding,
        "paired": compare,
        "runtime": runtime,
        "expert": expert,
    }
    print(json.dumps(parts[args.part](args), indent=1))


if __name__ == "__main__":
    main()
