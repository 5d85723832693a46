"""``workbench export-events RUN --to NAME``: a run's event log through an installed exporter (csv,
tensorboard, or a third party's: workbench/events/exporters/), once or following the live run."""

from __future__ import annotations

from ..config.arguments import CommandInputError
from ..events.exporters import ExporterError, export_events
from ..runs import existing_run_dir
from ..runs.layout import EVENTS_FILE


def add_parser(sub):
    p = sub.add_parser(
        "export-events",
        help="export a run's events (csv, tensorboard, installed exporters)",
        description="Export RUN's event log with an exporter found through the entry-point group "
        "workbench.event_exporters. --follow keeps exporting while the run goes and stops when it ends.",
    )
    p.add_argument("run_dir", metavar="RUN", type=existing_run_dir, help="the run directory (runs/NAME)")
    p.add_argument(
        "--to", required=True, metavar="EXPORTER", help="the exporter: csv, tensorboard or another installed one"
    )
    p.add_argument(
        "--out", metavar="DIR", help="output folder (default: a folder in the run directory named by the exporter)"
    )
    p.add_argument("--follow", "-f", action="store_true", help="keep exporting new events until the run ends")
    return p


def run(args) -> int:
    from ..runs import attach

    try:
        result = export_events(
            args.run_dir / EVENTS_FILE,
            args.to,
            args.out,
            follow=args.follow,
            is_running=attach(args.run_dir).is_running,
        )
    except ExporterError as err:
        raise CommandInputError(str(err)) from None
    print(f"{result.events} events -> {result.out_dir}")
    return 0
