"""Hostile input at the doors that need no server (issue 21): a league directory's
match log read by ``python -m brawlkit elo``, the league's id and name rules, and the
PARENA compiler's numeric literals and nesting.  Issue 30: files of a league directory
that are not regular files inside it (a FIFO, a symlink to ``/dev/zero`` or out of the
directory, a sparse file of more than the size cap), read by ``elo`` (and, in
tests/test_registry_hostile.py, by ``registry push``).

Each case is what an attacker or a careless user would write; each must be refused
with a message naming the file, the line (and column) and the reason — never a
traceback, never the whole league.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers import last_json, run_cli

from brawlkit.league.directory import (
    ARTIFACT_MAX_BYTES,
    LOG_MAX_BYTES,
    LeagueDir,
    PoolWarning,
)
from brawlkit.league.records import (
    MAX_TICKS,
    MatchRecord,
    Member,
    id_problem,
    player_id,
    player_name_problem,
)

GOOD = {"time": 10.0, "a": "main-r-g0001", "b": "cpu:3", "result": "win", "ticks": 5400,
        "source": "eval"}
#: (line text, what the warning must say): each a line `elo` must skip, alone
BAD_LINES = [
    ('{"time": 11.0, "a": "main-r-g0001", "b": "cpu:3", "result": "win", "ticks": Infinity}',
     "ticks must be an integer"),
    ('{"time": 12.0, "a": "main-r-g0001", "b": "cpu:3", "result": "win", "ticks": 1e999}',
     "ticks must be an integer"),
    ('{"time": 13.0, "a": "main-r-g0001", "b": "cpu:3", "result": "win", "ticks": '
     + "9" * 5000 + "}", "an integer of 5000 digits"),
    ('{"time": 14.0, "a": "main-r-g0001", "b": "cpu:3", "result": "win", "ticks": -5}',
     f"outside [0, {MAX_TICKS}]"),
    ('{"time": 15.0, "a": "main-r-g0001", "b": "cpu:3", "result": "win", "ticks": 1.5}',
     "ticks must be an integer"),
    ('{"time": "5", "a": "main-r-g0001", "b": "cpu:3", "result": "win"}', "time must be a number"),
    ('{"time": true, "a": "main-r-g0001", "b": "cpu:3", "result": "win"}', "time must be a number"),
    ('{"time": 1e999, "a": "main-r-g0001", "b": "cpu:3", "result": "win"}', "time inf is not finite"),
    ('{"time": 16.0, "a": " ", "b": "cpu:3", "result": "win"}', "has the character ' '"),
    ('{"time": 17.0, "a": 5, "b": "cpu:3", "result": "win"}', "a must be a non-empty string"),
    ('{"time": 18.0, "a": "main-r-g0001", "b": "cpu:3", "result": "win", "source": 7}',
     "source 7 must be printable text"),
]


def hostile_league(root: Path) -> tuple[LeagueDir, Path]:
    """A league directory whose one log holds a good match, every bad line, and another
    good match; returns it and the log's path."""
    league = LeagueDir(root)
    league.register(Member(id="main-r-g0001", role="main", generation=1))
    log = league.matches_dir / "hostile-host-1-abcd.jsonl"
    lines = [json.dumps(GOOD), *(line for line, _ in BAD_LINES),
             json.dumps({**GOOD, "time": 20.0, "result": "loss"})]
    log.write_text("\n".join(lines) + "\n")
    return league, log


def test_elo_skips_each_bad_match_line_by_file_and_line(tmp_path: Path) -> None:
    league, log = hostile_league(tmp_path / "league")
    r = run_cli("elo", "--league-dir", str(league.path), "--json", "--bootstrap", "0",
                timeout=120)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    table = last_json(r.stdout)
    assert table["matches"] == 2  # the two good lines, and only them
    by = {row["id"]: row for row in table["members"]}
    assert (by["main-r-g0001"]["wins"], by["main-r-g0001"]["losses"]) == (1, 1)
    for no, (_line, says) in enumerate(BAD_LINES, start=2):
        hit = [ln for ln in r.stderr.splitlines() if f"{log}: line {no} skipped" in ln]
        assert len(hit) == 1 and says in hit[0], (no, says, r.stderr[-3000:])


def test_the_reader_and_the_writer_apply_one_rule(tmp_path: Path) -> None:
    """What a league directory's reader skips, its writer refuses to write, and the
    registry's schema (tests/test_registry_hostile.py) refuses to store."""
    league, _ = hostile_league(tmp_path / "league")
    with pytest.warns(PoolWarning) as caught:
        assert [m.time for m in league.matches()] == [10.0, 20.0]
    assert len([w for w in caught if "skipped" in str(w.message)]) == len(BAD_LINES)
    for line, says in BAD_LINES:
        with pytest.raises(ValueError, match=re.escape(says)):
            MatchRecord.from_line(line)
    with league.writer("w") as w:
        for bad in (MatchRecord(time=1.0, a="x", b="y", result="win", ticks=-5),
                    MatchRecord(time=1.0, a="x", b="y", result="win", ticks=1.5),  # type: ignore[arg-type]
                    MatchRecord(time=float("inf"), a="x", b="y", result="win"),
                    MatchRecord(time=1.0, a="x y", b="y", result="win")):
            with pytest.raises(ValueError):
                w.write(bad)
        assert w.path.stat().st_size == 0


