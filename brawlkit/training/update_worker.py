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
earlier.  Left as SB3 has it, PPO's ratio would be measured from the policy that acted —
a whole update behind the weights the update starts from — and its first minibatches
would begin off-centre, many samples already clipped: measured, that learns less per env
step (seed 0 of ``chosen_wide``: cpu:8 0.68 against the serial order's 0.98).  So each
update is *decoupled* (:func:`decouple`; Hilton et al. 2021): its proximal policy — the
centre of the clip — is the weights it starts from, and each sample's advantage carries
the importance weight from the policy that acted to that one.  ``bench learn`` measures
what remains (README, the learning table's ``chosen_wide_async`` rows).  ``learn`` waits
for the last update before it returns, so evaluation, checkpoints and exports see every
update.

The worker is stateless between updates but for its network's shape: every request carries
the policy's and the optimiser's state, the buffer, and the schedule's position
(``num_timesteps``, progress remaining), so a weight reset, a warm start or a resume in the
trainer is what the next update starts from.  Each update seeds torch and numpy from the
run's seed and the update count, so a run is reproducible (not bit-identical to the serial
order, which draws its minibatches from the trainer's generator).  ``train/*`` metrics
arrive with the update's result and are logged one row later than SB3 logs them.
"""

from __future__ import annotations

import contextlib
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

#: the truncation of the decoupled update's importance weights (:func:`decouple`)
MAX_WEIGHT = 2.0

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


def decouple(model: Any, max_weight: float = MAX_WEIGHT) -> dict[str, float]:
    """Make the update's proximal policy the weights it starts from, not the policy that
    acted one update earlier (decoupled PPO, Hilton et al. 2021, "Batch size-invariance
    for policy optimization", eq. 3)::

        L = E_behaviour[ w * min(r * A, clip(r, 1 - eps, 1 + eps) * A) ]
        r = pi_theta / pi_prox,   w = pi_prox / pi_behaviour  (truncated at max_weight)

    SB3's loss is PPO's with ``pi_old`` in the buffer, so this puts ``log pi_prox`` there
    and multiplies each advantage by its ``w`` (w > 0 commutes with the min).  Without it
    the update starts a whole update away from the buffer's ``pi_old``: its ratios begin
    off-centre, many samples are clipped from the first minibatch, and the update moves
    less per rollout than SB3's (measured: ``bench learn chosen_wide_async``).  Returns
    the weights' mean and the share truncated (logged as ``train/lag_weight``, ...)."""
    buf, policy = model.rollout_buffer, model.policy
    n = buf.buffer_size * buf.n_envs
    obs = th.as_tensor(buf.observations.reshape(n, *buf.obs_shape))
    acts = th.as_tensor(buf.actions.reshape(n, buf.action_dim))
    policy.set_training_mode(False)
    with th.no_grad():
        _, log_prox, _ = policy.evaluate_actions(obs, acts)
    log_prox = log_prox.numpy().reshape(buf.log_probs.shape).astype(np.float32)
    w = np.exp(log_prox - buf.log_probs)
    clipped = w > max_weight
    w = np.minimum(w, max_weight)
    buf.advantages = (buf.advantages * w).astype(np.float32)
    buf.log_probs = log_prox
    return {"train/lag_weight": float(w.mean()), "train/lag_weight_truncated": float(clipped.mean())}


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
    and ends the worker; a trainer that is gone ends it quietly."""
    # the imports first: they are most of the boot, done while the trainer starts its
    # envs and runs its first rollout
    from stable_baselines3.common.logger import Logger

    import brawlkit.training.kl  # noqa: F401  (the classes the first message names)

    th.set_num_threads(1)
    try:
        first = _recv(conn)
        if first is None:  # closed before it had a model to update
            return
        cls, saved, extras = first
        model = cls.load(io.BytesIO(saved), device="cpu")
        for k, v in extras.items():
            setattr(model, k, v)
        model.set_logger(Logger(folder=None, output_formats=[]))
        while True:
            req = _recv(conn)
            if req is None:
                return
            apply_request(model, req)
            lag = decouple(model)
            model.update_now()
            for key, value in lag.items():
                model.logger.record(key, value)
            _send(conn, ("ok", result(model)))
    except (EOFError, ConnectionResetError):  # the trainer ended (or was killed): nothing to tell
        pass
    except BaseException:  # noqa: BLE001  (the trainer raises it with the worker's traceback)
        with contextlib.suppress(OSError):
            _send(conn, ("error", traceback.format_exc()))
    finally:
        conn.close()


class UpdateWorker:
    """The update process of one model: :meth:`submit` a full buffer, :meth:`collect` the
    result later; one update in flight at a time.  The process starts when this is made
    (so its boot overlaps whatever the trainer does next); the model it updates is sent
    with the first :meth:`submit`."""

    def __init__(self) -> None:
        # a fresh interpreter (no forked torch or thread state) started as a plain
        # subprocess, not multiprocessing's spawn, which would re-run the caller's script
        ours, theirs = socket.socketpair()
        # the package's root first: a kernel that put it on sys.path itself (Colab, a
        # notebook run from the checkout) has a child that would not find it otherwise
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "brawlkit.training.update_worker", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),), env=env)
        theirs.close()
        self._conn = Connection(ours.detach())
        self._model_sent = False
        self.pending = False
        self._finalizer = weakref.finalize(self, _stop, self._conn, self._proc)

    def _send_model(self, model: Any) -> None:
        """The first message: what the worker's copy of ``model`` is built from."""
        saved = io.BytesIO()
        model.save(saved)
        _send(self._conn, (type(model), saved.getvalue(), model.worker_extras()))
        self._model_sent = True

    def submit(self, model: Any) -> None:
        """Start the update of ``model``'s full rollout buffer from its current state."""
        assert not self.pending, "collect the update in flight first"
        try:
            if not self._model_sent:
                self._send_model(model)
            _send(self._conn, request(model))
        except OSError:  # the worker ended: its reason is waiting in the socket
            self.pending = True
            self.collect(model)
            raise
        self.pending = True

    def collect(self, model: Any) -> None:
        """Wait for the update in flight (if any) and load it into ``model``."""
        if not self.pending:
            return
        self.pending = False
        try:
            status, payload = _recv(self._conn)
        except (EOFError, OSError):
            raise RuntimeError(f"the update process died (exit code {self._proc.poll()}): "
                               "run again with --no-async-update to see the error in the "
                               "trainer") from None
        if status != "ok":
            raise RuntimeError(f"the update process failed:\n{payload}")
        apply_result(model, payload)

    def close(self) -> None:
        """Stop the process (an update in flight is dropped)."""
        self._finalizer()


#: how long a closed worker has to end by itself before it is terminated.  Generous
#: because a worker closed while still importing torch and SB3 ends only after them, and
#: on a loaded 2-core machine that import alone has taken more than 5 s (a CI run saw the
#: worker terminated, exit -15, by the 5 s this used to be).
STOP_GRACE_S = 60.0


def _stop(conn: Connection, proc: subprocess.Popen[bytes]) -> None:
    """Ask the worker to end; terminate it if it does not within :data:`STOP_GRACE_S`."""
    try:
        _send(conn, None)
    except (OSError, ValueError):
        pass
    # closed before the wait: a worker blocked sending a result nobody collects gets a
    # broken pipe and ends, rather than waiting out the grace
    conn.close()
    try:
        proc.wait(STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.terminate()
        proc.wait(5.0)


if __name__ == "__main__":  # the worker: python -m brawlkit.training.update_worker FD
    _serve(Connection(int(sys.argv[1])))
