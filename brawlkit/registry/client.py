"""The registry client: what a training run, a bot or a notebook uses to share one
league through a ``python -m brawlkit registry serve`` service (docs/registry.md).

* Credentials come from the environment (``BRAWLKIT_AGENT_ID`` /
  ``BRAWLKIT_AGENT_SECRET``, or Colab's secrets), never from the command line.
  They are needed only by the requests that need a token: a human's client signs
  up (:meth:`RegistryClient.register_player`) and fetches its tickets
  (:meth:`RegistryClient.player_ticket`, key from ``BRAWLKIT_PLAYER_KEY``) without.
* A bearer token is fetched on first use and refreshed before it expires (and once
  more on a 401).
* Connection errors and 5xx answers are retried with exponential backoff; 4xx
  never are (the request itself is wrong, or not allowed) — except 429 (over the
  service's request rate), which is retried after its ``Retry-After``.
* Every download is checked against its sha256 and kept in a local cache keyed by
  that sha256, so a file is fetched once per machine.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import requests

from brawlkit.league.records import MatchRecord, Member

ENV_AGENT_ID = "BRAWLKIT_AGENT_ID"
ENV_AGENT_SECRET = "BRAWLKIT_AGENT_SECRET"
#: a human player's key (POST /players printed it once); never on a command line
ENV_PLAYER_KEY = "BRAWLKIT_PLAYER_KEY"
#: retries of a connection error, a timeout or a 5xx, with backoff 0.5, 1, 2, ... s
#: (about 15 s in all before the registry counts as down; $BRAWLKIT_REGISTRY_RETRIES)
RETRIES = 5
ENV_RETRIES = "BRAWLKIT_REGISTRY_RETRIES"
#: where verified downloads are cached (default ~/.cache/brawlkit/registry)
ENV_CACHE = "BRAWLKIT_REGISTRY_CACHE"
BACKOFF_S = 0.5
#: refresh a token this long before it expires
REFRESH_MARGIN_S = 30.0
TIMEOUT_S = 30.0
#: the longest ``Retry-After`` of a 429 the client waits for before it retries
MAX_RETRY_AFTER_S = 60.0


class RegistryError(RuntimeError):
    """The registry refused a request (4xx, with its message) or stayed unreachable."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class RegistryUnavailable(RegistryError):
    """No answer (or only 5xx) after every retry: the registry is down."""


