"""Every notebook runs headless through papermill with tiny parameters."""

from __future__ import annotations

import json

import nbformat
import pytest
from helpers import ROOT

pytestmark = pytest.mark.notebooks


def _execute(name: str, out, parameters: dict, cwd) -> nbformat.NotebookNode:
    import papermill

    papermill.execute_notebook(str(ROOT / "notebooks" / f"{name}.ipynb"), str(out),
                               parameters=parameters, kernel_name="python3", cwd=str(cwd),
                               progress_bar=False)
    return nbformat.read(str(out), as_version=4)


def _images(nb: nbformat.NotebookNode) -> int:
    return sum("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code"
               for o in c.get("outputs", []))


@pytest.mark.training
def test_train_role_notebook(tmp_path):
    run_dir = tmp_path / "runs" / "main" / "nb"
    nb = _execute("train_role", tmp_path / "train_role.out.ipynb", {
        "role": "main", "generations": 1, "steps_per_generation": 256, "n_envs": 2,
        "run_dir": str(run_dir), "eval_levels": [1], "eval_episodes": 1,
        "max_episode_steps": 60, "progress": False, "seed": 1,
        "config": {"action_repeat": 2, "learning_rate": 1e-4}}, tmp_path)
    assert (run_dir / "gen_0000.zip").is_file()
    meta = json.loads((run_dir / "gen_0000.json").read_text())
    assert meta["role"] == "main" and "cpu_1" in meta["eval"]
    assert meta["config"]["action_repeat"] == 2 and meta["config"]["learning_rate"] == 1e-4
    assert _images(nb) >= 4, "expected the four training plots"


def test_export_weights_notebook(tmp_path):
    out = tmp_path / "policy.bpw"
    nb = _execute("export_weights", tmp_path / "export_weights.out.ipynb",
                  {"checkpoint": "", "out": str(out), "n_obs": 500, "learn_steps": 64}, tmp_path)
    assert out.read_bytes()[:4] == b"BPW1"
    assert _images(nb) >= 1  # the C-vs-torch plot is shown, not only saved
    assert out.with_suffix(".parity.png").stat().st_size > 1000


def test_obs_parity_notebook(tmp_path):
    nb = _execute("obs_parity", tmp_path / "obs_parity.out.ipynb", {"states": 600, "seed": 2},
                  tmp_path)
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                   for o in c.get("outputs", []))
    assert "PARITY OK" in text and _images(nb) >= 2


def test_jupyterlab_serves_the_notebooks():
    """What `make lab` runs: JupyterLab rooted at notebooks/ (here headless, on a free port)."""
    import json as _json
    import os
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", f"--notebook-dir={ROOT / 'notebooks'}",
         "--no-browser", "--ip=127.0.0.1", f"--port={port}", "--IdentityProvider.token=t",
         "--ServerApp.port_retries=0", *(["--allow-root"] if os.geteuid() == 0 else [])],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents?token=t",
                                            timeout=2) as r:
                    listing = _json.load(r)
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read()
                assert time.monotonic() < deadline, "JupyterLab did not answer within 60 s"
                time.sleep(0.5)
        names = {item["name"] for item in listing["content"]}
        assert {"train_role.ipynb", "obs_parity.ipynb", "export_weights.ipynb"} <= names
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token=t", timeout=5) as r:
            assert r.status == 200 and b"JupyterLab" in r.read()
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_every_notebook_is_documented_pictured_and_run_by_a_test():
    """The README lists each notebook with its parameters and a picture of its main plot
    (from the notebook itself: python -m brawlkit.tools.notebook_figure), and some test
    executes it under papermill."""
    import re

    readme = (ROOT / "README.md").read_text()
    tests = "".join(p.read_text() for p in (ROOT / "tests").glob("test_*.py"))
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        row = next((ln for ln in readme.splitlines() if ln.startswith(f"| `notebooks/{nb.name}`")),
                   None)
        assert row is not None, f"README's notebook table lacks {nb.name}"
        pics = re.findall(r'<img src="([^"]+)"', row)
        assert all((ROOT / p).is_file() for p in pics), pics
        assert pics or "no plot" in row, f"{nb.name}: no picture of its main plot in the README"
        assert nb.name in tests or f'"{nb.stem}"' in tests, f"no test runs {nb.name}"
        cells = nbformat.read(str(nb), as_version=4).cells
        assert all(c.get("id") for c in cells), f"{nb.name}: a cell without an id"
