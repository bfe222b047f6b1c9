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

import collections
import contextlib
import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from brawlkit.common.cli_args import add_json_flag, command_parser
from brawlkit.common.progress import progress_bar
from brawlkit.common.stats import wilson_interval
from brawlkit.common.threads import limit_threads
from brawlkit.env import BrawlpitEnv
from brawlkit.env.actions import ACT_DIM, ACTION_NAMES, N_PATTERNS, action_patterns, spam_fraction
from brawlkit.env.fastlane import FastLane
from brawlkit.env.observation import check_input_layout
from brawlkit.env.rewards import OutcomeReward
from brawlkit.export.actor import NoiseStream, NumpyPolicy, checkpoint_meta, load_checkpoint
from brawlkit.export.bpw import PolicyMeta, mixture_pick, split_mixture
from brawlkit.league.opponents import fixed_opponent, match_opponent, permanent_opponent
from brawlkit.league.records import BASELINE_ID
from brawlkit.wire.cpu_level import CpuLevel
from brawlkit.wire.server_process import ServerGroup

PolicyFn = Callable[[np.ndarray], np.ndarray]

#: arenas an evaluation plays at once by default (one server process; the per-step cost
#: is one batched forward and one lane call whatever the width)
EVAL_ARENAS = 32


class SampledPolicy:
    """The stochastic policy PPO trained: the actor mean plus Gaussian noise of the
    policy's (state-independent) std, clipped to the action box — what SB3 plays while
    it trains, and what a sampled ``.bpw`` (``export --sampled``) makes ``brawlpit_bot``
    play: the same blob and the same sampling rule (:class:`NoiseStream`, docs/bpw.md).
    Evaluated beside the deterministic mean so a gap between the two (a policy that only
    works through its noise) shows.
    """

    def __init__(self, policy: NumpyPolicy, seed: int = 0) -> None:
        if policy.noise_std is None:
            raise ValueError("SampledPolicy needs a blob with a noise section (version 3)")
        self.policy = policy
        self.meta = policy.meta
        self.noise = NoiseStream(seed)

    @classmethod
    def from_sb3(cls, policy: Any, meta: PolicyMeta, seed: int = 0) -> SampledPolicy:
        return cls(NumpyPolicy.from_sb3(policy, meta, sampled=True), seed)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        return self.policy.sample(obs, self.noise)


#: how a finished match was decided (:func:`decided_by`), in the order tables show them
DECIDED = ("knockout", "stocks", "damage", "even", "cut")


def decided_by(info: dict[str, Any]) -> str:
    """How the match an episode's last ``info`` ends was decided, by the server's rule
    (docs/protocol.md, "Game over"): ``knockout`` (a fighter lost its last stock before the
    buzzer), at the buzzer ``stocks`` (more stocks left) or ``damage`` (equal stocks, less
    damage), ``even`` (the buzzer with both equal: a draw), or ``cut`` (the episode was
    truncated before the match ended). Why: a win rate alone does not say *how* a policy
    is beaten; an exploiter that wins by knock-outs has found a hole in Main's fighting, one
    that wins at the buzzer on damage has found that Main does not close a deficit."""
    if int(info["ticks_left"]) > 0:
        return "knockout" if min(int(info["self_stocks"]), int(info["other_stocks"])) <= 0 \
            else "cut"
    if int(info["self_stocks"]) != int(info["other_stocks"]):
        return "stocks"
    return "damage" if float(info["self_damage"]) != float(info["other_damage"]) else "even"


