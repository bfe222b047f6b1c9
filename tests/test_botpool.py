"""The bot pool (``python -m brawlkit botpool``), end to end with real processes on
127.0.0.1: a league directory of tiny random .bpw members, the native bots, the game
servers the pool starts, a registry service, and a raw UDP client as the human."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import ROOT, RegistryServer, add_agent, last_json, run_cli

from brawlkit.export import bpw as ex
from brawlkit.league.directory import LeagueDir
from brawlkit.league.records import Member

pytestmark = pytest.mark.timeout(120)


def _blob(seed: int) -> bytes:
    """A small random layer-1 policy (31-64-64-6): each seed plays differently, so
    matches end (somebody falls off) and results vary."""
    rng = np.random.default_rng(seed)

    def w(*shape: int) -> np.ndarray:
        fan_in = shape[-1] if len(shape) > 1 else 1
        return (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)

    return ex.pack_bpw([ex.Layer(w(64, 31), w(64), ex.ACT_TANH),
                        ex.Layer(w(64, 64), w(64), ex.ACT_TANH),
                        ex.Layer(w(6, 64), w(6), ex.ACT_NONE)], ex.PolicyMeta(4, 1, ""))


def _league(tmp_path: Path, n: int = 3) -> tuple[Path, list[str]]:
    root = tmp_path / "league"
    league = LeagueDir(root)
    ids = []
    for i in range(n):
        src = tmp_path / f"b{i}.bpw"
        src.write_bytes(_blob(i))
        role = ("main", "main_exploiter", "league_exploiter")[i % 3]
        # ids as training names them: the exploiters' are longer than a wire name (31)
        mid = f"{role}-20261201-031447-s0-g{i:04d}"
        league.register(Member(id=mid, role=role, generation=i), blob=src)
        ids.append(mid)
    return root, ids


def _botpool(*args: str, env: dict[str, str] | None = None, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "brawlkit", "botpool", "--no-live", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env=env, **kw)


def _elo_rows(root: Path) -> dict[str, dict[str, Any]]:
    r = run_cli("elo", "--league-dir", str(root), "--json", "--bootstrap", "0")
    assert r.returncode == 0, r.stderr
    return {row["id"]: row for row in last_json(r.stdout)["members"]}


def _pool_matches(root: Path) -> list[Any]:
    return [m for m in LeagueDir(root, create=False).matches() if m.source == "botpool"]


@pytest.mark.servers  # runs the pool: game servers and bot processes
def test_pairs_play_and_every_match_reaches_the_log_and_the_ratings(tmp_path: Path) -> None:
    root, ids = _league(tmp_path)
    replays = tmp_path / "replays"
    t0 = time.monotonic()
    p = _botpool("--league-dir", str(root), "--pairs", "2", "--matches", "6", "--mode",
                 "fastforward", "--speed", "0", "--seed", "1", "--replays", str(replays),
                 "--keep-upsets", "2")
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, out + err
    print(f"6 unpaced matches in {time.monotonic() - t0:.1f} s")
    assert len(re.findall(r"^match \d+: ", out, re.M)) == 6, out
    assert "summary: 6 match(es)" in out and " 0 void" in out, out
    matches = _pool_matches(root)
    assert len(matches) == 6
    assert all(m.a in ids and m.b in ids and m.a != m.b and 0 < m.ticks <= 9000 for m in matches)
    # through the one match writer: distinct times, both bots their frozen .bpw (rated)
    assert len({m.time for m in matches}) == 6 and all(m.rated for m in matches)
    rows = _elo_rows(root)
    assert sum(rows[i]["games"] for i in ids) == 12
    assert all(rows[i]["games"] >= 2 for i in ids), rows  # fewest-games pairing: all play
    # the two most surprising replays are kept, the index says which and why
    index = json.loads((replays / "index.json").read_text())
    kept = index["replays"]
    assert index["keep"] == 2 and len(kept) == 2
    assert sorted(p.name for p in replays.glob("*.bpr")) == sorted(e["file"] for e in kept)
    assert kept[0]["surprise"] >= kept[1]["surprise"]
    for e in kept:
        assert {e["a"], e["b"]} <= set(ids) and e["result"] in ("win", "draw", "loss")
    assert not (replays / ".incoming").exists()


def _lines(p: subprocess.Popen[str], into: list[str]) -> Iterator[str]:
    """The pool's stdout line by line, each also kept in ``into`` (for the assertions'
    messages once the pool has ended)."""
    assert p.stdout is not None
    for line in p.stdout:
        into.append(line)
        yield line


def _rest_after_sigterm(p: subprocess.Popen[str], lines: list[str]) -> str:
    """Everything the pool printed once SIGTERM (sent by the caller) stopped it; it must
    exit 0 within 20 s (killed otherwise, and the test fails with its output)."""
    try:
        rest, _ = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
    out = "".join(lines) + rest
    assert p.returncode == 0, out
    return out


def _kill_once_while_running(p: subprocess.Popen[str], victim: Any,
                             timeout: float = 60) -> tuple[list[str], int | None]:
    """Read the pool's stdout to the end; at the first line ``victim(line)`` answers a pid
    for, SIGKILL that pid (0.3 s later, so the kill lands mid-match).  (lines, killed)."""
    lines: list[str] = []
    killed = None
    deadline = time.monotonic() + timeout
    try:
        for line in _lines(p, lines):
            pid = victim(line) if killed is None else None
            if pid is not None:
                time.sleep(0.3)
                killed = pid() if callable(pid) else pid
                os.kill(killed, signal.SIGKILL)
            assert time.monotonic() < deadline, "".join(lines)
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    return lines, killed


@pytest.mark.servers  # runs the pool: game servers and bot processes
def test_a_killed_bot_voids_its_match_and_the_pool_finishes(tmp_path: Path) -> None:
    root, ids = _league(tmp_path)
    # paced so a match lasts seconds: the kill lands mid-match
    p = _botpool("--league-dir", str(root), "--pairs", "2", "--matches", "4", "--speed", "6",
                 "--seed", "2")

    def creator(line: str) -> int | None:  # it made the arena and is playing
        m = re.match(r"pair \d+: \S+ \(pid (\d+)\) vs", line)
        return int(m.group(1)) if m else None

    lines, killed = _kill_once_while_running(p, creator)
    out = "".join(lines)
    assert p.returncode == 0, out + p.stderr.read()  # type: ignore[union-attr]
    void = [ln for ln in lines if ln.startswith("VOID")]
    assert len(void) == 1 and f"(pid {killed}) killed by SIGKILL" in void[0], out
    assert "summary: 4 match(es)" in out and ", 1 void," in out
    assert len(_pool_matches(root)) == 4  # the void match is not a result
    rows = _elo_rows(root)
    assert sum(rows[i]["games"] for i in ids) == 8


@pytest.fixture
def registry(tmp_path: Path):
    srv = RegistryServer(f"sqlite:///{tmp_path / 'registry.db'}", tmp_path / "registry-data")
    yield srv
    srv.stop()


def _env(tmp_path: Path, agent: str, secret: str) -> dict[str, str]:
    return {**os.environ, "BRAWLKIT_AGENT_ID": agent, "BRAWLKIT_AGENT_SECRET": secret,
            "BRAWLKIT_REGISTRY_CACHE": str(tmp_path / f"cache-{agent}")}


def _human(port: int, name: str, ticket: str = "", within: float = 40.0) -> int:
    """A raw UDP human: HELLO ANY (realtime), IDENT until a PEER shows its name, then
    hold the stick right (it walks off the stage: a short match) until the match is
    over.  Returns the winner."""
    from brawlkit.wire import protocol as P
    from brawlkit.wire.constants import C

    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(0.05)
    addr = ("127.0.0.1", port)
    hello = P.pack_hello(0, C.BP_SLOT_ANY, 7, arena_op=C.BP_ARENA_ANY)
    deadline = time.monotonic() + within
    session = slot = None
    named = False
    tick = seq = 0
    try:
        while time.monotonic() < deadline:
            if session is None:
                s.sendto(hello, addr)
            elif not named:
                s.sendto(P.pack_ident(seq, session, name, ticket), addr)
            else:
                seq += 1
                s.sendto(P.pack_cmd(seq, session, tick, seq, 1.0, 0.0, 0, slot, 1), addr)
            try:
                d, _ = s.recvfrom(2048)
            except TimeoutError:
                continue
            kind = P.validate_datagram(d).type
            if kind == C.BP_PKT_WELCOME and session is None:
                w = P.parse_payload(d, P.NetWelcome)
                session, slot = w.session, w.slot
            elif kind == C.BP_PKT_PEER and session is not None:
                peer = P.parse_peer(d)
                named |= peer.slot == slot and peer.name == name
            elif kind == C.BP_PKT_SNAPSHOT and named:
                snap = P.parse_snapshot(d)
                tick = snap.tick
                if snap.over:
                    return snap.winner
        raise AssertionError("the human's match did not end in time")
    finally:
        if session is not None:
            s.sendto(P.pack_bye(0, session), addr)
        s.close()


def _human_pool(args: list[str], name: str, ticket: str = "",
                env: dict[str, str] | None = None) -> str:
    p = _botpool(*args, "--pairs", "0", "--human-bots", "1", "--matches", "1", "--seed", "3",
                 env=env)
    assert p.stdout is not None
    try:
        port = None
        for line in p.stdout:
            m = re.match(r"human server listening (\d+)", line)
            if m:
                port = int(m.group(1))
                break
        assert port, p.stderr.read()  # type: ignore[union-attr]
        _human(port, name, ticket)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, out + err
    return out


@pytest.mark.servers  # runs the pool: game servers and bot processes
def test_a_human_without_ticket_is_recorded_as_anonymous(tmp_path: Path) -> None:
    root, ids = _league(tmp_path, n=2)
    out = _human_pool(["--league-dir", str(root)], "tester")
    assert "'tester'" in out and "joined" in out, out
    assert "anonymous: only the bot's rating moves" in out, out
    (rec,) = _pool_matches(root)
    assert rec.a in ids and rec.b == "anonymous" and 0 < rec.ticks <= 9000
    rows = _elo_rows(root)  # the ratings' rule: anonymous is not rated, the bot is
    assert "anonymous" not in rows and rows[rec.a]["games"] == 1


@pytest.mark.servers  # runs the pool: game servers and bot processes
def test_registry_mode_posts_results_and_a_ticketed_human_is_rated(registry, tmp_path: Path
                                                                    ) -> None:
    from brawlkit.registry.client import RegistryClient

    root, ids = _league(tmp_path)
    admin = RegistryClient(registry.url, "boss", add_agent(registry.db_url, "boss", "admin"),
                           cache_dir=tmp_path / "cache-boss")
    league = LeagueDir(root, create=False)
    for m in league.members(include_permanent=False):
        ckpt = tmp_path / f"{m.id}.zip"
        ckpt.write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip: the pool never opens it
        admin.upload(m, ckpt, league.blob_path(m), location="test")
    admin.disable(ids[2])  # a disabled checkpoint never plays
    env = _env(tmp_path, "pool", add_agent(registry.db_url, "pool", "write"))

    p = _botpool("--registry", registry.url, "--pairs", "2", "--matches", "4", "--speed", "0",
                 "--seed", "4", env=env)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, out + err
    assert "summary: 4 match(es)" in out
    posted = [m for m in admin.matches() if m.source == "botpool"]
    assert len(posted) == 4
    assert all({m.a, m.b} == {ids[0], ids[1]} for m in posted), posted
    assert len(list((tmp_path / "cache-pool" / "botpool").glob("*.bpw"))) == 2

    key = admin.register_player("alice")
    ticket = admin.player_ticket("alice", key)
    out = _human_pool(["--registry", registry.url], "alice", ticket, env=env)
    assert "player:alice" in out and "ticket attached" in out, out
    human = [m for m in admin.matches() if "player:alice" in (m.a, m.b)]
    assert len(human) == 1 and human[0].a in ids[:2]
    rated = {r["id"]: r for r in admin.ratings()["members"]}
    assert rated["player:alice"]["games"] == 1


def _children(pid: int, comm: str) -> list[int]:
    """Pids of ``pid``'s children named ``comm`` (a /proc scan, no psutil)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        if ppid == pid and name == comm:
            out.append(int(d.name))
    return out


