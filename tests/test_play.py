"""The human client, ``python -m brawlkit play`` (docs/play.md).

The window runs headless (SDL's dummy video and audio drivers) in a subprocess against
a real realtime ``brawlpit_server`` on 127.0.0.1, and the client's own JSON line at exit
(frames drawn, commands sent, snapshots received, whom the PEERs named) plus the
server's counters say what happened.  The non-blocking session (``play.net``) is also
driven in-process to show that its commands move a fighter and that a RESET retried
many times starts exactly one new match; the drawing is checked on hand-made
snapshots, pixel by pixel where it matters.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, RawClient, last_json

from brawlkit.wire import protocol as P
from brawlkit.wire.constants import C

HEADLESS = {"SDL_VIDEODRIVER": "dummy", "SDL_AUDIODRIVER": "dummy",
            "PYGAME_HIDE_SUPPORT_PROMPT": "1"}


def play(*args: str, timeout: float = 60, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    """``python -m brawlkit play ARGS`` headless, the way a user (or CI) runs it."""
    full = {**os.environ, **HEADLESS, **(env or {})}
    return subprocess.run([sys.executable, "-m", "brawlkit", "play", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, env=full)


def realtime(server_factory: Callable[..., Any]) -> Any:
    return server_factory(mode="realtime", client_timeout=30)


# ================================================================== arguments
@pytest.mark.parametrize("server, message", [
    ("nonsense", "expected HOST:PORT"),
    ("127.0.0.1", "expected HOST:PORT"),
    ("127.0.0.1:http", "is not a number"),
    ("127.0.0.1:99999", "outside 1..65535"),
    ("no-such-host.invalid:7777", "cannot resolve host"),
])
def test_a_bad_server_argument_is_a_clear_error(server: str, message: str) -> None:
    r = play("--server", server, "--frames", "1")
    assert r.returncode == 2, r
    assert message in r.stderr and r.stderr.startswith("brawlkit play: --server"), r.stderr
    assert "Traceback" not in r.stderr


def test_other_bad_arguments_are_clear_errors() -> None:
    for args, message in [
        (("--cpu-level", "9"), "--cpu-level 9: expected 0 or 1..8"),
        (("--spectate", "3", "--cpu-level", "2"), "--spectate only watches"),
        (("--player", "alice"), "needs --registry"),
        (("--size", "big"), "expected WxH"),
    ]:
        r = play("--server", "127.0.0.1:7777", *args)
        assert r.returncode == 2 and message in r.stderr, (args, r.stderr)


# ================================================================== the window, headless
@pytest.mark.servers
def test_plays_the_cpu_headless(server_factory: Callable[..., Any], tmp_path: Path) -> None:
    """Joined (WELCOME, IDENT echoed as PEER), sent a CMD every frame that the server
    applied, drew every frame from the snapshots it received, saved the last one."""
    srv = realtime(server_factory)
    shot = tmp_path / "frame.png"
    r = play("--server", f"127.0.0.1:{srv.port}", "--cpu-level", "3", "--frames", "150",
             "--screenshot", str(shot))
    assert r.returncode == 0, r.stderr
    out = last_json(r.stdout)
    assert out["welcomed"] and out["slot"] == 0 and not out["spectating"] and out["error"] is None
    assert out["frames"] == 150 and out["exit"] == "frames"
    assert out["cmds"] >= 140  # one per frame once seated
    assert out["snapshots"] >= 60 and out["phase"] == C.BP_PHASE_PLAYING and out["tick"] > 60
    assert out["ack_cmd_seq"] > 0  # the server applied our commands to ticks
    assert out["ident_confirmed"] and out["peer_names"] == {"0": "anonymous", "1": "cpu:3"}
    stats = srv.stats()
    assert stats["rx"] >= out["cmds"] and stats["dropped"] == 0, stats
    assert stats["arenas_active"] == 0  # the BYE left, so the arena was reclaimed
    import pygame

    img = pygame.image.load(str(shot))
    assert img.get_size() == (1024, 640)


@pytest.mark.servers
def test_spectates_an_arena_two_raw_clients_play(server_factory: Callable[..., Any]) -> None:
    srv = realtime(server_factory)
    a = RawClient(srv.address, want_slot=0, mode=C.BP_MODE_REALTIME, cpu_level=0)
    b = RawClient(srv.address, want_slot=1, arena_op=C.BP_ARENA_JOIN, arena_id=a.arena_id)
    try:
        for cl, name in ((a, "alice"), (b, "bob")):
            cl.send(P.pack_ident(1, cl.session, name))
        r = play("--server", f"127.0.0.1:{srv.port}", "--spectate", str(a.arena_id),
                 "--frames", "90")
        assert r.returncode == 0, r.stderr
        out = last_json(r.stdout)
        assert out["welcomed"] and out["spectating"] and out["slot"] is None
        assert out["arena_id"] == a.arena_id
        assert out["cmds"] == 0 and out["idents"] == 0  # it only watches
        assert out["snapshots"] >= 40 and out["phase"] == C.BP_PHASE_PLAYING
        assert out["peer_names"] == {"0": "alice", "1": "bob"}
        assert srv.stats()["dropped"] == 0
    finally:
        a.close()
        b.close()


@pytest.mark.servers
def test_spectating_an_unknown_arena_is_refused(server_factory: Callable[..., Any]) -> None:
    srv = realtime(server_factory)
    r = play("--server", f"127.0.0.1:{srv.port}", "--spectate", "4242", "--frames", "600")
    assert r.returncode == 1
    assert "no such arena" in r.stderr and last_json(r.stdout)["exit"] == "refused"


@pytest.mark.servers
def test_meets_a_client_waiting_in_an_arena(server_factory: Callable[..., Any]) -> None:
    """Without --cpu-level the client joins ANY realtime arena with a free slot: the
    one a bot (here a raw client) is waiting in, and learns the bot's name."""
    srv = realtime(server_factory)
    bot = RawClient(srv.address, want_slot=255, arena_op=C.BP_ARENA_ANY,
                    mode=C.BP_MODE_REALTIME, cpu_level=0)
    try:
        bot.send(P.pack_ident(1, bot.session, "gen7-main (1288)"))
        r = play("--server", f"127.0.0.1:{srv.port}", "--frames", "60")
        out = last_json(r.stdout)
        assert out["arena_id"] == bot.arena_id and out["slot"] == 1 - bot.slot
        assert out["peer_names"][str(bot.slot)] == "gen7-main (1288)"
        assert out["phase"] == C.BP_PHASE_PLAYING
    finally:
        bot.close()


