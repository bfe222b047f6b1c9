"""Keep the replays of the biggest upsets, delete the rest.

The pool's servers run with ``--record DIR/.incoming/<server>`` (spec: replays are
``<start_unix_ms>-a<arena>-m<match>.bpr``, published by rename, so a file under its
final name is complete).  For each finished match the pool knows the arena and the
match id, so it claims that file and scores the match's **surprise**
``|S − E|``: S the score of side a (1 win, ½ draw, 0 loss), E = a's expected score
from the two pre-match Elo ratings.  A favourite's win scores 1 − E < ½, an
underdog's win more than ½, a draw between equals 0: the surprise is how wrong the
ratings were about this match, on the same scale whichever side won.

The ``keep`` most surprising replays are moved to ``DIR/`` under a name that says what
they are (:func:`descriptive_name`: when, who, what happened —
``20261201-031500_main-r-g0003_beats_main-r-g0011_a2-m2.bpr``, not the server's
``1796099799176-a2-m2.bpr``) and listed in
``DIR/index.json`` (kept across runs: a new run competes with the old upsets);
everything else — less surprising matches, void matches, matches cut short — is
deleted.  ``index.json`` (written atomically) is::

    {"keep": K, "replays": [{"file", "a", "b", "rating_a", "rating_b", "result",
      "expected", "surprise", "ticks", "time", "source", "arena", "match_id"}, ...]}

sorted by surprise, highest first; ``file`` is relative to ``DIR``.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brawlkit.league.ratings import elo_expected
from brawlkit.league.records import MatchRecord

INDEX = "index.json"
INCOMING = ".incoming"
#: how long after the result line a replay file may take to appear
CLAIM_WAIT_S = 10.0
#: an unclaimed replay older than this is a void / cut-short match: deleted
STRAY_AGE_S = 30.0


#: how a kept replay's name says the result, from side a's view
NAME_VERBS = {"win": "beats", "loss": "loses-to", "draw": "draws-with"}
#: the longest part an id contributes to a file name
NAME_ID_CHARS = 60


def _name_part(member_id: str) -> str:
    """An id as part of a file name: ``:`` (``cpu:3``, ``player:alice``) and anything
    else a file system might mind become ``_``; long ids are cut."""
    return re.sub(r"[^A-Za-z0-9_.+@-]", "_", member_id)[:NAME_ID_CHARS]


def descriptive_name(entry: dict[str, Any]) -> str:
    """``<UTC time of the result>_<a>_<beats|loses-to|draws-with>_<b>_a<arena>-m<match>.bpr``:
    sorted by time in a listing, and readable without opening index.json."""
    when = _dt.datetime.fromtimestamp(float(entry["time"]), _dt.UTC).strftime("%Y%m%d-%H%M%S")
    verb = NAME_VERBS.get(str(entry["result"]), str(entry["result"]))
    return (f"{when}_{_name_part(str(entry['a']))}_{verb}_{_name_part(str(entry['b']))}"
            f"_a{entry['arena']}-m{entry['match_id']}.bpr")


def surprise(rec: MatchRecord, rating_a: float, rating_b: float) -> tuple[float, float]:
    """(expected score of a, |S − E|) of a match with these pre-match ratings."""
    e = elo_expected(rating_a, rating_b)
    return e, abs(rec.score - e)


@dataclass
class _Claim:
    incoming: Path
    arena: int
    match_id: int
    entry: dict[str, Any]
    since: float


class ReplayKeeper:
    def __init__(self, root: Path, keep: int) -> None:
        self.root = Path(root)
        self.keep = max(0, int(keep))
        self.root.mkdir(parents=True, exist_ok=True)
        self.incoming_root = self.root / INCOMING
        self.incoming_root.mkdir(exist_ok=True)
        self.entries: list[dict[str, Any]] = self._load()
        self.claims: list[_Claim] = []
        self.kept = 0
        self.deleted = 0
        self.missing = 0

    def incoming(self, name: str) -> Path:
        """The directory one server incarnation records into."""
        d = self.incoming_root / name
        d.mkdir(parents=True, exist_ok=True)
        return d

    def _load(self) -> list[dict[str, Any]]:
        try:
            data = json.loads((self.root / INDEX).read_text())
            entries = [e for e in data.get("replays", []) if (self.root / e["file"]).is_file()]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return []
        return sorted(entries, key=lambda e: -float(e.get("surprise", 0.0)))

    def expect(self, incoming: Path, arena: int, match_id: int, rec: MatchRecord,
               rating_a: float, rating_b: float) -> None:
        """A match finished: its replay will appear in ``incoming``."""
        e, s = surprise(rec, rating_a, rating_b)
        entry = {"a": rec.a, "b": rec.b, "rating_a": round(rating_a, 3),
                 "rating_b": round(rating_b, 3), "result": rec.result, "expected": round(e, 6),
                 "surprise": round(s, 6), "ticks": rec.ticks, "time": rec.time,
                 "source": rec.source, "arena": arena, "match_id": match_id}
        self.claims.append(_Claim(incoming, arena, match_id, entry, time.monotonic()))

    def poll(self, final: bool = False) -> list[str]:
        """Claim the replays that appeared, delete strays; log lines of what happened."""
        log: list[str] = []
        now = time.monotonic()
        changed = False
        for c in list(self.claims):
            found = sorted(c.incoming.glob(f"*-a{c.arena}-m{c.match_id}.bpr"))
            if found:
                self.claims.remove(c)
                changed |= self._place(found[-1], c.entry)
            elif final or now - c.since > CLAIM_WAIT_S:
                self.claims.remove(c)
                self.missing += 1
                log.append(f"replay of {c.entry['a']} vs {c.entry['b']} (arena {c.arena} "
                           f"match {c.match_id}) never appeared")
        for d in self.incoming_root.iterdir() if self.incoming_root.is_dir() else ():
            for f in d.glob("*.bpr") if d.is_dir() else ():
                try:
                    age = time.time() - f.stat().st_mtime
                except OSError:
                    continue
                if final or age > STRAY_AGE_S:
                    f.unlink(missing_ok=True)
                    self.deleted += 1
        if changed:
            self._write_index()
        return log

    def _place(self, path: Path, entry: dict[str, Any]) -> bool:
        worst = self.entries[-1]["surprise"] if len(self.entries) >= self.keep else None
        if self.keep == 0 or (worst is not None and entry["surprise"] <= worst):
            path.unlink(missing_ok=True)
            self.deleted += 1
            return False
        name = descriptive_name(entry)
        n = 1
        while (self.root / name).exists():  # the same second, arena and match: another run's
            n += 1
            name = f"{descriptive_name(entry).removesuffix('.bpr')}-{n}.bpr"
        shutil.move(str(path), str(self.root / name))
        entry = {"file": name, "recorded_as": path.name, **entry}
        self.entries.append(entry)
        self.entries.sort(key=lambda e: -float(e["surprise"]))
        self.kept += 1
        while len(self.entries) > self.keep:
            gone = self.entries.pop()
            (self.root / gone["file"]).unlink(missing_ok=True)
            self.deleted += 1
        return True

    def _write_index(self) -> None:
        tmp = self.root / f".{INDEX}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps({"keep": self.keep, "replays": self.entries}, indent=1) + "\n")
        tmp.replace(self.root / INDEX)

    def close(self) -> list[str]:
        """Claim what is still due, then remove the incoming directories."""
        deadline = time.monotonic() + 3.0
        while self.claims and time.monotonic() < deadline:
            self.poll()
            time.sleep(0.1)
        log = self.poll(final=True)
        shutil.rmtree(self.incoming_root, ignore_errors=True)
        self._write_index()
        return log
