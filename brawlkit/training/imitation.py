"""``python -m brawlkit imitate``: behaviour cloning of the PPO actor -- AlphaStar's
supervised start, from CPU matches simulated in C, saved demo sets and ``.bpr`` replays.

Why: PPO from random weights needs millions of steps to play at all, while the
built-in CPU plays well for free.  A clone of it is a policy that already plays, and
``train --init-from`` (any role, with or without a league, optionally with a KL term
toward the clone: ``training/kl.py``) continues it.  What it does, in order
(docs/imitation.md has the measurements behind every default):

1. **data** (:func:`build_dataset`): CPU teacher(s) against CPU opponents in C
   (``training/demos.py``: inputs built by ``obs.c``, the env's builder; labels by the
   label rule, ``last_press`` by default), plus ``--data`` sets and ``--replay`` files;
2. **split** by match (a match's rows are correlated: a held-out row must come from a
   match no training row came from);
3. **clone** (:class:`Cloner`): the exact network :func:`~brawlkit.training.ppo.build_model`
   makes -- so ``export`` and ``brawlpit_bot`` take the result unchanged -- trained on
   the actor's Gaussian mean (the deterministic policy that ships: sticks clipped, a
   button pressed iff its value > 0), with a held-out loss, per-button accuracy, press
   recall and stick error every epoch;
4. **value warm-up**: the critic regresses, in the same steps, the discounted return of
   the run's own reward (``make_reward(cfg.reward)`` over consecutive snapshots of each
   match, ``cfg.gamma`` per decision, the match's final snapshot as the last step):
   the first PPO rollouts then compute advantages with a critic that knows roughly
   what the policy's states are worth, instead of a random one whose errors become
   the first policy gradients;
5. **DAgger** rounds (optional): the clone exported to ``.bpw`` plays as the
   collector's student with probability ``beta`` per decision, the CPU teacher labels
   the states it visits, the sets are aggregated and the clone trained further;
6. **checkpoint**: ``runs/<role>/<run>/gen_0000.zip`` + ``.json`` through
   :func:`~brawlkit.training.checkpoints.save_generation` -- an ordinary generation 0
   that ``eval``, ``export``, ``train --init-from`` and ``train --resume`` take as is --
   with an ``imitation`` entry (dataset, label rule, losses, accuracies per epoch,
   DAgger rounds, the clone's strength in C) and, unless ``--eval-episodes 0``, the
   same evaluation a training generation has.

``python -m brawlkit imitate table`` prints the held-teacher table: what a *perfect*
clone of each label rule would win (the teacher itself, deciding at repeat R).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from brawlkit.common.cli_args import command_parser
from brawlkit.env.actions import ACTION_NAMES
from brawlkit.training.config import (
    DEFAULT_RUNS_ROOT,
    TrainConfig,
    add_config_arguments,
)
from brawlkit.training.demos import LABEL_RULES, DemoSet, collect_demos, concat, demos_from_replay
from brawlkit.wire.cpu_level import CPU_LEVELS

BUTTONS = ACTION_NAMES[2:]
#: --loss choices (docs/imitation.md: which and why)
LOSSES = ("mse", "gaussian", "hinge")
#: seeds of DAgger round k's matches: seed + k * this (never a round-0 seed)
_DAGGER_SEED_STRIDE = 1_000_003


@dataclass
class ImitationConfig:
    """Everything an imitation run depends on besides the :class:`TrainConfig` of the
    network and the reward (recorded in the checkpoint's ``imitation`` entry)."""

    teachers: tuple[int, ...] = (7,)
    opponents: tuple[int, ...] = tuple(CPU_LEVELS)
    matches: int = 40
    """matches per teacher per opponent (0: only --data / --replay)"""
    label_rule: str = "last_press"
    data: tuple[str, ...] = ()
    replays: tuple[str, ...] = ()
    """``FILE.bpr:SLOT``"""
    holdout: float = 0.1
    epochs: int = 15
    batch_size: int = 1024
    lr: float = 1e-3
    loss: str = "mse"
    press_weight: float = 1.0
    """weight of a pressed button's rows in the button loss (the rare class)"""
    value_warmup: bool = True
    dagger_rounds: int = 0
    dagger_beta: float = 0.5
    dagger_matches: int = 20
    dagger_epochs: int = 5
    c_eval_matches: int = 20
    """matches per CPU level 1-8 of the clone in C after cloning (0: none)"""
    save_data: str | None = None

    def validate(self, cfg: TrainConfig) -> None:
        """``ValueError`` naming the first bad setting."""
        if self.label_rule not in LABEL_RULES:
            raise ValueError(f"label_rule must be one of {sorted(LABEL_RULES)}, got {self.label_rule!r}")
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {self.loss!r}")
        for name in ("teachers", "opponents"):
            bad = [lv for lv in getattr(self, name) if lv not in CPU_LEVELS]
            if bad or (self.matches > 0 and not getattr(self, name)):
                raise ValueError(f"{name} must be CPU levels {CPU_LEVELS[0]}..{CPU_LEVELS[-1]}, "
                                 f"got {list(getattr(self, name))}")
        for name in ("matches", "dagger_rounds", "c_eval_matches"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in ("epochs", "batch_size", "dagger_matches", "dagger_epochs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 < self.holdout < 1.0:
            raise ValueError(f"holdout must be in (0, 1), got {self.holdout}")
        if not (self.lr > 0 and self.press_weight > 0):
            raise ValueError("lr and press_weight must be > 0")
        if not 0.0 <= self.dagger_beta <= 1.0:
            raise ValueError(f"dagger_beta must be in [0, 1], got {self.dagger_beta}")
        if self.matches == 0 and not (self.data or self.replays):
            raise ValueError("no data: --matches 0 needs --data FILE.npz or --replay FILE.bpr:SLOT")
        if self.dagger_rounds and self.matches == 0:
            raise ValueError("DAgger needs the CPU teachers (--matches > 0): only a CPU can "
                             "label the states a student visits")
        for spec in self.replays:
            parse_replay_spec(spec)


def parse_replay_spec(spec: str) -> tuple[Path, int]:
    """``FILE.bpr:SLOT`` -> (path, slot); ``ValueError`` naming the spec."""
    path, sep, slot = spec.rpartition(":")
    if not sep or slot not in ("0", "1"):
        raise ValueError(f"--replay {spec!r}: expected FILE.bpr:SLOT with SLOT 0 or 1 (the "
                         "player whose inputs are the labels)")
    if not Path(path).is_file():
        raise ValueError(f"--replay {spec!r}: {path} not found")
    return Path(path), int(slot)


# ----------------------------------------------------------------- 1. data
def _collect(icfg: ImitationConfig, cfg: TrainConfig, seed: int, student: Path | None = None,
             beta: float = 0.0, matches: int | None = None) -> DemoSet:
    """Every CPU teacher against every opponent in C (:func:`collect_demos`)."""
    parts = [collect_demos(t, list(icfg.opponents), matches or icfg.matches, seed,
                           action_repeat=cfg.action_repeat, input_layout=cfg.input_layout,
                           student=student, beta=beta, beta_seed=seed,
                           label_rule=icfg.label_rule)
             for t in icfg.teachers]
    return concat(parts) if len(parts) > 1 else parts[0]


def build_dataset(icfg: ImitationConfig, cfg: TrainConfig) -> DemoSet:
    """The cloning set: generated CPU matches, ``--data`` sets, ``--replay`` files, all of
    ``cfg``'s action repeat and input layout (a set of another is refused, naming it)."""
    parts: list[DemoSet] = []
    if icfg.matches:
        parts.append(_collect(icfg, cfg, cfg.seed))
    for name in icfg.data:
        ds = DemoSet.load(name, input_layout=cfg.input_layout)
        if ds.action_repeat != cfg.action_repeat:
            raise ValueError(f"--data {name}: action repeat {ds.action_repeat}, this run "
                             f"--action-repeat {cfg.action_repeat}")
        parts.append(ds)
    for spec in icfg.replays:
        replay, slot = parse_replay_spec(spec)
        parts.append(demos_from_replay(replay, slot, cfg.action_repeat, cfg.input_layout,
                                       label_rule=icfg.label_rule))
    ds = concat(parts) if len(parts) > 1 else parts[0]
    if len(ds) == 0:
        raise ValueError("the dataset has no rows")
    return ds


def split_rows(ds: DemoSet, holdout: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(training rows, held-out rows): whole matches, about ``holdout`` of them held out
    (at least one each side when there are two matches or more)."""
    m = len(ds.matches)
    rng = np.random.default_rng(seed)
    n_val = min(m - 1, max(1, round(holdout * m))) if m > 1 else 0
    val_matches = np.zeros(m, bool)
    val_matches[rng.permutation(m)[:n_val]] = True
    is_val = val_matches[ds.match]
    if n_val == 0:  # one match: hold out its last rows instead
        is_val = np.arange(len(ds)) >= int(len(ds) * (1 - holdout))
    return np.flatnonzero(~is_val), np.flatnonzero(is_val)


def value_targets(ds: DemoSet, reward: str, gamma: float) -> np.ndarray:
    """Per row, the discounted return of the run's reward from that decision to the end
    of its match: ``make_reward(reward)`` stepped over the match's consecutive snapshots
    exactly as the env steps it (reset on the first, ``ticks_elapsed`` = the ticks
    between two decisions), the match's final snapshot as the last step's."""
    from brawlkit.env.rewards import make_reward
    from brawlkit.wire.protocol import parse_snapshot

    out = np.zeros(len(ds), np.float32)
    for m in ds.matches:
        first, n, slot = int(m["first_row"]), int(m["rows"]), int(m["teacher_slot"])
        if n == 0:
            continue
        snaps = [parse_snapshot(ds.snapshots[first + i].tobytes()) for i in range(n)]
        snaps.append(parse_snapshot(m["final_snapshot"].tobytes()))
        fn = make_reward(reward)
        fn.reset(snaps[0], slot)
        rewards = [fn(snaps[i], snaps[i + 1], slot, snaps[i + 1].tick - snaps[i].tick,
                      ds.actions[first + i])[0] for i in range(n)]
        g = 0.0
        for i in range(n - 1, -1, -1):
            g = rewards[i] + gamma * g
            out[first + i] = g
    return out


# ----------------------------------------------------------------- 3-4. the clone
@dataclass
class _Split:
    """A dataset with its value targets and its training / held-out rows."""

    ds: DemoSet
    returns: np.ndarray
    train: np.ndarray
    val: np.ndarray

    @classmethod
    def of(cls, ds: DemoSet, cfg: TrainConfig, holdout: float, seed: int) -> _Split:
        train, val = split_rows(ds, holdout, seed)
        return cls(ds, value_targets(ds, cfg.reward, cfg.gamma), train, val)

    def extend(self, new: _Split) -> _Split:
        """This split with ``new`` appended (DAgger's aggregation)."""
        off = len(self.ds)
        return _Split(concat([self.ds, new.ds]), np.concatenate([self.returns, new.returns]),
                      np.concatenate([self.train, new.train + off]),
                      np.concatenate([self.val, new.val + off]))


class Cloner:
    """Fits a PPO model's policy to demo rows: the actor's Gaussian mean to the labels
    by ``icfg.loss`` (and, with ``gaussian``, its log-std), the critic to the value
    targets (with ``icfg.value_warmup``), one Adam over both."""

    VF_COEF = 0.5  # SB3's vf_coef: the critic's weight beside the actor's loss, as in PPO

    def __init__(self, model: Any, icfg: ImitationConfig, seed: int) -> None:
        import torch as th

        from brawlkit.common.threads import limit_threads

        limit_threads()  # one compute thread, as training: a second one only waits on a busy VM
        self.th, self.policy, self.icfg = th, model.policy, icfg
        self.opt = th.optim.Adam(self.policy.parameters(), lr=icfg.lr)
        self.gen = th.Generator().manual_seed(seed)

    def _forward(self, x: Any) -> tuple[Any, Any]:
        """(Gaussian mean, value) of the policy on inputs ``x``: SB3's own modules."""
        p = self.policy
        latent_pi, latent_vf = p.mlp_extractor(p.extract_features(x))
        return p.action_net(latent_pi), p.value_net(latent_vf).squeeze(-1)

    def _bc_loss(self, mean: Any, y: Any) -> Any:
        """The actor's loss on a batch (docs/imitation.md, "The loss")."""
        th, icfg = self.th, self.icfg
        w = th.ones_like(y)
        w[:, 2:] = th.where(y[:, 2:] > 0, icfg.press_weight, 1.0)
        if icfg.loss == "gaussian":
            log_std = self.policy.log_std
            err = 0.5 * ((y - mean) / th.exp(log_std)) ** 2 + log_std
        elif icfg.loss == "hinge":  # squared hinge on the buttons' sign, MSE on the sticks
            err = th.cat([(mean[:, :2] - y[:, :2]) ** 2,
                          th.relu(1.0 - y[:, 2:] * mean[:, 2:]) ** 2], dim=1)
        else:
            err = (mean - y) ** 2
        return (w * err).sum() / w.sum()

    def _loss(self, split: _Split, idx: np.ndarray) -> tuple[Any, Any, Any]:
        th = self.th
        x = th.from_numpy(split.ds.inputs[idx])
        y = th.from_numpy(split.ds.actions[idx])
        mean, value = self._forward(x)
        bc = self._bc_loss(mean, y)
        vf = ((value - th.from_numpy(split.returns[idx])) ** 2).mean()
        return (bc + self.VF_COEF * vf if self.icfg.value_warmup else bc), bc, vf

    def fit(self, split: _Split, epochs: int, tag: str, progress: bool) -> list[dict[str, Any]]:
        """``epochs`` passes over the training rows in shuffled batches; after each, the
        held-out metrics (:meth:`metrics`), printed and returned."""
        th, bs = self.th, self.icfg.batch_size
        n_batches = -(-len(split.train) // bs)
        history = []
        bar = _bar(epochs * n_batches, tag, progress)
        try:
            for epoch in range(epochs):
                order = split.train[th.randperm(len(split.train), generator=self.gen).numpy()]
                self.policy.set_training_mode(True)
                for b in range(n_batches):
                    loss, bc, _ = self._loss(split, np.sort(order[b * bs:(b + 1) * bs]))
                    self.opt.zero_grad()
                    loss.backward()
                    self.opt.step()
                    if bar is not None:
                        bar.update(1)
                        if b % 50 == 0:
                            bar.set_postfix(loss=f"{bc.item():.4f}")
                history.append({"epoch": epoch + 1, **self.metrics(split)})
                _say(bar, f"{tag} epoch {epoch + 1}: " + _summary(history[-1]))
        finally:
            if bar is not None:
                bar.close()
        return history

    def metrics(self, split: _Split, chunk: int = 1 << 17) -> dict[str, Any]:
        """Held-out: the actor's loss, per-button accuracy (sign of the mean = sign of
        the label), press recall and rates, stick error of the clipped mean, the share
        of rows whose four buttons are all right; the critic's error."""
        th, rows = self.th, split.val
        self.policy.set_training_mode(False)
        means, values, bc = [], [], 0.0
        with th.no_grad():
            for i in range(0, len(rows), chunk):
                idx = rows[i:i + chunk]
                mean, value = self._forward(th.from_numpy(split.ds.inputs[idx]))
                bc += self._bc_loss(mean, th.from_numpy(split.ds.actions[idx])).item() * len(idx)
                means.append(mean.numpy())
                values.append(value.numpy())
        mean, v, g = np.concatenate(means), np.concatenate(values), split.returns[rows]
        y = split.ds.actions[rows]
        pred, want = mean[:, 2:] > 0, y[:, 2:] > 0

        def per_button(values: Any) -> dict[str, Any]:
            return dict(zip(BUTTONS, values, strict=True))
        recall = [round(float(pred[want[:, b], b].mean()), 4) if want[:, b].any() else None
                  for b in range(len(BUTTONS))]
        return {
            "loss": bc / max(len(rows), 1),
            "value_mse": float(np.mean((v - g) ** 2)),
            "value_explained_variance": float(1 - np.var(g - v) / np.var(g)) if np.var(g) else 0.0,
            "button_accuracy": per_button(np.mean(pred == want, 0).round(4).tolist()),
            "press_recall": per_button(recall),
            "press_rate": per_button(pred.mean(0).round(4).tolist()),
            "teacher_press_rate": per_button(want.mean(0).round(4).tolist()),
            "stick_mae": dict(zip(("x", "y"), np.abs(np.clip(mean[:, :2], -1, 1) - y[:, :2])
                                  .mean(0).round(4).tolist(), strict=True)),
            "buttons_all_right": round(float(np.mean(np.all(pred == want, 1))), 4),
            "log_std": self.policy.log_std.detach().numpy().round(3).tolist(),
        }


def _bar(total: int, tag: str, enabled: bool) -> Any:
    if not enabled:
        return None
    from brawlkit.common.progress import progress_bar

    return progress_bar(total, f"imitate {tag}", "batch", mininterval=1.0, dynamic_ncols=True)


def _say(bar: Any, line: str) -> None:
    if bar is not None:
        bar.write(line, file=sys.stderr)
    else:
        print(line, file=sys.stderr, flush=True)


def _summary(m: dict[str, Any]) -> str:
    acc = " ".join(f"{k} {v:.3f}" for k, v in m["button_accuracy"].items())
    rec = " ".join(f"{k} {v:.2f}" for k, v in m["press_recall"].items() if v is not None)
    return (f"held-out loss {m['loss']:.4f}, accuracy {acc}, press recall {rec}, stick error "
            f"x {m['stick_mae']['x']:.3f} y {m['stick_mae']['y']:.3f}, value mse {m['value_mse']:.3f}")


# ----------------------------------------------------------------- 5. DAgger, the clone in C
def export_blob(model: Any, cfg: TrainConfig, path: Path) -> Path:
    """The clone's actor as a ``.bpw`` (what ``export`` writes from the saved zip)."""
    from brawlkit.export.actor import actor_layers
    from brawlkit.export.bpw import pack_bpw
    from brawlkit.training.ppo import policy_meta

    path.write_bytes(pack_bpw(actor_layers(model.policy), policy_meta(cfg)))
    return path


def dagger_round(cloner: Cloner, split: _Split, icfg: ImitationConfig, cfg: TrainConfig,
                 k: int, blob: Path, progress: bool) -> tuple[_Split, dict[str, Any]]:
    """Round ``k``: the clone (``blob``) plays as the collector's student with
    probability ``icfg.dagger_beta`` per decision, the CPU teachers label every state,
    the rows join the set and the clone trains ``icfg.dagger_epochs`` more epochs."""
    seed = cfg.seed + k * _DAGGER_SEED_STRIDE
    new = _collect(icfg, cfg, seed, student=blob, beta=icfg.dagger_beta,
                   matches=icfg.dagger_matches)
    split = split.extend(_Split.of(new, cfg, icfg.holdout, seed))
    history = cloner.fit(split, icfg.dagger_epochs, f"dagger {k}", progress)
    return split, {"round": k, "beta": icfg.dagger_beta, "matches": len(new.matches),
                   "rows": len(new), "student_decisions": int(new.student.sum()),
                   "results_with_student": new.results(), "history": history}


def strength_in_c(blob: Path, matches: int, seed: int) -> dict[str, dict[str, Any]]:
    """The clone against every CPU level in C (the collector with the clone as teacher:
    its deterministic policy as ``brawlpit_bot`` plays it, slots alternated, no UDP):
    a quick measure, statistically the same as ``eval`` (the CPU's seeds differ)."""
    out = {}
    for level in CPU_LEVELS:
        res = {"win": 0, "draw": 0, "loss": 0}
        for start in range(0, matches, 25):  # bounded buffers
            r = collect_demos(blob, level, min(25, matches - start), seed + start).results()
            res = {k: res[k] + r[k] for k in res}
        out[f"cpu_{level}"] = {**res, "win_rate": round(res["win"] / matches, 4)}
    return out


# ----------------------------------------------------------------- 6. the checkpoint
@dataclass
class ImitationResult:
    run_dir: Path
    checkpoint: Path
    rows: int
    matches: int
    history: list[dict[str, Any]]
    dagger: list[dict[str, Any]] = field(default_factory=list)
    c_eval: dict[str, Any] = field(default_factory=dict)
    evals: dict[str, Any] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        final = (self.dagger[-1]["history"] if self.dagger else self.history)[-1]
        return {"run_dir": str(self.run_dir), "checkpoint": str(self.checkpoint),
                "rows": self.rows, "matches": self.matches, "final": final,
                "c_eval": {k: v["win_rate"] for k, v in self.c_eval.items()},
                "eval": {k: {"win_rate": v["win_rate"], "sampled_win_rate": v["sampled"]["win_rate"]}
                         for k, v in self.evals.items()},
                "seconds": self.seconds}


def _evaluate(model: Any, cfg: TrainConfig) -> dict[str, dict[str, Any]]:
    """A training generation's evaluation (``evaluate_model`` on the evaluation arenas of
    one server), or nothing with ``--eval-episodes 0``."""
    if not cfg.eval_episodes or not cfg.eval_levels:
        return {}
    from brawlkit.env import BrawlpitEnv
    from brawlkit.training.envs import env_kwargs
    from brawlkit.training.evaluate import EVAL_ARENAS, evaluate_model
    from brawlkit.training.ppo import policy_meta
    from brawlkit.wire.server_process import ServerGroup

    n = min(EVAL_ARENAS, len(cfg.eval_levels) * cfg.eval_episodes)
    with ServerGroup(n) as group:
        envs = [BrawlpitEnv(opponent="cpu:1", server=group.server_for(i),
                            **env_kwargs(cfg, training=False)) for i in range(n)]
        try:
            return evaluate_model(model, cfg.eval_levels, cfg.eval_episodes, envs, policy_meta(cfg))
        finally:
            for e in envs:
                e.close()


def _dataset_meta(ds: DemoSet) -> dict[str, Any]:
    """What the checkpoint records of its dataset (the parts' metadata without seed lists)."""
    parts = ds.meta.get("parts") or [ds.meta]
    keep = ("source", "teacher", "opponent", "opponents", "label_rule", "replay", "player",
            "slot", "student", "beta")
    return {"rows": len(ds), "matches": len(ds.matches), "action_repeat": ds.action_repeat,
            "input_layout": ds.input_layout, "label_rule": ds.meta.get("label_rule"),
            "teacher_results": ds.results(),
            "parts": [{k: p[k] for k in keep if k in p} for p in parts]}


def save_clone(model: Any, rdir: Path, cfg: TrainConfig, imitation: dict[str, Any],
               evals: dict[str, dict[str, Any]]) -> Path:
    """``gen_0000.zip`` + ``.json`` with the keys a training generation's metadata has
    (``steps`` 0: no env step was played) and the ``imitation`` entry; ``best.json``
    when it was evaluated."""
    from brawlkit.env.rewards import make_reward, reward_config
    from brawlkit.export.actor import network_description
    from brawlkit.training.checkpoints import now_iso, save_generation, update_best
    from brawlkit.training.ppo import _eval_record, policy_meta, selection_score

    score = selection_score(evals) if evals else None
    zip_path = save_generation(model, rdir, 0, {
        "role": cfg.role, "parent": None, "steps": 0, "steps_this_generation": 0,
        "created": now_iso(), "seed": cfg.seed, "config": cfg.to_dict(),
        "policy": {**network_description(cfg.hidden), "obs_dim": int(model.observation_space.shape[0]),
                   "act_dim": int(model.action_space.shape[0]), **vars(policy_meta(cfg))},
        "reward_config": reward_config(make_reward(cfg.reward)), "sampler": None,
        "eval": {k: _eval_record(v) for k, v in evals.items()}, "selection_score": score,
        "member": None, "reset_after": False, "imitation": imitation})
    if score is not None:
        update_best(rdir, 0, zip_path, score)
    return zip_path


def _run_dir(cfg: TrainConfig, run_dir: str | Path | None, runs_root: str | Path) -> Path:
    from brawlkit.training.checkpoints import list_checkpoints, new_run_dir

    rd = Path(run_dir) if run_dir else new_run_dir(cfg.role, cfg.seed, runs_root)
    if list_checkpoints(rd):
        raise FileExistsError(f"{rd} already holds checkpoints: choose another --run-dir")
    rd.mkdir(parents=True, exist_ok=True)
    return rd


def imitate(icfg: ImitationConfig, cfg: TrainConfig, run_dir: str | Path | None = None,
            runs_root: str | Path = DEFAULT_RUNS_ROOT, progress: bool = True) -> ImitationResult:
    """Build the dataset, clone, (DAgger,) measure, save: the module docstring's steps.
    ``cfg`` gives the network's input layout and cadence, the reward and gamma of the
    value warm-up, the log-std the clone starts from, the role and seed, the evaluation."""
    from brawlkit.common.threads import limit_threads
    from brawlkit.env.dummy import ZeroCostEnv
    from brawlkit.training.ppo import build_model

    cfg.validate()
    icfg.validate(cfg)
    if cfg.init_from or cfg.kl_coef:
        raise ValueError("imitate starts from the demonstrations: --init-from / --kl-coef "
                         "belong to the `train` that continues the clone")
    limit_threads()
    rdir = _run_dir(cfg, run_dir, runs_root)
    t0 = time.perf_counter()
    ds = build_dataset(icfg, cfg)
    if icfg.save_data:
        ds.save(icfg.save_data)
    split = _Split.of(ds, cfg, icfg.holdout, cfg.seed)
    seconds = {"data": time.perf_counter() - t0}
    model = build_model(cfg, ZeroCostEnv(input_layout=cfg.input_layout))
    cloner = Cloner(model, icfg, cfg.seed)
    history = cloner.fit(split, icfg.epochs, "clone", progress)
    seconds["clone"] = time.perf_counter() - t0 - seconds["data"]
    rounds: list[dict[str, Any]] = []
    c_eval: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="brawlkit-imitate-") as tmp:
        for k in range(1, icfg.dagger_rounds + 1):
            blob = export_blob(model, cfg, Path(tmp) / f"round_{k}.bpw")
            split, record = dagger_round(cloner, split, icfg, cfg, k, blob, progress)
            rounds.append(record)
        seconds["dagger"] = time.perf_counter() - t0 - seconds["data"] - seconds["clone"]
        if icfg.c_eval_matches:
            blob = export_blob(model, cfg, Path(tmp) / "clone.bpw")
            c_eval = strength_in_c(blob, icfg.c_eval_matches, cfg.seed + 7_777_777)
    t1 = time.perf_counter()
    evals = _evaluate(model, cfg)
    seconds["eval"] = time.perf_counter() - t1
    seconds = {k: round(v, 2) for k, v in seconds.items()}
    imitation = {"settings": asdict(icfg), "dataset": _dataset_meta(split.ds),
                 "train_rows": len(split.train), "held_out_rows": len(split.val),
                 "history": history, "dagger": rounds, "c_eval": c_eval, "seconds": seconds}
    zip_path = save_clone(model, rdir, cfg, imitation, evals)
    seconds["total"] = round(time.perf_counter() - t0, 2)
    return ImitationResult(rdir, zip_path, len(split.ds), len(split.ds.matches), history, rounds,
                           c_eval, evals, seconds)


# ----------------------------------------------------------------- the clone runs start from
#: where the clone lives (relative to the data root, as every runs/ path)
CLONE_DIR = "runs/imitate"
#: the clone every start from replays uses — ``make train``, ``train_role.ipynb``,
#: ``colab_bootstrap.py`` (:func:`ensure_clone`, ``imitate --ensure``) — as the chosen
#: recipe makes it (configs/learn/chosen.toml's [imitation]): CPU 8 the teacher against
#: every level, 40 matches each, 30 epochs, 3 DAgger rounds with beta 1 (docs/imitation.md:
#: cpu:1-4 1.00, cpu:5 0.75 before any RL; 1.5 minutes on 2 cores, 3 minutes (179 s) on
#: 2 cores shared with other jobs at load ~8)
CLONE_ARGS: tuple[str, ...] = (
    "--teacher", "8", "--matches", "40", "--label-rule", "last_press", "--epochs", "30",
    "--dagger-rounds", "3", "--dagger-beta", "1.0", "--c-eval-matches", "0",
    "--eval-episodes", "0")
#: the run settings a clone must share with the run it starts (``train --init-from``
#: refuses another network, cadence or input layout)
CLONE_SHAPE = ("action_repeat", "input_layout", "hidden", "log_std_init")


def clone_settings(args: Sequence[str] = (), like: TrainConfig | None = None
                   ) -> tuple[ImitationConfig, TrainConfig]:
    """The clone's settings: :data:`CLONE_ARGS` with ``args`` (``imitate`` flags) over
    them, shaped ``like`` a run's config; ``ValueError`` naming a bad one."""
    ap = build_parser()
    ap.exit_on_error = False
    try:
        parsed, extra = ap.parse_known_args([*CLONE_ARGS, *args])
    except argparse.ArgumentError as e:
        raise ValueError(f"clone settings {' '.join(args)!r}: {e}") from None
    if extra:
        raise ValueError(f"clone settings: unknown `imitate` flag(s) {extra} (python -m "
                         "brawlkit imitate --help lists them)")
    return _configs(parsed, like)


def _reusable_clone(run_dir: Path, icfg: ImitationConfig, cfg: TrainConfig) -> Path | None:
    """``run_dir``'s clone when it was built with exactly these settings; None when there
    is none (a clone of other settings is removed first, so it is rebuilt in place)."""
    from brawlkit.training.checkpoints import list_checkpoints

    zip_path, meta_path = run_dir / "gen_0000.zip", run_dir / "gen_0000.json"
    held = list_checkpoints(run_dir)
    if not held:
        return None
    try:
        meta = json.loads(meta_path.read_text())
        stored = (meta["imitation"]["settings"], {k: meta["config"][k] for k in (*TRAIN_FIELDS, *CLONE_SHAPE)})
    except (OSError, ValueError, KeyError, TypeError):
        stored = None
    if stored is None or len(held) != 1:
        raise FileExistsError(f"{run_dir} holds checkpoints that are not one imitation clone: "
                              "choose another clone directory")
    want = json.loads(json.dumps((asdict(icfg), {k: cfg.to_dict()[k]
                                                 for k in (*TRAIN_FIELDS, *CLONE_SHAPE)})))
    if list(stored) == want and zip_path.is_file():
        return zip_path
    print(f"{run_dir}: its clone was built with other settings; building it again",
          file=sys.stderr)
    for name in ("gen_0000.zip", "gen_0000.json", "best.json"):
        (run_dir / name).unlink(missing_ok=True)
    return None


def ensure_clone(run_dir: str | Path = CLONE_DIR, args: Sequence[str] = (),
                 like: TrainConfig | None = None, progress: bool = True) -> Path:
    """The clone a run starts from (``--init-from``): ``run_dir/gen_0000.zip``, built by
    :func:`imitate` with :func:`clone_settings` unless ``run_dir`` already holds one built
    with the same settings (:func:`clone_in`, the one home of "clone if absent", which
    ``bench learn`` calls with a recipe's settings).  ``make train`` runs it as
    ``imitate --ensure``, ``train_role.ipynb`` and ``colab_bootstrap.py`` call it."""
    icfg, cfg = clone_settings(args, like)
    return clone_in(run_dir, icfg, cfg, progress)


def clone_in(run_dir: str | Path, icfg: ImitationConfig, cfg: TrainConfig,
             progress: bool = True) -> Path:
    """``run_dir``'s clone of exactly these settings, built by :func:`imitate` when it
    holds none: so a ``bench learn`` seed, a notebook or ``make train`` interrupted after
    its minutes of imitation (or two recipes sharing one clone) never builds it twice."""
    rd = Path(run_dir)
    clone = _reusable_clone(rd, icfg, cfg)
    if clone is not None:
        return clone
    return imitate(icfg, cfg, rd, progress=progress).checkpoint


# ----------------------------------------------------------------- the held-teacher table
def teacher_table(teachers: list[int], repeats: list[int], rules: list[str], matches: int,
                  seed: int) -> list[dict[str, Any]]:
    """What a perfect clone wins: the CPU teacher itself, deciding at repeat R by each
    label rule (R = 1: the full-rate CPU, which every rule is there), against the level
    below it and its own level, ``matches`` matches each (match j seeded ``seed + j``,
    the teacher in slot j % 2), with the presses it made, dropped and executed."""
    rows = []
    for lv in teachers:
        for opp in (o for o in (lv - 1, lv) if o in CPU_LEVELS):
            for r in sorted(set(repeats)):
                for rule in (["full rate"] if r == 1 else rules):
                    rows.append({"teacher": lv, "opponent": opp, "repeat": r, "rule": rule,
                                 **_table_cell(lv, opp, r, rule, matches, seed)})
    return rows


def _table_cell(lv: int, opp: int, repeat: int, rule: str, matches: int, seed: int) -> dict[str, int]:
    from brawlkit.training.demos import full_rate_cpu_match

    res = {"win": 0, "draw": 0, "loss": 0, "presses": 0, "dropped": 0, "executed": 0}
    if repeat == 1:
        for j in range(matches):
            slot = j % 2
            winner = full_rate_cpu_match(*((lv, opp) if slot == 0 else (opp, lv)), seed + j)[0]
            res["win" if winner == slot else "loss" if winner == 1 - slot else "draw"] += 1
        return res
    for start in range(0, matches, 20):  # even chunks: match j still has slot j % 2; bounded buffers
        ds = collect_demos(lv, opp, min(20, matches - start), seed + start, action_repeat=repeat,
                           label_rule=rule)
        out, m = ds.results(), ds.matches
        for k in ("win", "draw", "loss"):
            res[k] += out[k]
        res["presses"] += int(m["teacher_presses"].sum())
        res["dropped"] += int(m["teacher_presses_dropped"].sum())
        res["executed"] += int(m["executed_presses"].sum())
    return res


def _levels(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated CPU levels, got {text!r}") from None


def table_main(argv: list[str]) -> int:
    ap = command_parser(
        "imitate table",
        "The held-teacher table: what a perfect clone of each label rule wins -- "
        "the CPU teacher itself deciding every R ticks, against the level below and its own "
        "(docs/imitation.md).")
    ap.add_argument("--teachers", type=_levels, default=(4, 6, 8), help="teacher levels (4,6,8)")
    ap.add_argument("--repeats", type=_levels, default=(1, 2, 4), help="action repeats (1,2,4)")
    ap.add_argument("--rules", default=",".join(LABEL_RULES), help="label rules (all)")
    ap.add_argument("--matches", type=int, default=200, help="matches per cell (200)")
    ap.add_argument("--seed", type=int, default=1, help="match j is seeded seed + j (1)")
    ap.add_argument("--json", action="store_true", help="one JSON line last")
    args = ap.parse_args(argv)
    rules = [r for r in args.rules.split(",") if r]
    bad = [r for r in rules if r not in LABEL_RULES] + [lv for lv in args.teachers if lv not in CPU_LEVELS]
    if bad or args.matches < 1 or any(not 1 <= r <= 15 for r in args.repeats):
        ap.error(f"bad --rules / --teachers / --repeats / --matches: {bad or 'a value out of range'}")
    rows = teacher_table(list(args.teachers), list(args.repeats), rules, args.matches, args.seed)
    print("| teacher v opponent | R | rule | win / draw / loss | presses dropped | presses executed |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        drop = f"{r['dropped'] / r['presses']:.0%}" if r["presses"] else "-"
        ex = f"{r['executed'] / r['presses']:.0%}" if r["presses"] else "-"
        print(f"| L{r['teacher']} v L{r['opponent']} | {r['repeat']} | {r['rule']} | "
              f"{r['win']} / {r['draw']} / {r['loss']} | {drop} | {ex} |")
    if args.json:
        print(json.dumps({"rows": rows, "matches": args.matches, "seed": args.seed}))
    return 0


#: the TrainConfig fields ``imitate`` takes, with ``train``'s flags (declared once, by
#: :func:`~brawlkit.training.config.add_config_arguments`): the network it builds, the
#: action repeat and input layout it plays at, the value warm-up's reward, the evaluation
TRAIN_FIELDS = ("role", "seed", "action_repeat", "input_layout", "reward", "gamma",
                "log_std_init", "hidden", "eval_levels", "eval_episodes")


def build_parser() -> argparse.ArgumentParser:
    d = ImitationConfig()
    ap = command_parser(
        "imitate",
        "Behaviour-clone the PPO actor (and warm up its critic) from CPU matches "
        "simulated in C, saved demo sets and .bpr replays; writes an ordinary checkpoint "
        "runs/<role>/<run>/gen_0000.zip + .json for eval, export and train --init-from "
        "(docs/imitation.md). `python -m brawlkit imitate table --help`: the held-teacher table.")
    g = ap.add_argument_group("the dataset")
    g.add_argument("--teacher", dest="teachers", type=_levels, default=d.teachers,
                   help=f"CPU teacher level(s), comma-separated ({','.join(map(str, d.teachers))})")
    g.add_argument("--opponents", type=_levels, default=d.opponents,
                   help=f"CPU opponent levels ({','.join(map(str, d.opponents))})")
    g.add_argument("--matches", type=int, default=d.matches,
                   help=f"matches per teacher per opponent; 0 = only --data/--replay ({d.matches})")
    g.add_argument("--label-rule", choices=sorted(LABEL_RULES), default=d.label_rule,
                   help=f"how the CPU's every-tick output becomes one label per decision ({d.label_rule})")
    g.add_argument("--data", action="append", default=[], metavar="FILE.npz",
                   help="a saved demo set (DemoSet.save) to add; repeatable")
    g.add_argument("--replay", dest="replays", action="append", default=[], metavar="FILE.bpr:SLOT",
                   help="a recorded match, the slot's inputs as labels; repeatable")
    g.add_argument("--save-data", default=None, metavar="FILE.npz", help="save the built dataset")
    g = ap.add_argument_group("cloning")
    g.add_argument("--epochs", type=int, default=d.epochs, help=f"epochs ({d.epochs})")
    g.add_argument("--batch-size", type=int, default=d.batch_size, help=f"rows per step ({d.batch_size})")
    g.add_argument("--lr", type=float, default=d.lr, help=f"Adam learning rate ({d.lr})")
    g.add_argument("--loss", choices=LOSSES, default=d.loss, help=f"the actor's loss ({d.loss})")
    g.add_argument("--press-weight", type=float, default=d.press_weight,
                   help=f"weight of a pressed button in the loss ({d.press_weight})")
    g.add_argument("--holdout", type=float, default=d.holdout,
                   help=f"share of matches held out ({d.holdout})")
    g.add_argument("--no-value-warmup", dest="value_warmup", action="store_false",
                   help="leave the critic at its initialisation")
    g.add_argument("--dagger-rounds", type=int, default=d.dagger_rounds, help=f"({d.dagger_rounds})")
    g.add_argument("--dagger-beta", type=float, default=d.dagger_beta,
                   help=f"probability the clone's command is executed ({d.dagger_beta})")
    g.add_argument("--dagger-matches", type=int, default=d.dagger_matches,
                   help=f"matches per teacher per opponent per round ({d.dagger_matches})")
    g.add_argument("--dagger-epochs", type=int, default=d.dagger_epochs, help=f"({d.dagger_epochs})")
    g.add_argument("--c-eval-matches", type=int, default=d.c_eval_matches,
                   help=f"the clone vs CPU 1-8 in C, matches per level; 0 = skip ({d.c_eval_matches})")
    add_config_arguments(ap, TRAIN_FIELDS, "the network and the run (TrainConfig's flags, "
                         "as `train` takes them; --reward and --gamma: the value warm-up's)")
    g = ap.add_argument_group("where the checkpoint goes")
    g.add_argument("--run-dir", default=None, help="default runs/<role>/<time>-s<seed>")
    g.add_argument("--runs-root", default=DEFAULT_RUNS_ROOT)
    g.add_argument("--no-progress", action="store_true", help="no tqdm bar")
    g.add_argument("--json", action="store_true", help="the result as one JSON line last")
    g.add_argument("--ensure", action="store_true",
                   help="the clone runs start from (make train, train_role.ipynb, "
                   "colab_bootstrap.py): the shipped settings (CLONE_ARGS: "
                   f"{' '.join(CLONE_ARGS)}) under any given here, in --run-dir (default "
                   f"{CLONE_DIR}); reuses the clone there when it was built with the same "
                   "settings, else builds it (replacing a clone of other settings)")
    return ap




def _configs(args: argparse.Namespace, like: TrainConfig | None = None
             ) -> tuple[ImitationConfig, TrainConfig]:
    """The parsed flags as (imitation settings, the network's TrainConfig), checked;
    ``like``: take the network's shape and cadence (:data:`CLONE_SHAPE`) from that run's
    config, so the clone is one ``train --init-from`` accepts."""
    names = set(ImitationConfig.__dataclass_fields__)
    shape = {k: getattr(like, k) for k in CLONE_SHAPE} if like is not None else {}
    cfg = TrainConfig.from_dict({**{k: getattr(args, k) for k in TRAIN_FIELDS}, **shape})
    kw: dict[str, Any] = {k: (tuple(v) if isinstance(v, list) else v)
                          for k, v in vars(args).items() if k in names}
    icfg = ImitationConfig(**kw)
    icfg.validate(cfg)
    return icfg, cfg


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["table"]:
        return table_main(argv[1:])
    ap = build_parser()
    ensure = "--ensure" in argv  # the shipped clone's settings first, the given ones over them
    args = ap.parse_args([*CLONE_ARGS, *argv] if ensure else argv)
    try:
        icfg, cfg = _configs(args)
    except ValueError as e:
        ap.error(str(e))
    try:
        if ensure:
            run_dir = Path(args.run_dir or CLONE_DIR)
            clone = _reusable_clone(run_dir, icfg, cfg)
            if clone is not None:
                print(f"checkpoint {clone}: the clone, already built with these settings")
                return 0
        else:
            run_dir = args.run_dir
        res = imitate(icfg, cfg, run_dir, args.runs_root, progress=not args.no_progress)
    except (FileNotFoundError, FileExistsError, ValueError) as e:
        print(f"imitate: {e}", file=sys.stderr)
        return 2
    out = res.to_json()
    if args.json:
        print(json.dumps(out))
    else:
        print(f"checkpoint {res.checkpoint}: {res.rows} rows of {res.matches} matches, "
              f"{res.seconds['total']:.0f}s; held-out {_summary(out['final'])}")
        if out["c_eval"]:
            print("  in C, win rate: " + " ".join(f"{k} {v:.2f}" for k, v in out["c_eval"].items()))
        for k, v in out["eval"].items():
            print(f"  eval {k}: deterministic {v['win_rate']:.2f} sampled {v['sampled_win_rate']:.2f}")
    return 0
