"""The real training loop, measured beside its ceiling parts (``bench train``'s headline).

What a user's run costs is not SB3 PPO on a stripped loop but :func:`brawlkit.training.ppo.train`
as the shipped recipe runs it: Main as a league member (its opponents the fixed ladder,
PFSP over learned members and self-play, frozen members playing from their exported
blobs), a KL term toward the clone it starts from, each generation's evaluation and
checkpoint.  :func:`real_loop` runs exactly that — two generations in a throw-away league,
the first registering a learned member so the second's sampler has every kind of opponent
— and reports the second generation's env steps/s (training alone, and with its
evaluation).  In the same run, at the same settings:

* ``lane``: the vec env alone stepping random actions (the packet path's ceiling);
* ``update``: PPO's update alone on a full rollout (µs per env step);
* ``zero_cost``: the same PPO (KL included) on the zero-cost env — the loop's ceiling
  with a free environment; ``ratio_vs_zero_cost`` = real / zero-cost;
* ``other_update``: the real loop and the zero-cost env again with the update's other
  placement — in its own process during the next rollout (``async_update``,
  training/update_worker.py) or after the rollout as SB3 orders it — so one run shows
  what the overlap buys, each ratio against the zero-cost env run the same way;
* ``busy``: the real loop again with two CPU-bound processes on the machine, once with
  the server's busy-poll decided as training decides it (adaptive: it backs off when
  preempted) and once with a server that always blocks; ``busy_ratio_vs_blocking`` must
  not fall below ~0.9 — a shared machine must never be slower than the blocking server.

Throughput only: the run's learning is ``bench learn``'s business.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from brawlkit.env import BrawlpitEnv
from brawlkit.env.dummy import ZeroCostVecEnv
from brawlkit.env.rewards import make_reward
from brawlkit.env.vecenv import BrawlpitVecEnv
from brawlkit.training.checkpoints import list_checkpoints
from brawlkit.training.config import TrainConfig
from brawlkit.training.ppo import build_model, scratch_checkpoint, train
from brawlkit.wire.server_process import ServerGroup

#: the recipe whose [train] settings the real loop runs (configs/learn/): the shipped recipe at the
#: fast trainer's width, its update in its own process during the next rollout
RECIPE = "chosen_wide_async"


def recipe_config(steps: int, seed: int = 0, recipe: str = RECIPE,
                  **overrides: Any) -> tuple[TrainConfig, float]:
    """The recipe's training settings for a measured generation of ``steps`` env steps
    (evaluation as the recipe has it), ``overrides`` on top (``bench train --n-envs`` ...);
    and its KL coefficient apart (the KL term needs the init checkpoint each measurement
    makes, :func:`with_init`)."""
    from brawlkit.bench.learn import LearnConfig, resolve_config

    rec = LearnConfig.load(resolve_config(recipe))
    data = {**rec.train, "seed": seed, "steps_per_generation": steps, "generations": 2,
            **{k: v for k, v in overrides.items() if v is not None}}
    return TrainConfig.from_dict({**data, "kl_coef": 0.0}), float(data.get("kl_coef", 0.0))


def with_init(cfg: TrainConfig, kl_coef: float, path: Path) -> TrainConfig:
    """``cfg`` starting from a fresh checkpoint of its shape at ``path``, with a KL term of
    ``kl_coef`` toward it (as the recipe's Main continues its clone)."""
    init = scratch_checkpoint(path, seed=cfg.seed, cfg=cfg)
    return TrainConfig.from_dict({**cfg.to_dict(), "init_from": str(init), "kl_coef": kl_coef})


@contextlib.contextmanager
def busy_processes(n: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``n`` CPU-bound processes beside the measurement (a shared machine), killed after."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield procs
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


@contextlib.contextmanager
def server_spin(us: int | None) -> Iterator[None]:
    """Servers started inside spin ``us`` µs (0: always block); None: as training decides."""
    old = os.environ.get("BRAWLKIT_SERVER_SPIN_US")
    if us is not None:
        os.environ["BRAWLKIT_SERVER_SPIN_US"] = str(us)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("BRAWLKIT_SERVER_SPIN_US", None)
        else:
            os.environ["BRAWLKIT_SERVER_SPIN_US"] = old


def real_loop(cfg: TrainConfig, kl_coef: float, work: Path) -> dict[str, Any]:
    """Two generations of ``train()`` as a league Main from a clone-shaped init with the
    recipe's KL; the second generation's rates (training alone; training + evaluation)."""
    work.mkdir(parents=True, exist_ok=True)
    run_cfg = with_init(cfg, kl_coef, work / "init.zip")
    res = train(run_cfg, run_dir=work / "run", league_dir=work / "league", progress=False)
    meta = json.loads(list_checkpoints(res.run_dir)[-1][1].read_text())
    steps = int(meta["steps_this_generation"])
    train_s, eval_s = float(meta["train_seconds"]), float(meta["eval_seconds"])
    return {"steps": steps, "train_seconds": round(train_s, 2), "eval_seconds": round(eval_s, 2),
            "steps_per_s": round(steps / train_s, 1),
            "steps_per_s_with_eval": round(steps / (train_s + eval_s), 1),
            "eval_matches": sum(int(v["episodes"]) for v in meta["eval"].values()) * 2,
            "lane": meta["lane"]}


def lane_alone(cfg: TrainConfig, steps: int) -> dict[str, Any]:
    """The vec env of the run's width stepping random actions: env steps/s of the packet
    path with nothing else to do (cpu:3 opponents, the run's reward)."""
    n = cfg.n_envs
    with ServerGroup(n) as group:
        def env(i: int) -> BrawlpitEnv:
            return BrawlpitEnv(opponent="cpu:3", reward=make_reward(cfg.reward),
                               server=group.server_for(i), action_repeat=cfg.action_repeat,
                               input_layout=cfg.input_layout)

        venv = BrawlpitVecEnv([functools.partial(env, i) for i in range(n)])
        try:
            venv.seed(cfg.seed)
            venv.reset()
            rng = np.random.default_rng(cfg.seed)
            acts = rng.uniform(-1, 1, (64, n, 6)).astype(np.float32)
            k = max(1, steps // n)
            t0 = time.perf_counter()
            for j in range(k):
                venv.step(acts[j % 64])
            dt = time.perf_counter() - t0
            lane = venv.lane
            assert lane is not None
            return {"steps_per_s": round(k * n / dt, 1), "fallbacks": lane.fallbacks,
                    "batched_share": round(lane.batched_steps / max(lane.steps, 1), 3)}
        finally:
            venv.close()


def zero_cost(cfg: TrainConfig, kl_coef: float, steps: int, work: Path) -> dict[str, Any]:
    """The same PPO (network, rollout, minibatch, epochs, KL toward an init) on the
    zero-cost vec env (every env in one numpy step): the loop's ceiling; and the update
    alone."""
    zcfg = with_init(cfg, kl_coef, work / "zero_init.zip")
    venv = ZeroCostVecEnv(cfg.n_envs, input_layout=cfg.input_layout)
    try:
        model = build_model(zcfg, venv)
        model.learn(zcfg.ppo_n_steps() * zcfg.n_envs)  # warm-up: the first rollout and update
        n0 = model.num_timesteps
        t0 = time.perf_counter()
        model.learn(steps, reset_num_timesteps=False)
        dt = time.perf_counter() - t0
        done = model.num_timesteps - n0
        t1 = time.perf_counter()
        model.update_now()  # the update alone, on the buffer the last rollout filled
        upd = time.perf_counter() - t1
        per_rollout = zcfg.ppo_n_steps() * zcfg.n_envs
        return {"steps_per_s": round(done / dt, 1),
                "update_us_per_step": round(upd / per_rollout * 1e6, 2)}
    finally:
        venv.close()


def run(steps: int = 200_000, busy: bool = True, **overrides: Any) -> dict[str, Any]:
    """The headline: the real loop at the recipe's settings (``overrides`` on top) and
    its ceiling parts, and with ``busy`` the same loop beside two CPU-bound processes
    (adaptive spin and blocking server)."""
    cfg, kl = recipe_config(steps, **overrides)
    out: dict[str, Any] = {"recipe": RECIPE, "n_envs": cfg.n_envs, "n_steps": cfg.ppo_n_steps(),
                           "batch_size": cfg.ppo_batch_size(), "n_epochs": cfg.n_epochs,
                           "async_update": cfg.async_update,
                           "kl_coef": kl, "eval_levels": list(cfg.eval_levels),
                           "eval_episodes": cfg.eval_episodes, "cores": os.cpu_count()}
    other = TrainConfig.from_dict({**cfg.to_dict(), "async_update": not cfg.async_update})
    with tempfile.TemporaryDirectory(prefix="bk_bench_loop_") as td:
        work = Path(td)
        out["real"] = real_loop(cfg, kl, work / "real")
        out["lane"] = lane_alone(cfg, min(steps, 100_000))
        out["zero_cost"] = zero_cost(cfg, kl, steps, work)
        o_real = real_loop(other, kl, work / "other")
        o_zero = zero_cost(other, kl, steps, work)
        out["other_update"] = {
            "async_update": other.async_update, "real": o_real, "zero_cost": o_zero,
            "ratio_vs_zero_cost": round(o_real["steps_per_s"] / o_zero["steps_per_s"], 3)}
        if busy:
            with busy_processes(2):
                out["busy_adaptive"] = real_loop(cfg, kl, work / "busy_adaptive")
                with server_spin(0):
                    out["busy_blocking"] = real_loop(cfg, kl, work / "busy_blocking")
    real = out["real"]["steps_per_s"]
    out["steps_per_s"] = real
    out["steps_per_s_with_eval"] = out["real"]["steps_per_s_with_eval"]
    out["ratio_vs_zero_cost"] = round(real / out["zero_cost"]["steps_per_s"], 3)
    out["lane_fallbacks"] = (out["real"]["lane"]["fallbacks"] + out["lane"]["fallbacks"]
                             + out["other_update"]["real"]["lane"]["fallbacks"])
    if busy:
        out["busy_ratio_vs_blocking"] = round(out["busy_adaptive"]["steps_per_s_with_eval"]
                                              / out["busy_blocking"]["steps_per_s_with_eval"], 3)
        out["lane_fallbacks"] += (out["busy_adaptive"]["lane"]["fallbacks"]
                                  + out["busy_blocking"]["lane"]["fallbacks"])
    return out


def format_report(res: dict[str, Any]) -> str:
    """The headline as lines a person reads."""
    r, o = res["real"], res["other_update"]

    def placement(async_update: bool) -> str:
        return "update in its own process" if async_update else "update after the rollout"

    lines = [
        f"real training loop ({res['recipe']} recipe: league Main, KL {res['kl_coef']}, "
        f"n_envs {res['n_envs']}, rollout {res['n_steps']}, minibatch {res['batch_size']}, "
        f"epochs {res['n_epochs']}, {placement(res['async_update'])}; {res['cores']} cores)",
        f"  training           {r['steps_per_s']:10.1f} env steps/s  ({r['steps']} steps in "
        f"{r['train_seconds']} s)",
        f"  with evaluation    {r['steps_per_s_with_eval']:10.1f} env steps/s  ({r['eval_matches']} "
        f"matches in {r['eval_seconds']} s)",
        f"  lane alone         {res['lane']['steps_per_s']:10.1f} env steps/s",
        f"  zero-cost env      {res['zero_cost']['steps_per_s']:10.1f} env steps/s  "
        f"(update alone {res['zero_cost']['update_us_per_step']} us/step)",
        f"  ratio vs zero-cost {res['ratio_vs_zero_cost']:10.3f}   (target >= 0.8)",
        f"  lane fallbacks     {res['lane_fallbacks']:10d}   (target 0)",
        f"  {placement(o['async_update'])}: training {o['real']['steps_per_s']:.1f}, zero-cost "
        f"{o['zero_cost']['steps_per_s']:.1f} env steps/s, ratio {o['ratio_vs_zero_cost']:.3f}",
    ]
    if "busy_ratio_vs_blocking" in res:
        lines += [
            f"  busy, adaptive     {res['busy_adaptive']['steps_per_s_with_eval']:10.1f} env steps/s "
            "(two CPU-bound processes beside it)",
            f"  busy, blocking     {res['busy_blocking']['steps_per_s_with_eval']:10.1f} env steps/s",
            f"  busy ratio         {res['busy_ratio_vs_blocking']:10.3f}   (target >= 0.9)",
        ]
    return "\n".join(lines)
