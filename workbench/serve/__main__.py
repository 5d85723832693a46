"""``python -m workbench.serve`` = ``workbench serve`` (until the CLI wires the subcommand in)."""
import argparse
import sys

from .cli import configure_parser, run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workbench.serve", description="OpenAI-compatible server")
    configure_parser(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
