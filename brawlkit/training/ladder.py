"""The fixed ladder identified: the CPU levels and the baseline play each other.

A rating is identified only by games, and the fixed players — ``cpu:1`` … ``cpu:8``
and the scripted ``baseline`` — used to meet nobody but the learners, so their
ratings floated with whatever the learners' games implied (issue 27: Bradley–Terry
put cpu:1 above cpu:5).  :func:`ensure_ladder` records, once per league, real
matches among them:

* every pair of CPU levels, :data:`CPU_GAMES` games each, slots alternated, at
  simulation speed in C — the match ``brawlpit_cputable`` plays
  (``bp_match_cpu_vs_cpu_ex``, :func:`brawlkit.wire.sim.cpu_match`);
* the baseline against every level, :data:`BASELINE_GAMES` games each, through the
  game server as every opponent plays (the baseline at :data:`BASELINE_ACTION_REPEAT`).

Each is one record (source ``ladder:<fingerprint>``, its own seed, ticks and end
time, both sides ``fixed``) written by the league's one match writer.  The
fingerprint names the ladder as it plays now: the outcomes of one probe game per
pair of levels, the baseline's code and this module's settings.  When the CPU or the
baseline changes, the fingerprint changes and the ladder is recorded again (docs/
ratings.md, "The fixed ladder").  ``league run`` plays it before starting the roles,
``train --league-dir`` when it is missing.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Callable
from itertools import combinations
from typing import Any

import numpy as np

from brawlkit.league.directory import LeagueDir
from brawlkit.league.opponents import BaselinePolicy
from brawlkit.league.records import BASELINE_ID, MatchRecord, cpu_id
from brawlkit.league.sink import MatchSink
from brawlkit.training.evaluate import play_episodes
from brawlkit.wire.constants import C
from brawlkit.wire.cpu_level import CPU_LEVELS
from brawlkit.wire.sim import cpu_match

#: games per pair of CPU levels (slots alternate, so half with each level in slot 0)
CPU_GAMES = 20
#: games of the baseline against each CPU level
BASELINE_GAMES = 4
#: the baseline's decision period in its ladder games
BASELINE_ACTION_REPEAT = 4
#: the ladder's seeds: ``LADDER_SEED + 1000 * (10 * lo + hi) + game`` (lo 0: the
#: baseline), a block no training or evaluation seed reaches
LADDER_SEED = 70_000_000
SOURCE_PREFIX = "ladder:"


def _seed(lo: int, hi: int, game: int) -> int:
    return LADDER_SEED + 1000 * (10 * lo + hi) + game


def _result(winner: int, slot_of_a: int) -> str:
    if winner == C.BP_WINNER_DRAW or winner not in (0, 1):
        return "draw"
    return "win" if winner == slot_of_a else "loss"


def fingerprint(cpu_games: int = CPU_GAMES, baseline_games: int = BASELINE_GAMES) -> str:
    """The ladder as it plays now, in 12 hex digits: a probe game of every pair of CPU
    levels (deterministic: the same code gives the same winner and ticks), the
    baseline's source and the ladder's settings."""
    probes = [(lo, hi, *cpu_match(lo, hi, _seed(lo, hi, 0)))
              for lo, hi in combinations(CPU_LEVELS, 2)]
    text = json.dumps({"probes": probes, "baseline": inspect.getsource(BaselinePolicy),
                       "cpu_games": cpu_games, "baseline_games": baseline_games,
                       "baseline_repeat": BASELINE_ACTION_REPEAT, "seed": LADDER_SEED})
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def source(fp: str) -> str:
    return SOURCE_PREFIX + fp


def recorded(league: LeagueDir, fp: str) -> bool:
    """Whether the league's log holds the ladder of fingerprint ``fp``."""
    return any(m.source == source(fp) for m in league.matches())


def cpu_ladder(sink: MatchSink, games: int = CPU_GAMES) -> list[MatchRecord]:
    """Every pair of CPU levels, ``games`` games each (slot 0 alternating)."""
    out = []
    for lo, hi in combinations(CPU_LEVELS, 2):
        for g in range(games):
            a, b = (lo, hi) if g % 2 == 0 else (hi, lo)
            s = _seed(lo, hi, g)
            winner, ticks = cpu_match(a, b, s)
            out.append(sink.record(cpu_id(a), cpu_id(b), _result(winner, 0), ticks, seed=s))
    return out


def baseline_ladder(sink: MatchSink, games: int = BASELINE_GAMES) -> list[MatchRecord]:
    """The baseline against every CPU level through a game server (the baseline as
    the agent side, so its record is side ``a``)."""
    if games <= 0:
        return []
    base = BaselinePolicy()
    policy: Callable[[np.ndarray], np.ndarray] = lambda obs: np.stack([base(o) for o in obs])  # noqa: E731
    out = []
    for lv in CPU_LEVELS:
        res: dict[str, Any] = play_episodes(policy, cpu_id(lv), games, _seed(0, lv, 0), n_envs=1,
                                            env_kwargs={"action_repeat": BASELINE_ACTION_REPEAT})
        out += sink.records([{"b": cpu_id(lv), "result": m["outcome"], "ticks": m["ticks"],
                              "seed": m["seed"], "time": m["time"]} for m in res["matches"]],
                            a=BASELINE_ID)
    return out


def ensure_ladder(league: LeagueDir, cpu_games: int = CPU_GAMES,
                  baseline_games: int = BASELINE_GAMES,
                  say: Callable[[str], None] | None = None) -> int:
    """Record the fixed ladder in ``league`` unless the ladder as it plays now is there
    already; returns the matches written (0: present)."""
    fp = fingerprint(cpu_games, baseline_games)
    if recorded(league, fp):
        return 0
    if say is not None:
        say(f"ladder {fp}: the CPU levels and the baseline play each other once for this "
            "league (CPU pairs in C, the baseline through a game server)")
    with MatchSink(league, source(fp)) as sink:
        recs = sink.write(cpu_ladder(sink, cpu_games))
        recs += sink.write(baseline_ladder(sink, baseline_games))
    return len(recs)
