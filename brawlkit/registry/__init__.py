"""The checkpoint registry: one HTTP service that many machines' leagues share.

A league directory (:mod:`brawlkit.league.directory`) is shared by the processes of one
machine.  The registry is what several machines (or a team) share: the checkpoints
every league registered (their records, SB3 zips and ``.bpw`` blobs), the match log,
the ratings computed from it exactly as a local league computes them, and which
checkpoint is *the* active one that bots should play.

* :mod:`~brawlkit.registry.service` — the FastAPI app (``/openapi.json`` is the
  API reference; docs/registry.md summarises it), assembled from
  :mod:`~brawlkit.registry.routes` (one router per part of the API),
  :mod:`~brawlkit.registry.schemas` (the request and answer models),
  :mod:`~brawlkit.registry.deps` (the registry, the token check of each scope),
  :mod:`~brawlkit.registry.multipart_upload` (the upload's streaming parser) and
  :mod:`~brawlkit.registry.body_limit` (the request-size limit);
* :mod:`~brawlkit.registry.database` — SQLAlchemy Core schema, versioned
  migrations, the transactions (SQLite in WAL mode by default, any SQLAlchemy URL,
  PostgreSQL via psycopg, for a team);
* :mod:`~brawlkit.registry.store` — the content-addressed artifact store
  (``DIR/blobs/<sha256[:2]>/<sha256>``);
* :mod:`~brawlkit.registry.auth` — agents, salted slow secret hashes, signed
  short-lived bearer tokens, scopes read < write < admin;
* :mod:`~brawlkit.registry.client` — what an agent (or a player's game) uses to
  talk to a registry: tokens, retries, verified downloads;
* :mod:`~brawlkit.registry.sync` — mirroring a registry into a league directory;
* :mod:`~brawlkit.registry.cli` — ``python -m brawlkit registry serve|add-agent|...``.

Heavy imports (FastAPI, SQLAlchemy, uvicorn) live in those modules, never here, so
importing the package costs nothing.
"""
