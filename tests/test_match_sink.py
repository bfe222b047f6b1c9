"""One record of a match, one writer (docs/league.md, "The match-record rule"; issue 27).

The time window of the match-record rule (a far-future, a far-past and a milliseconds
time are refused naming the field, by the league directory's writer and reader and by
``POST /matches`` with a 422 naming the item and the field), the one sink's time rule
and who-played-as-what fields, and a registry whose database already holds such times
(stored before the rule had its window): ``GET /league``, ``GET /ratings`` and a pull
never fail on them.
"""

from __future__ import annotations

import json
import sqlite3
import warnings
from pathlib import Path

import pytest
import requests
from helpers import RegistryServer, add_agent

from brawlkit.league.directory import LeagueDir, PoolWarning
from brawlkit.league.records import MAX_TIME, MatchRecord
from brawlkit.league.sink import TIME_STEP, MatchSink

GOOD = {"time": 1_796_090_000.0, "a": "cpu:1", "b": "cpu:2", "result": "win", "ticks": 900}
#: far future (finite), milliseconds, far past, the window's end itself
OUTSIDE = (1e308, 1.796e12, -1.0, -1e300, MAX_TIME)


@pytest.mark.parametrize("t", OUTSIDE)
def test_the_rule_refuses_a_time_outside_the_window_naming_the_field(t: float) -> None:
    with pytest.raises(ValueError, match=r"^time .* outside the window"):
        MatchRecord.from_json({**GOOD, "time": t})
    with pytest.raises(ValueError, match="time"):
        MatchRecord.from_line(json.dumps({**GOOD, "time": t}))


def test_the_writer_refuses_and_the_reader_skips_a_time_outside_the_window(tmp_path: Path) -> None:
    league = LeagueDir(tmp_path / "league")
    with league.writer("test") as w, pytest.raises(ValueError, match="outside the window"):
        w.write(MatchRecord(time=1e12, a="cpu:1", b="cpu:2", result="win"))
    log = league.matches_dir / "hand.jsonl"
    log.write_text("".join(json.dumps({**GOOD, "time": t}) + "\n" for t in (*OUTSIDE, GOOD["time"])))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PoolWarning)
        got = league.matches()
    assert [m.time for m in got] == [GOOD["time"]]
    said = [str(w.message) for w in caught]
    assert len(said) == len(OUTSIDE) and all("hand.jsonl: line" in s and "time" in s for s in said)


def test_the_sink_stamps_distinct_times_and_says_who_played_as_what(tmp_path: Path) -> None:
    league = LeagueDir(tmp_path / "league")
    with MatchSink(league, "eval") as sink:
        t = 1_796_090_000.0
        recs = sink.records([{"b": "cpu:3", "result": "win", "ticks": 10, "seed": 7, "time": t},
                             {"b": "cpu:3", "result": "win", "ticks": 10, "seed": 8, "time": t},
                             {"b": "cpu:3", "result": "loss", "ticks": 20, "seed": 9,
                              "time": t - 5, "a_policy": "sampled"}], a="main-r-g0001")
        sink.write(recs)
        with pytest.raises(ValueError, match="a_policy"):
            sink.record("main-r-g0001", "cpu:1", "win", 5, a_policy="noisy")
        with pytest.raises(ValueError, match="seed"):
            sink.record("main-r-g0001", "cpu:1", "win", 5, seed=-1)
    times = [r.time for r in recs]
    assert times == sorted(times) and len(set(times)) == 3 and times[1] - times[0] >= TIME_STEP
    assert [r.seed for r in recs] == [9, 7, 8]  # in the order they ended
    assert [(r.a_policy, r.b_policy, r.rated) for r in recs] == [
        ("sampled", "fixed", False), ("fixed", "fixed", True), ("fixed", "fixed", True)]
    assert LeagueDir(league.path, create=False).matches() == recs  # read back as written


def test_a_record_of_the_older_shape_keeps_its_json_and_reads_as_it_was_played() -> None:
    """A trainer's episode written before the policy fields: side a was the policy in
    training; its JSON (its identity in a registry) is unchanged by the new fields."""
    old = {"time": 5.0, "a": "main-r-g0001", "b": "cpu:2", "result": "loss", "ticks": 3,
           "source": "train:main"}
    rec = MatchRecord.from_json(old)
    assert (rec.a_policy, rec.b_policy, rec.seed, rec.rated) == ("training", "fixed", None, False)
    assert rec.to_json() == old
    assert MatchRecord.from_json({**old, "source": "eval"}).rated


@pytest.fixture
def registry(tmp_path: Path):
    srv = RegistryServer(f"sqlite:///{tmp_path / 'registry.db'}", tmp_path / "registry-data")
    yield srv
    srv.stop()


def _token(srv: RegistryServer, agent: str, secret: str) -> dict[str, str]:
    tok = requests.post(f"{srv.url}/auth/token", timeout=30,
                        json={"agent_id": agent, "secret": secret}).json()["access_token"]
    return {"Authorization": f"Bearer {tok}"}


@pytest.mark.servers
def test_the_registry_refuses_such_times_and_never_fails_on_stored_ones(registry, tmp_path: Path) -> None:
    from brawlkit.registry.client import RegistryClient

    secret = add_agent(registry.db_url, "boss", "admin")
    auth = _token(registry, "boss", secret)
    for t in (1e308, 1.796e12, -1e300):
        r = requests.post(f"{registry.url}/matches", headers=auth, timeout=30,
                          json=[GOOD, {**GOOD, "time": t, "ticks": 1}])
        assert r.status_code == 422, r.text
        (err,) = r.json()["detail"]
        assert err["loc"][-2:] == [1, "time"] and "outside the window" in err["msg"], err
    assert requests.post(f"{registry.url}/matches", headers=auth, timeout=30,
                         json=[GOOD]).status_code == 200

    # times a service stored before the rule had its window: far future and far past
    db = sqlite3.connect(tmp_path / "registry.db")
    for t, digest in ((1e308, "f" * 64), (-1e300, "e" * 64)):
        db.execute("INSERT INTO registry_matches (time, a, b, result, ticks, source, received, "
                   "received_by, digest) VALUES (?, 'cpu:2', 'cpu:1', 'win', 5, 'old', "
                   "'2026-01-01', 'boss', ?)", (t, digest))
    db.commit()
    db.close()

    page = requests.get(f"{registry.url}/league", headers=auth, timeout=30)
    assert page.status_code == 200, page.text[-2000:]
    assert "1e+308 (outside" in page.text and "-1e+300 (outside" in page.text
    ratings = requests.get(f"{registry.url}/ratings", headers=auth, timeout=30)
    assert ratings.status_code == 200 and ratings.json()["matches"] == 3
    client = RegistryClient(registry.url, "boss", secret, cache_dir=tmp_path / "cache")
    with pytest.warns(UserWarning, match="registry match .* skipped: time"):
        pulled = client.matches()
    assert [m.time for m in pulled] == [GOOD["time"]]
