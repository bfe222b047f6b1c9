"""A run that starts from a checkpoint's weights (``train --init-from CKPT``).

Why: a behaviour-cloned policy (``python -m brawlkit imitate``, docs/imitation.md)
already plays; PPO -- any role, with or without a league -- should continue it rather
than start from random weights.  Generation 0 of the new run loads the checkpoint's
whole policy (actor, log-std and critic; a fresh optimizer) and records the checkpoint
as its lineage parent; everything else (the curriculum, the logs, the generation count)
is the new run's own.

The checkpoint must be playable as this run trains: :func:`check_init_from` refuses,
naming what differs, a checkpoint of another action repeat, input layout or network
(the shape of every tensor of the policy, and its activation), before any server
starts.  A different reward preset is only noted: the actor is the same policy, only
the critic was fitted to other returns.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brawlkit.export.actor import checkpoint_meta, load_sb3_policy, policy_kwargs
from brawlkit.export.bpw import PolicyMeta


@dataclass(frozen=True)
class InitCheckpoint:
    """A checked ``--init-from`` checkpoint: its path, how it plays, and the league
    member id its metadata names (None when it was never a league member)."""

    path: Path
    meta: PolicyMeta
    member: str | None = None


def _expected_policy(cfg: Any, obs_dim: int) -> Any:
    """A policy of ``cfg``'s network (no env, no server): the shapes to compare with."""
    import gymnasium as gym
    import numpy as np
    from stable_baselines3.common.policies import ActorCriticPolicy

    from brawlkit.env.actions import ACT_DIM

    obs = gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32)
    act = gym.spaces.Box(-1.0, 1.0, (ACT_DIM,), np.float32)
    return ActorCriticPolicy(obs, act, lambda _: 0.0, **policy_kwargs(cfg.log_std_init, cfg.hidden))


def network_differences(policy: Any, expected: Any) -> list[str]:
    """What differs between two policies' networks: tensors missing on either side,
    tensors of other shapes, another activation (empty: the same network)."""
    got = {k: tuple(v.shape) for k, v in policy.state_dict().items()}
    want = {k: tuple(v.shape) for k, v in expected.state_dict().items()}
    out = [f"{k} {got.get(k, 'missing')} (this run: {want.get(k, 'none')})"
           for k in sorted(set(got) | set(want)) if got.get(k) != want.get(k)]
    a, b = getattr(policy, "activation_fn", None), getattr(expected, "activation_fn", None)
    if a is not b:
        out.append(f"activation {getattr(a, '__name__', a)} (this run: {getattr(b, '__name__', b)})")
    return out


def check_init_from(cfg: Any) -> InitCheckpoint | None:
    """The checked ``cfg.init_from`` (None without one).  ``FileNotFoundError`` for a
    missing file; ``ValueError`` naming every difference for a checkpoint this run
    cannot continue (not a checkpoint, action repeat, input layout, network)."""
    if cfg.init_from is None:
        return None
    path = Path(cfg.init_from)
    if not path.is_file():
        raise FileNotFoundError(f"--init-from: checkpoint {path} not found")
    meta = checkpoint_meta(path)  # ValueError: not a zip / not an SB3 checkpoint
    differs = []
    if meta.action_repeat != cfg.action_repeat:
        differs.append(f"action repeat {meta.action_repeat} (this run: --action-repeat "
                       f"{cfg.action_repeat})")
    if meta.input_layout != cfg.input_layout:
        differs.append(f"input layout {meta.input_layout} (this run: --input-layout "
                       f"{cfg.input_layout})")
    from brawlkit.env.observation import INPUT_LAYOUTS

    policy = load_sb3_policy(path)
    differs += [f"network: {d}" for d in network_differences(
        policy, _expected_policy(cfg, INPUT_LAYOUTS[cfg.input_layout]))]
    if differs:
        raise ValueError(f"--init-from {path} cannot start this run: " + "; ".join(differs))
    if meta.reward and meta.reward != cfg.reward.partition(":")[0]:
        print(f"note: --init-from {path} was trained with reward {meta.reward!r}, this run uses "
              f"{cfg.reward!r}: its critic starts from the other reward's values", file=sys.stderr)
    return InitCheckpoint(path, meta, _member_of(path))


def _member_of(path: Path) -> str | None:
    """The league member id in the checkpoint's metadata JSON, if it has one."""
    try:
        member = json.loads(path.with_suffix(".json").read_text()).get("member")
    except (OSError, ValueError, AttributeError):
        return None
    return str(member) if member else None


def load_init_weights(model: Any, init: InitCheckpoint) -> None:
    """Copy the checkpoint's whole policy (actor, log-std, critic) into ``model``."""
    model.policy.load_state_dict(load_sb3_policy(init.path).state_dict())