def _sparse(path: Path, size: int) -> None:
    """A sparse file of ``size`` bytes (no disk blocks: instant, and costs nothing)."""
    path.unlink(missing_ok=True)
    with open(path, "wb") as f:
        f.truncate(size)


@dataclass
class Trapped:
    """A league directory holding every file its readers must refuse (issue 30)."""

    league: LeagueDir
    #: the member whose files are all sound (pushed), and its checkpoint's bytes
    good: Member
    good_ckpt: bytes
    #: (file, how its refusal's reason starts) the readers skip: logs and member records
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    #: (member id, its artifact, how its refusal's reason starts): members never uploaded
    withheld: list[tuple[str, Path, str]] = field(default_factory=list)
    #: bytes of the file outside the directory a symlink in artifacts/ points at
    secret: bytes = b""


def trapped_league(root: Path, blob_bytes: bytes = b"not parsed by elo") -> Trapped:
    """A league with one sound member and log, and beside them: in ``matches/`` a FIFO,
    a symlink to /dev/zero, a sparse file one byte over the log cap and a symlink to a
    (valid) log outside the directory; in ``members/`` a symlink to a valid record
    outside; members whose checkpoint in ``artifacts/`` is a symlink to a file outside
    (the ``/etc/hostname`` case), a FIFO, a symlink to /dev/zero, a sparse file over
    the artifact cap.  ``blob_bytes``: the members' .bpw (a real one for a push)."""
    league = LeagueDir(root / "league")
    outside = root / "outside"
    outside.mkdir()
    ckpt, blob = outside / "gen.zip", outside / "gen.bpw"
    ckpt.write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip: the registry takes any bytes
    blob.write_bytes(blob_bytes)
    good = league.register(Member(id="main-ok-g0001", role="main", generation=1),
                           checkpoint=ckpt, blob=blob)
    (league.matches_dir / "good-host-1-0001.jsonl").write_text(json.dumps(GOOD) + "\n")
    t = Trapped(league, good, ckpt.read_bytes(), secret=b"a file from elsewhere: "
                b"/etc/hostname, say\n")
    m = league.matches_dir
    os.mkfifo(m / "fifo-host-1-0002.jsonl")
    os.symlink("/dev/zero", m / "zero-host-1-0003.jsonl")
    _sparse(m / "huge-host-1-0004.jsonl", LOG_MAX_BYTES + 1)
    (outside / "log.jsonl").write_text(json.dumps({**GOOD, "time": 30.0, "b": "cpu:4"}) + "\n")
    os.symlink(outside / "log.jsonl", m / "out-host-1-0005.jsonl")
    link, fifo = "a symbolic link (only regular files", "a FIFO (named pipe), not a regular file"
    t.skipped += [(m / "fifo-host-1-0002.jsonl", fifo), (m / "zero-host-1-0003.jsonl", link),
                  (m / "huge-host-1-0004.jsonl",
                   f"{LOG_MAX_BYTES + 1} bytes, over the limit of {LOG_MAX_BYTES} bytes"),
                  (m / "out-host-1-0005.jsonl", link)]
    # a member record symlinked from outside (its artifacts are the good member's)
    out_rec = outside / "main-out-g0001.json"
    out_rec.write_text(json.dumps(Member(id="main-out-g0001", role="main", generation=1,
                                         created="2026-01-01T00:00:00.000000+00:00",
                                         checkpoint=good.checkpoint,
                                         blob=good.blob).to_json()))
    os.symlink(out_rec, league.members_dir / "main-out-g0001.json")
    t.skipped.append((league.members_dir / "main-out-g0001.json", link))
    (outside / "secret").write_bytes(t.secret)
    traps = {"link": lambda p: os.symlink(outside / "secret", p), "fifo": os.mkfifo,
             "zero": lambda p: os.symlink("/dev/zero", p),
             "huge": lambda p: _sparse(p, ARTIFACT_MAX_BYTES + 1)}
    says = {"link": link, "fifo": fifo, "zero": link,
            "huge": f"{ARTIFACT_MAX_BYTES + 1} bytes, over the limit of {ARTIFACT_MAX_BYTES} bytes"}
    for kind, make in traps.items():
        mem = league.register(Member(id=f"main-{kind}-g0001", role="main", generation=1),
                              checkpoint=ckpt, blob=blob)
        path = league.checkpoint_path(mem)
        assert path is not None
        path.unlink()
        make(path)
        t.withheld.append((mem.id, path, says[kind]))
    return t


