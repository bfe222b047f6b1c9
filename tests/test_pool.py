"""brawlkit.league.directory: the league directory, through real files and real processes.

Unit tier: the multi-process tests start plain Python children (no game server)
and take a few seconds together.
"""

from __future__ import annotations

import inspect
import json
import os
import random
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from brawlkit.league import directory as pool_mod
from brawlkit.league.directory import LeagueDir, MatchWriter, PoolWarning, permanent_members
from brawlkit.league.records import MatchRecord, Member, permanent_ids


def payload(writer: str, member_id: str, kind: str, size: int) -> bytes:
    """The artifact bytes a (test) writer registers for a member: unique per writer,
    id and kind, so a test can tell whose file a record points at."""
    unit = f"{writer}|{member_id}|{kind}|".encode()
    return (unit * (size // len(unit) + 1))[:size]


def make_artifacts(tmp: Path, writer: str, member_id: str, size: int = 300) -> tuple[Path, Path]:
    ck, bl = tmp / f"src-{writer}-{member_id}.zip", tmp / f"src-{writer}-{member_id}.bpw"
    ck.write_bytes(payload(writer, member_id, "zip", size))
    bl.write_bytes(payload(writer, member_id, "bpw", size // 3 + 1))
    return ck, bl


def assert_artifacts_are_the_writers(league: LeagueDir, m: Member) -> None:
    """The record's artifacts exist and are exactly what its writer registered."""
    writer, size = m.settings["writer"], m.settings["size"]
    ck, bl = league.checkpoint_path(m), league.blob_path(m)
    assert ck is not None and bl is not None
    assert ck.read_bytes() == payload(writer, m.id, "zip", size), m
    assert bl.read_bytes() == payload(writer, m.id, "bpw", size // 3 + 1), m


@pytest.fixture
def league(tmp_path: Path) -> LeagueDir:
    return LeagueDir(tmp_path / "league")


@pytest.fixture
def no_pool_warnings() -> Iterator[list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught
    assert [str(w.message) for w in caught if issubclass(w.category, PoolWarning)] == []


def register(league: LeagueDir, tmp: Path, member_id: str, role: str = "main", writer: str = "t",
             size: int = 300, **kw: object) -> Member:
    ck, bl = make_artifacts(tmp, writer, member_id, size)
    m = Member(id=member_id, role=role, settings={"writer": writer, "size": size}, **kw)  # type: ignore[arg-type]
    return league.register(m, checkpoint=ck, blob=bl)


# ====================================================================== members
def test_register_and_read_back(league: LeagueDir, tmp_path: Path, no_pool_warnings: list) -> None:
    ck, bl = make_artifacts(tmp_path, "t", "main-g1")
    before = ck.read_bytes()
    m = league.register(Member(id="main-g1", role="main", generation=1,
                               settings={"writer": "t", "size": 300, "eval_levels": (1, 3)}),
                        checkpoint=ck, blob=bl)
    assert m.checkpoint == "artifacts/main-g1.zip" and m.blob == "artifacts/main-g1.bpw"
    assert_artifacts_are_the_writers(league, m)
    assert ck.read_bytes() == before  # the source is copied, not moved
    created = datetime.fromisoformat(m.created)
    assert created.utcoffset() == timedelta(0)  # UTC
    assert m.settings["eval_levels"] == [1, 3]  # the result is the record as stored (JSON)
    assert league.member("main-g1") == m
    assert league.members()[-1] == m
    record = json.loads((league.path / "members" / "main-g1.json").read_text())
    assert record == m.to_json()
    # another process's view: a fresh instance, and create=False on an existing league
    assert LeagueDir(league.path, create=False).member("main-g1") == m


def test_register_fills_order_latest_and_keeps_given_created(league: LeagueDir, tmp_path: Path,
                                                             no_pool_warnings: list) -> None:
    a = register(league, tmp_path, "a-late", created="2030-01-01T00:00:00.000000+00:00")
    b = register(league, tmp_path, "z-early", created="2020-01-01T00:00:00.000000+00:00")
    c = register(league, tmp_path, "exp-1", role="main_exploiter")
    d = league.register(Member(id="no-artifacts", role="league_exploiter"))
    assert a.created.startswith("2030") and d.checkpoint is None and d.blob is None
    got = league.members(include_permanent=False)
    assert got == sorted([a, b, c, d], key=lambda m: (m.created, m.id))
    assert got[0] == b and got[-1] == a
    assert league.latest("main") == a and league.latest("main_exploiter") == c
    assert league.latest("league_exploiter") == d
    assert league.latest("cpu") == league.member("cpu:8")
    with pytest.raises(ValueError, match="unknown role"):
        league.latest("mian")
    with pytest.raises(KeyError, match="nope"):
        league.member("nope")
    with pytest.raises(KeyError, match="plain name"):
        league.member("../members/a-late")


def test_permanent_members_always_present(tmp_path: Path, no_pool_warnings: list) -> None:
    league = LeagueDir(tmp_path / "empty")
    ms = league.members()
    assert [m.id for m in ms] == list(permanent_ids()) and ms == permanent_members()
    assert ms[0].role == "baseline" and {m.role for m in ms[1:]} == {"cpu"}
    assert all(m.generation == 0 and m.created == "" and m.permanent for m in ms)
    assert league.members(include_permanent=False) == []
    assert league.member("cpu:3").role == "cpu" and league.member("baseline").role == "baseline"
    register(league, tmp_path, "m1")
    assert [m.id for m in league.members()] == [*permanent_ids(), "m1"]  # permanent ones first
    with pytest.raises(FileExistsError, match="cpu:3"):
        league.register(Member(id="cpu:3", role="main"))
    with pytest.raises(ValueError, match="reserved"):
        league.register(Member(id="my-cpu", role="cpu"))
    with pytest.raises(FileNotFoundError):
        LeagueDir(tmp_path / "missing", create=False)


def test_duplicate_refused_without_leftovers(league: LeagueDir, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch,
                                             no_pool_warnings: list) -> None:
    first = register(league, tmp_path, "dup", writer="first")
    record = (league.path / "members" / "dup.json").read_bytes()
    with pytest.raises(FileExistsError, match="'dup'"):
        register(league, tmp_path, "dup", writer="second")
    # the same through the decisive path (as when another process got there between
    # the early check and the link): artifacts copied, link refused, all undone
    monkeypatch.setattr(pool_mod.os.path, "lexists", lambda p: False)
    with pytest.raises(FileExistsError, match="'dup'"):
        register(league, tmp_path, "dup", writer="second")
    monkeypatch.undo()
    assert (league.path / "members" / "dup.json").read_bytes() == record
    assert league.member("dup") == first
    assert_artifacts_are_the_writers(league, first)
    assert league.strays() == []
    assert sorted(os.listdir(league.path / "artifacts")) == ["dup.bpw", "dup.zip"]
    assert os.listdir(league.path / "members") == ["dup.json"]


def test_register_refuses_bad_input_and_undoes_its_copies(league: LeagueDir, tmp_path: Path,
                                                          no_pool_warnings: list) -> None:
    for bad in ("../x", "a/b", ".hidden", ""):
        with pytest.raises(ValueError, match="plain name"):
            league.register(Member(id=bad, role="main"))
    with pytest.raises(ValueError, match="checkpoint"):
        league.register(Member(id="x", role="main", checkpoint="artifacts/elsewhere.zip"))
    ck, _ = make_artifacts(tmp_path, "t", "x")
    with pytest.raises(ValueError, match="parent"):  # what readers would skip is refused
        league.register(Member(id="x", role="main", parent=3), checkpoint=ck)  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError):  # the blob is missing: the copied zip is removed
        league.register(Member(id="x", role="main"), checkpoint=ck, blob=tmp_path / "nope.bpw")
    assert league.members(include_permanent=False) == []
    assert os.listdir(league.path / "artifacts") == [] and os.listdir(league.path / "members") == []
    register(league, tmp_path, "x")  # the id is still free
    # settings JSON cannot hold are stored as strings (like the checkpoints' metadata)
    y = league.register(Member(id="y", role="main", settings={"run_dir": tmp_path}))
    assert y.settings == {"run_dir": str(tmp_path)} and league.member("y") == y


def test_leftover_artifact_is_never_overwritten(league: LeagueDir, tmp_path: Path,
                                                no_pool_warnings: list) -> None:
    """A registration killed after copying its artifacts leaves them without a record;
    registering the id again must not touch them (they could be a concurrent
    registration's) and gets artifacts of its own."""
    (league.path / "artifacts" / "g7.zip").write_bytes(b"leftover")
    m = register(league, tmp_path, "g7")
    assert m.checkpoint is not None and m.checkpoint.startswith("artifacts/g7.")
    assert m.checkpoint != "artifacts/g7.zip" and m.blob == "artifacts/g7.bpw"
    assert (league.path / "artifacts" / "g7.zip").read_bytes() == b"leftover"
    assert_artifacts_are_the_writers(league, m)
    assert league.strays() == [league.path / "artifacts" / "g7.zip"]


def _good_record(member_id: str) -> bytes:
    return json.dumps(Member(id=member_id, role="main", created="2024-01-01T00:00:00+00:00")
                      .to_json()).encode()


BAD_MEMBER_FILES = {
    # case: (file name, content, reason in the warning)
    "truncated": ("trunc.json", _good_record("trunc")[:25], "not valid JSON"),
    "corrupt": ("corrupt.json", b'{"id": "corrupt", "role": "main",, }', "not valid JSON"),
    "foreign_empty_object": ("foreign.json", b"{}", "not a member record"),
    "foreign_list": ("alist.json", b"[1, 2, 3]", "not a member record"),
    "foreign_bad_generation": ("gen.json", b'{"id": "gen", "role": "main", "generation": "x"}',
                               "not a member record"),
    "unknown_role": ("role.json", b'{"id": "role", "role": "coach"}', "unknown role"),
    "non_json_text": ("text.json", b"hello, this is not JSON\n", "not valid JSON"),
    "empty": ("empty.json", b"", "empty"),
    "binary": ("binary.json", bytes(range(256)) * 8, "not UTF-8"),
    "deep": ("deep.json", b"[" * 100_000, "not valid JSON"),
    "wrong_id": ("mine.json", _good_record("theirs"), "holds member 'theirs', not 'mine'"),
    "claims_permanent": ("cpu:3.json", b'{"id": "cpu:3", "role": "cpu"}', "permanent"),
    "escaping_path": ("esc.json", b'{"id": "esc", "role": "main", "checkpoint": "../../x.zip"}',
                      "not a file under artifacts/"),
    "bad_parent": ("par.json", b'{"id": "par", "role": "main", "parent": [1]}', "parent"),
    "not_json_name": ("notes.txt", b"some notes", "name is not <id>.json"),
}


@pytest.mark.parametrize("case", sorted(BAD_MEMBER_FILES))
def test_bad_member_file_skipped_with_warning(league: LeagueDir, tmp_path: Path, case: str) -> None:
    name, content, reason = BAD_MEMBER_FILES[case]
    good = register(league, tmp_path, "good")
    bad = league.path / "members" / name
    bad.write_bytes(content)
    with pytest.warns(PoolWarning) as caught:
        ms = league.members()
    assert ms == [*permanent_members(), good]
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and str(bad) in messages[0] and reason in messages[0], messages
    if name.endswith(".json") and case != "claims_permanent":
        with pytest.warns(PoolWarning, match=reason.replace("(", r"\(")), \
                pytest.raises(KeyError):
            league.member(name.removesuffix(".json"))


def test_unreadable_and_temp_member_files(league: LeagueDir, tmp_path: Path) -> None:
    good = register(league, tmp_path, "good")
    (league.path / "members" / "adir.json").mkdir()  # unreadable as a file
    (league.path / "members" / ".x.json.0123.tmp").write_bytes(b'{"id": "x", "ro')  # a killed writer's
    (league.path / "artifacts" / ".x.zip.0123.tmp").write_bytes(b"PK")
    locked = league.path / "members" / "locked.json"
    locked.write_bytes(_good_record("locked"))
    locked.chmod(0)
    as_root = os.access(locked, os.R_OK)  # root reads anything: then only the directory case
    with pytest.warns(PoolWarning) as caught:
        ms = league.members(include_permanent=False)
    messages = sorted(str(w.message) for w in caught)
    expect_ids = ["locked", "good"] if as_root else ["good"]  # locked: created in 2024
    assert [m.id for m in ms] == expect_ids and ms[-1] == good
    assert len(messages) == (1 if as_root else 2), messages
    assert "adir.json" in messages[0] and "unreadable" in messages[0]
    if not as_root:
        assert "locked.json" in messages[1] and "unreadable" in messages[1]
    assert not any(".tmp" in m for m in messages)  # temp files: silently ignored
    with pytest.warns(PoolWarning):
        assert league.path / "artifacts" / ".x.zip.0123.tmp" in league.strays()


# ====================================================================== matches
def rec(t: float, a: str, b: str = "cpu:1", result: str = "win", ticks: int = 0,
        source: str = "") -> MatchRecord:
    return MatchRecord(time=t, a=a, b=b, result=result, ticks=ticks, source=source)


def test_match_log_deterministic_order(league: LeagueDir, no_pool_warnings: list) -> None:
    writers = [league.writer("train:main"), league.writer("eval"), league.writer()]
    assert len({w.path for w in writers}) == 3
    assert writers[0].name.startswith("train_main-") and str(os.getpid()) in writers[0].name
    written = []
    for i in range(30):
        w = writers[i % 3]
        r = rec(float(i // 4), f"p{i}", ticks=i)  # equal times across and within writers
        w.write(r)
        written.append((r.time, w.path.name, r))
    w = writers[1]
    assert w.write_many([rec(2.0, "batch1", ticks=100), rec(1.0, "batch2", ticks=101)]) == 2
    assert w.write_many([]) == 0
    writers[2].write(rec(0.5, "ghost-not-a-member", "baseline", "draw", 7))  # kept
    for w in writers:
        w.close()
    got = league.matches()
    assert len(got) == 33
    # expected order recomputed from the files: the records' canonical key (time, then
    # content), file name and line number only for identical duplicates
    expect = []
    for path in sorted((league.path / "matches").iterdir()):
        for no, line in enumerate(path.read_text().splitlines(), 1):
            r = MatchRecord.from_json(json.loads(line))
            expect.append(((*r.sort_key, path.name, no), r))
    assert got == [r for _, r in sorted(expect, key=lambda kv: kv[0])]
    assert [r.time for r in got] == sorted(r.time for r in got)
    assert {r.source for r in got if r.a.startswith("p0")} == {"train:main"}  # source filled
    assert any(r.a == "ghost-not-a-member" for r in got)
    assert LeagueDir(league.path, create=False).matches() == got  # every reader, same sequence


def test_a_repeated_match_counts_once(league: LeagueDir, no_pool_warnings: list) -> None:
    """Two processes pulling the same matches from a registry write them twice: a match
    is its content, so each is returned once; distinct times keep distinct matches."""
    same = [rec(5.0, "a", ticks=3, source="eval"), rec(6.0, "b", ticks=4, source="eval")]
    for _ in range(2):
        with league.writer("registry") as w:  # records keep the source they were played by
            w.write_many(same)
    new = rec(5.0 + 1e-5, "a", ticks=3, source="eval")
    with league.writer("train:main") as w:
        w.write_many([same[0], new])  # a repeat, and a new match
        w.write(rec(5.0, "a", ticks=3))  # same match, other source: other content, kept
    got = league.matches()
    assert got == [same[0], rec(5.0, "a", ticks=3, source="train:main"), new, same[1]]


def test_match_writer_refuses_bad_records(league: LeagueDir, no_pool_warnings: list) -> None:
    with league.writer() as w:
        with pytest.raises(ValueError):
            w.write(rec(1.0, "a", result="lose"))
        with pytest.raises(ValueError):
            w.write(rec(1.0, "a", "a"))
        with pytest.raises(ValueError):
            w.write(rec(float("nan"), "a"))
        with pytest.raises(TypeError):
            w.write_many([{"time": 1.0}])  # type: ignore[list-item]
        assert w.path.read_bytes() == b""
    with pytest.raises(ValueError, match="closed"):
        w.write(rec(1.0, "a"))


def test_half_written_line_skipped_and_next_write_starts_fresh(league: LeagueDir) -> None:
    w = league.writer("train:main")
    w.write_many([rec(1.0, "a"), rec(2.0, "b")])
    with open(w.path, "ab") as f:  # what a writer killed mid-line leaves
        f.write(b'{"a": "c", "b": "cpu:1", "resu')
    with pytest.warns(PoolWarning, match=rf"{w.path.name}: line 3 skipped, incomplete"):
        assert [r.a for r in league.matches()] == ["a", "b"]
    w.write(rec(3.0, "d"))
    again = MatchWriter(w.path)  # and a second writer instance on the same file
    with open(w.path, "ab") as f:
        f.write(b'{"time": 9, "a": "e"')
    again.write(rec(4.0, "f"))
    lines = w.path.read_bytes().split(b"\n")
    assert lines[2] == b'{"a": "c", "b": "cpu:1", "resu' and json.loads(lines[3])["a"] == "d"
    assert json.loads(lines[5])["a"] == "f" and lines[-1] == b""
    with pytest.warns(PoolWarning) as caught:
        assert [r.a for r in league.matches()] == ["a", "b", "d", "f"]
    messages = sorted(str(x.message) for x in caught)
    assert len(messages) == 2
    assert "line 3 skipped, not valid JSON" in messages[0] and w.path.name in messages[0]
    assert "line 5 skipped, not valid JSON" in messages[1]


def test_bad_match_lines_and_files_skipped_with_warning(league: LeagueDir) -> None:
    w = league.writer()
    w.write(rec(1.0, "good"))
    with open(w.path, "ab") as f:
        f.write(b"{}\n")                                                      # line 2
        f.write(b'{"time": NaN, "a": "x", "b": "y", "result": "win"}\n')      # line 3
        f.write(bytes(range(128, 256)) + b"\n")                               # line 4
        f.write(b'{"time": 2, "a": "x", "b": "y", "result": "tie"}\n')        # line 5
        f.write(b"\n")                                                        # blank: ignored
        f.write(b"[[[[\n")                                                    # line 7
    w.write(rec(3.0, "good2"))
    (league.path / "matches" / "notes.txt").write_text("hi")
    (league.path / "matches" / ".x.jsonl.tmp").write_text("{")
    with pytest.warns(PoolWarning) as caught:
        got = league.matches()
    assert [r.a for r in got] == ["good", "good2"]
    messages = [str(x.message) for x in caught]
    for needle in ("line 2 skipped, not a match record", "line 3 skipped, not a match record (time nan is not finite",
                   "line 4 skipped, not UTF-8", "line 5 skipped, not a match record",
                   "line 7 skipped, not valid JSON", "notes.txt: skipped, not a match log"):
        assert sum(needle in m for m in messages) == 1, (needle, messages)
    assert len(messages) == 6 and not any(".x.jsonl" in m for m in messages)


# ====================================================================== processes
CHILD_BODY = r'''
import json, os, sys, time
from pathlib import Path
from brawlkit.league.directory import LeagueDir
from brawlkit.league.records import Member, MatchRecord
from brawlkit.league.role_specs import role_names

mode, root, tag, n, size = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
league = LeagueDir(root / "league")
src = root / f"src-{tag}"
src.mkdir(exist_ok=True)

def artifacts(mid):
    ck, bl = src / f"{mid}.zip", src / f"{mid}.bpw"
    ck.write_bytes(payload(tag, mid, "zip", size))
    bl.write_bytes(payload(tag, mid, "bpw", size // 3 + 1))
    return ck, bl

def member(mid, i):
    return Member(id=mid, role=role_names()[i % 3], generation=i, settings={"writer": tag, "size": size})

def match(i):
    return MatchRecord(time=1000.0 + i // 7, a=f"{tag}-{i % n}", b="cpu:1",
                       result=("win", "loss", "draw")[i % 3], ticks=i, source=tag)

print("ready", flush=True)
go = root / "go"
while not go.exists():
    time.sleep(0.001)
if mode == "bulk":  # register n members and write n*10 matches, interleaved
    w = league.writer(tag)
    i = 0
    for k in range(n):
        mid = f"{tag}-{k:03d}"
        league.register(member(mid, k), *artifacts(mid))
        if k % 2:
            w.write_many([match(i + j) for j in range(10)])
        else:
            for j in range(10):
                w.write(match(i + j))
        i += 10
    print(json.dumps({"matches": i}), flush=True)
elif mode == "race":  # register the shared ids 0..n-1; report which were won and lost
    # no early "already registered?" check: both copy their artifacts in and the
    # os.link of the record decides every race (the path a real race takes)
    import brawlkit.league.directory as pool_mod
    pool_mod.os.path.lexists = lambda path: False
    won, lost = [], []
    for k in range(n):
        mid = f"same-{k:03d}"
        try:
            league.register(member(mid, k), *artifacts(mid))
            won.append(mid)
        except FileExistsError:
            lost.append(mid)
    print(json.dumps({"won": won, "lost": lost}), flush=True)
elif mode == "loop":  # until killed
    w = league.writer(tag)
    k = 0
    while True:
        mid = f"{tag}-{k:04d}"
        ck, bl = artifacts(mid)
        print("start", mid, flush=True)
        league.register(member(mid, k), ck, bl)
        w.write_many([match(k * 5 + j) for j in range(5)])
        k += 1
'''
CHILD = inspect.getsource(payload) + CHILD_BODY


def spawn(mode: str, root: Path, tag: str, n: int, size: int) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", CHILD, mode, str(root), tag, str(n), str(size)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_ready(procs: list[subprocess.Popen[str]]) -> None:
    for p in procs:
        assert p.stdout is not None
        line = p.stdout.readline()
        assert line == "ready\n", (line, p.stderr.read() if p.stderr else "")


def finish(p: subprocess.Popen[str]) -> dict:
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def test_three_processes_register_and_log_concurrently(tmp_path: Path,
                                                       no_pool_warnings: list) -> None:
    n = 20
    tags = ["main", "main_exploiter", "league_exploiter"]
    procs = [spawn("bulk", tmp_path, tag, n, 2000) for tag in tags]
    wait_ready(procs)
    (tmp_path / "go").touch()
    reports = [finish(p) for p in procs]
    league = LeagueDir(tmp_path / "league", create=False)
    ms = league.members(include_permanent=False)
    assert sorted(m.id for m in ms) == sorted(f"{t}-{k:03d}" for t in tags for k in range(n))
    for m in ms:
        assert_artifacts_are_the_writers(league, m)
    got = league.matches()
    assert [r["matches"] for r in reports] == [n * 10] * 3
    assert sorted((r.source, r.ticks) for r in got) == \
        sorted((t, i) for t in tags for i in range(n * 10))  # each line exactly once
    assert len(os.listdir(league.matches_dir)) == 3
    assert league.strays() == []
    assert LeagueDir(league.path).matches() == got


def test_two_processes_racing_for_the_same_ids(tmp_path: Path, no_pool_warnings: list) -> None:
    n = 20
    procs = [spawn("race", tmp_path, tag, n, 20_000) for tag in ("alice", "bob")]
    wait_ready(procs)
    (tmp_path / "go").touch()
    a, b = (finish(p) for p in procs)
    ids = {f"same-{k:03d}" for k in range(n)}
    assert set(a["won"]) | set(b["won"]) == ids and not set(a["won"]) & set(b["won"])
    assert set(a["lost"]) == set(b["won"]) and set(b["lost"]) == set(a["won"])
    league = LeagueDir(tmp_path / "league")
    winners = {**{i: "alice" for i in a["won"]}, **{i: "bob" for i in b["won"]}}
    ms = league.members(include_permanent=False)
    assert sorted(m.id for m in ms) == sorted(ids)
    for m in ms:
        assert m.settings["writer"] == winners[m.id]  # the record is one of theirs, intact
        assert_artifacts_are_the_writers(league, m)  # and so are the files it points at
    assert league.strays() == []  # the loser took its own copies away


def test_sigkill_mid_write_leaves_a_readable_pool(tmp_path: Path) -> None:
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    league = LeagueDir(tmp_path / "league")
    last_started: list[str] = []
    for round_ in range(4):
        p = spawn("loop", tmp_path, f"k{round_}", 5, 400_000)
        wait_ready([p])
        (tmp_path / "go").touch()
        assert p.stdout is not None
        seen = [p.stdout.readline(), p.stdout.readline()]  # "start 0", "start 1": 0 is registered
        assert seen[1] == f"start k{round_}-0001\n", (seen, p.stderr.read() if p.stderr else "")
        time.sleep(rng.uniform(0.0, 0.2))
        p.send_signal(signal.SIGKILL)
        out, _ = p.communicate(timeout=30)
        assert p.returncode == -signal.SIGKILL
        started = [line.split()[1] for line in [*seen, *out.splitlines()] if line.startswith("start ")]
        last_started.append(started[-1])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ms = league.members(include_permanent=False)
        got = league.matches()
    for w in caught:  # at most a killed writer's half line
        assert issubclass(w.category, PoolWarning) and "incomplete" in str(w.message), \
            (seed, str(w.message))
    assert {f"k{r}-0000" for r in range(4)} <= {m.id for m in ms}
    for m in ms:
        assert_artifacts_are_the_writers(league, m)
    assert all(r.a.startswith("k") for r in got)
    for s in league.strays():  # only temp files and artifacts no record points at
        assert s.name.startswith(".") or s.parent.name == "artifacts", (seed, s)
    # a restarted trainer registering its interrupted generation again
    for mid in last_started:
        try:
            m = league.member(mid)
        except KeyError:
            m = register(league, tmp_path, mid, writer="restart", size=100)
            assert_artifacts_are_the_writers(league, m)
        else:
            with pytest.raises(FileExistsError):
                register(league, tmp_path, mid, writer="restart")
            assert league.member(mid) == m


def test_ctrl_c_after_the_record_is_published_keeps_its_files(tmp_path, monkeypatch):
    """A KeyboardInterrupt that lands after the record was linked in (here: as the
    publishing returns) leaves the record *and* the files it points at; one
    that lands before leaves neither (what test_ctrl_c_stops_the_league_cleanly caught
    once on a loaded machine: a record whose blob had been cleaned away)."""
    league = LeagueDir(tmp_path / "league")

    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt

    publish = LeagueDir._publish

    def published_then_interrupted(self: LeagueDir, *args: object) -> None:
        publish(self, *args)  # type: ignore[arg-type]
        raise KeyboardInterrupt

    monkeypatch.setattr(LeagueDir, "_publish", published_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        register(league, tmp_path, "main-late")
    (m,) = league.members(include_permanent=False)
    assert league.blob_path(m).is_file() and league.checkpoint_path(m).is_file()
    monkeypatch.undo()
    monkeypatch.setattr(pool_mod, "_write_all", interrupt)
    with pytest.raises(KeyboardInterrupt):
        register(league, tmp_path, "main-early")
    assert [x.id for x in league.members(include_permanent=False)] == ["main-late"]
    assert sorted(p.name for p in (league.path / "artifacts").iterdir()) == sorted(
        p.name for p in (league.blob_path(m), league.checkpoint_path(m)))
