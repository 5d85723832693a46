"""The server's child process: ``start_server(subprocess=True)`` runs ``python -m workbench.serve --config FILE``.
Users run ``workbench serve``, the same parser."""
import argparse
import sys

from .cli import configure_parser, run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="workbench serve", description="OpenAI-compatible server")
    configure_parser(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