def test_elo_reads_only_regular_files_inside_the_league(tmp_path: Path) -> None:
    """A FIFO, a symlink to /dev/zero or out of the directory, a sparse file of 1 GiB:
    each is skipped with a warning naming it and why; `elo` neither hangs (the
    subprocess timeout fails the test) nor runs out of memory, and rates the rest."""
    t = trapped_league(tmp_path)
    r = run_cli("elo", "--league-dir", str(t.league.path), "--json", "--bootstrap", "0",
                timeout=60)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    table = last_json(r.stdout)
    assert table["matches"] == 1  # the good log's; not the one outside, read by a link
    ids = {row["id"] for row in table["members"]}
    assert "main-ok-g0001" in ids and "main-out-g0001" not in ids
    for path, says in t.skipped:
        hit = [ln for ln in r.stderr.splitlines() if f"{path}: skipped, " in ln]
        assert len(hit) == 1 and f"{path}: skipped, {says}" in hit[0], (path, r.stderr[-3000:])
    # the library: the same rule, the same warnings
    with pytest.warns(PoolWarning) as caught:
        assert len(t.league.matches()) == 1
    assert sum("skipped" in str(w.message) for w in caught) == 4
    for mem_id, path, says in t.withheld:
        with pytest.raises(OSError) as e:
            t.league.read_artifact(t.league.member(mem_id))
        assert str(e.value).startswith(f"{path}: {says}"), (str(e.value), says)
    assert t.league.read_artifact(t.good) == t.good_ckpt


@pytest.mark.parametrize("bad", [" ", "a b", "main\u202e-x", "%2e%2e%2fetc", "CON", "con.x",
                                 "NUL", "lpt1", "-lead", "\u0430dmin", "x" * 201, "",
                                 "cpu:9", "cpu:x", "anonymous", "player:bob"])
def test_member_ids_of_the_documented_shape_only(bad: str) -> None:
    with pytest.raises(ValueError, match="member id"):
        Member.from_json({"id": bad, "role": "main"})


def test_names_and_parents() -> None:
    assert id_problem("main-20261201-031500-s0-g0003") == ""
    assert id_problem("cpu:3") == "" and id_problem("player:alice") == ""
    assert "U+202E" in id_problem("main\u202e-x")
    assert "device name" in id_problem("CON")
    with pytest.raises(ValueError, match="its own parent"):
        Member.from_json({"id": "main-r-g0002", "role": "main", "parent": "main-r-g0002"})
    with pytest.raises(ValueError, match="parent"):
        Member.from_json({"id": "main-r-g0002", "role": "main", "parent": "../x"})
    for name in ("anonymous", "Anonymous", "baseline", "CPU", "con"):
        assert "reserved" in player_name_problem(name), name
        with pytest.raises(ValueError, match="reserved"):
            player_id(name)
    assert player_name_problem("alice") == ""


# ------------------------------------------------------------------ PARENA
@pytest.mark.parametrize("literal,says", [
    ("1e400", "does not fit a float32"),
    ("9" * 5000, "does not fit a float32"),
    ("3.5e38", "does not fit a float32"),
    ("1e-60", "too small for a float32"),
])
def test_parena_literals_that_do_not_fit_a_float32(tmp_path: Path, literal: str,
                                                   says: str) -> None:
    src = tmp_path / "big.prn"
    # in a rule, not a constant: a constant's value is checked anyway; a literal in
    # an expression of the input compiled to inf without a word
    src.write_text(f"labels p = a | b\n\nfn f(x) -> p {{\n  when x > {literal} => a\n"
                   "  otherwise => b\n}\n")
    r = run_cli("parena", "check", str(src), timeout=60)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{src}:4:12: error: "), r.stderr
    assert says in lines[0] and len(lines[0]) < 300


def test_parena_largest_float32_literal_compiles(tmp_path: Path) -> None:
    src = tmp_path / "ok.prn"
    src.write_text("labels p = a | b\nconst BIG = 3.4028234e38\nconst TINY = 1.5e-45\n"
                   "fn f(x) -> p {\n  when x > BIG => a\n  otherwise => b\n}\n")
    r = run_cli("parena", "check", str(src), timeout=60)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("prefix,col", [("(" * 100, 75), ("-" * 100, 75), ("not " * 100, 267),
                                         ("f(" * 100, 139)])
def test_parena_nesting_reported_where_it_is(tmp_path: Path, prefix: str, col: int) -> None:
    src = tmp_path / "deep.prn"
    close = ")" * prefix.count("(")
    src.write_text(f"labels p = a | b\n\nconst A = {prefix}1{close}\n"
                   "fn f(x) -> p {\n  when x > 0 => a\n  otherwise => b\n}\n")
    r = run_cli("parena", "check", str(src), timeout=60)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{src}:3:{col}: error: expression nested "
                                                    "too deeply"), r.stderr
