"""``python -m brawlkit registry serve|add-agent|add-player|revoke-agent|...``: run the
registry, manage its agents and players, and talk to it as an agent.

``serve`` opens (and migrates) the database, cleans up after a killed predecessor
(:meth:`~brawlkit.registry.store.Store.recover`), binds the socket and prints
``listening <port>`` on stdout once it is bound — with ``--port 0`` the kernel
picks the port, which is how tests and scripts start one without port races (like
``brawlpit_server``).  It listens on 127.0.0.1 unless ``--host`` says otherwise.
One service per data directory: a second one on the same ``--data`` refuses to
start (the store's clean-up at start must not touch another service's uploads),
and one database per data directory (:mod:`~brawlkit.registry.datadir`).

``add-agent NAME`` creates an agent and prints its secret once; only a salted
scrypt hash of it is stored.  ``revoke-agent NAME`` kills its secret and tokens.
``add-player NAME`` does for a human player what ``POST /players`` does over HTTP.
docs/registry.md has the whole picture.

Imports: the server stack (uvicorn, FastAPI, SQLAlchemy: ``database``, ``datadir``,
``service``, ``store``, ``slow_clients``) is imported inside the commands that
open a database or serve, so the client commands (push, pull, list, ratings, ...)
and ``--help`` never load it; the client side (``client``, ``sync`` and the league
directory: ``requests``) inside the client commands, so ``serve`` and
``add-agent`` never load it; ``brawlkit.league.ratings`` only where a table is
printed.  The rest (``auth``, ``limits``, the league's records) is imported here.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import math
import os
import socket
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brawlkit.common.net import listen_tcp
from brawlkit.league.records import id_problem, player_name_problem
from brawlkit.registry import limits
from brawlkit.registry.auth import SCOPES, TICKET_TTL_S, TokenSigner, hash_secret, new_secret

if TYPE_CHECKING:
    from brawlkit.registry.client import RegistryClient

LOCK_FILE = "registry.lock"
#: serve's limits against slow and greedy clients: flag, type, default, meaning
GUARDS: tuple[tuple[str, type, float, str], ...] = (
    ("--header-timeout", float, limits.HEADER_TIMEOUT_S, "seconds a client has to send a "
     "request's line and headers"),
    ("--body-timeout", float, limits.BODY_TIMEOUT_S, "seconds a request body may pause, and "
     "its grace before it must average 1 KiB/s"),
    ("--max-connections", int, limits.MAX_CONNECTIONS, "open connections at most; more are "
     "closed at once"),
    ("--max-connections-per-address", int, limits.MAX_CONNECTIONS_PER_ADDRESS, "open "
     "connections from one client address at most; more from it are closed at once; 0 = "
     "no per-address bound (behind a reverse proxy every client has the proxy's address)"),
    ("--rate-limit", float, limits.AGENT_RATE, "requests per second of one agent on average "
     f"(bursts of {limits.AGENT_BURST_FACTOR:g}x); more get 429 with Retry-After; 0 = no "
     "limit"),
    ("--read-bootstrap-max", int, limits.READ_BOOTSTRAP_MAX, "the most bootstrap resamples "
     "of a read-scoped agent's GET /ratings"),
)


def _db_url(args: argparse.Namespace) -> str:
    from brawlkit.registry.datadir import default_url  # SQLAlchemy: see the module doc

    return str(args.db) if args.db else default_url(args.data)


def _same_database(args: argparse.Namespace, url: str) -> bool:
    """False (and why, on stderr) when ``--data`` remembers another database than
    ``url``: the one-database-per-registry rule (:mod:`brawlkit.registry.datadir`)."""
    from brawlkit.registry.datadir import mismatch

    why = mismatch(args.data, url) if getattr(args, "data", None) else ""
    if why:
        print(f"registry {args.cmd}: {why}", file=sys.stderr)
    return not why


def _limits_problem(args: argparse.Namespace) -> str:
    """Why ``serve``'s numeric options cannot be used ('' when they can)."""
    checks = [
        (math.isfinite(args.max_upload_mb) and args.max_upload_mb > 0, "--max-upload-mb must be > 0"),
        (args.token_ttl >= 1, "--token-ttl must be >= 1 second"),
        (args.ticket_ttl >= 1, "--ticket-ttl must be >= 1 second"),
        (math.isfinite(args.header_timeout) and args.header_timeout > 0,
         "--header-timeout must be > 0 seconds"),
        (math.isfinite(args.body_timeout) and args.body_timeout > 0,
         "--body-timeout must be > 0 seconds"),
        (args.max_connections >= 1, "--max-connections must be >= 1"),
        (args.max_connections_per_address >= 0, "--max-connections-per-address must be >= 0"),
        (math.isfinite(args.rate_limit) and args.rate_limit >= 0, "--rate-limit must be >= 0"),
        (args.read_bootstrap_max >= 0, "--read-bootstrap-max must be >= 0"),
    ]
    return next((why for ok, why in checks if not ok), "")


