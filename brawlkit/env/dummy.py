"""A zero-cost stand-in for :class:`~brawlkit.env.BrawlpitEnv`: same spaces, same
episode length, no server.

Two uses: the reference ``bench train`` measures PPO against (how much does the
real env cost the trainer?), and making a PPO model of the project's shape
without a game server (tiny checkpoints for notebooks and tests).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import VecEnv

from brawlkit.env.actions import ACT_DIM
from brawlkit.env.observation import INPUT_LAYOUT, OBS_BOUND, check_input_layout
from brawlkit.wire.constants import C

#: steps in a full match at the default action repeat of 4
EPISODE_STEPS = int(C.BP_MATCH_TICKS) // 4


class ZeroCostEnv(gym.Env[np.ndarray, np.ndarray]):
    """Same observation and action spaces and episode length as BrawlpitEnv.

    ``random_obs=False`` (the benchmark): a constant observation, zero reward,
    no work per step.  ``random_obs=True``: uniform observations and a reward
    that depends on the action, so a few PPO updates move the weights off their
    initialisation (checkpoints with non-trivial weights for export tests).
    Offers ``step_send``/``step_recv`` so it takes the same vec-env path.
    """

    metadata = {"render_modes": []}

    def __init__(self, random_obs: bool = False, episode_steps: int = EPISODE_STEPS,
                 input_layout: int = INPUT_LAYOUT) -> None:
        self.obs_dim = check_input_layout(input_layout)
        self.observation_space = gym.spaces.Box(-OBS_BOUND, OBS_BOUND, (self.obs_dim,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (ACT_DIM,), np.float32)
        self.random_obs = random_obs
        self.episode_steps = episode_steps
        self._obs = np.zeros(self.obs_dim, np.float32)
        self._act = np.zeros(ACT_DIM, np.float32)
        self._t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._t = 0
        return self._observe(), {"opponent": "dummy"}

    def _observe(self) -> np.ndarray:
        if self.random_obs:
            return self.np_random.uniform(-1, 1, self.obs_dim).astype(np.float32)
        return self._obs

    def step_send(self, action: np.ndarray) -> None:
        self._act = np.asarray(action, np.float32)

    def step_recv(self) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._t += 1
        done = self._t >= self.episode_steps
        reward = float(self._act[0]) if self.random_obs else 0.0
        info = {"opponent": "dummy", "outcome": "draw" if done else None}
        return self._observe(), reward, done, False, info

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.step_send(action)
        return self.step_recv()


class ZeroCostVecEnv(VecEnv):
    """``n_envs`` zero-cost envs stepped as one: constant observations, zero rewards, every
    env's episode ending after ``episode_steps`` (staggered, as real envs' matches end
    apart), each vector step a few numpy operations.  ``bench train``'s ceiling: SB3 PPO
    with an environment that costs nothing at any width (per-env Python — what the
    ``ZeroCostEnv`` list pays — would make the ceiling itself slow)."""

    def __init__(self, n_envs: int, episode_steps: int = EPISODE_STEPS,
                 input_layout: int = INPUT_LAYOUT) -> None:
        dim = check_input_layout(input_layout)
        super().__init__(n_envs, gym.spaces.Box(-OBS_BOUND, OBS_BOUND, (dim,), np.float32),
                         gym.spaces.Box(-1.0, 1.0, (ACT_DIM,), np.float32))
        self.episode_steps = episode_steps
        self._obs = np.zeros((n_envs, dim), np.float32)
        self._t = (np.arange(n_envs) * episode_steps) // max(n_envs, 1)  # staggered ends

    def reset(self) -> np.ndarray:
        return self._obs.copy()

    def step_async(self, actions: np.ndarray) -> None:
        pass

    def step_wait(self) -> Any:
        self._t += 1
        done = self._t >= self.episode_steps
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        for i in np.flatnonzero(done).tolist():
            infos[i] = {"opponent": "dummy", "outcome": "draw", "episode_tiers": {},
                        "terminal_observation": self._obs[i].copy(), "TimeLimit.truncated": False}
        self._t[done] = 0
        return self._obs.copy(), np.zeros(self.num_envs, np.float32), done, infos

    def close(self) -> None:
        pass

    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        return [getattr(self, attr_name)] * len(self._indices(indices))

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        setattr(self, attr_name, value)

    def env_method(self, method_name: str, *args: Any, indices: Any = None, **kwargs: Any) -> list[Any]:
        return [None] * len(self._indices(indices))

    def env_is_wrapped(self, wrapper_class: Any, indices: Any = None) -> list[bool]:
        return [False] * len(self._indices(indices))

    def _indices(self, indices: Any) -> list[int]:
        if indices is None:
            return list(range(self.num_envs))
        return [indices] if isinstance(indices, int) else list(indices)
