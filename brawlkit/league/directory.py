"""The league directory: the permanent, append-only pool that processes share.

Three training roles (and evaluators, bot pools, notebooks) read and write one
directory at the same time, possibly on one machine, without locks::

    DIR/members/<id>.json       one record per registered member, written once, never changed
    DIR/artifacts/<id>.zip      its SB3 checkpoint  } copied in before the record is written;
    DIR/artifacts/<id>.bpw      its exported blob   } the record's paths are the truth
    DIR/matches/<writer>.jsonl  the match log of ONE writer process, append-only

Why no locks are needed: every file has exactly one writer, or is created in a
way that cannot clobber what another process made.

* A member record is written to a temp file in ``members/`` and published with
  ``os.link(tmp, final)``, which fails if ``final`` exists: of two processes
  registering one id, exactly one wins and the other gets ``FileExistsError``;
  a reader sees either no record or the whole record, never half of one.
* Artifacts are copied in (temp file + fsync) *before* the record exists, so a
  record never points at a missing or partial file.  They are published with
  ``os.link`` too, under ``<id>.zip`` when that name is free and otherwise under
  ``<id>.<random>.zip`` (the name is taken by a leftover of a killed registration
  or by a concurrent registration of the same id): an artifact a record refers to
  is never overwritten by someone else's.
* Each process appends to its own match log, one JSON line per match, so no two
  processes ever write one file.  A line is written with one ``write`` and fsynced.

Readers are robust to anything a killed writer leaves: temp files (names starting
with ``.``) are ignored silently; unreadable, corrupt or foreign records and
broken log lines are skipped with a :class:`PoolWarning` naming the file (and
line) and the reason.  Every file is read by :func:`brawlkit.common.confined.read_confined`:
regular files inside the directory only (no symlink, FIFO or device), each at most
its kind's size cap (:data:`MEMBER_MAX_BYTES`, :data:`LOG_MAX_BYTES`,
:data:`ARTIFACT_MAX_BYTES`); a file it refuses is skipped the same way.  Nothing in the directory is ever rewritten or deleted by
the pool (a failed registration removes only the files it made itself, which no
record refers to).  See docs/league.md, "The league directory".
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import warnings
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from brawlkit.common.confined import RefusedFile, read_confined
from brawlkit.common.io import Closing, fsync_dir
from brawlkit.league.records import (
    BASELINE_ID,
    CPU_LEVELS,
    PERMANENT_ROLES,
    MatchRecord,
    Member,
    cpu_id,
    default_policy,
    id_problem,
    permanent_ids,
)
from brawlkit.league.role_specs import role_names

MEMBERS_DIR = "members"
ARTIFACTS_DIR = "artifacts"
MATCHES_DIR = "matches"
MEMBER_SUFFIX = ".json"
LOG_SUFFIX = ".jsonl"
CHECKPOINT_SUFFIX = ".zip"
BLOB_SUFFIX = ".bpw"

#: the size caps of what readers read (docs/league.md, "What readers skip"): a file
#: over its cap is skipped unread, so a sparse file of terabytes or a runaway writer
#: never costs the reader its memory.  A member record is a few KiB (its settings);
#: a match log line ~150 bytes (1 GiB: ~7 million matches in ONE writer's log); an
#: artifact is an SB3 zip or a .bpw of a few MiB (the registry takes 64 MiB by default).
MEMBER_MAX_BYTES = 16 << 20
LOG_MAX_BYTES = 1 << 30
ARTIFACT_MAX_BYTES = 1 << 30


class PoolWarning(UserWarning):
    """A file (or log line) of the league directory was skipped; the message names
    it and says why.  Never fatal: one bad file must not stop three trainers."""


def permanent_members() -> list[Member]:
    """The members every league has without registering them: the scripted baseline
    and the CPU levels 1–8 (generation 0, no artifacts, ``created`` empty so they
    sort before every registered member)."""
    return [Member(id=BASELINE_ID, role="baseline"),
            *(Member(id=cpu_id(lv), role="cpu") for lv in CPU_LEVELS)]


def utc_now() -> str:
    """Registration time: ISO-8601 UTC with microseconds, one fixed format so that
    string order is time order (``members()`` sorts by it)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def writer_name(source: str = "") -> str:
    """A match-log name unique to this process and call: ``[source-]host-pid-random``.
    ``source`` is reduced to file-name-safe characters (``train:main`` → ``train_main``)."""
    host = socket.gethostname().split(".")[0] or "host"
    parts = [_safe_name(source), _safe_name(host), str(os.getpid()), secrets.token_hex(4)]
    return "-".join(p for p in parts if p)


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text).lstrip(".")


