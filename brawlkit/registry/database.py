"""The registry's database: schema, versioned migrations, every transaction.

SQLAlchemy Core (2.x), so one code path serves the embedded default — SQLite in
WAL mode, a file next to the artifacts, nothing to install — and a team's server
(PostgreSQL through psycopg 3, or any other SQLAlchemy URL).

Why the transactions look the way they do:

* **SQLite**: every write transaction starts with ``BEGIN IMMEDIATE``, i.e. takes
  the database's single write lock *first*.  Writers queue on the busy timeout
  instead of failing with "database is locked" when a read transaction tries to
  upgrade; WAL mode keeps readers running while one writer writes.
* **PostgreSQL**: transactions that must not interleave (switching the active
  checkpoint, inserting a batch of matches) first lock one row of
  ``registry_locks`` with ``SELECT ... FOR UPDATE``; a concurrent one waits for the
  commit and then sees its result.  The schema backs that up on its own: a unique
  partial index allows at most one ``active`` checkpoint, a unique index one match
  per content digest, the primary key one record per id.
* Ordering that users see (registration order, newest of a role, the matches'
  replay order) is done in Python, never with ``ORDER BY`` on text: PostgreSQL
  sorts text by its locale's collation, Python by code point, and the ratings
  must come out the same as a local league's to the last digit.

Migrations: ``registry_migrations`` records every version applied.  A newer
service upgrades an older database at start (:func:`migrate`), in one
transaction; a database newer than the code is refused rather than misread.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, get_args

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Double,
    Engine,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    delete,
    event,
    func,
    insert,
    select,
    text,
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError

from brawlkit.league.records import ID_LEN, MatchRecord, Member
from brawlkit.registry.auth import SecretHash, hash_secret, new_secret

#: the schema version this code writes and reads
SCHEMA_VERSION = 5
#: a checkpoint's status: the type (the API's schema uses it), and its values
Status = Literal["registered", "active", "disabled"]
STATUSES: tuple[str, ...] = get_args(Status)
#: length bounds of stored text (ids: the league's rule, records.id_problem)
TEXT_LEN = 1000
#: a player's name (``PLAYER_NAME_RE`` allows 24; the column leaves room)
PLAYER_NAME_LEN = 64

_BIGINT = BigInteger().with_variant(Integer, "sqlite")  # SQLite autoincrement needs INTEGER


class RegistryDBError(Exception):
    """A request the database's rules refuse: the base of the errors the service turns
    into 4xx answers.  Not :class:`brawlkit.registry.client.RegistryError`, which is
    what a *client* sees of any refusal (the HTTP answer, with its status)."""


class NotFound(RegistryDBError):
    """No such checkpoint / agent (404)."""


class Conflict(RegistryDBError):
    """The request contradicts what is stored (409)."""


class Invalid(RegistryDBError):
    """The request names what is not there, e.g. a parent never uploaded (422)."""


class SchemaTooNew(RuntimeError):
    """The database was written by a newer registry than this code."""


def utc_now() -> str:
    """ISO-8601 UTC with microseconds: one format, so string order is time order."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


