"""The checkpoint registry (brawlkit/registry) over real HTTP, against a real
``python -m brawlkit registry serve`` subprocess.

Every test runs on SQLite (the embedded default) and, when
``BRAWLKIT_TEST_POSTGRES_URL`` names a PostgreSQL database (``.ci/run`` starts a
throw-away cluster and sets it), on PostgreSQL too — each test in a schema of its
own, dropped afterwards.  The tests look at the database and the store directly
(never through the service alone) to prove what a failed request did not leave
behind.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
import uuid
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests
from helpers import ROOT, add_agent, last_json, run_cli
from helpers import RegistryServer as Server
from sqlalchemy import MetaData, create_engine, insert, text
from sqlalchemy.engine import make_url

from brawlkit.export.bpw import LZ4_FRAME_MAGIC, Layer, PolicyMeta, pack_bpw, unwrap_blob
from brawlkit.league.directory import LeagueDir, permanent_members
from brawlkit.league.ratings import league_table
from brawlkit.league.records import MatchRecord, Member, permanent_ids

pytestmark = pytest.mark.servers

POSTGRES_ENV = "BRAWLKIT_TEST_POSTGRES_URL"


# ================================================================== fixtures
@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty registry database: a SQLite file, or a PostgreSQL schema of its
    own (``search_path`` in the URL) in the database ``BRAWLKIT_TEST_POSTGRES_URL`` names."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'registry.db'}"
        return
    base = os.environ.get(POSTGRES_ENV)
    if not base:
        pytest.skip(f"{POSTGRES_ENV} is not set (a postgresql+psycopg:// URL of a database this "
                    "test may create schemas in; .ci/run starts one)")
    schema = f"t_{uuid.uuid4().hex[:16]}"
    admin = create_engine(base)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = make_url(base).update_query_dict({"options": f"-csearch_path={schema}"})
    yield url.render_as_string(hide_password=False)
    with admin.begin() as conn:
        conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    admin.dispose()


@pytest.fixture
def serve(db_url: str, tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """``serve(*flags, data=None)`` -> a running Server on this test's database."""
    started: list[Server] = []

    def start(*extra: str, data: Path | None = None) -> Server:
        srv = Server(db_url, data or tmp_path / f"data{len(started)}", *extra)
        started.append(srv)
        return srv

    yield start
    for srv in started:
        srv.stop()


