"""Best-response rounds after a league: Main patched against exploiters of *itself*.

``python -m brawlkit league harden --league-dir DIR --run-dir MAIN_RUN --init-from CLONE``

Why: a league's Main beats every CPU level, yet a fresh exploiter trained from the clone
against the final Main alone for 5 M env steps (``bench exploit``, the field's
*approximate exploitability*) still beat most hour-budget Mains (README, "How hard is it
to exploit?"): the league's own exploiters chase Main's moving newest checkpoint, and a
best response to the frozen policy that ships finds holes they never looked for.  A
focused run patched one such hole quickly (seed 1 of ``league_144_verify_long``: its
final Main trained against its best exploiter alone beat it 1.00 after 0.8 M steps).

So each round here is one step of the double oracle (PSRO, Lanctot et al. 2017, with
AlphaStar's rule that an exploiter joins the pool frozen): a fresh exploiter starts from
the clone and trains ``exploiter_steps`` against Main's newest checkpoint alone — the
very exploiter ``bench exploit`` trains (one home: :func:`brawlkit.training.exploit.run`),
its seed far from the benchmark's (0, 1, 2) — and joins the league frozen as a main
exploiter; then Main resumes its own run for ``main_generations`` with
``main_patch_share`` of its games against the exploiters its deterministic policy still
loses to (``--main-verify-matches`` reads that) or, with ``patch_pool = "newest"``, against
the round's own exploiter until it beats it every time (the focused rounds of
``league_144_focus``: below 0.5 on three seeds of three, README), the rest its usual
mixture (the fixed ladder keeps its strength).  Every round's record says how exploitable Main was when it
began (the exploiter's curve and its fresh win rate): the trace of the hardening.

A round is resumable: one whose exploiter is registered and whose Main generations are
done is skipped, so a stopped call continues where it stopped.
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from brawlkit.common.cli_args import add_json_flag, add_progress_flag, command_parser
from brawlkit.common.io import atomic_write_json
from brawlkit.export.bpw import MIX_MAX
from brawlkit.export.cli import export_checkpoint, export_mixture
from brawlkit.league.directory import LeagueDir
from brawlkit.league.records import Member, MemberId
from brawlkit.training.checkpoints import list_checkpoints
from brawlkit.training.config import RunOptions, TrainConfig

#: the hardening exploiters' seeds start here: far from ``bench exploit``'s 0, 1, 2, so
#: the exploiters that judge the hardened Main are never the ones it trained against
SEED_BASE = 100


@dataclass
class HardenSettings:
    """How many best-response rounds, and the size of each (a recipe's ``[harden]``
    table, ``league harden``'s flags)."""

    rounds: int = 2
    #: each round's exploiter: from the clone, against Main's newest checkpoint alone
    exploiter_steps: int = 5_000_000
    exploiter_generations: int = 5
    #: the exploiter's fresh judgement, the round's record (``bench exploit --matches``)
    matches: int = 20
    curve_matches: int = 10
    #: Main after each round: generations of its run resumed, and their size
    main_generations: int = 4
    main_steps_per_generation: int = 1_000_000
    #: share of Main's games against the exploiters it loses to (``--main-patch-share``)
    patch_share: float = 0.8
    #: whom the share goes to (``--main-patch-pool``): "struggling" = the exploiters Main's
    #: deterministic policy loses to (below ``--main-struggle``), "newest" = the round's
    #: own exploiter until Main beats it every time (a focused patch)
    patch_pool: str = "struggling"
    #: what the rounds ship (from two rounds on): "uniform" = the Mains after each round,
    #: one per match; "nash" = the rounds' targets (each met a fresh exploiter of its own)
    #: in the shares that maximise their worst score against every round's exploiter
    #: (:func:`nash_mixture`)
    mixture: str = "uniform"
    #: "nash": fresh matches per (target, exploiter) pair of its payoff matrix
    mixture_matches: int = 20
    #: the exploiters' TrainConfig overrides (``bench exploit --set``)
    exploiter_train: dict[str, Any] | None = None

    def validate(self) -> None:
        """``ValueError`` naming the first bad setting and what it must be."""
        for name in ("rounds", "exploiter_generations", "matches", "curve_matches",
                     "main_generations"):
            if int(getattr(self, name)) < (0 if name == "rounds" else 1):
                raise ValueError(f"harden {name} must be >= {0 if name == 'rounds' else 1}, "
                                 f"got {getattr(self, name)}")
        if self.exploiter_steps < self.exploiter_generations:
            raise ValueError(f"harden exploiter_steps ({self.exploiter_steps}) must be >= "
                             f"exploiter_generations ({self.exploiter_generations})")
        if self.main_steps_per_generation < 1:
            raise ValueError("harden main_steps_per_generation must be >= 1")
        if not 0.0 <= self.patch_share <= 1.0:
            raise ValueError(f"harden patch_share must be in [0, 1], got {self.patch_share}")
        if self.mixture not in ("uniform", "nash"):
            raise ValueError(f"harden mixture must be 'uniform' or 'nash', got {self.mixture!r}")
        if self.mixture_matches < 1:
            raise ValueError(f"harden mixture_matches must be >= 1, got {self.mixture_matches}")
        if self.patch_pool not in ("struggling", "newest"):
            raise ValueError(f"harden patch_pool must be 'struggling' or 'newest', got "
                             f"{self.patch_pool!r}")

    @classmethod
    def from_dict(cls, table: dict[str, Any]) -> HardenSettings:
        """From a recipe's ``[harden]`` table (``[harden.train]``: the exploiters' overrides);
        an unknown key is refused by name."""
        names = {f.name for f in fields(cls)}
        table = dict(table)
        if "train" in table:
            table["exploiter_train"] = table.pop("train")
        bad = sorted(set(table) - names)
        if bad:
            raise ValueError(f"[harden]: unknown key(s) {bad}; known: {sorted(names - {'exploiter_train'})} "
                             "and the [harden.train] table")
        s = cls(**table)
        s.validate()
        return s


def member_id(seed: int, rnd: int) -> str:
    """The pool id of round ``rnd``'s exploiter for a Main of ``seed``."""
    return str(MemberId("main_exploiter", f"harden-s{seed}-r{rnd}", 0))


def harden(league_dir: str | Path, main_run: str | Path, clone: str | Path, s: HardenSettings,
           out: str | Path, base: TrainConfig | None = None,
           progress: bool = True) -> list[dict[str, Any]]:
    """Run (or finish) ``s.rounds`` best-response rounds on Main's run ``main_run`` in the
    league ``league_dir``; each round's record (``<out>/rounds.json`` keeps them with the
    settings they were made with: a rerun with other settings is refused, one with more
    rounds continues).

    ``base``: the TrainConfig Main resumes with (a recipe's; default: its run's own, as
    its newest generation recorded it) — only the generations, their size and the patch
    share are this call's."""
    from brawlkit.training import exploit as best_response  # bench exploit's own exploiter

    s.validate()
    out, main_run, clone = Path(out), Path(main_run), Path(clone)
    pool = LeagueDir(league_dir, create=False)
    gens = list_checkpoints(main_run)
    if not gens:
        raise ValueError(f"--run-dir {main_run}: no finished generation of Main to harden")
    meta = json.loads(gens[-1][1].read_text())
    if meta.get("role") != "main":
        raise ValueError(f"--run-dir {main_run} is a {meta.get('role')!r} run; harden Main's")
    cfg0 = base or TrainConfig.from_dict(meta["config"])
    seed = cfg0.seed
    state_path = out / "rounds.json"
    # every setting the rounds are made with (not their number: more rounds continue a
    # record; not what is shipped from them, chosen at the end)
    key = _rounds_key(s)
    state: dict[str, Any] = json.loads(state_path.read_text()) if state_path.is_file() \
        else {"key": key, "rounds": []}
    # a record made before a setting existed was made with its default
    if {**_rounds_key(HardenSettings()), **state.get("key", {})} != key:
        raise ValueError(f"{state_path} was made with other settings ({state.get('key')}); "
                         "remove it or choose another --out (more --rounds may continue it)")
    rounds: list[dict[str, Any]] = state["rounds"]
    start_gen = rounds[0]["start_generation"] if rounds else gens[-1][0]
    for rnd in range(s.rounds):
        want = start_gen + (rnd + 1) * s.main_generations
        if rnd < len(rounds) and list_checkpoints(main_run)[-1][0] >= want:
            continue
        target = main_run / f"gen_{list_checkpoints(main_run)[-1][0]:04d}.zip"
        es = best_response.ExploitSettings(
            target=target, out=out / f"round_{rnd}", seeds=(SEED_BASE + seed * 10 + rnd,),
            steps=s.exploiter_steps, generations=s.exploiter_generations, init_from=clone,
            random=False, matches=s.matches, curve_matches=s.curve_matches, pick="final",
            train=s.exploiter_train)
        res = best_response.run(es, progress)
        ex = res["exploiters"][0]
        mid = member_id(seed, rnd)
        if not any(m.id == mid for m in pool.members(include_permanent=False)):
            ckpt = Path(ex["picked"]["checkpoint"])
            with tempfile.TemporaryDirectory(prefix="bk_harden_") as td:
                blob = Path(td) / f"{mid}.bpw"
                export_checkpoint(ckpt, blob)
                pool.register(Member(id=mid, role="main_exploiter", generation=0,
                                     settings={**ex["config"], "harden_round": rnd}),
                              checkpoint=ckpt, blob=blob)
        rec = {"round": rnd, "start_generation": start_gen, "target": str(target),
               "exploiter": mid, "fresh": ex["fresh"],
               "curve": [c["win_rate"] for c in ex["curve"]],
               "exploiter_env_steps": ex["env_steps"], "exploiter_seconds": ex["train_seconds"]}
        done = list_checkpoints(main_run)[-1][0]
        left = want - done
        if left > 0:
            cfg = TrainConfig.from_dict({**cfg0.to_dict(), "role": "main", "generations": left,
                                         "steps_per_generation": s.main_steps_per_generation,
                                         "main_patch_share": s.patch_share,
                                         "main_patch_pool": s.patch_pool})
            train(cfg, RunOptions(run_dir=main_run, resume=True, league_dir=league_dir,
                                  progress=progress,
                                  chosen=frozenset({"steps_per_generation", "main_patch_share",
                                                    "main_patch_pool"})))
        rec["main_generation"] = list_checkpoints(main_run)[-1][0]
        rounds = rounds[:rnd] + [rec]
        atomic_write_json(state_path, {"key": key, "rounds": rounds})
        if not progress:
            print(f"harden round {rnd}: exploiter {mid} won {ex['fresh']['win_rate']:.2f} against "
                  f"Main generation {target.stem}; Main now at generation "
                  f"{rec['main_generation']}", file=sys.stderr, flush=True)
    if len(rounds) >= 2:
        # what the rounds return: not the last Main alone — a best response to the
        # exploiters so far, which a new one beats again — but a mixture of Mains, one
        # played per match (the double oracle's answer)
        if s.mixture == "nash":
            nash = nash_mixture(pool, rounds, s.mixture_matches, out, progress)
            parts = [Path(p) for p, n in zip(nash["rows"], nash["slots"], strict=True)
                     for _ in range(n)]
        else:
            parts = [main_run / f"gen_{r['main_generation']:04d}.zip" for r in rounds]
        if len(parts) == 1:  # the maximin put everything on one Main: a plain blob
            export_checkpoint(parts[0], mixture_path(out))
        else:
            export_mixture(parts, mixture_path(out))
    return rounds


def _rounds_key(s: HardenSettings) -> dict[str, Any]:
    """The settings a ``rounds.json`` record must agree on to be continued."""
    skip = {"rounds", "mixture", "mixture_matches"}
    out: dict[str, Any] = json.loads(json.dumps({k: v for k, v in asdict(s).items()
                                                 if k not in skip}))
    return out


#: the payoff matrix's match seeds: a block of their own, beside ``bench exploit``'s
#: curve (+10 M) and fresh (+20 M) blocks
MATRIX_SEED_OFFSET = 35_000_000


def nash_mixture(pool: LeagueDir, rounds: list[dict[str, Any]], matches: int, out: Path,
                 progress: bool = True) -> dict[str, Any]:
    """The rounds' targets in their maximin shares against every round's exploiter,
    recorded in ``<out>/nash.json`` (reused while its rounds and matches are the same).

    Why the targets and not the Mains after each round: each target met a fresh best
    response of its own, so the matrix holds what beats it; the Main after the last round
    met none, and a restricted game overrates whatever no exploiter was trained against.
    Why shares, not a uniform draw: on seed 2 of league_144_verify_long the late Mains
    all kept one hole (every fresh exploiter beat each of them 0.66–0.98), so a uniform
    mixture is as exploitable as its worst members; the maximin gives a Main that its
    exploiters do beat no weight."""
    from brawlkit.export.actor import checkpoint_meta
    from brawlkit.league.nash import maximin, slots
    from brawlkit.training.evaluate import EVAL_ARENAS, EVAL_SEED_BASE
    from brawlkit.training.exploit import play_against

    rows = [str(r["target"]) for r in rounds]
    cols = [str(r["exploiter"]) for r in rounds]
    path = out / "nash.json"
    key = {"rows": rows, "columns": cols, "matches": matches}
    if path.is_file():
        old: dict[str, Any] = json.loads(path.read_text())
        if old.get("key") == key:
            return old
    members = {m.id: m for m in pool.members(include_permanent=False)}
    ckpts = {c: pool.checkpoint_path(members[c]) if c in members else None for c in cols}
    missing = [c for c, p in ckpts.items() if p is None]
    if missing:
        raise ValueError(f"{pool.path}: the rounds' exploiters {missing} are not in the pool "
                         "with their checkpoints")
    found = {c: p for c, p in ckpts.items() if p is not None}
    # each exploiter plays at its own checkpoint's cadence and layout (as `eval` reads them)
    metas = {c: checkpoint_meta(p) for c, p in found.items()}
    t0 = time.perf_counter()
    score = np.zeros((len(rows), len(cols)))
    with tempfile.TemporaryDirectory(prefix="bk_nash_") as td:
        for i, row in enumerate(rows):
            blob = Path(td) / f"row{i}.bpw"
            export_checkpoint(Path(row), blob)
            for j, col in enumerate(cols):
                kw = {"input_layout": metas[col].input_layout,
                      "action_repeat": metas[col].action_repeat}
                r = play_against(found[col], blob,
                                 EVAL_SEED_BASE + MATRIX_SEED_OFFSET, matches, EVAL_ARENAS, kw)
                # Main's score against the exploiter: its losses are Main's wins
                score[i, j] = (r["losses"] + 0.5 * r["draws"]) / r["matches"]
                if not progress:
                    print(f"harden nash: {Path(row).stem} scores {score[i, j]:.2f} against "
                          f"{col}", file=sys.stderr, flush=True)
    eq = maximin(score)
    counts = slots(eq.weights, MIX_MAX)
    g = math.gcd(*counts)
    counts = [c // g for c in counts]
    rec = {"key": key, "rows": rows, "columns": cols, "matches": matches,
           "score": [[round(float(x), 4) for x in row] for row in score],
           "weights": [round(float(w), 4) for w in eq.weights],
           "slots": counts, "value": [round(eq.low, 4), round(eq.high, 4)],
           "seconds": round(time.perf_counter() - t0, 1)}
    atomic_write_json(path, rec)
    return rec


def mixture_path(out: str | Path) -> Path:
    """Where :func:`harden` writes what the rounds ship: the mixture of Mains (one blob
    when the maximin chose a single Main)."""
    return Path(out) / "mixture.bpw"


def train(cfg: TrainConfig, options: RunOptions) -> Any:
    """The trainer (imported here so the module loads without torch for ``--help``)."""
    from brawlkit.training.ppo import train as ppo_train

    return ppo_train(cfg, options)


def main(argv: list[str] | None = None) -> int:
    ap = command_parser("league harden", "Best-response rounds after a league: a fresh "
                        "exploiter of Main's newest checkpoint joins the pool frozen, then Main "
                        "trains on against what beats it (docs/league.md, Hardening).")
    ap.add_argument("--league-dir", required=True, help="the league Main trained in")
    ap.add_argument("--run-dir", required=True, help="Main's run directory (runs/main/<run>)")
    ap.add_argument("--init-from", required=True,
                    help="the clone each round's exploiter starts from (runs/imitate/gen_0000.zip)")
    ap.add_argument("--out", default=None,
                    help="the rounds' records (default <league-dir>/harden)")
    d = HardenSettings()
    for f in fields(HardenSettings):
        if f.name == "exploiter_train":
            continue
        ap.add_argument(f"--{f.name.replace('_', '-')}", type=type(getattr(d, f.name)),
                        default=getattr(d, f.name), help=f"(default {getattr(d, f.name)})")
    add_progress_flag(ap)
    add_json_flag(ap)
    args = ap.parse_args(argv)
    s = HardenSettings(**{f.name: getattr(args, f.name) for f in fields(HardenSettings)
                          if f.name != "exploiter_train"})
    out = Path(args.out) if args.out else Path(args.league_dir) / "harden"
    try:  # harden validates the settings before anything runs
        rounds = harden(args.league_dir, args.run_dir, args.init_from, s, out,
                        progress=not args.no_progress)
    except (ValueError, FileNotFoundError) as e:
        print(f"league harden: {e}", file=sys.stderr)
        return 2
    mix = mixture_path(out)
    if args.json:
        print(json.dumps({"settings": asdict(s), "rounds": rounds,
                          "mixture": str(mix) if mix.is_file() else None}))
    else:
        for r in rounds:
            f = r["fresh"]
            print(f"round {r['round']}: exploiter of {Path(r['target']).stem} won "
                  f"{f['win_rate']:.2f} [{f['win_ci'][0]:.2f}, {f['win_ci'][1]:.2f}] "
                  f"(curve {' '.join(f'{c:.2f}' for c in r['curve'])}); Main -> generation "
                  f"{r['main_generation']}")
        if mix.is_file():
            print(f"the Mains after each round, one played per match: {mix} (what ships; "
                  f"`bench exploit {mix}` measures it)")
    return 0
