"""The training configuration, declared once.

:class:`TrainConfig` is the single declaration of every setting a run depends
on (CleanRL's ``Args`` is the model): ``python -m brawlkit train`` derives one
``--flag`` per field from it (:func:`add_config_arguments`), the
``train_role`` notebook passes its parameters through :meth:`TrainConfig.from_dict`,
and every checkpoint's metadata records :meth:`TrainConfig.to_dict`.  Adding a
field here adds the flag, the notebook parameter and the metadata entry.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from brawlkit.env.rewards import REWARD_NAMES
from brawlkit.env.vec_kinds import VEC_KINDS
from brawlkit.league.records import BASELINE_ID
from brawlkit.league.role_specs import ROLE_SPECS, role_names, settled_roles
from brawlkit.wire.constants import check_action_repeat
from brawlkit.wire.cpu_level import CPU_LEVELS, CpuLevel

#: the widest hidden layer a run may ask for (a .bpw of 2 x 1024 is ~4.5 MB raw)
MAX_HIDDEN = 1024
#: where runs go unless told: ``<runs_root>/<role>/<run>/``
DEFAULT_RUNS_ROOT = "runs"
#: how ``--kl-coef`` decays (training/kl.py)
KL_DECAYS = ("linear", "exponential")


def _opt(default: Any, help: str, **cli: Any) -> Any:
    """A config field: its default, the help text of its CLI flag, extra argparse options."""
    if isinstance(default, tuple):
        return field(default_factory=lambda: default, metadata={"help": help, **cli})
    return field(default=default, metadata={"help": help, **cli})


#: the widest training width: tests/test_train.py trains a generation at it (its arenas
#: and the evaluation's on one server, never "server full"), bench train measures up to it
MAX_N_ENVS = 256


def _with_role_options(after: str) -> Callable[[type], type]:
    """Add one field per declared role option (``<flag_prefix>_<option>``, e.g.
    ``main_fixed_share``) after the field ``after``, before :func:`dataclass` reads the
    class: the declaration (:data:`~brawlkit.league.role_specs.ROLE_SPECS`) gives its
    type, default, help and choices, so a role's flags are declared in one place."""

    def add(cls: type) -> type:
        fields: dict[str, Any] = {}
        for name, tp in cls.__dict__["__annotations__"].items():
            fields[name] = tp
            if name != after:
                continue
            for spec in settled_roles():
                for o in spec.options:
                    name_ = spec.field_name(o.name)
                    fields[name_] = o.type
                    extra = {"choices": o.choices} if o.choices else {}
                    setattr(cls, name_, _opt(o.default, f"{spec.name}: {o.help}", **extra))
        cls.__annotations__ = fields
        return cls
    return add


