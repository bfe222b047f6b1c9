"""Connecting to Ray: a local instance sized to this machine, or an existing cluster.

``--ray`` (or ``--ray local``) starts a private Ray instance for this run and stops it
at the end; ``--ray HOST:PORT`` (or ``auto``) joins a running cluster started with
``ray start --head`` and leaves it running.  The local instance is sized explicitly —
CPUs, a small object store, no dashboard — because Ray's defaults (every core, 30 %
of the memory for objects, a dashboard process) are made for big machines; on a
2-core box the game servers and the trainer need what Ray would reserve.
"""

from __future__ import annotations

import os
import sys
from typing import Any

#: object store of a local instance: the steps do not go through Ray (the workers' step
#: connections), what does is a pool of ~20 KB blobs and a few small calls, so 150 MB is
#: plenty (Ray's minimum is ~75 MB)
LOCAL_OBJECT_STORE_BYTES = 150 * 1024 * 1024
LOCAL_ADDRESSES = ("", "local")

#: Ray's start-up waits, made long enough for a busy machine: on a 2-core box at load
#: 5-15 a node missed Ray's 30 s window to register with the GCS, and its start failed.
#: Ray reads each ``RAY_<setting>`` environment variable in every process (its C++
#: RayConfig; children inherit them): ``ray start`` and the raylet honour them.  Values a
#: caller already set win.  ``ray.init``'s own wait for a local node is fixed at 30 s in
#: Ray 2.60 (``ray/_private/node.py``), so :class:`RayConnection` tries again instead.
PATIENT_RAY_ENV = {
    "RAY_raylet_start_wait_time_s": "180",         # a node registering (Ray: 30)
    "RAY_worker_register_timeout_seconds": "300",  # a worker process starting (Ray: 60)
}


#: how often :class:`RayConnection` starts a local instance whose node missed ray.init's
#: 30 s registration window (seen at load ~8 on 2 cores) before it gives up
LOCAL_START_ATTEMPTS = 3
_NODE_TIMEOUT = "timed out during startup"


def patient_ray_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) with :data:`PATIENT_RAY_ENV` where unset: the
    environment for ``ray start`` on a machine that may be busy."""
    base = dict(os.environ if env is None else env)
    return {**PATIENT_RAY_ENV, **base}


def require_ray() -> Any:
    """``import ray``, or an ImportError that says how to install it."""
    try:
        import ray
    except ImportError as e:
        raise ImportError("--ray needs Ray: `make ray`, or `pip install -e .[ray]` "
                          "(pins ray==2.60.0; docs/distributed.md)") from e
    return ray


def is_local(address: str | None) -> bool:
    return address is None or address.strip().lower() in LOCAL_ADDRESSES


def local_cpus() -> int:
    """The CPUs a local instance declares: the cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


class RayConnection:
    """``ray.init`` for one run; :meth:`close` shuts down only what it started.

    If Ray is already initialised in this process (a notebook, a test fixture), that
    connection is used and left alone.
    """

    def __init__(self, address: str | None = None, num_cpus: int | None = None,
                 object_store_memory: int = LOCAL_OBJECT_STORE_BYTES,
                 log_to_driver: bool = True) -> None:
        # no usage report to Ray's servers from a training run (a cluster decides for itself)
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        # before Ray reads its settings: a local instance starts its node from here
        for k, v in PATIENT_RAY_ENV.items():
            os.environ.setdefault(k, v)
        ray = require_ray()
        self.started = False
        if ray.is_initialized():
            return
        kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": log_to_driver,
                              "configure_logging": True, "logging_level": "WARNING"}
        if is_local(address):
            # address="local": always a new instance, never a cluster `ray start` left behind
            for attempt in range(1, LOCAL_START_ATTEMPTS + 1):
                try:
                    ray.init(address="local", num_cpus=num_cpus or local_cpus(),
                             object_store_memory=object_store_memory, **kw)
                    break
                except Exception as e:  # Ray raises a bare Exception for this
                    if _NODE_TIMEOUT not in str(e) or attempt == LOCAL_START_ATTEMPTS:
                        raise
                    ray.shutdown()  # the half-started node's processes
                    print(f"ray: the local node did not register within ray.init's 30 s (a busy "
                          f"machine?); starting it again ({attempt + 1}/{LOCAL_START_ATTEMPTS})",
                          file=sys.stderr)
        else:
            ray.init(address=address, **kw)
        self.started = True

    def cluster_cpus(self) -> float:
        import ray

        return float(ray.cluster_resources().get("CPU", 0.0))

    def close(self) -> None:
        if self.started:
            import ray

            ray.shutdown()
            self.started = False
