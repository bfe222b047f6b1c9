"""Plain helpers shared by the test files (fixtures live in conftest.py)."""

from __future__ import annotations

import ctypes
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from brawlkit.common.paths import repo_root
from brawlkit.common.procs import end_process

ROOT = repo_root()


def large_weight_checkpoint(path: Path, seed: int = 0, input_layout: int = 2,
                            hidden: tuple[int, ...] = (64, 64)) -> Any:
    """A PPO of the project's network whose weights are re-drawn large (|w| up to 0.5),
    so outputs leave [-1, 1], tanh saturates, and parity is tested on realistic
    magnitudes rather than SB3's tiny action-head init.  Returns the model."""
    import torch

    from brawlkit.env.dummy import ZeroCostEnv
    from brawlkit.training.config import TrainConfig
    from brawlkit.training.ppo import build_model

    cfg = TrainConfig(seed=seed, n_envs=1, input_layout=input_layout, hidden=hidden)
    model = build_model(cfg, ZeroCostEnv(input_layout=input_layout))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.policy.parameters():
            p.copy_(torch.rand(p.shape, generator=g) - 0.5)
    model.save(str(path))
    return model


def run_cli(*args: str, timeout: float = 300, check: bool = False) -> subprocess.CompletedProcess[str]:
    """``python -m brawlkit ARGS`` the way a user runs it."""
    return subprocess.run([sys.executable, "-m", "brawlkit", *args], capture_output=True,
                          text=True, timeout=timeout, check=check, cwd=ROOT)


def last_json(out: str) -> Any:
    """The JSON object on the last line of a ``--json`` command's stdout."""
    import json

    return json.loads(out.strip().splitlines()[-1])


def random_obs(n: int, dim: int, seed: int = 0, scale: float = 1.0) -> np.ndarray:
    """``n`` uniform policy inputs of size ``dim`` in [-scale, scale]."""
    return np.random.default_rng(seed).uniform(-scale, scale, (n, dim)).astype(np.float32)


def process_gone(pid: int, within: float = 5.0) -> bool:
    """True once ``pid`` has exited (or is a zombie) within ``within`` seconds."""
    import os
    import time

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # a zombie still answers kill(0); check its state
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split()[2] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


class RawClient:
    """A bare UDP client speaking the wire protocol through brawlkit.wire.protocol's
    packers and parsers (server tests that need packets the env would never send)."""

    def __init__(self, address: tuple[str, int], want_slot: int = 255, nonce: int = 99,
                 **hello: Any) -> None:
        import socket

        from brawlkit.wire import protocol as P
        from brawlkit.wire.constants import C

        self.P, self.C = P, C
        self.s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.s.settimeout(2.0)
        self.addr = address
        self.send(P.pack_hello(0, want_slot, nonce, **hello))
        w = P.parse_payload(self.recv_type(C.BP_PKT_WELCOME), P.NetWelcome)
        assert w.nonce == nonce and w.tick_hz == C.BP_TICK_HZ and w.match_ticks == C.BP_MATCH_TICKS
        self.session, self.slot, self.match_id = w.session, w.slot, w.match_id
        self.arena_id = w.arena_id
        self.reset_nonce = 1000

    def send(self, data: bytes) -> None:
        self.s.sendto(data, self.addr)

    def recv_type(self, ptype: int) -> bytes:
        while True:
            d, _ = self.s.recvfrom(2048)
            if self.P.validate_datagram(d).type == ptype:
                return d

    def snapshot(self) -> Any:
        return self.P.parse_snapshot(self.recv_type(self.C.BP_PKT_SNAPSHOT))

    def cmd(self, tick: int, seq: int, sx: float = 0.0, sy: float = 0.0, b: int = 0,
            rep: int = 4, slot: int | None = None, session: int | None = None) -> None:
        self.send(self.P.pack_cmd(seq, self.session if session is None else session, tick, seq,
                                  sx, sy, b, self.slot if slot is None else slot, rep))

    def reset(self, seed: int, cpu_level: int = 255, nonce: int | None = None) -> None:
        """RESET with a fresh nonce (or ``nonce``: the same one again is a retry)."""
        if nonce is None:
            self.reset_nonce += 1
            nonce = self.reset_nonce
        self.send(self.P.pack_reset(0, self.session, seed, cpu_level, nonce))

    def close(self) -> None:
        self.s.close()


class LossyProxy:
    """A UDP relay between one client and a server that drops the datagrams a
    predicate picks (``drop(datagram) -> bool``, client-to-server direction): a
    lost packet on demand, for retry tests."""

    def __init__(self, server: tuple[str, int], drop: Any) -> None:
        import socket
        import threading

        self.server, self.drop, self.dropped = server, drop, 0
        self.front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.front.bind(("127.0.0.1", 0))
        self.back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.back.connect(server)
        self.address = self.front.getsockname()
        self.client: tuple[str, int] | None = None
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import select

        while not self._stop:
            ready, _, _ = select.select([self.front, self.back], [], [], 0.05)
            for sock in ready:
                try:
                    data, addr = sock.recvfrom(2048)
                except OSError:
                    continue
                if sock is self.front:
                    self.client = addr
                    if self.drop(data):
                        self.dropped += 1
                        continue
                    self.back.send(data)
                elif self.client is not None:
                    self.front.sendto(data, self.client)

    def close(self) -> None:
        self._stop = True
        self._thread.join(timeout=2)
        self.front.close()
        self.back.close()


