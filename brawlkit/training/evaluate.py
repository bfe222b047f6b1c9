"""Play a policy against an opponent and count wins, draws and losses.

``python -m brawlkit eval --checkpoint CKPT.zip --vs cpu:3 --episodes 10 [--json]``

Deterministic play (docs/observation.md, "Action"): the Gaussian mean, clipped —
computed by the same numpy actor the exporter writes
(:class:`brawlkit.export.actor.NumpyPolicy`), so the numbers describe exactly
what the native bot would play.  The checkpoint says how it was trained (action
repeat, input layout); evaluation plays it that way, never at an assumed cadence.  Episodes run on
several envs at once (all commands sent before any snapshot is read), each
episode with its own fixed match seed, so an evaluation is reproducible.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from brawlkit.common.threads import limit_threads
from brawlkit.env import BrawlpitEnv
from brawlkit.env.actions import N_PATTERNS, action_patterns, spam_fraction
from brawlkit.env.observation import check_input_layout
from brawlkit.env.rewards import OutcomeReward
from brawlkit.export.actor import NumpyPolicy, checkpoint_meta, load_sb3_policy
from brawlkit.export.bpw import PolicyMeta

PolicyFn = Callable[[np.ndarray], np.ndarray]


def play_episodes(
    policy: PolicyFn,
    opponent: str = "cpu:3",
    episodes: int = 10,
    seed: int = 0,
    envs: Sequence[Any] | None = None,
    n_envs: int = 2,
    env_kwargs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Play ``episodes`` matches of ``policy`` (batched obs -> actions) vs ``opponent``.

    Episode ``j`` uses match seed ``seed + j`` whichever env plays it.  ``envs``
    lets a trainer reuse long-lived eval envs; otherwise ``n_envs`` temporary
    :class:`~brawlkit.env.BrawlpitEnv` are started and closed.
    """
    own = envs is None
    if envs is None:
        n = max(1, min(n_envs, episodes))
        envs = [BrawlpitEnv(opponent=opponent, reward=OutcomeReward(), parallel=n,
                            **(env_kwargs or {})) for _ in range(n)]
    results: list[dict[str, Any]] = []
    try:
        queue = list(range(episodes))
        obs: dict[int, np.ndarray] = {}
        counts: dict[int, np.ndarray] = {}
        steps: dict[int, int] = {}

        def start(i: int) -> None:
            j = queue.pop(0)
            o, _ = envs[i].reset(seed=seed + j, options={"opponent": opponent})
            obs[i], counts[i], steps[i] = o, np.zeros(N_PATTERNS, np.int64), 0

        for i in range(len(envs)):
            if queue:
                start(i)
        while obs:
            active = sorted(obs)
            acts = np.asarray(policy(np.stack([obs[i] for i in active])), np.float32)
            for k, i in enumerate(active):
                envs[i].step_send(acts[k])
                counts[i][action_patterns(acts[k])[0]] += 1
            for i in active:
                o, _, term, trunc, info = envs[i].step_recv()
                steps[i] += 1
                if term or trunc:
                    results.append({
                        "outcome": info.get("outcome") or "draw",
                        "ticks": int(info.get("tick", 0)),
                        "stock_diff": int(info["self_stocks"]) - int(info["other_stocks"]),
                        "spam_fraction": spam_fraction(counts[i]),
                        "steps": steps[i],
                    })
                    del obs[i]
                    if queue:
                        start(i)
                else:
                    obs[i] = o
    finally:
        if own:
            for e in envs:
                e.close()
    return summarize(results, opponent)


