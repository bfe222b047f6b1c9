"""Plots of a league, from its directory alone (the pool and the match log).

Static matplotlib, so papermill runs the ``elo_drift`` notebook headless; the
notebook wraps the same functions in ipywidgets when asked to be interactive.
Every function takes a :class:`LeagueView` (what was read once) and an optional
``ax`` plus filters (roles, members, a match-index window).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from brawlkit.league.directory import LeagueDir
from brawlkit.league.ratings import BTResult, EloResult, bradley_terry, cycles, elo, payoff_matrix
from brawlkit.league.records import MatchRecord, Member

#: one colour per role (the permanent members in greys)
ROLE_COLOURS = {"main": "tab:blue", "main_exploiter": "tab:red", "league_exploiter": "tab:green",
                "baseline": "black", "cpu": "tab:gray"}


@dataclass
class LeagueView:
    """A league read once: members, matches, Elo replayed, Bradley–Terry fitted."""

    members: list[Member]
    matches: list[MatchRecord]
    elo: EloResult
    bt: BTResult

    @classmethod
    def load(cls, league_dir: str | Path, bootstrap: int = 100, seed: int = 0) -> LeagueView:
        pool = LeagueDir(league_dir, create=False)
        members, matches = pool.members(), pool.matches()
        ids = [m.id for m in members]
        return cls(members, matches, elo(matches, ids),
                   bradley_terry(matches, ids, bootstrap=bootstrap, seed=seed))

    def role(self, member_id: str) -> str:
        return next((m.role for m in self.members if m.id == member_id), "?")

    def select(self, roles: Sequence[str] | None = None,
               members: Sequence[str] | None = None) -> list[str]:
        """Member ids (with at least one game) filtered by role and/or id."""
        out = []
        for m in self.members:
            if self.elo.games.get(m.id, 0) == 0:
                continue
            if roles and m.role not in roles:
                continue
            if members and m.id not in members:
                continue
            out.append(m.id)
        return out

    def registered_at(self, member_id: str) -> int:
        """Index of the member's first match (where its line starts)."""
        idx, _, _ = self.elo.series(member_id)
        return int(idx[0]) if len(idx) else 0


def _ax(ax: Any, size: tuple[float, float] = (10, 4)) -> Any:
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=size)
    return ax


def plot_elo_drift(view: LeagueView, ax: Any = None, roles: Sequence[str] | None = None,
                   members: Sequence[str] | None = None,
                   window: tuple[int, int] | None = None) -> Any:
    """Every selected member's Elo after each match it played, coloured by role.
    A member that stopped training keeps a line: its rating still moves whenever
    it is drawn as an opponent (the marker shows where it last played)."""
    ax = _ax(ax)
    lo, hi = window or (0, len(view.matches))
    for mid in view.select(roles, members):
        idx, _, r = view.elo.series(mid)
        keep = (idx >= lo) & (idx <= hi)
        if not keep.any():
            continue
        colour = ROLE_COLOURS.get(view.role(mid), "tab:purple")
        ax.step(idx[keep], r[keep], where="post", color=colour, lw=1.0, alpha=0.8)
        ax.plot(idx[keep][-1:], r[keep][-1:], "o", color=colour, ms=3)
    for role, colour in ROLE_COLOURS.items():
        ax.plot([], [], color=colour, label=role)
    ax.axhline(view.elo.initial, color="grey", ls=":", lw=1)
    ax.set_xlabel("match (log order)")
    ax.set_ylabel("Elo")
    ax.set_title(f"Elo over the match log ({len(view.matches)} matches, K {view.elo.k:g})")
    ax.legend(fontsize=7, ncol=5)
    return ax


def plot_rating_by_generation(view: LeagueView, ax: Any = None,
                              roles: Sequence[str] | None = None) -> Any:
    """Each trained role's generations at their current strength: Bradley–Terry
    with its bootstrap interval (shaded) and the live Elo (dashed), against the
    permanent members as reference lines — is each new generation stronger than the
    last, and than which fixed opponent?"""
    ax = _ax(ax)
    for role, colour in ROLE_COLOURS.items():
        if role in ("baseline", "cpu") or (roles and role not in roles):
            continue
        ms = sorted((m for m in view.members if m.role == role and m.id in view.bt.ratings
                     and view.elo.games.get(m.id, 0)), key=lambda m: m.generation)
        if not ms:
            continue
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
            ax.annotate(m.id, (1.0, y), xycoords=("axes fraction", "data"), fontsize=6,
                        va="center", xytext=(2, 0), textcoords="offset points")
    ax.plot([], [], "--", color="grey", label="live Elo")
    ax.set_xlabel("generation")
    ax.set_ylabel("rating")
    ax.set_title("strength of each generation (BT, 95 % interval) and the fixed opponents")
    ax.legend(fontsize=7, loc="lower right")
    return ax


