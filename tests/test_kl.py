"""The KL term toward a reference policy (brawlkit/training/kl.py): its closed form, its
schedule, SB3's update bit for bit at coefficient 0, and that it is real -- a large
coefficient keeps the policy closer to the reference than none, on the same seed."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
import torch as th
from stable_baselines3 import PPO

from brawlkit.env.dummy import ZeroCostEnv
from brawlkit.export.actor import policy_kwargs
from brawlkit.training.config import TrainConfig
from brawlkit.training.kl import KLPPO, KLSchedule, ReferencePolicy, gaussian_kl


def _model(cls: type[PPO], seed: int = 3, lr: float = 3e-4) -> PPO:
    th.set_num_threads(1)
    return cls("MlpPolicy", ZeroCostEnv(random_obs=True), n_steps=64, batch_size=32, n_epochs=3,
               seed=seed, learning_rate=lr, policy_kwargs=policy_kwargs(-0.5), device="cpu",
               verbose=0)


def _params(model: PPO) -> dict[str, th.Tensor]:
    return {k: v.clone() for k, v in model.policy.state_dict().items()}


def test_gaussian_kl_is_the_closed_form_of_torch() -> None:
    g = th.Generator().manual_seed(0)
    mu, mu_r = th.randn(5, 6, generator=g), th.randn(5, 6, generator=g)
    ls, ls_r = 0.3 * th.randn(6, generator=g), 0.3 * th.randn(6, generator=g)
    p = th.distributions.Normal(mu, ls.exp().expand_as(mu))
    q = th.distributions.Normal(mu_r, ls_r.exp().expand_as(mu_r))
    want = th.distributions.kl_divergence(p, q).sum(-1)
    assert th.allclose(gaussian_kl(mu, ls, mu_r, ls_r), want, atol=1e-6)
    assert th.allclose(gaussian_kl(mu, ls, mu, ls), th.zeros(5), atol=1e-7)


def test_schedule_constant_linear_exponential() -> None:
    assert KLSchedule(0.5)(10**9) == 0.5  # no decay steps: constant
    lin = KLSchedule(2.0, "linear", 1000)
    assert (lin(0), lin(500), lin(1000), lin(5000)) == (2.0, 1.0, 0.0, 0.0)
    exp = KLSchedule(2.0, "exponential", 1000)
    assert (exp(0), exp(1000), exp(3000)) == (2.0, 1.0, 0.25)
    assert KLSchedule(0.0, "linear", 10)(0) == 0.0


def test_coefficient_0_is_sb3_ppo_bit_for_bit() -> None:
    """The override is SB3's PPO.train (2.9.2) written out: with no term it updates the
    same weights, bit for bit, with or without a reference attached."""
    a = _model(PPO)
    a.learn(192)
    b = _model(KLPPO)
    b.learn(192)
    reference = ReferencePolicy(_model(PPO, seed=9).policy)  # built first: seeding is global
    c = _model(KLPPO)
    c.kl_reference = reference
    c.learn(192)
    want = _params(a)
    for m in (b, c):
        got = _params(m)
        assert all(th.equal(want[k], got[k]) for k in want)


def _drift(coef: float) -> float:
    """KL(policy || its own starting weights) after learning with ``coef`` (same seed)."""
    model = _model(KLPPO, seed=5, lr=3e-3)
    start = _model(PPO, seed=5)
    start.policy.load_state_dict(model.policy.state_dict())
    model.kl_reference = ReferencePolicy(start.policy)
    model.kl_schedule = KLSchedule(coef)
    model.learn(1024)
    dim = ZeroCostEnv(random_obs=True).observation_space.shape[0]
    obs = th.rand(512, dim, generator=th.Generator().manual_seed(1)) * 2 - 1
    return float(model.kl_reference.kl_from(model.policy, obs))


def test_a_large_coefficient_keeps_the_policy_near_the_reference() -> None:
    free, held = _drift(0.0), _drift(20.0)
    assert free > 0.01, f"the reward moved the policy only {free}"
    assert held < 0.25 * free, (free, held)


def test_a_kl_checkpoint_is_an_ordinary_ppo_zip(tmp_path: Path) -> None:
    model = _model(KLPPO)
    model.kl_reference = ReferencePolicy(_model(PPO, seed=9).policy)
    model.kl_schedule = KLSchedule(1.0, "linear", 100)
    model.learn(64)
    model.save(str(tmp_path / "k.zip"))
    names = zipfile.ZipFile(tmp_path / "k.zip").read("data").decode()
    assert "kl_reference" not in names and "kl_schedule" not in names
    back = PPO.load(str(tmp_path / "k.zip"), device="cpu")
    assert all(th.equal(v, back.policy.state_dict()[k]) for k, v in model.policy.state_dict().items())


@pytest.mark.parametrize(("kw", "match"), [
    ({"kl_coef": 0.1}, "needs init_from"),
    ({"kl_coef": -1.0, "init_from": "x.zip"}, "kl_coef must be >= 0"),
    ({"kl_decay": "cosine"}, "kl_decay must be one of"),
    ({"kl_decay_steps": -5}, "kl_decay_steps must be >= 0"),
])
def test_bad_kl_settings_are_refused_with_their_name(kw: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        TrainConfig(**kw).validate()