@pytest.mark.servers  # runs the pool: game servers and bot processes
def test_a_dead_server_is_restarted_and_its_matches_are_void(tmp_path: Path) -> None:
    root, ids = _league(tmp_path)
    p = _botpool("--league-dir", str(root), "--pairs", "2", "--matches", "3", "--speed", "6",
                 "--seed", "5")

    def the_server() -> int:
        (pid,) = _children(p.pid, "brawlpit_server")
        return pid

    lines, _ = _kill_once_while_running(
        p, lambda line: the_server if line.startswith("pair ") else None)
    out = "".join(lines)
    assert p.returncode == 0, out
    assert re.search(r"^server died \(exit code -9\); restarting it, [12] match\(es\) in flight "
                     r"void$", out, re.M), out
    assert "server restarted on port" in out
    assert all("server died" in ln for ln in lines if ln.startswith("VOID")), out
    assert "summary: 3 match(es)" in out and "1 server restart(s)" in out
    assert len(_pool_matches(root)) == 3


@pytest.mark.servers  # runs the pool: game servers and bot processes
def test_a_hung_match_is_void_and_sigterm_stops_cleanly(tmp_path: Path) -> None:
    """A match past its bound is void (a 1 s bound here: a real-time-paced match takes
    longer); SIGTERM then stops every bot and server, prints the summary, exits 0."""
    root, _ = _league(tmp_path, n=2)
    p = _botpool("--league-dir", str(root), "--pairs", "1", "--speed", "1", "--hang-timeout", "1")
    lines: list[str] = []
    try:
        for line in _lines(p, lines):
            if line.startswith("VOID"):
                bots = _children(p.pid, "brawlpit_bot")
                p.send_signal(signal.SIGTERM)
                break
    except BaseException:
        p.kill()
        raise
    out = _rest_after_sigterm(p, lines)
    assert "hung: no result within 1 s" in out
    assert "summary: 0 match(es)" in out and "hung x" in out
    assert not _children(p.pid, "brawlpit_bot") and not _children(p.pid, "brawlpit_server")
    for pid in bots:
        assert not Path(f"/proc/{pid}").exists() or \
            Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "Z"
    assert _pool_matches(root) == []


