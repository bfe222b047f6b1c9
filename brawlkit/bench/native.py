"""``python -m brawlkit bench native``: the C forward pass against numpy and torch.

One run, one set of weights (a fresh SB3 PPO actor of the project's shape, or a
given checkpoint), three implementations side by side:

- ``c_ns_per_forward``: ``native/build/brawlpit_policy bench`` times many calls in
  C itself (no ctypes/process overhead in the number), best of 5 runs;
  ``c_ref_ns_per_forward`` is the scalar PyTorch-layout path with libm ``tanhf``.
- ``numpy_ns_per_forward``: :class:`brawlkit.export.actor.NumpyPolicy` on one observation.
- ``torch_ns_per_forward``: :func:`brawlkit.export.actor.torch_actor_mean` (features ->
  policy_net -> action_net) on one observation, ``torch.set_num_threads(1)``, ``no_grad`` -- the arithmetic
  ``policy.predict(obs, deterministic=True)`` does; ``torch_predict_ns`` is the whole
  ``predict`` call with its numpy conversions, for reference.

The arithmetic limit is an estimate for this MLP on an AVX2+FMA core: every
multiply-add as 8-lane FMAs at 2 per cycle, each tanh as ~12 lane ops plus a
divide (~5 cycles per 8-lane divps).  ``chain_floor_cycles`` is the latency floor
that keeping every output's summation order imposes: one dependent add (4 cycles)
per input of each layer, plus the tanh latency, whatever the vector width.
Ratios matter, absolute times on shared machines are noise (docs/benchmarks.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from brawlkit.common.cli_args import add_json_flag, command_parser
from brawlkit.common.paths import native_path
from brawlkit.env.dummy import ZeroCostEnv
from brawlkit.export.actor import NumpyPolicy, actor_layers, load_sb3_policy, torch_actor_mean
from brawlkit.export.bpw import ACT_TANH, pack_bpw, parse_bpw
from brawlkit.training.config import TrainConfig
from brawlkit.training.ppo import build_model

FMA_PER_CYCLE = 2
LANES = 8
TANH_OPS_PER_VECTOR = 12
DIV_CYCLES_PER_VECTOR = 5
ADD_LATENCY = 4
TANH_LATENCY = 45


def fresh_policy(seed: int = 0) -> Any:
    """A freshly initialised SB3 policy of the project's network (no server, no training)."""

    return build_model(TrainConfig(seed=seed, n_envs=1), ZeroCostEnv()).policy


def _best_ns(fn: Any, n: int, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter_ns() - t0) / n)
    return best


