"""One database per registry: the data directory remembers the database it serves.

A data directory (``--data DIR``) holds the artifact store and the token key; the
database may be elsewhere (``--db URL``).  Both halves must stay together: an agent
created in another database than the one the service reads gets 401 with no hint
why, and a store served with another database's records is garbage.  So
``registry serve`` writes the database's identity to ``DIR/database.url`` the first
time, and ``serve``, ``add-agent``, ``add-player`` and ``revoke-agent`` refuse,
naming both, to use a data directory with another database.

What is written: the URL as SQLAlchemy normalises it (``postgresql://`` read as
psycopg 3, SQLite's path made absolute) **with the password removed** — the
password is a secret that does not tell databases apart; user, host, port,
database name and query (e.g. a PostgreSQL ``search_path``) do.  Plain text, so a
person can read (and, moving a database, edit) it.
"""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy.engine import URL, make_url

from brawlkit.registry.auth import write_once
from brawlkit.registry.database import normalise_url

URL_FILE = "database.url"
DEFAULT_DB = "registry.db"


def default_url(data: str | os.PathLike[str]) -> str:
    """The database of ``data`` when no ``--db`` is given: ``DIR/registry.db``."""
    return f"sqlite:///{Path(data).resolve() / DEFAULT_DB}"


def identity(url: str) -> str:
    """What tells two database URLs apart: the normalised URL without its password
    (a SQLite path made absolute)."""
    u = make_url(normalise_url(url))
    if u.get_backend_name() == "sqlite" and u.database and u.database != ":memory:":
        u = u.set(database=str(Path(u.database).expanduser().resolve()))
    # (URL.set(password=None) keeps the password: None there means "unchanged")
    bare = URL.create(u.drivername, username=u.username, host=u.host, port=u.port,
                      database=u.database, query=u.query)
    return bare.render_as_string(hide_password=False)


def remembered(data: str | os.PathLike[str]) -> str | None:
    """The identity ``data`` remembers (None: no service has run on it yet)."""
    try:
        return (Path(data) / URL_FILE).read_text(encoding="utf-8").strip() or None
    except FileNotFoundError:
        return None


def mismatch(data: str | os.PathLike[str], url: str) -> str:
    """Why ``url`` is not the database of ``data`` ('' when it is, or when ``data``
    remembers none): the message names both."""
    have = remembered(data)
    want = identity(url)
    if have is None or have == want:
        return ""
    return (f"the data directory {data} belongs to the database {have} ({URL_FILE}), "
            f"not to {want}: pass --db with the directory's database (or the --data of "
            f"that database)")


def remember(data: str | os.PathLike[str], url: str) -> None:
    """Write ``url``'s identity to ``data`` if it remembers none yet (atomically, by
    ``os.link``: of two first starts, one writes and the other then compares)."""
    path = Path(data) / URL_FILE
    if not path.exists():
        write_once(path, (identity(url) + "\n").encode("utf-8"))
