"""`python -m brawlkit` entry point."""

import sys

from brawlkit.cli import main

if __name__ == "__main__":
    sys.exit(main())
