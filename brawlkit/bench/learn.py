"""``python -m brawlkit bench learn CONFIG``: does a training recipe make a bot that wins?

A learning claim here is a table, not an anecdote (docs/benchmarks.md, "Learning"): a
named recipe — a file in ``configs/learn/`` — is trained from scratch over several
seeds at a budget stated in env steps (so runs that share a machine still compare),
and what ships is judged: the *deterministic* policy (the clipped Gaussian mean that
``export`` writes and ``brawlpit_bot`` plays) — or, with ``[eval] policy = "sampled"``
or ``--policy sampled``, the sampled policy ``export --sampled`` ships — of the final
(or ``best.json``'s) generation, against the scripted baseline and every CPU level, on ``matches`` fresh
match seeds each (never a seed training or its per-generation evaluation used), with
95 % Wilson intervals per seed and pooled, the spread over seeds, and the playstyle
beside the win rates (per-button press rates, spam fraction, match length), so a
degenerate style shows.

A recipe file (TOML)::

    name = "curriculum"
    description = "PPO against the CPU curriculum alone"
    kind = "curriculum"            # or "league": roles trained concurrently on one pool
    budget_steps = 6_000_000       # env steps of all trained roles together
    seeds = [0, 1, 2]
    roles = ["main"]               # league: e.g. ["main", "main_exploiter", "league_exploiter"]
    pick = "final"                 # or "best" (best.json), or "mixture" (with [harden]:
                                   # the Mains after each round, one played per match)
    [train]                        # TrainConfig fields (docs/cli.md)
    steps_per_generation = 300_000
    [eval]
    matches = 100
    policy = "deterministic"       # or "sampled": the policy judged (what ships)
    opponents = ["baseline", "cpu:1", "cpu:2", "cpu:3", "cpu:4", "cpu:5", "cpu:6", "cpu:7", "cpu:8"]
    [imitation]                    # optional: a start from demonstrations (docs/imitation.md)
    teachers = [7]                 # ImitationConfig fields; the clone is every role's --init-from
    matches = 40
    [exploit]                      # optional: the shipped policy's approximate exploitability
    seeds = [0, 1, 2]              # bench exploit's settings: fresh exploiters from the clone
    steps = 5_000_000              # (random = true, the default without one: from random
    random = false                 # weights too) against the frozen policy alone; the best
                                   # one's fresh win rate
    [exploit.train]                # TrainConfig fields of the exploiters (bench exploit --set)
    async_update = false
    [harden]                       # optional, a league: best-response rounds after it
    rounds = 2                     # (league harden, HardenSettings): each round a fresh
    exploiter_steps = 5_000_000    # exploiter of Main's newest checkpoint joins the pool
    main_generations = 4           # frozen, then Main trains on against what beats it

``kind = "imitation"`` (with ``budget_steps = 0``) judges the clone itself, before any RL.
The imitation's data and cloning are part of the seed's wall-clock (``imitation_seconds``
beside ``train_seconds``).

Each seed's run lives in ``<out>/s<seed>/`` with ``train.json`` and ``eval.json``
(``eval_sampled.json`` for the sampled policy) and, with an ``[exploit]`` table,
``exploit.json`` (its exploiters' runs in ``exploit/<checkpoint>/``, as ``bench exploit``
leaves them: a stopped one continues too); a rerun skips what is already there, so
an interrupted benchmark continues, and ``--policy sampled`` judges a finished run's
sampled policy without training it again.  Its RL continues too: a seed with no
``train.json`` whose roles finished some generations resumes each role after its last
finished one (``train --resume``) for the generations it has left, so an hour-long league
stopped at minute 50 loses only the generations in flight.  Such a seed's ``train.json``
says so (``resumed``: each role's first generation trained by the last call), and its
``train_seconds`` counts the earlier calls by their finished generations' own seconds
(the slowest role's sum, as the roles train at once).  To train such a seed from its
start instead, remove its ``runs/`` (a league) or ``main/`` (Main alone) first.

A league recipe with a ``[harden]`` table runs its best-response rounds after the
league (``brawlkit/training/harden.py``; records in ``<seed>/harden/``): part of the
seed's training, its seconds in ``train_seconds`` and its env steps in ``env_steps``
(Main's generations under ``main``, the rounds' exploiters under ``harden_exploiter``).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from brawlkit.bench import exploit as exploit_bench
from brawlkit.common.cli_args import add_json_flag, add_progress_flag, command_parser
from brawlkit.common.io import atomic_write_json
from brawlkit.common.paths import repo_root
from brawlkit.common.stats import wilson_interval
from brawlkit.league.directory import LeagueDir
from brawlkit.league.records import BASELINE_ID, verified_standing
from brawlkit.league.role_specs import role_names
from brawlkit.training import league_run
from brawlkit.training.checkpoints import list_checkpoints
from brawlkit.training.config import RunOptions, TrainConfig, config_fields
from brawlkit.training.evaluate import EVAL_ARENAS, evaluate_shipped, playstyle
from brawlkit.training.harden import HardenSettings, harden, mixture_path
from brawlkit.training.imitation import ImitationConfig, clone_in
from brawlkit.training.ppo import train
from brawlkit.wire.cpu_level import CPU_LEVELS, CpuLevel

#: where recipe files live; ``bench learn NAME`` finds ``configs/learn/NAME.toml``
CONFIG_DIR = Path("configs") / "learn"
DEFAULT_OPPONENTS: tuple[str, ...] = (BASELINE_ID, *(CpuLevel(lv).spec for lv in CPU_LEVELS))
KINDS = ("curriculum", "league", "imitation")
#: the policies a run can be judged on: the mean (``export``) or with its noise
#: (``export --sampled``)
POLICIES = ("deterministic", "sampled")
#: the keys of a recipe's ``[exploit]`` table: ``bench exploit``'s settings
#: (:class:`~brawlkit.bench.exploit.ExploitSettings`; ``train`` is its ``--set``)
EXPLOIT_KEYS = ("seeds", "steps", "generations", "random", "matches", "curve_matches", "pick",
                "train")


@dataclass
class LearnConfig:
    """One recipe file: what is trained, at which budget, and how it is judged."""

    name: str
    kind: str
    budget_steps: int
    seeds: tuple[int, ...]
    train: dict[str, Any]
    description: str = ""
    roles: tuple[str, ...] = ("main",)
    pick: str = "final"
    matches: int = 100
    opponents: tuple[str, ...] = DEFAULT_OPPONENTS
    imitation: dict[str, Any] | None = None
    path: Path | None = field(default=None, compare=False)
    policy: str = "deterministic"
    exploit: dict[str, Any] | None = None
    harden: HardenSettings | None = None

    @classmethod
    def load(cls, path: str | Path) -> LearnConfig:
        """The recipe at ``path`` (or ``configs/learn/<path>.toml``), validated; a
        ``ValueError`` names the file and the key that is wrong."""
        p = resolve_config(path)
        try:
            data = tomllib.loads(p.read_text())
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise ValueError(f"{p}: {e}") from None
        ev = data.pop("eval", {})
        known = {"name", "description", "kind", "budget_steps", "seeds", "roles", "pick", "train",
                 "imitation", "exploit", "harden"}
        unknown = sorted(set(data) - known) + sorted(
            f"eval.{k}" for k in set(ev) - {"matches", "opponents", "policy"}) + sorted(
            f"exploit.{k}" for k in set(data.get("exploit") or {}) - set(EXPLOIT_KEYS))
        if unknown:
            raise ValueError(f"{p}: unknown key(s) {unknown}")
        try:
            cfg = cls(name=str(data.get("name", p.stem)), kind=str(data["kind"]),
                      budget_steps=int(data["budget_steps"]),
                      seeds=tuple(int(s) for s in data.get("seeds", (0,))),
                      train=dict(data.get("train", {})),
                      description=str(data.get("description", "")),
                      roles=tuple(str(r) for r in data.get("roles", ("main",))),
                      pick=str(data.get("pick", "final")), matches=int(ev.get("matches", 100)),
                      opponents=tuple(str(o) for o in ev.get("opponents", DEFAULT_OPPONENTS)),
                      imitation=data.get("imitation"), path=p,
                      policy=str(ev.get("policy", "deterministic")),
                      exploit=data.get("exploit"),
                      harden=None if data.get("harden") is None
                      else HardenSettings.from_dict(data["harden"]))
        except KeyError as e:
            raise ValueError(f"{p}: missing key {e}") from None
        except (ValueError, TypeError) as e:
            raise ValueError(f"{p}: {e}") from None
        cfg.validate()
        return cfg

    def validate(self) -> None:
        where = self.path or self.name
        if self.kind not in KINDS:
            raise ValueError(f"{where}: kind must be one of {KINDS}, got {self.kind!r}")
        if self.pick not in ("final", "best", "mixture"):
            raise ValueError(f"{where}: pick must be 'final', 'best' or 'mixture', got "
                             f"{self.pick!r}")
        if self.pick == "mixture" and (self.harden is None or self.harden.rounds < 2):
            raise ValueError(f"{where}: pick = \"mixture\" ships the Mains after each "
                             "[harden] round as one mixture blob: it needs a [harden] table "
                             "with rounds >= 2")
        if not self.roles or self.roles[0] != "main" or any(r not in role_names() for r in self.roles):
            raise ValueError(f"{where}: roles must start with 'main' and be among {role_names()}")
        if self.kind in ("curriculum", "imitation") and self.roles != ("main",):
            raise ValueError(f"{where}: a {self.kind} run trains main alone")
        if self.kind == "imitation" and (self.imitation is None or self.budget_steps != 0):
            raise ValueError(f"{where}: kind 'imitation' judges the clone itself: it needs an "
                             "[imitation] table and budget_steps = 0")
        if self.policy not in POLICIES:
            raise ValueError(f"{where}: eval.policy must be one of {POLICIES}, got {self.policy!r}")
        if not self.seeds or self.matches < 1:
            raise ValueError(f"{where}: need at least one seed and matches >= 1")
        if self.harden is not None and (self.kind != "league" or self.imitation is None):
            raise ValueError(f"{where}: [harden] follows a league whose roles start from a "
                             "clone (kind = \"league\" and an [imitation] table): each round's "
                             "exploiter starts from that clone")
        for o in self.opponents:
            if o != BASELINE_ID:
                CpuLevel.parse(o)
        bad = sorted(set(self.train) - set(config_fields()) | set(self.train) & {"seed", "role",
                                                                                "generations"})
        if bad:
            raise ValueError(f"{where}: [train] keys {bad} are not TrainConfig fields this file "
                             "may set (seed, role and generations come from the recipe)")
        table = "[train]"
        try:
            self.train_config(self.seeds[0])  # the fields' own validation, and the budget's
            if self.imitation is not None:
                table = "[imitation]"
                self.imitation_config().validate(self.imitation_train_config(self.seeds[0]))
            if self.exploit is not None:
                table = "[exploit]"
                if self.kind == "imitation":
                    raise ValueError("a clone is exploited with bench exploit, not here")
                clone = Path("clone.zip") if self.imitation is not None else None
                self.exploit_settings(Path("target.zip"), clone, Path(".")).validate(files=False)
        except (ValueError, TypeError) as e:
            if str(where) in str(e):
                raise
            raise ValueError(f"{where}: {table} {e}") from None

    def generations(self) -> int:
        """Generations per role: the budget shared equally by the roles."""
        if self.kind == "imitation":
            return 1  # nothing is trained after the clone; the TrainConfig must still be valid
        per_gen = int(self.train.get("steps_per_generation", TrainConfig().steps_per_generation))
        gens, rest = divmod(self.budget_steps, per_gen * len(self.roles))
        if gens < 1 or rest:
            raise ValueError(f"{self.path or self.name}: budget_steps {self.budget_steps} must be "
                             f"a positive multiple of roles ({len(self.roles)}) x "
                             f"steps_per_generation ({per_gen})")
        return gens

    def train_config(self, seed: int, role: str = "main",
                     init_from: str | None = None) -> TrainConfig:
        extra: dict[str, Any] = {"init_from": init_from} if init_from else {}
        if self.imitation is not None and not init_from:
            extra = {"kl_coef": 0.0}  # checked against the clone once it exists
        return TrainConfig.from_dict({**self.train, "seed": seed, "role": role,
                                      "generations": self.generations(), **extra})

    def imitation_config(self) -> ImitationConfig:
        """The ``[imitation]`` table as the imitation's settings (lists as tuples)."""
        assert self.imitation is not None
        fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v
                                  for k, v in self.imitation.items()}
        return ImitationConfig(**fields)

    def exploit_settings(self, target: Path, init_from: Path | None,
                         out: Path) -> exploit_bench.ExploitSettings:
        """``bench exploit``'s settings for one seed's shipped ``target``: the ``[exploit]``
        table's, the exploiters starting from ``init_from`` (the recipe's clone) and, with
        ``random = true`` (the default only for a recipe without a clone), from random
        weights as well."""
        assert self.exploit is not None
        t = self.exploit
        try:
            return exploit_bench.ExploitSettings(
                target=target, out=out, init_from=init_from,
                seeds=tuple(int(x) for x in t.get("seeds", (0, 1, 2))),
                steps=int(t.get("steps", 5_000_000)), generations=int(t.get("generations", 10)),
                random=bool(t.get("random", self.imitation is None)),
                matches=int(t.get("matches", 100)),
                curve_matches=int(t.get("curve_matches", 20)), pick=str(t.get("pick", "best")),
                train=dict(t.get("train", {})))
        except (TypeError, ValueError) as e:
            raise ValueError(f"a value is not a number where one is needed ({e})") from None

    def imitation_train_config(self, seed: int) -> TrainConfig:
        """The network, cadence, reward and seed the clone is made with: the recipe's,
        without the KL term (that belongs to the RL which continues the clone)."""
        return TrainConfig.from_dict({**self.train, "seed": seed, "role": "main",
                                      "generations": 1, "kl_coef": 0.0, "init_from": None})