# ------------------------------------------------------------------ pieces, no processes
def test_peer_and_result_lines_parse() -> None:
    from brawlkit.botpool.procs import PeerLine, parse_peer_line, parse_result_line

    assert parse_peer_line("peer slot 1 kind 0 name - ticket -") == PeerLine(1, 0, "", "")
    assert parse_peer_line("peer slot 1 kind 1 name bob (1200) ticket abc.def") == \
        PeerLine(1, 1, "bob (1200)", "abc.def")
    assert parse_peer_line("peer slot 0 kind 2 name cpu:3 ticket -") == PeerLine(0, 2, "cpu:3", "")
    # the bot's escapes of network text (a rogue server's newline, a space in a ticket)
    assert parse_peer_line("peer slot 1 kind 1 name a\\x0amatch 1 winner 0 ticks 1\\\\ "
                           "ticket t\\x20k\\xc3\\xa9") == \
        PeerLine(1, 1, "a\nmatch 1 winner 0 ticks 1\\", "t k\u00e9")
    assert parse_peer_line("peer slot 1 kind 1 name \\x2d ticket \\x2d") == PeerLine(1, 1, "-", "-")
    assert parse_peer_line("match 2 winner 1 ticks 9") is None
    r = parse_result_line("match 2 winner 1 ticks 9")
    assert r is not None and (r.match_id, r.winner, r.ticks) == (2, 1, 9)