@dataclass
@_with_role_options(after="curriculum_floor")
class TrainConfig:
    """Everything a training run depends on; stored in every checkpoint's metadata."""

    # --- the run
    role: str = _opt("main", "league role: with --league-dir its opponents come from the role's "
                     "PFSP sampler over the pool; without, every role plays the CPU "
                     "curriculum", choices=role_names())
    generations: int = _opt(3, "generations to train; each ends with a checkpoint and an evaluation")
    steps_per_generation: int = _opt(100_000, "env steps per generation")
    n_envs: int = _opt(64, "parallel envs, each an arena of a shared game server (64: the fast "
                       "trainer's width, stepped in one C call; README, Benchmarks)")
    servers: int = _opt(0, "game server processes the envs' arenas are spread over (inproc); 0 = "
                        "automatic: one per core the trainer leaves free, at most n_envs")
    seed: int = _opt(0, "seeds PPO, the envs' matches and the curriculum")
    vec: str = _opt("inproc", "inproc: all envs in this process, all commands sent before any "
                    "snapshot is read (measured faster on 2 cores); subproc: SB3 SubprocVecEnv",
                    choices=VEC_KINDS)
    ray: str | None = _opt(None, "run the envs in Ray actors (docs/distributed.md): --ray alone or "
                           "'local' = a local Ray instance sized to this machine; HOST:PORT or "
                           "'auto' = a running cluster (pip install -e .[ray])",
                           nargs="?", const="local", metavar="ADDRESS")
    ray_workers: int = _opt(2, "with --ray: env workers (Ray actors, each a game server with its "
                            "share of the n_envs arenas)")
    # --- env
    action_repeat: int = _opt(4, "ticks each action covers; recorded in the checkpoint and its "
                              ".bpw, so eval and brawlpit_bot play at the same cadence")
    input_layout: int = _opt(2, "policy input layout (docs/observation.md): 1 = the 31-value "
                             "observation; 2 = it plus the player's previous command, fighter "
                             "state and both action states, so a deterministic policy can "
                             "press, release and press again; 3 = layout 2 plus the match "
                             "clock, for a policy that knows how long a lead must hold",
                             choices=(1, 2, 3))
    reward: str = _opt("tiered", "reward preset (" + " | ".join(REWARD_NAMES) + "), optionally "
                       "with overrides, e.g. 'tiered:win=5,idle_per_s=0.05' (docs/rewards.md)")
    max_episode_steps: int | None = _opt(None, "truncate training episodes after N steps "
                                         "(tiny test runs only)")
    hidden: tuple[int, ...] = _opt((64, 64), "hidden layer sizes of the actor and the critic "
                                   "(tanh); the .bpw and brawlpit_bot's C forward take any, its "
                                   "cost is `bench native --checkpoint`'s")
    pipeline: bool = _opt(True, "the rollout overlaps the server's work with the trainer's: "
                          "halves of the arenas stepped while the trainer decides the other, "
                          "or each step's bookkeeping while the server steps the next, "
                          "whichever measures faster (training/rollout.py); false: SB3's loop")
    async_update: bool = _opt(True, "PPO's update runs in its own process while the next "
                              "rollout is collected, so both cores work: one rollout of policy "
                              "lag, each update decoupled (its clip centred on the weights it "
                              "starts from, training/update_worker.py); false: SB3's order, "
                              "the update after the rollout")
    # --- PPO (stable-baselines3 names)
    learning_rate: float = _opt(3e-4, "Adam learning rate", aliases=("--lr",))
    n_steps: int = _opt(256, "rollout length per env (shrunk so a generation holds a rollout)")
    batch_size: int = _opt(2048, "minibatch size (the update's fixed cost per minibatch is "
                           "~2 ms whatever its size: large ones use the machine)")
    n_epochs: int = _opt(4, "PPO epochs per rollout")
    gamma: float = _opt(0.99, "discount factor")
    gae_lambda: float = _opt(0.95, "GAE lambda")
    clip_range: float = _opt(0.2, "PPO clip range")
    ent_coef: float = _opt(0.003, "entropy coefficient. Keep it small but positive: with SB3's "
                           "0.0 nothing resists the Gaussian collapsing to zero variance, and "
                           "once it has, the gradient that would pull it back vanishes with it")
    log_std_init: float = _opt(-0.5, "initial log std of the Gaussian policy (-0.5 = std 0.61; "
                               "SB3's 0 = std 1). Buttons press when their value > 0, so with std "
                               "1 play is mostly noise and the deterministic policy (what ships) "
                               "drifts from the sampled one; measured: -0.5 keeps them within "
                               "0.08 of each other once the policy wins (README, Training)")
    # --- a start from a checkpoint, and the KL term toward it (docs/imitation.md)
    init_from: str | None = _opt(None, "a new run's generation 0 starts from this checkpoint's "
                                 "weights (policy and value), recorded as its parent, e.g. the "
                                 "gen_0000.zip `python -m brawlkit imitate` writes; its action "
                                 "repeat, input layout and network must be this run's",
                                 metavar="CKPT")
    kl_coef: float = _opt(0.0, "weight of KL(policy || the --init-from policy, frozen) added to "
                          "PPO's loss on every minibatch; 0 = off (plain SB3 PPO)")
    kl_decay: str = _opt("linear", "how --kl-coef decays over the run's env steps: linear (to 0 at "
                         "--kl-decay-steps) or exponential (halving every --kl-decay-steps)",
                         choices=KL_DECAYS)
    kl_decay_steps: int = _opt(0, "env steps of the --kl-coef decay; 0 = no decay")
    # --- opponents: the CPU curriculum, or one fixed opponent
    opponent: str | None = _opt(None, "train against this one opponent alone instead of the CPU "
                                "curriculum: cpu:L, baseline, or the path of a policy .bpw "
                                "(`export`), played as the league's frozen members are (its mean; "
                                "a sampled blob, `export --sampled`, with its noise; a mixture, "
                                "`export A.zip B.zip`, one component drawn per match), at its own "
                                "action repeat, which must be this run's. What "
                                "`bench exploit` trains its exploiters with; not with "
                                "--league-dir; baseline or a .bpw need --vec inproc, no --ray",
                                metavar="SPEC")
    curriculum_k: int = _opt(10, "level L+1 unlocks after winning >= half of the last K games "
                             "at level L; also the window of the sampling win rate")
    curriculum_floor: float = _opt(0.05, "minimum sampling weight of an unlocked level")
    # --- opponents in a league (--league-dir; docs/league.md): each role's sampler options
    # come here, after curriculum_floor, from the role's one declaration
    # (brawlkit/league/role_specs.py: --main-fixed-share ..., its defaults and checks)
    payoff_decay: float = _opt(0.99, "decay of the payoff record per game against an opponent "
                               "(1 = plain counts)")
    # --- evaluation at each generation's end (the deterministic policy: what ships)
    eval_levels: tuple[int, ...] = _opt((1, 3, 5), "CPU levels evaluated at each generation's end")
    eval_episodes: int = _opt(10, "matches per evaluated level (best.json ranks generations by "
                              "the 95 % lower bound of their wins over all of them)")

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first bad setting and what it must be."""
        if self.role not in ROLE_SPECS:
            raise ValueError(f"role must be one of {role_names()}, got {self.role!r}")
        if self.vec not in VEC_KINDS:
            raise ValueError(f"vec must be one of {VEC_KINDS}, got {self.vec!r}")
        for name in ("generations", "steps_per_generation", "n_envs", "n_steps", "batch_size",
                     "n_epochs", "action_repeat", "curriculum_k"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 <= self.payoff_decay <= 1.0:
            raise ValueError(f"payoff_decay must be in [0, 1], got {self.payoff_decay}")
        for spec in ROLE_SPECS.values():  # every role's options, as its declaration checks them
            spec.resolve(spec.options_from(self), named=spec.field_name)
        if self.n_envs > MAX_N_ENVS:
            raise ValueError(f"n_envs must be <= {MAX_N_ENVS} (the widest width tested; "
                             f"docs/cli.md), got {self.n_envs}")
        if self.ray_workers < 1 or (self.ray is not None and self.ray_workers > self.n_envs):
            raise ValueError(f"ray_workers must be in 1..n_envs ({self.n_envs}), got "
                             f"{self.ray_workers}: every Ray env worker plays at least one env")
        if self.servers < 0:
            raise ValueError(f"servers must be >= 0 (0 = automatic), got {self.servers}")
        if self.ent_coef < 0:
            raise ValueError(f"ent_coef must be >= 0, got {self.ent_coef}")
        if not 0 < self.gamma <= 1 or not 0 <= self.gae_lambda <= 1:
            raise ValueError("gamma must be in (0, 1] and gae_lambda in [0, 1]")
        check_action_repeat(self.action_repeat)
        if not self.hidden or any(h < 1 or h > MAX_HIDDEN for h in self.hidden):
            raise ValueError(f"hidden must be 1 or more layer sizes in 1..{MAX_HIDDEN}, got "
                             f"{self.hidden}")
        self._validate_init()
        self._validate_opponent()
        if any(lv not in CPU_LEVELS for lv in self.eval_levels):
            raise ValueError(f"eval_levels must be CPU levels {CPU_LEVELS[0]}..{CPU_LEVELS[-1]}, "
                             f"got {self.eval_levels}")

    def _validate_opponent(self) -> None:
        """The --opponent spec's form (a .bpw file itself is read when a run starts:
        brawlkit/league/opponents.py ``fixed_opponent``)."""
        if self.opponent is None:
            return
        if CpuLevel.is_spec(self.opponent):
            CpuLevel.parse(self.opponent)  # ValueError naming the levels
            return
        if self.opponent != BASELINE_ID and not self.opponent.endswith(".bpw"):
            raise ValueError(f"opponent must be cpu:L, {BASELINE_ID} or the path of a policy "
                             f".bpw, got {self.opponent!r}")
        if self.vec != "inproc" or self.ray is not None:
            raise ValueError(f"opponent {self.opponent!r} plays in the trainer's process: it "
                             "needs --vec inproc and no --ray (a cpu:L opponent plays anywhere)")

    def _validate_init(self) -> None:
        """The --init-from / KL settings (the checkpoint itself is checked when a run
        starts: training/warmstart.py)."""
        if not self.kl_coef >= 0:
            raise ValueError(f"kl_coef must be >= 0, got {self.kl_coef}")
        if self.kl_coef > 0 and not self.init_from:
            raise ValueError("kl_coef > 0 needs init_from (--init-from CKPT): the KL term pulls "
                             "toward that checkpoint's policy")
        if self.kl_decay not in KL_DECAYS:
            raise ValueError(f"kl_decay must be one of {KL_DECAYS}, got {self.kl_decay!r}")
        if self.kl_decay_steps < 0:
            raise ValueError(f"kl_decay_steps must be >= 0 (0 = no decay), got {self.kl_decay_steps}")

    def ppo_n_steps(self) -> int:
        """Rollout length per env: the configured value, shrunk so one generation
        holds at least one rollout (tiny test runs)."""
        return max(8, min(self.n_steps, self.steps_per_generation // self.n_envs))

    def ppo_batch_size(self) -> int:
        return max(8, min(self.batch_size, self.ppo_n_steps() * self.n_envs))

    # ------------------------------------------------------------ conversions
    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (tuples as lists): what the run metadata records."""
        return {k: list(v) if isinstance(v, tuple) else v
                for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """A validated config from ``data`` (missing keys take the defaults).

        Unknown keys are an error that lists the known ones, so a typo in a
        notebook parameter or an old metadata file never passes silently.
        """
        names = config_fields()
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise ValueError(f"unknown TrainConfig setting(s) {unknown}; known: {sorted(names)}")
        values = {k: _coerce(names[k], v) for k, v in data.items()}
        cfg = cls(**values)
        cfg.validate()
        return cfg


#: the sizes a start from the clone uses where a person waits for it — the train_role
#: notebook and colab_bootstrap.py (``--init-from`` the clone, imitation.ensure_clone) —
#: over TrainConfig's defaults (which are already the fast trainer's width: 64 arenas of
#: one server, rollout 256, minibatch 2,048, 4 epochs): the chosen recipe's KL toward the
#: clone (configs/learn/chosen_wide.toml) and a generation sized to about a minute on 2
#: cores (measured: 1,000,000 env steps trained in 62 s and evaluated in 1.5 s, 70 s in
#: all, on 2 cores shared with other jobs, load ~8; README, Notebooks)
QUICK_START: dict[str, Any] = {
    "generations": 1, "steps_per_generation": 1_000_000, "kl_coef": 0.02, "kl_decay_steps": 2_000_000,
}


def quick_start_flags() -> list[str]:
    """:data:`QUICK_START` as ``train`` flags (colab_bootstrap.py's default)."""
    return [a for k, v in QUICK_START.items() for a in (f"--{k.replace('_', '-')}", str(v))]


@dataclass
class RunOptions:
    """Where a run lives and how it reports: the options of ``train`` that are not
    hyperparameters, so they stay out of :class:`TrainConfig` and of the checkpoint's
    ``config`` (a resumed run may move, report differently or join a registry without
    changing what it learns).  ``python -m brawlkit train`` maps its "the run" flags
    here (docs/cli.md)."""

    run_dir: str | Path | None = None
    """the run directory; default a fresh ``<runs_root>/<role>/<time>-s<seed>``"""
    runs_root: str | Path = DEFAULT_RUNS_ROOT
    """parent of the role directories"""
    resume: bool = False
    """continue the role's run with the newest checkpoint (or ``run_dir``'s)"""
    resume_if_any: bool = False
    """resume when there is something to resume (locally, or with ``registry`` there),
    else start a new run: what a script that runs the same command everywhere wants"""
    progress: bool = True
    """a progress bar (tqdm: a widget in Jupyter, text in a terminal)"""
    league_dir: str | Path | None = None
    """train as a member of this league (docs/league.md)"""
    registry: str | None = None
    """a checkpoint registry's URL the league directory is kept in step with"""
    location: str | None = None
    """this machine's name in the registry (default: the host name)"""
    time_budget_s: float | None = None
    """stop after the generation past which another would overrun this budget"""
    chosen: frozenset[str] | None = None
    """the :class:`TrainConfig` fields this call sets (the flags given, the notebook's
    parameters): a resumed run keeps its own value of every other field (see
    :func:`resumed_config`); None: the fields that differ from their defaults"""

    def validate(self) -> None:
        """``ValueError`` naming the first bad option and what it must be."""
        if self.resume and self.resume_if_any:
            raise ValueError("resume and resume_if_any exclude each other")
        if self.registry is not None and self.league_dir is None:
            raise ValueError("--registry needs --league-dir: the local pool the registry is "
                             "mirrored into (docs/registry.md)")
        if self.time_budget_s is not None and not self.time_budget_s > 0:
            raise ValueError(f"time_budget_s must be > 0, got {self.time_budget_s}")


def config_fields() -> dict[str, Any]:
    """Field name -> resolved type, in declaration order."""
    hints = typing.get_type_hints(TrainConfig)
    return {f.name: hints[f.name] for f in dataclasses.fields(TrainConfig)}


def _coerce(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    if typing.get_origin(tp) is tuple:
        if isinstance(value, str):
            value = [x for x in value.split(",") if x.strip()]
        return tuple(int(x) for x in value)
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return _coerce(inner[0], value)
    if tp is float and isinstance(value, int):
        return float(value)
    return value


def _boolean(text: str) -> bool:
    """A yes/no flag value: true/false, yes/no, on/off, 1/0 (argparse's ``bool`` would
    take "false" for True)."""
    t = text.strip().lower()
    if t in ("true", "yes", "on", "1"):
        return True
    if t in ("false", "no", "off", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _parse(tp: Any) -> Any:
    """The argparse ``type`` callable of a field type."""
    if typing.get_origin(tp) is tuple:
        return lambda s: tuple(int(x) for x in s.split(",") if x.strip())
    if tp is bool:
        return _boolean
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)][0]

        def opt(s: str) -> Any:
            return None if s.lower() in ("none", "") else inner(s)
        return opt
    return tp


def add_config_arguments(parser: argparse.ArgumentParser,
                         fields: Sequence[str] | None = None,
                         title: str = "training configuration (TrainConfig; docs/cli.md)") -> None:
    """One ``--field-name`` per :class:`TrainConfig` field (only ``fields`` when given:
    ``imitate`` takes the network's and the run's), with its default and help: every
    command that sets a TrainConfig field declares its flag here, never by hand."""
    group = parser.add_argument_group(title)
    defaults = TrainConfig()
    declared = [f for f in dataclasses.fields(TrainConfig) if fields is None or f.name in fields]
    unknown = set(fields or ()) - {f.name for f in declared}
    if unknown:
        raise ValueError(f"not TrainConfig fields: {sorted(unknown)}")
    for f in declared:
        tp = config_fields()[f.name]
        meta = dict(f.metadata)
        flags = [f"--{f.name.replace('_', '-')}", *meta.pop("aliases", ())]
        default = getattr(defaults, f.name)
        shown = ",".join(map(str, default)) if isinstance(default, tuple) else default
        group.add_argument(*flags, dest=f.name, type=_parse(tp), default=default,
                           help=f"{meta.pop('help')} (default: {shown})".replace("%", "%%"), **meta)


def config_from_args(args: argparse.Namespace, fields: Sequence[str] | None = None) -> TrainConfig:
    """The :class:`TrainConfig` of parsed arguments (validated); with ``fields``, only
    those come from ``args`` (what :func:`add_config_arguments` declared), the rest are
    the defaults."""
    names = config_fields() if fields is None else fields
    return TrainConfig.from_dict({name: getattr(args, name) for name in names})


def parse_config_args(ap: argparse.ArgumentParser, argv: list[str] | None
                      ) -> tuple[argparse.Namespace, frozenset[str]]:
    """(``ap``'s arguments, the :class:`TrainConfig` fields whose flag ``argv`` gives):
    a resume keeps the run's value of every field not given (``RunOptions.chosen``),
    so "given" means on the command line, even at the default's value."""
    unset = object()
    names = config_fields()
    ns = argparse.Namespace(**{name: unset for name in names})  # argparse leaves these
    args = ap.parse_args(argv, namespace=ns)
    defaults = TrainConfig()
    chosen = frozenset(n for n in names if getattr(args, n) is not unset)
    for n in names:
        if n not in chosen:
            setattr(args, n, getattr(defaults, n))
    return args, chosen


#: the fields a resumed run takes from the call, never from the run: how many generations
#: to train now, and the machine's resources to train them with (another machine resumes)
RESUME_OWN_FIELDS = frozenset({"generations", "n_envs", "servers", "vec", "ray", "ray_workers"})
#: the fields a resume cannot change: the checkpoint's network plays at this cadence and
#: input layout, with these layers
RESUME_FIXED_FIELDS = frozenset({"action_repeat", "input_layout", "hidden"})


def resumed_config(cfg: TrainConfig, run_config: dict[str, Any],
                   chosen: frozenset[str] | None) -> tuple[TrainConfig, list[str]]:
    """The config a resumed run trains with, and what this call changes of the run's own.

    Every field is the run's (``run_config``: the resumed generation's metadata
    ``config``) unless ``chosen`` names it (a flag or notebook parameter given now; None:
    the fields of ``cfg`` that differ from the defaults), or it is one of
    :data:`RESUME_OWN_FIELDS`.  Resuming Main from a notebook with other defaults than
    ``make train``'s once changed its ``steps_per_generation`` and ``kl_coef``
    silently; now only what the caller names changes, and each change is listed
    (``"kl_coef 0.1 -> 0.0"``).  A setting the run recorded that TrainConfig no
    longer has is listed as ignored.
    """
    names = config_fields()
    if chosen is None:
        defaults = TrainConfig()
        chosen = frozenset(n for n in names if getattr(cfg, n) != getattr(defaults, n))
    merged = cfg.to_dict()
    changes: list[str] = []
    for name, value in run_config.items():
        if name not in names:
            changes.append(f"{name} (no longer a setting: ignored)")
            continue
        if name in RESUME_OWN_FIELDS:
            continue
        theirs, ours = _coerce(names[name], value), getattr(cfg, name)
        if name not in chosen:
            merged[name] = theirs
        elif theirs != ours and name in RESUME_FIXED_FIELDS:
            raise ValueError(f"--{name.replace('_', '-')} {_shown(ours)}: a resumed run keeps "
                             f"its {name} ({_shown(theirs)}), which its checkpoint was made "
                             "for; drop the flag, or start a new run (without --resume)")
        elif theirs != ours:
            changes.append(f"{name} {_shown(theirs)} -> {_shown(ours)}")
    return TrainConfig.from_dict(merged), changes


def _shown(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


def markdown_table() -> str:
    """The flag table of docs/cli.md, generated from the fields (a test keeps the doc equal
    to it: ``python -c "from brawlkit.training.config import markdown_table as t; print(t())"``)."""
    rows = ["| flag | default | what it sets |", "|---|---|---|"]
    defaults = TrainConfig()
    for f in dataclasses.fields(TrainConfig):
        v = getattr(defaults, f.name)
        shown = ",".join(map(str, v)) if isinstance(v, tuple) else v
        text = str(f.metadata["help"]).replace("|", "\\|")
        aliases = "".join(f", `{a}`" for a in f.metadata.get("aliases", ()))
        rows.append(f"| `--{f.name.replace('_', '-')}`{aliases} | `{shown}` | {text} |")
    return "\n".join(rows)