def resolve_config(path: str | Path) -> Path:
    """``path`` as given, else ``configs/learn/<path>[.toml]`` of the checkout."""
    p = Path(path)
    if p.is_file():
        return p
    for cand in (repo_root() / CONFIG_DIR / p, repo_root() / CONFIG_DIR / f"{p}.toml"):
        if cand.is_file():
            return cand
    names = sorted(q.stem for q in (repo_root() / CONFIG_DIR).glob("*.toml"))
    raise ValueError(f"no recipe {path!r}: not a file, and not one of {names} "
                     f"({repo_root() / CONFIG_DIR})")


# ------------------------------------------------------------------ training
def _role_run(out: Path, cfg: LearnConfig, role: str) -> Path | None:
    """Where an earlier call left ``role``'s RL of this seed: a run with a finished
    generation (Main alone trains in ``<out>/main``, a league's roles under ``<out>/runs``)."""
    if cfg.kind == "curriculum":
        return out / "main" if list_checkpoints(out / "main") else None
    try:
        return _newest_run(out / "runs" / role)
    except RuntimeError:
        return None


def _earlier_calls(out: Path, cfg: LearnConfig) -> tuple[dict[str, int], float]:
    """(each role's finished generations, the RL seconds they took) of an unfinished seed:
    the seconds are the slowest role's sum of its generations' own train and eval seconds
    (the roles train at once), plus the finished hardening rounds' exploiters' (training
    and judging); the generation in flight when it stopped is lost."""
    done: dict[str, int] = {}
    seconds = 0.0
    for role in cfg.roles:
        run = _role_run(out, cfg, role)
        gens = list_checkpoints(run) if run is not None else []
        done[role] = len(gens)
        meta = [json.loads(p.read_text()) for _, p in gens]
        seconds = max(seconds, sum(float(m.get("train_seconds", 0.0)) + float(m.get("eval_seconds", 0.0))
                                   for m in meta))
    # the hardening rounds' exploiters (Main's generations after the league are in its sum)
    for p in sorted((out / "harden").glob("round_*/*/exploiter.json")):
        rec = json.loads(p.read_text())
        seconds += float(rec.get("train_seconds", 0.0)) + float(rec.get("eval_seconds", 0.0))
    return done, seconds


