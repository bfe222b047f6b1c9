"""Hostile input at the registry's doors (issue 21), over real HTTP against a real
``python -m brawlkit registry serve`` on SQLite and (``BRAWLKIT_TEST_POSTGRES_URL``)
PostgreSQL, through the commands a user runs:

* ``registry push`` of a league directory whose log holds lines the match-record
  rule refuses: the good matches go, the bad lines are named, nothing is stuck;
  and of one holding files that are not regular files inside it (issue 30): a FIFO,
  symlinks to /dev/zero and out of the directory, sparse files over the caps — only
  the sound member and matches leave the machine;
* names and times the registry refuses with 422 naming the field;
* revocation (``registry revoke-agent`` and ``POST /agents/{id}/revoke``);
* one database per data directory;
* slow clients (half-sent heads and bodies) closed within the configured timeouts
  while a normal client keeps getting answers; the per-agent rate limit;
* (issue 30) request heads over 16 KiB (400, in one write or in pieces), numbers out
  of range (422 naming the item and field), and the per-address connection bound;
* ``GET /ratings``: cached per state of the match log, bootstrap capped for a
  read agent.

No speed is asserted (benchmarks are commands: ``python -m brawlkit bench
registry``); "closed within the timeout (+ a margin)" is a behaviour.
"""

# ruff: noqa: F811 - the tests take the fixtures db_url and serve imported above by name
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests
from helpers import ROOT, add_agent
from helpers import RegistryServer as Server
from test_hostile_input import BAD_LINES, hostile_league, trapped_league
from test_registry_service import (  # noqa: F401 - db_url and serve: the fixtures, shared
    bpw,
    db_url,
    get_token,
    metadata,
    sb3_zip,
    serve,
    upload,
)

pytestmark = pytest.mark.servers

MATCH = {"time": 1.0, "a": "main-ok-g0001", "b": "cpu:1", "result": "win", "ticks": 10,
         "source": "t"}


