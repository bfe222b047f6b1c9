"""``python -m brawlkit bench registry``: a real ``registry serve`` under a league's load.

Two measurements, each against a fresh ``python -m brawlkit registry serve`` process
on a kernel-chosen port of 127.0.0.1 (SQLite in a temp directory, or ``--db URL``,
e.g. a PostgreSQL database):

* ``--mode load`` (default): for ``--seconds`` (180), three *training locations*
  (write agents) each register a generation (an SB3-sized zip and a ``.bpw``) every
  ``--generation-s`` seconds and post a batch of 50 matches every 2 s; fifty
  *readers* (five read agents) each poll ``GET /ratings`` and ``GET /checkpoints``
  about once a second; one *bot pool* posts one match every 0.2 s and reads
  ``/active``.  Reported per kind of request: count, requests/s, p50 and p99
  latency, errors (anything but the expected answer, or no answer: must be 0), and
  the service's resident memory at start and end.
* ``--mode ratings``: ``--matches`` (100,000) matches among fifty checkpoints, then
  ``GET /ratings`` twice as a read agent (bootstrap capped by the service) and
  twice as a write agent with ``bootstrap=0``: the first request computes, the
  second is served from the cache; then one more match and the read agent's
  request again (the log is brought up to date with the new row only).

A benchmark, not a test: the figures depend on the machine (docs/registry.md has
this machine's).  Every loop is bounded in time and count and stops by itself.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import requests

from brawlkit.common.cli_args import command_parser
from brawlkit.common.procs import end_process
from brawlkit.export.bpw import Layer, PolicyMeta, pack_bpw
from brawlkit.registry.auth import hash_secret, new_secret
from brawlkit.registry.database import RegistryDB

CPU = [f"cpu:{lv}" for lv in range(1, 9)]


@dataclass
class Stats:
    """Latencies (s) and errors per kind of request, shared by every client thread."""

    latency: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def timed(self, kind: str, send: Callable[[], requests.Response], ok: tuple[int, ...]) -> Any:
        t0 = time.perf_counter()
        try:
            r = send()
            why = "" if r.status_code in ok else f"{r.status_code} {r.text[:120]}"
        except requests.RequestException as e:
            r, why = None, f"{type(e).__name__}: {e}"
        dt = time.perf_counter() - t0
        with self.lock:
            self.latency[kind].append(dt)
            if why:
                self.errors[kind].append(why)
        return r


class Service:
    """A ``registry serve`` subprocess on ``url`` with the agents the load needs."""

    def __init__(self, db_url: str | None, data: Path, extra: list[str]) -> None:
        self.data = data
        self.db_url = db_url or f"sqlite:///{data / 'registry.db'}"
        db = RegistryDB(self.db_url)
        self.secrets: dict[str, str] = {}
        try:
            for name, scope in [*((f"box{i}", "write") for i in range(3)),
                                *((f"reader{i}", "read") for i in range(5)),
                                ("botpool", "write"), ("seeder", "write")]:
                self.secrets[name] = new_secret()
                db.add_agent(name, scope, hash_secret(self.secrets[name]))
        finally:
            db.close()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "brawlkit", "registry", "serve", "--data", str(data),
             "--db", self.db_url, "--port", "0", "--log-level", "warning",
             # the load stands for many machines, all on 127.0.0.1 here: no per-address bound
             "--max-connections-per-address", "0", *extra],
            stdout=subprocess.PIPE, stderr=open(data / "serve.log", "wb"))  # noqa: SIM115
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()
        if not line.startswith("listening "):
            self.stop()
            raise RuntimeError(f"registry serve did not start: {line!r} (see {data}/serve.log)")
        self.url = f"http://127.0.0.1:{int(line.split()[1])}"

    def token(self, agent: str) -> dict[str, str]:
        r = requests.post(f"{self.url}/auth/token", timeout=30,
                          json={"agent_id": agent, "secret": self.secrets[agent]})
        r.raise_for_status()
        return {"Authorization": f"Bearer {r.json()['access_token']}"}

    def rss_mb(self) -> float:
        """The service's resident memory (MiB), from /proc."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        end_process(self.proc, grace_s=30.0, kill_wait_s=10.0)


# ------------------------------------------------------------------ what the clients send
def artifacts(tag: str, seed: int) -> tuple[bytes, bytes]:
    """An SB3-sized checkpoint zip (~100 KB of weights) and a real ``.bpw``."""
    rng = np.random.default_rng(seed)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("data", json.dumps({"tag": tag}))
        z.writestr("policy.pth", rng.standard_normal(25_000).astype(np.float32).tobytes())
    layers = [Layer(rng.standard_normal((64, 31)).astype(np.float32),
                    rng.standard_normal(64).astype(np.float32), 1),
              Layer(rng.standard_normal((6, 64)).astype(np.float32),
                    rng.standard_normal(6).astype(np.float32), 0)]
    return buf.getvalue(), pack_bpw(layers, PolicyMeta(action_repeat=4, input_layout=1,
                                                       reward="tiered"))