def train_seed(cfg: LearnConfig, seed: int, out: Path, progress: bool) -> dict[str, Any]:
    """Train one seed of the recipe into ``out``, continuing the generations an earlier,
    stopped call finished; the shipped checkpoint, steps, seconds."""
    t0 = time.perf_counter()
    total = cfg.generations()
    done, earlier_s = ({}, 0.0) if cfg.kind == "imitation" else _earlier_calls(out, cfg)
    if not any(done.values()):
        # nothing finished: whatever an earlier attempt left (a league's ladder, a run dir
        # without a generation) is cleared so the seed trains from its start (its clone,
        # when built, is kept and reused)
        done = {}
        for stale in ("main", "runs", "league"):
            if (out / stale).exists():
                print(f"bench learn: {out / stale}: an unfinished earlier attempt, removed",
                      file=sys.stderr)
                shutil.rmtree(out / stale)
    else:
        print(f"bench learn: {out}: continuing the generations an earlier call finished (" +
              ", ".join(f"{r} {n}/{total}" for r, n in done.items()) + ")", file=sys.stderr)
    init = None
    if cfg.imitation is not None:
        init = str(clone_in(out / "imitation", cfg.imitation_config(),
                            cfg.imitation_train_config(seed), progress))
    imitation_s = time.perf_counter() - t0
    if cfg.kind == "imitation":
        assert init is not None
        main_dir = out / "imitation"
    elif cfg.kind == "curriculum":
        tc = cfg.train_config(seed, init_from=init)
        if done:
            tc = dataclasses.replace(tc, generations=total - done["main"])
        main_dir = out / "main"
        if not done or done["main"] < total:
            main_dir = train(tc, RunOptions(run_dir=main_dir, progress=progress,
                                            resume=bool(done))).run_dir
    else:
        role_args = {r: ["--resume-or-new", "--generations", str(total - n)]
                     for r, n in done.items() if n < total}
        roles = [r for r in cfg.roles if done.get(r, 0) < total]
        if roles:
            code = league_run.run(str(out / "league"), roles, _train_flags(cfg, seed, init),
                                  str(out / "runs"), progress=progress, role_args=role_args or None)
            if code != 0:
                raise RuntimeError(f"league run of {cfg.name} seed {seed} failed (exit {code}; "
                                   f"logs in {out / 'league' / 'logs'})")
        main_dir = _newest_run(out / "runs" / "main")
        if cfg.harden is not None and cfg.harden.rounds > 0:
            assert init is not None
            harden(out / "league", main_dir, init, cfg.harden, out / "harden",
                   base=cfg.train_config(seed, init_from=init), progress=progress)
    seconds = time.perf_counter() - t0 + earlier_s
    steps = {role: _steps_of(out, role, main_dir) for role in cfg.roles}
    if cfg.harden is not None and cfg.harden.rounds > 0:
        steps["harden_exploiter"] = _harden_steps(out / "harden")
    rl_s = seconds - imitation_s
    shipped = mixture_path(out / "harden") if cfg.pick == "mixture" else \
        _shipped(main_dir, cfg.pick)
    row = {"seed": seed, "checkpoint": str(shipped), "pick": cfg.pick,
           "init_from": init, "env_steps": sum(steps.values()), "env_steps_by_role": steps,
           "train_seconds": round(seconds, 1), "imitation_seconds": round(imitation_s, 1),
           "steps_per_s": round(sum(steps.values()) / max(rl_s, 1e-9), 1)}
    if done:
        row["resumed"] = done
    if cfg.kind == "league":
        row["verified"] = _verified(out)
    return row