def play_episodes(
    policy: PolicyFn,
    opponent: Any = "cpu:3",
    episodes: int = 10,
    seed: int = 0,
    envs: Sequence[Any] | None = None,
    n_envs: int = 2,
    env_kwargs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Play ``episodes`` matches of ``policy`` (batched obs -> actions) vs ``opponent``.

    Episode ``j`` uses match seed ``seed + j`` whichever env plays it.  ``envs``
    lets a trainer reuse long-lived eval envs; otherwise ``n_envs`` temporary
    :class:`~brawlkit.env.BrawlpitEnv` are started (arenas of one server group) and closed.
    """
    label = str(getattr(opponent, "label", opponent))
    jobs = [(opponent, seed + j) for j in range(episodes)]
    with _eval_envs(envs, n_envs, episodes, env_kwargs) as pool:
        results = play_matches(policy, jobs, pool)
    return summarize(results, label)


@contextlib.contextmanager
def _eval_envs(envs: Sequence[Any] | None, n_envs: int, matches: int,
               env_kwargs: dict[str, Any] | None) -> Iterator[Sequence[Any]]:
    """``envs``, or ``n_envs`` temporary ones (arenas of one server group) closed after."""
    if envs is not None:
        yield envs
        return
    n = max(1, min(n_envs, matches))
    with ServerGroup(n) as group:
        own = [BrawlpitEnv(opponent=CpuLevel(1).spec, reward=OutcomeReward(),
                           server=group.server_for(i), **(env_kwargs or {})) for i in range(n)]
        try:
            yield own
        finally:
            for e in own:
                e.close()


def play_matches(policy: PolicyFn, jobs: Sequence[tuple[Any, int]], envs: Sequence[Any],
                 on_match: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Play every ``(opponent, match seed)`` of ``jobs`` with ``policy``, as many at once as
    there are ``envs``: each env an arena stepped by one fast lane (every arena's input,
    reward and match end from one C call, ``policy`` called once per step on every arena
    still playing), a finished match's env taking the next job.  Each result is one real
    match: its opponent's label, seed, outcome, how it was decided (:func:`decided_by`),
    ticks, stock difference, steps, spam fraction and share of steps each button was held;
    in the order they ended
    (``on_match`` sees each as it ends, for progress)."""
    envs = list(envs)[:max(1, min(len(envs), len(jobs)))]
    if not jobs:
        return []
    first = envs[0]
    lane = FastLane(len(envs), first.action_repeat, first.input_layout, first._poll_us)
    n = len(envs)
    queue = collections.deque(jobs)
    job: list[tuple[Any, int] | None] = [None] * n
    active = np.zeros(n, bool)
    counts = np.zeros((n, N_PATTERNS), np.int64)
    pressed = np.zeros((n, len(ACTION_NAMES) - 2), np.int64)
    steps = np.zeros(n, np.int64)
    acts = np.zeros((n, ACT_DIM), np.float32)
    results: list[dict[str, Any]] = []

    def start(i: int) -> None:
        opp, match_seed = job[i] = queue.popleft()
        envs[i].reset(seed=match_seed, options={"opponent": match_opponent(opp, match_seed)})
        if not lane.admit(i, envs[i]):
            raise ValueError("evaluation envs must be lockstep without input delay "
                             f"(env {i}: mode {envs[i].mode}, input_delay {envs[i].input_delay})")
        counts[i], pressed[i], steps[i], active[i] = 0, 0, 0, True

    try:
        for i in range(n):
            start(i)
        while active.any():
            idx = np.flatnonzero(active)
            acts[idx] = np.asarray(policy(lane.inputs[0::2][idx]), np.float32)
            counts[idx, action_patterns(acts[idx])] += 1
            pressed[idx] += acts[idx, 2:] > 0
            steps[idx] += 1
            ticks = lane.view["tick"][0::2].copy()
            _, _, _, term, trunc = lane.step_batch(envs, acts)
            for i in np.flatnonzero(active & (term | trunc)).tolist():
                info = lane.episode_info(i, envs[i], int(lane.view["tick"][2 * i]) - int(ticks[i]))
                opp, match_seed = job[i]  # type: ignore[misc]
                res = {
                    "opponent": str(getattr(opp, "label", opp)), "seed": match_seed,
                    "outcome": info.get("outcome") or "draw", "decided": decided_by(info),
                    "ticks": int(info.get("tick", 0)),
                    "stock_diff": int(info["self_stocks"]) - int(info["other_stocks"]),
                    "spam_fraction": spam_fraction(counts[i]), "steps": int(steps[i]),
                    "pressed": pressed[i] / max(int(steps[i]), 1), "time": time.time(),
                }
                results.append(res)
                if on_match is not None:
                    on_match(res)
                if queue:
                    start(i)
                else:
                    active[i] = False
                    lane.park(i)
    finally:
        for i, env in enumerate(envs):
            lane.release(i, env)
        lane.close()
    return results


def summarize(results: list[dict[str, Any]], opponent: str) -> dict[str, Any]:
    """Counts, rates and playstyle of one opponent's matches, how the wins and the losses
    were decided (``wins_by`` / ``losses_by``: :data:`DECIDED` counts), and under
    ``"matches"`` every match itself (seed, outcome, how it was decided, ticks, end time:
    what the league's match log records, and which match of ``eval --json`` ended how)."""
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
        "wins_by": decided_counts(results, "win"),
        "losses_by": decided_counts(results, "loss"),
        "mean_stock_diff": float(np.mean([r["stock_diff"] for r in results])) if n else 0.0,
        "mean_ticks": float(np.mean([r["ticks"] for r in results])) if n else 0.0,
        "mean_steps": float(np.mean([r["steps"] for r in results])) if n else 0.0,
        "spam_fraction": float(np.mean([r["spam_fraction"] for r in results])) if n else 0.0,
        # share of steps each button was held: a policy that never releases a
        # press-only button (the finisher) shows up here
        "press_rate": {name: round(float(np.mean([r["pressed"][b] for r in results])), 4)
                       if n else 0.0 for b, name in enumerate(ACTION_NAMES[2:])},
        "matches": [{"seed": r.get("seed"), "outcome": r["outcome"],
                     "decided": r.get("decided"), "ticks": r["ticks"], "time": r.get("time")}
                    for r in results],
    }


