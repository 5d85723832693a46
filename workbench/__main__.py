import sys

from .cli.main import entry_point

sys.exit(entry_point())