def upload(session: requests.Session, svc: Service, headers: dict[str, str], member_id: str,
           generation: int, parent: str | None, seed: int) -> requests.Response:
    ckpt, blob = artifacts(member_id, seed)
    meta = {"id": member_id, "role": "main", "generation": generation, "parent": parent,
            "created": "", "settings": {"seed": seed}, "location": member_id.split("-")[1],
            "checkpoint_sha256": hashlib.sha256(ckpt).hexdigest(),
            "blob_sha256": hashlib.sha256(blob).hexdigest()}
    return session.post(f"{svc.url}/checkpoints", headers=headers, timeout=120,
                        data={"metadata": json.dumps(meta)},
                        files={"checkpoint": ("c.zip", ckpt), "blob": ("b.bpw", blob)})


def matches(rng: random.Random, ids: list[str], n: int, t0: float) -> list[dict[str, Any]]:
    return [{"time": t0 + i * 1e-3 + rng.random() * 1e-4, "a": a, "b": b,
             "result": rng.choice(("win", "draw", "loss")), "ticks": rng.randint(600, 5400),
             "source": "bench"}
            for i, (a, b) in enumerate(rng.sample(ids, 2) for _ in range(n))]


# ------------------------------------------------------------------ the load
def _writer(svc: Service, stats: Stats, box: int, until: float, generation_s: float) -> None:
    """A training location: a generation every ``generation_s``, 50 matches every 2 s."""
    s, hdr, rng = requests.Session(), svc.token(f"box{box}"), random.Random(box)
    gen, parent, next_gen = 0, None, 0.0
    while time.monotonic() < until:
        if time.monotonic() >= next_gen:
            gen += 1
            mid = f"main-box{box}-g{gen:04d}"
            stats.timed("upload", partial(upload, s, svc, hdr, mid, gen, parent,
                                          1000 * box + gen), (201,))
            parent, next_gen = mid, time.monotonic() + generation_s
        ids = [*CPU, *(f"main-box{box}-g{g:04d}" for g in range(1, gen + 1))]
        batch = matches(rng, ids, 50, time.time())
        stats.timed("post matches", partial(s.post, f"{svc.url}/matches", headers=hdr,
                                            json=batch, timeout=120), (200,))
        time.sleep(2.0)


def _reader(svc: Service, stats: Stats, i: int, hdr: dict[str, str], until: float) -> None:
    """A notebook or dashboard: the ratings and the member list, about once a second."""
    s, rng = requests.Session(), random.Random(100 + i)
    time.sleep(rng.random())
    while time.monotonic() < until:
        stats.timed("ratings", lambda: s.get(f"{svc.url}/ratings", headers=hdr, timeout=120),
                    (200,))
        stats.timed("members", lambda: s.get(f"{svc.url}/checkpoints", headers=hdr,
                                             timeout=120), (200,))
        time.sleep(0.5 + rng.random())


def _botpool(svc: Service, stats: Stats, until: float) -> None:
    """A bot pool: one finished match every 0.2 s, and the active checkpoint."""
    s, hdr, rng = requests.Session(), svc.token("botpool"), random.Random(7)
    n = 0
    while time.monotonic() < until:
        batch = matches(rng, CPU, 1, time.time())
        stats.timed("botpool match", partial(s.post, f"{svc.url}/matches", headers=hdr,
                                             json=batch, timeout=120), (200,))
        n += 1
        if n % 10 == 0:
            stats.timed("active", lambda: s.get(f"{svc.url}/active", headers=hdr, timeout=120),
                        (200, 404))
        time.sleep(0.2)


def run_load(svc: Service, seconds: float, generation_s: float) -> dict[str, Any]:
    stats = Stats()
    readers = [svc.token(f"reader{i}") for i in range(5)]
    until = time.monotonic() + seconds
    threads = [threading.Thread(target=_writer, args=(svc, stats, b, until, generation_s))
               for b in range(3)]
    threads += [threading.Thread(target=_reader, args=(svc, stats, i, readers[i % 5], until))
                for i in range(50)]
    threads.append(threading.Thread(target=_botpool, args=(svc, stats, until)))
    rss0, t0 = svc.rss_mb(), time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 300)
    wall = time.monotonic() - t0
    rows = {kind: _summary(lat, len(stats.errors.get(kind, [])), wall)
            for kind, lat in sorted(stats.latency.items())}
    every = [x for lat in stats.latency.values() for x in lat]
    rows["all"] = _summary(every, sum(len(e) for e in stats.errors.values()), wall)
    return {"mode": "load", "seconds": round(wall, 1), "requests": rows,
            "rss_mb_start": round(rss0, 1), "rss_mb_end": round(svc.rss_mb(), 1),
            "error_samples": {k: v[:3] for k, v in stats.errors.items()}}


