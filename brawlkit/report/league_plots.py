"""Plots of a league, from its directory alone (the pool and the match log).

Static matplotlib, so papermill runs the ``elo_drift`` notebook headless; in a live
kernel the notebook wraps the same functions in ipywidgets (``brawlkit.report.interactive``).
Every function takes a :class:`LeagueView` (what was read once) and an optional
``ax`` plus filters (roles, members, a match-index window, a generation range); the
title and legend name what the filters left, so a redrawn plot says what it shows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from brawlkit.league.directory import LeagueDir
from brawlkit.league.ratings import (
    ANCHOR,
    FEW_GAMES,
    BTResult,
    EloResult,
    bradley_terry,
    cycles,
    elo,
    payoff_matrix,
)
from brawlkit.league.records import MatchRecord, Member
from brawlkit.league.role_specs import ROLE_SPECS, settled_roles
from brawlkit.registry.league_page import CPU_COLOURS
from brawlkit.report.axes import LEGEND_SIZE, TICK_SIZE, empty, generation_axis

#: one colour per role: a trained role's from its declaration (brawlkit/league/role_specs.py,
#: in declaration order), the permanent members in greys (each CPU level its own shade:
#: the league page's :data:`~brawlkit.registry.league_page.CPU_COLOURS`)
ROLE_COLOURS = {**{s.name: s.colour for s in settled_roles()},
                "baseline": "black", "cpu": "tab:gray"}


def member_colour(member_id: str, role: str) -> str:
    """A member's colour on every plot: its CPU level's, else its role's."""
    return CPU_COLOURS.get(member_id) or ROLE_COLOURS.get(role, "tab:purple")


@dataclass
class LeagueView:
    """A league read once: members, matches, Elo replayed, Bradley–Terry fitted — only
    the rated games (two fixed players), both scales anchored at cpu:1 = 1000 once the
    fixed ladder has played (docs/ratings.md), as ``elo`` and the league page show them."""

    members: list[Member]
    matches: list[MatchRecord]
    elo: EloResult
    bt: BTResult

    @classmethod
    def load(cls, league_dir: str | Path, bootstrap: int = 100, seed: int = 0) -> LeagueView:
        pool = LeagueDir(league_dir, create=False)
        members, matches = pool.members(), pool.matches()
        ids = [m.id for m in members]
        return cls(members, matches, elo(matches, ids, anchor=ANCHOR),
                   bradley_terry(matches, ids, bootstrap=bootstrap, seed=seed, anchor=ANCHOR))

    def label(self, member_id: str) -> str:
        """The member's id, with ``(few games)`` when its rating rests on fewer than
        :data:`~brawlkit.league.ratings.FEW_GAMES` rated games."""
        few = self.elo.games.get(member_id, 0) < FEW_GAMES
        return f"{member_id} (few games)" if few else member_id

    def role(self, member_id: str) -> str:
        return next((m.role for m in self.members if m.id == member_id), "?")

    def select(self, roles: Sequence[str] | None = None,
               members: Sequence[str] | None = None,
               generations: tuple[int, int] | None = None) -> list[str]:
        """Member ids (with at least one game) filtered by role, id and/or an inclusive
        generation range (the permanent members, generation-less, always pass it).
        Members named by id are shown whatever their role: picking one in a notebook's
        control should not come up empty because the role filter excludes it."""
        out = []
        for m in self.members:
            if self.elo.games.get(m.id, 0) == 0:
                continue
            if roles and not members and m.role not in roles:
                continue
            if members and m.id not in members:
                continue
            if generations and not m.permanent and not (
                    generations[0] <= m.generation <= generations[1]):
                continue
            out.append(m.id)
        return out

    def max_generation(self) -> int:
        """The newest generation of any trained member (0 for none)."""
        return max((m.generation for m in self.members if not m.permanent), default=0)

    def registered_at(self, member_id: str) -> int:
        """Index of the member's first match (where its line starts)."""
        idx, _, _ = self.elo.series(member_id)
        return int(idx[0]) if len(idx) else 0


def _ax(ax: Any, size: tuple[float, float] = (10, 4)) -> Any:
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=size)
    ax.tick_params(labelsize=TICK_SIZE)
    return ax


def describe(roles: Sequence[str] | None = None, members: Sequence[str] | None = None,
             generations: tuple[int, int] | None = None) -> str:
    """The filters as a title suffix (`` · main, cpu · generations 2–5``), empty for none."""
    parts = []
    if members:
        parts.append(", ".join(members) if len(members) <= 3 else f"{len(members)} members")
    elif roles:
        parts.append(", ".join(roles))
    if generations:
        parts.append(f"generations {generations[0]}–{generations[1]}")
    return "".join(f" · {p}" for p in parts)


def _role_legend(ax: Any, shown_roles: Sequence[str], **kw: Any) -> None:
    """A legend of exactly the roles drawn (in :data:`ROLE_COLOURS` order)."""
    for role in ROLE_COLOURS:
        if role in shown_roles and role != "cpu":  # the CPU levels: one entry each
            ax.plot([], [], color=ROLE_COLOURS[role], label=role)


