"""``python -m brawlkit.tools.notebook_figure EXECUTED.ipynb CELL_ID OUT.png``: save the
picture a notebook cell drew.

Why: the README shows each notebook's main plot, and those pictures should come from the
notebook itself run on real data (papermill), not from a second plotting script that can
drift from it. Give the cell's id (each cell of the notebooks in ``notebooks/`` has one)
and, with ``--index N``, which of its images (default the first).
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from pathlib import Path


def cell_images(notebook: Path, cell_id: str) -> list[bytes]:
    """The PNG images in the outputs of the cell ``cell_id`` of an executed notebook."""
    nb = json.loads(notebook.read_text())
    for cell in nb.get("cells", []):
        if cell.get("id") == cell_id:
            return [base64.b64decode(o["data"]["image/png"]) for o in cell.get("outputs", [])
                    if "image/png" in o.get("data", {})]
    ids = [c.get("id") for c in nb.get("cells", [])]
    raise KeyError(f"{notebook}: no cell with id {cell_id!r} (cells: {ids})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m brawlkit.tools.notebook_figure",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("notebook", type=Path, help="an executed notebook (papermill output)")
    ap.add_argument("cell_id")
    ap.add_argument("out", type=Path, help="the .png to write")
    ap.add_argument("--index", type=int, default=0, help="which image of the cell (default 0)")
    args = ap.parse_args(argv)
    try:
        images = cell_images(args.notebook, args.cell_id)
    except (OSError, ValueError, KeyError) as e:
        print(f"notebook_figure: {e}", file=sys.stderr)
        return 1
    if not -len(images) <= args.index < len(images):
        print(f"notebook_figure: cell {args.cell_id!r} of {args.notebook} has {len(images)} "
              f"image(s), no index {args.index}", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(images[args.index])
    print(f"wrote {args.out} ({len(images[args.index])} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