# ================================================================== identity
@pytest.mark.servers
def test_a_registered_player_sends_its_ticket(server_factory: Callable[..., Any],
                                              tmp_path: Path) -> None:
    import requests
    from helpers import RegistryServer

    reg = RegistryServer(f"sqlite:///{tmp_path / 'registry.db'}", tmp_path / "data")
    try:
        r = requests.post(f"{reg.url}/players", json={"name": "alice"}, timeout=30)
        assert r.status_code == 201, r.text
        key = r.json()["key"]
        # a rated CPU, and a reader's credentials: the HUD shows the registry's rating
        from helpers import add_agent

        from brawlkit.league.records import MatchRecord
        from brawlkit.registry.client import RegistryClient

        db = f"sqlite:///{tmp_path / 'registry.db'}"
        writer = RegistryClient(reg.url, "writer", add_agent(db, "writer", "write"))
        writer.post_matches([MatchRecord(time=1.0, a="cpu:1", b="cpu:2", result="win",
                                         ticks=600, source="test")])
        reader = {"BRAWLKIT_AGENT_ID": "reader", "BRAWLKIT_AGENT_SECRET": add_agent(db, "reader", "read")}
        srv = realtime(server_factory)
        common = ("--server", f"127.0.0.1:{srv.port}", "--cpu-level", "1", "--frames", "150",
                  "--player", "alice", "--registry", reg.url)
        run = play(*common, env={"BRAWLKIT_PLAYER_KEY": key, **reader})
        assert run.returncode == 0, run.stderr
        out = last_json(run.stdout)
        assert out["ticket_sent"] and out["ident_confirmed"]
        assert out["peer_names"] == {"0": "alice", "1": "cpu:1"}
        assert out["ratings_problem"] is None
        # the registry's rating beside cpu:1: the scale's anchor, 1000 (docs/ratings.md)
        assert out["ratings_shown"][0] is None and float(out["ratings_shown"][1]) == 1000
        # a refused key stops before any window, with the reason
        bad = play(*common, env={"BRAWLKIT_PLAYER_KEY": "not-the-key"})
        assert bad.returncode == 2 and "refused player 'alice'" in bad.stderr, bad.stderr
        nokey = play(*common, env={"BRAWLKIT_PLAYER_KEY": ""})
        assert nokey.returncode == 2 and "BRAWLKIT_PLAYER_KEY" in nokey.stderr
    finally:
        reg.stop()