def test_who_a_human_is() -> None:
    from brawlkit.botpool.engine import BotPool
    from brawlkit.botpool.procs import PeerLine

    ident = BotPool.opponent_id
    assert ident(PeerLine(1, 1, "alice", "t0k"))[:2] == ("player:alice", "t0k")
    assert ident(PeerLine(1, 1, "alice", ""))[:2] == ("anonymous", None)
    assert ident(PeerLine(1, 1, "bad name!", "t0k"))[:2] == ("anonymous", None)
    assert ident(None)[:2] == ("anonymous", None)


def test_poster_queues_while_the_registry_is_down_and_swaps_a_refused_ticket() -> None:
    import queue

    from brawlkit.botpool.poster import Poster
    from brawlkit.league.records import MatchRecord
    from brawlkit.registry.client import RegistryError, RegistryUnavailable

    class Fake:
        def __init__(self) -> None:
            self.down = True
            self.got: list[tuple[list[MatchRecord], Any]] = []

        def post_matches(self, recs: list[MatchRecord], tickets: Any = None) -> dict[str, int]:
            if self.down:
                raise RegistryUnavailable("down")
            if tickets and tickets[0] == "bad":
                raise RegistryError("403 bad ticket", 403)
            self.got.append((list(recs), tickets))
            return {"accepted": len(recs)}

    fake, msgs = Fake(), queue.Queue[str]()
    poster = Poster(fake, msgs)
    bot = MatchRecord(1.0, "x", "y", "win", 10, "botpool")
    human = MatchRecord(2.0, "x", "player:eve", "loss", 10, "botpool")
    poster.put(bot)
    poster.put(human, "bad")
    deadline = time.monotonic() + 5
    while poster.queued != 2 or msgs.empty():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert "unreachable" in msgs.get()
    fake.down = False
    left = poster.close(timeout=10)
    assert left == []
    sent = [r for recs, _ in fake.got for r in recs]
    assert bot in sent and MatchRecord(2.0, "x", "anonymous", "loss", 10, "botpool") in sent
    assert human not in sent