def decided_counts(results: list[dict[str, Any]], outcome: str) -> dict[str, int]:
    """How the matches of ``results`` with ``outcome`` were decided: a count per
    :data:`DECIDED` kind that occurred, in that order."""
    n = collections.Counter(r["decided"] for r in results if r["outcome"] == outcome)
    return {k: n[k] for k in DECIDED if n[k]}


def format_decided(counts: dict[str, int]) -> str:
    """``counts`` (:func:`decided_counts`) as a table cell: ``knockout 12, damage 80``."""
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "none"


def evaluate_model(model: Any, levels: Sequence[int], episodes: int, envs: Sequence[Any],
                   meta: PolicyMeta, seed: int = 1_000_000) -> dict[str, dict[str, Any]]:
    """A live SB3 model vs each CPU level, the same match seeds every call: the
    deterministic policy (what ships; the top-level numbers) and, under ``"sampled"``,
    the stochastic one PPO trains with.  Every level's matches play at once, as many as
    there are ``envs``; each result has its matches one by one under ``"matches"`` (seed,
    outcome, ticks, end time): the league writes them as records."""
    det = NumpyPolicy.from_sb3(model.policy, meta)
    sampled = SampledPolicy.from_sb3(model.policy, meta, seed)
    cpus = [CpuLevel(lv) for lv in levels]
    jobs = [(cpu.spec, seed + 1000 * cpu.level + j) for cpu in cpus for j in range(episodes)]
    by_det = _by_opponent(play_matches(det, jobs, envs))
    by_sampled = _by_opponent(play_matches(sampled, jobs, envs))
    out = {}
    for cpu in cpus:
        res = summarize(by_det.get(cpu.spec, []), cpu.spec)
        res["sampled"] = summarize(by_sampled.get(cpu.spec, []), cpu.spec)
        out[cpu.key] = res
    return out


#: the match seeds of Main's verification matches against main exploiters after each
#: generation (:func:`verify_model`): apart from training's (counting up from the run's
#: seed) and the per-generation evaluation's (from 1,000,000)
VERIFY_SEED_BASE = 2_000_000


def verify_model(model: Any, opponents: Sequence[Any], matches: int, envs: Sequence[Any],
                 meta: PolicyMeta, seed: int = VERIFY_SEED_BASE) -> list[dict[str, Any]]:
    """A live SB3 model's deterministic policy (what ships) against each of ``opponents``
    (frozen members) on ``matches`` seeds from ``seed``, every match at once on ``envs``;
    the matches one by one, as :func:`play_matches` gives them (opponent label, seed,
    outcome, ticks, end time), in seed order per opponent."""
    det = NumpyPolicy.from_sb3(model.policy, meta)
    jobs = [(opp, seed + j) for opp in opponents for j in range(matches)]
    return [r for group in _by_opponent(play_matches(det, jobs, envs)).values() for r in group]


