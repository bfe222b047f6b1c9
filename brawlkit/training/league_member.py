"""One training role as a league member: it draws its opponents from the pool,
records what happens, and registers every generation it finishes.

The trainer (``brawlkit.training.ppo.train(cfg, league_dir=...)``) calls:

* :attr:`sampler` — the role's opponent sampler (:mod:`brawlkit.league.roles`),
  the env's opponent hook;
* :meth:`on_episode` — every finished training episode (opponent, outcome,
  ticks), buffered: the match log only ever names registered members, so the
  buffer is written when the generation that played those matches registers;
* :meth:`register` — after a generation is saved: export the ``.bpw``, add the
  member (zip + blob + record) to the pool, write its buffered matches (side a
  ``training``: the sampled policy that was still learning, not the member) and its
  evaluation matches against the CPU levels, one record per match played (side a
  ``fixed`` for the deterministic policy that ships, ``sampled`` for its noisy twin),
  through the league's one match writer (:class:`~brawlkit.league.sink.MatchSink`),
  and refresh the sampler's pool.

With a :class:`~brawlkit.registry.sync.RegistrySync` (``train --registry URL``,
docs/registry.md) every registered generation and its matches are also pushed to
the registry, and the pool takes in what the other locations registered (less the
members the registry disabled) before the sampler is refreshed.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from brawlkit.export.actor import actor_layers
from brawlkit.export.bpw import PolicyMeta, pack_bpw
from brawlkit.league.directory import LeagueDir
from brawlkit.league.records import MatchRecord, Member, MemberId
from brawlkit.league.role_specs import ROLE_SPECS
from brawlkit.league.roles import LeagueSampler
from brawlkit.league.sink import MatchSink
from brawlkit.registry.sync import RegistrySync
from brawlkit.training.evaluate import verify_model
from brawlkit.wire.cpu_level import CpuLevel


def policy_stats(model: Any) -> dict[str, float]:
    """The Gaussian policy's spread as registered: its mean action std and its entropy
    (a diagonal Gaussian: sum of 0.5 log(2 pi e sigma^2)), from ``log_std`` alone."""
    log_std = model.policy.log_std.detach().cpu().numpy().astype(np.float64)
    return {"std": float(np.exp(log_std).mean()),
            "entropy": float(np.sum(0.5 * np.log(2 * np.pi * np.e) + log_std)),
            "steps": int(model.num_timesteps)}


class LeagueTrainee:
    """The league side of one training run of ``cfg.role`` (see the module docstring)."""

    def __init__(self, league_dir: str | Path, cfg: Any, run_name: str, seed: int,
                 sync: RegistrySync | None = None) -> None:
        self.pool = LeagueDir(league_dir)
        self.sync = sync
        self.cfg = cfg
        self.run_name = run_name
        spec = ROLE_SPECS[cfg.role]  # the role's one declaration: its sampler and options
        self.sampler: LeagueSampler = spec.make_sampler(
            self.pool.path, cfg.input_layout, cfg.action_repeat, spec.options_from(cfg),
            seed=seed, payoff_decay=cfg.payoff_decay, ladder_k=cfg.curriculum_k,
            ladder_floor=cfg.curriculum_floor)
        if self.sync is not None:
            self.sync.pull()
        self._refresh()
        self.sink = MatchSink(self.pool, source=f"train:{cfg.role}")
        self._episodes: list[dict[str, Any]] = []
        self._verified: list[dict[str, Any]] = []

    def member_id(self, generation: int) -> str:
        """The id generation ``generation`` of this run registers under."""
        return str(MemberId(self.cfg.role, self.run_name, generation))

    def on_episode(self, opponent: str, outcome: str, ticks: int) -> None:
        """One finished training episode, kept until the generation registers."""
        self._episodes.append({"b": opponent, "result": outcome, "ticks": int(ticks),
                               "time": time.time()})

    def verify(self, model: Any, meta: PolicyMeta, envs: Any) -> dict[str, float]:
        """Play the role's verification matches (:meth:`LeagueSampler.verification`: for
        Main with ``--main-verify-matches`` > 0, its deterministic policy against the
        newest main exploiters), hand them to the sampler before the generation is saved
        (so its state, and a resume, carries them) and keep them for the match log; the
        win rate against each opponent (draws half)."""
        targets, matches = self.sampler.verification()
        if not targets or matches <= 0:
            return {}
        played = verify_model(model, [self.sampler.opponent(t) for t in targets], matches,
                              envs, meta)
        rates = self.sampler.record_verified([(r["opponent"], r["outcome"]) for r in played])
        self._verified = [{"b": r["opponent"], "result": r["outcome"], "ticks": r["ticks"],
                           "seed": r["seed"], "time": r["time"], "a_policy": "fixed"}
                          for r in played]
        return rates

    def register(self, generation: int, model: Any, checkpoint: Path, meta: PolicyMeta,
                 parent: str | None, evals: dict[str, dict[str, Any]]) -> Member:
        """Add this generation to the pool and write the matches it played."""
        member_id = self.member_id(generation)
        with tempfile.TemporaryDirectory(prefix="bk_register_") as td:
            blob = Path(td) / f"{member_id}.bpw"
            blob.write_bytes(pack_bpw(actor_layers(model.policy), meta))
            member = self.pool.register(
                Member(id=member_id, role=self.cfg.role, generation=generation, parent=parent,
                       settings={**self.cfg.to_dict(), "stats": policy_stats(model)}),
                checkpoint=checkpoint, blob=blob)
        records = self.match_records(member_id, evals)
        self.sink.write(records)
        if self.sync is not None:  # share it, then take in what the other locations made
            self.sync.push(member, records)
            self.sync.pull()
        self._refresh()
        return member

    def match_records(self, member_id: str, evals: dict[str, dict[str, Any]]) -> list[MatchRecord]:
        """The generation's matches as records, each a real match: its training episodes
        (``a_policy`` ``training``: the sampled, still-changing policy — kept in the log
        for PFSP, the curriculum and the plots, never rated) and its evaluation matches
        (source ``eval``, each with its own seed, ticks and end time; ``fixed`` for the
        deterministic policy that ships, ``sampled`` for the noisy one)."""
        records = self.sink.records(self._episodes, a=member_id, a_policy="training")
        self._episodes = []
        evaluated: list[dict[str, Any]] = []
        for name, ev in evals.items():
            opp = CpuLevel.from_key(name).spec
            for played, policy in ((ev, "fixed"), (ev.get("sampled") or {}, "sampled")):
                evaluated += [{"b": opp, "result": m["outcome"], "ticks": m["ticks"],
                               "seed": m.get("seed"), "time": m.get("time"),
                               "a_policy": policy} for m in played.get("matches", ())]
        evaluated += self._verified  # fixed against fixed: rated like any member's game
        self._verified = []
        return records + self.sink.records(evaluated, a=member_id, source="eval")

    def _refresh(self) -> None:
        """Hand the sampler the pool as it is now, less what the registry disabled."""
        disabled = self.sync.disabled if self.sync is not None else set()
        self.sampler.refresh([m for m in self.pool.members() if m.id not in disabled])