# ================================================================== the session, in-process
@pytest.mark.servers
def test_session_commands_move_the_fighter_and_reset_once(
        server_factory: Callable[..., Any]) -> None:
    from brawlkit.play.net import PlayClient

    srv = realtime(server_factory)
    cl = PlayClient(srv.address, name="tester", cpu_level=1, seed=5)
    try:
        def pump(seconds: float, until: Callable[[], bool] = lambda: False) -> None:
            end = time.monotonic() + seconds
            while time.monotonic() < end and not until():
                cl.poll()
                time.sleep(1 / 60)

        pump(3.0, lambda: cl.snapshot is not None and cl.snapshot.tick > 5)
        assert cl.welcomed and cl.slot == 0 and cl.snapshot is not None
        x0 = cl.snapshot.players[0].x
        cl.set_input(1.0, 0.0, 0)  # walk right
        pump(0.7)
        assert cl.snapshot.players[0].x > x0 + 5.0
        cl.set_input(0.0, 0.0, 0)
        match = cl.snapshot.match_id
        assert cl.request_reset()
        assert not cl.request_reset()  # one at a time
        pump(3.0, lambda: not cl.resetting)
        assert not cl.resetting and cl.snapshot.match_id == match + 1
        pump(0.3)
        assert cl.snapshot.match_id == match + 1  # the retries did not start a second match
    finally:
        cl.close()


def test_keyboard_and_gamepad_map_to_the_wire_buttons() -> None:
    import pygame

    from brawlkit.play import controls

    held = _Pressed({pygame.K_RIGHT, pygame.K_w, pygame.K_k, pygame.K_LSHIFT})
    assert controls.keyboard(held) == (1.0, 1.0, C.BP_BTN_ATTACK | C.BP_BTN_SHIELD)
    assert controls.keyboard(_Pressed({pygame.K_a, pygame.K_d})) == (0.0, 0.0, 0)  # cancel
    walk = controls.keyboard(_Pressed({pygame.K_LEFT, pygame.K_LCTRL, pygame.K_SPACE, pygame.K_l}))
    assert walk == (-0.5, 0.0, C.BP_BTN_JUMP | C.BP_BTN_SPECIAL)

    class Pad:
        def get_numaxes(self) -> int:
            return 6

        def get_axis(self, i: int) -> float:
            return {0: -0.9, 1: -1.0, 5: 0.8}.get(i, 0.1)  # stick up-left, right trigger

        def get_numhats(self) -> int:
            return 1

        def get_hat(self, i: int) -> tuple[int, int]:
            return (0, 0)

        def get_numbuttons(self) -> int:
            return 8

        def get_button(self, i: int) -> bool:
            return i == 0  # A

    sx, sy, b = controls.gamepad(Pad())
    assert (sx, sy) == (-0.9, 1.0) and b == C.BP_BTN_JUMP | C.BP_BTN_SHIELD
    assert controls.combine((0.3, 0.0, 1), (-0.8, 0.2, 8)) == (-0.8, 0.2, 9)


