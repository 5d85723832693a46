from .cli.main import entry_point
import sys
sys.exit(entry_point())
