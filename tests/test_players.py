"""Human players in the registry (docs/registry.md, "Players and tickets"): sign-up,
keys, tickets, matches that name ``player:NAME`` or ``anonymous``, and how they are
rated — over real HTTP against a real ``python -m brawlkit registry serve``
subprocess, on SQLite and (when ``BRAWLKIT_TEST_POSTGRES_URL`` is set) PostgreSQL,
with the database looked at directly to prove what a refused request left alone."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests
import test_registry_service as service_tests
from helpers import RegistryServer as Server
from helpers import add_agent, last_json, run_cli
from sqlalchemy import MetaData, create_engine, insert, text
from test_registry_service import get_token, metadata, sb3_zip, upload

from brawlkit.league.directory import LeagueDir
from brawlkit.league.ratings import elo_expected, league_table
from brawlkit.league.records import MatchRecord, Member
from brawlkit.registry.auth import MAX_TICKET_CHARS, TokenSigner, ticket_player
from brawlkit.registry.client import RegistryClient, RegistryError

pytestmark = pytest.mark.servers

# the registry tests' fixtures: a fresh database per test (SQLite, and PostgreSQL when
# BRAWLKIT_TEST_POSTGRES_URL is set), and serve(*flags) -> a running service on it
db_url = service_tests.db_url
serve = service_tests.serve


def sign_up(srv: Server, name: str) -> requests.Response:
    return requests.post(f"{srv.url}/players", json={"name": name}, timeout=30)


def ticket(srv: Server, name: str, key: str | None) -> requests.Response:
    headers = {} if key is None else {"X-Player-Key": key}
    return requests.post(f"{srv.url}/players/{name}/ticket", headers=headers, timeout=30)


def rows(url: str, table: str) -> list[tuple[str, ...]]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return sorted(tuple(str(v) for v in r) for r in conn.execute(text(f"SELECT * FROM {table}")))
    finally:
        engine.dispose()


def match(t: float, a: str, b: str, result: str, **extra: Any) -> dict[str, Any]:
    return {**MatchRecord(time=t, a=a, b=b, result=result, ticks=600, source="botpool").to_json(),
            **extra}


# ================================================================== players and tickets
def test_sign_up_keys_and_tickets(serve: Callable[..., Server], db_url: str,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("BRAWLKIT_AGENT_ID", "BRAWLKIT_AGENT_SECRET", "BRAWLKIT_PLAYER_KEY"):
        monkeypatch.delenv(var, raising=False)
    srv = serve()
    r = sign_up(srv, "alice")
    assert r.status_code == 201, r.text
    body = r.json()
    assert set(body) == {"name", "key"} and body["name"] == "alice" and len(body["key"]) >= 32
    alice = body["key"]
    assert sign_up(srv, "alice").status_code == 409  # taken
    for bad in ("", "a b", "x" * 25, "a:b", "al/ice", "é", "tab\t"):
        assert sign_up(srv, bad).status_code == 422, bad
    assert requests.post(f"{srv.url}/players", json={}, timeout=30).status_code == 422
    # the CLI, locally (like add-agent): the key printed once
    r = run_cli("registry", "add-player", "bob", "--db", db_url, "--json", timeout=120)
    assert r.returncode == 0, r.stderr
    out = last_json(r.stdout)
    assert out["name"] == "bob" and out["key"] in r.stdout.splitlines()[1]
    bob = out["key"]
    again = run_cli("registry", "add-player", "bob", "--db", db_url, timeout=120)
    assert again.returncode == 1 and "taken" in again.stderr
    bad = run_cli("registry", "add-player", "no good", "--db", db_url, timeout=120)
    assert bad.returncode == 2 and "player name" in bad.stderr
    # only salted hashes are stored
    stored = rows(db_url, "registry_players")
    assert [r[0] for r in stored] == ["alice", "bob"]
    assert alice not in str(stored) and bob not in str(stored)

    # a ticket for the right key; the same 401 for a wrong key and an unknown player
    r = ticket(srv, "alice", alice)
    assert r.status_code == 200, r.text
    t, expires = r.json()["ticket"], r.json()["expires"]
    assert len(t) <= MAX_TICKET_CHARS and t.isascii() and t.isprintable()
    assert ticket_player(t) == "alice"
    assert abs(expires - (time.time() + 4 * 3600)) < 120  # default TTL 4 h
    wrong = ticket(srv, "alice", bob)
    unknown = ticket(srv, "carol", alice)
    invalid = ticket(srv, "no%20good", alice)
    for resp in (wrong, unknown, invalid):
        assert resp.status_code == 401, resp.text
        assert resp.json() == {"detail": "unknown player or wrong key"}
    assert ticket(srv, "alice", None).status_code == 401
    assert ticket(srv, "bob", bob).status_code == 200

    # the list: read scope, names and sign-up times, never a key
    assert requests.get(f"{srv.url}/players", timeout=30).status_code == 401
    reader = get_token(srv, "viewer", add_agent(db_url, "viewer", "read"))
    listed = requests.get(f"{srv.url}/players", headers=reader, timeout=30).json()
    assert [p["name"] for p in listed] == ["alice", "bob"]
    assert all(set(p) == {"name", "created"} for p in listed)

    # the client: a player's side needs no agent credentials; 4xx are never retried
    client = RegistryClient(srv.url, agent_id=None, secret=None, retries=5, backoff_s=5.0)
    key = client.register_player("dora")
    assert ticket_player(client.player_ticket("dora", key)) == "dora"
    start = time.monotonic()
    with pytest.raises(RegistryError) as err:
        client.player_ticket("dora", alice)
    assert err.value.status == 401 and time.monotonic() - start < 4
    with pytest.raises(RegistryError) as err:
        client.register_player("dora")
    assert err.value.status == 409
    with pytest.raises(RegistryError, match="credentials|BRAWLKIT_AGENT"):
        client.players()  # a token needs an agent


def test_matches_naming_a_player_need_its_ticket(serve: Callable[..., Server], db_url: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    srv = serve()
    writer = get_token(srv, "pool", add_agent(db_url, "pool", "write"))
    keys = {n: sign_up(srv, n).json()["key"] for n in ("alice", "bob")}
    tickets = {n: ticket(srv, n, k).json()["ticket"] for n, k in keys.items()}

    def post(batch: list[dict[str, Any]]) -> requests.Response:
        return requests.post(f"{srv.url}/matches", headers=writer, json=batch, timeout=30)

    r = post([match(1.0, "player:alice", "main-x", "win", ticket=tickets["alice"]),
              match(2.0, "anonymous", "main-x", "loss"),  # anonymous needs none
              match(3.0, "player:alice", "player:bob", "draw",
                    ticket=[tickets["bob"], tickets["alice"]])])
    assert r.status_code == 200, r.text
    assert r.json() == {"accepted": 3, "duplicates": 0}
    before = rows(db_url, "registry_matches")

    signer = TokenSigner.from_data_dir(srv.data)  # the service's key: forge what we need
    expired = signer.issue_ticket("alice", ttl=60, now=time.time() - 3600)
    forged = tickets["alice"][:-2] + ("AA" if not tickets["alice"].endswith("AA") else "BB")
    fresh = [match(10.0 + i, "main-x", "player:alice", "win") for i in range(3)]
    refused = {
        "another player's ticket": ([{**fresh[0], "ticket": tickets["alice"]},
                                     {**fresh[1], "ticket": tickets["bob"]}], 1,
                                    "player 'bob'"),
        "no ticket": ([{**fresh[0], "ticket": tickets["alice"]}, fresh[1]], 1, "no ticket"),
        "expired": ([{**fresh[2], "ticket": expired}], 0, "expired"),
        "forged": ([{**fresh[2], "ticket": forged}], 0, "signature"),
        "garbage": ([{**fresh[2], "ticket": "x" * 500}], 0, "malformed"),
        "unregistered": ([match(20.0, "player:carol", "main-x", "win",
                                ticket=tickets["alice"])], 0, "carol"),
        "one of two players": ([match(21.0, "player:alice", "player:bob", "win",
                                      ticket=tickets["alice"])], 0, "bob"),
    }
    for what, (batch, index, says) in refused.items():
        r = post(batch)
        assert r.status_code == 403, (what, r.text)
        assert r.json()["detail"].startswith(f"match {index}:") and says in r.json()["detail"], \
            (what, r.text)
        assert rows(db_url, "registry_matches") == before, what  # nothing of the batch
    # a malformed player id is a bad record (the match-record rule's field error, 422
    # naming the record and the field), not a missing ticket
    r = post([match(22.0, "player:no good", "main-x", "win")])
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", 0, "a"], r.text
    assert "player id" in r.json()["detail"][0]["msg"]

    # the ticket is not part of the match: a resend without it (say, after the ticket
    # expired) is a duplicate, and nothing served carries a ticket
    r = post([match(1.0, "player:alice", "main-x", "win")])
    assert r.json() == {"accepted": 0, "duplicates": 1}
    got = requests.get(f"{srv.url}/matches", headers=writer, timeout=30).json()
    assert len(got) == 3 and all("ticket" not in m for m in got)
    assert not any(t in str(rows(db_url, "registry_matches")) for t in tickets.values())

    # reserved ids are no checkpoints
    ckpt = sb3_zip("reserved")
    for rid in ("anonymous", "player:alice"):
        r = upload(srv, writer, metadata(rid, ckpt, role="main"), ckpt)
        assert r.status_code == 422 and "reserved" in r.text, r.text

    # the client: tickets by record index; a 403 is not retried
    monkeypatch.setenv("BRAWLKIT_PLAYER_KEY", keys["bob"])
    client = RegistryClient(srv.url, *_creds(db_url), retries=5, backoff_s=5.0)
    bob_ticket = client.player_ticket("bob")  # the key from the environment
    recs = [MatchRecord(time=30.0, a="main-x", b="player:bob", result="loss"),
            MatchRecord(time=31.0, a="anonymous", b="main-x", result="draw")]
    assert client.post_matches(recs, tickets={0: bob_ticket}) == {"accepted": 2, "duplicates": 0}
    start = time.monotonic()
    with pytest.raises(RegistryError) as err:
        client.post_matches([MatchRecord(time=32.0, a="player:bob", b="main-x", result="win")])
    assert err.value.status == 403 and "match 0" in str(err.value)
    assert time.monotonic() - start < 4
    with pytest.raises(ValueError):
        client.post_matches(recs, tickets={5: bob_ticket})


def _creds(url: str) -> tuple[str, str]:
    return "pool2", add_agent(url, "pool2", "write")


def test_a_short_ticket_ttl_expires(serve: Callable[..., Server], db_url: str) -> None:
    """--ticket-ttl: a ticket is refused once its time is up (the service's clock)."""
    srv = serve("--ticket-ttl", "1")
    writer = get_token(srv, "pool", add_agent(db_url, "pool", "write"))
    key = sign_up(srv, "eve").json()["key"]
    body = ticket(srv, "eve", key).json()
    assert body["expires"] <= time.time() + 2
    time.sleep(max(0.0, body["expires"] - time.time()) + 1.1)
    r = requests.post(f"{srv.url}/matches", headers=writer, timeout=30,
                      json=[match(1.0, "player:eve", "main-x", "win", ticket=body["ticket"])])
    assert r.status_code == 403 and "expired" in r.text


# ================================================================== ratings
def test_ratings_of_players_anonymous_and_kinds(serve: Callable[..., Server], db_url: str,
                                                tmp_path: Path) -> None:
    srv = serve()
    writer = get_token(srv, "pool", add_agent(db_url, "pool", "write"))
    ckpt = sb3_zip("bot")
    assert upload(srv, writer, metadata("main-p-g0001", ckpt), ckpt).status_code == 201
    key = sign_up(srv, "alice").json()["key"]
    t = ticket(srv, "alice", key).json()["ticket"]
    log = [match(1.0, "player:alice", "main-p-g0001", "win", ticket=t),
           match(2.0, "main-p-g0001", "anonymous", "loss"),
           match(3.0, "cpu:3", "player:alice", "draw", ticket=t)]
    r = requests.post(f"{srv.url}/matches", headers=writer, json=log, timeout=30)
    assert r.json() == {"accepted": 3, "duplicates": 0}

    # by hand, K 32, initial 1200:
    # 1: alice 1200 beats bot 1200: E = 0.5, alice 1216, bot 1184 (zero-sum)
    alice, bot = 1216.0, 1184.0
    # 2: bot 1184 loses to anonymous, who counts 1200 and never moves:
    #    E_bot = 1 / (1 + 10^(16/400)) = 0.4769904; bot += 32 (0 − 0.4769904)
    e = 1 / (1 + 10 ** (16 / 400))
    assert e == pytest.approx(0.4769904, abs=1e-7) and elo_expected(1184, 1200) == e
    bot = 1184 - 32 * e
    # 3: cpu:3 1200 draws alice 1216: E_cpu = 1 / (1 + 10^(16/400)) = e; cpu += 32 (0.5 − e)
    cpu3, alice = 1200 + 32 * (0.5 - e), alice - 32 * (0.5 - e)
    reader = get_token(srv, "viewer", add_agent(db_url, "viewer", "read"))
    served = requests.get(f"{srv.url}/ratings", headers=reader, timeout=120).json()
    by = {row["id"]: row for row in served["members"]}
    assert "anonymous" not in by
    assert by["player:alice"]["rating"] == round(alice, 3)
    assert by["main-p-g0001"]["rating"] == round(bot, 3)
    assert by["cpu:3"]["rating"] == round(cpu3, 3)
    assert (by["main-p-g0001"]["games"], by["main-p-g0001"]["losses"]) == (2, 2)
    assert (by["player:alice"]["games"], by["player:alice"]["wins"],
            by["player:alice"]["draws"]) == (2, 1, 1)
    assert {rid: row["kind"] for rid, row in by.items() if rid in (
        "player:alice", "main-p-g0001", "cpu:3", "baseline")} == {
        "player:alice": "human", "main-p-g0001": "bot", "cpu:3": "cpu", "baseline": "baseline"}
    assert by["player:alice"]["role"] == "?" and by["main-p-g0001"]["role"] == "main"
    assert served["matches"] == 3
    # the anonymous game is not zero-sum: the listed ratings lost exactly its delta
    total = sum(row["rating"] for row in served["members"])
    assert total == pytest.approx(1200 * len(by) - 32 * e, abs=0.01)

    # a local league directory holding the same member and matches: the same table
    league = LeagueDir(tmp_path / "league")
    rec = requests.get(f"{srv.url}/checkpoints/main-p-g0001", headers=reader, timeout=30).json()
    league.register(Member(id=rec["id"], role=rec["role"], generation=rec["generation"],
                           parent=rec["parent"], created=rec["created"], settings=rec["settings"]))
    with league.writer("botpool") as w:
        w.write_many([MatchRecord.from_json({k: v for k, v in m.items() if k != "ticket"})
                      for m in reversed(log)])
    # (a read agent's ratings have at most --read-bootstrap-max resamples: 10)
    assert served["bootstrap"] == 10
    local = run_cli("elo", "--league-dir", str(league.path), "--json", "--bootstrap", "10",
                    timeout=300)
    assert local.returncode == 0, local.stderr
    table = last_json(local.stdout)
    table.pop("league_dir")
    assert table == served
    assert served == json.loads(json.dumps(league_table(league.members(), league.matches(),
                                                        bootstrap=10)))
    human = run_cli("elo", "--league-dir", str(league.path), "--bootstrap", "0", timeout=300)
    lines = human.stdout.splitlines()
    assert lines[1].split()[:3] == ["member", "kind", "role"]
    assert any(ln.split()[:2] == ["player:alice", "human"] for ln in lines)
    assert "anonymous" not in human.stdout

    # `registry push` of that league directory: its player records cannot be vouched
    # for (no ticket is kept) and stay behind; everything else goes, nothing is refused
    from brawlkit.registry.sync import RegistrySync

    with league.writer("more") as w:
        w.write_many([MatchRecord(time=50.0, a="player:alice", b="main-p-g0001", result="win"),
                      MatchRecord(time=51.0, a="main-p-g0001", b="cpu:1", result="win")])
    client = RegistryClient(srv.url, "pusher", add_agent(db_url, "pusher", "write"))
    assert RegistrySync(client, league, "box").push_all() == (0, 1)
    stored = requests.get(f"{srv.url}/matches", headers=reader, timeout=30).json()
    assert [m["time"] for m in stored] == [1.0, 2.0, 3.0, 51.0]


# ================================================================== migration
def test_a_version_2_database_gains_players(serve: Callable[..., Server], db_url: str,
                                            tmp_path: Path) -> None:
    """A database as version 2 left it (agents, a match) is upgraded to version 3 at
    start: its rows are kept, and players can sign up."""
    from brawlkit.registry.auth import hash_secret
    from brawlkit.registry.database import (
        SCHEMA_VERSION,
        make_engine,
        match_digest,
        migrate,
        tables_v1,
    )

    engine = make_engine(db_url)
    assert migrate(engine, target=2) == (0, 2)
    with engine.connect() as conn:
        assert not engine.dialect.has_table(conn, "registry_players")
    v1 = tables_v1(MetaData())
    h = hash_secret("v2-secret")
    old = MatchRecord(time=5.0, a="main-v2-g0001", b="cpu:2", result="win", ticks=300,
                      source="eval")
    with engine.begin() as conn:
        conn.execute(insert(v1["agents"]).values(id="old", scope="write", kdf=h.kdf, salt=h.salt,
                                                 secret_hash=h.digest, created="2026-01-01"))
        conn.execute(text("INSERT INTO registry_matches (time, a, b, result, ticks, source, "
                          "received, received_by, digest) VALUES (5.0, 'main-v2-g0001', "
                          "'cpu:2', 'win', 300, 'eval', '2026-01-01', 'old', :d)"),
                     {"d": match_digest(old)})
    engine.dispose()

    srv = serve()
    hdr = get_token(srv, "old", "v2-secret")
    assert requests.get(f"{srv.url}/health", timeout=30).json()["schema_version"] == SCHEMA_VERSION == 5
    # a match stored before version 5 reads as it was (no seed, its default policies), and
    # resending it is a duplicate: the record of the older shape keeps its identity
    assert requests.get(f"{srv.url}/matches", headers=hdr, timeout=30).json() == [old.to_json()]
    key = sign_up(srv, "alice").json()["key"]
    t = ticket(srv, "alice", key).json()["ticket"]
    r = requests.post(f"{srv.url}/matches", headers=hdr, timeout=30,
                      json=[old.to_json(), match(6.0, "player:alice", "cpu:2", "win", ticket=t)])
    assert r.json() == {"accepted": 1, "duplicates": 1}
    assert [p["name"] for p in requests.get(f"{srv.url}/players", headers=hdr,
                                            timeout=30).json()] == ["alice"]
    versions = [r[0] for r in rows(db_url, "registry_migrations")]
    assert versions == ["1", "2", "3", "4", "5"]
    assert "registry" in srv.log_text() and "upgraded from 2" in srv.log_text()
