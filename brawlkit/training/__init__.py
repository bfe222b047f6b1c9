"""Training: the configuration (``config.py``), the PPO loop (``ppo.py``), its
callback, run directories and checkpoints, and evaluation of what ships.

Import-light: ``from brawlkit.training import TrainConfig`` does not load torch;
``from brawlkit.training.ppo import train`` does."""

from brawlkit.training.config import TrainConfig

__all__ = ["TrainConfig"]
