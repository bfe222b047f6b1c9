"""Leagues on two machines sharing one registry, the way users run them: real
``python -m brawlkit train --league-dir ... --registry URL`` processes against a real
``registry serve``, each "machine" a league directory and runs root of its own.

What must hold (docs/registry.md): every generation of both locations reaches the
registry; each location trains against the other's members (downloaded, verified);
a disabled member leaves every pool; a fresh machine resumes a role from the
registry; a registry that is down costs a run nothing, and what it could not push
goes out later with ``registry push``; the registry's ratings equal the local ones
over the same matches.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, RegistryServer, add_agent

from brawlkit.league.directory import LeagueDir
from brawlkit.league.ratings import league_table

pytestmark = [pytest.mark.training, pytest.mark.servers]

#: two tiny generations of full matches (action repeat 8 halves their steps)
TINY = ["--generations", "2", "--steps-per-generation", "2048", "--n-envs", "2", "--n-steps", "256",
        "--batch-size", "128", "--n-epochs", "1", "--action-repeat", "8", "--eval-levels", "1",
        "--eval-episodes", "1", "--no-progress"]


def _env(tmp: Path, agent: str, secret: str, **extra: str) -> dict[str, str]:
    return {**os.environ, "BRAWLKIT_AGENT_ID": agent, "BRAWLKIT_AGENT_SECRET": secret,
            "BRAWLKIT_REGISTRY_CACHE": str(tmp / f"cache-{agent}"), **extra}


def _brawlkit(env: dict[str, str], *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([sys.executable, "-m", "brawlkit", *args], capture_output=True, text=True,
                       timeout=timeout, cwd=ROOT, env=env)
    assert r.returncode == 0, f"{args[:2]} failed:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    return r


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def registry(tmp_path: Path):
    srv = RegistryServer(f"sqlite:///{tmp_path / 'registry.db'}", tmp_path / "registry-data")
    yield srv
    srv.stop()


def test_two_locations_share_a_league_through_the_registry(registry, tmp_path: Path) -> None:
    db = registry.db_url
    env_a = _env(tmp_path, "site-a", add_agent(db, "site-a", "write"))
    env_b = _env(tmp_path, "site-b", add_agent(db, "site-b", "write"))
    env_admin = _env(tmp_path, "boss", add_agent(db, "boss", "admin"))
    url = registry.url
    a, b = tmp_path / "a", tmp_path / "b"

    # machine A trains Main; machine B then trains a Main Exploiter against A's Mains
    _brawlkit(env_a, "train", "--role", "main", "--league-dir", str(a / "league"),
              "--runs-root", str(a / "runs"), "--registry", url, "--location", "site-a", *TINY)
    _brawlkit(env_b, "train", "--role", "main_exploiter", "--league-dir", str(b / "league"),
              "--runs-root", str(b / "runs"), "--registry", url, "--location", "site-b", *TINY)

    listed = json.loads(_brawlkit(env_a, "registry", "list", "--url", url, "--json")
                        .stdout.splitlines()[-1])
    by_id = {r["id"]: r for r in listed}
    mains = sorted(i for i, r in by_id.items() if r["role"] == "main")
    exploiters = sorted(i for i, r in by_id.items() if r["role"] == "main_exploiter")
    assert len(mains) == 2 and len(exploiters) == 2, listed
    assert {by_id[i]["location"] for i in mains} == {"site-a"}
    assert {by_id[i]["location"] for i in exploiters} == {"site-b"}

    # B adopted A's Mains: the same bytes as uploaded, and played them
    pool_b = LeagueDir(b / "league", create=False)
    for mid in mains:
        m = pool_b.member(mid)
        assert _sha(pool_b.blob_path(m)) == by_id[mid]["blob_sha256"]
        assert _sha(pool_b.checkpoint_path(m)) == by_id[mid]["checkpoint_sha256"]
    vs_a = [r for r in pool_b.matches() if r.a in exploiters and r.b in mains]
    assert vs_a, "the Main Exploiter never met a Main from the other location"

    # A pulls B's work; both stores then rate the same matches the same
    out = _brawlkit(env_a, "registry", "pull", "--url", url, "--league-dir", str(a / "league"))
    assert "pulled 2 member(s)" in out.stdout, out.stdout
    pool_a = LeagueDir(a / "league", create=False)
    assert set(exploiters) <= {m.id for m in pool_a.members()}
    # pulled through the one match writer as they were played: B's training episodes
    # (never rated) and its evaluations (each with its seed), the same records as B's
    theirs = [r for r in pool_a.matches() if r.a in exploiters]
    assert {(r.source, r.a_policy) for r in theirs} >= {("train:main_exploiter", "training"),
                                                        ("eval", "fixed"), ("eval", "sampled")}
    assert all(r.seed is not None for r in theirs if r.source == "eval")
    assert set(theirs) == {r for r in pool_b.matches() if r.a in exploiters}
    local = {r["id"]: r for r in league_table(pool_a.members(), pool_a.matches(),
                                               bootstrap=0)["members"]}
    remote = {r["id"]: r for r in json.loads(
        _brawlkit(env_a, "registry", "ratings", "--url", url, "--json").stdout)["members"]}
    assert set(local) == set(remote)
    for mid, row in local.items():
        assert (row["rating"], row["games"]) == (remote[mid]["rating"], remote[mid]["games"]), mid

    # an admin disables A's first Main: it leaves the pool every trainee samples from
    assert "disabled" in _brawlkit(env_admin, "registry", "disable", mains[0], "--url", url).stdout
    _brawlkit(env_b, "train", "--role", "main_exploiter", "--league-dir", str(b / "league"),
              "--runs-root", str(b / "runs"), "--registry", url, "--location", "site-b",
              "--resume", *TINY[:1], "1", *TINY[2:])
    new = max((m for m in LeagueDir(b / "league", create=False).members()
               if m.role == "main_exploiter"), key=lambda m: m.generation)
    assert new.generation == 2
    played = {r.b for r in pool_b.matches() if r.a == new.id}
    assert mains[0] not in played and mains[1] in played, played
    # a writer may not disable: 403, said plainly
    r = subprocess.run([sys.executable, "-m", "brawlkit", "registry", "disable", mains[1],
                        "--url", url], capture_output=True, text=True, env=env_a, cwd=ROOT)
    assert r.returncode == 1 and "403" in r.stderr, r.stderr

    # a fresh machine C resumes Main from the registry: its next generation continues A's ids
    c = tmp_path / "c"
    _brawlkit(env_a, "train", "--role", "main", "--league-dir", str(c / "league"),
              "--runs-root", str(c / "runs"), "--registry", url, "--location", "site-c",
              "--resume", *TINY[:1], "1", *TINY[2:])
    run_name = mains[-1][len("main-"):-len("-g0001")]
    assert (c / "runs" / "main" / run_name / "gen_0002.zip").is_file()
    resumed = json.loads(_brawlkit(env_a, "registry", "list", "--url", url, "--role", "main",
                                   "--json").stdout.splitlines()[-1])
    g2 = [r for r in resumed if r["generation"] == 2]
    assert len(g2) == 1 and g2[0]["id"] == f"main-{run_name}-g0002"
    assert g2[0]["parent"] == mains[-1] and g2[0]["location"] == "site-c"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_registry_that_is_down_costs_the_run_nothing(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{_free_port()}"
    db = f"sqlite:///{tmp_path / 'registry.db'}"
    from brawlkit.registry.database import RegistryDB

    RegistryDB(db).close()  # create the schema so the agent can be added before serving
    env = _env(tmp_path, "site-a", add_agent(db, "site-a", "write"),
               BRAWLKIT_REGISTRY_RETRIES="1")
    league = tmp_path / "league"
    r = subprocess.run([sys.executable, "-m", "brawlkit", "train", "--role", "main", "--league-dir",
                        str(league), "--runs-root", str(tmp_path / "runs"), "--registry", dead,
                        *TINY], capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "unreachable" in r.stderr and "registry push" in r.stderr, r.stderr[-3000:]
    pool = LeagueDir(league, create=False)
    trained = [m for m in pool.members() if not m.permanent]
    assert len(trained) == 2

    srv = RegistryServer(db, tmp_path / "registry-data")
    try:
        out = _brawlkit(env, "registry", "push", "--url", srv.url, "--league-dir", str(league))
        n_matches = len(pool.matches())
        assert f"pushed 2 member(s) and {n_matches} new match(es)" in out.stdout, out.stdout
        again = _brawlkit(env, "registry", "push", "--url", srv.url, "--league-dir", str(league))
        assert "pushed 0 member(s) and 0 new match(es)" in again.stdout  # idempotent
        listed = json.loads(_brawlkit(env, "registry", "list", "--url", srv.url, "--json")
                            .stdout.splitlines()[-1])
        assert sorted(r["id"] for r in listed) == sorted(m.id for m in trained)
    finally:
        srv.stop()
