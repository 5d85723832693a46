"""``workbench agent dagger``: DAgger over a run (``workbench.dagger``), registered beside the agent's other
subcommands by workbench.cli.main (it trains, which the agent package, a layer below training, may not)."""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

from ..user_output import table_cell, text_table


def add_parser(subparsers) -> argparse.ArgumentParser:
    from ..agent.cli import add_play_arguments, tasks_help

    d = subparsers.choices["agent"].commands.add_parser(
        "dagger",
        help="DAgger: the run's agent plays, the expert labels every state it reached, train, repeat",
        description="Each round the agent (the run's model, then the previous round's) plays the tasks greedily; the "
        "simulated phone's expert labels every state it was asked at with the next step of a shortest "
        "path (the conversation as the agent saw it); those rows join the run's rows and every earlier "
        "round's, and the model trains on them for --steps steps with the run's settings. Each round's "
        "episodes, labels, preference pairs, rows and training run go to RUN/dagger/round-N/, and one "
        "dagger_round event a round to RUN/dagger/events.jsonl.",
    )
    d.add_argument(
        "--run",
        required=True,
        metavar="RUN",
        help="the run to start from (a full fine-tune's model/, or a "
        "LoRA run's merged/: checkpointing.merge_adapter true)",
    )
    d.add_argument("--tasks", default="train", help=f"which tasks the agent plays (default train): {tasks_help()}")
    d.add_argument("--rounds", type=int, default=3, help="rounds of playing, labelling and training (default 3)")
    d.add_argument("--steps", type=int, required=True, help="optimizer steps each round trains")
    add_play_arguments(d)
    d.set_defaults(func=run)
    return d


def run(args) -> int:
    from ..agent.cli import _at_least_one, _fail, _problems, play_checks
    from ..agent.record import rows_observation
    from ..dagger import run_dagger
    from ..phone.screen import parse_size
    from ..phone.tasks import select_tasks
    from ..runs.layout import run_config
    from ..training import train_to_end

    problems = _problems(
        play_checks(args)
        + [("--rounds", lambda: _at_least_one(args.rounds)), ("--steps", lambda: _at_least_one(args.steps))]
    )
    if problems:
        return _fail(problems)
    run_dir = Path(args.run)
    results = run_dagger(
        run_dir,
        select_tasks(args.tasks),
        args.rounds,
        args.steps,
        train_to_end,
        observation=args.observation or rows_observation(run_config(run_dir).data.train),
        max_steps=args.max_steps,
        max_tokens=args.max_tokens,
        size=parse_size(args.size),
        date=datetime.date.fromisoformat(args.date) if args.date else None,
        progress=sys.stderr.isatty(),
    )
    print(format_rounds(results))
    return 0 if results and results[-1].status == "finished" else 1


def format_rounds(results) -> str:
    """A row per round: how the agent that played did, what the expert labelled, what the round trained."""
    table = [
        ["round", "success", "loops", "false finishes", "states labelled", "off a shortest path", "rows", "trained"]
    ]
    for r in results:
        e = r.event
        off = ", ".join(f"{k} {n}" for k, n in e.kinds.items() if n) or "none"
        table.append(
            [
                str(e.round),
                table_cell(e.success_rate),
                table_cell(e.loop_rate),
                table_cell(e.false_finish_rate),
                str(e.states),
                off,
                str(e.rows),
                f"{e.run_dir} ({e.status})",
            ]
        )
    return "\n".join(text_table(table))