def registry_cli(*args: str, agent: tuple[str, str] | None = None,
                 timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``python -m brawlkit registry ARGS`` with an agent's credentials in the env."""
    env = {**os.environ}
    if agent is not None:
        env.update(BRAWLKIT_AGENT_ID=agent[0], BRAWLKIT_AGENT_SECRET=agent[1],
                   BRAWLKIT_REGISTRY_RETRIES="1")
    return subprocess.run([sys.executable, "-m", "brawlkit", "registry", *args], env=env,
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def stored_matches(srv: Server, headers: dict[str, str]) -> list[dict[str, Any]]:
    r = requests.get(f"{srv.url}/matches", headers=headers, timeout=30)
    assert r.status_code == 200, r.text
    out: list[dict[str, Any]] = r.json()
    return out


# ------------------------------------------------------------------ the match-record rule
def test_push_sends_the_good_matches_and_names_the_bad_lines(
        serve: Callable[..., Server], db_url: str, tmp_path: Path) -> None:
    srv = serve()
    pusher = ("pusher", add_agent(db_url, "pusher", "write"))
    reader = get_token(srv, "r", add_agent(db_url, "r", "read"))
    league, log = hostile_league(tmp_path / "league")
    for attempt in range(2):  # the second push is a no-op, not a retry loop
        r = registry_cli("push", "--url", srv.url, "--league-dir", str(league.path),
                         agent=pusher)
        assert r.returncode == 0, r.stderr
        assert "Traceback" not in r.stderr
        for no, (_line, says) in enumerate(BAD_LINES, start=2):
            hit = [ln for ln in r.stderr.splitlines() if f"{log}: line {no} skipped" in ln]
            assert len(hit) == 1 and says in hit[0], (no, r.stderr[-2000:])
        new = 2 if attempt == 0 else 0  # (the member has no artifacts: not uploaded)
        assert f"pushed 0 member(s) and {new} new match(es)" in r.stdout, r.stdout
        assert f"skipped {len(BAD_LINES)} log line(s)" in r.stdout
    assert [m["time"] for m in stored_matches(srv, reader)] == [10.0, 20.0]


def test_push_is_never_stuck_on_a_record_the_registry_refuses(
        serve: Callable[..., Server], db_url: str, tmp_path: Path) -> None:
    """A batch the registry refuses (a newer service's stricter rule, say; forced here
    for one record) is split until the refused record is alone: it is named and
    dropped, the others are stored, and nothing stays queued to fail again."""
    from brawlkit.league.records import MatchRecord
    from brawlkit.registry.client import RegistryClient
    from brawlkit.registry.sync import RegistrySync

    srv = serve()
    client = RegistryClient(srv.url, "p", add_agent(db_url, "p", "write"), retries=1)
    league, _ = hostile_league(tmp_path / "league")
    sync = RegistrySync(client, league, "box")
    good = [MatchRecord(time=30.0 + i, a="main-r-g0001", b="cpu:2", result="draw")
            for i in range(5)]
    forged = MatchRecord(time=40.0, a="main-r-g0001", b="cpu:2", result="win")
    real_post = client.post_matches

    def post(batch: Any, tickets: Any = None) -> Any:  # the registry refuses `forged`
        if forged in batch:
            from brawlkit.registry.client import RegistryError
            raise RegistryError("POST /matches: 422 refused", 422)
        return real_post(batch, tickets)

    client.post_matches = post  # type: ignore[method-assign]
    with pytest.warns(UserWarning, match="refused by the registry"):
        assert sync.push(matches=[*good[:2], forged, *good[2:]]) is True
    assert sync.pending_matches == [] and len(sync.refused) == 1
    assert len(client.matches()) == 5


def test_push_sends_only_regular_files_inside_the_league(
        serve: Callable[..., Server], db_url: str, tmp_path: Path) -> None:
    """An artifact symlinked to a file elsewhere (``/etc/hostname`` was pushed as a
    checkpoint, for every reader to download), a FIFO, /dev/zero or a sparse file as a
    checkpoint, a member record symlinked from outside: none leaves the machine, each
    is named with the reason, and the push neither hangs nor runs out of memory."""
    srv = serve()
    pusher = ("pusher", add_agent(db_url, "pusher", "write"))
    reader = get_token(srv, "r", add_agent(db_url, "r", "read"))
    t = trapped_league(tmp_path, bpw(0))
    r = registry_cli("push", "--url", srv.url, "--league-dir", str(t.league.path),
                     agent=pusher, timeout=60)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert "pushed 1 member(s) and 1 new match(es)" in r.stdout, r.stdout
    assert f"{len(t.withheld)} member(s) not uploaded" in r.stdout, r.stdout
    lines = r.stderr.splitlines()
    for path, says in t.skipped:
        hit = [ln for ln in lines if f"{path}: skipped, " in ln]
        assert len(hit) == 1 and f"{path}: skipped, {says}" in hit[0], (path, r.stderr[-3000:])
    for mem_id, path, says in t.withheld:
        hit = [ln for ln in lines if f"member {mem_id} not uploaded: " in ln]
        assert len(hit) == 1 and f"not uploaded: {path}: {says}" in hit[0], (mem_id, hit)
    listed = requests.get(f"{srv.url}/checkpoints", headers=reader, timeout=30).json()
    assert [c["id"] for c in listed] == ["main-ok-g0001"]
    got = requests.get(f"{srv.url}/checkpoints/main-ok-g0001/checkpoint", headers=reader,
                       timeout=30)
    assert got.content == t.good_ckpt and t.secret not in got.content
    assert [(m["time"], m["b"]) for m in stored_matches(srv, reader)] == [(10.0, "cpu:3")]


@pytest.mark.parametrize("over,field", [
    ({"ticks": -5}, "ticks"), ({"ticks": 1.5}, "ticks"), ({"ticks": 2**31}, "ticks"),
    ({"time": "5"}, "time"), ({"time": True}, "time"), ({"a": " "}, "a"),
    ({"b": "main\u202e-x"}, "b"), ({"a": "player:anonymous"}, "a"), ({"source": 5}, "source"),
])
def test_matches_the_league_refuses_are_422_naming_the_field(
        serve: Callable[..., Server], db_url: str, over: dict[str, Any], field: str) -> None:
    srv = serve()
    writer = get_token(srv, "w", add_agent(db_url, "w", "write"))
    r = requests.post(f"{srv.url}/matches", headers=writer, json=[{**MATCH, **over}], timeout=30)
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["body", 0, field], r.text
    assert stored_matches(srv, writer) == []


# ------------------------------------------------------------------ names
def test_bad_names_are_refused_with_422_naming_the_field(
        serve: Callable[..., Server], db_url: str) -> None:
    srv = serve()
    writer = get_token(srv, "w", add_agent(db_url, "w", "write"))
    ckpt = sb3_zip("hostile")
    for bad in (" ", "main\u202e-x", "%2e%2e%2fetc", "CON", "cpu:9", "anonymous"):
        r = upload(srv, writer, metadata("main-x-g0001", ckpt, id=bad), ckpt)
        assert r.status_code == 422 and "id" in r.json()["detail"], (bad, r.text)
    for over, says in (({"parent": "main-x-g0001"}, "own parent"),
                       ({"parent": "main-x-g0000"}, "parent"),
                       ({"created": "2026-12-01T03:15:00"}, "timezone"),
                       ({"created": "9999-01-01T00:00:00+00:00"}, "ahead")):
        r = upload(srv, writer, metadata("main-x-g0001", ckpt, **over), ckpt)
        assert r.status_code == 422 and says in r.json()["detail"], (over, r.text)
        assert "created" in r.json()["detail"] or "parent" in r.json()["detail"]
    r = upload(srv, writer, metadata("main-x-g0001", ckpt), ckpt)
    assert r.status_code == 201, r.text
    child = metadata("main-x-g0002", ckpt, parent="main-x-g0001")
    assert upload(srv, writer, child, ckpt).status_code == 201
    for name in ("anonymous", "Anonymous", "baseline", "CON"):
        r = requests.post(f"{srv.url}/players", json={"name": name}, timeout=30)
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "name"], r.text
    r = registry_cli("add-player", "anonymous", "--db", db_url)
    assert r.returncode == 2 and "reserved" in r.stderr, r.stderr
    r = registry_cli("add-agent", "a b", "--db", db_url)
    assert r.returncode == 2 and "agent name" in r.stderr, r.stderr


# ------------------------------------------------------------------ revocation
def test_a_revoked_agent_is_refused_at_once(serve: Callable[..., Server], db_url: str,
                                            tmp_path: Path) -> None:
    srv = serve()
    leaked = add_agent(db_url, "colab", "write")
    admin = get_token(srv, "root", add_agent(db_url, "root", "admin"))
    tokens = [get_token(srv, "colab", leaked) for _ in range(2)]
    assert requests.get(f"{srv.url}/players", headers=tokens[0], timeout=30).status_code == 200
    r = registry_cli("revoke-agent", "colab", "--db", db_url, "--data", str(srv.data), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.splitlines()[-1])["agent_id"] == "colab"
    for t in tokens:  # live tokens: refused from the next request on
        r = requests.get(f"{srv.url}/players", headers=t, timeout=30)
        assert r.status_code == 401 and "revoked" in r.json()["detail"], r.text
    r = requests.post(f"{srv.url}/auth/token", json={"agent_id": "colab", "secret": leaked},
                      timeout=30)
    assert r.status_code == 401
    # the admin endpoint does the same for another agent; twice is fine; unknown is 404
    other = get_token(srv, "box2", add_agent(db_url, "box2", "read"))
    r = requests.post(f"{srv.url}/agents/box2/revoke", headers=admin, timeout=30)
    assert r.status_code == 200 and r.json()["agent_id"] == "box2", r.text
    first = r.json()["revoked"]
    again = requests.post(f"{srv.url}/agents/box2/revoke", headers=admin, timeout=30)
    assert again.json()["revoked"] == first
    assert requests.get(f"{srv.url}/active", headers=other, timeout=30).status_code == 401
    assert requests.post(f"{srv.url}/agents/nobody/revoke", headers=admin,
                         timeout=30).status_code == 404
    assert requests.post(f"{srv.url}/agents/root/revoke", headers=tokens[1],
                         timeout=30).status_code == 401
    assert registry_cli("revoke-agent", "nobody", "--db", db_url).returncode == 1


# ------------------------------------------------------------------ one database per registry
def test_a_data_directory_keeps_its_database(tmp_path: Path, db_url: str) -> None:
    data = tmp_path / "data"
    srv = Server(db_url, data)
    srv.stop()
    remembered = (data / "database.url").read_text().strip()
    assert "registry" in remembered or "postgresql" in remembered
    if "@" in db_url:
        assert ":" not in remembered.split("@")[0].split("//")[1], "the password is kept"
    # add-agent --data DIR would write DIR/registry.db: refused, naming both
    r = registry_cli("add-agent", "late", "--data", str(data))
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert remembered in r.stderr and "database.url" in r.stderr, r.stderr
    # serve with another database on this directory: refused, naming both
    other = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    r = registry_cli("serve", "--data", str(data), "--db", other, "--port", "0", timeout=60)
    assert r.returncode == 2 and remembered in r.stderr and "elsewhere.db" in r.stderr, r.stderr
    # the right pair works
    r = registry_cli("add-agent", "late", "--data", str(data), "--db", db_url)
    assert r.returncode == 0, r.stderr


# ------------------------------------------------------------------ slow and greedy clients
def _wait_closed(socks: list[socket.socket], within: float) -> list[float]:
    """Seconds until each socket saw the server close it (inf: still open)."""
    start = time.monotonic()
    closed = [float("inf")] * len(socks)
    while time.monotonic() - start < within and any(c == float("inf") for c in closed):
        for i, s in enumerate(socks):
            if closed[i] != float("inf"):
                continue
            try:
                data = s.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                closed[i] = time.monotonic() - start
        time.sleep(0.05)
    return closed


def test_slow_clients_are_closed_while_others_get_answers(
        serve: Callable[..., Server], db_url: str) -> None:
    timeout = 2.0
    # 120 slow connections and the normal client, all from 127.0.0.1: no per-address bound
    srv = serve("--header-timeout", str(timeout), "--body-timeout", str(timeout),
                "--max-connections-per-address", "0")
    answers: list[int] = []
    stop = threading.Event()

    def normal_client() -> None:
        while not stop.is_set():
            answers.append(requests.get(f"{srv.url}/health", timeout=10).status_code)
            time.sleep(0.1)

    socks = []
    for i in range(120):
        s = socket.create_connection(("127.0.0.1", srv.port))
        if i < 100:  # half a request head, then nothing
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        else:  # a whole head, then a tenth of the body it announced
            s.sendall(b"POST /matches HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                      b"\r\nContent-Length: 1000\r\n\r\n[" + b" " * 99)
        s.setblocking(False)
        socks.append(s)
    t = threading.Thread(target=normal_client)
    t.start()
    try:
        closed = _wait_closed(socks, within=timeout + 15)
    finally:
        stop.set()
        t.join(15)
        for s in socks:
            s.close()
    assert all(c <= timeout + 3.0 for c in closed), sorted(closed)[-5:]
    assert min(closed) >= timeout / 2, min(closed)  # by the timeout, not refused at once
    assert len(answers) >= 10 and set(answers) == {200}, answers
    srv.stop()
    assert "closed" in srv.log_text() and "request head not complete" in srv.log_text()


def test_an_agent_over_its_rate_gets_429_with_retry_after(
        serve: Callable[..., Server], db_url: str) -> None:
    srv = serve("--rate-limit", "1")
    reader = get_token(srv, "r", add_agent(db_url, "r", "read"))
    codes = [requests.get(f"{srv.url}/active", headers=reader, timeout=30) for _ in range(8)]
    limited = [r for r in codes if r.status_code == 429]
    assert limited and all(r.status_code in (404, 429) for r in codes), [r.status_code for r in codes]
    assert int(limited[0].headers["Retry-After"]) >= 1 and "retry in" in limited[0].json()["detail"]
    # the client waits Retry-After and gets through
    from brawlkit.registry.client import RegistryClient

    client = RegistryClient(srv.url, "r2", add_agent(db_url, "r2", "read"), retries=3)
    for _ in range(6):
        assert client.checkpoints() == []
    srv.stop()
    assert "over the rate limit so far (429) by agent" in srv.log_text()  # counted, logged


def test_ratings_are_cached_per_state_and_capped_for_readers(
        serve: Callable[..., Server], db_url: str) -> None:
    srv = serve()
    reader = get_token(srv, "r", add_agent(db_url, "r", "read"))
    writer = get_token(srv, "w", add_agent(db_url, "w", "write"))
    matches = [{**MATCH, "time": float(i), "result": ("win", "loss")[i % 2]} for i in range(50)]
    assert requests.post(f"{srv.url}/matches", headers=writer, json=matches,
                         timeout=30).status_code == 200

    def ratings(headers: dict[str, str], **params: Any) -> requests.Response:
        r = requests.get(f"{srv.url}/ratings", headers=headers, params=params, timeout=60)
        assert r.status_code == 200, r.text
        return r

    first = ratings(reader, bootstrap=1000)
    assert first.headers["X-Ratings-Cache"] == "computed" and first.json()["bootstrap"] == 10
    again = ratings(reader, bootstrap=1000)
    assert again.headers["X-Ratings-Cache"] == "hit" and again.content == first.content
    assert ratings(writer, bootstrap=30).json()["bootstrap"] == 30  # write agents: not capped
    assert requests.post(f"{srv.url}/matches", headers=writer, json=[{**MATCH, "time": 99.0}],
                         timeout=30).status_code == 200
    after = ratings(reader, bootstrap=1000)
    assert after.headers["X-Ratings-Cache"] == "computed" and after.json()["matches"] == 51


# ------------------------------------------------------------------ edges (issue 30)
def _raw_answer(port: int, data: bytes, timeout: float = 30) -> bytes:
    """Send ``data`` in ONE write on a fresh connection; the answer's bytes (up to the
    server's close, or its first 64 KiB)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        got = b""
        while len(got) < 65536:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
            if b"\r\n\r\n" in got and got.split(b"\r\n\r\n", 1)[1].rstrip().endswith(b"}"):
                break
        return got


def test_request_heads_over_16_kib_get_400(serve: Callable[..., Server], db_url: str) -> None:
    """docs/registry.md: a request head over 16 KiB gets 400 — a 60 KB head in one
    write (which uvicorn's h11 bound let through: 200), many small headers, and a head
    arriving in pieces (h11's own bound, set to the same 16 KiB)."""
    srv = serve()
    ok = requests.get(f"{srv.url}/health", headers={"X-Pad": "a" * (15 * 1024)}, timeout=30)
    assert ok.status_code == 200, ok.text
    for head in (b"GET /health HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 60_000 + b"\r\n\r\n",
                 b"GET /health HTTP/1.1\r\nHost: x\r\n"
                 + b"".join(b"X-H%d: %s\r\n" % (i, b"b" * 30) for i in range(600)) + b"\r\n",
                 b"GET /health?" + b"q" * 20_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"):
        got = _raw_answer(srv.port, head)
        assert got.startswith(b"HTTP/1.1 400"), got[:300]
        assert b"over the limit of 16384 bytes" in got, got[:600]
    # a head that never completes: refused once its first 16 KiB are in, not held
    got = _raw_answer(srv.port, b"GET /health HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"c" * 20_000)
    assert got.startswith(b"HTTP/1.1 400"), got[:300]
    assert requests.get(f"{srv.url}/health", timeout=30).status_code == 200


def test_numbers_out_of_range_are_422_naming_the_item_and_field(
        serve: Callable[..., Server], db_url: str) -> None:
    """A 5,000-digit ``ticks`` (Python converts at most 4,300 digits: it was 400 "There
    was an error parsing the body"), an integer past 64 bits, ``1e999``; in a
    checkpoint's settings, a huge integer (400 with Python's raw "Exceeds the limit")
    and a non-finite number deep inside: each 422 naming where it is, nothing stored."""
    srv = serve()
    writer = get_token(srv, "w", add_agent(db_url, "w", "write"))
    huge = "9" * 5000
    for item, (field, literal, says) in enumerate([
            ("ticks", huge, "(5000 digits) is out of range"),
            ("ticks", str(2**70), f"number {2**70} is out of range"),
            ("time", "1e999", "number 1e999 is out of range"),
            ("ticks", "-" + huge, "(5000 digits) is out of range")]):
        body = [dict(MATCH, time=float(t)) for t in range(item + 1)]
        text = json.dumps(body)
        cut = text.rindex(f'"{field}": ') + len(f'"{field}": ')
        text = text[:cut] + literal + text[text.index(",", cut):]
        r = requests.post(f"{srv.url}/matches", data=text, timeout=30,
                          headers={**writer, "Content-Type": "application/json"})
        assert r.status_code == 422, (field, r.status_code, r.text[:300])
        err = r.json()["detail"][0]
        assert err["loc"] == ["body", item, field] and says in err["msg"], err
        assert "Exceeds the limit" not in r.text and len(r.text) < 1000
    assert stored_matches(srv, writer) == []
    # an ordinary big number still reaches the field's own rule (422 naming it too)
    r = requests.post(f"{srv.url}/matches", headers=writer, json=[{**MATCH, "ticks": 2**40}],
                      timeout=30)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", 0, "ticks"], r.text
    ckpt = sb3_zip("numbers")
    for settings, literal, where in (({"seed": "@"}, huge, "settings.seed"),
                                     ({"net": {"layers": [64, "@"]}}, "1e999",
                                      "settings.net.layers.1")):
        meta = json.dumps(metadata("main-n-g0001", ckpt, settings=settings))
        meta = meta.replace('"@"', literal)
        r = upload(srv, writer, meta, ckpt)
        assert r.status_code == 422, (where, r.status_code, r.text[:300])
        detail = r.json()["detail"]
        assert detail.startswith(f"metadata of 'main-n-g0001': {where}: number "), detail
        assert "out of range" in detail and "Exceeds the limit" not in detail
    assert requests.get(f"{srv.url}/checkpoints", headers=writer, timeout=30).json() == []
    assert upload(srv, writer, metadata("main-n-g0001", ckpt), ckpt).status_code == 201


def _idle_connections(port: int, source: str, n: int) -> list[socket.socket]:
    """``n`` connections to 127.0.0.1:``port`` from the loopback address ``source`` that
    send nothing (non-blocking, for :func:`_wait_closed`)."""
    out = []
    for _ in range(n):
        s = socket.socket()
        s.bind((source, 0))
        s.connect(("127.0.0.1", port))
        s.setblocking(False)
        out.append(s)
    return out


def _closed_count(socks: list[socket.socket], n: int, within: float = 60) -> int:
    """How many of ``socks`` the server has closed, once ``n`` of them are (or after
    ``within`` seconds): a wait on the event, not a sleep, on a busy machine too."""
    start = time.monotonic()
    closed: set[int] = set()
    while len(closed) < n and time.monotonic() - start < within:
        for i, s in enumerate(socks):
            if i in closed:
                continue
            try:
                if not s.recv(4096):
                    closed.add(i)
            except BlockingIOError:
                pass
            except OSError:
                closed.add(i)
        time.sleep(0.05)
    return len(closed)


def test_one_address_cannot_take_every_connection(serve: Callable[..., Server],
                                                 db_url: str) -> None:
    """30 idle connections from 127.0.0.2 against ``--max-connections 24``: without a
    per-address bound they hold every connection and a client from 127.0.0.1 is shut
    out (until the header timeout, renewable); with ``--max-connections-per-address 8``
    the 22 over it are closed at once and every other client is answered."""
    slow = ("--max-connections", "24", "--header-timeout", "60")
    unbounded = serve(*slow, "--max-connections-per-address", "0")
    hog = _idle_connections(unbounded.port, "127.0.0.2", 30)
    try:
        assert _closed_count(hog, 30 - 24) == 30 - 24
        with pytest.raises(requests.ConnectionError):
            requests.get(f"{unbounded.url}/health", timeout=10)
    finally:
        for s in hog:
            s.close()
    srv = serve(*slow, "--max-connections-per-address", "8")
    hog = _idle_connections(srv.port, "127.0.0.2", 30)
    try:
        assert _closed_count(hog, 30 - 8) == 30 - 8
        for _ in range(5):  # another address: answered, again and again
            assert requests.get(f"{srv.url}/health", timeout=10).status_code == 200
        other = _idle_connections(srv.port, "127.0.0.3", 8)  # its own 8
        assert all(c == float("inf") for c in _wait_closed(other, within=1)), "closed early"
        assert requests.get(f"{srv.url}/health", timeout=10).status_code == 200
        assert _closed_count(hog + other, 30, within=0.5) == 30 - 8  # the 8 + 8 still open
        for s in other:
            s.close()
    finally:
        for s in hog:
            s.close()
    srv.stop()
    assert "over --max-connections-per-address" in srv.log_text()
    r = registry_cli("serve", "--data", str(srv.data), "--db", db_url, "--port", "0",
                     "--max-connections-per-address", "-1", timeout=60)
    assert r.returncode == 2 and "--max-connections-per-address must be >= 0" in r.stderr