def _serve(args: argparse.Namespace) -> int:
    why = _limits_problem(args)
    if why:
        print(f"registry: {why}", file=sys.stderr)
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
    try:
        return _serve_locked(args, data)
    finally:
        os.close(lock_fd)


def _serve_locked(args: argparse.Namespace, data: Path) -> int:
    """``serve`` once the data directory is this process's: open the database (the
    directory's own), recover the store, listen, run until SIGINT / SIGTERM."""
    from brawlkit.registry.database import SCHEMA_VERSION, RegistryDB, display_url
    from brawlkit.registry.datadir import remember

    url = _db_url(args)
    if not _same_database(args, url):
        return 2
    try:
        db = RegistryDB(url)
    except Exception as e:  # a bad URL, an unreachable server, a too-new schema
        print(f"registry: cannot open the database {display_url(url)}: {e}", file=sys.stderr)
        return 2
    try:
        remember(data, url)
        app = _app(args, data, db)
        try:
            sock = listen_tcp(args.host, args.port)
        except OSError as e:
            print(f"registry: cannot listen on {args.host}:{args.port}: {e}", file=sys.stderr)
            return 2
        was = db.upgraded_from
        print(f"registry: database {display_url(db.url)}, schema version {SCHEMA_VERSION}"
              + ("" if was in (-1, SCHEMA_VERSION) else f" (upgraded from {was})")
              + f", data {data}", file=sys.stderr)
        print(f"listening {sock.getsockname()[1]}", flush=True)
        _run_server(args, app, sock)
        return 0
    finally:
        db.close()


def _app(args: argparse.Namespace, data: Path, db: Any) -> Any:
    """The FastAPI app of ``db`` and the store in ``data``, with ``args``' limits."""
    from brawlkit.registry.service import Registry, create_app
    from brawlkit.registry.store import Store

    store = Store(data)
    linked, deleted = store.recover(db.referenced_hashes())
    if linked or deleted:
        print(f"registry: recovered {linked} committed artifact(s), removed {deleted} "
              "unfinished upload(s)", file=sys.stderr)
    reg = Registry(db=db, store=store, signer=TokenSigner.from_data_dir(data),
                   max_upload_bytes=int(args.max_upload_mb * (1 << 20)),
                   token_ttl=int(args.token_ttl), ticket_ttl=int(args.ticket_ttl),
                   agent_limit=limits.RateLimiter.per_agent(args.rate_limit),
                   read_bootstrap_max=int(args.read_bootstrap_max))
    reg.ratings.log.warm(db)
    return create_app(reg)


def _run_server(args: argparse.Namespace, app: Any, sock: socket.socket) -> None:
    """uvicorn on ``sock`` with the slow-client guard (docs/registry.md, "Slow and
    greedy clients", says why this server and these settings)."""
    import uvicorn

    from brawlkit.registry.slow_clients import guarded_protocol

    protocol = guarded_protocol(args.header_timeout, args.body_timeout, args.max_connections,
                                args.max_connections_per_address)
    config = uvicorn.Config(app, log_level=args.log_level, timeout_keep_alive=5,
                            server_header=False, access_log=args.log_level == "debug",
                            http=protocol, backlog=max(128, args.max_connections),
                            # a head arriving in pieces: h11's bound, the same as BodyLimit's
                            h11_max_incomplete_event_size=limits.MAX_HEAD_BYTES)
    uvicorn.Server(config).run(sockets=[sock])
    if protocol.closed:
        print("registry: connections closed by the slow-client guard: " + ", ".join(
            f"{n} ({why})" for why, n in protocol.closed.items()), file=sys.stderr)


def _in_db(args: argparse.Namespace, act: Callable[[Any], Any]) -> Any:
    """``act(db)`` on the database of ``args`` (``--db``, or ``--data``'s own), or the
    exit code after printing why not: 2 when the database cannot be opened or is not
    the data directory's, 1 for what the database refuses (a taken name, an unknown
    agent)."""
    from brawlkit.registry.database import RegistryDB, RegistryDBError, display_url

    url = _db_url(args)
    if not _same_database(args, url):
        return 2
    try:
        db = RegistryDB(url)
    except Exception as e:
        print(f"registry: cannot open the database {display_url(url)}: {e}", file=sys.stderr)
        return 2
    try:
        return act(db)
    except RegistryDBError as e:
        print(f"registry: {e}", file=sys.stderr)
        return 1
    finally:
        db.close()


