"""``workbench agent run|record``: phone-agent episodes against a served model or the oracle, and episodes into
training rows (registered by workbench.cli.main)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from ..phone.conversation import DEFAULT_LANG, MAX_STEPS, OBSERVATIONS, REPEAT_LIMIT, repeat_limit_problem
from ..phone.openautoglm import LANGS
from ..phone.screen import parse_size
from ..user_output import table_cell, text_table


def tasks_help() -> str:
    """What --tasks takes, in words."""
    from ..phone.tasks import TEMPLATES

    return (
        "all (train, heldout and combos), train, heldout (values no training task has), combos (trained values, "
        "new pairings), perturbed (training tasks on screens no demonstration shows: pop-ups, slow apps, renamed "
        f"buttons, shuffled layouts), a template ({', '.join(TEMPLATES)}), a task id, several of these "
        'comma-separated, or a JSONL task file (rows {"template": NAME, ...}, or {"instruction": "your own task '
        'in words"} for a real phone: no simulator checks, the episodes stored for you to judge)'
    )


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "agent",
        help="run the phone agent's episodes (simulated phone or ADB) and record them as training data",
        description="Episodes of AutoGLM-Phone tasks: the model sees each screen in AutoGLM's runtime format and "
        "answers one action at a time until finish, the step limit, a reply that does not parse or a "
        "context overflow; success is judged on the phone's final state.",
    )
    sub = p.add_subparsers(dest="agent_command", required=True, metavar="{run,record,headroom,dagger}")
    p.commands = sub  # the agent's subcommands: workbench.cli.dagger adds dagger (it trains: a layer above this one)
    tasks_text = tasks_help()
    _run_parser(sub, tasks_text)
    _record_parser(sub, tasks_text)
    _headroom_parser(sub, tasks_text)
    return p


def _run_parser(sub, tasks_help: str) -> None:
    """``workbench agent run``: served models (or the oracle) play the tasks; their episodes stored, judged."""
    r = sub.add_parser(
        "run",
        help="run tasks with served models (or their oracle solutions) and score them",
        description="Run every task once per model of a server (--server URL --model ID) or with the "
        "tasks' oracle solutions (--oracle). Each model's episodes are stored (screens, "
        "replies, actions, state checks); the metrics go to each evaluated adapter's run "
        "directory (eval_results.json, task phone_agent), where the runs panel shows them.",
    )
    r.add_argument("--server", metavar="URL", help="an OpenAI-compatible server (http://HOST:PORT)")
    r.add_argument("--model", action="append", metavar="ID", help="a served model id (repeatable; default: every one)")
    r.add_argument(
        "--oracle",
        action="store_true",
        help="run the tasks' oracle solutions through the same loop, no server (shows every task solvable)",
    )
    r.add_argument("--tasks", default="heldout", help=f"which tasks (default heldout): {tasks_help}")
    r.add_argument(
        "--device",
        default="sim",
        help="sim (the simulated phone, default) or adb:SERIAL (a phone the ADB server lists; needs the 'phone' extra)",
    )
    r.add_argument("--adb-host", default="127.0.0.1", help="the ADB server's host (default 127.0.0.1)")
    r.add_argument("--adb-port", type=int, default=5037, help="the ADB server's port (default 5037)")
    r.add_argument("--size", default="1080x2400", help="the simulated phone's screen WxH in pixels (default 1080x2400)")
    r.add_argument(
        "--max-steps",
        type=int,
        default=MAX_STEPS,
        help=f"step limit per episode (default {MAX_STEPS}, as Open-AutoGLM)",
    )
    r.add_argument(
        "--repeat-limit",
        type=int,
        default=REPEAT_LIMIT,
        help="end an episode, no success, once the model "
        f"gives the same action on the same screen this many times in a row (default {REPEAT_LIMIT}; "
        "0: never)",
    )
    r.add_argument("--concurrency", type=int, help="episodes at once (default 8 on sim; one phone over adb: 1)")
    r.add_argument(
        "--observation",
        choices=OBSERVATIONS,
        default="screenshot",
        help="what the model is shown of each screen: the screenshot (default), ui_tree (the screen's "
        "elements as compact text in the screen info, for text-only models) or both",
    )
    r.add_argument(
        "--lang",
        choices=LANGS,
        default=DEFAULT_LANG,
        help="Open-AutoGLM's system prompt: en (default, "
        "the workbench's English tasks) or cn (its own default; AutoGLM-Phone-9B was trained on it)",
    )
    r.add_argument("--max-tokens", type=int, default=512, help="reply length limit (default 512)")
    r.add_argument("--temperature", type=float, default=0.0, help="0 (the default) decodes greedily")
    r.add_argument("--seed", type=int, help="seed of each sampled request (with --temperature > 0)")
    r.add_argument("--api-key", help="the server's API key (default: $WORKBENCH_API_KEY)")
    r.add_argument(
        "--out",
        metavar="DIR",
        help="where the episodes of models not served from a run directory go (default: runs/episodes/<time>/<model>)",
    )
    r.add_argument("--no-screens", action="store_true", help="do not store the screenshots")
    r.add_argument("--no-write", action="store_true", help="do not write eval_results.json into the run directories")
    r.add_argument("--json", action="store_true", help="print the whole report as JSON")
    r.set_defaults(func=run)


def _record_parser(sub, tasks_help: str) -> None:
    """``workbench agent record``: the oracle's or a run's episodes as training rows."""
    c = sub.add_parser(
        "record",
        help="write episodes as training rows in Open-AutoGLM's runtime format",
        description="One training row per step: the conversation Open-AutoGLM's runtime sends at that "
        "step (its system prompt, earlier turns as text with the replies as it keeps them, "
        "the latest screenshot as an image file) and the reply to learn, "
        "<think>...</think>\\n<answer>do(...). Record the oracle on tasks (--oracle) or the "
        "episodes a run stored (--episodes DIR; only successful ones unless --all).",
    )
    c.add_argument("--out", required=True, metavar="FILE.jsonl", help="the JSONL file (images go to images/ beside it)")
    c.add_argument("--oracle", action="store_true", help="record the oracle's episodes on --tasks")
    c.add_argument("--tasks", default="train", help=f"with --oracle (default train): {tasks_help}")
    c.add_argument("--episodes", metavar="DIR", help="a folder of episodes `workbench agent run` stored")
    c.add_argument("--all", action="store_true", help="with --episodes: unsuccessful episodes too")
    c.add_argument("--size", default="1080x2400", help="with --oracle: the screen WxH in pixels (default 1080x2400)")
    c.add_argument("--date", help="with --oracle: the date in the system prompt, YYYY-MM-DD (default today)")
    c.add_argument("--max-steps", type=int, default=MAX_STEPS, help="with --oracle: step limit")
    c.add_argument(
        "--lang",
        choices=LANGS,
        help="Open-AutoGLM's system prompt in the rows, en or cn (default: en with "
        "--oracle; with --episodes, the one the run's model was sent)",
    )
    c.add_argument(
        "--observation",
        choices=OBSERVATIONS,
        help="what each row shows of the screen: screenshot (an image file), ui_tree (the screen's compact "
        "tree as text, no image) or both (default: screenshot with --oracle; with --episodes, what the "
        "run's model was shown)",
    )
    c.set_defaults(func=record)


def _headroom_parser(sub, tasks_help: str) -> None:
    h = sub.add_parser(
        "headroom",
        help="pass@1 against pass@k per task for a run's model: what RL can sharpen",
        description="A run's model plays every task k times, each reply sampled at --temperature (seed "
        "--seed + i for sample i), and once greedily. Per task: its successes c of k, "
        "pass@1 = c/k and pass@k; the tasks it finishes sometimes but not always are those "
        "reinforcement learning can sharpen. Run it before an RL run from this model. The "
        "episodes and headroom.json go to --out.",
    )
    h.add_argument(
        "--run",
        required=True,
        metavar="RUN",
        help="the run whose model plays (its model/, or its base with its adapter merged)",
    )
    h.add_argument("--tasks", default="train", help=f"which tasks (default train): {tasks_help}")
    h.add_argument("-k", type=int, default=8, help="samples per task (default 8)")
    h.add_argument("--temperature", type=float, default=1.0, help="the sampling temperature (default 1.0)")
    h.add_argument("--seed", type=int, default=0, help="torch's seed of the first sample (default 0)")
    add_play_arguments(h)
    h.add_argument(
        "--out",
        metavar="DIR",
        help="where the episodes and headroom.json go (default RUN/headroom/<tasks>-k<k>-t<temperature>)",
    )
    h.add_argument("--json", action="store_true", help="print headroom.json instead of the table")
    h.set_defaults(func=headroom)


def add_play_arguments(p: argparse.ArgumentParser) -> None:
    """How a run's model plays in this process (``headroom``, ``dagger``): its step and reply limits, what it is shown
    of each screen, the simulated phone's size, the system prompt's date (``play_checks`` checks them)."""
    p.add_argument("--max-steps", type=int, default=20, help="step limit per episode (default 20)")
    p.add_argument("--max-tokens", type=int, default=128, help="reply length limit (default 128)")
    p.add_argument(
        "--observation",
        choices=OBSERVATIONS,
        help="what the model is shown of each screen (default: what the run's training rows show)",
    )
    p.add_argument("--size", default="1080x2400", help="the simulated phone's screen WxH (default 1080x2400)")
    p.add_argument("--date", help="the date in the system prompt, YYYY-MM-DD (default today)")


def play_checks(args) -> list:
    """The (flag, check) pairs of ``--run``, ``--tasks`` and ``add_play_arguments``' options."""
    import datetime
    from pathlib import Path

    from ..phone.tasks import select_tasks
    from ..runs.layout import is_run_dir

    return [
        ("--run", lambda: None if is_run_dir(Path(args.run)) else f"{args.run!r} is not a run directory"),
        ("--tasks", lambda: _why(lambda: select_tasks(args.tasks))),
        ("--max-steps", lambda: _at_least_one(args.max_steps)),
        ("--max-tokens", lambda: _at_least_one(args.max_tokens)),
        ("--size", lambda: _why(lambda: parse_size(args.size))),
        ("--date", lambda: _why(lambda: datetime.date.fromisoformat(args.date)) if args.date else None),
    ]


