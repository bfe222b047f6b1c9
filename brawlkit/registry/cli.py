"""``python -m brawlkit registry serve|add-agent``: run the registry, create its agents.

``serve`` opens (and migrates) the database, cleans up after a killed predecessor
(:meth:`~brawlkit.registry.store.Store.recover`), binds the socket and prints
``listening <port>`` on stdout once it is bound — with ``--port 0`` the kernel
picks the port, which is how tests and scripts start one without port races (like
``brawlpit_server``).  It listens on 127.0.0.1 unless ``--host`` says otherwise.
One service per data directory: a second one on the same ``--data`` refuses to
start (the store's clean-up at start must not touch another service's uploads).

``add-agent NAME`` creates an agent and prints its secret once; only a salted
scrypt hash of it is stored.  ``add-player NAME`` does the same for a human player
(what ``POST /players`` does over HTTP).  docs/registry.md has the whole picture.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import math
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from brawlkit.common.net import listen_tcp

LOCK_FILE = "registry.lock"


def _db_url(args: argparse.Namespace) -> str:
    if args.db:
        return str(args.db)
    return f"sqlite:///{Path(args.data).resolve() / 'registry.db'}"


def _serve(args: argparse.Namespace) -> int:
    if not (math.isfinite(args.max_upload_mb) and args.max_upload_mb > 0):
        print("registry: --max-upload-mb must be > 0", file=sys.stderr)
        return 2
    if args.token_ttl < 1:
        print("registry: --token-ttl must be >= 1 second", file=sys.stderr)
        return 2
    if args.ticket_ttl < 1:
        print("registry: --ticket-ttl must be >= 1 second", file=sys.stderr)
        return 2
    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    lock_fd = os.open(data / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"registry: another registry service is using {data} (one per data "
              "directory)", file=sys.stderr)
        os.close(lock_fd)
        return 2

    import uvicorn  # here: --help and add-agent need none of the server stack

    from brawlkit.registry.auth import TokenSigner
    from brawlkit.registry.database import SCHEMA_VERSION, RegistryDB, display_url
    from brawlkit.registry.service import Registry, create_app
    from brawlkit.registry.store import Store

    url = _db_url(args)
    try:
        db = RegistryDB(url)
    except Exception as e:  # a bad URL, an unreachable server, a too-new schema
        print(f"registry: cannot open the database {display_url(url)}: {e}", file=sys.stderr)
        os.close(lock_fd)
        return 2
    try:
        store = Store(data)
        linked, deleted = store.recover(db.referenced_hashes())
        if linked or deleted:
            print(f"registry: recovered {linked} committed artifact(s), removed {deleted} "
                  "unfinished upload(s)", file=sys.stderr)
        reg = Registry(db=db, store=store, signer=TokenSigner.from_data_dir(data),
                       max_upload_bytes=int(args.max_upload_mb * (1 << 20)),
                       token_ttl=int(args.token_ttl), ticket_ttl=int(args.ticket_ttl))
        app = create_app(reg)
        try:
            sock = listen_tcp(args.host, args.port)
        except OSError as e:
            print(f"registry: cannot listen on {args.host}:{args.port}: {e}", file=sys.stderr)
            return 2
        port = sock.getsockname()[1]
        was = db.upgraded_from
        print(f"registry: database {display_url(db.url)}, schema version {SCHEMA_VERSION}"
              + ("" if was in (-1, SCHEMA_VERSION) else f" (upgraded from {was})")
              + f", data {data}", file=sys.stderr)
        print(f"listening {port}", flush=True)
        config = uvicorn.Config(app, log_level=args.log_level, timeout_keep_alive=5,
                                server_header=False, access_log=args.log_level == "debug")
        uvicorn.Server(config).run(sockets=[sock])
        return 0
    finally:
        db.close()
        os.close(lock_fd)


def _create_in_db(args: argparse.Namespace, add: Callable[[Any, Any], None]) -> str | int:
    """Make a new secret, store it through ``add(db, secret_hash)`` in the database of
    ``args``, and return the secret (shown once, never stored) — or the exit code after
    printing why not: 2 when the database cannot be opened, 1 on a taken name. Agents and
    players are created the same way; only what they are called differs."""
    from brawlkit.registry.auth import hash_secret, new_secret
    from brawlkit.registry.database import Conflict, RegistryDB, display_url

    url = _db_url(args)
    try:
        db = RegistryDB(url)
    except Exception as e:
        print(f"registry: cannot open the database {display_url(url)}: {e}", file=sys.stderr)
        return 2
    try:
        secret = new_secret()
        add(db, hash_secret(secret))
    except Conflict as e:
        print(f"registry: {e}", file=sys.stderr)
        return 1
    finally:
        db.close()
    return secret


def _add_agent(args: argparse.Namespace) -> int:
    from brawlkit.registry.database import plain_name_problem

    why = plain_name_problem(args.name, "agent name")
    if why:
        print(f"registry: {why}", file=sys.stderr)
        return 2
    secret = _create_in_db(args, lambda db, h: db.add_agent(args.name, args.scope, h))
    if isinstance(secret, int):
        return secret
    print(f"agent {args.name!r} created with scope {args.scope}.")
    print(f"secret (shown only now; the registry keeps only a hash): {secret}")
    if args.json:
        print(json.dumps({"agent_id": args.name, "scope": args.scope, "secret": secret}))
    return 0


def _add_player(args: argparse.Namespace) -> int:
    from brawlkit.league.records import PLAYER_NAME_RE

    if not PLAYER_NAME_RE.fullmatch(args.name):
        print(f"registry: player name {args.name!r} must be 1 to 24 letters, digits, '_', "
              "'.' or '-'", file=sys.stderr)
        return 2
    key = _create_in_db(args, lambda db, h: db.add_player(args.name, h))
    if isinstance(key, int):
        return key
    print(f"player {args.name!r} created; its matches are player:{args.name}.")
    print(f"key (shown only now; the registry keeps only a hash): {key}")
    if args.json:
        print(json.dumps({"name": args.name, "key": key}))
    return 0


def main(argv: list[str] | None = None) -> int:
    from brawlkit.registry.auth import SCOPES, TICKET_TTL_S

    ap = argparse.ArgumentParser(
        prog="python -m brawlkit registry",
        description="The checkpoint registry: an HTTP service that leagues on several "
        "machines share (checkpoints, matches, ratings, the active checkpoint). "
        "docs/registry.md; the API reference is the running service's /openapi.json.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sv = sub.add_parser("serve", help="run the registry service",
                        description="Run the registry. Prints 'listening <port>' on stdout "
                        "once the socket is bound.")
    sv.add_argument("--data", required=True,
                    help="data directory: the artifact store (blobs/), the token key, and "
                    "the default SQLite database")
    sv.add_argument("--db", help="SQLAlchemy database URL (default sqlite:///DATA/registry.db; "
                    "postgresql://user:pass@host/db for a team, via psycopg)")
    sv.add_argument("--host", default="127.0.0.1",
                    help="address to listen on (default 127.0.0.1: this machine only)")
    sv.add_argument("--port", type=int, default=8765,
                    help="TCP port (default 8765; 0 = any free port, printed)")
    sv.add_argument("--max-upload-mb", type=float, default=64.0,
                    help="largest request body in MiB; larger ones get 413 (default 64)")
    sv.add_argument("--token-ttl", type=int, default=3600,
                    help="lifetime of the bearer tokens in seconds (default 3600)")
    sv.add_argument("--ticket-ttl", type=int, default=TICKET_TTL_S,
                    help=f"lifetime of the player tickets in seconds (default {TICKET_TTL_S})")
    sv.add_argument("--log-level", default="info",
                    choices=("critical", "error", "warning", "info", "debug"),
                    help="server log level (default info; debug also logs every request)")
    ag = sub.add_parser("add-agent", help="create an agent and print its secret once",
                        description="Create an agent (a client identity) and print its "
                        "secret, once: the registry stores only a salted scrypt hash.")
    ag.add_argument("name", help="the agent's name (its agent_id for POST /auth/token)")
    where = ag.add_mutually_exclusive_group(required=True)
    where.add_argument("--db", help="the registry's database URL")
    where.add_argument("--data", help="the registry's data directory (its default SQLite "
                       "database)")
    ag.add_argument("--scope", choices=SCOPES, default="read",
                    help="read < write < admin (default read)")
    ag.add_argument("--json", action="store_true",
                    help="also print {agent_id, scope, secret} as one JSON line (last line)")
    pl = sub.add_parser("add-player", help="create a human player and print its key once",
                        description="Create a human player (match id player:NAME) and print "
                        "its key, once: the registry stores only a salted scrypt hash. "
                        "Anyone may also sign up over HTTP (POST /players).")
    pl.add_argument("name", help="the player's name: 1 to 24 letters, digits, '_', '.', '-'")
    where = pl.add_mutually_exclusive_group(required=True)
    where.add_argument("--db", help="the registry's database URL")
    where.add_argument("--data", help="the registry's data directory (its default SQLite "
                       "database)")
    pl.add_argument("--json", action="store_true",
                    help="also print {name, key} as one JSON line (last line)")
    _client_commands(sub)
    args = ap.parse_args(argv)
    if args.cmd == "serve":
        return _serve(args)
    if args.cmd == "add-agent":
        return _add_agent(args)
    if args.cmd == "add-player":
        return _add_player(args)
    return _client(args)


def _client_commands(sub: Any) -> None:
    """The commands that talk to a running registry as an agent (credentials from
    BRAWLKIT_AGENT_ID / BRAWLKIT_AGENT_SECRET, docs/registry.md)."""
    url_help = "the registry (default $BRAWLKIT_REGISTRY_URL)"

    def cmd(name: str, help_: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(name, help=help_, description=help_)
        p.add_argument("--url", default=os.environ.get("BRAWLKIT_REGISTRY_URL"), help=url_help)
        return p

    p = cmd("push", "upload the league directory's trained members the registry lacks, "
            "and its matches (each stored once)")
    p.add_argument("--league-dir", required=True)
    p.add_argument("--location", default=None, help="this machine's name (default host name)")
    p = cmd("pull", "bring the registry's members (downloaded, sha256-checked) and matches "
            "into a league directory")
    p.add_argument("--league-dir", required=True)
    p = cmd("list", "list the registry's checkpoints")
    p.add_argument("--role", default=None)
    p.add_argument("--status", default=None, choices=("registered", "active", "disabled"))
    p.add_argument("--json", action="store_true", help="the records as one JSON list")
    for name, what in (("activate", "make a checkpoint the active one (the one that ships; "
                                    "admin)"),
                       ("disable", "take a checkpoint out of every pool (admin)")):
        p = cmd(name, what)
        p.add_argument("id", help="the member id")
    p = cmd("ratings", "the registry's ratings over every location's matches")
    p.add_argument("--json", action="store_true", help="the table as JSON (elo --json's shape)")


def _client(args: argparse.Namespace) -> int:
    from brawlkit.registry.client import RegistryClient, RegistryError

    if not args.url:
        print(f"registry {args.cmd}: no registry: pass --url or set BRAWLKIT_REGISTRY_URL",
              file=sys.stderr)
        return 2
    try:
        client = RegistryClient(args.url)
        if args.cmd in ("push", "pull"):
            from brawlkit.league.directory import LeagueDir
            from brawlkit.registry.sync import RegistrySync

            sync = RegistrySync(client, LeagueDir(args.league_dir),
                                getattr(args, "location", None) or socket.gethostname())
            if args.cmd == "push":
                sent, accepted = sync.push_all()
                print(f"pushed {sent} member(s) and {accepted} new match(es) to {args.url}")
            else:
                before = len(sync.league.members())
                if not sync.pull():
                    return 1
                print(f"pulled {len(sync.league.members()) - before} member(s) into "
                      f"{args.league_dir}; {len(sync.disabled)} disabled in the registry")
        elif args.cmd == "list":
            recs = client.checkpoints(role=args.role, status=args.status)
            if args.json:
                print(json.dumps(recs))
            for r in [] if args.json else recs:
                print(f"{r['id']:<48} {r['role']:<16} g{r['generation']:<4} {r['status']:<10} "
                      f"{r.get('location') or '-'}")
        elif args.cmd in ("activate", "disable"):
            rec = getattr(client, args.cmd)(args.id)
            print(f"{rec['id']}: {rec['status']}")
        else:
            table = client.ratings()
            if args.json:
                print(json.dumps(table))
            else:
                from brawlkit.league.ratings import format_table

                print(format_table(table))
    except RegistryError as e:
        print(f"registry {args.cmd}: {e}", file=sys.stderr)
        return 1
    return 0
