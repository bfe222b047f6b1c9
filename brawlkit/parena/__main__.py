"""``python -m brawlkit.parena ...`` (see brawlkit.parena.cli)."""

import sys

from brawlkit.parena.cli import main

if __name__ == "__main__":
    sys.exit(main())
