"""A tiny /move endpoint that is not PPO: the proof that any model can play BRAWLPIT.

The HTTP side is the standard library only, so it is a template for any language or
model server — a language model behind an HTTP API included; the move names and the
scripted player come from the package (``brawlkit.policy_server.moves`` and
``.scripted``: one declaration, which ``policy train --clone-fights`` clones too).  It
speaks the JSON contract of docs/move.md:

    POST /move   {"self": {...NetPlayer fields...}, "opponent": {...}, "tick": T,
                  "ticks_left": N, "last_moves": [...], "frame": optional base64 PNG}
              -> {"move": NAME, "logprob": float}
    GET /moves  -> {"moves": [{"name": ...}, ...]}
    GET /info   -> {"model": ..., "decision_ticks": 4, "member": ...}

Policies: ``scripted`` (walk at the opponent, attack when close, side-special to
finish, recover with the up-special when off the stage, shield now and then) and
``random`` (a uniformly random move).  For tests and demonstrations it can also be
slow (``--sleep-ms``: every answer waits this long, like a big model) and wrong
(``--invalid-every N``: every N-th answer names a move that does not exist).

    python examples/move_clients/random_server.py --port 0 [--policy scripted|random]
    # prints "listening <port>", then:
    python -m brawlkit policy play --endpoint http://127.0.0.1:<port> --vs cpu:1 --member scripted
"""

from __future__ import annotations

import argparse
import json
import math
import random
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

_CHECKOUT = Path(__file__).resolve().parents[2]
if (_CHECKOUT / "brawlkit" / "__init__.py").is_file():  # the package of this example's checkout
    sys.path.insert(0, str(_CHECKOUT))                  # (elsewhere: the installed one)
from brawlkit.policy_server.moves import NAMES as MOVES  # noqa: E402 - after the path
from brawlkit.policy_server.scripted import scripted_move  # noqa: E402

FIGHTER_FIELDS = ("x", "y", "vx", "vy", "damage", "shield", "stocks", "facing")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the worker reuses one connection
    server: MoveServer

    def setup(self) -> None:
        super().setup()
        # answer in one segment: without this, Nagle + the client's delayed ACK add ~40 ms
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
        pass

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        if self.path == "/moves":
            self._send(200, {"moves": [{"name": m} for m in MOVES], "no_move": "no_move", "history": 4})
        elif self.path == "/info":
            self._send(200, {"model": f"example:{self.server.policy}", "decision_ticks": 4,
                             "member": self.server.member})
        else:
            self._send(404, {"detail": f"no route {self.path}"})

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path != "/move":
            self._send(404, {"detail": f"no route {self.path}"})
            return
        try:
            req = json.loads(raw)
        except ValueError:
            self._send(422, {"message": "body: not JSON"})
            return
        problem = check(req)
        if problem:
            self._send(422, {"message": problem})
            return
        srv = self.server
        with srv.lock:
            srv.calls += 1
            n = srv.calls
            offered = req.get("available") or MOVES  # the state's available moves (docs/move.md)
            if srv.policy == "random":
                name = srv.rng.choice(offered)
            else:  # a move the state does not offer (helpless): a dash home instead
                name = scripted_move(req, srv.rng)
        if srv.sleep_s:
            time.sleep(srv.sleep_s)
        if srv.invalid_every and n % srv.invalid_every == 0:
            name = "moonwalk"  # not a move: the worker replaces it with no_move and penalises it
        self._send(200, {"move": name, "logprob": -math.log(len(offered)) if srv.policy == "random" else 0.0})


def check(req: Any) -> str | None:
    """The contract's required fields, named when missing (a 422 message)."""
    if not isinstance(req, dict):
        return "body: not a JSON object"
    for who in ("self", "opponent"):
        f = req.get(who)
        if not isinstance(f, dict):
            return f"{who}: Field required"
        for k in FIGHTER_FIELDS:
            if not isinstance(f.get(k), int | float) or isinstance(f.get(k), bool):
                return f"{who}.{k}: a number is required"
    if not isinstance(req.get("ticks_left"), int):
        return "ticks_left: an integer is required"
    moves = req.get("last_moves", [])
    if not isinstance(moves, list) or len(moves) > 4 or any(m not in MOVES for m in moves):
        return "last_moves: at most 4 names of moves"
    return None


class MoveServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], policy: str, sleep_ms: float, invalid_every: int,
                 seed: int, member: str | None) -> None:
        import threading

        super().__init__(address, Handler)
        self.policy, self.sleep_s, self.invalid_every = policy, sleep_ms / 1e3, invalid_every
        self.rng, self.member = random.Random(seed), member
        self.calls = 0
        self.lock = threading.Lock()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="A tiny non-PPO /move endpoint (docs/move.md).")
    ap.add_argument("--port", type=int, default=0, help="TCP port; 0 = the kernel chooses (default)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--policy", choices=("scripted", "random"), default="scripted")
    ap.add_argument("--sleep-ms", type=float, default=0.0, help="wait this long before every answer")
    ap.add_argument("--invalid-every", type=int, default=0,
                    help="every N-th answer names a move that does not exist (0 = never)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--member", default=None, help="the member id GET /info reports")
    args = ap.parse_args(argv)
    srv = MoveServer((args.host, args.port), args.policy, args.sleep_ms, args.invalid_every,
                     args.seed, args.member)
    print(f"listening {srv.server_address[1]}", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