def _problems(checks) -> list[str]:
    """Every problem of the options at once: (flag, check) pairs, a check returning why or None."""
    return [f"{flag}: {why}" for flag, check in checks if (why := check())]


def _fail(problems: list[str]) -> int:
    if len(problems) == 1:
        print(f"workbench agent: error: {problems[0]}", file=sys.stderr)
    else:
        print(f"workbench agent: error: {len(problems)} problems:", file=sys.stderr)
        for line in problems:
            print(f"  - {line}", file=sys.stderr)
    return 2


def _why(call) -> str | None:
    try:
        call()
    except ValueError as err:
        return str(err)
    return None


def _at_least_one(value: int) -> str | None:
    return None if value >= 1 else f"must be at least 1 (got {value})"


def run(args) -> int:
    from ..phone.adb import DeviceError
    from ..phone.tasks import select_tasks
    from .evaluate import AgentError, evaluate_agent, parse_device

    device = args.device
    if args.concurrency is None:
        args.concurrency = 1 if device.startswith("adb:") else 8
    problems = _problems(
        [
            (
                "--server/--oracle",
                lambda: (
                    None
                    if args.oracle != bool(args.server)
                    else "give --server URL (and --model ID) or --oracle, not both or neither"
                ),
            ),
            ("--model", lambda: "--model needs --server" if args.model and args.oracle else None),
            ("--tasks", lambda: _why(lambda: select_tasks(args.tasks))),
            ("--device", lambda: _why(lambda: parse_device(device))),
            (
                "--device",
                lambda: (
                    "the oracle's actions are the simulated phone's: run --oracle on --device sim"
                    if args.oracle and device.startswith("adb:")
                    else None
                ),
            ),
            ("--size", lambda: _why(lambda: parse_size(args.size))),
            ("--max-steps", lambda: _at_least_one(args.max_steps)),
            ("--repeat-limit", lambda: repeat_limit_problem(args.repeat_limit)),
            ("--concurrency", lambda: _at_least_one(args.concurrency)),
            (
                "--concurrency",
                lambda: (
                    "one phone runs one episode at a time: give --concurrency 1 with adb"
                    if device.startswith("adb:") and args.concurrency != 1
                    else None
                ),
            ),
            ("--max-tokens", lambda: _at_least_one(args.max_tokens)),
        ]
    )
    if problems:
        return _fail(problems)
    try:
        report = evaluate_agent(
            select_tasks(args.tasks),
            args.model,
            server=args.server,
            oracle=args.oracle,
            device=device,
            size=parse_size(args.size),
            max_steps=args.max_steps,
            concurrency=args.concurrency,
            out=args.out,
            write=not args.no_write,
            max_tokens=args.max_tokens,
            temperature=args.temperature,
            seed=args.seed,
            api_key=args.api_key or os.environ.get("WORKBENCH_API_KEY"),
            adb_host=args.adb_host,
            adb_port=args.adb_port,
            screens=not args.no_screens,
            observation=args.observation,
            repeat_limit=args.repeat_limit,
            lang=args.lang,
            progress=sys.stderr.isatty(),
        )
    except (AgentError, DeviceError) as err:
        return _fail([str(err)])
    print(json.dumps(report.to_dict(), ensure_ascii=False, indent=1) if args.json else format_report(report))
    return 0