def _tmp_name(name: str) -> str:
    """A temp file next to ``name``: hidden (readers ignore dot files) and unique."""
    return f".{name}.{secrets.token_hex(6)}.tmp"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _listdir(path: Path) -> list[str]:
    """Entry names of ``path`` in sorted order (a missing directory is empty)."""
    try:
        return sorted(os.listdir(path))
    except FileNotFoundError:
        return []


def _warn(path: Path, what: str, stacklevel: int = 3) -> None:
    """A :class:`PoolWarning` naming ``path``, attributed to the pool's caller."""
    warnings.warn(f"{path}: {what}", PoolWarning, stacklevel=stacklevel)


class LeagueDir:
    """One league directory (see the module docstring for the layout and rules).

    ``create``: make the directory and its sub-directories if missing; with
    ``create=False`` the directory must exist and be a league (at least one of
    ``members/``, ``artifacts/``, ``matches/``): a reader should neither conjure an
    empty league out of a mistyped path nor read a run directory (``runs/main``) as
    a league with no members.  Cheap to construct; holds no open files, so every
    process (and every role in it) may have its own instance.
    """

    def __init__(self, path: str | os.PathLike[str], create: bool = True) -> None:
        self.path = Path(path)
        subs = (MEMBERS_DIR, ARTIFACTS_DIR, MATCHES_DIR)
        if create:
            for sub in subs:
                (self.path / sub).mkdir(parents=True, exist_ok=True)
        elif not self.path.is_dir():
            raise FileNotFoundError(f"no league directory at {self.path}: give the directory "
                                    "`league run --league-dir` (or `train --league-dir`) made")
        elif not any((self.path / sub).is_dir() for sub in subs):
            raise FileNotFoundError(
                f"{self.path} is not a league directory (no {'/, '.join(subs)}/ in it): give "
                "the directory `league run --league-dir` (or `train --league-dir`) made, e.g. "
                "runs/league")

    def __repr__(self) -> str:
        return f"LeagueDir({str(self.path)!r})"

    @property
    def members_dir(self) -> Path:
        return self.path / MEMBERS_DIR

    @property
    def artifacts_dir(self) -> Path:
        return self.path / ARTIFACTS_DIR

    @property
    def matches_dir(self) -> Path:
        return self.path / MATCHES_DIR

    # ------------------------------------------------------------------ members
    def register(self, member: Member, checkpoint: str | os.PathLike[str] | None = None,
                 blob: str | os.PathLike[str] | None = None) -> Member:
        """Add ``member`` to the pool, once and for all; returns the record as stored.

        The files ``checkpoint`` (SB3 zip) and ``blob`` (.bpw) are copied into
        ``artifacts/`` first, and only then is the record published, so a record
        never points at a missing file.  ``checkpoint``/``blob`` of the result are
        the copies' paths relative to the league directory; ``created`` is filled
        (UTC now) when empty.  The result is the record read back from its JSON,
        i.e. exactly what :meth:`members` will return for it.

        Raises ``FileExistsError`` naming the id if it is registered already (also
        when another process wins a race for it: the record is then that process's,
        intact) or is a permanent member's; ``ValueError`` for an id that is not a
        plain name, a permanent role, or a ``member.checkpoint``/``blob`` without the
        file to copy.  On any failure, the files this call made are removed again.
        """
        member = Member.from_json(member.to_json())  # validates id and role
        if member.id in permanent_ids():
            raise FileExistsError(f"member {member.id!r} is a permanent member, never registered")
        if member.permanent:
            raise ValueError(f"role {member.role!r} is reserved for the permanent members")
        for what, given, source in (("checkpoint", member.checkpoint, checkpoint),
                                    ("blob", member.blob, blob)):
            if given is not None and source is None:
                raise ValueError(f"member {member.id!r}: {what}={given!r} but no {what} file to "
                                 "copy in (the pool's records only point at its own copies)")
        final = self._record_path(member.id)
        if os.path.lexists(final):  # early refusal; the os.link below is what decides
            raise FileExistsError(f"member {member.id!r} is already registered ({final})")
        self.members_dir.mkdir(parents=True, exist_ok=True)
        made: list[Path] = []
        data: bytes | None = None  # the record as published, once it is written
        try:
            rec = replace(
                member, created=member.created or utc_now(),
                checkpoint=None if checkpoint is None else
                self._copy_artifact(Path(checkpoint), member.id, CHECKPOINT_SUFFIX, made),
                blob=None if blob is None else
                self._copy_artifact(Path(blob), member.id, BLOB_SUFFIX, made))
            text = json.dumps(rec.to_json(), indent=2, sort_keys=True, default=str) + "\n"
            stored = Member.from_json(json.loads(text))
            why = _record_problem(stored, member.id)  # what a reader would refuse
            if why:
                raise ValueError(f"member {member.id!r}: {why}")
            data = text.encode("utf-8")
            self._publish(data, final, member.id)
        except BaseException:
            # an interruption (Ctrl-C) that lands after the record was linked in, while the
            # temp file is removed, must not take the files the published record points at
            if data is None or not _holds(final, data):
                for p in made:
                    p.unlink(missing_ok=True)
            raise
        return stored

    def members(self, include_permanent: bool = True) -> list[Member]:
        """Every member: the permanent ones first (baseline, cpu:1 … cpu:8), then every
        readable record sorted by (``created``, ``id``), i.e. in registration order.

        A file that is not a valid record of its own name — unreadable, empty, not
        UTF-8, not JSON (corrupt, truncated), not a member record (e.g. ``{}``), an
        ``id`` other than its file name, a permanent id or role, artifact paths
        outside ``artifacts/`` — is skipped with a :class:`PoolWarning` naming it and
        the reason.  Temp files (names starting with ``.``) are ignored silently.
        """
        found: list[Member] = []
        for name in _listdir(self.members_dir):
            if name.startswith("."):
                continue
            m = self._read_member(self.members_dir / name)
            if m is not None:
                found.append(m)
        found.sort(key=lambda m: (m.created, m.id))
        return (permanent_members() if include_permanent else []) + found

    def member(self, member_id: str) -> Member:
        """One member by id (permanent ones included); ``KeyError`` naming the id when
        there is no valid record of it (an invalid one also warns, as in :meth:`members`)."""
        for p in permanent_members():
            if p.id == member_id:
                return p
        if id_problem(member_id):
            raise KeyError(f"no member {member_id!r} (not a plain name)")
        path = self._record_path(member_id)
        m = self._read_member(path) if os.path.lexists(path) else None
        if m is None:
            raise KeyError(f"no member {member_id!r} in {self.path}")
        return m

    def latest(self, role: str) -> Member | None:
        """The newest registration of ``role`` (largest ``created``), or None.  For a
        permanent role, the last of its permanent members (``baseline``, ``cpu:8``)."""
        if role not in role_names() + PERMANENT_ROLES:
            raise ValueError(f"unknown role {role!r} (one of {role_names() + PERMANENT_ROLES})")
        of_role = [m for m in self.members() if m.role == role]
        return of_role[-1] if of_role else None

    def checkpoint_path(self, member: Member) -> Path | None:
        """Where the member's SB3 checkpoint is (the league path joined with the record's
        relative path; None if it has none)."""
        return None if member.checkpoint is None else self.path / member.checkpoint

    def blob_path(self, member: Member) -> Path | None:
        """Where the member's ``.bpw`` blob is (as :meth:`checkpoint_path`)."""
        return None if member.blob is None else self.path / member.blob

    def read_artifact(self, member: Member, what: str = "checkpoint") -> bytes | None:
        """The bytes of the member's ``checkpoint`` (zip) or ``blob`` (.bpw), read under
        the confined-read rule (a regular file inside ``artifacts/``, at most
        :data:`ARTIFACT_MAX_BYTES`); None when the record has none.  What leaves the
        directory (``registry push``) is read through here, so a symlink placed in
        ``artifacts/`` never sends a file from elsewhere.  :class:`RefusedFile` (an
        ``OSError``) naming the file and the reason otherwise."""
        if what not in ("checkpoint", "blob"):
            raise ValueError(f"an artifact is 'checkpoint' or 'blob', not {what!r}")
        rel = member.checkpoint if what == "checkpoint" else member.blob
        if rel is None:
            return None
        why = _record_problem(member, member.id)
        if why:
            raise RefusedFile(self.path / str(rel), why)
        return read_confined(self.path, rel, ARTIFACT_MAX_BYTES)

    # ------------------------------------------------------------------ matches
    def writer(self, source: str = "") -> MatchWriter:
        """A new match log for this process, ``matches/<writer_name(source)>.jsonl``.
        ``source`` also fills the ``source`` of records written without one.  Take
        one per process (a fork must take its own: the name carries the pid)."""
        return MatchWriter(self.matches_dir / (writer_name(source) + LOG_SUFFIX), source=source)

    def matches(self) -> list[MatchRecord]:
        """Every valid line of every match log, in one deterministic order: the
        records' canonical :attr:`~brawlkit.league.records.MatchRecord.sort_key`
        (time, then content), so every reader — each role, each restart, a registry
        holding the same matches — replays the same sequence and computes the same
        ratings.

        A line the match-record rule refuses (:meth:`MatchRecord.from_line`:
        half-written by a killed writer, corrupt, not a match record, a non-finite
        time, ``ticks`` not an integer in [0, MAX_TICKS], an id of the wrong shape)
        is skipped with a :class:`PoolWarning` naming the file, the line number and
        the reason; an unterminated last line is such a line (a killed writer's, or
        one being written right now: it is read once it is complete).
        A record naming an id that is not a member is KEPT: the log is a fact of
        what was played, and what to make of unknown players is the ratings' call.
        Files whose names start with ``.`` are ignored; other non-``.jsonl`` files
        are skipped with a warning.

        A match is its content (:attr:`MatchRecord.sort_key`), as in the registry: a
        record repeated — in two logs (two processes pulling the same matches from
        the registry) or in one — is counted once.  Writers keep distinct matches
        distinct by their times.
        """
        return [rec for rec, _path, _line in self.located_matches()]

    def located_matches(self) -> list[tuple[MatchRecord, Path, int]]:
        """:meth:`matches` with where each one is: ``(record, log file, line number)``
        of its first occurrence (what ``registry push`` names when the registry
        refuses a record)."""
        keyed: list[tuple[tuple[Any, ...], MatchRecord, Path, int]] = []
        for name in _listdir(self.matches_dir):
            if name.startswith("."):
                continue
            path = self.matches_dir / name
            if not name.endswith(LOG_SUFFIX):
                _warn(path, f"skipped, not a match log (name is not <writer>{LOG_SUFFIX})", 4)
                continue
            try:
                data = read_confined(self.path, f"{MATCHES_DIR}/{name}", LOG_MAX_BYTES)
            except RefusedFile as e:
                _warn(path, f"skipped, {e.reason}", 4)
                continue
            lines = data.split(b"\n")
            tail = lines.pop()  # b"" when the file ends with a newline
            for no, raw in enumerate(lines, start=1):
                if not raw.strip():
                    continue
                rec, why = _parse_match(raw)
                if rec is None:
                    _warn(path, f"line {no} skipped, {why}", 4)
                else:
                    keyed.append(((*rec.sort_key, name, no), rec, path, no))
            if tail:
                _warn(path, f"line {len(lines) + 1} skipped, incomplete (no newline: a writer "
                      "killed mid-line, or one writing right now)", 4)
        keyed.sort(key=lambda kv: kv[0])
        out: list[tuple[MatchRecord, Path, int]] = []
        for _, rec, path, no in keyed:  # sorted by content first: a repeat follows its original
            if not out or out[-1][0].sort_key != rec.sort_key:
                out.append((rec, path, no))
        return out

    # ------------------------------------------------------------------ housekeeping
    def strays(self) -> list[Path]:
        """Files no reader uses: temp files and artifacts no readable record refers to
        — what killed or losing registrations leave.  Reported, never deleted: while
        any writer runs, a stray may be a registration in progress.  Delete them by
        hand only when the league is idle."""
        used = {p for m in self.members(include_permanent=False)
                for p in (m.checkpoint, m.blob) if p is not None}
        out: list[Path] = []
        for sub in (MEMBERS_DIR, ARTIFACTS_DIR, MATCHES_DIR):
            for name in _listdir(self.path / sub):
                rel = f"{sub}/{name}"
                if name.startswith(".") or (sub == ARTIFACTS_DIR and rel not in used):
                    out.append(self.path / rel)
        return out

    # ------------------------------------------------------------------ internals
    def _record_path(self, member_id: str) -> Path:
        return self.members_dir / (member_id + MEMBER_SUFFIX)

    def _copy_artifact(self, source: Path, member_id: str, suffix: str, made: list[Path]) -> str:
        """Copy ``source`` into ``artifacts/`` (temp + fsync + link, never overwriting);
        returns its path relative to the league directory."""
        adir = self.artifacts_dir
        adir.mkdir(parents=True, exist_ok=True)
        tmp = adir / _tmp_name(member_id + suffix)
        made.append(tmp)
        with open(source, "rb") as src, open(tmp, "xb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
            dst.flush()
            os.fsync(dst.fileno())
        name = member_id + suffix
        while True:
            try:
                os.link(tmp, adir / name)
                break
            except FileExistsError:  # a leftover or a concurrent registration: never clobber
                name = f"{member_id}.{secrets.token_hex(4)}{suffix}"
        made.append(adir / name)
        tmp.unlink()
        made.remove(tmp)
        fsync_dir(adir)
        return f"{ARTIFACTS_DIR}/{name}"

    def _publish(self, data: bytes, final: Path, member_id: str) -> None:
        """Write ``data`` as ``final`` exactly once: temp file, fsync, ``os.link``
        (refuses an existing ``final``, unlike a rename), temp removed either way."""
        tmp = final.with_name(_tmp_name(final.name))
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(tmp, final)
            except FileExistsError:
                raise FileExistsError(
                    f"member {member_id!r} is already registered ({final})") from None
        finally:
            tmp.unlink(missing_ok=True)
        fsync_dir(final.parent)

    def _read_member(self, path: Path) -> Member | None:
        """The member recorded in ``path``, or None with a warning saying why not."""
        name = path.name
        if not name.endswith(MEMBER_SUFFIX):
            _warn(path, f"skipped, not a member record (name is not <id>{MEMBER_SUFFIX})", 4)
            return None
        try:
            data = read_confined(self.path, f"{MEMBERS_DIR}/{name}", MEMBER_MAX_BYTES)
        except RefusedFile as e:
            _warn(path, f"skipped, {e.reason}", 4)
            return None
        why = ""
        m: Member | None = None
        if not data.strip():
            why = "empty"
        else:
            try:
                m = _member_from_bytes(data)
            except UnicodeDecodeError:
                why = "not UTF-8 text (a binary file?)"
            except json.JSONDecodeError as e:
                why = f"not valid JSON, truncated or corrupt ({e.msg} at line {e.lineno} column {e.colno})"
            except RecursionError:
                why = "not valid JSON (nested too deeply)"
            except ValueError as e:
                why = f"not a member record ({e})"
        if m is not None:
            why = _record_problem(m, name[: -len(MEMBER_SUFFIX)])
        if why:
            _warn(path, f"skipped, {why}", 4)
            return None
        return m


def _member_from_bytes(data: bytes) -> Member:
    return Member.from_json(json.loads(data.decode("utf-8")))


def _record_problem(m: Member, expected_id: str) -> str:
    """Why ``m`` is not a valid record of the file ``<expected_id>.json`` (empty if it
    is), beyond what ``Member.from_json`` checks: the id is the file's, no permanent
    id or role, a parent that is an id, artifact paths inside ``artifacts/`` only
    (never absolute or ``..``)."""
    if m.id != expected_id:
        return f"holds member {m.id!r}, not {expected_id!r} as its name says"
    if m.id in permanent_ids() or m.permanent:
        return f"claims the permanent member/role {m.id!r}/{m.role!r}"
    if not isinstance(m.parent, str | None):
        return f"parent {m.parent!r} is not an id"
    for what, rel in (("checkpoint", m.checkpoint), ("blob", m.blob)):
        if rel is None:
            continue
        if not isinstance(rel, str) or not re.fullmatch(rf"{ARTIFACTS_DIR}/[^/]+", rel) \
                or rel.split("/")[1].startswith("."):
            return f"its {what} {rel!r} is not a file under {ARTIFACTS_DIR}/"
    return ""


def _parse_match(raw: bytes) -> tuple[MatchRecord | None, str]:
    """(record, "") or (None, why not) for one log line: the match-record rule."""
    try:
        return MatchRecord.from_line(raw), ""
    except ValueError as e:
        return None, str(e)


class MatchWriter(Closing):
    """Appends match records to ONE log file owned by this process.

    Each :meth:`write_many` call is one ``write`` of whole lines followed by an
    ``fsync``: after it returns the matches are on disk.  Before writing, the
    file's last byte is checked: if a previous writer of this file was killed
    mid-line, the new lines start on a fresh line, so the half line stays one
    broken line (skipped by readers) instead of swallowing a good one.  Records are
    validated before anything is written (a bad record raises ``ValueError`` here,
    in the process that made it, rather than being skipped by every reader).
    """

    def __init__(self, path: str | os.PathLike[str], source: str = "") -> None:
        self.path = Path(path)
        self.source = source
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # O_RDWR (not O_WRONLY) so the last byte can be read back with pread
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)

    @property
    def name(self) -> str:
        """The writer name (the log's file name without ``.jsonl``)."""
        return self.path.name.removesuffix(LOG_SUFFIX)

    def write(self, rec: MatchRecord) -> None:
        """Append one match (one line, fsynced)."""
        self.write_many([rec])

    def write_many(self, recs: Iterable[MatchRecord]) -> int:
        """Append matches as one write + one fsync; returns how many were written."""
        lines: list[str] = []
        for rec in recs:
            if not isinstance(rec, MatchRecord):
                raise TypeError(f"not a MatchRecord: {rec!r}")
            if self.source and not rec.source:
                # the record as if made with this source: a policy it did not say (the
                # default for no source) becomes the default for this one
                said = {side: getattr(rec, f"{side}_policy") != default_policy("", side)
                        for side in ("a", "b")}
                rec = replace(rec, source=self.source,
                              a_policy=rec.a_policy if said["a"] else "",
                              b_policy=rec.b_policy if said["b"] else "")
            MatchRecord.from_json(rec.to_json())  # the rule every reader applies
            lines.append(json.dumps(rec.to_json(), sort_keys=True, separators=(",", ":")) + "\n")
        if not lines:
            return 0
        if self._fd is None:
            raise ValueError(f"match writer {self.path} is closed")
        data = "".join(lines).encode("utf-8")
        size = os.fstat(self._fd).st_size
        if size and os.pread(self._fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        _write_all(self._fd, data)
        os.fsync(self._fd)
        return len(lines)

    def close(self) -> None:
        fd = getattr(self, "_fd", None)  # None also when __init__ failed before opening
        if fd is not None:
            self._fd = None
            os.close(fd)

    def __del__(self) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MatchWriter({str(self.path)!r})"


def _holds(path: Path, data: bytes) -> bool:
    """Does ``path`` hold exactly ``data``? (This call's own record was published.)"""
    try:
        return path.read_bytes() == data
    except OSError:
        return False
