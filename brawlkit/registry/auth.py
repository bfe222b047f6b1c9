"""Agents, secrets and bearer tokens of the registry (standard library only).

Who may do what: every client is an *agent* with a name, a scope and a secret.
Scopes are ordered, ``read`` < ``write`` < ``admin``: a scope allows everything
the lower ones do (read: list and download; write: upload checkpoints and
matches; admin: activate and disable).

Why these choices:

* The secret is shown once, when the agent is created, and only a salted slow
  hash of it is stored (``hashlib.scrypt``, a fresh 16-byte salt per agent): a
  copy of the database does not give away a secret that could be replayed, and
  guessing one offline costs real memory and time per guess.
* A client trades its secret for a short-lived bearer token (``POST /auth/token``),
  so the secret crosses the wire once per session and a leaked token expires by
  itself.  A token is ``<payload>.<signature>``: the payload is base64url JSON of
  the agent id, its scope and the expiry; the signature is HMAC-SHA256 of the
  payload under a server key kept in the data directory (``token.key``, created
  with mode 0600 on first start).  Verifying needs no database round trip.
* Every comparison of secret material uses :func:`hmac.compare_digest` (constant
  time), and an unknown agent costs the same hash as a known one, so timing tells
  nothing about which agents exist.

Human players (docs/registry.md, "Players and tickets") get the same treatment:
a player's key is hashed like an agent's secret, and it is traded for a
*ticket* — ``pt1:NAME:EXPIRY:SIG``, printable ASCII of at most
:data:`MAX_TICKET_CHARS` (it travels in the game's 192-byte IDENT field) — that a
bot passes on with the matches it played against that person.  SIG is
HMAC-SHA256 under a key derived from the token key for tickets only, so a ticket
can never pass as a bearer token nor the other way round.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import stat
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

#: scopes, weakest first: a scope allows everything of the ones before it
Scope = Literal["read", "write", "admin"]
SCOPES: tuple[str, ...] = get_args(Scope)
TOKEN_KEY_FILE = "token.key"
#: scrypt cost: 2**14 x 8 x 128 B = 16 MiB and 60-100 ms per hash on these machines
SCRYPT_N, SCRYPT_R, SCRYPT_P = 1 << 14, 8, 1
SCRYPT_DKLEN = 32
KDF = f"scrypt:n={SCRYPT_N},r={SCRYPT_R},p={SCRYPT_P}"
TOKEN_VERSION = 1
#: a token longer than this is refused before any work (the real ones are ~150 bytes)
MAX_TOKEN_CHARS = 2048
TICKET_VERSION = "pt1"
#: a ticket fits the wire's ticket field (BP_TICKET_LEN 192 with its NUL); real ones
#: are at most 3 + 1 + 24 + 1 + 10 + 1 + 43 = 83 characters
MAX_TICKET_CHARS = 191
#: default lifetime of a player ticket: one evening of play
TICKET_TTL_S = 4 * 3600


class AuthError(Exception):
    """A token that is missing, malformed, forged or expired (HTTP 401)."""


def scope_allows(have: str, need: str) -> bool:
    """True when an agent of scope ``have`` may do what needs ``need``."""
    if have not in SCOPES or need not in SCOPES:
        return False
    return SCOPES.index(have) >= SCOPES.index(need)


def new_secret() -> str:
    """A fresh agent secret: 32 random bytes, URL-safe text (~43 characters)."""
    return secrets.token_urlsafe(32)


def _scrypt(secret: str, salt: bytes) -> bytes:
    return hashlib.scrypt(secret.encode("utf-8", "surrogatepass"), salt=salt, n=SCRYPT_N,
                          r=SCRYPT_R, p=SCRYPT_P, maxmem=64 << 20, dklen=SCRYPT_DKLEN)


@dataclass(frozen=True)
class SecretHash:
    """What the database keeps of a secret: the KDF with its parameters, the salt and
    the derived key (hex).  ``kdf`` is stored so the cost can be raised later without
    invalidating the hashes already made."""

    kdf: str
    salt: str
    digest: str


def hash_secret(secret: str, salt: bytes | None = None) -> SecretHash:
    """scrypt of ``secret`` with a fresh random salt (or ``salt``, for tests)."""
    salt = secrets.token_bytes(16) if salt is None else salt
    return SecretHash(kdf=KDF, salt=salt.hex(), digest=_scrypt(secret, salt).hex())


#: compared against when the agent does not exist, so a miss costs a full hash too
_DUMMY = SecretHash(kdf=KDF, salt="00" * 16, digest="00" * SCRYPT_DKLEN)


def verify_secret(secret: str, stored: SecretHash | None) -> bool:
    """Does ``secret`` match ``stored``?  Constant-time comparison; ``stored`` None
    (unknown agent) spends the same hash and answers False."""
    ref = stored or _DUMMY
    if ref.kdf != KDF:  # a hash made with other parameters: derive with those
        try:
            params = dict(p.split("=", 1) for p in ref.kdf.removeprefix("scrypt:").split(","))
            key = hashlib.scrypt(secret.encode("utf-8", "surrogatepass"),
                                 salt=bytes.fromhex(ref.salt), n=int(params["n"]),
                                 r=int(params["r"]), p=int(params["p"]), maxmem=256 << 20,
                                 dklen=len(bytes.fromhex(ref.digest)))
        except (KeyError, ValueError):
            return False
    else:
        key = _scrypt(secret, bytes.fromhex(ref.salt))
    ok = hmac.compare_digest(key, bytes.fromhex(ref.digest))
    return ok and stored is not None


# ---------------------------------------------------------------- tokens
def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class Claims:
    """What a valid token says: the agent, its scope, when it expires (epoch s)."""

    agent_id: str
    scope: str
    expires: int


@dataclass(frozen=True)
class Ticket:
    """What a valid player ticket says: the player's name and its expiry (epoch s)."""

    name: str
    expires: int