def format_report(report) -> str:
    """One row per model (success, loops, false finishes, steps to success, parse failures, invalid actions, prompt
    tokens), then per template."""
    keys = [
        "n",
        "success_rate",
        "loop_rate",
        "false_finish_rate",
        "mean_steps_success",
        "reached_apps_rate",
        "quoted_line_rate",
        "parse_failure_rate",
        "invalid_action_rate",
        "prompt_tokens_last",
    ]
    table = [["model", *keys]] + [
        [m, *(table_cell(by_mode["default"][k]) for k in keys)] for m, by_mode in report.metrics.items()
    ]
    lines = text_table(table)
    for model, by_mode in report.metrics.items():
        metrics = by_mode["default"]
        lines.append(f"\n{model}: end reasons {metrics['end_reasons']}")
        if len(metrics["by_split"]) > 1:  # heldout and combos asked together: each its own rate
            lines.append(
                "  by split: "
                + ", ".join(
                    f"{split} {table_cell(g['success_rate'])} of {g['n']}" for split, g in metrics["by_split"].items()
                )
            )
        rows = [["template", "n", "success_rate"]] + [
            [t, str(g["n"]), table_cell(g["success_rate"])] for t, g in metrics["by_template"].items()
        ]
        lines += text_table(rows, indent="  ")
        lines.append(f"  episodes: {report.episodes[model]}")
    lines.append(
        f"\n{report.settings['n']} tasks ({report.data}) on {report.settings['device']}; {report.wall_s:.1f} s"
    )
    lines += [f"written: {p}" for p in report.written]
    return "\n".join(lines)