# ================================================================== schema
def tables_v1(md: MetaData) -> dict[str, Table]:
    """The schema as version 1 of the registry created it (frozen: never edit; a
    change is a new migration)."""
    agents = Table(
        "registry_agents", md,
        Column("id", String(ID_LEN), primary_key=True),
        Column("scope", String(16), nullable=False),
        Column("kdf", String(64), nullable=False),
        Column("salt", String(64), nullable=False),
        Column("secret_hash", String(256), nullable=False),
        Column("created", String(40), nullable=False),
    )
    checkpoints = Table(
        "registry_checkpoints", md,
        Column("id", String(ID_LEN), primary_key=True),
        Column("role", String(32), nullable=False),
        Column("generation", Integer, nullable=False),
        Column("parent", String(ID_LEN)),
        Column("created", String(64), nullable=False),
        Column("settings", Text, nullable=False),
        Column("location", Text, nullable=False),
        Column("checkpoint_sha256", String(64), nullable=False),
        Column("checkpoint_size", BigInteger, nullable=False),
        Column("blob_sha256", String(64)),
        Column("blob_size", BigInteger),
        Column("status", String(16), nullable=False),
        Column("uploaded", String(40), nullable=False),
        Column("uploaded_by", String(ID_LEN), nullable=False),
        Index("ix_registry_checkpoints_role", "role"),
    )
    matches = Table(
        "registry_matches", md,
        Column("seq", _BIGINT, primary_key=True, autoincrement=True),
        Column("time", Double, nullable=False),
        Column("a", String(ID_LEN), nullable=False),
        Column("b", String(ID_LEN), nullable=False),
        Column("result", String(8), nullable=False),
        Column("ticks", BigInteger, nullable=False),
        Column("source", String(ID_LEN), nullable=False),
        Column("received", String(40), nullable=False),
        Column("received_by", String(ID_LEN), nullable=False),
    )
    return {"agents": agents, "checkpoints": checkpoints, "matches": matches}


def players_v3(md: MetaData) -> Table:
    """The players table as version 3 created it (frozen): a human player's name and
    the salted slow hash of its key, like ``registry_agents``."""
    return Table(
        "registry_players", md,
        Column("name", String(PLAYER_NAME_LEN), primary_key=True),
        Column("kdf", String(64), nullable=False),
        Column("salt", String(64), nullable=False),
        Column("key_hash", String(256), nullable=False),
        Column("created", String(40), nullable=False),
    )


def _migrations_table(md: MetaData) -> Table:
    return Table(
        "registry_migrations", md,
        Column("version", Integer, primary_key=True, autoincrement=False),
        Column("description", String(200), nullable=False),
        Column("applied", String(40), nullable=False),
    )


# the current schema (version 2), what the queries below use
metadata = MetaData()
_t = tables_v1(metadata)
agents_t, checkpoints_t, matches_t = _t["agents"], _t["checkpoints"], _t["matches"]
matches_t.append_column(Column("digest", String(64)))
#: when the agent was revoked (version 4; NULL: never): its secret and tokens are dead
agents_t.append_column(Column("revoked", String(40)))
#: a match's seed and how each side played (version 5; NULL: not said, read as the
#: record's default: MatchRecord.default_policy)
MATCH_V5_COLUMNS = (("seed", BigInteger()), ("a_policy", String(16)), ("b_policy", String(16)))
for _name, _type in MATCH_V5_COLUMNS:
    matches_t.append_column(Column(_name, _type))
locks_t = Table("registry_locks", metadata, Column("name", String(32), primary_key=True))
migrations_t = _migrations_table(metadata)
players_t = players_v3(metadata)
LOCK_NAMES = ("active", "matches")
#: one record per match content (version 2)
ux_match_digest = Index("ux_registry_matches_digest", matches_t.c.digest, unique=True)
#: at most one active checkpoint (version 2; SQLite and PostgreSQL, which have partial
#: indexes — elsewhere the "active" lock row alone serialises activations)
ux_one_active = Index("ux_registry_checkpoints_one_active", checkpoints_t.c.status,
                      unique=True, sqlite_where=checkpoints_t.c.status == "active",
                      postgresql_where=checkpoints_t.c.status == "active")


def match_digest(rec: MatchRecord) -> str:
    """The identity of a match: sha256 of its canonical JSON (sorted keys, the float
    time as ``repr`` writes it, exactly).  Two records with the same content are the
    same match (as :attr:`MatchRecord.sort_key`, which is all of its content, says
    for a league directory), so a client may resend a batch safely."""
    data = {**rec.to_json(), "time": rec.time + 0.0}  # -0.0 and 0.0: one time, as sort_key says
    text_ = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text_.encode("utf-8")).hexdigest()


