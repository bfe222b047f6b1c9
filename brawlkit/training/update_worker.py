"""PPO's update in its own process, overlapped with the next rollout (``TrainConfig.async_update``).

Why a process: SB3's loop is serial — collect a rollout, then update on it — so on two cores
the update (~10 µs per env step at the fast trainer's width, most of the loop's time) leaves
the game server's core idle, and the rollout leaves the update's core idle.  A thread does
not help: the update of a 2x64 MLP is mostly Python around small tensor ops, so the two
threads take turns on the GIL (measured: the threaded pair is no faster than the serial
one).  A process has its own interpreter.

What changes in PPO (one rollout of policy lag, as in APPO or IMPALA's learner)::

    rollout 0 with theta_0
    update  buffer 0 -> theta_1     |  rollout 1 with theta_0
    update  buffer 1 -> theta_2     |  rollout 2 with theta_1   (theta_1 loaded first)
    ...

Each update starts from the newest weights and learns from a buffer collected one update
earlier.  The buffer keeps the log-probabilities and values of the policy that acted, so
PPO's ratio ``pi_theta / pi_behaviour`` and its clip measure the step from the policy that
collected the data, as PPO's own derivation asks (the clip bounds how far the update
moves from the *behaviour* policy); the only difference from SB3's order is that the
update's first epoch starts one update past it.  ``bench learn`` measures what it costs
(README, the learning table's ``chosen_wide_async`` row).  ``learn`` waits for the last
update before it returns, so evaluation, checkpoints and exports see every update.

The worker is stateless between updates but for its network's shape: every request carries
the policy's and the optimiser's state, the buffer, and the schedule's position
(``num_timesteps``, progress remaining), so a weight reset, a warm start or a resume in the
trainer is what the next update starts from.  Each update seeds torch and numpy from the
run's seed and the update count, so a run is reproducible (not bit-identical to the serial
order, which draws its minibatches from the trainer's generator).  ``train/*`` metrics
arrive with the update's result and are logged one row later than SB3 logs them.
"""

from __future__ import annotations

import io
import os
import pickle
import socket
import subprocess
import sys
import traceback
import weakref
from multiprocessing.connection import Connection
from typing import Any

import numpy as np
import torch as th

#: the rollout buffer's arrays an update reads (SB3's RolloutBuffer)
BUFFER_FIELDS = ("observations", "actions", "rewards", "returns", "episode_starts", "values",
                 "log_probs", "advantages")