def get_token(srv: Server, agent: str, secret: str) -> dict[str, str]:
    r = requests.post(f"{srv.url}/auth/token", json={"agent_id": agent, "secret": secret},
                      timeout=30)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["token_type"] == "bearer" and body["expires_in"] > 0
    return {"Authorization": f"Bearer {body['access_token']}"}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sb3_zip(tag: str) -> bytes:
    """A small zip shaped like an SB3 checkpoint (the service takes any bytes)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("data", json.dumps({"tag": tag, "policy_class": "MlpPolicy"}))
        z.writestr("policy.pth", random.Random(tag).randbytes(256))
    return buf.getvalue()


def bpw(seed: int) -> bytes:
    """A real raw .bpw (31-8-6), deterministic in ``seed``."""
    rng = np.random.default_rng(seed)
    layers = [Layer(rng.standard_normal((8, 31)).astype(np.float32),
                    rng.standard_normal(8).astype(np.float32), 1),
              Layer(rng.standard_normal((6, 8)).astype(np.float32),
                    rng.standard_normal(6).astype(np.float32), 0)]
    return pack_bpw(layers, PolicyMeta(action_repeat=4, input_layout=1, reward="tiered"))


def metadata(member_id: str, ckpt: bytes, blob: bytes | None = None, **over: Any) -> dict[str, Any]:
    role = member_id.split("-")[0]
    meta = {**Member(id=member_id, role=role, generation=1,
                     settings={"seed": 0, "lr": 3e-4}).to_json(),
            "location": "box-a", "checkpoint_sha256": sha(ckpt)}
    if blob is not None:
        meta["blob_sha256"] = sha(blob)
    meta.update(over)
    return meta


def upload(srv: Server, headers: dict[str, str], meta: dict[str, Any] | str, ckpt: bytes,
           blob: bytes | None = None) -> requests.Response:
    files: dict[str, Any] = {"checkpoint": ("gen.zip", ckpt, "application/zip")}
    if blob is not None:
        files["blob"] = ("gen.bpw", blob, "application/octet-stream")
    body = meta if isinstance(meta, str) else json.dumps(meta)
    return requests.post(f"{srv.url}/checkpoints", headers=headers, timeout=60,
                         data={"metadata": body}, files=files)


def snapshot(srv: Server) -> tuple[Any, ...]:
    """Everything a request could have changed: every row of every registry table
    and every file under the store (temp files included)."""
    engine = create_engine(srv.db_url)
    try:
        with engine.connect() as conn:
            tables = tuple(
                tuple(sorted(tuple(str(v) for v in row)
                             for row in conn.execute(text(f"SELECT * FROM {t}"))))
                for t in ("registry_checkpoints", "registry_matches", "registry_agents"))
    finally:
        engine.dispose()
    files = tuple(sorted(str(p.relative_to(srv.data)) for p in (srv.data / "blobs").rglob("*")
                         if p.is_file()))
    return tables, files


def store_files(srv: Server) -> dict[str, Path]:
    """The published artifacts: sha256 name -> path."""
    return {p.name: p for p in (srv.data / "blobs").glob("??/*") if p.is_file()}


def temp_files(srv: Server) -> list[Path]:
    return sorted((srv.data / "blobs" / ".tmp").iterdir())


# ================================================================== end to end
def test_end_to_end(serve: Callable[..., Server], db_url: str, tmp_path: Path) -> None:
    srv = serve()
    # agents through the CLI: the secret is printed once, the database keeps a hash
    creds = {}
    for name, scope in (("ops", "admin"), ("trainer", "write"), ("bot", "read")):
        r = run_cli("registry", "add-agent", name, "--db", db_url, "--scope", scope, "--json",
                    timeout=120)
        assert r.returncode == 0, r.stderr
        out = last_json(r.stdout)
        assert out["agent_id"] == name and out["scope"] == scope and len(out["secret"]) >= 32
        assert out["secret"] in r.stdout.splitlines()[1]  # the human line shows it too
        creds[name] = out["secret"]
    again = run_cli("registry", "add-agent", "ops", "--db", db_url, timeout=120)
    assert again.returncode == 1 and "exists" in again.stderr
    engine = create_engine(db_url)
    with engine.connect() as conn:
        rows = [tuple(str(v) for v in r) for r in conn.execute(text("SELECT * FROM registry_agents"))]
    engine.dispose()
    assert len(rows) == 3 and not any(s in str(rows) for s in creds.values())
    key = srv.data / "token.key"
    assert key.stat().st_mode & 0o777 == 0o600
    # it listens on 127.0.0.1 only
    listen = [ln.split()[1] for ln in Path("/proc/net/tcp").read_text().splitlines()[1:]
              if ln.split()[3] == "0A"]
    assert f"0100007F:{srv.port:04X}" in listen

    admin = get_token(srv, "ops", creds["ops"])
    writer = get_token(srv, "trainer", creds["trainer"])
    reader = get_token(srv, "bot", creds["bot"])

    # ------------------------------------------------------------ uploads
    specs = [  # id, created ("" = the server fills it), location, with blob
        ("main-r1-g0001", "2026-12-01T03:00:00.000000+00:00", "box-a", True),
        ("main-r1-g0002", "2026-12-01T04:00:00.000000+00:00", "box-a", True),
        ("main_exploiter-r1-g0001", "2026-12-01T03:30:00.000000+00:00", "box-b", True),
        ("league_exploiter-r1-g0001", "", "box-b", False),
    ]
    ckpts = {mid: sb3_zip(mid) for mid, *_ in specs}
    blobs = {mid: bpw(i) for i, (mid, _c, _l, with_blob) in enumerate(specs) if with_blob}
    records = {}
    for mid, created, loc, _ in specs:
        gen = int(mid[-4:])
        meta = metadata(mid, ckpts[mid], blobs.get(mid), generation=gen, created=created,
                        location=loc, parent="main-r1-g0001" if mid == "main-r1-g0002" else None)
        r = upload(srv, writer, meta, ckpts[mid], blobs.get(mid))
        assert r.status_code == 201, r.text
        rec = r.json()
        assert rec["id"] == mid and rec["status"] == "registered" and rec["generation"] == gen
        assert rec["checkpoint_sha256"] == sha(ckpts[mid]) and rec["checkpoint_size"] == len(ckpts[mid])
        assert rec["blob_sha256"] == (sha(blobs[mid]) if mid in blobs else None)
        assert rec["settings"] == {"seed": 0, "lr": 3e-4} and rec["location"] == loc
        assert rec["uploaded_by"] == "trainer"
        assert rec["created"] == created if created else rec["created"].startswith("20")
        records[mid] = rec
        again = upload(srv, writer, meta, ckpts[mid], blobs.get(mid))  # a retry: same record
        assert again.status_code == 200 and again.json() == rec
    assert records["main-r1-g0002"]["parent"] == "main-r1-g0001"
    # content addressing: one file per distinct content, named by its sha256
    files = store_files(srv)
    assert set(files) == {sha(b) for b in [*ckpts.values(), *blobs.values()]}
    assert all(sha(p.read_bytes()) == name and p.parent.name == name[:2] for name, p in files.items())
    assert temp_files(srv) == []

    # ------------------------------------------------------------ list, filter, get
    def ids(**params: Any) -> list[str]:
        r = requests.get(f"{srv.url}/checkpoints", headers=reader, params=params, timeout=30)
        assert r.status_code == 200, r.text
        return [rec["id"] for rec in r.json()]

    by_created = sorted(records.values(), key=lambda r: (r["created"], r["id"]))
    assert ids() == [r["id"] for r in by_created]  # registration order
    assert ids(role="main") == ["main-r1-g0001", "main-r1-g0002"]
    assert ids(generation=2) == ["main-r1-g0002"]
    assert set(ids(location="box-b")) == {"main_exploiter-r1-g0001", "league_exploiter-r1-g0001"}
    assert ids(status="registered", role="main", generation=1, location="box-a") == ["main-r1-g0001"]
    assert ids(location="nowhere") == [] and ids(status="active") == []
    r = requests.get(f"{srv.url}/checkpoints/main-r1-g0002", headers=reader, timeout=30)
    assert r.status_code == 200 and r.json() == records["main-r1-g0002"]
    assert requests.get(f"{srv.url}/checkpoints/main-r1-g0009", headers=reader,
                        timeout=30).status_code == 404

    # ------------------------------------------------------------ downloads
    for mid, data in ckpts.items():
        r = requests.get(f"{srv.url}/checkpoints/{mid}/checkpoint", headers=reader, timeout=30)
        assert r.status_code == 200 and r.content == data
        assert r.headers["X-Content-SHA256"] == sha(r.content) == records[mid]["checkpoint_sha256"]
        zipfile.ZipFile(io.BytesIO(r.content)).testzip()
    for mid, raw in blobs.items():
        r = requests.get(f"{srv.url}/checkpoints/{mid}/blob", headers=reader, timeout=30)
        assert r.status_code == 200 and r.content[:4] == LZ4_FRAME_MAGIC  # default: lz4
        assert r.headers["X-Content-SHA256"] == sha(r.content)
        assert r.headers["X-Blob-SHA256"] == sha(raw) == records[mid]["blob_sha256"]
        assert unwrap_blob(r.content) == raw
        r = requests.get(f"{srv.url}/checkpoints/{mid}/blob", params={"compression": "none"},
                         headers=reader, timeout=30)
        assert r.status_code == 200 and r.content == raw
        assert r.headers["X-Content-SHA256"] == r.headers["X-Blob-SHA256"] == sha(raw)
    r = requests.get(f"{srv.url}/checkpoints/league_exploiter-r1-g0001/blob", headers=reader,
                     timeout=30)
    assert r.status_code == 404 and "no blob" in r.json()["detail"]

    # ------------------------------------------------------------ newest, active, disabled
    def newest(role: str) -> str | None:
        r = requests.get(f"{srv.url}/roles/{role}/newest", headers=reader, timeout=30)
        assert r.status_code in (200, 404), r.text
        return r.json()["id"] if r.status_code == 200 else None

    def active() -> str | None:
        r = requests.get(f"{srv.url}/active", headers=reader, timeout=30)
        assert r.status_code in (200, 404), r.text
        return r.json()["id"] if r.status_code == 200 else None

    def act(mid: str, what: str, hdr: dict[str, str] = admin) -> requests.Response:
        return requests.post(f"{srv.url}/checkpoints/{mid}/{what}", headers=hdr, timeout=30)

    assert newest("main") == "main-r1-g0002" and newest("main_exploiter") == "main_exploiter-r1-g0001"
    assert active() is None
    assert act("main-r1-g0001", "activate", writer).status_code == 403
    r = act("main-r1-g0001", "activate")
    assert r.status_code == 200 and r.json()["status"] == "active"
    assert active() == "main-r1-g0001"
    assert act("main-r1-g0002", "activate").json()["status"] == "active"
    assert active() == "main-r1-g0002" and ids(status="active") == ["main-r1-g0002"]
    assert requests.get(f"{srv.url}/checkpoints/main-r1-g0001", headers=reader,
                        timeout=30).json()["status"] == "registered"
    r = act("main-r1-g0002", "disable")
    assert r.status_code == 200 and r.json()["status"] == "disabled"
    assert active() is None and newest("main") == "main-r1-g0001"  # disabled: kept, not served
    assert ids(status="disabled") == ["main-r1-g0002"] and "main-r1-g0002" in ids()
    r = act("main-r1-g0002", "activate")
    assert r.status_code == 409 and "disabled" in r.json()["detail"]
    assert act("main-r1-g0009", "activate").status_code == 404
    assert act("main_exploiter-r1-g0001", "activate").status_code == 200
    assert active() == "main_exploiter-r1-g0001"

    # ------------------------------------------------------------ matches
    rng = random.Random(7)
    players = [*records, *permanent_ids()]
    matches = []
    for i in range(80):
        a, b = rng.sample(players, 2)
        matches.append(MatchRecord(time=1_764_556_800.0 + (i // 4) + rng.choice([0.0, 0.125]),
                                   a=a, b=b, result=rng.choice(["win", "draw", "loss"]),
                                   ticks=rng.randrange(100, 9000),
                                   source=rng.choice(["train:main", "eval"])))
    posted = [m.to_json() for m in matches]
    rng.shuffle(posted)
    r1 = requests.post(f"{srv.url}/matches", headers=writer, json=posted[:50], timeout=30)
    assert r1.status_code == 200 and r1.json() == {"accepted": 50, "duplicates": 0}
    r2 = requests.post(f"{srv.url}/matches", headers=writer, json=posted, timeout=30)  # a retry
    assert r2.status_code == 200 and r2.json() == {"accepted": 30, "duplicates": 50}
    r3 = requests.post(f"{srv.url}/matches", headers=writer, json=posted + posted[:2], timeout=30)
    assert r3.json() == {"accepted": 0, "duplicates": 82}
    assert requests.post(f"{srv.url}/matches", headers=reader, json=posted[:1],
                         timeout=30).status_code == 403
    canonical = sorted(matches, key=lambda m: m.sort_key)
    got = requests.get(f"{srv.url}/matches", headers=reader, timeout=30).json()
    assert [MatchRecord.from_json(d) for d in got] == canonical
    since = canonical[40].time
    got = requests.get(f"{srv.url}/matches", params={"since": since}, headers=reader,
                       timeout=30).json()
    assert [MatchRecord.from_json(d) for d in got] == [m for m in canonical if m.time >= since]

    # ------------------------------------------------------------ ratings agree, bit for bit
    # a write agent gets the default 200 resamples; a read agent at most the service's
    # --read-bootstrap-max (10), and the table says so
    capped = requests.get(f"{srv.url}/ratings", headers=reader, timeout=120).json()
    assert capped["bootstrap"] == 10
    r = requests.get(f"{srv.url}/ratings", headers=writer, timeout=120)
    assert r.status_code == 200, r.text
    served = r.json()
    stored = requests.get(f"{srv.url}/checkpoints", headers=reader, timeout=30).json()
    # the same members and matches in a local league directory, the matches written in
    # a shuffled order by two writers: the local command gives the same table
    league = LeagueDir(tmp_path / "league")
    for rec in sorted(stored, key=lambda r: r["id"]):
        league.register(Member(id=rec["id"], role=rec["role"], generation=rec["generation"],
                               parent=rec["parent"], created=rec["created"],
                               settings=rec["settings"]))
    shuffled = matches[:]
    rng.shuffle(shuffled)
    with league.writer("w1") as w1, league.writer("w2") as w2:
        w1.write_many(shuffled[:40])
        w2.write_many(shuffled[40:])
    local = run_cli("elo", "--league-dir", str(league.path), "--json", timeout=300)
    assert local.returncode == 0, local.stderr
    local_table = last_json(local.stdout)
    local_table.pop("league_dir")
    assert served == local_table
    assert served == json.loads(json.dumps(league_table(
        permanent_members() + sorted(
            [Member(id=x["id"], role=x["role"], generation=x["generation"],
                    created=x["created"]) for x in stored], key=lambda m: (m.created, m.id)),
        canonical)))
    assert served["matches"] == 80 and len(served["members"]) == len(records) + 9
    r = requests.get(f"{srv.url}/ratings", params={"k": 16, "bootstrap": 0}, headers=reader,
                     timeout=60)
    assert r.json() == json.loads(json.dumps(league_table(league.members(), league.matches(),
                                                          k=16, bootstrap=0)))

    # service endpoints
    assert requests.get(f"{srv.url}/health", timeout=30).json()["status"] == "ok"
    spec = requests.get(f"{srv.url}/openapi.json", timeout=30).json()
    assert {"/checkpoints", "/checkpoints/{checkpoint_id}/blob", "/auth/token", "/matches",
            "/ratings", "/active", "/roles/{role}/newest"} <= set(spec["paths"])
    assert "CheckpointMetadata" in spec["components"]["schemas"]


# ================================================================== bad input
def _cut_off_upload(srv: Server, head: bytes, body: bytes, linger_reset: bool = False) -> bytes:
    """Send ``head`` and half of ``body`` on a raw socket, wait until the service is
    receiving it into a temp file of the store, then stop sending (FIN) — or, with
    ``linger_reset``, drop the connection (RST).  Returns whatever came back."""
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    try:
        s.sendall(head + body[: len(body) // 2])
        deadline = time.monotonic() + 10
        while not temp_files(srv) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert temp_files(srv), "the upload never reached the store's temp directory"
        if linger_reset:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            return b""
        s.shutdown(socket.SHUT_WR)
        out = b""
        try:
            while chunk := s.recv(65536):
                out += chunk
        except (ConnectionResetError, TimeoutError):
            pass
        return out
    finally:
        s.close()


def _wait_no_temp_files(srv: Server, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while temp_files(srv) and time.monotonic() < deadline:
        time.sleep(0.05)


def test_bad_input_changes_nothing(serve: Callable[..., Server], db_url: str) -> None:
    srv = serve("--max-upload-mb", "1")
    admin = get_token(srv, "ops", add_agent(db_url, "ops", "admin"))
    writer = get_token(srv, "trainer", add_agent(db_url, "trainer", "write"))
    reader = get_token(srv, "bot", add_agent(db_url, "bot", "read"))
    ckpt, blob = sb3_zip("ok"), bpw(1)
    good = metadata("main-ok-g0001", ckpt, blob)
    assert upload(srv, writer, good, ckpt, blob).status_code == 201
    match = MatchRecord(time=1.0, a="main-ok-g0001", b="cpu:1", result="win", ticks=9).to_json()
    assert requests.post(f"{srv.url}/matches", headers=writer, json=[match],
                         timeout=30).json()["accepted"] == 1
    before = snapshot(srv)
    url = srv.url

    def expect(r: requests.Response, status: int, text: str = "") -> None:
        assert r.status_code == status, (r.status_code, r.text)
        detail = r.json()["detail"]
        assert isinstance(detail, str | list) and detail
        assert text.lower() in json.dumps(detail).lower(), (text, detail)

    # ------------------------------------------------------------ auth: 401 / 403
    from brawlkit.registry.auth import TokenSigner

    signer = TokenSigner.from_data_dir(srv.data)
    tok = admin["Authorization"].split()[1]
    bad_tokens = {
        "missing": {},
        "garbage": {"Authorization": "Bearer not-a-token"},
        "not bearer": {"Authorization": f"Basic {tok}"},
        "forged": {"Authorization": f"Bearer {tok[:-2]}{'AA' if tok[-2:] != 'AA' else 'BB'}"},
        "expired": {"Authorization": f"Bearer {signer.issue('ops', 'admin', ttl=-5)}"},
        "other key": {"Authorization": "Bearer " + TokenSigner(b"k" * 32).issue("ops", "admin", 60)},
    }
    for why, hdr in bad_tokens.items():
        for method, path in (("GET", "/checkpoints"), ("POST", "/checkpoints/main-ok-g0001/activate"),
                             ("POST", "/matches"), ("GET", "/ratings")):
            r = requests.request(method, url + path, headers=hdr, json=[match], timeout=30)
            assert r.status_code == 401, (why, path, r.text)
            assert r.headers["WWW-Authenticate"].startswith("Bearer"), why
        r = upload(srv, hdr, metadata("main-x-g0001", ckpt), ckpt)
        assert r.status_code == 401 and r.headers["WWW-Authenticate"].startswith("Bearer")
    r = requests.get(url + "/checkpoints", headers=bad_tokens["expired"], timeout=30)
    assert "expired" in r.json()["detail"] and "invalid_token" in r.headers["WWW-Authenticate"]
    for body in ({"agent_id": "ops", "secret": "wrong"}, {"agent_id": "nobody", "secret": "x"},
                 {"agent_id": "../ops", "secret": "x"}):
        r = requests.post(url + "/auth/token", json=body, timeout=30)
        assert r.status_code == 401 and "WWW-Authenticate" in r.headers
    expect(requests.post(url + "/auth/token", json={"agent_id": "ops"}, timeout=30), 422)
    expect(upload(srv, reader, metadata("main-x-g0001", ckpt), ckpt), 403, "scope")
    expect(requests.post(url + "/matches", headers=reader, json=[match], timeout=30), 403)
    for what in ("activate", "disable"):
        expect(requests.post(f"{url}/checkpoints/main-ok-g0001/{what}", headers=writer,
                             timeout=30), 403, "needs 'admin'")

    # ------------------------------------------------------------ uploads refused
    other = sb3_zip("other")
    expect(upload(srv, writer, metadata("main-x-g0001", ckpt), other), 400, "sha256 mismatch")
    expect(upload(srv, writer, metadata("main-x-g0001", other, blob), other, bpw(2)), 400,
           "blob sha256 mismatch")
    expect(upload(srv, writer, metadata("main-ok-g0001", other, blob), other, blob), 409,
           "other content")  # the same id, other bytes
    expect(upload(srv, writer, metadata("main-x-g0001", other, blob), other), 400, "go together")
    expect(upload(srv, writer, metadata("main-x-g0001", other), other, blob), 400, "go together")
    junk = b"not a bpw at all"
    expect(upload(srv, writer, metadata("main-x-g0001", other, junk), other, junk), 400, "bpw")
    from brawlkit.export.bpw import compress_lz4

    lz = compress_lz4(blob)
    expect(upload(srv, writer, metadata("main-x-g0001", other, lz), other, lz), 400, "raw")
    expect(upload(srv, writer, metadata("main-x-g0001", b""), b""), 400, "empty")
    expect(upload(srv, writer, "{not json", other), 400, "not valid JSON")
    expect(upload(srv, writer, "[1, 2]", other), 422, "JSON object")
    expect(upload(srv, writer, '{"id": "main-x-g0001", "role": "main", "generation": NaN, '
                               f'"checkpoint_sha256": "{sha(other)}"}}', other), 400, "NaN")
    expect(upload(srv, writer, json.dumps(metadata("main-x-g0001", other)).replace(
        '"seed": 0', '"seed": 1e999'), other), 422, "settings.seed: number 1e999 is out of range")
    bad_meta = [
        ({"id": None}, "id"), ({"role": "cpu"}, "role"), ({"role": "king"}, "role"),
        ({"generation": "3"}, "generation"), ({"generation": -1}, "generation"),
        ({"generation": 2**40}, "generation"), ({"id": "../../etc/passwd"}, "'.'"),
        ({"id": "main/../../x"}, "'/'"),
        ({"id": ".hidden"}, "'.'"), ({"id": "a\\b"}, "control character"), ({"id": "a\x00b"}, "control"),
        ({"id": "x" * 300}, "200"), ({"id": "cpu:3"}, "permanent"), ({"id": "baseline"}, "permanent"),
        ({"parent": "../up"}, "parent"), ({"checkpoint_sha256": "abc"}, "checkpoint_sha256"),
        ({"settings": [1, 2]}, "settings"), ({"location": "a\x00b"}, "NUL"),
        ({"created": "yesterday"}, "ISO-8601"), ({"created": "2026-13-01"}, "ISO-8601"),
        ({"settings": {"x": 1e999}}, "not a JSON number"),  # json.dumps writes Infinity
    ]
    for over, text_ in bad_meta:
        meta = metadata("main-x-g0001", other, **over)
        r = upload(srv, writer, meta, other)
        assert r.status_code in (400, 422), (over, r.status_code, r.text)
        assert text_.lower() in r.json()["detail"].lower(), (over, r.json())
    no_sha = metadata("main-x-g0001", other)
    del no_sha["checkpoint_sha256"]
    expect(upload(srv, writer, no_sha, other), 422, "checkpoint_sha256")
    # multipart that is not what the service reads
    meta_json = json.dumps(metadata("main-x-g0001", other))
    expect(requests.post(url + "/checkpoints", headers=writer, json={"metadata": meta_json},
                         timeout=30), 415, "multipart")
    expect(requests.post(url + "/checkpoints", headers=writer, data={"metadata": meta_json},
                         timeout=30), 415, "multipart")  # urlencoded
    expect(requests.post(url + "/checkpoints", headers=writer, files={"checkpoint": other},
                         timeout=30), 400, "no 'metadata'")
    expect(requests.post(url + "/checkpoints", headers=writer, data={"metadata": meta_json},
                         files={"blob": blob}, timeout=30), 400, "no 'checkpoint'")
    expect(requests.post(url + "/checkpoints", headers=writer, data={"metadata": meta_json},
                         files={"checkpoint": other, "../../evil": b"x"}, timeout=30), 400,
           "unexpected multipart part")
    expect(requests.post(url + "/checkpoints", headers=writer, data={"metadata": meta_json},
                         files=[("checkpoint", other), ("checkpoint", other)], timeout=30),
           400, "twice")
    prepared = requests.Request("POST", url + "/checkpoints", headers=writer,
                                data={"metadata": meta_json},
                                files={"checkpoint": ("c.zip", other)}).prepare()
    assert isinstance(prepared.body, bytes)
    cut = prepared.body[: prepared.body.rindex(b"--")]  # complete length, no closing boundary
    expect(requests.post(url + "/checkpoints", data=cut, timeout=30, headers={
        **writer, "Content-Type": prepared.headers["Content-Type"]}), 400, "closing boundary")
    expect(requests.post(url + "/checkpoints", data=b"garbage" * 10, timeout=30, headers={
        **writer, "Content-Type": "multipart/form-data; boundary=xyz"}), 400)

    # ------------------------------------------------------------ too large: 413
    big = os.urandom((1 << 20) + 4096)
    expect(upload(srv, writer, metadata("main-big-g0001", big), big), 413, "limit")

    big_req = requests.Request("POST", url, files={"checkpoint": ("c.zip", big + big)}, data={
        "metadata": json.dumps(metadata("main-big-g0001", big + big))}).prepare()
    big_body = big_req.body
    assert isinstance(big_body, bytes)
    r = requests.post(url + "/checkpoints", timeout=60,  # a generator: chunked, no length
                      data=(big_body[i:i + 65536] for i in range(0, len(big_body), 65536)),
                      headers={**writer, "Content-Type": big_req.headers["Content-Type"]})
    expect(r, 413, "limit")
    huge_meta = json.dumps(metadata("main-big-g0001", other, settings={"pad": "x" * (1 << 20)}))
    expect(upload(srv, writer, huge_meta, other), 413)
    expect(requests.post(url + "/matches", headers=writer, timeout=30,
                         json=[match] * 20000), 413, "limit")

    # ------------------------------------------------------------ cut off mid-upload
    body = requests.Request("POST", url + "/checkpoints", headers=writer,
                            data={"metadata": json.dumps(metadata("main-cut-g0001", big[:500_000]))},
                            files={"checkpoint": ("c.zip", big[:500_000])}).prepare()
    assert isinstance(body.body, bytes)
    head = (f"POST /checkpoints HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\n"
            f"Authorization: {writer['Authorization']}\r\n"
            f"Content-Type: {body.headers['Content-Type']}\r\n"
            f"Content-Length: {len(body.body)}\r\n\r\n").encode()
    for reset in (False, True):
        answer = _cut_off_upload(srv, head, body.body, linger_reset=reset)
        assert not answer.startswith((b"HTTP/1.1 2", b"HTTP/1.1 5")), answer[:200]
        _wait_no_temp_files(srv)
        assert temp_files(srv) == []

    # ------------------------------------------------------------ matches refused
    bad_batches = [
        ([match, {**match, "result": "victory"}], 422, "1"),
        ([match, {**match, "a": "cpu:1"}], 400, "match 1"),  # a against itself
        ([{**match, "time": "soon"}], 422, "time"),
        ([{k: v for k, v in match.items() if k != "a"}], 422, "a"),
        ([{**match, "a": "x/../y"}], 422, "'/'"),
        ([{**match, "a": "x\x00"}], 422, "control"),
        ([{**match, "source": "s\x00"}], 422, "NUL"),
        ([{**match, "ticks": -1}], 422, "ticks"),
        ([{**match, "ticks": 2**70}], 422, "ticks"),
        ([match, 5], 422, ""), ({"time": 1}, 422, ""),
    ]
    for batch, status, text_ in bad_batches:
        r = requests.post(url + "/matches", headers=writer, json=batch, timeout=30)
        assert r.status_code == status, (batch, r.text)
        assert text_.lower() in json.dumps(r.json()["detail"]).lower(), (batch, r.json())
    for raw in (b"[{", b'[{"time": NaN, "a": "x", "b": "y", "result": "win"}]', b"\xff\xfe",
                b"[" * 100_000):
        r = requests.post(url + "/matches", data=raw, timeout=30,
                          headers={**writer, "Content-Type": "application/json"})
        assert r.status_code in (400, 422), (raw[:20], r.text)

    # ------------------------------------------------------------ unknown ids, path-like names
    for path in ("/checkpoints/main-nope-g0001", "/checkpoints/main-nope-g0001/checkpoint",
                 "/checkpoints/main-nope-g0001/blob", "/roles/league_exploiter/newest", "/active"):
        expect(requests.get(url + path, headers=reader, timeout=30), 404)
    for what in ("activate", "disable"):
        expect(requests.post(f"{url}/checkpoints/main-nope-g0001/{what}", headers=admin,
                             timeout=30), 404)
    expect(requests.get(url + "/roles/king/newest", headers=reader, timeout=30), 400, "role")
    # ("." and ".." as such never arrive: HTTP clients resolve them; their encoded forms do)
    for name in (".hidden", "..%2F..%2Fetc%2Fpasswd", "%2e%2e", "%2E", "a%5Cb", "a%00b",
                 "a%0Ab", "x%2Fy", "x" * 201):
        for suffix in ("", "/checkpoint", "/blob"):
            r = requests.get(f"{url}/checkpoints/{name}{suffix}", headers=reader, timeout=30)
            assert r.status_code in (400, 404, 422), (name, suffix, r.status_code, r.text)
        r = requests.post(f"{url}/checkpoints/{name}/activate", headers=admin, timeout=30)
        assert r.status_code in (400, 404, 405, 422), (name, r.status_code)
    for params in ({"status": "gone"}, {"generation": "x"}, {"generation": 2**40},
                   {"location": "a\x00"}, {"role": "r\x00"}):
        r = requests.get(url + "/checkpoints", params=params, headers=reader, timeout=30)
        assert r.status_code in (400, 422), (params, r.text)
    for params in ({"since": "nan"}, {"since": "inf"}, {"k": "-1"}, {"bootstrap": 5000},
                   {"initial": "inf"}, {"seed": -1}):
        path = "/matches" if "since" in params else "/ratings"
        r = requests.get(url + path, params=params, headers=reader, timeout=30)
        assert r.status_code == 422, (params, r.text)
    expect(requests.get(f"{url}/checkpoints/main-ok-g0001/blob", params={"compression": "zip"},
                        headers=reader, timeout=30), 422)

    _wait_no_temp_files(srv)
    assert snapshot(srv) == before
    assert "Traceback" not in srv.log_text() and srv.proc.poll() is None


# ================================================================== concurrency
WRITER = r"""
import hashlib, json, sys
import numpy as np, requests
from brawlkit.export.bpw import Layer, pack_bpw