def test_replay_keeper_keeps_the_biggest_upsets(tmp_path: Path) -> None:
    from brawlkit.botpool.replays import ReplayKeeper
    from brawlkit.league.records import MatchRecord

    keeper = ReplayKeeper(tmp_path / "r", keep=2)
    inc = keeper.incoming("pool-1")
    cases = [("win", 1400, 1000), ("loss", 1400, 1000), ("draw", 1200, 1200), ("win", 1000, 1400)]
    for i, (res, ra, rb) in enumerate(cases, start=1):
        (inc / f"17000{i}-a{i}-m2.bpr").write_bytes(b"x")
        keeper.expect(inc, i, 2, MatchRecord(1796099799.0 + i, "main-r-g0003", "cpu:3", res, 5,
                                             "botpool"), ra, rb)
    keeper.poll()
    keeper.close()
    index = json.loads((tmp_path / "r" / "index.json").read_text())
    # the two underdog wins (1000 beating 1400) are the upsets; favourite wins and draws go
    assert [(e["result"], e["rating_a"]) for e in index["replays"]] == [("loss", 1400),
                                                                        ("win", 1000)]
    # kept under names that say when, who and what happened (ids made file-name safe)
    assert sorted(p.name for p in (tmp_path / "r").glob("*.bpr")) == [
        "20261201-043641_main-r-g0003_loses-to_cpu_3_a2-m2.bpr",
        "20261201-043643_main-r-g0003_beats_cpu_3_a4-m2.bpr"]
    assert [e["file"] for e in index["replays"]] == [
        "20261201-043641_main-r-g0003_loses-to_cpu_3_a2-m2.bpr",
        "20261201-043643_main-r-g0003_beats_cpu_3_a4-m2.bpr"]
    assert [e["recorded_as"] for e in index["replays"]] == ["170002-a2-m2.bpr", "170004-a4-m2.bpr"]


@pytest.mark.servers  # runs the pool: game servers and bot processes
@pytest.mark.parametrize("between_looks", [False, True], ids=["seen", "between-two-looks"])
def test_a_human_who_leaves_mid_match_voids_it_and_the_seat_is_refilled(
        tmp_path: Path, between_looks: bool) -> None:
    """A human joins a seat, names themselves and leaves: the match is void and a fresh
    bot takes the seat.  ``between-two-looks``: the pool is stopped (SIGSTOP) from before
    the join until after the leave, as a busy machine may leave it unscheduled; the seat
    bot's peer lines are read in one go and the pool must still see the human come and go
    (it used to look at the newest line only: the seat waited on as if nobody had come)."""
    from brawlkit.wire import protocol as P
    from brawlkit.wire.constants import C

    root, _ = _league(tmp_path, n=2)
    p = _botpool("--league-dir", str(root), "--pairs", "0", "--human-bots", "1", "--seed", "6")
    lines: list[str] = []
    try:
        reader = _lines(p, lines)
        port = next(int(m.group(1)) for line in reader
                    if (m := re.match(r"human server listening (\d+)", line)))
        (first,) = _children(p.pid, "brawlpit_bot")
        addr = ("127.0.0.1", port)
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(2.0)
        s.sendto(P.pack_hello(0, C.BP_SLOT_ANY, 9, arena_op=C.BP_ARENA_ANY), addr)
        while P.validate_datagram(d := s.recvfrom(2048)[0]).type != C.BP_PKT_WELCOME:
            pass
        session = P.parse_payload(d, P.NetWelcome).session
        if between_looks:
            p.send_signal(signal.SIGSTOP)
        try:
            s.sendto(P.pack_ident(1, session, "quitter"), addr)
            if between_looks:  # the server has the name (so has the bot's PEER), then go
                while True:
                    d = s.recvfrom(2048)[0]
                    if P.validate_datagram(d).type == C.BP_PKT_PEER and \
                            P.parse_peer(d).name == "quitter":
                        break
            else:  # the pool has seen the human in its seat, then walk away
                next(line for line in reader if re.match(r"(a )?human .*joined ", line))
            s.sendto(P.pack_bye(2, session), addr)
        finally:
            p.send_signal(signal.SIGCONT)
        s.close()
        next(line for line in reader if line.startswith("VOID"))
        next(line for line in reader if re.match(r"seat: \S+ waits in arena", line))  # fresh
        fresh = _children(p.pid, "brawlpit_bot")
        deadline = time.monotonic() + 30
        while first in fresh and time.monotonic() < deadline:  # the old one is reaped
            time.sleep(0.05)
            fresh = _children(p.pid, "brawlpit_bot")
        p.send_signal(signal.SIGTERM)
    except BaseException:
        p.kill()
        raise
    out = _rest_after_sigterm(p, lines)
    assert re.search(r"^VOID human match: \S+ vs quitter: the human left mid-match$", out, re.M), out
    assert len(fresh) == 1 and fresh[0] != first  # a new bot waits in the seat
    assert "summary: 0 match(es)" in out and ", 1 void," in out
    assert _pool_matches(root) == []