def _summary(lat: list[float], errors: int, wall: float) -> dict[str, Any]:
    a = np.array(lat) if lat else np.zeros(1)
    return {"count": len(lat), "per_s": round(len(lat) / wall, 1),
            "p50_ms": round(float(np.percentile(a, 50)) * 1e3, 1),
            "p99_ms": round(float(np.percentile(a, 99)) * 1e3, 1),
            "max_ms": round(float(a.max()) * 1e3, 1), "errors": errors}


# ------------------------------------------------------------------ the ratings' cost
def run_ratings(svc: Service, n_matches: int) -> dict[str, Any]:
    """``n_matches`` among fifty checkpoints, then the ratings twice per agent kind."""
    s, hdr, rng = requests.Session(), svc.token("seeder"), random.Random(0)
    ids = list(CPU)
    for g in range(1, 51):
        mid = f"main-seed-g{g:04d}"
        upload(s, svc, hdr, mid, g, ids[-1] if g > 1 else None, g).raise_for_status()
        ids.append(mid)
    t0 = 1.7e9
    for i in range(0, n_matches, 5000):
        batch = matches(rng, ids, min(5000, n_matches - i), t0 + i)
        s.post(f"{svc.url}/matches", headers=hdr, json=batch, timeout=600).raise_for_status()
    out: dict[str, Any] = {"mode": "ratings", "matches": n_matches, "members": len(ids) + 1}
    for who, params in (("read", {}), ("write, bootstrap=0", {"bootstrap": 0})):
        h = svc.token("reader0" if who == "read" else "seeder")
        for attempt in ("first", "second"):
            t = time.perf_counter()
            r = s.get(f"{svc.url}/ratings", headers=h, params=params, timeout=600)
            r.raise_for_status()
            out[f"{who} {attempt} s"] = round(time.perf_counter() - t, 3)
            out[f"{who} bootstrap"] = r.json()["bootstrap"]
            out[f"{who} {attempt} cache"] = r.headers.get("X-Ratings-Cache")
    s.post(f"{svc.url}/matches", headers=hdr, json=matches(rng, ids, 1, t0 + n_matches),
           timeout=60).raise_for_status()
    t = time.perf_counter()
    s.get(f"{svc.url}/ratings", headers=svc.token("reader0"), timeout=600).raise_for_status()
    out["read after one new match s"] = round(time.perf_counter() - t, 3)
    out["rss_mb"] = round(svc.rss_mb(), 1)
    return out


def _print(res: dict[str, Any]) -> None:
    if res["mode"] == "ratings":
        for k, v in res.items():
            print(f"{k:<28} {v}")
        return
    print(f"{'requests':<16}{'count':>8}{'req/s':>8}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}"
          f"{'errors':>8}")
    for kind, row in res["requests"].items():
        print(f"{kind:<16}{row['count']:>8}{row['per_s']:>8}{row['p50_ms']:>9}"
              f"{row['p99_ms']:>9}{row['max_ms']:>9}{row['errors']:>8}")
    print(f"service memory: {res['rss_mb_start']} MiB at start, {res['rss_mb_end']} MiB at "
          f"the end ({res['seconds']} s)")
    for kind, samples in res["error_samples"].items():
        print(f"errors of {kind}: {samples}")


def main(argv: list[str] | None = None) -> int:
    ap = command_parser(
        "bench registry",
        "A real `registry serve` under a league's load (three training locations, "
        "fifty readers, a bot pool), or the cost of GET /ratings on many matches.")
    ap.add_argument("--mode", choices=("load", "ratings"), default="load")
    ap.add_argument("--db", default=None, help="database URL (default: SQLite in a temp dir); "
                    "an empty PostgreSQL database or schema for a PostgreSQL figure")
    ap.add_argument("--seconds", type=float, default=180.0, help="load duration (default 180)")
    ap.add_argument("--generation-s", type=float, default=20.0,
                    help="seconds between a location's generations (default 20)")
    ap.add_argument("--matches", type=int, default=100_000, help="ratings mode: matches")
    ap.add_argument("--json", action="store_true", help="one JSON object on the last line")
    args = ap.parse_args(argv)
    if not 1 <= args.seconds <= 3600 or not 1 <= args.matches <= 1_000_000:
        ap.error("--seconds must be in [1, 3600] and --matches in [1, 1000000]")
    with tempfile.TemporaryDirectory(prefix="bk_bench_registry_") as td:
        svc = Service(args.db, Path(td), [])
        try:
            res = (run_load(svc, args.seconds, args.generation_s) if args.mode == "load"
                   else run_ratings(svc, args.matches))
        finally:
            svc.stop()
    res["db"] = "postgresql" if args.db and args.db.startswith("postgres") else "sqlite"
    _print(res)
    if args.json:
        print(json.dumps(res))
    errors = res["requests"]["all"]["errors"] if args.mode == "load" else 0
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
