"""A KL penalty toward a reference policy during PPO (``train --kl-coef``).

Why: a policy cloned from the CPU (``python -m brawlkit imitate``) plays well from its
first step, and PPO's first updates -- advantages from a critic that has never seen this
policy's returns, an entropy bonus, a clip range sized for small steps -- can undo in a
few rollouts what cloning took minutes to build.  AlphaStar and slippi-ai keep a KL term
toward the supervised policy during RL; this is that term.  The reference is the
``--init-from`` checkpoint's actor, frozen.

**Exactly what is added.**  On every PPO minibatch (the observations ``s`` of the
rollout, as SB3 samples them), the loss SB3 minimises becomes

    loss = policy_loss + ent_coef * entropy_loss + vf_coef * value_loss
           + kl_coef(t) * mean_s KL(pi_theta(.|s) || pi_ref(.|s))

with the KL of the two diagonal Gaussians in closed form, summed over the 6 action
dimensions (SB3's log-std is a state-independent vector; the actions' clipping to
[-1, 1] happens outside the distribution, as in SB3's own log-probabilities):

    KL = sum_i  log(sd_ref_i / sd_i) + (sd_i^2 + (mu_i - mu_ref_i)^2) / (2 sd_ref_i^2) - 1/2

It is the reverse KL, the direction of a penalty on the policy's own (on-policy)
states.  ``kl_coef(t)`` is :class:`KLSchedule` at the run's env steps ``t`` when the
rollout ends: constant, or decaying linearly to 0 at ``kl_decay_steps``, or halving
every ``kl_decay_steps`` (exponential).  ``train/kl_teacher`` logs the minibatch mean
of the KL, ``train/kl_coef`` the coefficient.

**How.**  :class:`KLPPO` subclasses SB3's ``PPO`` and overrides its update
(``update_now``, which ``train`` calls, here or in the update process): the same loop
as stable-baselines3 2.9.2's ``PPO.train`` (written out in :meth:`KLPPO.update_now` and
:meth:`KLPPO._minibatch`, the same operations in the same order), plus the term.  With
a coefficient of 0 it is SB3's update bit for bit (a test holds the two together), and
a run without ``--kl-coef`` builds SB3's own ``PPO``.  The reference and the schedule
are not saved in the zip (``_excluded_save_params``): a checkpoint of a KL run is an
ordinary PPO checkpoint that ``eval``, ``export`` and ``PPO.load`` take as is.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch as th
from stable_baselines3 import PPO
from stable_baselines3.common.utils import explained_variance
from torch.nn import functional as F

from brawlkit.export.actor import load_sb3_policy
from brawlkit.training.rollout import PipelinedRollout


@dataclass(frozen=True)
class KLSchedule:
    """The KL coefficient over a run: ``coef`` at step 0, then (``steps`` > 0) linear to
    0 at ``steps`` env steps or halving every ``steps`` (``decay="exponential"``)."""

    coef: float = 0.0
    decay: str = "linear"
    steps: int = 0

    def __call__(self, timesteps: int) -> float:
        if self.coef == 0.0 or self.steps <= 0:
            return float(self.coef)
        if self.decay == "exponential":
            return float(self.coef * 0.5 ** (timesteps / self.steps))
        return float(self.coef * max(0.0, 1.0 - timesteps / self.steps))


def gaussian_kl(mean: th.Tensor, log_std: th.Tensor, ref_mean: th.Tensor,
                ref_log_std: th.Tensor) -> th.Tensor:
    """KL(N(mean, std) || N(ref_mean, ref_std)) per row, summed over the last axis."""
    var, ref_var = th.exp(2.0 * log_std), th.exp(2.0 * ref_log_std)
    per_dim = ref_log_std - log_std + (var + (mean - ref_mean) ** 2) / (2.0 * ref_var) - 0.5
    return per_dim.sum(dim=-1)


class ReferencePolicy:
    """A frozen actor: the Gaussian (mean, log-std) of a checkpoint's policy, no grad."""

    def __init__(self, policy: Any, source: str = "") -> None:
        self.policy = policy.eval()
        for p in self.policy.parameters():
            p.requires_grad_(False)
        self.source = source

    @classmethod
    def from_checkpoint(cls, path: str | Path) -> ReferencePolicy:
        return cls(load_sb3_policy(path), str(path))

    def mean_log_std(self, obs: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        with th.no_grad():
            dist = self.policy.get_distribution(obs)
            return dist.distribution.mean, self.policy.log_std

    def kl_from(self, policy: Any, obs: th.Tensor) -> th.Tensor:
        """Mean over ``obs`` of KL(``policy`` || this reference) (no grad)."""
        with th.no_grad():
            mean = policy.get_distribution(obs).distribution.mean
            ref_mean, ref_log_std = self.mean_log_std(obs)
            return gaussian_kl(mean, policy.log_std, ref_mean, ref_log_std).mean()


class KLPPO(PipelinedRollout):
    """SB3's PPO with ``kl_schedule(t) * KL(policy || kl_reference)`` in its loss (the
    module docstring says exactly how).  Set :attr:`kl_reference` and
    :attr:`kl_schedule` after building or loading (:func:`attach_reference`)."""

    kl_reference: ReferencePolicy | None = None
    kl_schedule: KLSchedule = KLSchedule()

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "kl_reference", "kl_schedule"]

    def worker_extras(self) -> dict[str, Any]:
        return {"kl_reference": self.kl_reference, "kl_schedule": self.kl_schedule}

    def update_now(self) -> None:
        """Update the policy from the rollout buffer: ``PPO.train``'s loop (SB3 2.9.2)."""
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        clip_range = self.clip_range(self._current_progress_remaining)  # type: ignore[operator]
        clip_range_vf = (None if self.clip_range_vf is None else
                         self.clip_range_vf(self._current_progress_remaining))  # type: ignore[operator]
        coef = self.kl_schedule(self.num_timesteps)
        logs: dict[str, list[float]] = defaultdict(list)
        continue_training = True
        for _epoch in range(self.n_epochs):
            approx_kl_divs: list[Any] = []
            for data in self.rollout_buffer.get(self.batch_size):
                loss, approx_kl = self._minibatch(data, clip_range, clip_range_vf, coef, logs)
                approx_kl_divs.append(approx_kl)
                if self.target_kl is not None and approx_kl > 1.5 * self.target_kl:
                    continue_training = False
                    break
                self.policy.optimizer.zero_grad()
                loss.backward()
                th.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
                self.policy.optimizer.step()
            self._n_updates += 1
            if not continue_training:
                break
        self._log_train(logs, approx_kl_divs, loss, clip_range, clip_range_vf, coef)

    def _minibatch(self, data: Any, clip_range: float, clip_range_vf: float | None, coef: float,
                   logs: dict[str, list[float]]) -> tuple[th.Tensor, Any]:
        """One minibatch's loss (SB3's terms, then the KL term) and its approx_kl."""
        # policy.evaluate_actions written out, to keep the Gaussian's mean for the KL
        p = self.policy
        latent_pi, latent_vf = p.mlp_extractor(p.extract_features(data.observations))
        dist = p._get_action_dist_from_latent(latent_pi)
        log_prob, entropy = dist.log_prob(data.actions), dist.entropy()
        values = p.value_net(latent_vf).flatten()
        advantages = data.advantages
        if self.normalize_advantage and len(advantages) > 1:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        ratio = th.exp(log_prob - data.old_log_prob)
        policy_loss_1 = advantages * ratio
        policy_loss_2 = advantages * th.clamp(ratio, 1 - clip_range, 1 + clip_range)
        policy_loss = -th.min(policy_loss_1, policy_loss_2).mean()
        logs["pg"].append(policy_loss.item())
        logs["clip"].append(th.mean((th.abs(ratio - 1) > clip_range).float()).item())
        values_pred = values if clip_range_vf is None else data.old_values + th.clamp(
            values - data.old_values, -clip_range_vf, clip_range_vf)
        value_loss = F.mse_loss(data.returns, values_pred)
        logs["value"].append(value_loss.item())
        entropy_loss = -th.mean(-log_prob) if entropy is None else -th.mean(entropy)
        logs["entropy"].append(entropy_loss.item())
        loss = policy_loss + self.ent_coef * entropy_loss + self.vf_coef * value_loss
        if self.kl_reference is not None:
            ref_mean, ref_log_std = self.kl_reference.mean_log_std(data.observations)
            mean = dist.distribution.mean  # type: ignore[union-attr]  # a diagonal Gaussian
            kl = gaussian_kl(mean, p.log_std, ref_mean, ref_log_std).mean()
            logs["kl_teacher"].append(kl.item())
            if coef > 0.0:
                loss = loss + coef * kl
        with th.no_grad():
            log_ratio = log_prob - data.old_log_prob
            approx_kl = th.mean((th.exp(log_ratio) - 1) - log_ratio).cpu().numpy()
        return loss, approx_kl

    def _log_train(self, logs: dict[str, list[float]], approx_kl_divs: list[Any], loss: th.Tensor,
                   clip_range: float, clip_range_vf: float | None, coef: float) -> None:
        """SB3's ``train/*`` keys, plus ``train/kl_teacher`` and ``train/kl_coef``."""
        buf = self.rollout_buffer
        record = self.logger.record
        record("train/entropy_loss", np.mean(logs["entropy"]))
        record("train/policy_gradient_loss", np.mean(logs["pg"]))
        record("train/value_loss", np.mean(logs["value"]))
        record("train/approx_kl", np.mean(approx_kl_divs))
        record("train/clip_fraction", np.mean(logs["clip"]))
        record("train/loss", loss.item())
        record("train/explained_variance",
               explained_variance(buf.values.flatten(), buf.returns.flatten()))
        record("train/std", th.exp(self.policy.log_std).mean().item())
        record("train/n_updates", self._n_updates, exclude="tensorboard")
        record("train/clip_range", clip_range)
        if clip_range_vf is not None:
            record("train/clip_range_vf", clip_range_vf)
        if logs["kl_teacher"]:
            record("train/kl_teacher", np.mean(logs["kl_teacher"]))
        record("train/kl_coef", coef)


def ppo_class(cfg: Any) -> type[PPO]:
    """SB3's ``PPO`` with the pipelined rollout (training/rollout.py) for a run without
    the KL term, :class:`KLPPO` (the same, plus the KL term) with it."""
    return KLPPO if cfg.kl_coef > 0 else PipelinedRollout


def attach_reference(model: Any, cfg: Any) -> None:
    """Give a :class:`KLPPO` its reference (``cfg.init_from``'s actor) and schedule."""
    if isinstance(model, KLPPO):
        model.kl_reference = ReferencePolicy.from_checkpoint(cfg.init_from)
        model.kl_schedule = KLSchedule(cfg.kl_coef, cfg.kl_decay, cfg.kl_decay_steps)
