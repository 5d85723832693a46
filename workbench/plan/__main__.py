import sys
import warnings

from .cli import main

warnings.filterwarnings("ignore", category=FutureWarning)
sys.exit(main())
