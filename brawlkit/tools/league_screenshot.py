"""``python -m brawlkit.tools.league_screenshot LEAGUE_DIR OUT.png``: the league page of a
real league, as a picture.

Why: the README and docs/registry.md show the league page, and that picture should be
what a user sees after ``make train`` — their league's members, ratings and matches — not
the browser test's made-up data. So this runs the user's path end to end on a throw-away
registry: ``registry serve`` on 127.0.0.1 with a fresh SQLite file, an admin and a reader
agent, ``registry push`` of the league directory, the newest Main made the active
checkpoint (``--no-activate`` leaves none), the reader signed in through the page's own
form in Debian's chromium (driven by playwright, as the browser test does), and the whole
page captured. Nothing is written to the league directory.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def _serve(db_url: str, data: Path, log: Path) -> tuple[subprocess.Popen[str], str]:
    """A ``registry serve`` subprocess on a kernel-chosen port; (process, its URL)."""
    with log.open("w") as err:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen([sys.executable, "-m", "brawlkit", "registry", "serve", "--db", db_url,
                                 "--data", str(data), "--port", "0", "--log-level", "warning"],
                                stdout=subprocess.PIPE, stderr=err, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("listening "):
        proc.kill()
        raise RuntimeError(f"registry serve did not start: {line!r} ({log.read_text()[-500:]})")
    return proc, f"http://127.0.0.1:{int(line.split()[1])}"


def screenshot(league_dir: Path, out: Path, *, width: int = 1280, activate: bool = True,
               chromium: str | None = None) -> dict[str, object]:
    """Push ``league_dir`` to a throw-away registry and save its ``/league`` page to ``out``
    (full page, ``width`` pixels wide); what was pushed and shown."""
    from playwright.sync_api import sync_playwright

    from brawlkit.league.directory import LeagueDir
    from brawlkit.registry.client import RegistryClient
    from brawlkit.registry.database import create_agent
    from brawlkit.registry.sync import RegistrySync

    browser_bin = chromium or shutil.which("chromium") or shutil.which("chromium-browser")
    if browser_bin is None:
        raise RuntimeError("Debian's chromium is not installed (apt-get install chromium)")
    league = LeagueDir(league_dir, create=False)  # refuses what is not a league
    with tempfile.TemporaryDirectory(prefix="bk_league_shot_") as td:
        tmp = Path(td)
        db_url = f"sqlite:///{tmp / 'registry.db'}"
        admin, reader = create_agent(db_url, "admin", "admin"), create_agent(db_url, "viewer", "read")
        proc, url = _serve(db_url, tmp / "data", tmp / "serve.log")
        try:
            client = RegistryClient(url, "admin", admin, cache_dir=tmp / "cache")
            sync = RegistrySync(client, league, "screenshot")
            sent, accepted = sync.push_all()
            active = None
            if activate:
                mains = sorted(client.checkpoints(role="main"),
                               key=lambda r: int(r.get("generation") or 0))
                if mains:
                    active = str(mains[-1]["id"])
                    client.activate(active)
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=browser_bin,
                                             args=["--no-sandbox", "--disable-dev-shm-usage"])
                try:
                    page = browser.new_page(viewport={"width": width, "height": 900})
                    page.goto(f"{url}/league")
                    page.fill("input[name=agent_id]", "viewer")
                    page.fill("input[name=secret]", reader)
                    page.click("button[type=submit]")
                    page.wait_for_selector("#leaderboard")
                    rows = page.locator("#leaderboard tbody tr").count()
                    out.parent.mkdir(parents=True, exist_ok=True)
                    page.screenshot(path=str(out), full_page=True)
                finally:
                    browser.close()
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    return {"members_pushed": sent, "matches_pushed": accepted, "leaderboard_rows": rows,
            "active": active, "out": str(out)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m brawlkit.tools.league_screenshot",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("league_dir", type=Path, help="a league directory (make train's runs/league)")
    ap.add_argument("out", type=Path, help="the .png to write")
    ap.add_argument("--width", type=int, default=1280, help="the browser's width in pixels")
    ap.add_argument("--no-activate", dest="activate", action="store_false",
                    help="mark no checkpoint active (default: the newest Main)")
    args = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        res = screenshot(args.league_dir, args.out, width=args.width, activate=args.activate)
    except (OSError, ValueError, RuntimeError) as e:
        print(f"league_screenshot: {e}", file=sys.stderr)
        return 2
    print(f"{res['out']}: {res['leaderboard_rows']} leaderboard rows, {res['members_pushed']} "
          f"member(s) and {res['matches_pushed']} match(es) pushed, active {res['active']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
