"""``python -m brawlkit policy serve|play``: the ``/move`` endpoint and its worker.

* ``serve --checkpoint CKPT --port N [--host 127.0.0.1] [--member ID]`` serves a PPO
  checkpoint (SB3 zip or ``.bpw``) as ``POST /move``; prints ``listening <port>``
  once bound (``--port 0``: the kernel's choice), like the game server and the
  registry.
* ``play --endpoint URL --vs cpu:L [--matches K] [--league-dir DIR] [--member ID]``
  plays full matches on a real ``brawlpit_server`` through any endpoint of the
  contract (:mod:`brawlkit.policy_server.player`).

docs/move.md documents both and the JSON contract.
"""

from __future__ import annotations

import argparse
import sys

from brawlkit.common.net import listen_tcp


def _serve(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m brawlkit policy serve",
        description="Serve a PPO checkpoint as the /move endpoint (docs/move.md): POST /move "
        "answers a game state with a named move and its log-probability; GET /moves lists the "
        "moves; GET /info says the decision period and the league member. Prints "
        "'listening <port>' once the socket is bound.")
    ap.add_argument("--checkpoint", required=True, help="SB3 checkpoint zip or .bpw blob")
    ap.add_argument("--port", type=int, required=True, help="TCP port; 0 = the kernel chooses")
    ap.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    ap.add_argument("--member", default=None,
                    help="league member id the checkpoint plays as (default: the member whose "
                         "artifact the checkpoint is, when it lies in a league directory)")
    ap.add_argument("--log-level", default="warning",
                    choices=("critical", "error", "warning", "info", "debug"))
    args = ap.parse_args(argv)
    if not 0 <= args.port <= 65535:
        ap.error(f"--port must be in 0..65535, got {args.port}")

    from brawlkit.common.threads import limit_threads

    limit_threads()
    from brawlkit.policy_server.app import create_app
    from brawlkit.policy_server.policy import CheckpointPolicy, find_member

    try:
        chooser = CheckpointPolicy(args.checkpoint)
    except (OSError, ValueError) as e:
        print(f"policy serve: cannot load {args.checkpoint}: {e}", file=sys.stderr)
        return 2
    member = args.member or find_member(args.checkpoint)
    app = create_app(chooser, member=member)
    try:
        sock = listen_tcp(args.host, args.port)  # TCP_NODELAY: see listen_tcp
    except OSError as e:
        print(f"policy serve: cannot listen on {args.host}:{args.port}: {e}", file=sys.stderr)
        return 2
    import uvicorn

    port = sock.getsockname()[1]
    print(f"policy serve: {chooser.label}, input layout {chooser.meta.input_layout}, decides "
          f"every {chooser.decision_ticks} ticks, member {member or '(none)'}", file=sys.stderr)
    print(f"listening {port}", flush=True)
    config = uvicorn.Config(app, log_level=args.log_level, timeout_keep_alive=30,
                            server_header=False, access_log=args.log_level == "debug")
    uvicorn.Server(config).run(sockets=[sock])
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    usage = ("usage: python -m brawlkit policy {serve|play} [ARGS...]\n"
             "  serve   serve a PPO checkpoint as the /move endpoint\n"
             "  play    play matches through a /move endpoint and record them for the ratings\n"
             "docs/move.md has the contract; `policy serve --help` / `policy play --help`.")
    if not argv or argv[0] in ("-h", "--help"):
        print(usage)
        return 0 if argv else 2
    if argv[0] == "serve":
        return _serve(argv[1:])
    if argv[0] == "play":
        from brawlkit.policy_server.player import main as play_main

        return play_main(argv[1:])
    print(f"policy: unknown sub-command {argv[0]!r}\n{usage}", file=sys.stderr)
    return 2