def _with_secret(add: Callable[[Any, Any], None]) -> Callable[[Any], str]:
    """A database action that stores a new secret's hash through ``add(db, hash)``
    and returns the secret (shown once, never stored). Agents and players are
    created the same way; only what they are called differs."""

    def act(db: Any) -> str:
        secret = new_secret()
        add(db, hash_secret(secret))
        return secret

    return act


def _add_agent(args: argparse.Namespace) -> int:
    why = id_problem(args.name, "agent name")
    if why:
        print(f"registry: {why}", file=sys.stderr)
        return 2
    secret = _in_db(args, _with_secret(lambda db, h: db.add_agent(args.name, args.scope, h)))
    if isinstance(secret, int):
        return secret
    print(f"agent {args.name!r} created with scope {args.scope}.")
    print(f"secret (shown only now; the registry keeps only a hash): {secret}")
    if args.json:
        print(json.dumps({"agent_id": args.name, "scope": args.scope, "secret": secret}))
    return 0


def _revoke_agent(args: argparse.Namespace) -> int:
    rec = _in_db(args, lambda db: db.revoke_agent(args.name))
    if isinstance(rec, int):
        return rec
    print(f"agent {args.name!r} ({rec['scope']}) revoked at {rec['revoked']}: its secret and "
          "every token it holds are refused from now on.")
    if args.json:
        print(json.dumps(rec))
    return 0


