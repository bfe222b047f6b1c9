"""``notebooks/colab_league.ipynb`` is ``colab_bootstrap.py`` as one notebook cell.

The file is the one source; this module renders the notebook from it, and the test
suite checks the notebook in the repository equals the rendering (so the two never
drift).  After editing ``colab_bootstrap.py``:
``python -m brawlkit.tools.colab_notebook`` rewrites the notebook.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from brawlkit.common.paths import repo_root

SOURCE = "colab_bootstrap.py"
NOTEBOOK = "notebooks/colab_league.ipynb"

INTRO = """# Join the shared league from Colab

Run the one cell below (Runtime → Run all). Before that: set `REPO_URL` and
`REGISTRY_URL` at the top of the cell, and add `BRAWLKIT_AGENT_ID` and
`BRAWLKIT_AGENT_SECRET` to Colab's secrets (the key icon on the left) with access for
this notebook — an admin of the registry prints a secret with
`python -m brawlkit registry add-agent NAME --scope write`.

The cell clones and builds brawlkit, continues each role from the registry's newest
checkpoint (this runtime's own after a restart), trains the three roles for
`TIME_BUDGET_MIN` minutes and pushes every generation back; the stop button ends it
cleanly. The same code is `colab_bootstrap.py` in the repository
(`python colab_bootstrap.py` anywhere else); docs/registry.md explains the registry.
"""


def render() -> str:
    """The notebook's JSON text, from the current ``colab_bootstrap.py``."""
    code = (repo_root() / SOURCE).read_text()
    nb: dict[str, Any] = {
        "cells": [
            {"cell_type": "markdown", "id": "intro", "metadata": {},
             "source": INTRO.splitlines(keepends=True)},
            {"cell_type": "code", "execution_count": None, "id": "bootstrap", "metadata": {},
             "outputs": [],
             "source": code.splitlines(keepends=True)},
        ],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                    "name": "python3"},
                     "colab": {"provenance": []}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def main() -> int:
    path = repo_root() / NOTEBOOK
    path.write_text(render())
    print(f"wrote {path} from {SOURCE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
