"""A local league directory kept in step with a registry (docs/registry.md).

A training run with ``--registry URL`` keeps using its local league directory (the
pool PFSP draws from, the match log the ratings replay) and, after every
generation, :meth:`RegistrySync.push` uploads the new member (zip, blob, record)
and its matches, and :meth:`RegistrySync.pull` brings in every member the other
locations registered (downloaded once, sha256-verified, cached) and their matches.
A registry that is down costs nothing but delay: what could not be pushed stays
queued in this process and goes out with the next successful push.

Matches of a registered human (``player:NAME``) are never pushed from here: the
registry stores one only with the player's ticket, which a league directory does
not keep (it is not part of the match), so such a record reaches the registry from
the process that had the ticket (``post_matches(..., tickets=...)``).  Pushing it
without would get the whole batch refused (403).

What is pushed passed the match-record rule of the league directory's reader —
the same rule the registry's schema applies (:meth:`MatchRecord.from_json`) — so
a refusal should not happen; if the registry refuses a batch anyway (a 4xx: a
newer service's stricter rule, a ticket), the batch is split until the refused
records are alone, those are named (log file and line) and dropped, and the rest
is stored: a push is never stuck on one record.
"""

from __future__ import annotations

import socket
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from brawlkit.league.directory import LeagueDir, PoolWarning
from brawlkit.league.records import MatchRecord, Member, player_name
from brawlkit.league.sink import MatchSink
from brawlkit.registry.client import RegistryClient, RegistryError, RegistryUnavailable

#: the match log a pull writes other locations' matches to
PULL_SOURCE = "registry"
#: matches per POST /matches of a push (a bounded request size)
PUSH_BATCH = 5000
#: the answers that refuse a batch's content (not the agent): a push splits it
REFUSALS = (400, 413, 422)


class LocationClash(UserWarning):
    """Two league directories register checkpoints under one location."""


def _pushable(matches: list[MatchRecord]) -> list[MatchRecord]:
    """The matches a league directory can vouch for: all but those naming a player."""
    return [m for m in matches if player_name(m.a) is None and player_name(m.b) is None]


