"""One compute thread per process: on a 2-core box the cores belong to the game
servers and the trainer, and a BLAS pool per process only adds wake-ups."""

from __future__ import annotations

import os


def limit_threads() -> None:
    """Set ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` (if unset) and torch to one thread."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a requirement; numpy-only use is fine
        return
    torch.set_num_threads(1)
