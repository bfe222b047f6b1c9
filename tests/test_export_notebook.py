"""notebooks/export_weights.ipynb runs headless through papermill with tiny parameters."""

from __future__ import annotations

from brawlkit.constants import repo_root


def test_export_weights_notebook(tmp_path):
    import papermill

    nb = repo_root() / "notebooks" / "export_weights.ipynb"
    out = tmp_path / "policy.bpw"
    papermill.execute_notebook(
        str(nb),
        str(tmp_path / "export_weights.out.ipynb"),
        parameters={"checkpoint": "", "out": str(out), "n_obs": 500, "learn_steps": 64},
        kernel_name="python3",
        cwd=str(tmp_path),
        progress_bar=False,
    )
    assert out.read_bytes()[:4] == b"BPW1"
    assert out.with_suffix(".parity.png").stat().st_size > 1000