def _match_of(row: Sequence[Any]) -> MatchRecord:
    """The record of a row's (time, a, b, result, ticks, source, seed, a_policy,
    b_policy): a NULL policy (a match stored before version 5) is the record's default.
    Not the match-record rule: what is stored is read as stored (the league page and
    the ratings must never fail on a record a laxer service once accepted)."""
    t, a, b, result, ticks, source, seed, a_policy, b_policy = row
    return MatchRecord(time=t, a=a, b=b, result=result, ticks=ticks, source=source, seed=seed,
                       a_policy=a_policy or "", b_policy=b_policy or "")


def _partial_index_ok(conn: Connection) -> bool:
    return conn.dialect.name in ("sqlite", "postgresql")


def _migrate_1(conn: Connection) -> None:
    md = MetaData()
    for table in tables_v1(md).values():
        table.create(conn)


def _migrate_2(conn: Connection) -> None:
    """Idempotent match batches and the single active checkpoint:
    ``registry_matches.digest`` (back-filled; identical duplicates a v1 service kept
    are removed, keeping the first) with a unique index; ``registry_locks`` rows; a
    unique partial index allowing one ``active`` checkpoint (extra ones a v1
    database might hold are demoted, keeping the largest id)."""
    col_type = String(64).compile(dialect=conn.dialect)
    conn.execute(text(f"ALTER TABLE registry_matches ADD COLUMN digest {col_type}"))
    m = matches_t
    seen: set[str] = set()
    rows = conn.execute(select(m.c.seq, m.c.time, m.c.a, m.c.b, m.c.result, m.c.ticks,
                               m.c.source).order_by(m.c.seq)).all()
    for row in rows:
        d = match_digest(MatchRecord(time=row.time, a=row.a, b=row.b, result=row.result,
                                     ticks=row.ticks, source=row.source))
        if d in seen:
            conn.execute(delete(m).where(m.c.seq == row.seq))
        else:
            seen.add(d)
            conn.execute(update(m).where(m.c.seq == row.seq).values(digest=d))
    ux_match_digest.create(conn)
    locks_t.create(conn)
    conn.execute(insert(locks_t), [{"name": n} for n in LOCK_NAMES])
    c = checkpoints_t
    active = sorted(conn.execute(select(c.c.id).where(c.c.status == "active")).scalars())
    for extra in active[:-1]:
        conn.execute(update(c).where(c.c.id == extra).values(status="registered"))
    if _partial_index_ok(conn):
        ux_one_active.create(conn)


def _migrate_3(conn: Connection) -> None:
    """Human players: ``registry_players`` (name, key hash)."""
    players_v3(MetaData()).create(conn)


def _migrate_4(conn: Connection) -> None:
    """Revocable agents: ``registry_agents.revoked`` (NULL for every existing agent)."""
    col_type = String(40).compile(dialect=conn.dialect)
    conn.execute(text(f"ALTER TABLE registry_agents ADD COLUMN revoked {col_type}"))


def _migrate_5(conn: Connection) -> None:
    """Who played as what: ``registry_matches.seed``, ``a_policy``, ``b_policy`` (NULL
    for every stored match: its record never said, and reads as it always did)."""
    for name, type_ in MATCH_V5_COLUMNS:
        col_type = type_.compile(dialect=conn.dialect)
        conn.execute(text(f"ALTER TABLE registry_matches ADD COLUMN {name} {col_type}"))


#: (version, what it does, the step); append only
MIGRATIONS: list[tuple[int, str, Callable[[Connection], None]]] = [
    (1, "agents, checkpoints, matches", _migrate_1),
    (2, "match digests (idempotent batches), one active checkpoint", _migrate_2),
    (3, "human players (name, key hash)", _migrate_3),
    (4, "revocable agents", _migrate_4),
    (5, "match seeds and policies (who played as what)", _migrate_5),
]
assert MIGRATIONS[-1][0] == SCHEMA_VERSION