def _verified(out: Path) -> list[list[float]]:
    """Main's verified standing per generation in the seed's league, ``[generation, lowest,
    mean]`` (:func:`~brawlkit.league.records.verified_standing`; empty without one)."""
    if not (out / "league").is_dir():
        return []
    pool = LeagueDir(out / "league", create=False)
    return [[g, round(lo, 4), round(mean, 4)]
            for g, lo, mean in verified_standing(pool.members(), pool.matches())]


def _train_flags(cfg: LearnConfig, seed: int, init_from: str | None = None) -> list[str]:
    """``train`` flags of the recipe's TrainConfig (every role of a league gets them, the
    imitation start too: an exploiter's reset returns to it)."""
    tc = cfg.train_config(seed, init_from=init_from).to_dict()
    flags = []
    for k, v in tc.items():
        if k == "role" or v is None:
            continue
        flags += [f"--{k.replace('_', '-')}", ",".join(map(str, v)) if isinstance(v, list)
                  else str(v)]
    return flags + ["--no-progress"]


def _newest_run(role_dir: Path) -> Path:
    runs = [d for d in role_dir.iterdir() if d.is_dir() and list_checkpoints(d)] \
        if role_dir.is_dir() else []
    if not runs:
        raise RuntimeError(f"no finished generation under {role_dir}")
    return max(runs, key=lambda d: list_checkpoints(d)[-1][1].stat().st_mtime)