def _upload_league(registry: Any, tmp_path: Path, ids: list[str]) -> Any:
    """Every member of ``tmp_path/league`` uploaded by an admin agent; the admin client."""
    from brawlkit.registry.client import RegistryClient

    admin = RegistryClient(registry.url, "boss", add_agent(registry.db_url, "boss", "admin"),
                           cache_dir=tmp_path / "cache-boss")
    league = LeagueDir(tmp_path / "league", create=False)
    for m in league.members(include_permanent=False):
        ckpt = tmp_path / f"{m.id}.zip"
        ckpt.write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip: the pool never opens it
        admin.upload(m, ckpt, league.blob_path(m), location="test")
    return admin


@pytest.mark.servers  # runs the pool: game servers, bot processes, a registry
@pytest.mark.timeout(240)
def test_human_seats_play_the_active_checkpoint_and_follow_registry_activate(
        registry, tmp_path: Path) -> None:
    """With an active checkpoint the human seat plays it (never one of the other two
    bots); ``registry activate OTHER`` (the operator's CLI, against the real HTTP
    service and its SQLite file) makes the next human match play OTHER, while the
    same pool process and game server keep running.  (The server is compared before
    the last match: once that is recorded the pool ends with its servers, and under load
    it used to have ended before the test looked, which read as a lost server.)"""
    _, ids = _league(tmp_path, n=3)
    admin = _upload_league(registry, tmp_path, ids)
    first, other = ids[1], ids[2]
    admin.activate(first)
    env = _env(tmp_path, "pool", add_agent(registry.db_url, "pool", "write"))
    p = _botpool("--registry", registry.url, "--pairs", "0", "--human-bots", "1",
                 "--matches", "2", "--seed", "3", "--active-refresh", "0.3", env=env)
    lines: list[str] = []
    try:
        reader = _lines(p, lines)
        port = next(int(m.group(1)) for line in reader
                    if (m := re.match(r"human server listening (\d+)", line)))
        pids = _children(p.pid, "brawlpit_server")
        _human(port, "tester")
        next(line for line in reader if line.startswith("human match 1:"))
        op_env = _env(tmp_path, "boss", admin._secret)
        r = subprocess.run([sys.executable, "-m", "brawlkit", "registry", "activate", other,
                            "--url", registry.url], capture_output=True, text=True, cwd=ROOT,
                           env=op_env, timeout=60)
        assert r.returncode == 0 and f"{other}: active" in r.stdout, r.stdout + r.stderr
        next(line for line in reader if line.startswith(f"active checkpoint: {other}"))
        # what a bot does at start: fetch the active blob (LZ4 on the wire, unwrapped)
        r = subprocess.run([sys.executable, "-m", "brawlkit", "registry", "active", "--url",
                            registry.url, "--blob", str(tmp_path / "active.bpw")],
                           capture_output=True, text=True, cwd=ROOT, env=op_env, timeout=60)
        assert r.returncode == 0 and r.stdout.startswith(other), r.stdout + r.stderr
        assert (tmp_path / "active.bpw").read_bytes() == (tmp_path / "b2.bpw").read_bytes()
        # the seat's new bot waits in its arena (else HELLO ANY would make the human one)
        next(line for line in reader if line.startswith(f"seat: {other} waits in arena"))
        now = _children(p.pid, "brawlpit_server")
        assert now == pids, (pids, now, "".join(lines))  # the same game server throughout
        _human(port, "tester")
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    out = "".join(lines) + out
    assert p.returncode == 0, out + err
    assert f"active checkpoint: {first}; the human seats play it" in out, out
    assert out.count("human server listening") == 1 and "0 server restart(s)" in out, out
    human = [m for m in admin.matches() if m.b == "anonymous"]
    assert [m.a for m in human] == [first, other], (human, out)