def plot_bt_vs_elo(view: LeagueView, ax: Any = None, roles: Sequence[str] | None = None,
                   members: Sequence[str] | None = None, top: int = 30) -> Any:
    """Bradley–Terry ratings with their bootstrap intervals beside the live Elo."""
    ids = sorted(view.select(roles, members), key=lambda i: -view.elo.ratings[i])[:top]
    ax = _ax(ax, (10, max(3.0, 0.25 * len(ids) + 1)))
    y = np.arange(len(ids))[::-1]
    for yi, mid in zip(y, ids, strict=True):
        b = view.bt.ratings[mid]
        colour = ROLE_COLOURS.get(view.role(mid), "tab:purple")
        if not (math.isnan(b.lo) or math.isnan(b.hi)):
            ax.plot([b.lo, b.hi], [yi, yi], color=colour, lw=2, alpha=0.5)
        ax.plot(b.rating, yi, "o", color=colour, ms=4)
        ax.plot(view.elo.ratings[mid], yi, "x", color="k", ms=5)
    ax.set_yticks(y, ids, fontsize=6)
    ax.plot([], [], "o", color="tab:blue", label="Bradley–Terry (95 % bootstrap interval)")
    ax.plot([], [], "x", color="k", label="Elo (live)")
    ax.legend(fontsize=7)
    ax.set_xlabel("rating")
    ax.set_title("order-independent strength (BT) vs live Elo")
    return ax


def plot_payoff(view: LeagueView, ax: Any = None, roles: Sequence[str] | None = None,
                members: Sequence[str] | None = None, last: int = 25) -> Any:
    """Mean score of row against column (the newest ``last`` members of the selection)."""
    ids = view.select(roles, members)[-last:]
    ax = _ax(ax, (8, 7))
    if not ids:
        ax.text(0.5, 0.5, "no matches yet", ha="center", transform=ax.transAxes)
        return ax
    ids, mat = payoff_matrix(view.matches, ids)
    im = ax.imshow(np.ma.masked_invalid(mat), cmap="RdBu", vmin=0, vmax=1)
    ax.set_xticks(range(len(ids)), ids, rotation=90, fontsize=5)
    ax.set_yticks(range(len(ids)), ids, fontsize=5)
    ax.figure.colorbar(im, ax=ax, label="row's mean score")
    ax.set_title("payoff matrix (blank: never met)")
    return ax


def recent_cycles(view: LeagueView, last: int = 30, min_games: int = 4) -> list[tuple[str, str, str]]:
    """Rock-paper-scissors triples among the newest ``last`` trained members."""
    trained = [m.id for m in view.members if not m.permanent][-last:]
    return cycles(view.matches, trained, min_games=min_games)


def plot_policy_spread(view: LeagueView, axes: Any = None, roles: Sequence[str] | None = None) -> Any:
    """Entropy and mean action std of each role's registered generations (what the
    trainer recorded at registration; members without it are left out)."""
    import matplotlib.pyplot as plt

    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(11, 3.5))
    shown = 0
    for role, colour in ROLE_COLOURS.items():
        if role in ("baseline", "cpu") or (roles and role not in roles):
            continue
        ms = [m for m in view.members if m.role == role and isinstance(m.settings.get("stats"), dict)]
        if not ms:
            continue
        g = [m.generation for m in ms]
        axes[0].plot(g, [m.settings["stats"]["entropy"] for m in ms], "o-", color=colour, label=role)
        axes[1].plot(g, [m.settings["stats"]["std"] for m in ms], "o-", color=colour, label=role)
        shown += 1
    for ax, what in zip(axes, ("entropy", "mean action std"), strict=True):
        ax.set_xlabel("generation")
        ax.set_title(f"{what} per role")
        if shown:
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "no recorded policy statistics", ha="center", transform=ax.transAxes)
    return axes
