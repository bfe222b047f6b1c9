"""The registry's league page (``GET /league``), its pieces (drift lines from each
member's first match, a colour per CPU level, a legend of what is present, the
cookie-signed "ratings JSON" link, the sign-in hint) and the whole page in a real
headless browser: Debian's
``chromium`` driven by Playwright (``executable_path``: no browser download), against a
real ``registry serve`` on 127.0.0.1 with a SQLite file.

Signed in through the page's own form, the leaderboard's rows are the rows of
``GET /ratings`` (same ids, same order, same Elo, BT and games), the Elo-drift chart
renders one line per member that played (non-empty boxes in the laid-out page), the
active checkpoint is marked, and a download link clicked in the browser delivers the
member's blob (its sha256 is the record's).  ``BRAWLKIT_LEAGUE_SCREENSHOT=FILE`` keeps
the page's screenshot (how docs/img/league_page.png is made).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import requests
from helpers import RegistryServer, add_agent

from brawlkit.export import bpw as ex
from brawlkit.league.records import MatchRecord, Member

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
#: the browser test's one reason to skip
NO_CHROMIUM = ("Debian's chromium is not installed (make sysdeps installs it as root: "
               "apt-get install chromium)")


def _blob(seed: int) -> bytes:
    rng = np.random.default_rng(seed)

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.1).astype(np.float32)

    return ex.pack_bpw([ex.Layer(w(8, 31), w(8), ex.ACT_TANH), ex.Layer(w(6, 8), w(6), ex.ACT_NONE)],
                       ex.PolicyMeta(4, 1, ""))


@pytest.fixture
def league_registry(tmp_path: Path):
    """A registry with a lineage per role (main g0 -> g1 -> g2, one of each exploiter),
    60 matches among them and the CPU, main g1 active."""
    from brawlkit.registry.client import RegistryClient

    srv = RegistryServer(f"sqlite:///{tmp_path / 'registry.db'}", tmp_path / "registry-data")
    try:
        admin = RegistryClient(srv.url, "boss", add_agent(srv.db_url, "boss", "admin"),
                               cache_dir=tmp_path / "cache")
        members = []
        parent: str | None = None
        for g in range(3):
            members.append(Member(id=f"main-r-g{g:04d}", role="main", generation=g, parent=parent,
                                  created=f"2026-12-01T03:0{g}:00+00:00"))
            parent = members[-1].id
        members.append(Member(id="main_exploiter-r-g0000", role="main_exploiter", generation=0,
                              created="2026-12-01T03:04:00+00:00"))
        members.append(Member(id="league_exploiter-r-g0000", role="league_exploiter",
                              generation=0, created="2026-12-01T03:05:00+00:00"))
        for i, m in enumerate(members):
            ckpt, blob = tmp_path / f"{m.id}.zip", tmp_path / f"{m.id}.bpw"
            ckpt.write_bytes(b"PK\x05\x06" + bytes(18))
            blob.write_bytes(_blob(i))
            admin.upload(m, ckpt, blob, location="test")
        rng = np.random.default_rng(0)
        ids = [m.id for m in members] + ["cpu:3"]
        matches = []
        for i in range(60):
            a, b = rng.choice(len(ids), 2, replace=False)
            matches.append(MatchRecord(time=1796090000.0 + i, a=ids[a], b=ids[b],
                                       result=str(rng.choice(["win", "loss", "draw"])),
                                       ticks=int(rng.integers(100, 9000)), source="test",
                                       seed=i))
        # cpu:1 and cpu:5 join late (their first matches are 60..69), and main g2 has
        # training episodes: in the log, not rated
        for i in range(10):
            matches.append(MatchRecord(time=1796090100.0 + i, a="cpu:5", b="cpu:1",
                                       result="win", ticks=3000 + i, source="ladder:t", seed=i))
            matches.append(MatchRecord(time=1796090200.0 + i, a="main-r-g0002", b="cpu:3",
                                       result="loss", ticks=500 + i, source="train:main"))
        admin.post_matches(matches)
        admin.activate("main-r-g0001")
        yield srv, admin, add_agent(srv.db_url, "viewer", "read")
    finally:
        srv.stop()


def test_drift_lines_start_at_a_members_first_match_and_colours_are_per_level() -> None:
    from brawlkit.registry.league_page import (
        CPU_COLOURS,
        ROLE_COLOURS,
        _colour,
        drift_series,
        legend,
    )

    log = [MatchRecord(time=float(i), a="cpu:2", b="cpu:3", result="loss", seed=i) for i in range(5)]
    log += [MatchRecord(time=10.0 + i, a="main-r-g0001", b="cpu:2", result="win", seed=9 + i)
            for i in range(3)]
    log.insert(2, MatchRecord(time=1.5, a="main-r-g0001", b="cpu:3", result="loss",
                              source="train:main"))  # training: not rated, draws nothing
    series = drift_series(log, ["cpu:2", "cpu:3", "main-r-g0001"], 32.0, 1200.0)
    assert series["cpu:2"][0] == (0, 1200.0)
    assert series["main-r-g0001"][0] == (6, 1200.0)  # joins at its first rated match
    assert [i for i, _ in series["main-r-g0001"]] == [6, 7, 8, 9]
    anchored = drift_series(log, ["cpu:2", "cpu:3", "main-r-g0001"], 32.0, 1200.0,
                            anchor=("cpu:2", 1000.0))
    assert anchored["cpu:2"][-1][1] == pytest.approx(1000.0)
    assert anchored["main-r-g0001"][0][1] == pytest.approx(1200.0 + 1000.0 - series["cpu:2"][-1][1])

    rows = [{"id": f"cpu:{lv}", "kind": "cpu", "role": "cpu"} for lv in (1, 3, 8)]
    rows.append({"id": "main-r-g0001", "kind": "bot", "role": "main"})
    colours = [_colour(r) for r in rows]
    assert len(set(colours)) == 4 and colours[:3] == [CPU_COLOURS[r["id"]] for r in rows[:3]]
    shown = legend(rows)
    assert [k for k in ("main", "cpu:1", "cpu:3", "cpu:8") if f'data-key="{k}"' in shown] == \
        ["main", "cpu:1", "cpu:3", "cpu:8"]
    assert "human" not in shown and "baseline" not in shown and "cpu:2" not in shown
    assert legend([*rows, {"id": "player:al", "kind": "human", "role": "?"}]).count(
        'data-key="human"') == 1
    assert ROLE_COLOURS["human"] not in colours


def test_an_empty_league_says_so_and_everything_is_escaped() -> None:
    """No matches and no checkpoints: the page says so instead of drawing empty frames;
    text that reaches the HTML is escaped (the id rule keeps '<' out of real ids: the
    page does not count on it)."""
    from brawlkit.registry.league_page import drift_svg, render_page

    table = {"members": [{"id": "cpu:1<script>", "role": "cpu", "kind": "cpu", "generation": 0,
                          "rating": 1200.0, "games": 0, "wins": 0, "draws": 0, "losses": 0,
                          "win_rate": None, "bt_rating": 1200.0, "bt_lo": None, "bt_hi": None}],
             "matches": 0, "k": 32.0, "initial": 1200.0, "bootstrap": 0, "seed": 0}
    html = render_page(table, [], [], None, "viewer<b>", drift_svg({}, {}, 0))
    assert "<script>" not in html and "cpu:1&lt;script&gt;" in html and "viewer&lt;b&gt;" in html
    assert 'id="elo-drift-empty"' in html and "No checkpoints registered yet" in html
    assert "No checkpoint is active" in html and "No matches yet." in html
    assert 'id="legend"' not in html  # nothing drawn, nothing to explain


@pytest.mark.servers
def test_the_ratings_json_link_and_the_sign_in_hint_without_a_browser(league_registry) -> None:
    """The page's own path as a browser takes it, with plain HTTP: the form, the cookie,
    then the "ratings JSON" link of the page (401 before this link existed: the cookie
    never reaches ``/ratings``)."""
    srv, admin, viewer_secret = league_registry
    s = requests.Session()
    form = s.get(f"{srv.url}/league", timeout=30)
    assert form.status_code == 401 and "--data DATA" in form.text and "--db URL" in form.text
    r = s.post(f"{srv.url}/league/login", data={"agent_id": "viewer", "secret": viewer_secret},
               timeout=30)
    assert r.status_code == 200 and 'id="leaderboard"' in r.text
    link = re.search(r'<a id="ratings-json" href="([^"]+)"', r.text)
    assert link is not None
    got = s.get(srv.url + link.group(1), timeout=30)
    assert got.status_code == 200, got.text
    token = requests.post(f"{srv.url}/auth/token", timeout=30, json={
        "agent_id": "viewer", "secret": viewer_secret}).json()["access_token"]
    want = requests.get(f"{srv.url}/ratings", timeout=30,
                        headers={"Authorization": f"Bearer {token}"}).json()
    assert got.json() == want
    assert requests.get(srv.url + link.group(1), timeout=30).status_code == 401  # no cookie
    rows = {x["id"]: x for x in want["members"]}
    assert rows["main-r-g0002"]["unrated"] == 10 and want["rated_matches"] == 70
    assert want["anchor"] == {"id": "cpu:1", "rating": 1000.0}


@pytest.mark.servers
@pytest.mark.timeout(180)
@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_the_league_page_in_a_browser(league_registry, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    from brawlkit.registry.client import RegistryClient

    srv, admin, viewer_secret = league_registry
    viewer = RegistryClient(srv.url, "viewer", viewer_secret, cache_dir=tmp_path / "cache-v")
    want = viewer.ratings()  # what GET /ratings gives this reader
    assert requests.get(f"{srv.url}/league/blob/main-r-g0000", timeout=10).status_code == 401

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM,
                                     args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900},
                                    accept_downloads=True)
            first = page.goto(f"{srv.url}/league")
            assert first is not None and first.status == 401  # not signed in: the form
            page.fill("input[name=agent_id]", "viewer")
            page.fill("input[name=secret]", "wrong")
            page.click("button[type=submit]")
            assert "wrong secret" in page.inner_text("#login-error")
            page.fill("input[name=agent_id]", "viewer")
            page.fill("input[name=secret]", viewer_secret)
            page.click("button[type=submit]")
            page.wait_for_selector("#leaderboard")

            rows = page.locator("#leaderboard tbody tr")
            got = [{"id": rows.nth(i).get_attribute("data-id"),
                    "elo": rows.nth(i).locator("td.elo").inner_text(),
                    "cells": rows.nth(i).locator("td").all_inner_texts()}
                   for i in range(rows.count())]
            assert [g["id"] for g in got] == [r["id"] for r in want["members"]]
            for g, r in zip(got, want["members"], strict=True):
                assert g["elo"] == f"{r['rating']:.1f}", (g, r)
                cells = g["cells"]
                assert cells[2] == r["kind"] and cells[3] == r["role"]
                assert cells[7] == str(r["games"]) and cells[9] == str(r["unrated"])
                assert cells[5].startswith(f"{r['bt_rating']:.0f}" if r["games"] else "– (no games)")
                if r["bt_lo"] is not None:
                    assert f"[{r['bt_lo']:.0f}, {r['bt_hi']:.0f}]" in cells[5]
                assert ("(few games)" in cells[5]) == (0 < r["games"] < 30)
            assert want["bootstrap"] > 0  # intervals shown (the read cap, not zero)
            bts = [r["bt_rating"] for r in want["members"]]
            assert bts == sorted(bts, reverse=True)  # by the headline

            active = page.locator("#leaderboard tr.active")
            assert active.count() == 1 and active.get_attribute("data-id") == "main-r-g0001"
            assert "main-r-g0001" in page.inner_text("#active")

            # the chart: laid out, one line per member that played, each with a real box
            svg = page.locator("#elo-drift")
            box = svg.bounding_box()
            assert box is not None and box["width"] > 400 and box["height"] > 100
            lines = page.locator("#elo-drift polyline.drift")
            played = {r["id"] for r in want["members"] if r["games"]}
            assert {lines.nth(i).get_attribute("data-member")
                    for i in range(lines.count())} == played
            # each line starts at its member's first match: cpu:1 and cpu:5 joined at 60
            starts = {}
            for i in range(lines.count()):
                pts = lines.nth(i).get_attribute("points").split()
                starts[lines.nth(i).get_attribute("data-member")] = float(pts[0].split(",")[0])
            assert starts["cpu:1"] == starts["cpu:5"] > starts["cpu:3"] + 300
            late = lines.filter(has=page.locator("title", has_text="cpu:1:")).bounding_box()
            assert late is not None and late["x"] > box["x"] + 0.6 * box["width"]
            # a colour per CPU level, and a legend of exactly what is drawn
            stroke = {lines.nth(i).get_attribute("data-member"): lines.nth(i).get_attribute("stroke")
                      for i in range(lines.count())}
            assert len({stroke["cpu:1"], stroke["cpu:3"], stroke["cpu:5"]}) == 3
            keys = page.locator("#legend .legend")
            shown = [keys.nth(i).get_attribute("data-key") for i in range(keys.count())]
            assert shown == ["main", "main_exploiter", "league_exploiter", "cpu:1", "cpu:3", "cpu:5"]
            assert "human" not in page.inner_text("#legend")

            # lineage: main g0 -> g1 -> g2 nested under each other
            chain = page.locator("#lineage ul.lineage li:has(code:text('main-r-g0000')) "
                                 "li:has(code:text('main-r-g0001')) code:text('main-r-g0002')")
            assert chain.count() == 1
            assert page.locator("#recent-matches tbody tr").count() == 25

            # a download link, clicked: the member's blob
            rec = admin.checkpoint("main-r-g0002")
            with page.expect_download() as dl:
                page.click("#leaderboard tr[data-id='main-r-g0002'] a.blob")
            data = Path(dl.value.path()).read_bytes()
            assert hashlib.sha256(data).hexdigest() == rec["blob_sha256"]
            assert dl.value.suggested_filename == "main-r-g0002.bpw"

            # the "ratings JSON" link, clicked by the cookie-signed reader: the table
            with page.expect_response(lambda resp: "ratings.json" in resp.url) as answer:
                page.click("#ratings-json")
            assert answer.value.status == 200 and answer.value.json() == want
            page.go_back()
            page.wait_for_selector("#leaderboard")

            shot = os.environ.get("BRAWLKIT_LEAGUE_SCREENSHOT") or str(tmp_path / "league.png")
            page.screenshot(path=shot, full_page=True)
            assert Path(shot).stat().st_size > 10_000

            # a token link (?token=): becomes the cookie, and the address loses it
            token = requests.post(f"{srv.url}/auth/token", timeout=10, json={
                "agent_id": "viewer", "secret": viewer_secret}).json()["access_token"]
            other = browser.new_page()
            other.goto(f"{srv.url}/league?token={token}")
            other.wait_for_selector("#leaderboard")
            assert other.url == f"{srv.url}/league"
            assert other.locator("#leaderboard tbody tr").count() == len(want["members"])
        finally:
            browser.close()


@pytest.mark.servers
@pytest.mark.timeout(120)
@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_the_screenshot_tool_pushes_a_league_directory_and_captures_its_page(tmp_path: Path) -> None:
    """``python -m brawlkit.tools.league_screenshot`` (how docs/img/league_page.png is
    made from a real ``make train`` league): a league directory's members and matches
    go through ``registry push`` to a throw-away registry, the newest Main becomes
    active, and the signed-in page is saved; a folder that is not a league is refused
    in one line."""
    import subprocess
    import sys

    from brawlkit.league.directory import LeagueDir
    from brawlkit.league.sink import MatchSink

    league = LeagueDir(tmp_path / "league")
    for g in range(2):
        ckpt, blob = tmp_path / f"g{g}.zip", tmp_path / f"g{g}.bpw"
        ckpt.write_bytes(b"PK\x05\x06" + bytes(18))
        blob.write_bytes(_blob(g))
        league.register(Member(id=f"main-t-g{g:04d}", role="main", generation=g,
                               parent=f"main-t-g{g - 1:04d}" if g else None,
                               checkpoint="c.zip", blob="b.bpw"), ckpt, blob)
    sink = MatchSink(league, "eval")
    sink.write(sink.records([{"a": f"main-t-g{i % 2:04d}", "b": f"cpu:{1 + i % 3}",
                              "result": ("win", "loss")[i % 5 == 0], "ticks": 2000 + i, "seed": i}
                             for i in range(40)]))
    sink.close()
    out = tmp_path / "page.png"
    r = subprocess.run([sys.executable, "-m", "brawlkit.tools.league_screenshot", str(league.path),
                        str(out), "--width", "1000"], capture_output=True, text=True, timeout=100)
    assert r.returncode == 0, r.stderr
    assert "11 leaderboard rows, 2 member(s) and 40 match(es) pushed, active main-t-g0001" in r.stdout
    assert out.stat().st_size > 10_000 and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = subprocess.run([sys.executable, "-m", "brawlkit.tools.league_screenshot", str(tmp_path),
                          str(tmp_path / "x.png")], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "is not a league directory" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and not (tmp_path / "x.png").exists()