# ================================================================== engine
def normalise_url(url: str) -> str:
    """``postgresql://`` means psycopg 3 here (the driver the requirements pin)."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def display_url(url: str) -> str:
    """The URL with its password hidden (for logs and errors)."""
    return make_url(url).render_as_string(hide_password=True)


def make_engine(url: str) -> Engine:
    """An engine for ``url``, with SQLite set up for concurrent use (WAL, a 60 s busy
    timeout, transactions that SQLAlchemy begins itself)."""
    url = normalise_url(url)
    u = make_url(url)
    if u.get_backend_name() == "sqlite":
        db = u.database or ""
        if db in ("", ":memory:") or db.startswith("file::memory:"):
            raise ValueError("an in-memory SQLite registry would lose everything at exit; "
                             "give a file: sqlite:///path/registry.db")
        Path(db).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": 60.0})

        @event.listens_for(engine, "connect")
        def _connect(dbapi_conn: Any, _rec: Any) -> None:
            dbapi_conn.isolation_level = None  # we emit BEGIN ourselves (below)
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA busy_timeout=60000")
            cur.close()

        @event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            write = conn.get_execution_options().get("registry_write", False)
            conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

        return engine
    return create_engine(url, pool_size=10, max_overflow=20, pool_pre_ping=True,
                         pool_timeout=60)


@contextmanager
def write_tx(engine: Engine, lock: str | None = None) -> Iterator[Connection]:
    """A write transaction: committed when the block ends, rolled back on an error.

    SQLite: ``BEGIN IMMEDIATE`` (the write lock first, so writers queue instead of
    failing).  ``lock``: the name of a ``registry_locks`` row locked ``FOR UPDATE``
    first (PostgreSQL and the like: serialises the transactions that take it)."""
    with engine.connect() as conn:
        conn.execution_options(registry_write=True)
        with conn.begin():
            if lock is not None and conn.dialect.name != "sqlite":
                conn.execute(select(locks_t.c.name).where(locks_t.c.name == lock)
                             .with_for_update())
            yield conn


@contextmanager
def read_tx(engine: Engine) -> Iterator[Connection]:
    """A read transaction (one consistent snapshot where the database offers one)."""
    with engine.connect() as conn, conn.begin():
        yield conn


def schema_version(engine: Engine) -> int:
    """The database's schema version (0: empty database)."""
    with read_tx(engine) as conn:
        if not engine.dialect.has_table(conn, "registry_migrations"):
            return 0
        return int(conn.execute(select(func.max(migrations_t.c.version))).scalar() or 0)


def migrate(engine: Engine, target: int = SCHEMA_VERSION) -> tuple[int, int]:
    """Bring the database to schema version ``target`` (default: this code's).

    One transaction (DDL is transactional in SQLite and PostgreSQL), serialised
    against a concurrent start (SQLite's write lock; PostgreSQL: a transaction-level
    advisory lock).  Returns (version before, version after).  A database newer than
    this code raises :class:`SchemaTooNew`."""
    if not 1 <= target <= SCHEMA_VERSION:
        raise ValueError(f"target schema version must be 1..{SCHEMA_VERSION}")
    with write_tx(engine) as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(7152019)"))
        _migrations_table(MetaData()).create(conn, checkfirst=True)
        before = int(conn.execute(select(func.max(migrations_t.c.version))).scalar() or 0)
        if before > SCHEMA_VERSION:
            raise SchemaTooNew(
                f"the registry database has schema version {before}, newer than this "
                f"brawlkit's {SCHEMA_VERSION}: upgrade brawlkit to open it")
        for version, description, step in MIGRATIONS:
            if before < version <= target:
                step(conn)
                conn.execute(insert(migrations_t).values(
                    version=version, description=description, applied=utc_now()))
        return before, max(before, target)


# ================================================================== records
@dataclass(frozen=True)
class NewCheckpoint:
    """A validated upload's row (everything but status and upload time)."""

    member: Member
    location: str
    checkpoint_sha256: str
    checkpoint_size: int
    blob_sha256: str | None
    blob_size: int | None