class _Pressed:
    """``pygame.key.get_pressed()`` stand-in: True for the held keys."""

    def __init__(self, held: set[int]) -> None:
        self.held = held

    def __getitem__(self, key: int) -> bool:
        return key in self.held


# ================================================================== drawing
def _snap(phase: int = C.BP_PHASE_PLAYING, winner: int = C.BP_WINNER_NONE,
          shield: bool = False) -> P.Snapshot:
    flags = C.BP_PLAYER_FLAG_ON_GROUND | (C.BP_PLAYER_FLAG_SHIELDING if shield else 0)
    a = P.PlayerState(-40.0, 0.0, 0, 0, 57.0, 60.0, 3, 1, C.BP_PLAYER_FLAG_ON_GROUND,
                      C.BP_AS_IDLE, 0, 2, 0)
    b = P.PlayerState(40.0, 0.0, 0, 0, 12.0, 30.0, 2, -1, flags,
                      C.BP_AS_SHIELD if shield else C.BP_AS_IDLE, 0, 2, 1)
    return P.parse_snapshot(P.pack_snapshot([a, b], phase=phase, winner=winner,
                                            ticks_left=5400, tick=3600, mode=C.BP_MODE_REALTIME))


def test_draw_puts_the_fighters_where_the_snapshot_says() -> None:
    os.environ.update(HEADLESS)
    import pygame

    from brawlkit.play import draw as D

    pygame.font.init()
    surf = pygame.Surface(D.SIZE)
    cam = D.Camera()
    play_h = D.SIZE[1] - D.HUD_H
    snap = _snap()
    cam.update(snap.players, D.SIZE[0] / play_h, snap=True)
    D.draw(surf, D.View(snap, 0, ("anonymous", "gen3 (1234)"), arena_id=2), cam)
    xf = D._Xf(cam, D.SIZE[0], play_h)
    for p in snap.players:  # the body's centre has the slot's colour
        x, y = xf.pt(p.x, p.y + C.BP_FIGHTER_HEIGHT * 0.25)
        assert tuple(surf.get_at((x, y)))[:3] == D.SLOT_C[p.slot]
    x, y = xf.pt(0.0, -C.BP_STAGE_DEPTH / 2)
    assert tuple(surf.get_at((x, y)))[:3] == D.STAGE_C
    # a shielding fighter is covered by its bubble
    shielded = pygame.Surface(D.SIZE)
    D.draw(shielded, D.View(_snap(shield=True), 0, ("a", "b")), cam)
    x, y = xf.pt(snap.players[1].x, snap.players[1].y + C.BP_FIGHTER_HEIGHT * 0.25)
    assert tuple(shielded.get_at((x, y)))[:3] != D.SLOT_C[1]
    # the camera never shows past the blast zones
    far = P.PlayerState(C.BP_BLAST_X - 1, C.BP_BLAST_TOP - 1, *snap.players[0][2:])
    tx, ty, hw = D.Camera.target((far, snap.players[1]), D.SIZE[0] / play_h)
    assert tx + hw <= C.BP_BLAST_X + 1e-6 and ty + hw / (D.SIZE[0] / play_h) <= C.BP_BLAST_TOP + 1e-6