def _add_player(args: argparse.Namespace) -> int:
    why = player_name_problem(args.name)
    if why:
        print(f"registry: {why}", file=sys.stderr)
        return 2
    key = _in_db(args, _with_secret(lambda db, h: db.add_player(args.name, h)))
    if isinstance(key, int):
        return key
    print(f"player {args.name!r} created; its matches are player:{args.name}.")
    print(f"key (shown only now; the registry keeps only a hash): {key}")
    if args.json:
        print(json.dumps({"name": args.name, "key": key}))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The registry's parser; its sub-parsers are what help texts list."""
    ap = argparse.ArgumentParser(
        prog="python -m brawlkit registry",
        description="The checkpoint registry: an HTTP service that leagues on several "
        "machines share (checkpoints, matches, ratings, the active checkpoint). "
        "docs/registry.md; the API reference is the running service's /openapi.json.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    _serve_command(sub)
    _local_commands(sub)
    _client_commands(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    if getattr(args, "needs_db", False) and not (args.db or args.data):
        ap.error(f"{args.cmd}: give the registry's database: --db URL or --data DIR")
    local = {"serve": _serve, "add-agent": _add_agent, "add-player": _add_player,
             "revoke-agent": _revoke_agent}
    return local.get(args.cmd, _client)(args)


def _serve_command(sub: Any) -> None:
    sv = sub.add_parser("serve", help="run the registry service",
                        description="Run the registry. Prints 'listening <port>' on stdout "
                        "once the socket is bound.")
    sv.add_argument("--data", required=True,
                    help="data directory: the artifact store (blobs/), the token key, the "
                    "default SQLite database, and which database it belongs to")
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
    for flag, kind, default, what in GUARDS:
        sv.add_argument(flag, type=kind, default=default, help=f"{what} (default {default})")
    sv.add_argument("--log-level", default="info",
                    choices=("critical", "error", "warning", "info", "debug"),
                    help="server log level (default info; debug also logs every request)")


def _local_commands(sub: Any) -> None:
    """The commands that open the registry's database directly (on its machine)."""
    for name, what in (("add-agent", "create an agent and print its secret once"),
                       ("revoke-agent", "revoke an agent: its secret and tokens stop working"),
                       ("add-player", "create a human player and print its key once")):
        p = sub.add_parser(name, help=what, description=what + ". The database: --db URL, "
                           "or --data DIR (its own database; with both, they must agree).")
        p.add_argument("name", help="the player's name: 1 to 24 letters, digits, '_', '.', '-'"
                       if name == "add-player" else "the agent's name (its agent_id)")
        p.add_argument("--db", help="the registry's database URL")
        p.add_argument("--data", help="the registry's data directory")
        p.add_argument("--json", action="store_true",
                       help="also print the result as one JSON line (last line)")
        if name == "add-agent":
            p.add_argument("--scope", choices=SCOPES, default="read",
                           help="read < write < admin (default read)")
        p.set_defaults(needs_db=True)


def _client_commands(sub: Any) -> None:
    """The commands that talk to a running registry as an agent (credentials from
    BRAWLKIT_AGENT_ID / BRAWLKIT_AGENT_SECRET, docs/registry.md)."""
    url_help = "the registry (default $BRAWLKIT_REGISTRY_URL)"

    def cmd(name: str, help_: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(name, help=help_, description=help_)
        p.add_argument("--url", default=os.environ.get("BRAWLKIT_REGISTRY_URL"), help=url_help)
        return p

    p = cmd("push", "upload the league directory's trained members the registry lacks, "
            "and its matches (each stored once; a record it refuses is named and skipped)")
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
    p = cmd("active", "the active checkpoint (human players' default opponent): its record, "
            "and with --blob its .bpw (exit 1 when none is active)")
    p.add_argument("--blob", type=Path, default=None,
                   help="write the active checkpoint's raw .bpw here (sha256-checked)")
    p.add_argument("--json", action="store_true", help="the record as JSON")
    p = cmd("ratings", "the registry's ratings over every location's matches")
    p.add_argument("--json", action="store_true", help="the table as JSON (elo --json's shape)")


def _client(args: argparse.Namespace) -> int:
    from brawlkit.registry.client import RegistryClient, RegistryError  # requests: see above

    if not args.url:
        print(f"registry {args.cmd}: no registry: pass --url or set BRAWLKIT_REGISTRY_URL",
              file=sys.stderr)
        return 2
    try:
        client = RegistryClient(args.url)
        if args.cmd in ("push", "pull"):
            return _sync(args, client)
        if args.cmd == "list":
            recs = client.checkpoints(role=args.role, status=args.status)
            if args.json:
                print(json.dumps(recs))
            for r in [] if args.json else recs:
                print(f"{r['id']:<48} {r['role']:<16} g{r['generation']:<4} {r['status']:<10} "
                      f"{r.get('location') or '-'}")
        elif args.cmd == "active":
            return _active(args, client)
        elif args.cmd in ("activate", "disable"):
            rec = getattr(client, args.cmd)(args.id)
            print(f"{rec['id']}: {rec['status']}")
        else:
            table = client.ratings()
            if args.json:
                print(json.dumps(table))
            else:
                from brawlkit.league.ratings import format_table  # numpy: only here

                print(format_table(table))
    except RegistryError as e:
        print(f"registry {args.cmd}: {e}", file=sys.stderr)
        return 1
    return 0


def _active(args: argparse.Namespace, client: RegistryClient) -> int:
    """``active``: print the active checkpoint, and save its blob with ``--blob``."""
    got = client.active_blob() if args.blob else None
    rec = got[0] if got else client.active()
    if rec is None:
        print("registry active: no checkpoint is active (registry activate ID)", file=sys.stderr)
        return 1
    if args.blob:
        if got is None:
            print(f"registry active: {rec['id']} has no blob", file=sys.stderr)
            return 1
        tmp = args.blob.with_name(f".{args.blob.name}.tmp")
        tmp.write_bytes(got[1])
        tmp.replace(args.blob)
    if args.json:
        print(json.dumps(rec))
    else:
        print(f"{rec['id']} ({rec['role']} g{rec['generation']})"
              + (f" -> {args.blob}" if args.blob else ""))
    return 0


def _sync(args: argparse.Namespace, client: RegistryClient) -> int:
    """``push`` / ``pull``: a league directory and the registry."""
    from brawlkit.league.directory import LeagueDir
    from brawlkit.registry.sync import LocationClash, RegistrySync

    sync = RegistrySync(client, LeagueDir(args.league_dir),
                        getattr(args, "location", None) or socket.gethostname())
    if args.cmd == "push":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # printed below, once each, without a traceback
            sent, accepted = sync.push_all()
        for line in (sync.skipped + sync.withheld + sync.refused
                     + ([sync.clash] if sync.clash else [])):
            print(f"registry push: {line}", file=sys.stderr)
        print(f"pushed {sent} member(s) and {accepted} new match(es) to {args.url}"
              + (f"; skipped {len(sync.skipped)} log line(s) or file(s) the league's "
                 "readers refuse" if sync.skipped else "")
              + (f"; {len(sync.withheld)} member(s) not uploaded" if sync.withheld else "")
              + (f"; {len(sync.refused)} match(es) the registry refused" if sync.refused
                 else ""))
        return 0
    before = len(sync.league.members())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LocationClash)  # printed below, without a file:line
        pulled = sync.pull()
    if sync.clash:
        print(f"registry pull: warning: {sync.clash}", file=sys.stderr)
    if not pulled:
        return 1
    print(f"pulled {len(sync.league.members()) - before} member(s) into "
          f"{args.league_dir}; {len(sync.disabled)} disabled in the registry")
    return 0
