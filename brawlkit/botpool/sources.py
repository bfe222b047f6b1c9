"""Where the pool's bots come from, and their current ratings.

Every member with a native blob plays — every generation and every role: the
pool's point is that Elo keeps moving for old checkpoints too (docs/league.md).

* A league directory: every member record with a ``.bpw`` (read straight from
  ``artifacts/``), ratings replayed from its match log.
* A registry: every non-disabled checkpoint with a blob, downloaded once
  (sha256-verified against the record) into the client's cache directory under
  ``botpool/<sha256>.bpw``; ratings replayed from the registry's match log.

Both give a :class:`Snapshot`; with both, the union (the league's copy of an id
wins) and the league's ratings.  A refresh that fails keeps the previous set.
"""

from __future__ import annotations

import os
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from brawlkit.common.confined import RefusedFile, open_confined
from brawlkit.league.directory import LeagueDir
from brawlkit.league.ratings import elo
from brawlkit.league.records import MatchRecord
from brawlkit.registry.client import RegistryError, RegistryUnavailable, sha256_of

#: Elo of a bot before its first game (brawlkit.league.ratings' default)
INITIAL = 1200.0
K_FACTOR = 32.0


@dataclass(frozen=True)
class Bot:
    """One playable checkpoint: its member id, its blob on disk, who it is."""

    id: str
    blob: Path
    role: str = ""
    generation: int = 0


@dataclass
class Snapshot:
    """The bots and ratings of one refresh (``problems``: one line per bot left out)."""

    bots: dict[str, Bot] = field(default_factory=dict)
    ratings: dict[str, float] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def replay_ratings(matches: list[MatchRecord], ids: list[str]) -> dict[str, float]:
    """Live Elo of every id, replayed from the log by brawlkit.league.ratings (so a
    match against ``anonymous`` moves what the ratings module says it moves)."""
    return dict(elo(matches, ids, k=K_FACTOR, initial=INITIAL).ratings)


def from_league(league: LeagueDir) -> Snapshot:
    snap = Snapshot()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a torn file is the pool's problem, not ours
        members = league.members(include_permanent=False)
        matches = league.matches()
    for m in members:
        path = league.blob_path(m)
        if path is None:
            continue
        try:  # the league's confined-read rule: a regular file inside artifacts/
            os.close(open_confined(league.path, str(m.blob)))
        except RefusedFile as e:
            snap.problems.append(f"{m.id}: blob {e}")
            continue
        snap.bots[m.id] = Bot(m.id, path, m.role, m.generation)
    snap.ratings = replay_ratings(matches, list(snap.bots))
    return snap


def registry_bot(client: Any, rec: dict[str, Any], cache: Path | None = None) -> Bot:
    """The :class:`Bot` of registry record ``rec``: its blob downloaded (LZ4 on the wire,
    checked against the record's sha256) into ``cache`` (default the client's
    ``botpool/``) once, and named by that sha256, so a refresh finds it on disk."""
    cache = cache or Path(client.cache_dir) / "botpool"
    cache.mkdir(parents=True, exist_ok=True)
    sha = str(rec["blob_sha256"])
    path = cache / f"{sha}.bpw"
    if not (path.is_file() and sha256_of(path.read_bytes()) == sha):
        raw = client.download_blob(rec)  # checked against the record's sha256
        # one temp file per thread: the roster's refresh and the active-checkpoint watch
        # may fetch the same new blob at once, and a shared name made one's rename fail
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_bytes(raw)
        tmp.replace(path)
    return Bot(str(rec["id"]), path, str(rec.get("role", "")), int(rec.get("generation") or 0))


def from_registry(client: Any) -> Snapshot:
    """Every non-disabled checkpoint with a blob; raises RegistryUnavailable when down."""

    snap = Snapshot()
    cache = Path(client.cache_dir) / "botpool"
    cache.mkdir(parents=True, exist_ok=True)
    for rec in client.checkpoints():
        sha = rec.get("blob_sha256")
        if rec.get("status") == "disabled" or not sha:
            continue
        try:
            snap.bots[str(rec["id"])] = registry_bot(client, rec, cache)
        except RegistryError as e:
            if type(e).__name__ == "RegistryUnavailable":
                raise
            snap.problems.append(f"{rec['id']}: blob not downloaded ({e})")
    snap.ratings = replay_ratings(client.matches(), list(snap.bots))
    return snap


def gather(league: LeagueDir | None, client: Any | None) -> Snapshot:
    """The union of both sources (either may be None)."""
    if league is not None and client is None:
        return from_league(league)
    if client is not None and league is None:
        return from_registry(client)
    assert league is not None and client is not None

    local = from_league(league)
    try:
        remote = from_registry(client)
    except RegistryUnavailable as e:  # the league's bots play on meanwhile
        local.problems.append(f"registry unreachable, its checkpoints not refreshed ({e})")
        return local
    merged = Snapshot(bots={**remote.bots, **local.bots},
                      problems=local.problems + remote.problems)
    merged.ratings = {**remote.ratings, **local.ratings}
    return merged
