"""Rough edges a new user met (issue 23), each held by a test that fails on the old code:

* ``league run`` reports why a child failed (the last error line of its log), not only
  ``no generation finished``;
* its progress display is plain lines when output is not a terminal, and the bar's
  postfix keeps every level's rates;
* ``python -m brawlkit elo ... | head`` ends quietly (no BrokenPipeError traceback);
* ``policy play --vs`` takes every documented opponent form;
* a second league directory registering under the same location is warned about.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, Listening, RegistryServer, add_agent, last_json

from brawlkit.league.directory import LeagueDir
from brawlkit.league.records import Member
from brawlkit.training import league_run

GEN_LINE = ("gen 3: steps 400000 win rate deterministic/sampled cpu_1=1.00/0.96 "
            "cpu_3=0.84/0.80 cpu_5=0.12/0.20 max_level=4")


def test_league_run_names_the_reason_a_child_failed(tmp_path: Path) -> None:
    """A role that dies for want of registry credentials: its line says so (the old
    one said ``main: exit 2; last: no generation finished`` and nothing else), and
    nothing on stderr is a carriage-return progress bar (stderr is a pipe here)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("BRAWLKIT_AGENT_ID", "BRAWLKIT_AGENT_SECRET")}
    r = subprocess.run([sys.executable, "-m", "brawlkit", "league", "run", "--league-dir",
                        str(tmp_path / "league"), "--roles", "main", "--runs-root",
                        str(tmp_path / "runs"), "--", "--registry", "http://127.0.0.1:9",
                        "--generations", "1"], capture_output=True, text=True, cwd=ROOT,
                       env=env, timeout=300)
    assert r.returncode == 2, r.stderr
    line = next(x for x in r.stderr.splitlines() if x.startswith("main: exit 2"))
    assert "no generation finished" in line
    assert "error: train: registry http://127.0.0.1:9: no registry credentials" in line, line
    assert "BRAWLKIT_AGENT_ID" in line
    assert "\r" not in r.stderr and "\x1b[" not in r.stderr, r.stderr


class _Child:
    """What ``league_run._read`` reads: a child's stderr."""

    def __init__(self, lines: list[str]) -> None:
        self.stderr = io.StringIO("".join(line + "\n" for line in lines))


def test_progress_is_one_plain_line_per_generation_off_a_terminal(tmp_path: Path) -> None:
    out = io.StringIO()  # not a terminal
    display = league_run.progress_display(["main", "main_exploiter"], 8, out)
    assert isinstance(display, league_run._Lines)
    status: dict[str, str] = {}
    tails: dict[str, list[str]] = {}
    league_run._read(_Child(["loading ...", GEN_LINE]), "main", status,  # type: ignore[arg-type]
                     tmp_path / "main.log", display, tails)
    league_run._read(_Child([GEN_LINE.replace("gen 3", "gen 0")]),  # type: ignore[arg-type]
                     "main_exploiter", status, tmp_path / "me.log", display, tails)
    display.close()
    text = out.getvalue()
    assert "\r" not in text and "\x1b[" not in text
    lines = text.splitlines()
    assert lines[0] == "league: training main, main_exploiter (8 generation(s) each)"
    assert lines[1] == ("league: main gen 4/8 done: win det/sampled L1 1.00/0.96 L3 0.84/0.80 "
                        "L5 0.12/0.20 | max level 4")
    assert lines[2].startswith("league: main_exploiter gen 1/8 done: win det/sampled L1 1.00/0.96")
    assert len(lines) == 3
    assert (tmp_path / "main.log").read_text().splitlines() == ["loading ...", GEN_LINE]
    assert league_run.last_error(tails["main"]) == "loading ..."


def test_the_bar_postfix_keeps_every_rate() -> None:
    """The old postfix was the last 60 characters: ``stic/sampled cpu_1=...`` with the
    first level's rates cut."""
    post = league_run.postfix(GEN_LINE.split(" ", 4)[4])
    assert post.startswith("win det/sampled L1 1.00/0.96")
    for rate in ("1.00/0.96", "0.84/0.80", "0.12/0.20"):
        assert rate in post
    assert "stic/sampled" not in post