def ticket_player(ticket: str) -> str | None:
    """The player NAME a ticket claims, WITHOUT checking it (None if it is not shaped
    like a ticket): what a bot needs to name the match ``player:NAME``; the registry
    verifies the ticket when the match is posted."""
    parts = ticket.split(":") if isinstance(ticket, str) else []
    if len(parts) != 4 or parts[0] != TICKET_VERSION or len(ticket) > MAX_TICKET_CHARS:
        return None
    return parts[1] or None


def write_once(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Create ``path`` holding ``data`` unless it exists: a temp file (``mode`` from
    the start, never readable by others even for an instant), fsynced, published
    with ``os.link``, which fails if another process made ``path`` first — then
    theirs stays.  A data directory's files made once (the token key, the database
    it belongs to) are made this way."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        os.write(fd, data)
        os.fsync(fd)
        os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
    finally:
        tmp.unlink(missing_ok=True)


class TokenSigner:
    """Issues and verifies the registry's bearer tokens with one server key.

    The key lives in ``DIR/token.key`` (64 hex characters, mode 0600), created on the
    first start: tokens survive a restart of the service, and a new key (delete the
    file) invalidates every token at once.
    """

    def __init__(self, key: bytes) -> None:
        if len(key) < 32:
            raise ValueError("the token key must have at least 32 bytes")
        self._key = key

    @classmethod
    def from_data_dir(cls, data_dir: str | os.PathLike[str]) -> TokenSigner:
        """The signer of ``data_dir``'s key, creating the key (0600) if there is none.

        Created as a temp file (0600 from the start, never world-readable even for an
        instant), fsynced, then published with ``os.link``, which fails if another
        process made the key first; then that key is used."""
        path = Path(data_dir) / TOKEN_KEY_FILE
        if not path.exists():
            write_once(path, secrets.token_hex(32).encode("ascii") + b"\n", 0o600)
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            warnings.warn(f"{path} was readable by others (mode {mode:o}); set to 0600",
                          stacklevel=2)
            os.chmod(path, 0o600)
        key = bytes.fromhex(path.read_text(encoding="ascii").strip())
        return cls(key)

    def _sign(self, payload: str) -> str:
        return _b64(hmac.new(self._key, payload.encode("ascii"), hashlib.sha256).digest())

    def _ticket_sig(self, payload: str) -> str:
        sub = hmac.new(self._key, b"brawlkit player tickets v1", hashlib.sha256).digest()
        return _b64(hmac.new(sub, payload.encode("ascii"), hashlib.sha256).digest())

    def issue_ticket(self, name: str, ttl: int = TICKET_TTL_S, now: float | None = None) -> str:
        """A ticket for player ``name`` (a valid player name: no ``:``) that expires
        ``ttl`` seconds from now."""
        if not name or ":" in name or not name.isascii() or not name.isprintable():
            raise ValueError(f"not a player name: {name!r}")
        exp = int(time.time() if now is None else now) + int(ttl)
        payload = f"{TICKET_VERSION}:{name}:{exp}"
        ticket = f"{payload}:{self._ticket_sig(payload)}"
        assert len(ticket) <= MAX_TICKET_CHARS
        return ticket

    def verify_ticket(self, ticket: str, now: float | None = None) -> Ticket:
        """The :class:`Ticket` of a valid, unexpired ticket; :class:`AuthError` saying
        why otherwise (signature checked in constant time before the rest is read)."""
        if not isinstance(ticket, str) or not ticket or len(ticket) > MAX_TICKET_CHARS \
                or not ticket.isascii() or ticket.count(":") != 3:
            raise AuthError("malformed ticket")
        payload, sig = ticket.rsplit(":", 1)
        if not hmac.compare_digest(self._ticket_sig(payload).encode("ascii"),
                                   sig.encode("ascii")):
            raise AuthError("invalid ticket signature")
        version, name, exp = payload.split(":")
        if version != TICKET_VERSION or not exp.isdigit() or not name:
            raise AuthError("malformed ticket")
        if int(exp) <= (time.time() if now is None else now):
            raise AuthError("ticket expired")
        return Ticket(name=name, expires=int(exp))

    def issue(self, agent_id: str, scope: str, ttl: int, now: float | None = None) -> str:
        """A token for ``agent_id`` with ``scope`` that expires ``ttl`` seconds from now."""
        if scope not in SCOPES:
            raise ValueError(f"unknown scope {scope!r}")
        exp = int(time.time() if now is None else now) + int(ttl)
        body = {"v": TOKEN_VERSION, "sub": agent_id, "scope": scope, "exp": exp}
        payload = _b64(json.dumps(body, separators=(",", ":"), sort_keys=True).encode("utf-8"))
        return f"{payload}.{self._sign(payload)}"

    def verify(self, token: str, now: float | None = None) -> Claims:
        """The claims of a valid token; :class:`AuthError` saying why otherwise.

        The signature is checked (constant time) before the payload is even decoded,
        so nothing a forger wrote is parsed."""
        if not token or len(token) > MAX_TOKEN_CHARS or token.count(".") != 1:
            raise AuthError("malformed token")
        payload, sig = token.split(".")
        try:
            payload.encode("ascii")
            sig_ok = hmac.compare_digest(self._sign(payload).encode("ascii"),
                                         sig.encode("ascii", "replace"))
        except UnicodeEncodeError:
            raise AuthError("malformed token") from None
        if not sig_ok:
            raise AuthError("invalid token signature")
        try:
            body = json.loads(_unb64(payload))
            claims = Claims(agent_id=str(body["sub"]), scope=str(body["scope"]),
                            expires=int(body["exp"]))
            if body.get("v") != TOKEN_VERSION:
                raise ValueError
        except (ValueError, KeyError, TypeError):
            raise AuthError("malformed token") from None
        if claims.scope not in SCOPES:
            raise AuthError("token with an unknown scope")
        if claims.expires <= (time.time() if now is None else now):
            raise AuthError("token expired")
        return claims
