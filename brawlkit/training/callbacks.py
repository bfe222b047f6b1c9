"""The SB3 callback of a training run: feeds the opponent sampler, logs play.

Every env's finished episode -> ``sampler.record(info["opponent"], info["outcome"])``
(and ``on_episode(opponent, outcome, ticks)``: the league's match log);
reward tiers summed per episode (``reward/<tier>``, from the ``episode_tiers`` every
vec env's episode-ending info carries, averaged over the episodes that ended in the
rollout) — nothing per env per step but the action-pattern count, one numpy call; spam fraction per episode from the actions actually
sent (``play/spam_fraction``); the sampler's own numbers (``curriculum/<key>``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback

from brawlkit.env.actions import N_PATTERNS, action_patterns, spam_fraction
from brawlkit.league.curriculum import OpponentSampler


class TrainCallback(BaseCallback):
    """See the module docstring.  ``push_opponents``: subprocess envs cannot call
    the sampler, so the next pick is pushed to the env whose episode ended."""

    def __init__(self, sampler: OpponentSampler, n_envs: int, push_opponents: bool = False,
                 pbar: Any = None, on_episode: Any = None) -> None:
        super().__init__(verbose=0)
        self.sampler = sampler
        self.on_episode = on_episode  # (opponent, outcome, ticks) of every finished match
        self.n = n_envs
        self.push = push_opponents
        self.pbar = pbar
        self._rows = np.arange(n_envs)
        self.counts = np.zeros((n_envs, N_PATTERNS), np.int64)
        self.finished: list[dict[str, Any]] = []

    def _on_step(self) -> bool:
        infos = self.locals["infos"]
        dones = self.locals["dones"]
        acts = self.locals.get("clipped_actions")
        pats = action_patterns(acts if acts is not None else self.locals["actions"])
        self.counts[self._rows, pats] += 1
        for i in np.flatnonzero(dones).tolist():
            self._episode_end(i, infos[i])
        if self.pbar is not None:
            self.pbar.update(self.n)
        return True

    def _episode_end(self, i: int, info: dict[str, Any]) -> None:
        opp, outcome = info.get("opponent"), info.get("outcome")
        if opp is not None and outcome is not None:
            self.sampler.record(str(opp), str(outcome))
            if self.on_episode is not None:
                self.on_episode(str(opp), str(outcome), int(info.get("tick", 0)))
        self.finished.append({
            "tiers": {f"reward/{k}": v for k, v in info.get("episode_tiers", {}).items()},
            "spam": spam_fraction(self.counts[i]), "outcome": outcome, "opponent": opp,
        })
        self.counts[i] = 0
        if self.push:
            self.training_env.env_method("set_next_opponent", self.sampler.sample(), indices=[i])

    def _on_rollout_end(self) -> None:
        log = self.logger
        for k, v in self.sampler.stats().items():
            log.record(f"curriculum/{k}", v)
        if not self.finished:
            return
        eps = self.finished
        for k in sorted({k for e in eps for k in e["tiers"]}):
            log.record(k, float(np.mean([e["tiers"].get(k, 0.0) for e in eps])))
        log.record("play/spam_fraction", float(np.mean([e["spam"] for e in eps])))
        log.record("rollout/win_rate", float(np.mean([e["outcome"] == "win" for e in eps])))
        log.record("rollout/episodes", len(eps))
        self.finished = []