@dataclass
class RegistrySync:
    client: RegistryClient
    league: LeagueDir
    location: str = field(default_factory=socket.gethostname)
    pending_members: list[Member] = field(default_factory=list)
    pending_matches: list[MatchRecord] = field(default_factory=list)
    disabled: set[str] = field(default_factory=set)
    #: what the last push could not send: "<file>:<line>: <why>" per record the
    #: registry refused; per file or log line the league's readers skipped; per
    #: member not uploaded (a refused or missing artifact), why
    refused: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    withheld: list[str] = field(default_factory=list)
    #: the warning that another league directory registers under this location (once)
    clash: str | None = None

    def check_location(self, records: Sequence[dict[str, object]], local: set[str]) -> str | None:
        """Warn (once per sync) when the registry holds checkpoints registered under this
        location that this league directory does not have: another league directory
        registers under the same location (two leagues on one machine both defaulting to
        the host name), and nobody could tell their checkpoints apart by location.
        Checked before a pull adopts them (afterwards they are local).  The warning."""
        if self.clash is not None:
            return None
        theirs = sorted(str(r["id"]) for r in records
                        if r.get("location") == self.location and r["id"] not in local)
        if not theirs:
            return None
        self.clash = (f"location {self.location!r} is used by another league directory too: "
                      f"{len(theirs)} checkpoint(s) registered under it are not in "
                      f"{self.league.path} ({', '.join(theirs[:3])}{', ...' if len(theirs) > 3 else ''}); "
                      f"give each league directory its own --location (e.g. "
                      f"{self.location}:{self.league.path.resolve().name})")
        warnings.warn(self.clash, LocationClash, stacklevel=3)
        return self.clash

    def push(self, member: Member | None = None, matches: list[MatchRecord] | None = None) -> bool:
        """Queue ``member`` and ``matches`` and send everything queued; False (and
        everything kept queued) when the registry is unreachable.  A member whose
        artifacts the confined-read rule refuses (:meth:`LeagueDir.read_artifact`) is
        dropped from the queue with a warning naming the file and the reason."""
        if member is not None:
            if member.checkpoint is None:
                raise ValueError(f"member {member.id} has no checkpoint to upload")
            self.pending_members.append(member)
        self.pending_matches += _pushable(matches or [])
        try:
            while self.pending_members:
                m = self.pending_members[0]
                why = self._upload(m)
                self.pending_members.pop(0)
                if why:
                    warnings.warn(why, stacklevel=2)
            if self.pending_matches:
                self._post(self.pending_matches, [None] * len(self.pending_matches))
                self.pending_matches = []
        except RegistryUnavailable as e:
            warnings.warn(f"registry unreachable, {len(self.pending_members)} member(s) and "
                          f"{len(self.pending_matches)} match(es) queued: {e}", stacklevel=2)
            return False
        return True

    def _upload(self, m: Member) -> str:
        """Upload ``m`` with its artifacts read under the confined-read rule; '' when
        sent, else why not (a refused or missing artifact: nothing is sent)."""
        try:
            ckpt = self.league.read_artifact(m, "checkpoint")
            blob = self.league.read_artifact(m, "blob")
        except OSError as e:  # RefusedFile: names the file and the reason
            return f"member {m.id} not uploaded: {e}"
        if ckpt is None:
            return f"member {m.id} not uploaded: it has no checkpoint"
        self.client.upload(m, ckpt, blob, location=self.location)
        return ""

    def push_all(self) -> tuple[int, int]:
        """Send every trained member of the local pool the registry lacks, and every
        match (the registry stores each once): what a run that ended while the
        registry was down left behind.  Returns (members uploaded, matches accepted);
        :attr:`withheld` says which members were not sent and why, :attr:`skipped` the
        files and log lines the league's readers skipped.
        Raises :class:`RegistryUnavailable` when the registry is down."""
        records = self.client.checkpoints()
        have = {r["id"] for r in records}
        self.refused, self.skipped, self.withheld = [], [], []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", PoolWarning)
            members = self.league.members()
            located = self.league.located_matches()
        self.skipped = [str(w.message) for w in caught if issubclass(w.category, PoolWarning)]
        self.check_location(records, {m.id for m in members})
        sent = 0
        for m in members:
            if m.permanent or m.id in have:
                continue
            why = self._upload(m)
            if why:
                self.withheld.append(why)
            else:
                sent += 1
        pushable = set(_pushable([m for m, _, _ in located]))
        located = [x for x in located if x[0] in pushable]
        accepted = 0
        for i in range(0, len(located), PUSH_BATCH):
            batch = located[i:i + PUSH_BATCH]
            accepted += self._post([m for m, _, _ in batch], [f"{p}:{n}" for _, p, n in batch])
        return sent, accepted

    def _post(self, matches: Sequence[MatchRecord], where: Sequence[str | None]) -> int:
        """POST ``matches``; when the registry refuses the batch (4xx), halve it until
        each refused record is alone, name it (``where``: its log file and line) in
        :attr:`refused` with a warning, and store the rest.  Returns how many were
        accepted; :class:`RegistryUnavailable` propagates (nothing is dropped)."""
        try:
            return int(self.client.post_matches(matches).get("accepted", 0))
        except RegistryUnavailable:
            raise
        except RegistryError as e:
            if e.status not in REFUSALS or len(matches) == 0:
                raise
            if len(matches) == 1:
                line = f"{where[0] or 'match'}: refused by the registry: {e}"
                self.refused.append(line)
                warnings.warn(line, stacklevel=3)
                return 0
        half = len(matches) // 2
        return (self._post(matches[:half], where[:half])
                + self._post(matches[half:], where[half:]))

    def pull(self) -> bool:
        """Bring in the other locations' members and matches; False when unreachable."""
        try:
            records = self.client.checkpoints()
            local = {m.id for m in self.league.members()}
            self.check_location(records, local)
            self.disabled = {r["id"] for r in records if r.get("status") == "disabled"}
            for r in records:
                if r["id"] in local or r.get("status") == "disabled" or not r.get("blob_sha256"):
                    continue
                self._adopt(r)
            self._pull_matches()
        except RegistryUnavailable as e:
            warnings.warn(f"registry unreachable, pool not refreshed from it: {e}", stacklevel=2)
            return False
        return True

    def _adopt(self, record: dict[str, object]) -> None:
        member = Member.from_json({k: record[k] for k in ("id", "role", "generation", "parent",
                                                          "created", "settings") if k in record})
        with tempfile.TemporaryDirectory(prefix="bk_pull_") as td:
            zip_path, blob = Path(td) / "c.zip", Path(td) / "b.bpw"
            zip_path.write_bytes(self.client.download_checkpoint(dict(record)))
            blob.write_bytes(self.client.download_blob(dict(record)))
            try:
                self.league.register(Member(id=member.id, role=member.role,
                                            generation=member.generation, parent=member.parent,
                                            created=member.created, settings=member.settings),
                                     checkpoint=zip_path, blob=blob)
            except FileExistsError:
                pass  # another process of this location adopted it first

    def _pull_matches(self) -> None:
        have = {m.sort_key for m in self.league.matches()}
        new = [m for m in self.client.matches() if m.sort_key not in have]
        if new:  # through the league's one match writer, as every match is
            with MatchSink(self.league, PULL_SOURCE) as sink:
                sink.write(sink.adopt(new))


def connect(url: str, league: LeagueDir, location: str | None = None) -> RegistrySync:
    """A sync for ``league`` against the registry at ``url`` (credentials from the env)."""
    client = RegistryClient(url)
    try:
        client.checkpoints(role="main")  # fail fast on bad credentials or a wrong URL
    except RegistryUnavailable:
        warnings.warn(f"registry {url} unreachable now; the run continues and retries",
                      stacklevel=2)
    except RegistryError as e:
        raise RegistryError(f"registry {url}: {e}") from None
    return RegistrySync(client, league, location or socket.gethostname())
