"""``notebooks/colab_league.ipynb`` is ``colab_bootstrap.py`` as one notebook cell, and
every other notebook opens with the same set-up cell (:data:`SETUP_CELL`).

The file is the one source; this module renders the Colab notebook from it and writes
the set-up cell into the others, and the test suite checks the notebooks in the
repository equal the rendering (so they never drift).  After editing
``colab_bootstrap.py`` or the cell: ``python -m brawlkit.tools.colab_notebook``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from brawlkit.common.paths import repo_root

SOURCE = "colab_bootstrap.py"
NOTEBOOK = "notebooks/colab_league.ipynb"
#: the GitHub repository the README's "Open in Colab" links and the set-up cell's
#: default clone URL name (a fork changes it here and reruns this module)
GITHUB_REPO = "brawlkit/brawlkit"
SETUP_ID = "setup"

#: the first code cell of every notebook: where brawlkit is missing (Colab, a bare
#: Jupyter) it clones the repository and runs ``colab_bootstrap.ensure`` (pip install
#: with the dependencies, native build); where brawlkit imports, it does nothing
SETUP_CELL = f"""# Set-up (Colab, a bare Jupyter): where brawlkit is not importable, clone the repository
# (BRAWLKIT_REPO_URL, BRAWLKIT_BRANCH, BRAWLKIT_WORKDIR override), pip-install it with its
# dependencies and build the native code (colab_bootstrap.ensure); elsewhere nothing.
import importlib.util, os, subprocess, sys
if importlib.util.find_spec("brawlkit") is None:
    _work = os.environ.get("BRAWLKIT_WORKDIR") or ("/content/brawlkit" if os.path.isdir("/content")
                                                   else os.path.expanduser("~/brawlkit"))
    if not os.path.isdir(os.path.join(_work, ".git")):
        subprocess.run(["git", "clone", "--quiet", "--branch", os.environ.get("BRAWLKIT_BRANCH", "main"),
                        os.environ.get("BRAWLKIT_REPO_URL", "https://github.com/{GITHUB_REPO}.git"),
                        _work], check=True)
    _bootstrap = {{"__name__": "colab_bootstrap"}}  # the clone's file, run without importing brawlkit
    exec(open(os.path.join(_work, "colab_bootstrap.py")).read(), _bootstrap)
    _bootstrap["ensure"](_work)"""


def colab_url(notebook: str) -> str:
    """The "Open in Colab" address of a notebook of the repository."""
    return f"https://colab.research.google.com/github/{GITHUB_REPO}/blob/main/{notebook}"


def with_setup_cell(nb_text: str) -> str:
    """A notebook's JSON text with :data:`SETUP_CELL` as its first code cell (replacing
    an older one; inserted after the leading markdown otherwise)."""
    nb = json.loads(nb_text)
    cells = nb["cells"]
    cell: dict[str, Any] = {"cell_type": "code", "execution_count": None, "id": SETUP_ID, "metadata": {},
            "outputs": [], "source": SETUP_CELL.splitlines(keepends=True)}
    cells[:] = [c for c in cells if c.get("id") != SETUP_ID]
    at = next((i for i, c in enumerate(cells) if c["cell_type"] == "code"), len(cells))
    cells.insert(at, cell)
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def other_notebooks() -> list[str]:
    """The notebooks that get the set-up cell (all but the Colab one, which is the file)."""
    return sorted(str(p.relative_to(repo_root())) for p in (repo_root() / "notebooks").glob("*.ipynb")
                  if str(p.relative_to(repo_root())) != NOTEBOOK)

INTRO = """# Train the league from Colab: on its own, or joining the shared one

Run the one cell below (Runtime → Run all). As it opens it runs **local only**: no
registry and no secrets, the three roles train in a league of this runtime's own
(`WORKDIR/runs/league`) for `TIME_BUDGET_MIN` minutes and it prints the league's
ratings. For the **shared** league set `REGISTRY_URL` at the top of the cell and add
`BRAWLKIT_AGENT_ID` and `BRAWLKIT_AGENT_SECRET` to Colab's secrets (the key icon on the
left) with access for this notebook — an admin of the registry prints a secret with
`python -m brawlkit registry add-agent NAME --scope write`; each role then continues the
registry's newest checkpoint and every generation is pushed back.

The cell clones brawlkit (`REPO_URL`), pip-installs it with its dependencies and builds
the native code; the stop button ends training cleanly. The same code is
`colab_bootstrap.py` in the repository (`python colab_bootstrap.py` anywhere else);
docs/registry.md explains the registry.
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
    for name in other_notebooks():
        p = repo_root() / name
        text = p.read_text()
        new = with_setup_cell(text)
        if new != text:
            p.write_text(new)
            print(f"wrote the set-up cell into {p}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