def test_draw_every_screen() -> None:
    """Connecting, waiting, playing, over (player and spectator), refused: each draws,
    and the result headline is from the right side."""
    os.environ.update(HEADLESS)
    import pygame

    from brawlkit.play import draw as D

    pygame.font.init()
    surf = pygame.Surface((640, 400))
    views = [
        D.View(None, None, ("", ""), status="Connecting to 127.0.0.1:1", hint="sending HELLO (3)"),
        D.View(_snap(C.BP_PHASE_WAITING), 0, ("anonymous", ""), present=(True, False)),
        D.View(_snap(), None, ("a", "b"), spectating=True, note="previous match: draw"),
        D.View(_snap(C.BP_PHASE_OVER, 1), 0, ("a", "b")),
        D.View(_snap(C.BP_PHASE_OVER, C.BP_WINNER_DRAW), None, ("a", "b"), spectating=True),
        D.View(None, None, ("", ""), status="Refused", hint="server refused: no such arena"),
    ]
    for v in views:
        D.draw(surf, v)
    assert D.result_title(1, 0)[0] == "YOU LOSE" and D.result_title(1, 1)[0] == "YOU WIN"
    assert D.result_title(0, None)[0] == "P1 WINS" and D.result_title(C.BP_WINNER_DRAW, 0)[0] == "DRAW"
    assert D.split_rating("gen3-main (1234)") == ("gen3-main", "1234")
    assert D.split_rating("cpu:3") == ("cpu:3", None)


def test_result_screen_play_again_and_an_opponent_that_leaves() -> None:
    """R on the result screen: RESET while the opponent is still there; when it left
    (a bot pool's bot plays one match), the result stays up and R looks for another
    arena; the finished match then shows as a banner.  No server needed: the client's
    state is set by hand (its datagrams go to a closed port of 127.0.0.1)."""
    os.environ.update(HEADLESS)
    from brawlkit.play.app import Session, play_again
    from brawlkit.play.net import PeerInfo, PlayClient

    cl = PlayClient(("127.0.0.1", 9), name="me")
    try:
        cl.welcomed, cl.slot, cl.arena_id = True, 1, 3
        cl.last_rx = time.monotonic() + 60  # "heard from the server just now", for a minute
        cl.peers = {0: PeerInfo(C.BP_PEER_CLIENT, "gen3 (1200)"), 1: PeerInfo(C.BP_PEER_CLIENT, "me")}
        cl.snapshot = _snap(C.BP_PHASE_PLAYING)
        sess = Session(cl, "127.0.0.1:9")
        assert play_again(cl) is None  # mid-match R does nothing
        cl.snapshot = _snap(C.BP_PHASE_OVER, winner=1)
        v = sess.view(time.monotonic())
        assert v.result is None and v.result_lines == ["R plays again · Esc quits"]
        assert v.names == ("gen3 (1200)", "me") and v.present == (True, True)
        assert play_again(cl) == "reset" and cl.resetting and cl.counters.resets == 1
        assert sess.view(time.monotonic()).result_lines == ["starting a new match…"]
        cl._reset_nonce = None  # (the new match never comes from port 9)
        # the bot leaves right after the match: the server's phase goes back to waiting
        cl.peers[0] = PeerInfo(C.BP_PEER_EMPTY, "")
        cl.snapshot = _snap(C.BP_PHASE_WAITING)
        v = sess.view(time.monotonic())
        assert v.result == 1 and "opponent left" in (v.result_lines or [""])[0]
        assert play_again(cl) == "rejoin" and not cl.welcomed and cl.snapshot is None
        # joined elsewhere: the old result becomes a banner
        cl.welcomed, cl.slot, cl.arena_id = True, 1, 4
        cl.snapshot = _snap(C.BP_PHASE_PLAYING)
        v = sess.view(time.monotonic())
        assert v.result is None and v.note == "previous match: you win"
        # the server went silent (it forgot us): R reconnects, mid-match too
        cl.last_rx = time.monotonic() - 10
        assert "R reconnects" in (sess.view(time.monotonic()).hint or "")
        assert play_again(cl) == "rejoin" and not cl.welcomed
    finally:
        cl.close()