def test_elo_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    """``elo | head``: the reader is gone before elo writes.  No traceback, no
    "Exception ignored" at exit; the status a shell shows for SIGPIPE (141)."""
    LeagueDir(tmp_path / "league")
    p = subprocess.Popen([sys.executable, "-m", "brawlkit", "elo", "--league-dir",
                          str(tmp_path / "league")], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=ROOT)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()  # before elo has imported numpy, let alone printed
    err = p.stderr.read().decode()
    p.wait(timeout=60)
    assert err == "", err
    assert p.returncode == 141
    # and in a real shell pipe
    r = subprocess.run(f"{sys.executable} -m brawlkit elo --league-dir {tmp_path / 'league'} "
                       "| head -n 1", shell=True, capture_output=True, text=True, cwd=ROOT,
                       timeout=60)
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr, r.stderr
    assert r.stdout.startswith("0 matches")


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("move_ep")
    srv = Listening([sys.executable, str(ROOT / "examples" / "move_clients" / "random_server.py"),
                     "--port", "0", "--policy", "scripted", "--member", "scripted-v1"],
                    tmp / "ep.log")
    yield srv
    srv.stop()


@pytest.mark.servers  # policy play starts a game server
def test_policy_play_takes_every_documented_opponent_form(endpoint: Any, tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from test_botpool import _blob

    bpw = tmp_path / "main-x-g0001.bpw"
    bpw.write_bytes(_blob(1))
    league = tmp_path / "league"
    for vs, want in (("baseline", "baseline"), (str(bpw), "main-x-g0001"), ("cpu:2", "cpu:2")):
        r = subprocess.run([sys.executable, "-m", "brawlkit", "policy", "play", "--endpoint",
                            endpoint.url, "--vs", vs, "--max-ticks", "240", "--json"],
                           capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        res = last_json(r.stdout)
        assert res["opponent"] == want and res["matches"][0]["ticks"] == 240, res
    # a finished match against a file is recorded under the file's name
    r = subprocess.run([sys.executable, "-m", "brawlkit", "policy", "play", "--endpoint",
                        endpoint.url, "--vs", str(bpw), "--league-dir", str(league), "--json"],
                       capture_output=True, text=True, cwd=ROOT, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    (m,) = LeagueDir(league, create=False).matches()
    assert (m.a, m.b) == ("scripted-v1", "main-x-g0001")
    for bad, why in (("robot", "cpu:L (L in 1..8), baseline, member:ID, endpoint:URL or a "
                               ".bpw / .zip file"),
                     (str(tmp_path / "nope.bpw"), "no such policy file")):
        r = subprocess.run([sys.executable, "-m", "brawlkit", "policy", "play", "--endpoint",
                            endpoint.url, "--vs", bad], capture_output=True, text=True, cwd=ROOT,
                           timeout=60)
        assert r.returncode == 2 and why in r.stderr, r.stderr
        assert "callable" not in r.stderr


@pytest.mark.servers  # a registry service
def test_a_second_league_directory_under_the_same_location_is_warned_about(tmp_path: Path) -> None:
    from brawlkit.registry.client import RegistryClient
    from brawlkit.registry.sync import LocationClash, RegistrySync

    srv = RegistryServer(f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "r-data")
    try:
        client = RegistryClient(srv.url, "w", add_agent(srv.db_url, "w", "write"),
                                cache_dir=tmp_path / "cache")
        first = LeagueDir(tmp_path / "first")
        ckpt = tmp_path / "c.zip"
        ckpt.write_bytes(b"PK\x05\x06" + bytes(18))
        sys.path.insert(0, str(ROOT / "tests"))
        from test_botpool import _blob

        blob = tmp_path / "b.bpw"
        blob.write_bytes(_blob(0))
        m = first.register(Member(id="main-a-g0000", role="main", generation=0),
                           checkpoint=ckpt, blob=blob)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the league that registered it: no warning
            sync = RegistrySync(client, first, "box")
            assert sync.push(m)
            assert sync.pull() and sync.clash is None

        second = RegistrySync(client, LeagueDir(tmp_path / "second"), "box")
        with pytest.warns(LocationClash, match="location 'box' is used by another league "
                                               r"directory too: 1 checkpoint\(s\)"):
            assert second.pull()
        assert "main-a-g0000" in str(second.clash) and "--location" in str(second.clash)
        other = RegistrySync(client, LeagueDir(tmp_path / "third"), "box2")  # its own location
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert other.pull() and other.clash is None
        # the CLI says it too
        env = {**os.environ, "BRAWLKIT_AGENT_ID": "w", "BRAWLKIT_AGENT_SECRET": client._secret,
               "BRAWLKIT_REGISTRY_CACHE": str(tmp_path / "cache")}
        r = subprocess.run([sys.executable, "-m", "brawlkit", "registry", "push", "--league-dir",
                            str(tmp_path / "fourth"), "--location", "box", "--url", srv.url],
                           capture_output=True, text=True, cwd=ROOT, env=env, timeout=60)
        assert r.returncode == 0 and "used by another league directory" in r.stderr, r.stderr
    finally:
        srv.stop()


@pytest.mark.servers  # a registry service and policy play's game server
def test_policy_play_vs_active_follows_registry_activate(endpoint: Any, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """``--vs active``: the registry's active checkpoint, fetched at the start (LZ4 on the
    wire) and looked up again before each match."""
    from brawlkit.policy_server.player import ActiveOpponent
    from brawlkit.registry.client import RegistryClient

    sys.path.insert(0, str(ROOT / "tests"))
    from test_botpool import _blob

    srv = RegistryServer(f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "r-data")
    try:
        admin = RegistryClient(srv.url, "boss", add_agent(srv.db_url, "boss", "admin"),
                               cache_dir=tmp_path / "cache-boss")
        ckpt = tmp_path / "c.zip"
        ckpt.write_bytes(b"PK\x05\x06" + bytes(18))
        for g in range(2):
            blob = tmp_path / f"b{g}.bpw"
            blob.write_bytes(_blob(g))
            admin.upload(Member(id=f"main-a-g000{g}", role="main", generation=g), ckpt, blob)
        admin.activate("main-a-g0000")
        env = {**os.environ, "BRAWLKIT_AGENT_ID": "viewer",
               "BRAWLKIT_AGENT_SECRET": add_agent(srv.db_url, "viewer", "read"),
               "BRAWLKIT_REGISTRY_CACHE": str(tmp_path / "cache")}
        r = subprocess.run([sys.executable, "-m", "brawlkit", "policy", "play", "--endpoint",
                            endpoint.url, "--vs", "active", "--registry", srv.url,
                            "--max-ticks", "120", "--json"], capture_output=True, text=True,
                           cwd=ROOT, env=env, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert last_json(r.stdout)["opponent"] == "main-a-g0000"

        for k in ("BRAWLKIT_AGENT_ID", "BRAWLKIT_AGENT_SECRET", "BRAWLKIT_REGISTRY_CACHE"):
            monkeypatch.setenv(k, env[k])
        follow = ActiveOpponent(srv.url)
        first, first_id = follow.current()
        assert first_id == "main-a-g0000" and follow.current()[0] is first  # fetched once
        admin.activate("main-a-g0001")
        second, second_id = follow.current()  # what happens before the next match
        assert second_id == "main-a-g0001" and second is not first
        r = subprocess.run([sys.executable, "-m", "brawlkit", "policy", "play", "--endpoint",
                            endpoint.url, "--vs", "active"], capture_output=True, text=True,
                           cwd=ROOT, timeout=60)
        assert r.returncode == 2 and "needs --registry" in r.stderr
    finally:
        srv.stop()
