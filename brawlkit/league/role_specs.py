"""The league's roles, each declared once (docs/league.md, "Roles").

A :class:`RoleSpec` is everything the toolkit knows about a training role: its name,
its opponent sampler (:mod:`brawlkit.league.roles`), the sampler's options with their
defaults and their valid ranges, when the trainer starts it over from fresh weights,
and its colour.  Everything else derives from :data:`ROLE_SPECS`:

* the records' and the registry's role check (:func:`role_names`, :func:`check_role`);
* :class:`~brawlkit.training.config.TrainConfig`'s role flags (``--main-fixed-share``
  ...: one field per option, named ``<flag_prefix>_<option>``, with its default, help
  and check), so the defaults a run uses are the declaration's and nothing else's;
* the league member runner (:meth:`RoleSpec.make_sampler` with the run's options);
* the plots' and the league page's colours, the overview's groups and reset plot,
  ``league run``'s default roles.

Adding a role is one :func:`declare_role` call (here for the shipped roles; a plug-in
or a test may declare its own before ``brawlkit.training.config`` is imported, as
tests/test_league_roles.py's toy role does: :func:`settled_roles` refuses a later one).

Import-light on purpose (stdlib only): the registry's client and the records import
this module; a sampler class is named by ``"module:Class"`` and imported only when a
trainer asks for one.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

#: how a role's weights start over: never, every K generations (an option holds K), or
#: with a probability at each registration (an option holds p)
ResetWhen = Literal["never", "every", "chance"]


@dataclass(frozen=True)
class RoleOption:
    """One option of a role's sampler: the keyword its sampler takes, its default (whose
    type is the option's type) and what a valid value is."""

    name: str
    default: float | int | str
    help: str
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()

    @property
    def type(self) -> type:
        return type(self.default)

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is not valid for this option (``None``: it is)."""
        if self.choices:
            return None if value in self.choices else f"must be one of {self.choices}"
        if isinstance(value, bool) or not isinstance(value, int | float) or \
                (self.type is int and not isinstance(value, int)) or not math.isfinite(value):
            return f"must be a finite {self.type.__name__}"
        if self.low is not None and self.high is not None and not self.low <= value <= self.high:
            return f"must be in [{_num(self.low)}, {_num(self.high)}]"
        if self.low is not None and value < self.low:
            return f"must be >= {_num(self.low)}"
        if self.high is not None and value > self.high:
            return f"must be <= {_num(self.high)}"
        return None


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


@dataclass(frozen=True)
class ResetRule:
    """When the trainer re-initialises a role's weights after registering a generation
    (a new lineage: no parent), decided by its sampler (:meth:`LeagueSampler.wants_reset`):
    back to the ``--init-from`` weights (the clone: AlphaStar's exploiters reset to the
    supervised agent), or to fresh random weights without one (``training/ppo.py``)."""

    when: ResetWhen = "never"
    #: the option holding K (``every``) or p (``chance``)
    option: str = ""


@dataclass(frozen=True)
class RoleSpec:
    """One training role, declared once (see the module docstring)."""

    name: str
    #: the opponent sampler: a ``LeagueSampler`` subclass, or ``"module:Class"``
    sampler: str | type
    #: a hex colour, the same in the plots, the overview and the league page
    colour: str
    #: TrainConfig's fields of this role are ``<flag_prefix>_<option>`` (``--main-fixed-share``)
    flag_prefix: str
    options: tuple[RoleOption, ...] = ()
    reset: ResetRule = ResetRule()
    #: options that are shares of the role's games: together at most 1, the rest is ``rest``
    shares: tuple[str, ...] = ()
    rest: str = ""

    def field_name(self, option: str) -> str:
        """The TrainConfig field (and, dashed, the flag) of ``option``."""
        return f"{self.flag_prefix}_{option}"

    def defaults(self) -> dict[str, Any]:
        return {o.name: o.default for o in self.options}

    def resolve(self, values: Mapping[str, Any], named: Callable[[str], str] | None = None
                ) -> dict[str, Any]:
        """The role's options: ``values`` over the defaults, checked; ``ValueError`` naming
        the first bad one (as ``named(option)`` calls it: a TrainConfig field, or the
        sampler's keyword) and what it must be."""
        name_of = named or (lambda o: f"{self.name}'s {o}")
        unknown = sorted(set(values) - {o.name for o in self.options})
        if unknown:
            raise ValueError(f"unknown option(s) {unknown} of role {self.name!r}; its options: "
                             f"{[o.name for o in self.options]}")
        out = {**self.defaults(), **values}
        for o in self.options:
            if isinstance(out[o.name], int) and o.type is float and not isinstance(out[o.name], bool):
                out[o.name] = float(out[o.name])
            why = o.problem(out[o.name])
            if why:
                raise ValueError(f"{name_of(o.name)} {why}, got {out[o.name]!r}")
        if self.shares and sum(out[s] for s in self.shares) > 1.0 + 1e-12:
            names = " + ".join(name_of(s) for s in self.shares)
            raise ValueError(f"{names} must be <= 1 (the rest is {self.rest}), got "
                             f"{sum(out[s] for s in self.shares):g}")
        return out

    def options_from(self, cfg: Any) -> dict[str, Any]:
        """This role's options as a run's config (a TrainConfig) sets them."""
        return {o.name: getattr(cfg, self.field_name(o.name)) for o in self.options}

    def sampler_class(self) -> type:
        """The sampler class (imported on first use: this module stays stdlib-only)."""
        if isinstance(self.sampler, type):
            return self.sampler
        module, _, cls = self.sampler.partition(":")
        return getattr(importlib.import_module(module), cls)  # type: ignore[no-any-return]

    def make_sampler(self, league_dir: Any, env_layout: int, action_repeat: int,
                     options: Mapping[str, Any], **common: Any) -> Any:
        """The role's sampler over ``league_dir`` with ``options`` (checked here)."""
        return self.sampler_class()(league_dir, env_layout, action_repeat, spec=self,
                                    **common, **self.resolve(options))


#: every declared role, in declaration order (the order of flags, legends and ``league run``)
ROLE_SPECS: dict[str, RoleSpec] = {}
#: set once a module has derived something from the declarations (:func:`settled_roles`)
_settled = False


def declare_role(spec: RoleSpec) -> RoleSpec:
    """Add a role.  Its options become TrainConfig fields, so it must be declared before
    ``brawlkit.training.config`` is imported; a clash of names is refused."""
    if _settled:
        raise RuntimeError(f"declare role {spec.name!r} before brawlkit.training.config (or a "
                           "plot or page module) is imported: they derive their fields and "
                           "colours from the declarations when they load")
    if not spec.name.replace("_", "").isalpha() or not spec.name.islower():
        raise ValueError(f"role name {spec.name!r} must be lower-case letters and '_' (it is "
                         "the first part of a member id, <role>-<run>-gNNNN)")
    if spec.name in ROLE_SPECS or spec.name in ("baseline", "cpu", "human"):
        raise ValueError(f"role {spec.name!r} is already declared")
    fields = {f for s in ROLE_SPECS.values() for f in map(s.field_name, (o.name for o in s.options))}
    clash = sorted(fields & {spec.field_name(o.name) for o in spec.options})
    if clash:
        raise ValueError(f"role {spec.name!r}: option field(s) {clash} are another role's")
    if spec.reset.when != "never" and spec.reset.option not in {o.name for o in spec.options}:
        raise ValueError(f"role {spec.name!r}: its reset rule names option "
                         f"{spec.reset.option!r}, which it does not declare")
    spec.resolve({})  # the defaults themselves must be valid
    ROLE_SPECS[spec.name] = spec
    return spec


def settled_roles() -> tuple[RoleSpec, ...]:
    """The declarations, for a module that derives something from them when it loads
    (TrainConfig's fields, the colour maps); later declarations are refused, as they
    would have no flags and no colour."""
    global _settled
    _settled = True
    return tuple(ROLE_SPECS.values())


def role_names() -> tuple[str, ...]:
    """The declared roles' names, in declaration order."""
    return tuple(ROLE_SPECS)


def check_role(role: Any) -> str:
    """``role`` if it is a declared role; ``ValueError`` naming the roles otherwise."""
    if role not in ROLE_SPECS:
        raise ValueError(f"unknown role {str(role)[:64]!r} (one of {', '.join(ROLE_SPECS)})")
    return str(role)


# ------------------------------------------------------------------ the shipped roles
# The defaults are the benchmark's chosen mixture (configs/learn/chosen.toml; README,
# League): half of Main's games against the fixed ladder, PFSP over the learned members
# of a recent window.


def _share(name: str, default: float, help: str) -> RoleOption:
    """An option that is a share or a probability: a float in [0, 1]."""
    return RoleOption(name, default, help, low=0.0, high=1.0)


declare_role(RoleSpec(
    name="main", sampler="brawlkit.league.roles:MainSampler", colour="#1f77b4",
    flag_prefix="main", shares=("fixed_share", "pfsp_share", "exploiter_share"),
    rest="self-play",
    options=(
        _share("fixed_share", 0.5, "share of games against the fixed opponents (the CPU "
               "ladder and the baseline), drawn by the p(1-p) ladder curriculum "
               "(curriculum_k, curriculum_floor)"),
        _share("pfsp_share", 0.2, "share of games drawn by PFSP-squared over the learned "
               "members (main_pfsp_pool)"),
        RoleOption("pfsp_pool", "learned", "the PFSP pool: 'learned' = trained members only; "
                   "'all' = the fixed opponents too (each weighed as one member)",
                   choices=("learned", "all")),
        RoleOption("pfsp_window", 10, "PFSP over each role's newest N members only (0 = all)",
                   low=0),
        _share("exploiter_share", 0.15, "share against main exploiters it struggles with; "
               "the rest is self-play against its newest weights"),
        _share("struggle", 0.3, "a main exploiter it beats less often than this is one it "
               "struggles with"),
        RoleOption("verify_matches", 0, "matches its deterministic policy (what ships) plays "
                   "against each of the newest main_pfsp_window main exploiters after every "
                   "generation; > 0: the struggle test reads that record, not its own "
                   "training games (0: its own games only)", low=0, high=1000),
        _share("selfplay_floor", 0.3, "below this win rate against its newest weights, "
               "self-play falls back to PFSP-variance over its history"),
        _share("patch_share", 0.0, "while it struggles with a main exploiter, this share of "
               "its games goes to the exploiters it struggles with first, the rest following "
               "the mixture above (0 = only exploiter_share); with verify_matches > 0 the "
               "struggle is its deterministic policy's"),
        RoleOption("patch_pool", "struggling", "the exploiters patch_share goes to: "
                   "'struggling' = every main exploiter it struggles with; 'newest' = the "
                   "newest main exploiter alone, until its deterministic policy wins every "
                   "verification match against it (league harden's focused rounds)",
                   choices=("struggling", "newest")),
    )))

declare_role(RoleSpec(
    name="main_exploiter", sampler="brawlkit.league.roles:MainExploiterSampler",
    colour="#d62728", flag_prefix="exploiter", reset=ResetRule("every", "reset_every"),
    options=(
        _share("threshold", 0.2, "below this win rate against Main's newest it trains on "
               "Main's history (PFSP-variance)"),
        RoleOption("reset_every", 4, "fresh weights every K generations", low=1),
        RoleOption("target", "newest", "the Main it exploits: newest (Main's newest "
                   "checkpoint, moving as Main registers) or held (Main's newest when its "
                   "lineage starts, held until its next reset: a best response to one frozen "
                   "Main, as bench exploit trains)", choices=("newest", "held")),
    )))

declare_role(RoleSpec(
    name="league_exploiter", sampler="brawlkit.league.roles:LeagueExploiterSampler",
    colour="#2ca02c", flag_prefix="league_exploiter", reset=ResetRule("chance", "reset_p"),
    options=(
        _share("reset_p", 0.25, "probability of fresh weights at each registration"),
        _share("fixed_share", 0.1, "share of games against the fixed ladder before PFSP "
               "over the pool"),
    )))
