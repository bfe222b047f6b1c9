"""PPO's update in its own process (brawlkit/training/update_worker.py): a run with
``async_update`` is exactly the documented schedule — each update computed as the
trainer itself would compute it, from the newest weights, on the rollout collected one
update earlier — and a failing update says why instead of hanging the run."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch as th
from stable_baselines3.common.logger import Logger

from brawlkit.env.dummy import ZeroCostEnv
from brawlkit.training import update_worker
from brawlkit.training.config import TrainConfig
from brawlkit.training.kl import KLPPO
from brawlkit.training.ppo import build_model, scratch_checkpoint


def _cfg(tmp_path: Path, async_update: bool) -> TrainConfig:
    """A KL run (the worker must get the reference the zip leaves out) with a schedule
    (the learning rate decays: the worker must get the run's position)."""
    init = scratch_checkpoint(tmp_path / "init.zip", seed=4, learn_steps=64)
    return TrainConfig(n_envs=1, n_steps=64, batch_size=32, n_epochs=2, seed=5,
                       init_from=str(init), kl_coef=0.5, async_update=async_update)


def _model(cfg: TrainConfig) -> Any:
    th.set_num_threads(1)
    model = build_model(cfg, ZeroCostEnv(random_obs=True, input_layout=cfg.input_layout))
    model.set_logger(Logger(folder=None, output_formats=[]))
    return model


def _equal(a: dict[str, th.Tensor], b: dict[str, th.Tensor]) -> bool:
    return a.keys() == b.keys() and all(th.equal(a[k], b[k]) for k in a)


def test_an_async_run_is_the_documented_schedule(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Three rollouts with the update in its own process.  Replayed in this process,
    update by update: every update starts from the weights the previous one produced
    (the worker's result was loaded before the next was sent), computes bit for bit what
    the trainer's own ``update_now`` computes, and learns from the rollout collected one
    update earlier — the second rollout's log-probabilities are the *initial* policy's."""
    sent: list[dict[str, Any]] = []
    real_request = update_worker.request

    def recording(model: Any) -> dict[str, Any]:
        req = real_request(model)
        sent.append(copy.deepcopy(req))
        return req

    monkeypatch.setattr(update_worker, "request", recording)
    model = _model(_cfg(tmp_path, async_update=True))
    assert isinstance(model, KLPPO)
    start = copy.deepcopy(model.policy.state_dict())
    try:
        model.learn(3 * 64)
    finally:
        model.close_update_worker()
    assert len(sent) == 3 and model._n_updates == 3 * 2

    replay = _model(_cfg(tmp_path, async_update=False))
    weights = start
    for k, req in enumerate(sent):
        assert _equal(req["policy"], weights), f"update {k} did not start from update {k - 1}'s weights"
        update_worker.apply_request(replay, req)
        lag = update_worker.decouple(replay)
        replay.update_now()
        weights = copy.deepcopy(replay.policy.state_dict())
    assert _equal(model.policy.state_dict(), weights)  # learn() returned with the last update in
    assert _equal(model.policy.optimizer.state_dict()["state"][0],
                  replay.policy.optimizer.state_dict()["state"][0])

    # the lag: rollout 1 was collected while update 0 ran, by the initial weights
    behaviour = _model(_cfg(tmp_path, async_update=False))
    behaviour.policy.load_state_dict(start)
    buf = sent[1]["buffer"]
    obs = th.as_tensor(buf["observations"].reshape(64, -1))
    acts = th.as_tensor(buf["actions"].reshape(64, -1))
    with th.no_grad():
        _, log_prob, _ = behaviour.policy.evaluate_actions(obs, acts)
    assert np.allclose(log_prob.numpy(), buf["log_probs"].reshape(64), atol=1e-5)
    assert model.logger.name_to_value["train/kl_coef"] == 0.5  # the worker's metrics arrive
    assert model.logger.name_to_value["train/lag_weight"] == lag["train/lag_weight"]


def test_seeded_async_runs_are_reproducible(tmp_path: Path) -> None:
    params = []
    for _ in range(2):
        model = _model(_cfg(tmp_path, async_update=True))
        try:
            model.learn(2 * 64)
        finally:
            model.close_update_worker()
        params.append(th.cat([p.detach().flatten() for p in model.policy.parameters()]))
    assert th.equal(params[0], params[1])


def test_a_failing_update_says_why_and_the_worker_ends(tmp_path: Path) -> None:
    model = _model(_cfg(tmp_path, async_update=False))
    model.learn(64)
    worker = update_worker.UpdateWorker()
    try:
        model.rollout_buffer.observations = np.zeros((3, 1, 2), np.float32)  # not the policy's shape
        worker.submit(model)
        with pytest.raises(RuntimeError, match="the update process failed:(.|\n)*Error"):
            worker.collect(model)
    finally:
        worker.close()
    assert worker._proc.poll() is not None  # ended, not left behind


def test_decouple_recentres_the_clip_and_weights_each_advantage(tmp_path: Path) -> None:
    """After :func:`decouple` the buffer's log-probabilities are the starting weights'
    (the proximal policy) and each advantage carries pi_prox / pi_behaviour, truncated:
    with the weights that acted it changes nothing."""
    model = _model(_cfg(tmp_path, async_update=False))
    model.learn(64)  # a rollout; the update after it moved the weights off the behaviour
    buf = model.rollout_buffer
    behaviour = _model(_cfg(tmp_path, async_update=False))
    model.collect_rollouts(model.env, model._init_callback(None), buf, 64)  # acted by the new weights
    adv, logp = buf.advantages.copy(), buf.log_probs.copy()
    update_worker.decouple(model)  # proximal == behaviour
    assert np.allclose(buf.log_probs, logp, atol=1e-5) and np.allclose(buf.advantages, adv, rtol=1e-4)

    buf.advantages, buf.log_probs = adv.copy(), logp.copy()
    model.policy.load_state_dict(behaviour.policy.state_dict())  # other weights start the update
    lag = update_worker.decouple(model, max_weight=1.5)
    obs = th.as_tensor(buf.observations.reshape(64, -1))
    with th.no_grad():
        _, prox, _ = behaviour.policy.evaluate_actions(obs, th.as_tensor(buf.actions.reshape(64, -1)))
    prox_np = prox.numpy().reshape(buf.log_probs.shape)
    assert np.allclose(buf.log_probs, prox_np, atol=1e-5)
    w = np.minimum(np.exp(prox_np - logp), 1.5)
    assert not np.allclose(w, 1.0)
    assert np.allclose(buf.advantages, adv * w, rtol=1e-4, atol=1e-6)
    assert lag["train/lag_weight"] == pytest.approx(float(w.mean()), rel=1e-4)


def test_a_worker_closed_unused_or_orphaned_ends_quietly(capfd: pytest.CaptureFixture[str]) -> None:
    """Started early (before the model has a rollout) and closed without an update, or
    left when its trainer dies: the process ends by itself, with nothing on stderr."""
    worker = update_worker.UpdateWorker()
    worker.close()  # waits for the worker to end by itself (STOP_GRACE_S)
    assert worker._proc.wait(1) == 0
    orphan = update_worker.UpdateWorker()
    orphan._conn.close()  # what a killed trainer leaves: the socket's other end closed
    assert orphan._proc.wait(update_worker.STOP_GRACE_S) == 0
    orphan.close()
    assert "Traceback" not in capfd.readouterr().err