def summarize(results: list[dict[str, Any]], opponent: str) -> dict[str, Any]:
    n = len(results)
    wins = sum(r["outcome"] == "win" for r in results)
    draws = sum(r["outcome"] == "draw" for r in results)
    losses = sum(r["outcome"] == "loss" for r in results)
    return {
        "vs": opponent,
        "episodes": n,
        "wins": wins,
        "draws": draws,
        "losses": losses,
        "win_rate": wins / n if n else 0.0,
        "draw_rate": draws / n if n else 0.0,
        "loss_rate": losses / n if n else 0.0,
        "mean_stock_diff": float(np.mean([r["stock_diff"] for r in results])) if n else 0.0,
        "mean_ticks": float(np.mean([r["ticks"] for r in results])) if n else 0.0,
        "mean_steps": float(np.mean([r["steps"] for r in results])) if n else 0.0,
        "spam_fraction": float(np.mean([r["spam_fraction"] for r in results])) if n else 0.0,
    }


def evaluate_model(model: Any, levels: Sequence[int], episodes: int, envs: Sequence[Any],
                   meta: PolicyMeta, seed: int = 1_000_000) -> dict[str, dict[str, Any]]:
    """Deterministic policy of a live SB3 model vs each CPU level (same match seeds every call)."""
    actor = NumpyPolicy.from_sb3(model.policy, meta)
    return {f"cpu_{lv}": play_episodes(actor, f"cpu:{lv}", episodes, seed + 1000 * lv, envs=envs)
            for lv in levels}


def load_policy(checkpoint: str | Path) -> NumpyPolicy:
    """The deterministic numpy actor of a checkpoint, carrying how it was trained.

    Refuses a checkpoint whose policy input layout this env cannot build.
    """
    meta = checkpoint_meta(checkpoint)
    check_input_layout(meta.input_layout, str(checkpoint))
    return NumpyPolicy.from_sb3(load_sb3_policy(checkpoint), meta)


def evaluate(
    checkpoint: str | Path, vs: str = "cpu:3", episodes: int = 10, seed: int = 0, n_envs: int = 2
) -> dict[str, Any]:
    """Win / draw / loss rates of ``checkpoint`` (an SB3 zip) against ``vs``,
    played at the action repeat it was trained with."""
    limit_threads()
    policy = load_policy(checkpoint)
    res = play_episodes(policy, vs, episodes, seed, n_envs=n_envs,
                        env_kwargs={"action_repeat": policy.meta.action_repeat})
    res["checkpoint"] = str(checkpoint)
    res["seed"] = seed
    res["action_repeat"] = policy.meta.action_repeat
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m brawlkit eval",
        description="Play a PPO checkpoint (deterministic: clipped Gaussian mean) against an "
        "opponent and print its win / draw / loss rates.",
    )
    ap.add_argument("--checkpoint", required=True, help="SB3 checkpoint zip (e.g. runs/main/.../gen_0003.zip)")
    ap.add_argument("--vs", default="cpu:3", help="opponent: cpu:L with L in 1..8 (default cpu:3)")
    ap.add_argument("--episodes", type=int, default=10, help="matches to play (default 10)")
    ap.add_argument("--seed", type=int, default=0, help="match seed of episode 0; episode j uses seed+j")
    ap.add_argument("--n-envs", type=int, default=2, help="servers played in parallel (default 2)")
    ap.add_argument("--json", action="store_true", help="print one JSON object on the last stdout line")
    args = ap.parse_args(argv)
    if not Path(args.checkpoint).is_file():
        print(f"eval: checkpoint {args.checkpoint} not found", file=sys.stderr)
        return 2
    res = evaluate(args.checkpoint, args.vs, args.episodes, args.seed, args.n_envs)
    if args.json:
        print(json.dumps(res))
    else:
        print(f"{res['checkpoint']} (action repeat {res['action_repeat']}) vs {res['vs']}: "
              f"{res['episodes']} episodes  "
              f"win {res['win_rate']:.2f}  draw {res['draw_rate']:.2f}  loss {res['loss_rate']:.2f}  "
              f"(mean stock diff {res['mean_stock_diff']:+.2f}, spam {res['spam_fraction']:.2f})")
    return 0
