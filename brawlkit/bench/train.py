"""``python -m brawlkit bench train [--json]``: what the environment costs the trainer.

Runs SB3 PPO (the training policy and hyperparameters) for the same number of
env steps on (a) real BRAWLPIT envs over UDP and (b) a zero-cost dummy env with
identical spaces, episode length and vec-env path, for n_envs 1, 2, 4 and 8
(the BRAWLPIT envs as arenas of a shared server group, as training runs them),
and reports env-steps/s of each and their ratio, ``n<N>_ratio`` (1.0 = the env
is free; target >= 0.75, i.e. the env costs the trainer at most 25 %).  At
n_envs 2 it also measures SB3's ``SubprocVecEnv`` (one server per worker).  Then one
cProfile'd BRAWLPIT run says where the time goes: env step (UDP wait,
observation, reward), policy forward during rollouts, the PPO update, and the
rest of SB3's rollout loop.

``--ray [ADDRESS]`` instead compares the local vec env with Ray env workers
(brawlkit/distributed, docs/distributed.md): the same PPO run on ``--ray-n-envs``
BRAWLPIT envs, once in-process and once split over ``--ray-workers`` Ray actors,
side by side; ``ray_ratio`` = Ray / local env-steps/s (reported, not asserted;
issue target >= 0.8).
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import json
import pstats
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym

from brawlkit.common.cli_args import add_json_flag, command_parser
from brawlkit.common.threads import limit_threads
from brawlkit.distributed.cluster import RayConnection
from brawlkit.distributed.ray_vecenv import RayVecEnv
from brawlkit.env import BrawlpitEnv
from brawlkit.env.dummy import ZeroCostVecEnv
from brawlkit.env.rewards import make_reward
from brawlkit.env.vecenv import make_vec_env
from brawlkit.training.config import TrainConfig
from brawlkit.training.ppo import build_model
from brawlkit.wire.server_process import ServerGroup


def _make_venv(kind: str, n_envs: int, vec: str, ray: str | None = None,
               ray_workers: int = 2) -> tuple[Any, Any]:
    """(vec env, the server group its envs share or None)."""
    from stable_baselines3.common.vec_env import VecMonitor


    fns: list[Callable[[], gym.Env]]
    group = None
    if ray is not None:  # Ray env workers, each a server with its share of the arenas

        return VecMonitor(RayVecEnv(n_envs, ray_workers, env_kwargs={"opponent": "cpu:3"},
                                    reward="tiered", address=ray)), None
    if kind == "dummy":  # every env in one numpy step: no per-env Python in the ceiling
        return VecMonitor(ZeroCostVecEnv(n_envs)), None
    elif vec == "inproc":
        # as training builds them: arenas of a shared server group (a process per
        # core the trainer leaves free, each busy-polling)
        group = ServerGroup(n_envs)

        def arena_env(i: int) -> gym.Env:  # a fresh reward object per env (rewards keep state)
            return BrawlpitEnv(opponent="cpu:3", reward=make_reward("tiered"),
                               server=group.server_for(i))

        fns = [functools.partial(arena_env, i) for i in range(n_envs)]
    else:  # subproc workers are processes of their own: one server each, never spinning
        fns = [lambda: BrawlpitEnv(opponent="cpu:3", reward=make_reward("tiered"), server_spin_us=0)
               for _ in range(n_envs)]
    return VecMonitor(make_vec_env(fns, vec=vec)), group


def _model(venv: Any, n_steps: int, **ppo: Any) -> Any:
    """PPO with the training defaults, the rollout length fixed to ``n_steps`` (and
    ``ppo``'s minibatch / epochs)."""

    cfg = TrainConfig(n_envs=venv.num_envs, n_steps=n_steps,
                      steps_per_generation=n_steps * venv.num_envs, **ppo)
    return build_model(cfg, venv)


def measure(kind: str, n_envs: int, steps: int, vec: str = "inproc", n_steps: int = 512,
            profile: bool = False, ray: str | None = None, ray_workers: int = 2,
            **ppo: Any) -> dict[str, Any]:
    """PPO env-steps/s (rollouts + updates) on ``kind`` = brawlpit | dummy (``ray``: the
    BRAWLPIT envs in Ray env workers); ``ppo``: ``batch_size`` / ``n_epochs``."""
    venv, group = _make_venv(kind, n_envs, vec, ray, ray_workers)
    try:
        model = _model(venv, n_steps, **ppo)
        model.learn(n_steps * n_envs)  # warm-up: servers, torch, first reset
        prof = cProfile.Profile() if profile else None
        n0 = model.num_timesteps
        t0 = time.perf_counter()
        if prof:
            prof.enable()
        model.learn(steps, reset_num_timesteps=False)
        if prof:
            prof.disable()
        dt = time.perf_counter() - t0
        done = model.num_timesteps - n0  # whole rollouts: what actually ran
        out: dict[str, Any] = {"steps": done, "seconds": dt, "steps_per_s": done / dt}
        if prof:
            out["profile"] = breakdown(prof, dt)
        return out
    finally:
        venv.close()
        if group is not None:
            group.close()


def _cum(stats: pstats.Stats, func: str, file_part: str, own: bool = False) -> float:
    """Cumulative time (``own``: without callees) of ``func`` in files matching ``file_part``."""
    tot = 0.0
    for (fname, _line, name), (_cc, _nc, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        if name == func and file_part in fname:
            tot += tt if own else ct
    return tot


def breakdown(prof: cProfile.Profile, wall: float) -> dict[str, float]:
    """Shares of the profiled wall time (profiler overhead inflates Python-heavy parts)."""
    st = pstats.Stats(prof)
    total = sum(v[2] for v in st.stats.values())  # type: ignore[attr-defined]
    env = _cum(st, "step_wait", "brawlkit/env/vecenv.py")
    # the fast lane's C call (send, wait, inputs) is the lane generator's own time
    lane = _cum(st, "step", "brawlkit/env/fastlane.py", own=True)
    wait = _cum(st, "_wait", "brawlkit/env/brawlpit.py")
    obs = _cum(st, "build_input", "brawlkit/env/observation.py")
    rew = _cum(st, "__call__", "brawlkit/env/rewards.py")
    parse = _cum(st, "parse_snapshot", "brawlkit/wire/protocol.py")
    send = _cum(st, "step_send", "brawlkit/env/brawlpit.py")
    fwd = _cum(st, "forward", "stable_baselines3/common/policies.py")
    upd = _cum(st, "train", "stable_baselines3/ppo/ppo.py")
    rollout = _cum(st, "collect_rollouts", "on_policy_algorithm.py")
    denom = max(total, 1e-9)
    return {
        "profiled_seconds": round(total, 3),
        "env_step": round(env / denom, 3),
        "env_step/lane": round(lane / denom, 3),
        "env_step/udp_wait": round(wait / denom, 3),
        "env_step/observation": round(obs / denom, 3),
        "env_step/parse": round(parse / denom, 3),
        "env_step/reward": round(rew / denom, 3),
        "env_step/send": round(send / denom, 3),
        "policy_forward": round(fwd / denom, 3),
        "ppo_update": round(upd / denom, 3),
        "rollout_other": round(max(0.0, rollout - env - fwd) / denom, 3),
        "other": round(max(0.0, total - rollout - upd) / denom, 3),
    }


def run(steps: int = 4096, n_envs_list: tuple[int, ...] = (1, 2, 4, 8), subproc: bool = True,
        profile: bool = True, repeats: int = 2) -> dict[str, Any]:
    """Each width: BRAWLPIT and the dummy alternated ``repeats`` times, the best of each
    kept (a machine shared with other work only ever slows a run down, and it slows the
    BRAWLPIT run — two processes — more than the dummy's one); every run is reported."""
    limit_threads()
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    res: dict[str, Any] = {"steps": steps, "repeats": repeats, "n_envs": {}}
    for n in n_envs_list:
        bs, ds = [], []
        for _ in range(repeats):
            bs.append(measure("brawlpit", n, steps)["steps_per_s"])
            ds.append(measure("dummy", n, steps)["steps_per_s"])
        b, d = max(bs), max(ds)
        row = {"brawlpit_steps_per_s": round(b, 1),
               "dummy_steps_per_s": round(d, 1),
               "ratio": round(b / d, 3),
               "brawlpit_runs": [round(x, 1) for x in bs], "dummy_runs": [round(x, 1) for x in ds]}
        if subproc and n == 2:
            s = measure("brawlpit", n, steps, vec="subproc")
            row["subproc_brawlpit_steps_per_s"] = round(s["steps_per_s"], 1)
            row["subproc_ratio"] = round(s["steps_per_s"] / d, 3)
        res["n_envs"][str(n)] = row
        for k, v in row.items():
            res[f"n{n}_{k}"] = v
    last = str(n_envs_list[-1])
    res["brawlpit_steps_per_s"] = res["n_envs"][last]["brawlpit_steps_per_s"]
    res["dummy_steps_per_s"] = res["n_envs"][last]["dummy_steps_per_s"]
    res["ratio"] = res["n_envs"][last]["ratio"]
    if profile:
        res["profile_n_envs"] = int(last)
        res["profile"] = measure("brawlpit", int(last), steps, profile=True)["profile"]
    return res


def run_ray(steps: int = 4096, n_envs: int = 16, address: str = "local", workers: int = 2,
            repeats: int = 2, n_steps: int = 512) -> dict[str, Any]:
    """The same PPO run with the local vec env and with ``workers`` Ray env workers,
    alternated ``repeats`` times (the best of each: a contended machine only ever
    slows a run down); ``ray_ratio`` = Ray / local env-steps/s."""
    limit_threads()

    conn = RayConnection(address)  # once, outside the timings (starting Ray takes seconds)
    try:
        local, ray = [], []
        for _ in range(repeats):
            local.append(measure("brawlpit", n_envs, steps, n_steps=n_steps)["steps_per_s"])
            ray.append(measure("brawlpit", n_envs, steps, n_steps=n_steps, ray=address,
                               ray_workers=workers)["steps_per_s"])
        cpus = conn.cluster_cpus()
    finally:
        conn.close()
    best_local, best_ray = max(local), max(ray)
    return {"steps": steps, "ray_n_envs": n_envs, "ray_workers": workers,
            "ray_address": address, "ray_cluster_cpus": cpus,
            "local_steps_per_s": round(best_local, 1), "ray_steps_per_s": round(best_ray, 1),
            "local_runs": [round(x, 1) for x in local], "ray_runs": [round(x, 1) for x in ray],
            "ray_ratio": round(best_ray / best_local, 3)}


def run_grid(steps: int, widths: tuple[int, ...], batches: tuple[int, ...],
             epochs: tuple[int, ...], n_steps: int = 256) -> dict[str, Any]:
    """PPO env-steps/s on BRAWLPIT and on the zero-cost env for every (n_envs, minibatch,
    epochs) of the grid, side by side: where the machine's throughput lies."""
    limit_threads()
    cells = []
    for n in widths:
        for b in batches:
            for e in epochs:
                real = measure("brawlpit", n, steps, n_steps=n_steps, batch_size=b,
                               n_epochs=e)["steps_per_s"]
                zero = measure("dummy", n, steps, n_steps=n_steps, batch_size=b,
                               n_epochs=e)["steps_per_s"]
                cells.append({"n_envs": n, "batch_size": b, "n_epochs": e, "n_steps": n_steps,
                              "brawlpit_steps_per_s": round(real, 1),
                              "dummy_steps_per_s": round(zero, 1), "ratio": round(real / zero, 3)})
    best = max(cells, key=lambda c: c["brawlpit_steps_per_s"])
    return {"steps": steps, "grid": cells, "best": best}


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


def main(argv: list[str] | None = None) -> int:
    ap = command_parser("bench train", __doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=None,
                    help="measured env steps (headline: per generation, default 200000; "
                    "--widths/--grid: per configuration, default 4096)")
    ap.add_argument("--n-envs", type=int, default=None,
                    help="headline: the width to run the recipe at (default: the recipe's)")
    ap.add_argument("--n-steps", type=int, default=None, help="headline: rollout length per env")
    ap.add_argument("--batch-size", type=int, default=None, help="headline: PPO minibatch")
    ap.add_argument("--n-epochs", type=int, default=None, help="headline: PPO epochs")
    ap.add_argument("--async-update", action=argparse.BooleanOptionalAction, default=None,
                    help="headline: PPO's update in its own process during the next rollout "
                    "(default: the recipe's); the other placement is measured beside it")
    ap.add_argument("--no-busy", action="store_true",
                    help="headline: skip the runs beside two CPU-bound processes")
    ap.add_argument("--widths", default=None, metavar="LIST",
                    help="instead: SB3 PPO on BRAWLPIT vs the zero-cost env at each width of the "
                    "comma LIST (e.g. 1,2,4,8; keys n<N>_ratio)")
    ap.add_argument("--grid", action="store_true",
                    help="instead: PPO on BRAWLPIT vs the zero-cost env over --grid-envs x "
                    "--grid-batch x --grid-epochs")
    ap.add_argument("--grid-envs", default="32,64,128", help="--grid widths (default 32,64,128)")
    ap.add_argument("--grid-batch", default="1024,2048,4096",
                    help="--grid minibatches (default 1024,2048,4096)")
    ap.add_argument("--grid-epochs", default="1,2,4", help="--grid epochs (default 1,2,4)")
    ap.add_argument("--no-subproc", action="store_true", help="--widths: skip the SubprocVecEnv comparison")
    ap.add_argument("--no-profile", action="store_true", help="--widths: skip the cProfile breakdown")
    ap.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                    help="instead: local vec env vs Ray env workers, side by side (ADDRESS: a "
                    "running cluster; omitted or 'local': a local Ray instance)")
    ap.add_argument("--ray-workers", type=int, default=2, help="with --ray: env workers (default 2)")
    ap.add_argument("--ray-n-envs", type=int, default=16,
                    help="with --ray: envs (default 16: 8 per worker share each step round trip)")
    ap.add_argument("--repeats", type=int, default=2,
                    help="--widths/--ray: alternate the compared runs this many times and keep "
                    "the best of each (default 2)")
    add_json_flag(ap)
    args = ap.parse_args(argv)
    if args.ray is not None:
        r = run_ray(args.steps or 4096, args.ray_n_envs, args.ray, args.ray_workers, args.repeats)
        if args.json:
            print(json.dumps(r))
        else:
            print(f"PPO env-steps/s over {r['steps']} steps, {r['ray_n_envs']} envs: local "
                  f"{r['local_steps_per_s']:.1f}, {r['ray_workers']} Ray env workers "
                  f"{r['ray_steps_per_s']:.1f}, ray_ratio {r['ray_ratio']:.3f} (target >= 0.8)")
        return 0
    if args.grid:
        g = run_grid(args.steps or 4096, _ints(args.grid_envs), _ints(args.grid_batch),
                     _ints(args.grid_epochs))
        if args.json:
            print(json.dumps(g))
            return 0
        print(f"PPO env-steps/s over {g['steps']} steps per cell (BRAWLPIT / zero-cost env)")
        for c in g["grid"]:
            print(f"  n_envs {c['n_envs']:4d} minibatch {c['batch_size']:5d} epochs {c['n_epochs']}: "
                  f"brawlpit {c['brawlpit_steps_per_s']:9.1f}  zero-cost {c['dummy_steps_per_s']:9.1f}"
                  f"  ratio {c['ratio']:.3f}")
        return 0
    if args.widths is None:
        from brawlkit.bench import loop

        res = loop.run(args.steps or 200_000, busy=not args.no_busy, n_envs=args.n_envs,
                       n_steps=args.n_steps, batch_size=args.batch_size, n_epochs=args.n_epochs,
                       async_update=args.async_update)
        print(json.dumps(res) if args.json else loop.format_report(res))
        return 0
    res = run(args.steps or 4096, _ints(args.widths), not args.no_subproc,
              not args.no_profile, args.repeats)
    if args.json:
        print(json.dumps(res))
        return 0
    print(f"PPO env-steps/s over {res['steps']} steps (ratio = brawlpit / zero-cost dummy; target >= 0.75)")
    for n, row in res["n_envs"].items():
        extra = (f"  subproc {row['subproc_brawlpit_steps_per_s']:8.1f} (ratio {row['subproc_ratio']:.3f})"
                 if "subproc_ratio" in row else "")
        print(f"  n_envs {n}: brawlpit {row['brawlpit_steps_per_s']:8.1f}  dummy "
              f"{row['dummy_steps_per_s']:8.1f}  ratio {row['ratio']:.3f}{extra}")
    if "profile" in res:
        print(f"where the time goes (cProfile, n_envs {res['profile_n_envs']}, shares of profiled time):")
        for k, v in res["profile"].items():
            print(f"  {k:24s} {v}")
    return 0