def _steps_of(out: Path, role: str, main_dir: Path) -> int:
    """Env steps the role played: the sum over its generations (an exploiter's reset
    starts a fresh model whose own step count starts again at 0)."""
    run = main_dir if role == "main" else _newest_run(out / "runs" / role)
    return sum(int(json.loads(p.read_text())["steps_this_generation"])
               for _, p in list_checkpoints(run))


def _harden_steps(out: Path) -> int:
    """Env steps the hardening rounds' exploiters played (their records)."""
    path = out / "rounds.json"
    rounds = json.loads(path.read_text())["rounds"] if path.is_file() else []
    return sum(int(r["exploiter_env_steps"]) for r in rounds)


def _shipped(run_dir: Path, pick: str) -> Path:
    if pick == "best":
        best = json.loads((run_dir / "best.json").read_text())
        return run_dir / str(best["checkpoint"])
    return run_dir / str(json.loads(list_checkpoints(run_dir)[-1][1].read_text())["checkpoint"])


def pooled(per_seed: list[dict[str, Any]], opponents: tuple[str, ...]) -> dict[str, Any]:
    """Every seed's matches together per opponent, with the spread of the seeds' rates."""
    out = {}
    for opp in opponents:
        rows = [s["eval"][opp] for s in per_seed]
        w, d, losses = (sum(r[k] for r in rows) for k in ("wins", "draws", "losses"))
        n = w + d + losses
        lo, hi = wilson_interval(w, n)
        rates = [r["win_rate"] for r in rows]
        out[opp] = {"wins": w, "draws": d, "losses": losses, "win_rate": round(w / n, 4),
                    "win_ci": [round(lo, 4), round(hi, 4)],
                    "spread": [round(min(rates), 4), round(max(rates), 4)]}
    return out


