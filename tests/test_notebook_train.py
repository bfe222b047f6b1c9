"""notebooks/train_role.ipynb runs headless through papermill with tiny parameters."""

from __future__ import annotations

import json

import pytest

from brawlkit.constants import repo_root

SERVER = repo_root() / "native" / "build" / "brawlpit_server"


@pytest.mark.skipif(not SERVER.is_file(), reason="native server not built (make build)")
def test_train_role_notebook(tmp_path):
    import nbformat
    import papermill

    nb = repo_root() / "notebooks" / "train_role.ipynb"
    run_dir = tmp_path / "runs" / "main" / "nb"
    out = tmp_path / "train_role.out.ipynb"
    papermill.execute_notebook(
        str(nb),
        str(out),
        parameters={"role": "main", "generations": 1, "steps_per_generation": 256, "n_envs": 2,
                    "run_dir": str(run_dir), "eval_levels": [1], "eval_episodes": 1,
                    "max_episode_steps": 60, "progress": False, "seed": 1},
        kernel_name="python3",
        cwd=str(tmp_path),
        progress_bar=False,
    )
    assert (run_dir / "gen_0000.zip").is_file()
    meta = json.loads((run_dir / "gen_0000.json").read_text())
    assert meta["role"] == "main" and "cpu_1" in meta["eval"]
    executed = nbformat.read(str(out), as_version=4)
    images = [o for c in executed.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if "image/png" in o.get("data", {})]
    assert len(images) >= 4, "expected the four training plots"