def credentials() -> tuple[str, str]:
    """(agent id, secret) from the environment, or from Colab's secrets when running there."""
    agent, secret = os.environ.get(ENV_AGENT_ID), os.environ.get(ENV_AGENT_SECRET)
    if (not agent or not secret):
        try:  # Colab keeps secrets out of the notebook's text
            from google.colab import userdata  # type: ignore[import-not-found]

            agent = agent or userdata.get(ENV_AGENT_ID)
            secret = secret or userdata.get(ENV_AGENT_SECRET)
        except Exception:  # noqa: BLE001 - not in Colab, or the secret is not set
            pass
    if not agent or not secret:
        raise RegistryError(f"no registry credentials: set {ENV_AGENT_ID} and {ENV_AGENT_SECRET} "
                            "(python -m brawlkit registry add-agent NAME prints a secret)")
    return agent, secret


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class RegistryClient:
    """One agent's session with a registry at ``url`` (``http://host:port``)."""

    def __init__(self, url: str, agent_id: str | None = None, secret: str | None = None,
                 cache_dir: str | Path | None = None, retries: int | None = None,
                 backoff_s: float = BACKOFF_S) -> None:
        self.url = url.rstrip("/")
        self._no_credentials: RegistryError | None = None
        if agent_id is None or secret is None:
            try:
                agent_id, secret = credentials()
            except RegistryError as e:  # fine for a player's client; raised on first use
                self._no_credentials = e
        self.agent_id, self._secret = agent_id, secret
        self.cache_dir = Path(cache_dir or os.environ.get(ENV_CACHE)
                              or Path.home() / ".cache" / "brawlkit" / "registry")
        if retries is None:
            retries = int(os.environ.get(ENV_RETRIES, RETRIES))
        self.retries, self.backoff_s = retries, backoff_s
        self._token: str | None = None
        self._expires = 0.0
        self.session = requests.Session()

    def twin(self) -> RegistryClient:
        """A client of the same registry, agent and cache with a session of its own:
        for another thread (a ``requests.Session`` is not meant to be shared)."""
        return RegistryClient(self.url, self.agent_id, self._secret, self.cache_dir,
                              self.retries, self.backoff_s)

    # ---------------------------------------------------------------- plumbing
    def _fresh_token(self) -> str:
        if self._no_credentials is not None:
            raise self._no_credentials
        if self._token is None or time.time() > self._expires - REFRESH_MARGIN_S:
            r = self._send("POST", "/auth/token", auth=False,
                           json={"agent_id": self.agent_id, "secret": self._secret})
            body = r.json()
            self._token = str(body["access_token"])
            self._expires = time.time() + float(body.get("expires_in", 300))
        return self._token

    def _send(self, method: str, path: str, auth: bool = True, **kw: Any) -> requests.Response:
        """One request with retries on connection errors / 5xx; 4xx raise at once."""
        refreshed = False
        for attempt in range(self.retries + 1):
            headers = dict(kw.pop("headers", {}) or {})
            if auth:
                headers["Authorization"] = f"Bearer {self._fresh_token()}"
            try:
                r = self.session.request(method, self.url + path, headers=headers,
                                         timeout=TIMEOUT_S, **kw)
            except (requests.ConnectionError, requests.Timeout) as e:
                last: str = f"{type(e).__name__}: {e}"
            else:
                if r.status_code == 401 and auth and not refreshed:
                    self._token, refreshed = None, True  # expired early: one fresh token
                    continue
                if r.status_code == 429 and attempt < self.retries:
                    time.sleep(_retry_after(r))
                    continue
                if r.status_code < 500:
                    if r.status_code >= 400:
                        raise RegistryError(f"{method} {path}: {r.status_code} {_detail(r)}",
                                            r.status_code)
                    return r
                last = f"{r.status_code} {_detail(r)}"
            if attempt < self.retries:
                time.sleep(self.backoff_s * 2 ** attempt)
        raise RegistryUnavailable(f"registry {self.url} unavailable for {method} {path}: {last}")

    def _download(self, path: str, expect: str | None, header: str = "X-Content-SHA256") -> bytes:
        """Bytes of ``path``, verified against ``expect`` (or the response's sha256 header)
        and cached by that sha256."""
        if expect:
            cached = self.cache_dir / expect[:2] / expect
            if cached.is_file() and sha256_of(cached.read_bytes()) == expect:
                return cached.read_bytes()
        r = self._send("GET", path)
        data = r.content
        want = expect or r.headers.get(header)
        got = sha256_of(data)
        if not want or got != want:
            raise RegistryError(f"GET {path}: sha256 {got} does not match {want!r}")
        cached = self.cache_dir / got[:2] / got
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_name(cached.name + f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(cached)
        return data

    # ---------------------------------------------------------------- checkpoints
    def upload(self, member: Member, checkpoint: Path | bytes, blob: Path | bytes | None = None,
               location: str = "") -> dict[str, Any]:
        """Push a member (its record, zip and optional .bpw); the same upload twice
        returns the existing record.  ``checkpoint`` / ``blob`` are files or their
        bytes (what a league directory's :meth:`~brawlkit.league.directory.LeagueDir.read_artifact`
        read under its confined-read rule)."""
        # bytes, not open files: a retried request must send the whole body again
        ckpt = checkpoint if isinstance(checkpoint, bytes) else Path(checkpoint).read_bytes()
        meta = {**member.to_json(), "location": location, "checkpoint_sha256": sha256_of(ckpt)}
        files: dict[str, Any] = {"checkpoint": (_part_name(checkpoint, member.id, ".zip"), ckpt,
                                                "application/zip")}
        if blob is not None:
            data = blob if isinstance(blob, bytes) else Path(blob).read_bytes()
            meta["blob_sha256"] = sha256_of(data)
            files["blob"] = (_part_name(blob, member.id, ".bpw"), data, "application/octet-stream")
        r = self._send("POST", "/checkpoints", data={"metadata": json.dumps(meta)}, files=files)
        out: dict[str, Any] = r.json()
        return out

    def checkpoints(self, **filters: Any) -> list[dict[str, Any]]:
        params = {k: v for k, v in filters.items() if v is not None}
        out: list[dict[str, Any]] = self._send("GET", "/checkpoints", params=params).json()
        return out

    def checkpoint(self, member_id: str) -> dict[str, Any]:
        out: dict[str, Any] = self._send("GET", f"/checkpoints/{_q(member_id)}").json()
        return out

    def newest(self, role: str) -> dict[str, Any] | None:
        try:
            out: dict[str, Any] = self._send("GET", f"/roles/{_q(role)}/newest").json()
            return out
        except RegistryError as e:
            if e.status == 404:
                return None
            raise

    def download_checkpoint(self, record: dict[str, Any]) -> bytes:
        return self._download(f"/checkpoints/{_q(record['id'])}/checkpoint",
                              record.get("checkpoint_sha256"))

    def download_blob(self, record: dict[str, Any], compression: str = "lz4") -> bytes:
        """The raw .bpw (the LZ4 transfer is undone and the raw sha256 checked)."""
        from brawlkit.export.bpw import unwrap_blob

        data = self._download(f"/checkpoints/{_q(record['id'])}/blob?compression={compression}", None)
        raw = unwrap_blob(data)
        if record.get("blob_sha256") and sha256_of(raw) != record["blob_sha256"]:
            raise RegistryError(f"blob of {record['id']}: sha256 does not match the record")
        return raw

    def active(self) -> dict[str, Any] | None:
        """The active checkpoint's record (the default opponent of human players), or
        None when no checkpoint is active (``GET /active``: 404)."""
        try:
            out: dict[str, Any] = self._send("GET", "/active").json()
            return out
        except RegistryError as e:
            if e.status == 404:
                return None
            raise

    def active_blob(self) -> tuple[dict[str, Any], bytes] | None:
        """(record, raw .bpw) of the active checkpoint, or None when none is active or
        it has no blob.  The blob travels as LZ4 (as every blob does) and is checked
        against the record's sha256; what a bot fetches at start, and again before a
        match to pick up a new active one without a restart."""
        rec = self.active()
        if rec is None or not rec.get("blob_sha256"):
            return None
        return rec, self.download_blob(rec)

    def activate(self, member_id: str) -> dict[str, Any]:
        out: dict[str, Any] = self._send("POST", f"/checkpoints/{_q(member_id)}/activate").json()
        return out

    def disable(self, member_id: str) -> dict[str, Any]:
        out: dict[str, Any] = self._send("POST", f"/checkpoints/{_q(member_id)}/disable").json()
        return out

    # ---------------------------------------------------------------- players
    def register_player(self, name: str) -> str:
        """Sign up the human player ``name`` (no agent credentials needed); returns its
        key, which the registry shows only this once.  409 (taken) and 422 (not a
        valid name) raise :class:`RegistryError`.  Connection errors and 5xx are
        retried as everywhere; if a 201 was lost on the way, the retry gets 409 and
        that name's key is gone with it (sign up another name)."""
        r = self._send("POST", "/players", auth=False, json={"name": name})
        return str(r.json()["key"])

    def player_ticket(self, name: str, key: str | None = None) -> str:
        """A fresh ticket of player ``name`` (key: ``key`` or $BRAWLKIT_PLAYER_KEY) for
        the game's IDENT; a wrong key or unknown name raises :class:`RegistryError`
        (status 401)."""
        key = key or os.environ.get(ENV_PLAYER_KEY)
        if not key:
            raise RegistryError(f"no player key: set {ENV_PLAYER_KEY} (POST /players or "
                                "registry add-player printed it once)")
        r = self._send("POST", f"/players/{_q(name)}/ticket", auth=False,
                       headers={"X-Player-Key": key})
        return str(r.json()["ticket"])

    def players(self) -> list[dict[str, Any]]:
        """Every player's name and sign-up time."""
        out: list[dict[str, Any]] = self._send("GET", "/players").json()
        return out

    # ---------------------------------------------------------------- matches and ratings
    def post_matches(self, matches: Sequence[MatchRecord],
                     tickets: Mapping[int, str | Sequence[str]] | None = None) -> dict[str, Any]:
        """Store ``matches`` (all or nothing; resending is safe).  ``tickets[i]``: the
        ticket (or two, for two players) proving the ``player:NAME`` side(s) of
        ``matches[i]``; every such record needs one (403 otherwise, not retried)."""
        tickets = dict(tickets or {})
        if any(not 0 <= i < len(matches) for i in tickets):
            raise ValueError(f"tickets name records outside 0..{len(matches) - 1}")
        body = []
        for i, m in enumerate(matches):
            d = m.to_json()
            if i in tickets:
                t = tickets[i]
                d["ticket"] = t if isinstance(t, str) else list(t)
            body.append(d)
        out: dict[str, Any] = self._send("POST", "/matches", json=body).json()
        return out

    def matches(self) -> list[MatchRecord]:
        """Every stored match, in replay order.  A record the match-record rule refuses
        (one a registry stored before the rule was stricter: a time outside the window)
        is skipped with a warning naming it, never the whole pull."""
        out: list[MatchRecord] = []
        for i, d in enumerate(self._send("GET", "/matches").json()):
            try:
                out.append(MatchRecord.from_json(d))
            except ValueError as e:
                warnings.warn(f"registry match {i} skipped: {e}", stacklevel=2)
        return out

    def ratings(self) -> dict[str, Any]:
        out: dict[str, Any] = self._send("GET", "/ratings").json()
        return out


def _retry_after(r: requests.Response) -> float:
    """The seconds a 429 asks to wait (its ``Retry-After``), bounded."""
    try:
        wait = float(r.headers.get("Retry-After", "1"))
    except ValueError:
        wait = 1.0
    return min(MAX_RETRY_AFTER_S, max(0.0, wait)) if wait == wait else 1.0


def _q(name: str) -> str:
    """A member id or role as one URL path segment (ids may hold ``:``, ``?``, ``#``)."""
    return quote(str(name), safe="")


def _detail(r: requests.Response) -> str:
    try:
        body = r.json()
    except ValueError:
        return r.text[:200]
    if isinstance(body, dict) and "detail" in body:
        return str(body["detail"])[:300]
    return str(body)[:300]


def _part_name(source: Path | bytes, member_id: str, suffix: str) -> str:
    """The file name of an upload's part: the file's, or ``<id><suffix>`` for bytes."""
    return member_id + suffix if isinstance(source, bytes) else Path(source).name