# ------------------------------------------------------------------- the run
def run(cfg: LearnConfig, out: Path, seeds: tuple[int, ...] | None = None,
        progress: bool = True, eval_envs: int = EVAL_ARENAS) -> dict[str, Any]:
    """Train (where not done yet: a stopped seed continues its finished generations) and
    evaluate every seed; the whole result."""
    per_seed = []
    for seed in seeds or cfg.seeds:
        sdir = out / f"s{seed}"
        sdir.mkdir(parents=True, exist_ok=True)
        trained = _cached(sdir / "train.json", lambda s=seed, d=sdir: train_seed(
            cfg, s, d, progress))
        if cfg.kind == "league" and "verified" not in trained:  # a record from before it
            trained = {**trained, "verified": _verified(sdir)}
        tag = "" if cfg.policy == "deterministic" else f"_{cfg.policy}"
        evaluated = _cached(sdir / f"eval{tag}.json", lambda t=trained: _evaluate(
            t, cfg, eval_envs, progress))
        row = {**trained, **evaluated}
        if trained.get("init_from") and cfg.kind != "imitation":
            # the clone RL started from, judged the same way: what the RL added on top
            start = _cached(sdir / f"start_eval{tag}.json", lambda t=trained: _evaluate(
                {"checkpoint": t["init_from"]}, cfg, eval_envs, progress))
            row["start"] = start
        if cfg.exploit is not None:  # the exploitability column: the shipped policy exploited
            row["exploit"] = _cached(sdir / "exploit.json", lambda t=trained, d=sdir: _exploit(
                t, cfg, d, eval_envs, progress))
        per_seed.append(row)
    res = {"bench": "learn", "config": cfg.name, "config_file": str(cfg.path), "kind": cfg.kind,
           "roles": list(cfg.roles), "budget_steps": cfg.budget_steps, "matches": cfg.matches,
           "policy": cfg.policy,
           "opponents": list(cfg.opponents), "seeds": per_seed,
           "pooled": pooled(per_seed, cfg.opponents)}
    if per_seed and all("start" in s for s in per_seed):
        res["start_pooled"] = pooled([s["start"] for s in per_seed], cfg.opponents)
    return res