def headroom(args) -> int:
    import datetime
    from pathlib import Path

    from ..hardware import resolve_device
    from ..models.run_model import load_run_for_inference
    from ..phone.tasks import select_tasks
    from ..runs.layout import run_config
    from .headroom import format_headroom, headroom_record, measure_headroom
    from .policy import InProcessPolicy
    from .record import rows_observation
    from .runner import sim_devices

    problems = _problems(
        play_checks(args)
        + [
            ("-k", lambda: _at_least_one(args.k)),
            ("--temperature", lambda: None if args.temperature > 0 else "must be above 0: samples that differ"),
        ]
    )
    if problems:
        return _fail(problems)
    run, tasks = Path(args.run), select_tasks(args.tasks)
    observation = args.observation or rows_observation(run_config(run).data.train)
    loaded = load_run_for_inference(run, device=resolve_device("auto"))
    out = (
        Path(args.out)
        if args.out
        else run / "headroom" / f"{args.tasks.replace('/', '_')}-k{args.k}-t{args.temperature:g}"
    )
    settings = {
        "run": str(run),
        "tasks": args.tasks,
        "k": args.k,
        "temperature": args.temperature,
        "seed": args.seed,
        "observation": observation,
        "max_steps": args.max_steps,
        "max_tokens": args.max_tokens,
    }
    rows, summary = measure_headroom(
        tasks,
        lambda t: InProcessPolicy(
            loaded.model, loaded.tokenizer, loaded.processor, name=run.name, max_tokens=args.max_tokens, temperature=t
        ),
        args.k,
        out,
        sim_devices(parse_size(args.size)),
        settings,
        seed=args.seed,
        temperature=args.temperature,
        progress=sys.stderr.isatty(),
        max_steps=args.max_steps,
        observation=observation,
        date=datetime.date.fromisoformat(args.date) if args.date else None,
    )
    record = headroom_record(rows, summary, settings)
    (out / "headroom.json").write_text(json.dumps(record, indent=1), encoding="utf-8")
    print(json.dumps(record, indent=1) if args.json else format_headroom(rows, summary) + f"\nwritten: {out}")
    return 0