def plot_elo_drift(view: LeagueView, ax: Any = None, roles: Sequence[str] | None = None,
                   members: Sequence[str] | None = None,
                   window: tuple[int, int] | None = None,
                   generations: tuple[int, int] | None = None) -> Any:
    """Every selected member's live Elo after each rated match it played, from its first
    one, coloured by role (each CPU level its own shade).  A member that stopped
    training keeps a line: its rating still moves whenever it is drawn as an opponent
    (the marker shows where it last played). With a few members chosen by id, each gets
    its own legend entry; otherwise the legend lists the roles and CPU levels drawn."""
    ax = _ax(ax)
    lo, hi = window or (0, len(view.matches))
    ids = view.select(roles, members, generations)
    per_member = bool(members) and len(ids) <= 8
    shown: list[str] = []
    for mid in ids:
        idx, _, r = view.elo.series(mid)
        keep = (idx >= lo) & (idx <= hi)
        if not keep.any():
            continue
        role = view.role(mid)
        colour = member_colour(mid, role)
        (line,) = ax.step(idx[keep], r[keep], where="post", lw=1.2 if per_member else 1.0,
                          alpha=0.8, color=None if per_member else colour,
                          label=mid if per_member else None)
        ax.plot(idx[keep][-1:], r[keep][-1:], "o", color=line.get_color(), ms=3)
        shown.append(mid if mid in CPU_COLOURS else role)
    if not per_member:
        _role_legend(ax, shown)
        for level, colour in CPU_COLOURS.items():
            if level in shown:
                ax.plot([], [], color=colour, label=level)
    ax.axhline(view.elo.initial, color="grey", ls=":", lw=1)
    ax.set_xlabel("match (log order)")
    ax.set_ylabel("Elo")
    ax.set_title(f"live Elo over matches {lo}–{hi} of {len(view.matches)} (K {view.elo.k:g}; "
                 "rated games)"
                 f"{describe(roles, members, generations)}", fontsize=10)
    if shown:
        ax.legend(fontsize=LEGEND_SIZE, ncol=5)
    else:
        empty(ax, "no member's games in this selection")
    return ax


def plot_rating_by_generation(view: LeagueView, ax: Any = None,
                              roles: Sequence[str] | None = None,
                              generations: tuple[int, int] | None = None) -> Any:
    """Each trained role's generations at their current strength: Bradley–Terry
    with its bootstrap interval (shaded) and the live Elo (dashed), against the
    permanent members as reference lines — is each new generation stronger than the
    last, and than which fixed opponent?"""
    ax = _ax(ax)
    drawn = 0
    for role, colour in ROLE_COLOURS.items():
        if role not in ROLE_SPECS or (roles and role not in roles):
            continue
        ms = sorted((m for m in view.members if m.role == role and m.id in view.bt.ratings
                     and view.elo.games.get(m.id, 0)
                     and (not generations or generations[0] <= m.generation <= generations[1])),
                    key=lambda m: m.generation)
        if not ms:
            continue
        drawn += 1
        g = np.array([m.generation for m in ms])
        bt = [view.bt.ratings[m.id] for m in ms]
        ax.plot(g, [b.rating for b in bt], "-", color=colour, lw=1.5, label=f"{role} (BT)")
        lo, hi = np.array([b.lo for b in bt]), np.array([b.hi for b in bt])
        if np.isfinite(lo).all() and np.isfinite(hi).all():
            ax.fill_between(g, lo, hi, color=colour, alpha=0.15, lw=0)
        ax.plot(g, [view.elo.ratings[m.id] for m in ms], "--", color=colour, lw=0.8, alpha=0.7)
    for m in view.members:
        if m.permanent and m.id in view.bt.ratings and view.elo.games.get(m.id, 0):
            y = view.bt.ratings[m.id].rating
            ax.axhline(y, color=ROLE_COLOURS.get(m.role, "grey"), lw=0.6, ls=":", alpha=0.8)
            ax.annotate(m.id, (1.0, y), xycoords=("axes fraction", "data"), fontsize=7,
                        va="center", xytext=(2, 0), textcoords="offset points")
    ax.plot([], [], "--", color="grey", label="live Elo")
    ax.set_xlabel("generation")
    generation_axis(ax)
    ax.set_ylabel("rating")
    ax.set_title("strength of each generation (BT, 95 % interval) vs the fixed opponents"
                 f"{describe(roles, None, generations)}", fontsize=10)
    ax.legend(fontsize=LEGEND_SIZE, loc="lower right")
    if not drawn:
        empty(ax, "no rated generation of a trained role in this selection")
    return ax


