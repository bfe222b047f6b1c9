"""``python -m brawlkit.parena_compiler ...`` (see brawlkit.parena_compiler.cli)."""

import sys

from brawlkit.parena_compiler.cli import main

if __name__ == "__main__":
    sys.exit(main())
