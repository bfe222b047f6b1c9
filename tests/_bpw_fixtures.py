"""Shared helpers of test_export.py / test_policy_native.py / test_export_notebook.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np

from brawlkit.constants import repo_root

NATIVE = repo_root() / "native"


def build_policy_tools() -> tuple[Path, Path]:
    """Build (if stale) the plain and the ASan brawlpit_policy via native/policy.mk."""
    subprocess.run(
        ["make", "-s", "-C", str(NATIVE), "-f", "policy.mk",
         "build/brawlpit_policy", "build/asan/brawlpit_policy"],
        check=True,
    )
    return NATIVE / "build" / "brawlpit_policy", NATIVE / "build" / "asan" / "brawlpit_policy"


def make_trained_like_checkpoint(path: Path, seed: int = 0) -> object:
    """A PPO of the project's contract whose weights are re-drawn large (|w| up to 0.5),
    so outputs leave [-1, 1], tanh saturates, and parity is tested on realistic
    magnitudes rather than SB3's tiny action-head init.  Returns the model."""
    import torch

    from brawlkit.bench_native import make_model

    model = make_model(seed)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.policy.parameters():
            p.copy_(torch.rand(p.shape, generator=g) - 0.5)
    model.save(str(path))
    return model


def torch_actor_mean(policy: object, obs: np.ndarray) -> np.ndarray:
    """The Gaussian mean ``policy.predict(obs, deterministic=True)`` clips."""
    import torch

    with torch.no_grad():
        x = torch.as_tensor(obs, dtype=torch.float32)
        f = policy.extract_features(x, policy.pi_features_extractor)  # type: ignore[attr-defined]
        lat = policy.mlp_extractor.forward_actor(f)  # type: ignore[attr-defined]
        return policy.action_net(lat).numpy()  # type: ignore[attr-defined]