def _by_opponent(results: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Match results grouped by opponent label, each group in seed order."""
    out: dict[str, list[dict[str, Any]]] = {}
    for r in sorted(results, key=lambda r: r["seed"]):
        out.setdefault(r["opponent"], []).append(r)
    return out


def load_policies(checkpoint: str | Path, sampled_seed: int = 0
                  ) -> tuple[NumpyPolicy, SampledPolicy]:
    """(the deterministic numpy actor, the stochastic policy seeded ``sampled_seed``) of a
    checkpoint, from one read of its zip, carrying how it was trained.

    Refuses a checkpoint whose policy input layout this env cannot build.
    """
    meta, policy = load_checkpoint(checkpoint)
    check_input_layout(meta.input_layout, str(checkpoint))
    return NumpyPolicy.from_sb3(policy, meta), SampledPolicy.from_sb3(policy, meta, sampled_seed)


def evaluate(
    checkpoint: str | Path, vs: str = "cpu:3", episodes: int = 10, seed: int = 0,
    n_envs: int = EVAL_ARENAS,
) -> dict[str, Any]:
    """Win / draw / loss rates of ``checkpoint`` (an SB3 zip) against ``vs``, played at
    the action repeat and input layout it was trained with: the deterministic policy
    (what ships: the top-level numbers) and the sampled one (under ``"sampled"``).
    ``vs``: a CPU level, the baseline, or the path of a ``.bpw`` played as a frozen league
    member is (``train --opponent``'s forms: an exploiter against the Main it exploits,
    or the other way round)."""
    limit_threads()
    det, sampled = load_policies(checkpoint, sampled_seed=seed)
    # the scripted baseline and a frozen policy are played as a second client
    opponent = fixed_opponent(vs, det.meta.input_layout, det.meta.action_repeat)
    kw = {"action_repeat": det.meta.action_repeat, "input_layout": det.meta.input_layout}
    res = play_episodes(det, opponent, episodes, seed, n_envs=n_envs, env_kwargs=kw)
    res["sampled"] = play_episodes(sampled, opponent, episodes, seed, n_envs=n_envs, env_kwargs=kw)
    res["checkpoint"] = str(checkpoint)
    res["seed"] = seed
    res["action_repeat"] = det.meta.action_repeat
    res["input_layout"] = det.meta.input_layout
    return res


# ----------------------------------------------------- what ships, on fresh matches
#: the match seeds of a shipped policy's judgement (``bench learn``, ``league report``):
#: far from any seed training or its per-generation evaluation uses (training matches
#: count up from the run's seed, evaluations from 1,000,000, verifications from 2,000,000)
EVAL_SEED_BASE = 50_000_000


def opponent_seed(opponent: str) -> int:
    """The first match seed against ``opponent``: its own block of fresh seeds."""
    level = 0 if opponent == BASELINE_ID else CpuLevel.parse(opponent).level
    return EVAL_SEED_BASE + 100_000 * level


def shipped_policies(checkpoint: str | Path, sampled: bool = False) -> list[Any]:
    """What ships, as policies to play: an SB3 checkpoint's deterministic numpy actor (its
    sampled policy with ``sampled``), or a ``.bpw``'s mean — a mixture's every component,
    in order (:func:`~brawlkit.export.bpw.split_mixture`; each match then plays the one its
    seed picks)."""
    if str(checkpoint).endswith(".bpw"):
        try:
            raws = split_mixture(Path(checkpoint).read_bytes())
        except (OSError, ValueError) as e:
            raise ValueError(f"{checkpoint}: {e}") from None
        pols = [NumpyPolicy(r) for r in raws]
        if sampled or any(p.noise_std is not None for p in pols):
            raise ValueError(f"{checkpoint}: a blob is judged by its mean here; judge a sampled "
                             "policy from its checkpoint (--policy sampled)")
        check_input_layout(pols[0].meta.input_layout, str(checkpoint))
        return pols
    det_policy, sampled_policy = load_policies(checkpoint)
    return [sampled_policy if sampled else det_policy]


def evaluate_shipped(checkpoint: str | Path, opponents: tuple[str, ...], matches: int,
                     n_envs: int = EVAL_ARENAS, progress: bool = True,
                     sampled: bool = False) -> dict[str, dict[str, Any]]:
    """The deterministic policy of ``checkpoint`` (``sampled``: its sampled policy, as
    ``export --sampled`` ships it; a ``.bpw``: its mean, a mixture's one component per
    match, :func:`shipped_policies`) against each opponent on ``matches`` fresh seeds:
    win/draw/loss, the win rate's 95 % Wilson interval, the playstyle.  All opponents'
    matches play at once on ``n_envs`` arenas of one server."""
    limit_threads()
    judged = shipped_policies(checkpoint, sampled)
    meta = judged[0].meta
    kw: dict[str, Any] = {"action_repeat": meta.action_repeat,
                          "input_layout": meta.input_layout}
    specs = {opp: fixed_opponent(opp, meta.input_layout, meta.action_repeat) for opp in opponents}
    jobs = [(specs[opp], opponent_seed(opp) + j) for opp in opponents for j in range(matches)]
    bar = _bar(len(jobs), f"eval {Path(checkpoint).name}", progress)

    def tick(res: dict[str, Any]) -> None:
        if bar is not None:
            bar.update(1)

    try:
        with _eval_envs(None, n_envs, len(jobs), kw) as envs:
            # a mixture plays each match with the component its seed picks (brawlpit_bot's
            # rule): one pass per component over its own matches
            played = [r for k, pol in enumerate(judged) for r in play_matches(
                pol, [j for j in jobs if len(judged) == 1 or mixture_pick(j[1], len(judged)) == k],
                envs, on_match=tick)]
            by_opp = _by_opponent(played)
    finally:
        if bar is not None:
            bar.close()
    out: dict[str, dict[str, Any]] = {}
    for opp in opponents:
        res = summarize(by_opp.get(str(getattr(specs[opp], "label", opp)), []), opp)
        lo, hi = wilson_interval(res["wins"], res["episodes"])
        out[opp] = {k: res[k] for k in ("episodes", "wins", "draws", "losses", "win_rate",
                                        "wins_by", "losses_by", "spam_fraction", "press_rate", "mean_ticks", "matches")}
        out[opp]["win_ci"] = [round(lo, 4), round(hi, 4)]
    return out


def _bar(total: int, desc: str, enabled: bool) -> Any:
    if not enabled:
        return None
    return progress_bar(total=total, desc=desc, unit="match")


def playstyle(ev: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """How the policy plays over all its evaluation matches: each button's share of steps
    held, the spam fraction, the mean match length in seconds."""
    n = sum(r["episodes"] for r in ev.values())
    buttons = next(iter(ev.values()))["press_rate"].keys()
    return {
        "press_rate": {b: round(sum(r["press_rate"][b] * r["episodes"] for r in ev.values()) / n,
                                4) for b in buttons},
        "spam_fraction": round(sum(r["spam_fraction"] * r["episodes"] for r in ev.values()) / n,
                               4),
        "match_seconds": round(sum(r["mean_ticks"] * r["episodes"] for r in ev.values()) / n
                               / 60.0, 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = command_parser("eval", "Play a PPO checkpoint against an opponent at the action repeat and input "
        "layout it was trained with, and print the win / draw / loss rates of its deterministic "
        "policy (the clipped Gaussian mean: what export and brawlpit_bot ship) and of its "
        "sampled policy (what PPO trained with), side by side.",
    )
    ap.add_argument("--checkpoint", required=True, help="SB3 checkpoint zip (e.g. runs/main/.../gen_0003.zip)")
    ap.add_argument("--vs", default="cpu:3",
                    help="opponent: cpu:L with L in 1..8, baseline (the league's scripted "
                    "member), or the path of a policy .bpw (a frozen member, played as the "
                    "league plays it; default cpu:3)")
    ap.add_argument("--episodes", type=int, default=10, help="matches to play (default 10)")
    ap.add_argument("--seed", type=int, default=0, help="match seed of episode 0; episode j uses seed+j")
    ap.add_argument("--n-envs", type=int, default=EVAL_ARENAS,
                    help=f"matches played at once, arenas of one server (default {EVAL_ARENAS})")
    add_json_flag(ap)
    args = ap.parse_args(argv)
    # every mistake refused here, in a second, before torch loads or a server starts
    try:
        permanent_opponent(args.vs)
    except ValueError as e:
        if not args.vs.endswith(".bpw"):
            ap.error(f"--vs: {e}, or the path of a policy .bpw")
    for flag, value in (("--episodes", args.episodes), ("--n-envs", args.n_envs)):
        if value < 1:
            ap.error(f"{flag} must be >= 1, got {value}")
    try:
        meta = checkpoint_meta(args.checkpoint)
    except (FileNotFoundError, ValueError) as e:
        print(f"eval: --checkpoint: {e}", file=sys.stderr)
        return 2
    try:  # a policy opponent is read and checked against the checkpoint's cadence and layout
        fixed_opponent(args.vs, meta.input_layout, meta.action_repeat)
    except (FileNotFoundError, ValueError) as e:
        print(f"eval: --vs: {e}", file=sys.stderr)
        return 2
    res = evaluate(args.checkpoint, args.vs, args.episodes, args.seed, args.n_envs)
    if args.json:
        print(json.dumps(res))
    else:
        print(f"{res['checkpoint']} (action repeat {res['action_repeat']}, input layout "
              f"{res['input_layout']}) vs {res['vs']}, {res['episodes']} episodes:")
        for label, r in (("deterministic (ships)", res), ("sampled", res["sampled"])):
            print(f"  {label:<22} win {r['win_rate']:.2f}  draw {r['draw_rate']:.2f}  "
                  f"loss {r['loss_rate']:.2f}  (mean stock diff {r['mean_stock_diff']:+.2f}, "
                  f"spam {r['spam_fraction']:.2f}, buttons held "
                  + " ".join(f"{k} {v:.2f}" for k, v in r["press_rate"].items()) + "); "
                  f"wins by {format_decided(r['wins_by'])}; losses by "
                  f"{format_decided(r['losses_by'])}")
    return 0