def _send(conn: Connection, obj: Any) -> None:
    """Plain pickle by value: multiprocessing's pickler would pass tensors as shared
    memory through a resource sharer that a plain subprocess cannot authenticate to."""
    conn.send_bytes(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def _recv(conn: Connection) -> Any:
    return pickle.loads(conn.recv_bytes())


def update_seed(seed: int | None, n_updates: int) -> int:
    """The generator seed of the update after ``n_updates`` epochs (reproducible runs)."""
    return (int(seed or 0) * 1_000_003 + n_updates) % (2**31 - 1)


def request(model: Any) -> dict[str, Any]:
    """Everything an update of ``model`` on its full rollout buffer needs, as plain data."""
    buf = model.rollout_buffer
    return {
        "policy": model.policy.state_dict(),
        "optimizer": model.policy.optimizer.state_dict(),
        "buffer": {name: np.asarray(getattr(buf, name)) for name in BUFFER_FIELDS},
        "num_timesteps": int(model.num_timesteps),
        "progress_remaining": float(model._current_progress_remaining),
        "n_updates": int(model._n_updates),
        "seed": update_seed(model.seed, int(model._n_updates)),
    }


def apply_request(model: Any, req: dict[str, Any]) -> None:
    """Put a request's state into ``model`` (the worker's copy), ready for ``train``."""
    model.policy.load_state_dict(req["policy"])
    model.policy.optimizer.load_state_dict(req["optimizer"])
    buf = model.rollout_buffer
    for name in BUFFER_FIELDS:
        setattr(buf, name, req["buffer"][name])
    buf.full, buf.generator_ready, buf.pos = True, False, buf.buffer_size
    model.num_timesteps = req["num_timesteps"]
    model._current_progress_remaining = req["progress_remaining"]
    model._n_updates = req["n_updates"]
    th.manual_seed(req["seed"])
    np.random.seed(req["seed"])


def result(model: Any) -> dict[str, Any]:
    """What an update produced: the new weights, the optimiser, its ``train/*`` metrics."""
    logged = {k: v for k, v in model.logger.name_to_value.items() if k.startswith("train/")}
    model.logger.name_to_value.clear()
    return {"policy": model.policy.state_dict(), "optimizer": model.policy.optimizer.state_dict(),
            "n_updates": int(model._n_updates), "logged": logged}


def apply_result(model: Any, res: dict[str, Any]) -> None:
    """Load an update's result into the trainer's model and log its metrics."""
    model.policy.load_state_dict(res["policy"])
    model.policy.optimizer.load_state_dict(res["optimizer"])
    model._n_updates = res["n_updates"]
    for key, value in res["logged"].items():
        model.logger.record(key, value, exclude="tensorboard" if key == "train/n_updates" else None)


def _serve(conn: Any) -> None:
    """The worker process: a copy of the model (the first message: its class, its zip,
    ``extras`` to set on it — the KL reference and schedule, which the zip leaves out),
    then one update per request until ``None``.  An exception goes back as its traceback
    and ends the worker."""
    from stable_baselines3.common.logger import Logger

    th.set_num_threads(1)
    try:
        cls, saved, extras = _recv(conn)
        model = cls.load(io.BytesIO(saved), device="cpu")
        for k, v in extras.items():
            setattr(model, k, v)
        model.set_logger(Logger(folder=None, output_formats=[]))
        while True:
            req = _recv(conn)
            if req is None:
                return
            apply_request(model, req)
            model.update_now()
            _send(conn, ("ok", result(model)))
    except BaseException:  # noqa: BLE001  (the trainer raises it with the worker's traceback)
        _send(conn, ("error", traceback.format_exc()))
    finally:
        conn.close()


class UpdateWorker:
    """The update process of one model: :meth:`submit` a full buffer, :meth:`collect` the
    result later; one update in flight at a time."""

    def __init__(self, model: Any, extras: dict[str, Any]) -> None:
        saved = io.BytesIO()
        model.save(saved)
        # a fresh interpreter (no forked torch or thread state) started as a plain
        # subprocess, not multiprocessing's spawn, which would re-run the caller's script
        ours, theirs = socket.socketpair()
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "brawlkit.training.update_worker", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),), env=env)
        theirs.close()
        self._conn = Connection(ours.detach())
        _send(self._conn, (type(model), saved.getvalue(), extras))
        self.pending = False
        self._finalizer = weakref.finalize(self, _stop, self._conn, self._proc)

    def submit(self, model: Any) -> None:
        """Start the update of ``model``'s full rollout buffer from its current state."""
        assert not self.pending, "collect the update in flight first"
        _send(self._conn, request(model))
        self.pending = True

    def collect(self, model: Any) -> None:
        """Wait for the update in flight (if any) and load it into ``model``."""
        if not self.pending:
            return
        self.pending = False
        try:
            status, payload = _recv(self._conn)
        except EOFError:
            raise RuntimeError(f"the update process died (exit code {self._proc.poll()}): "
                               "run again with --no-async-update to see the error in the "
                               "trainer") from None
        if status != "ok":
            raise RuntimeError(f"the update process failed:\n{payload}")
        apply_result(model, payload)

    def close(self) -> None:
        """Stop the process (an update in flight is dropped)."""
        self._finalizer()


def _stop(conn: Connection, proc: subprocess.Popen[bytes]) -> None:
    """Ask the worker to end; terminate it if it does not within a few seconds."""
    try:
        _send(conn, None)
    except (OSError, ValueError):
        pass
    try:
        proc.wait(5.0)
    except subprocess.TimeoutExpired:
        proc.terminate()
        proc.wait(5.0)
    conn.close()


if __name__ == "__main__":  # the worker: python -m brawlkit.training.update_worker FD
    _serve(Connection(int(sys.argv[1])))
