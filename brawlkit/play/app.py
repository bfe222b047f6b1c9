"""``python -m brawlkit play``: a human plays BRAWLPIT (or watches) in a pygame window.

The loop, once per frame: read the keyboard and any gamepad, hand the state to the
non-blocking :class:`~brawlkit.play.net.PlayClient` (which sends one CMD and drains
the socket to the freshest SNAPSHOT), then draw that snapshot
(:func:`~brawlkit.play.draw.draw`).  It never waits on the network, so a lost
datagram costs a stale frame, never a frozen window.  On exit it says BYE and prints
one JSON line of counters (frames drawn, commands sent, snapshots received), which is
what the tests read.  docs/play.md is the user's page.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from brawlkit.common.cli_args import command_parser
from brawlkit.play.net import KEEPALIVE_S, SILENCE_S, PlayClient, PlayError, parse_server
from brawlkit.play.rating_board import RatingBoard
from brawlkit.registry.client import ENV_PLAYER_KEY, RegistryClient, RegistryError
from brawlkit.wire.constants import C
from brawlkit.wire.protocol import pack_ident

#: the identity of a player without one (the registry's reserved id)
ANONYMOUS = "anonymous"
#: how long a banner (the previous match's result) stays up, s
NOTE_S = 4.0


def build_parser() -> argparse.ArgumentParser:
    p = command_parser("play", "Play BRAWLPIT against a bot, a player or the built-in CPU in a window "
                    "(realtime arena; keyboard or gamepad), or watch an arena. docs/play.md",
        epilog="keys: arrows/WASD stick (Ctrl: walk), Space/J jump, K/X attack, L/C special, "
               "Shift/; shield, R play again, Esc quit. Prints one JSON line of counters at exit.")
    p.add_argument("--server", required=True, metavar="HOST:PORT",
                   help="the brawlpit_server to play on")
    p.add_argument("--player", metavar="NAME",
                   help="play as the registered player NAME (needs --registry and the key "
                        "in $BRAWLKIT_PLAYER_KEY); default: anonymous")
    p.add_argument("--registry", metavar="URL",
                   help="registry that issues the player's ticket (and, with agent "
                        "credentials in the environment, the ratings shown)")
    p.add_argument("--spectate", type=int, metavar="ARENA_ID",
                   help="watch the arena ARENA_ID instead of playing")
    p.add_argument("--cpu-level", type=int, metavar="L",
                   help="1..8: an arena of your own against the built-in CPU; 0: never a CPU; "
                        "default: join any realtime arena with a free slot (a waiting bot)")
    p.add_argument("--fps", type=float, default=60.0, help="frames per second (default 60)")
    p.add_argument("--frames", type=int, default=0, metavar="N",
                   help="exit after N frames (0: run until Esc or the window closes)")
    p.add_argument("--screenshot", metavar="FILE", help="save the last frame as an image (PNG)")
    p.add_argument("--size", default="1024x640", metavar="WxH", help="window size (default 1024x640)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of an arena this client creates (0: the server's)")
    return p


def check_args(args: argparse.Namespace) -> tuple[tuple[str, int], tuple[int, int]]:
    """Validate what argparse cannot; raises :class:`PlayError` with the reason."""
    address = parse_server(args.server)
    if args.cpu_level is not None and not (
            args.cpu_level == 0 or C.BP_CPU_LEVEL_MIN <= args.cpu_level <= C.BP_CPU_LEVEL_MAX):
        raise PlayError(f"--cpu-level {args.cpu_level}: expected 0 or "
                        f"{C.BP_CPU_LEVEL_MIN}..{C.BP_CPU_LEVEL_MAX}")
    if args.spectate is not None:
        if not 1 <= args.spectate <= 0xFFFFFFFF:
            raise PlayError(f"--spectate {args.spectate}: an arena id is 1..{0xFFFFFFFF}")
        if args.cpu_level is not None or args.player:
            raise PlayError("--spectate only watches: --cpu-level and --player do not apply")
    if args.player and not args.registry:
        raise PlayError("--player NAME needs --registry URL (the registry issues the ticket)")
    if not 1 <= args.fps <= 1000:
        raise PlayError(f"--fps {args.fps}: expected 1..1000")
    if args.frames < 0:
        raise PlayError("--frames must be >= 0")
    try:
        w, h = (int(v) for v in args.size.lower().split("x"))
    except ValueError:
        raise PlayError(f"--size {args.size!r}: expected WxH, e.g. 1024x640") from None
    if w < 480 or h < 320:
        raise PlayError(f"--size {args.size}: at least 480x320")
    return address, (w, h)


def identity(args: argparse.Namespace) -> tuple[str, str]:
    """(IDENT name, ticket): ``anonymous`` with no ticket, or the player's NAME with a
    ticket the registry issues for the key in ``$BRAWLKIT_PLAYER_KEY``.  The bare name
    (not ``player:NAME``): whoever records the match (the bot pool) makes the match-log
    id ``player:NAME`` from a PEER whose name is a player name and that carries a ticket."""
    if not args.player:
        return ANONYMOUS, ""

    name = args.player
    key = os.environ.get(ENV_PLAYER_KEY)
    if not key:
        raise PlayError(f"--player {args.player}: set {ENV_PLAYER_KEY} to the player's key "
                        "(printed once by POST /players or `registry add-player`); "
                        "it is never taken from the command line")
    try:
        ticket = RegistryClient(args.registry, retries=2).player_ticket(args.player, key)
    except RegistryError as e:
        if e.status == 401:
            raise PlayError(f"the registry refused player {args.player!r}: wrong key or "
                            f"unknown player ({e})") from None
        raise PlayError(f"no ticket from the registry {args.registry}: {e}") from None
    try:  # the same checks the server applies (printable ASCII, lengths)

        pack_ident(0, 0, name, ticket)
    except ValueError as e:
        raise PlayError(f"--player {args.player}: {e}") from None
    return name, ticket


# ---------------------------------------------------------------- the loop
class Session:
    """What the loop keeps between frames besides the client: names, banners, camera."""

    def __init__(self, client: PlayClient, server: str, board: RatingBoard | None = None) -> None:
        from brawlkit.play.draw import Camera

        self.client, self.server = client, server
        self.board = board or RatingBoard(None)
        self.last_ratings: tuple[str | None, str | None] = (None, None)
        self.camera = Camera()
        self.started = time.monotonic()
        self.frames = 0
        self.fps = 0.0
        self.note: str | None = None
        self.note_until = 0.0
        self.finished: tuple[int, int, int] | None = None  # (arena, match, winner) last OVER

    def names(self) -> tuple[tuple[str, str], tuple[bool, bool] | None]:
        cl = self.client
        names = ["", ""]
        present: list[bool] = [False, False]
        for slot in (0, 1):
            peer = cl.peers.get(slot)
            if peer is None:
                continue
            present[slot] = peer.kind != C.BP_PEER_EMPTY
            names[slot] = peer.name or ("(no name)" if present[slot] else "")
        if cl.slot is not None and not names[cl.slot]:
            names[cl.slot] = cl.name
        known = len(cl.peers) == 2
        return (names[0], names[1]), ((present[0], present[1]) if known else None)

    def view(self, now: float) -> Any:
        from brawlkit.play.draw import View

        cl = self.client
        snap = cl.snapshot
        result, lines = self._result(now)
        names, present = self.names()
        status = hint = None
        if cl.error and cl.welcomed and not cl.ended and now - cl.error_at < NOTE_S:
            self.note, self.note_until = cl.error, cl.error_at + NOTE_S
        if cl.fatal:
            status, hint = "Refused", cl.error
        elif cl.ended:
            status, hint = "The arena closed", "Esc quits"
        elif not cl.welcomed:
            status = f"Connecting to {self.server}"
            waited = now - self.started
            hint = (f"sending HELLO ({cl.counters.hellos})" if waited < 5.0 else
                    f"no answer for {waited:.0f} s: is brawlpit_server running there?")
        elif cl.silent_for(now) > (SILENCE_S if not cl.spectating else 2 * KEEPALIVE_S):
            status = "Connection lost"
            hint = f"nothing from {self.server} for {cl.silent_for(now):.0f} s" + (
                "" if cl.spectating else " · R reconnects")
        ratings = (self.board.lookup(names[0]), self.board.lookup(names[1]))
        self.last_ratings = ratings
        return View(snapshot=snap, my_slot=cl.slot, names=names, status=status, hint=hint,
                    arena_id=cl.arena_id, spectating=cl.spectating, fps=self.fps,
                    server=self.server, note=self.note if now < self.note_until else None,
                    present=present, result=result, result_lines=lines,
                    ratings=ratings)

    def _result(self, now: float) -> tuple[int | None, list[str] | None]:
        """The result screen's state.  A finished match stays on screen when the
        opponent leaves right after it (a bot pool's bot plays one match); a new match
        (our RESET, the opponent's, another arena) turns it into a banner."""
        from brawlkit.play.draw import result_title

        cl, snap = self.client, self.client.snapshot
        if snap is None:
            return None, None
        key = (cl.arena_id, snap.match_id)
        if snap.phase == C.BP_PHASE_OVER:
            self.finished = (*key, snap.winner)
        elif self.finished is not None:
            if self.finished[:2] == key and snap.phase == C.BP_PHASE_WAITING:
                return self.finished[2], (["Esc quits"] if cl.spectating else
                                          ["the opponent left · R finds a new one · Esc quits"])
            title, _ = result_title(self.finished[2], cl.slot)
            self.note, self.note_until = f"previous match: {title.lower()}", now + NOTE_S
            self.finished = None
        if snap.phase != C.BP_PHASE_OVER or cl.spectating:
            return None, None
        if cl.resetting:
            return None, ["starting a new match…"]
        if not cl.opponent_present():
            return None, ["the opponent left · R finds a new one · Esc quits"]
        return None, ["R plays again · Esc quits"]


def play_again(client: PlayClient) -> str | None:
    """R: a new match.  Against the same opponent (still there when the match is over)
    a RESET; when the opponent left, while waiting, or when the server has gone
    silent, leave and look for another arena (HELLO ANY).  Returns what it did
    ("reset", "rejoin") or None."""
    if client.spectating or not client.welcomed:
        return None
    if client.silent_for() > SILENCE_S:  # the server forgot us (timeout, restart): reconnect
        return "rejoin" if client.rejoin() else None
    if client.resetting:
        return None
    if client.phase == C.BP_PHASE_OVER and client.opponent_present():
        return "reset" if client.request_reset() else None
    if client.phase in (C.BP_PHASE_OVER, C.BP_PHASE_WAITING):
        return "rejoin" if client.rejoin() else None
    return None


def run(args: argparse.Namespace, address: tuple[str, int], size: tuple[int, int],
        name: str, ticket: str) -> dict[str, Any]:
    import pygame

    from brawlkit.play import controls
    from brawlkit.play.draw import HUD_H, draw

    pygame.display.init()
    pygame.font.init()
    pygame.joystick.init()
    screen = pygame.display.set_mode(size)
    label = f"arena {args.spectate} (spectating)" if args.spectate else name
    pygame.display.set_caption(f"BRAWLPIT — {label} @ {args.server}")
    client = PlayClient(address, name=name, ticket=ticket, cpu_level=args.cpu_level,
                        spectate=args.spectate, seed=args.seed)
    board = RatingBoard(args.registry)  # registry ratings, when agent credentials allow
    sess = Session(client, args.server, board)
    pads: dict[int, Any] = {}
    clock = pygame.time.Clock()
    quit_reason = "frames"
    try:
        while True:
            for ev in pygame.event.get():
                if ev.type == pygame.QUIT:
                    quit_reason = "window closed"
                elif ev.type == pygame.KEYDOWN and ev.key == pygame.K_ESCAPE:
                    quit_reason = "esc"
                elif ev.type == pygame.KEYDOWN and ev.key == pygame.K_r:
                    play_again(client)
                elif ev.type == pygame.JOYBUTTONDOWN and ev.button == controls.PAD_START:
                    play_again(client)
                elif ev.type == pygame.JOYDEVICEADDED:
                    js = pygame.joystick.Joystick(ev.device_index)
                    pads[js.get_instance_id()] = js
                elif ev.type == pygame.JOYDEVICEREMOVED:
                    pads.pop(ev.instance_id, None)
            if quit_reason != "frames":
                break
            state = controls.combine(controls.keyboard(pygame.key.get_pressed()),
                                     *(controls.gamepad(js) for js in pads.values()))
            client.set_input(*state)
            now = time.monotonic()
            client.poll(now)
            snap = client.snapshot
            sess.camera.update(snap.players if snap else None,
                               size[0] / (size[1] - HUD_H), snap=sess.frames == 0)
            draw(screen, sess.view(now), sess.camera)
            pygame.display.flip()
            sess.frames += 1
            clock.tick(args.fps)
            sess.fps = clock.get_fps()
            if client.fatal:
                quit_reason = "refused"
                break
            if args.frames and sess.frames >= args.frames:
                break
        if args.screenshot:
            pygame.image.save(screen, args.screenshot)
    finally:
        board.close()
        client.close()
        pygame.quit()
    snap = client.snapshot
    return {
        "frames": sess.frames, "seconds": round(time.monotonic() - sess.started, 3),
        "exit": quit_reason, "welcomed": client.welcomed, "arena_id": client.arena_id,
        "slot": client.slot, "spectating": client.spectating, "name": name,
        "ident_confirmed": client.ident_confirmed,
        "peer_names": {str(s): p.name for s, p in sorted(client.peers.items())},
        "match_id": snap.match_id if snap else 0, "phase": snap.phase if snap else None,
        "tick": snap.tick if snap else 0, "ack_cmd_seq": snap.ack_cmd_seq if snap else 0,
        "ticket_sent": bool(ticket), "error": client.error,
        "ratings_shown": list(sess.last_ratings), "ratings_problem": board.problem,
        **{k: v for k, v in vars(client.counters).items()},
    }


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        address, size = check_args(args)
        name, ticket = identity(args)
    except PlayError as e:
        print(f"brawlkit play: {e}", file=sys.stderr)
        return 2
    try:
        result = run(args, address, size, name, ticket)
    except ImportError as e:
        print(f"brawlkit play: pygame is missing ({e}); pip install -r requirements.txt",
              file=sys.stderr)
        return 2
    print(json.dumps(result), flush=True)
    if result["error"] and result["exit"] == "refused":
        print(f"brawlkit play: {result['error']}", file=sys.stderr)
        return 1
    return 0