def plot_bt_vs_elo(view: LeagueView, ax: Any = None, roles: Sequence[str] | None = None,
                   members: Sequence[str] | None = None, top: int = 30,
                   generations: tuple[int, int] | None = None) -> Any:
    """Bradley–Terry ratings with their bootstrap intervals (the headline) beside the
    live Elo (the ``top`` by Bradley–Terry of the selection), coloured by role and CPU
    level; a member of few rated games says so in its label."""
    ids = sorted(view.select(roles, members, generations),
                 key=lambda i: -view.bt.ratings[i].rating)[:top]
    ax = _ax(ax, (10, max(3.0, 0.25 * len(ids) + 1)))
    y = np.arange(len(ids))[::-1]
    for yi, mid in zip(y, ids, strict=True):
        b = view.bt.ratings[mid]
        colour = member_colour(mid, view.role(mid))
        if not (math.isnan(b.lo) or math.isnan(b.hi)):
            ax.plot([b.lo, b.hi], [yi, yi], color=colour, lw=2, alpha=0.5)
        ax.plot(b.rating, yi, "o", color=colour, ms=4)
        ax.plot(view.elo.ratings[mid], yi, "x", color="k", ms=5)
    ax.set_yticks(y, [view.label(i) for i in ids], fontsize=TICK_SIZE)
    for role in ROLE_COLOURS:
        if role in {view.role(i) for i in ids}:
            ax.plot([], [], "o-", color=ROLE_COLOURS[role], label=f"{role}: BT (95 % interval)")
    ax.plot([], [], "x", color="k", label="Elo (live)")
    ax.legend(fontsize=LEGEND_SIZE)
    ax.set_xlabel("rating")
    ax.set_title(f"order-independent strength (BT) vs live Elo{describe(roles, members, generations)}",
                 fontsize=10)
    if not ids:
        empty(ax, "no member with games in this selection")
    return ax


#: the payoff heatmap's colour for a pair that never met (grey: white is an even 0.5)
NEVER_MET = "#c8c8c8"


def plot_payoff(view: LeagueView, ax: Any = None, roles: Sequence[str] | None = None,
                members: Sequence[str] | None = None, last: int = 25,
                generations: tuple[int, int] | None = None) -> Any:
    """Mean score of row against column (the newest ``last`` members of the selection);
    pairs that never met in their own colour, not the white of an even score."""
    import matplotlib as mpl
    from matplotlib.patches import Patch

    ids = view.select(roles, members, generations)[-last:]
    n = len(ids)
    ax = _ax(ax, (max(6.0, 0.32 * n + 3), max(5.0, 0.32 * n + 2)))
    ax.set_title(f"payoff matrix: row's mean score vs column{describe(roles, members, generations)}",
                 fontsize=10)
    if not ids:
        empty(ax, "no matches in this selection")
        return ax
    ids, mat = payoff_matrix(view.matches, ids)
    cmap = mpl.colormaps["RdBu"].copy()
    cmap.set_bad(NEVER_MET)
    im = ax.imshow(np.ma.masked_invalid(mat), cmap=cmap, vmin=0, vmax=1)
    size = TICK_SIZE if n <= 20 else 7
    ax.set_xticks(range(len(ids)), ids, rotation=90, fontsize=size)
    ax.set_yticks(range(len(ids)), ids, fontsize=size)
    ax.figure.colorbar(im, ax=ax, label="row's mean score", shrink=0.8)
    ax.legend(handles=[Patch(color=NEVER_MET, label="never met")], fontsize=LEGEND_SIZE,
              loc="upper left", bbox_to_anchor=(1.0, -0.02), frameon=False)
    return ax


def recent_cycles(view: LeagueView, last: int = 30, min_games: int = 4) -> list[tuple[str, str, str]]:
    """Rock-paper-scissors triples among the newest ``last`` trained members."""
    trained = [m.id for m in view.members if not m.permanent][-last:]
    return cycles(view.matches, trained, min_games=min_games)


def plot_policy_spread(view: LeagueView, axes: Any = None, roles: Sequence[str] | None = None,
                       generations: tuple[int, int] | None = None) -> Any:
    """Entropy and mean action std of each role's registered generations (what the
    trainer recorded at registration; members without it are left out)."""
    import matplotlib.pyplot as plt

    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(11, 3.5))
    shown = 0
    for role, colour in ROLE_COLOURS.items():
        if role not in ROLE_SPECS or (roles and role not in roles):
            continue
        ms = [m for m in view.members if m.role == role and isinstance(m.settings.get("stats"), dict)
              and (not generations or generations[0] <= m.generation <= generations[1])]
        if not ms:
            continue
        g = [m.generation for m in ms]
        axes[0].plot(g, [m.settings["stats"]["entropy"] for m in ms], "o-", color=colour, label=role)
        axes[1].plot(g, [m.settings["stats"]["std"] for m in ms], "o-", color=colour, label=role)
        shown += 1
    for ax, what in zip(axes, ("entropy", "mean action std"), strict=True):
        ax.tick_params(labelsize=TICK_SIZE)
        ax.set_xlabel("generation")
        generation_axis(ax)
        ax.set_title(f"{what} per role{describe(roles, None, generations)}", fontsize=10)
        if shown:
            ax.legend(fontsize=LEGEND_SIZE)
        else:
            empty(ax, "no recorded policy statistics in this selection")
    return axes