def arithmetic_limit(layers: list[tuple[int, int, int]]) -> dict[str, float]:
    """Cycle estimates for a chain of (in, out, activation) layers."""
    macs = sum(i * o for i, o, _ in layers)
    n_tanh = sum(o for _, o, a in layers if a == ACT_TANH)
    vec_tanh = sum(-(-o // LANES) for _, o, a in layers if a == ACT_TANH)
    mac_cycles = macs / (LANES * FMA_PER_CYCLE)
    tanh_cycles = vec_tanh * (TANH_OPS_PER_VECTOR / FMA_PER_CYCLE + DIV_CYCLES_PER_VECTOR)
    chain = sum(ADD_LATENCY * i + (TANH_LATENCY if a == ACT_TANH else 0) for i, _, a in layers)
    return {
        "macs": macs,
        "tanh_count": n_tanh,
        "arith_limit_cycles": mac_cycles + tanh_cycles,
        "chain_floor_cycles": float(chain),
    }


def _c_forward(raw: bytes, obs: np.ndarray, n_c: int, act_dim: int
               ) -> tuple[np.ndarray, dict[str, str]]:
    """(the C forward of ``obs`` through ``brawlpit_policy forward``, its ``bench`` figures)."""
    exe = native_path("brawlpit_policy")
    with tempfile.TemporaryDirectory() as td:
        blob = Path(td) / "bench.bpw"
        blob.write_bytes(raw)
        (Path(td) / "obs.f32").write_bytes(obs.tobytes())
        subprocess.run(
            [str(exe), "forward", str(blob), f"{td}/obs.f32", f"{td}/out.f32"], check=True
        )
        c_out = np.fromfile(f"{td}/out.f32", dtype="<f4").reshape(-1, act_dim)
        res = subprocess.run(
            [str(exe), "bench", str(blob), str(n_c)], check=True, capture_output=True, text=True
        )
    return c_out, dict(line.split() for line in res.stdout.splitlines() if line.strip())


def _torch_forward(policy: Any, obs: np.ndarray) -> tuple[np.ndarray, float, float]:
    """(torch's actor mean of ``obs``, ns per batch-1 forward, ns per ``predict``), on
    one thread as the trainer's envs run."""
    import torch

    old_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        t_out = torch_actor_mean(policy, obs)
        x1 = obs[:1]

        def torch_fwd() -> None:
            torch_actor_mean(policy, x1)

        torch_fwd()
        torch_ns = _best_ns(torch_fwd, 2000)
        o1 = obs[0]
        policy.predict(o1, deterministic=True)
        predict_ns = _best_ns(lambda: policy.predict(o1, deterministic=True), 500)
    finally:
        torch.set_num_threads(old_threads)
    return t_out, torch_ns, predict_ns


def run(json_out: bool = False, checkpoint: str | None = None, n_c: int = 200_000) -> dict:
    """Measure C / numpy / torch forward on the same weights; print a table (+ JSON line)."""
    policy = load_sb3_policy(checkpoint) if checkpoint else fresh_policy()
    policy.set_training_mode(False)
    raw = pack_bpw(actor_layers(policy))
    bpw = parse_bpw(raw)
    npol = NumpyPolicy(bpw)
    obs = np.random.default_rng(0).uniform(-1, 1, (1000, bpw.obs_dim)).astype(np.float32)
    c_out, cvals = _c_forward(raw, obs, n_c, bpw.act_dim)
    c_ns = float(cvals["fast_ns_per_forward"])
    ghz = float(cvals.get("clock_ghz", 0.0)) or 3.0
    t_out, torch_ns, predict_ns = _torch_forward(policy, obs)
    numpy_ns = _best_ns(lambda: npol.forward(obs[0]), 5000)

    lim = arithmetic_limit([(lay.n_in, lay.n_out, lay.activation) for lay in bpw.layers])
    c_cycles = c_ns * ghz
    out: dict[str, Any] = {
        "c_ns_per_forward": round(c_ns, 1),
        "c_ref_ns_per_forward": round(float(cvals["ref_ns_per_forward"]), 1),
        "numpy_ns_per_forward": round(numpy_ns, 1),
        "torch_ns_per_forward": round(torch_ns, 1),
        "torch_predict_ns": round(predict_ns, 1),
        "torch_vs_c": round(torch_ns / c_ns, 1),
        "numpy_vs_c": round(numpy_ns / c_ns, 1),
        "torch_predict_vs_c": round(predict_ns / c_ns, 1),
        "clock_ghz": round(ghz, 3),
        "c_cycles_per_forward": round(c_cycles),
        **{k: (round(v) if isinstance(v, float) else v) for k, v in lim.items()},
        "arith_limit_ns": round(lim["arith_limit_cycles"] / ghz, 1),
        "c_vs_arith_limit": round(c_cycles / lim["arith_limit_cycles"], 2),
        "c_vs_chain_floor": round(c_cycles / lim["chain_floor_cycles"], 2),
        "parity_c_vs_torch": float(np.abs(c_out - t_out).max()),
        "parity_numpy_vs_torch": float(np.abs(npol.forward(obs) - t_out).max()),
        "cpu_count": os.cpu_count(),
    }
    _print_table(out, [bpw.obs_dim] + [lay.n_out for lay in bpw.layers])
    if json_out:
        print(json.dumps(out))
    return out


def _print_table(out: dict[str, Any], dims: list[int]) -> None:
    print(f"native forward pass ({'-'.join(map(str, dims))} MLP, batch 1, same weights)")
    for key in ("c_ns_per_forward", "c_ref_ns_per_forward", "numpy_ns_per_forward",
                "torch_ns_per_forward", "torch_predict_ns"):
        print(f"  {key:<24} {out[key]:>12,.1f} ns")
    print(f"  torch / C {out['torch_vs_c']}x   numpy / C {out['numpy_vs_c']}x")
    print(
        f"  C {out['c_cycles_per_forward']} cycles at {out['clock_ghz']} GHz; arithmetic limit "
        f"~{out['arith_limit_cycles']} cycles ({out['macs']} MACs, {out['tanh_count']} tanh) "
        f"-> {out['c_vs_arith_limit']}x; summation-order chain floor "
        f"~{out['chain_floor_cycles']} cycles -> {out['c_vs_chain_floor']}x"
    )
    print(
        f"  parity max|C - torch| {out['parity_c_vs_torch']:.3g}  "
        f"max|numpy - torch| {out['parity_numpy_vs_torch']:.3g}"
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m brawlkit bench native [--checkpoint CKPT.zip] [--calls N] [--json]``."""

    ap = command_parser("bench native", "C forward pass ns/call against torch and numpy on the same weights, "
                    "with the arithmetic limit of the MLP for scale.",
    )
    ap.add_argument("--checkpoint", default=None,
                    help="SB3 checkpoint whose actor to time (default: a freshly built one)")
    ap.add_argument("--calls", type=int, default=200_000, help="C forward calls to time")
    add_json_flag(ap)
    args = ap.parse_args(argv)
    if args.calls < 1000:
        ap.error("--calls must be >= 1000 for a stable figure")
    run(json_out=args.json, checkpoint=args.checkpoint, n_c=args.calls)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