def record_of(row: Any) -> dict[str, Any]:
    """The API's checkpoint record of a database row."""
    return {
        "id": row.id, "role": row.role, "generation": row.generation, "parent": row.parent,
        "created": row.created, "settings": json.loads(row.settings),
        "location": row.location, "checkpoint_sha256": row.checkpoint_sha256,
        "checkpoint_size": row.checkpoint_size, "blob_sha256": row.blob_sha256,
        "blob_size": row.blob_size, "status": row.status, "uploaded": row.uploaded,
        "uploaded_by": row.uploaded_by,
    }


def _registration_order(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """By (created, id) in code-point order, as ``LeagueDir.members()`` lists them."""
    return sorted(records, key=lambda r: (r["created"], r["id"]))


class RegistryDB:
    """The registry's database behind one engine (thread-safe: one connection per
    transaction from the engine's pool)."""

    def __init__(self, url: str, upgrade: bool = True) -> None:
        self.url = normalise_url(url)
        self.engine = make_engine(self.url)
        self.upgraded_from = -1
        if upgrade:
            self.upgraded_from, _ = migrate(self.engine)
        version = schema_version(self.engine)
        if version > SCHEMA_VERSION:
            raise SchemaTooNew(f"the registry database has schema version {version}, newer "
                               f"than this brawlkit's {SCHEMA_VERSION}: upgrade brawlkit")
        if version < SCHEMA_VERSION:
            raise RuntimeError(f"the registry database has schema version {version} < "
                               f"{SCHEMA_VERSION}; open it with upgrade=True to migrate")

    def close(self) -> None:
        self.engine.dispose()

    # ---------------------------------------------------------------- agents
    def add_agent(self, name: str, scope: str, secret: SecretHash) -> None:
        """Create an agent; :class:`Conflict` if the name is taken."""
        try:
            with write_tx(self.engine) as conn:
                if conn.execute(select(agents_t.c.id).where(agents_t.c.id == name)).first():
                    raise Conflict(f"agent {name!r} exists already")
                conn.execute(insert(agents_t).values(
                    id=name, scope=scope, kdf=secret.kdf, salt=secret.salt,
                    secret_hash=secret.digest, created=utc_now()))
        except IntegrityError:
            raise Conflict(f"agent {name!r} exists already") from None

    def agent(self, name: str) -> tuple[SecretHash, str] | None:
        """(stored secret hash, scope) of an agent that is not revoked, or None."""
        with read_tx(self.engine) as conn:
            row = conn.execute(select(agents_t).where(agents_t.c.id == name)).first()
        if row is None or row.revoked is not None:
            return None
        return SecretHash(kdf=row.kdf, salt=row.salt, digest=row.secret_hash), row.scope

    def agent_scope(self, name: str) -> str | None:
        """The scope of a live (existing, not revoked) agent, None otherwise: what every
        authenticated request checks (one primary-key lookup), so a revoked agent's
        tokens die at once instead of at their expiry."""
        a = agents_t.c
        with read_tx(self.engine) as conn:
            row = conn.execute(select(a.scope, a.revoked).where(a.id == name)).first()
        return None if row is None or row.revoked is not None else str(row.scope)

    def revoke_agent(self, name: str) -> dict[str, str]:
        """Revoke an agent (its secret and every token it holds stop working); revoking
        it again keeps the first time.  :class:`NotFound` for an unknown agent."""
        a = agents_t.c
        with write_tx(self.engine) as conn:
            row = conn.execute(select(a.id, a.scope, a.revoked).where(a.id == name)).first()
            if row is None:
                raise NotFound(f"no agent {name!r}")
            revoked = row.revoked or utc_now()
            if row.revoked is None:
                conn.execute(update(agents_t).where(a.id == name).values(revoked=revoked))
        return {"agent_id": name, "scope": str(row.scope), "revoked": revoked}

    def agents(self) -> list[dict[str, str | None]]:
        a = agents_t.c
        with read_tx(self.engine) as conn:
            rows = conn.execute(select(a.id, a.scope, a.created, a.revoked)).all()
        return sorted(({"id": r.id, "scope": r.scope, "created": r.created,
                        "revoked": r.revoked} for r in rows), key=lambda x: str(x["id"]))

    # ---------------------------------------------------------------- players
    def add_player(self, name: str, key: SecretHash) -> str:
        """Create a player; returns its ``created`` time; :class:`Conflict` if the
        name is taken."""
        created = utc_now()
        try:
            with write_tx(self.engine) as conn:
                if conn.execute(select(players_t.c.name)
                                .where(players_t.c.name == name)).first():
                    raise Conflict(f"player name {name!r} is taken")
                conn.execute(insert(players_t).values(
                    name=name, kdf=key.kdf, salt=key.salt, key_hash=key.digest,
                    created=created))
        except IntegrityError:  # a concurrent sign-up of the same name committed first
            raise Conflict(f"player name {name!r} is taken") from None
        return created

    def player(self, name: str) -> SecretHash | None:
        """The stored key hash of a player, or None."""
        with read_tx(self.engine) as conn:
            row = conn.execute(select(players_t).where(players_t.c.name == name)).first()
        if row is None:
            return None
        return SecretHash(kdf=row.kdf, salt=row.salt, digest=row.key_hash)

    def players(self) -> list[dict[str, str]]:
        """Every player's name and sign-up time (never the key hash), by name."""
        with read_tx(self.engine) as conn:
            rows = conn.execute(select(players_t.c.name, players_t.c.created)).all()
        return sorted(({"name": r.name, "created": r.created} for r in rows),
                      key=lambda p: p["name"])

    # ---------------------------------------------------------------- checkpoints
    def add_checkpoint(self, new: NewCheckpoint, by: str) -> tuple[dict[str, Any], bool]:
        """Record an upload: (record, True) when new; (the existing record, False) for
        a repeat of the same id with the same sha256s; :class:`Conflict` when the id
        is registered with other content.  Commits before returning: only then may
        the caller publish the artifacts."""
        m = new.member
        row = {
            "id": m.id, "role": m.role, "generation": m.generation, "parent": m.parent,
            "created": m.created or utc_now(),
            "settings": json.dumps(m.settings, sort_keys=True, ensure_ascii=True,
                                   allow_nan=False),
            "location": new.location, "checkpoint_sha256": new.checkpoint_sha256,
            "checkpoint_size": new.checkpoint_size, "blob_sha256": new.blob_sha256,
            "blob_size": new.blob_size, "status": "registered", "uploaded": utc_now(),
            "uploaded_by": by,
        }
        for _attempt in range(3):
            try:
                with write_tx(self.engine) as conn:
                    old = conn.execute(select(checkpoints_t)
                                       .where(checkpoints_t.c.id == m.id)).first()
                    if old is None and m.parent is not None and conn.execute(
                            select(checkpoints_t.c.id)
                            .where(checkpoints_t.c.id == m.parent)).first() is None:
                        raise Invalid(f"metadata.parent: no checkpoint {m.parent!r} is stored "
                                      "(upload the parent first, or leave parent out)")
                    if old is None:
                        conn.execute(insert(checkpoints_t).values(**row))
                        stored = conn.execute(select(checkpoints_t)
                                              .where(checkpoints_t.c.id == m.id)).one()
                        result = record_of(stored), True
                    else:
                        result = record_of(old), False
            except IntegrityError:  # a concurrent upload of this id committed first
                continue
            rec, created = result
            if not created and (rec["checkpoint_sha256"], rec["blob_sha256"]) != \
                    (new.checkpoint_sha256, new.blob_sha256):
                raise Conflict(
                    f"checkpoint {m.id!r} is registered already with other content "
                    f"(checkpoint_sha256 {rec['checkpoint_sha256']}, blob_sha256 "
                    f"{rec['blob_sha256']})")
            return rec, created
        raise Conflict(f"checkpoint {m.id!r}: concurrent uploads kept colliding; retry")

    def checkpoint(self, checkpoint_id: str) -> dict[str, Any] | None:
        with read_tx(self.engine) as conn:
            row = conn.execute(select(checkpoints_t)
                               .where(checkpoints_t.c.id == checkpoint_id)).first()
        return None if row is None else record_of(row)

    def checkpoints(self, role: str | None = None, status: str | None = None,
                    generation: int | None = None,
                    location: str | None = None) -> list[dict[str, Any]]:
        """Records matching every filter given, in registration order."""
        q = select(checkpoints_t)
        c = checkpoints_t.c
        if role is not None:
            q = q.where(c.role == role)
        if status is not None:
            q = q.where(c.status == status)
        if generation is not None:
            q = q.where(c.generation == generation)
        if location is not None:
            q = q.where(c.location == location)
        with read_tx(self.engine) as conn:
            rows = conn.execute(q).all()
        return _registration_order([record_of(r) for r in rows])

    def members(self) -> list[Member]:
        """Every stored checkpoint as a league :class:`Member`, in registration order
        (what the ratings rate, after the permanent members)."""
        return [Member(id=r["id"], role=r["role"], generation=r["generation"],
                       parent=r["parent"], created=r["created"], settings=r["settings"])
                for r in self.checkpoints()]

    def newest(self, role: str) -> dict[str, Any] | None:
        """The newest non-disabled checkpoint of ``role``: largest generation, then
        latest ``created`` (then largest id, so the answer is unique)."""
        recs = [r for r in self.checkpoints(role=role) if r["status"] != "disabled"]
        if not recs:
            return None
        return max(recs, key=lambda r: (r["generation"], r["created"], r["id"]))

    def active(self) -> dict[str, Any] | None:
        recs = self.checkpoints(status="active")
        return recs[0] if recs else None

    def activate(self, checkpoint_id: str) -> dict[str, Any]:
        """Make ``checkpoint_id`` the one active checkpoint, in one transaction that
        demotes the previous one first (the unique partial index allows no second).
        :class:`NotFound`; :class:`Conflict` for a disabled checkpoint."""
        c = checkpoints_t.c
        with write_tx(self.engine, lock="active") as conn:
            row = conn.execute(select(checkpoints_t).where(c.id == checkpoint_id)).first()
            if row is None:
                raise NotFound(f"no checkpoint {checkpoint_id!r}")
            if row.status == "disabled":
                raise Conflict(f"checkpoint {checkpoint_id!r} is disabled and cannot be "
                               "activated")
            if row.status != "active":
                conn.execute(update(checkpoints_t)
                             .where(c.status == "active", c.id != checkpoint_id)
                             .values(status="registered"))
                conn.execute(update(checkpoints_t).where(c.id == checkpoint_id)
                             .values(status="active"))
            row = conn.execute(select(checkpoints_t).where(c.id == checkpoint_id)).one()
        return record_of(row)

    def disable(self, checkpoint_id: str) -> dict[str, Any]:
        """Mark ``checkpoint_id`` disabled (kept, never served as active or newest);
        if it was the active one, none is active afterwards.  :class:`NotFound`."""
        c = checkpoints_t.c
        with write_tx(self.engine, lock="active") as conn:
            row = conn.execute(select(checkpoints_t).where(c.id == checkpoint_id)).first()
            if row is None:
                raise NotFound(f"no checkpoint {checkpoint_id!r}")
            conn.execute(update(checkpoints_t).where(c.id == checkpoint_id)
                         .values(status="disabled"))
            row = conn.execute(select(checkpoints_t).where(c.id == checkpoint_id)).one()
        return record_of(row)

    def referenced_hashes(self) -> set[str]:
        """Every sha256 a record refers to (the store's recovery keeps these)."""
        c = checkpoints_t.c
        with read_tx(self.engine) as conn:
            rows = conn.execute(select(c.checkpoint_sha256, c.blob_sha256)).all()
        return {h for r in rows for h in r if h is not None}

    # ---------------------------------------------------------------- matches
    def add_matches(self, recs: list[MatchRecord], by: str) -> tuple[int, int]:
        """Store a batch of matches, all or nothing; a match whose content is stored
        already (or repeats within the batch) is not stored twice.  Returns
        (accepted, duplicates)."""
        batch: dict[str, MatchRecord] = {}
        for r in recs:
            batch.setdefault(match_digest(r), r)
        now = utc_now()
        for _attempt in range(3):
            try:
                with write_tx(self.engine, lock="matches") as conn:
                    known: set[str] = set()
                    digests = list(batch)
                    for i in range(0, len(digests), 500):
                        known.update(conn.execute(
                            select(matches_t.c.digest)
                            .where(matches_t.c.digest.in_(digests[i:i + 500]))).scalars())
                    new = [{"time": r.time, "a": r.a, "b": r.b, "result": r.result,
                            "ticks": r.ticks, "source": r.source, "seed": r.seed,
                            "a_policy": r.a_policy, "b_policy": r.b_policy, "received": now,
                            "received_by": by, "digest": d}
                           for d, r in batch.items() if d not in known]
                    if new:
                        conn.execute(insert(matches_t), new)
            except IntegrityError:  # a concurrent batch stored some of these first
                continue
            return len(new), len(recs) - len(new)
        raise Conflict("concurrent match batches kept colliding; retry")

    def ratings_state(self) -> tuple[int, int, str]:
        """What the ratings depend on, cheaply: (largest match seq, checkpoints,
        latest upload time) — two index lookups and a count of the (few) checkpoints,
        never a scan of the matches.  Matches and checkpoints are never deleted or
        changed (a status is not rated) and a new match gets a larger seq, so an
        unchanged state means unchanged ratings: the key of the service's ratings
        cache."""
        m, c = matches_t.c, checkpoints_t.c
        with read_tx(self.engine) as conn:
            top = conn.execute(select(func.max(m.seq))).scalar()
            k, last = conn.execute(select(func.count(), func.max(c.uploaded))).one()
        return int(top or 0), int(k), str(last or "")

    def stored(self, recs: list[MatchRecord]) -> list[bool]:
        """For each record: is a match of that content stored already?"""
        digests = [match_digest(r) for r in recs]
        known: set[str] = set()
        with read_tx(self.engine) as conn:
            for i in range(0, len(digests), 500):
                known.update(conn.execute(
                    select(matches_t.c.digest)
                    .where(matches_t.c.digest.in_(digests[i:i + 500]))).scalars())
        return [d in known for d in digests]

    def matches(self, since: float | None = None) -> list[MatchRecord]:
        """Every stored match (``time >= since`` if given) in the canonical replay
        order, :attr:`MatchRecord.sort_key` — sorted here, not by the database."""
        m = matches_t.c
        q = select(m.time, m.a, m.b, m.result, m.ticks, m.source, m.seed, m.a_policy, m.b_policy)
        if since is not None:
            q = q.where(m.time >= since)
        with read_tx(self.engine) as conn:
            rows = conn.execute(q).tuples().all()
        recs = [_match_of(r) for r in rows]
        recs.sort(key=lambda r: r.sort_key)
        return recs

    def matches_after(self, seq: int) -> tuple[list[MatchRecord], int]:
        """The matches stored after row ``seq`` (in no particular order) and the largest
        seq now: what the ratings cache adds to the log it keeps.  Rows of a later
        batch always have larger seqs (batches insert one at a time: SQLite's write
        lock, PostgreSQL's ``matches`` lock row)."""
        m = matches_t.c
        q = select(m.seq, m.time, m.a, m.b, m.result, m.ticks, m.source, m.seed, m.a_policy,
                   m.b_policy).where(m.seq > seq)
        with read_tx(self.engine) as conn:
            rows = conn.execute(q).tuples().all()
        return [_match_of(r[1:]) for r in rows], max((r[0] for r in rows), default=seq)


def create_agent(db_url: str, name: str, scope: str) -> str:
    """A new agent in the registry database at ``db_url``; its secret (the database keeps
    only a hash, so this is the one time it is seen). For programs that set up a
    registry of their own — the league page's screenshot tool, the tests; a person uses
    ``registry add-agent``."""
    secret = new_secret()
    db = RegistryDB(db_url)
    try:
        db.add_agent(name, scope, hash_secret(secret))
    finally:
        db.close()
    return secret