def _evaluate(trained: dict[str, Any], cfg: LearnConfig, n_envs: int,
              progress: bool) -> dict[str, Any]:
    t0 = time.perf_counter()
    ev = evaluate_shipped(trained["checkpoint"], cfg.opponents, cfg.matches, n_envs, progress,
                          sampled=cfg.policy == "sampled")
    return {"policy": cfg.policy, "eval": ev, "playstyle": playstyle(ev),
            "eval_seconds": round(time.perf_counter() - t0, 1)}


def _exploit(trained: dict[str, Any], cfg: LearnConfig, sdir: Path, n_envs: int,
             progress: bool) -> dict[str, Any]:
    """``bench exploit`` of the seed's shipped checkpoint from the recipe's clone, its
    records in ``<seed>/exploit/<checkpoint>/`` (a seed trained further ships another
    checkpoint, exploited afresh); the summary the learning table shows."""
    init, target = trained.get("init_from"), Path(trained["checkpoint"])
    s = cfg.exploit_settings(target, Path(init) if init else None,
                             sdir / "exploit" / target.stem)
    s.eval_envs = n_envs
    if cfg.policy == "sampled":
        s.sampled = True  # exploit the policy that was judged: the one that ships
    return exploit_bench.summary(exploit_bench.run(s, progress))


def _cached(path: Path, make: Any) -> dict[str, Any]:
    """``path``'s JSON if an earlier run left it, else ``make()``, written atomically."""
    if path.is_file():
        data: dict[str, Any] = json.loads(path.read_text())
        return data
    data = make()
    atomic_write_json(path, data)
    return data


def format_table(res: dict[str, Any]) -> str:
    """The human table: each opponent's win rate per seed and pooled, then the playstyle."""
    seeds = res["seeds"]
    head = f"{'opponent':<10}" + "".join(f"  {'seed ' + str(s['seed']):<19}" for s in seeds) \
        + f"  {'pooled W/D/L':<14}  {'win [95% CI]':<19}  spread"
    lines = [f"bench learn {res['config']} ({res['kind']}, roles {','.join(res['roles'])}): "
             f"{len(seeds)} seed(s), budget {res['budget_steps']:,} env steps, "
             f"{res['matches']} fresh matches per opponent, {res.get('policy', 'deterministic')} "
             "policy", head]
    lines += _opponent_rows(res["opponents"], [s["eval"] for s in seeds], res["pooled"])
    if "start_pooled" in res:
        lines.append("the clone each seed started from (before any RL), same matches:")
        lines += _opponent_rows(res["opponents"], [s["start"]["eval"] for s in seeds],
                                res["start_pooled"])
    for s in seeds:
        ps = s["playstyle"]
        lines.append(f"seed {s['seed']}: {s['env_steps']:,} env steps in "
                     f"{s['train_seconds'] / 60:.1f} min ({s['steps_per_s']:,.0f}/s), eval "
                     f"{s['eval_seconds'] / 60:.1f} min; held " + " ".join(
                         f"{b} {v:.2f}" for b, v in ps["press_rate"].items())
                     + f"; spam {ps['spam_fraction']:.2f}; matches {ps['match_seconds']:.0f} s; "
                     f"{Path(s['checkpoint']).name}")
        if s.get("verified"):
            lines.append(f"seed {s['seed']}: " + verified_line(s["verified"]))
        if "exploit" in s:
            lines.append(f"seed {s['seed']}: " + exploited(s["exploit"]))
    return "\n".join(lines)