# ------------------------------------------------------------ the registry service
#: how long `registry serve` may take to print its port
#: what the notebook tests trim from each notebook's defaults (sizes only, so a test run is
#: short; every path and mode stays the notebook's own); train_role has its own fixture
NOTEBOOK_SIZES: dict[str, dict[str, Any]] = {
    "elo_drift": {"bootstrap": 20},
    "league_overview": {"bootstrap": 10},
    "obs_parity": {"states": 300},
    "export_weights": {"n_obs": 500},
    "move_training": {"fights_per_batch": 2, "eval_fights": 1, "max_ticks": 900},
}


STARTUP_S = 60.0


def _die_with_parent() -> None:
    """The server dies with the test process, even when pytest is killed."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class Listening:
    """A subprocess that prints ``listening <port>`` on stdout once bound (the registry,
    ``policy serve``, the example endpoints), on 127.0.0.1; ``stop`` ends it. It dies
    with the test process, even when pytest is killed."""

    def __init__(self, cmd: list[str], log: Path, startup_s: float = STARTUP_S) -> None:
        self.log = log
        self._log = open(log, "ab")  # noqa: SIM115 — closed in stop()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._log, cwd=ROOT,
                                     env={**os.environ, "OMP_NUM_THREADS": "1"},
                                     preexec_fn=_die_with_parent)
        assert self.proc.stdout is not None
        line = b""
        deadline = time.monotonic() + startup_s
        while not line.endswith(b"\n") and time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if ready:
                ch = os.read(self.proc.stdout.fileno(), 1)
                if not ch:
                    break
                line += ch
        if not line.startswith(b"listening "):
            self.stop()
            raise RuntimeError(f"{cmd} did not start: {line!r}\n{self.log_text()}")
        self.port = int(line.split()[1])
        self.url = f"http://127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        end_process(self.proc, grace_s=15.0, kill_wait_s=5.0)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log.close()


class RegistryServer(Listening):
    """A ``registry serve`` subprocess on a kernel-chosen port of 127.0.0.1."""

    def __init__(self, db_url: str, data: Path, *extra: str) -> None:
        self.db_url, self.data = db_url, data
        data.mkdir(parents=True, exist_ok=True)
        super().__init__([sys.executable, "-m", "brawlkit", "registry", "serve", "--db", db_url,
                          "--data", str(data), "--port", "0", "--log-level", "warning", *extra],
                         data.parent / f"{data.name}-serve.log")


def add_agent(db_url: str, name: str, scope: str) -> str:
    """An agent made through the library (the CLI path has its own test); its secret."""
    from brawlkit.registry.database import create_agent

    return create_agent(db_url, name, scope)


def c_layout(cc: list[str], structs: list[Any], tmp: Path, extra: tuple[str, ...] = ()) -> list[str]:
    """Compile a C program against the header that prints ``NAME sizeof N`` and
    ``NAME FIELD OFFSET SIZE`` for every struct (plus the ``extra`` printf lines), check
    every line against the ctypes mirrors, and return the lines of ``extra``.  One
    checker for every mirror of a header struct (wire packets, replay files)."""
    from brawlkit.common.paths import header_path
    from brawlkit.wire.protocol import struct_layout

    lines = ["#include <stdio.h>", "#include <stddef.h>", '#include "brawlpit.h"', "int main(void) {"]
    for cls in structs:
        name = cls.__name__
        lines.append(f'  printf("{name} sizeof %zu\\n", sizeof({name}));')
        for field, _, _ in struct_layout(cls):
            lines.append(f'  printf("{name} {field} %zu %zu\\n", offsetof({name}, {field}), '
                         f"sizeof((({name} *)0)->{field}));")
    lines += [*extra, "  return 0;", "}"]
    src = tmp / "layout.c"
    src.write_text("\n".join(lines))
    exe = tmp / "layout"
    subprocess.run([*cc, "-I", str(header_path().parent), str(src), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.splitlines()
    by_name = {cls.__name__: cls for cls in structs}
    seen, rest = 0, []
    for line in out:
        parts = line.split()
        cls = by_name.get(parts[0])
        if cls is None:
            rest.append(line)
        elif parts[1] == "sizeof":
            assert int(parts[2]) == ctypes.sizeof(cls), line
            seen += 1
        else:
            layout = {f: (o, s) for f, o, s in struct_layout(cls)}
            assert layout[parts[1]] == (int(parts[2]), int(parts[3])), line
            seen += 1
    assert seen == sum(len(c._fields_) + 1 for c in structs)
    return rest