def record(args) -> int:
    import datetime

    from ..phone.tasks import select_tasks
    from .policy import OraclePolicy
    from .record import record_rows
    from .runner import run_episodes, sim_devices
    from .store import read_episodes

    date = None
    problems = _problems(
        [
            (
                "--oracle/--episodes",
                lambda: (
                    None
                    if args.oracle != bool(args.episodes)
                    else "give --oracle (with --tasks) or --episodes DIR, not both or neither"
                ),
            ),
            ("--tasks", lambda: _why(lambda: select_tasks(args.tasks)) if args.oracle else None),
            ("--size", lambda: _why(lambda: parse_size(args.size))),
            ("--date", lambda: _why(lambda: datetime.date.fromisoformat(args.date)) if args.date else None),
            ("--max-steps", lambda: _at_least_one(args.max_steps)),
            ("--out", lambda: None if args.out.endswith(".jsonl") else f"{args.out!r}: give a .jsonl file name"),
        ]
    )
    if problems:
        return _fail(problems)
    if args.date:
        date = datetime.date.fromisoformat(args.date)
    if args.oracle:
        tasks = select_tasks(args.tasks)
        episodes, screens = (
            run_episodes(
                tasks,
                OraclePolicy(tasks),
                sim_devices(parse_size(args.size)),
                args.max_steps,
                date=date,
                observation=args.observation or "screenshot",
                lang=args.lang or DEFAULT_LANG,
            ),
            None,
        )
    else:
        try:
            episodes, screens = read_episodes(args.episodes), args.episodes
        except ValueError as err:
            return _fail([f"--episodes: {err}"])
    try:
        result = record_rows(
            episodes, args.out, screens, only_success=not args.all, observation=args.observation, lang=args.lang
        )
    except (ValueError, OSError) as err:  # episodes stored without their screenshots (--no-screens), a bad folder
        return _fail([f"--episodes: {err}"])
    print(
        f"{result.rows} rows from {result.episodes} episodes ({result.skipped_episodes} unsuccessful skipped), "
        f"{result.images} images: {result.path}"
    )
    return 0