def verified_line(verified: list[list[float]], last: int = 10) -> str:
    """One line of Main's verified standing: its lowest verified win rate against its main
    exploiters in each of its last ``last`` generations — the league's own view of the
    exploitability column, free with the run (a forecast that held on three seeds and
    failed on one, docs/league.md)."""
    tail = verified[-last:]
    return (f"Main's lowest verified win rate against its main exploiters, generations "
            f"{int(tail[0][0])}-{int(tail[-1][0])}: " + " ".join(f"{lo:.1f}" for _, lo, _ in tail))


def exploited(summary: dict[str, Any]) -> str:
    """One line of a seed's exploitability: the best exploiter's fresh win rate with its
    interval and how its wins were decided, every exploiter's, and where each first
    reached 0.5."""
    b, ex = summary["best"], summary["exploiters"]
    firsts = [f"{e['first_half'] / 1e6:.1f} M" if e["first_half"] is not None else "never"
              for e in ex]
    return (f"exploited by the best of {len(ex)} ({summary['steps'] / 1e6:g} M env steps each): "
            f"{_rate(b)} over {b['matches']} fresh matches{exploit_bench.how_won(b)} (" + ", ".join(
                f"{e['fresh']['win_rate']:.2f}" for e in ex) + "); first >= 0.5 at "
            + ", ".join(firsts))


def _opponent_rows(opponents: list[str], evals: list[dict[str, Any]],
                   pool: dict[str, Any]) -> list[str]:
    """One line per opponent: each seed's rate, then the pooled W/D/L, rate and spread."""
    lines = []
    for opp in opponents:
        cells = "".join(f"  {_rate(e[opp]):<19}" for e in evals)
        p = pool[opp]
        lines.append(f"{opp:<10}{cells}  {p['wins']}/{p['draws']}/{p['losses']:<8}  "
                     f"{_rate(p):<19}  {p['spread'][0]:.2f}-{p['spread'][1]:.2f}")
    return lines


def _rate(r: dict[str, Any]) -> str:
    return f"{r['win_rate']:.2f} [{r['win_ci'][0]:.2f},{r['win_ci'][1]:.2f}]"


def main(argv: list[str] | None = None) -> int:
    ap = command_parser("bench learn", "Train a recipe (configs/learn/NAME.toml) over several seeds and judge the "
        "policy that ships (deterministic, or sampled) against the baseline and every CPU level "
        "on fresh matches, with 95 % Wilson intervals (docs/benchmarks.md, Learning).")
    ap.add_argument("config", help="a recipe file, or the NAME of configs/learn/NAME.toml")
    ap.add_argument("--seeds", default=None, help="comma list overriding the recipe's seeds")
    ap.add_argument("--out", default=None, help="where the runs go (default runs/bench/NAME)")
    ap.add_argument("--matches", type=int, default=None, help="fresh matches per opponent")
    ap.add_argument("--eval-envs", type=int, default=EVAL_ARENAS,
                    help=f"evaluation arenas, every opponent's matches at once (default {EVAL_ARENAS})")
    ap.add_argument("--policy", choices=POLICIES, default=None,
                    help="the policy judged: the deterministic mean (`export`) or the sampled "
                    "policy (`export --sampled`); default the recipe's eval.policy "
                    "(deterministic). A finished run is judged again without training")
    add_progress_flag(ap)
    add_json_flag(ap)
    args = ap.parse_args(argv)
    try:
        cfg = LearnConfig.load(args.config)
        if args.matches is not None:
            cfg.matches = args.matches
        if args.policy is not None:
            cfg.policy = args.policy
        cfg.validate()
        seeds = tuple(int(s) for s in args.seeds.split(",")) if args.seeds else None
    except ValueError as e:
        ap.error(str(e))
    out = Path(args.out) if args.out else Path("runs") / "bench" / cfg.name
    res = run(cfg, out, seeds, progress=not args.no_progress, eval_envs=args.eval_envs)
    atomic_write_json(out / "result.json", res)
    print(format_table(res))
    if args.json:
        print(json.dumps(res))
    return 0
