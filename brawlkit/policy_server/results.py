"""Where the results of ``/move`` fights go: a league directory and the registry.

An external model is rated beside the PPO league only if its matches reach the same
match log the league's ratings replay: a league directory's on this machine (through
the league's one match writer, :class:`~brawlkit.league.sink.MatchSink`: one time
rule, the seed and each side's policy in every record), and the registry's (``RegistryClient.post_matches``) for every machine
sharing it.  :class:`ResultSink` writes both, whole batches at a time:

* the league directory with one ``write_many`` (one ``write`` and one ``fsync``: a
  killed process leaves at most half a line, which readers skip);
* the registry with one ``post_matches`` (all or nothing on the server side; a
  registry that is down keeps the batch queued here and it is sent again with the
  next one or at :meth:`ResultSink.close` — resending is safe, a match *is* its
  content).
"""

from __future__ import annotations

import sys
from typing import Any

from brawlkit.league.directory import LeagueDir
from brawlkit.league.records import MatchRecord, is_reserved_id, permanent_ids
from brawlkit.league.sink import MatchSink
from brawlkit.registry.client import RegistryClient, RegistryError, RegistryUnavailable


def member_problem(member: str) -> str | None:
    """Why ``member`` cannot be the endpoint's id in a match log (None = fine)."""
    if not member or "/" in member or member.startswith("."):
        return f"member {member!r} is not a plain name"
    if member in permanent_ids():
        return f"member {member!r} is a permanent member (the baseline or a CPU level)"
    if is_reserved_id(member):
        return f"member {member!r} is reserved for human players"
    return None


class ResultSink:
    """The match records of finished fights, to a league directory and/or a registry."""

    def __init__(self, league_dir: str | None = None, registry: str | None = None,
                 source: str = "move", client: RegistryClient | None = None) -> None:
        self.source = source
        self.sink = MatchSink(LeagueDir(league_dir) if league_dir is not None else None, source)
        self.client = client if client is not None else (
            RegistryClient(registry) if registry is not None else None)
        self.pending: list[MatchRecord] = []
        self.counts = {"league": 0, "registry": 0, "registry_queued": 0}

    def record(self, a: str, b: str, result: str, ticks: int, *, seed: int | None = None,
               a_policy: str = "fixed") -> MatchRecord:
        """The record of a match that ended now (the one sink's time rule); ``a_policy``
        ``training`` for a fight of a policy still learning (``policy train``)."""
        return self.sink.record(a, b, result, ticks, seed=seed, a_policy=a_policy)

    def post(self, records: list[MatchRecord]) -> dict[str, Any]:
        """Write one batch: the league directory first, then the registry (with whatever
        an earlier failure left queued).  Returns what went where."""
        out: dict[str, Any] = {"league": 0, "registry": 0, "registry_error": None}
        if self.sink.writer is not None and records:
            out["league"] = len(self.sink.write(records))
            self.counts["league"] += out["league"]
        if self.client is not None:
            self.pending.extend(records)
            out.update(self._flush())
        return out

    def _flush(self) -> dict[str, Any]:
        if self.client is None or not self.pending:
            return {"registry": 0, "registry_error": None}
        try:
            self.client.post_matches(self.pending)
        except (RegistryUnavailable, OSError) as e:  # down: keep the batch for the next try
            self.counts["registry_queued"] = len(self.pending)
            return {"registry": 0, "registry_error": f"{type(e).__name__}: {e}"}
        except RegistryError as e:  # refused (4xx): sending again would be refused again
            self.pending, self.counts["registry_queued"] = [], 0
            return {"registry": 0, "registry_error": f"refused: {e}"}
        n, self.pending = len(self.pending), []
        self.counts["registry"] += n
        self.counts["registry_queued"] = 0
        return {"registry": n, "registry_error": None}

    @property
    def name(self) -> str | None:
        return self.sink.name

    def close(self) -> None:
        """Send what is still queued (once more) and close the league log."""
        res = self._flush()
        if res["registry_error"]:
            print(f"results: {len(self.pending)} match(es) not sent to the registry: "
                  f"{res['registry_error']}", file=sys.stderr)
        self.sink.close()