url, auth, prefix, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
s = requests.Session()
s.headers["Authorization"] = auth
def up(mid, ckpt, blob):
    meta = {"id": mid, "role": "main", "generation": int(mid.rsplit("g", 1)[1]),
            "location": prefix, "checkpoint_sha256": hashlib.sha256(ckpt).hexdigest(),
            "blob_sha256": hashlib.sha256(blob).hexdigest()}
    r = s.post(url + "/checkpoints", data={"metadata": json.dumps(meta)}, timeout=120,
               files={"checkpoint": ("c.zip", ckpt), "blob": ("b.bpw", blob)})
    return r.status_code
def blob(i):  # the same bytes in every writer: content addressing stores it once
    return pack_bpw([Layer(np.full((4, 31), i, np.float32), np.zeros(4, np.float32), 1),
                     Layer(np.ones((6, 4), np.float32), np.zeros(6, np.float32), 0)])
codes = {"shared": up("main-shared-g0001", b"shared checkpoint" * 100, blob(0))}
for i in range(n):
    codes[str(i)] = up(f"main-{prefix}-g{i:04d}", f"{prefix}/{i}".encode() * 200, blob(i))
print(json.dumps(codes))
"""


def test_concurrent_uploads_and_activations(serve: Callable[..., Server], db_url: str) -> None:
    srv = serve()
    writer = get_token(srv, "trainer", add_agent(db_url, "trainer", "write"))
    admin = get_token(srv, "ops", add_agent(db_url, "ops", "admin"))
    n, prefixes = 50, ("w0", "w1", "w2")
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, srv.url, writer["Authorization"],
                               p, str(n)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              cwd=ROOT, text=True) for p in prefixes]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-2000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    for codes in results:
        assert all(codes[str(i)] == 201 for i in range(n)), codes
    # the id all three uploaded, identical: created once, the others got the record
    assert sorted(c["shared"] for c in results) == [200, 200, 201]

    recs = requests.get(f"{srv.url}/checkpoints", headers=writer, timeout=60).json()
    want = {f"main-{p}-g{i:04d}" for p in prefixes for i in range(n)} | {"main-shared-g0001"}
    assert len(recs) == len(want) == 3 * n + 1 and {r["id"] for r in recs} == want
    engine = create_engine(db_url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT COUNT(*) FROM registry_checkpoints")).scalar() == 3 * n + 1
    # one file per distinct content: 150 + 1 checkpoints, 50 blobs (shared by the writers)
    files = store_files(srv)
    referenced = {r["checkpoint_sha256"] for r in recs} | {r["blob_sha256"] for r in recs}
    assert set(files) == referenced and len(files) == 3 * n + 1 + n
    assert all(sha(p.read_bytes()) == name for name, p in files.items())
    assert temp_files(srv) == []

    # 20 activations at once: exactly one checkpoint is active at the end
    targets = sorted(want)[:20]
    barrier = threading.Barrier(len(targets))
    codes: list[int] = []

    def activate(mid: str) -> None:
        barrier.wait()
        r = requests.post(f"{srv.url}/checkpoints/{mid}/activate", headers=admin, timeout=120)
        codes.append(r.status_code)

    threads = [threading.Thread(target=activate, args=(mid,)) for mid in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    assert codes == [200] * len(targets)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT id FROM registry_checkpoints WHERE status = 'active'")).all()
    engine.dispose()
    assert len(rows) == 1 and rows[0][0] in targets
    r = requests.get(f"{srv.url}/active", headers=admin, timeout=30)
    assert r.status_code == 200 and r.json()["id"] == rows[0][0]
    assert len(requests.get(f"{srv.url}/checkpoints", params={"status": "active"},
                            headers=admin, timeout=30).json()) == 1


# ================================================================== migration
def test_a_version_1_database_opens_and_upgrades(serve: Callable[..., Server], db_url: str,
                                                 tmp_path: Path) -> None:
    """A database as version 1 of the registry left it (its own frozen schema, rows
    written as v1 wrote them, including a duplicate match v1 kept) is opened by this
    service, upgraded to the current schema, and served."""
    from brawlkit.registry.auth import hash_secret
    from brawlkit.registry.database import SCHEMA_VERSION, make_engine, migrate, tables_v1

    engine = make_engine(db_url)
    assert migrate(engine, target=1) == (0, 1)
    v1 = tables_v1(MetaData())
    data = tmp_path / "data"
    ckpt = sb3_zip("v1")
    (data / "blobs" / sha(ckpt)[:2]).mkdir(parents=True)
    (data / "blobs" / sha(ckpt)[:2] / sha(ckpt)).write_bytes(ckpt)
    h = hash_secret("v1-secret")
    m1 = {"time": 5.0, "a": "main-v1-g0001", "b": "cpu:2", "result": "win", "ticks": 300,
          "source": "eval", "received": "2026-01-01T00:00:00+00:00", "received_by": "old"}
    m2 = {**m1, "time": 6.0, "result": "loss"}
    row = {"role": "main", "parent": None, "settings": '{"seed": 1}', "location": "old-box",
           "checkpoint_sha256": sha(ckpt), "checkpoint_size": len(ckpt), "blob_sha256": None,
           "blob_size": None, "uploaded": "2026-01-01T00:00:00+00:00", "uploaded_by": "old"}
    with engine.begin() as conn:
        conn.execute(insert(v1["agents"]).values(id="old", scope="admin", kdf=h.kdf, salt=h.salt,
                                                 secret_hash=h.digest, created="2026-01-01"))
        conn.execute(insert(v1["checkpoints"]), [
            {**row, "id": "main-v1-g0001", "generation": 1, "created": "2026-01-01T00:00:00",
             "status": "active"},
            {**row, "id": "main-v1-g0002", "generation": 2, "created": "2026-01-02T00:00:00",
             "status": "registered"}])
        conn.execute(insert(v1["matches"]), [m1, m1, m2])
    engine.dispose()

    srv = serve(data=data)
    hdr = get_token(srv, "old", "v1-secret")  # a v1 agent still signs in
    assert requests.get(f"{srv.url}/health", timeout=30).json()["schema_version"] == SCHEMA_VERSION
    recs = requests.get(f"{srv.url}/checkpoints", headers=hdr, timeout=30).json()
    assert [r["id"] for r in recs] == ["main-v1-g0001", "main-v1-g0002"]
    assert recs[0]["settings"] == {"seed": 1} and recs[0]["location"] == "old-box"
    assert requests.get(f"{srv.url}/active", headers=hdr, timeout=30).json()["id"] == "main-v1-g0001"
    r = requests.get(f"{srv.url}/checkpoints/main-v1-g0002/checkpoint", headers=hdr, timeout=30)
    assert r.content == ckpt
    got = requests.get(f"{srv.url}/matches", headers=hdr, timeout=30).json()
    assert len(got) == 2  # the duplicate v1 kept is gone, the order is canonical
    match = {k: m1[k] for k in ("time", "a", "b", "result", "ticks", "source")}
    assert got[0] == match
    assert requests.post(f"{srv.url}/matches", headers=hdr, json=[match],
                         timeout=30).json() == {"accepted": 0, "duplicates": 1}
    assert requests.post(f"{srv.url}/checkpoints/main-v1-g0002/activate", headers=hdr,
                         timeout=30).status_code == 200
    with create_engine(db_url).connect() as conn:
        versions = [r[0] for r in conn.execute(text(
            "SELECT version FROM registry_migrations ORDER BY version"))]
        active = conn.execute(text(
            "SELECT id FROM registry_checkpoints WHERE status = 'active'")).all()
    assert versions == list(range(1, SCHEMA_VERSION + 1)) and len(active) == 1
    srv.stop()

    # a database newer than this code is refused, not misread
    with create_engine(db_url).begin() as conn:
        conn.execute(text("INSERT INTO registry_migrations (version, description, applied) "
                          "VALUES (99, 'from the future', 'later')"))
    with pytest.raises(RuntimeError, match="newer"):
        serve(data=tmp_path / "data-new")


# ================================================================== fuzzing
def test_openapi_fuzzing_finds_no_server_error(serve: Callable[..., Server], db_url: str) -> None:
    """schemathesis against /openapi.json with an admin token: valid and invalid
    requests of every operation, a few hundred in all, none answered with a 5xx."""
    import schemathesis
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis.errors import Unsatisfiable
    from schemathesis import GenerationMode

    srv = serve("--max-upload-mb", "1")
    admin = get_token(srv, "ops", add_agent(db_url, "ops", "admin"))
    ckpt = sb3_zip("fuzz")
    assert upload(srv, admin, metadata("main-fuzz-g0001", ckpt), ckpt).status_code == 201
    schema = schemathesis.openapi.from_url(f"{srv.url}/openapi.json")
    failures: list[str] = []
    statuses: dict[int, int] = {}
    calls = 0
    started = time.monotonic()
    for result in schema.get_all_operations():
        op = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            @settings(max_examples=15, deadline=None, database=None, derandomize=True,
                      phases=[Phase.generate], suppress_health_check=list(HealthCheck))
            @given(case=op.as_strategy(generation_mode=mode))
            def run(case: Any) -> None:
                nonlocal calls
                calls += 1
                r = case.call(base_url=srv.url, headers=dict(admin), timeout=60)
                statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
                if r.status_code >= 500:
                    failures.append(f"{case.method} {case.formatted_path} -> {r.status_code}: "
                                    f"{r.text[:200]}")

            try:
                run()
            except Unsatisfiable:  # nothing to make invalid (e.g. GET /health has no input)
                assert mode == GenerationMode.NEGATIVE, op.label
    elapsed = time.monotonic() - started
    print(f"schemathesis: {calls} requests in {elapsed:.1f} s, statuses {sorted(statuses.items())}")
    assert not failures, failures[:5]
    assert any(200 <= s < 300 for s in statuses) and any(400 <= s < 500 for s in statuses)
    assert 50 <= calls <= 600, calls
    assert elapsed < 120, elapsed
    assert "Traceback" not in srv.log_text()
