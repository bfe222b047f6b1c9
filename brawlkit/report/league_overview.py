"""The league at a glance: what ``notebooks/league_overview.ipynb`` plots.

Everything here is read from what a league leaves behind — the league directory (members
and the append-only match log) and each role's run directory (``progress.csv``, the
trainer's own log) — so the overview works on a finished league, a running one, or a
copy. Static matplotlib (papermill runs it headless); each function returns its axes.

Why these plots: a league is healthy when Main keeps climbing against the fixed
opponents, when PFSP keeps moving Main's games towards the opponents it still loses to,
when the exploiters find and lose their edge (mode switches, resets), and when no role's
policy collapses (entropy falling to nothing, one button spammed).
"""

from __future__ import annotations

import csv
import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from brawlkit.league import records
from brawlkit.league.records import Member
from brawlkit.league.role_specs import settled_roles
from brawlkit.report.axes import LEGEND_SIZE, TICK_SIZE, empty, generation_axis, steps_axis
from brawlkit.report.league_plots import ROLE_COLOURS, LeagueView, _ax

#: opponent groups of the PFSP-draws plot, in stacking order
TRAINED_ROLES = tuple(s.name for s in settled_roles())  # the declared roles (role_specs.py)
GROUPS = ("cpu", "baseline", *TRAINED_ROLES, "human", "other")
GROUP_COLOURS = {**ROLE_COLOURS, "human": "tab:orange", "other": "tab:purple"}
#: the roles that start over from fresh weights (their declared reset rule), whose resets
#: the exploiter plot marks
RESETTING_ROLES = tuple(s.name for s in settled_roles() if s.reset.when != "never")


def opponent_group(view: LeagueView, member_id: str) -> str:
    """Which group an opponent id belongs to: its role, or ``human`` for players."""
    if member_id.startswith("player:") or member_id == "anonymous":
        return "human"
    role = view.role(member_id)
    return role if role in GROUPS else "other"


def opponent_draws(view: LeagueView, role: str) -> tuple[list[int], dict[str, np.ndarray]]:
    """The opponents ``role`` actually drew, per generation, as fractions of its games.

    A trainee's training matches are logged with ``source`` ``train:<role>`` and the
    trainee's side in ``a`` (the member registered for that generation), so counting
    ``b``'s group per ``a``'s generation is the realised PFSP distribution — what the
    sampler did, not what it was configured to do. Returns ``(generations, {group:
    fractions})`` with one value per generation for every group in :data:`GROUPS`.
    """
    gen_of = {m.id: m.generation for m in view.members if m.role == role}
    counts: dict[int, Counter[str]] = defaultdict(Counter)
    for r in view.matches:
        if r.source == f"train:{role}" and r.a in gen_of:
            counts[gen_of[r.a]][opponent_group(view, r.b)] += 1
    gens = sorted(counts)
    out = {g: np.array([counts[x][g] / max(1, sum(counts[x].values())) for x in gens])
           for g in GROUPS}
    return gens, out


def plot_pfsp_draws(view: LeagueView, axes: Any = None,
                    roles: Sequence[str] = TRAINED_ROLES) -> Any:
    """Per role, the share of its training games against each opponent group by
    generation (stacked). Healthy: Main's share moves towards what it still loses to;
    the main exploiter stays on Main; the league exploiter spreads over the pool."""
    import matplotlib.pyplot as plt

    if axes is None:
        _, axes = plt.subplots(1, len(roles), figsize=(4.2 * len(roles), 3.4), squeeze=False)
        axes = axes[0]
    for ax, role in zip(axes, roles, strict=True):
        gens, share = opponent_draws(view, role)
        ax.tick_params(labelsize=TICK_SIZE)
        if not gens:
            empty(ax, f"no training matches of {role} yet")
        else:  # stacked bars: readable from a single generation on
            groups = [g for g in GROUPS if share[g].any()]
            bottom = np.zeros(len(gens))
            for g in groups:
                ax.bar(gens, share[g], bottom=bottom, color=GROUP_COLOURS[g], label=g,
                       width=0.8, alpha=0.85)
                bottom += share[g]
            ax.set_ylim(0, 1)
            ax.legend(fontsize=LEGEND_SIZE, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        ax.set_title(f"{role}: opponents drawn, by kind", fontsize=10)
        ax.set_xlabel("generation")
        generation_axis(ax)
    axes[0].set_ylabel("share of training games")
    return axes


def exploiter_edge(view: LeagueView, exploiter: str = "main_exploiter",
                   target: str = "main") -> tuple[list[int], np.ndarray, np.ndarray, np.ndarray]:
    """How far each generation of the exploiter beat its target, from the league's own
    log: per generation of ``exploiter``, its win rate (draws half) in its training games
    against ``target``'s frozen members (deterministic, what the target ships), their
    count, and how long its wins took (mean ticks; NaN without a win: a match is at most
    ``BP_MATCH_TICKS``, so a mean near it says the wins came at the timer, not by
    knock-outs).  The in-league estimate of how exploitable the target is, generation by
    generation, at no cost beyond the training itself; ``bench exploit`` is the measure.
    Returns ``(generations, win rates, games, mean ticks of the wins)``."""
    gen_of = {m.id: m.generation for m in view.members if m.role == exploiter}
    targets = {m.id for m in view.members if m.role == target}
    games: dict[int, list[tuple[float, int]]] = defaultdict(list)
    for r in view.matches:
        if r.source == f"train:{exploiter}" and r.a in gen_of and r.b in targets:
            games[gen_of[r.a]].append((r.score, r.ticks))
    gens = sorted(games)
    win_ticks = [[t for sc, t in games[g] if sc == 1.0] for g in gens]
    return (gens, np.array([np.mean([sc for sc, _ in games[g]]) for g in gens]),
            np.array([len(games[g]) for g in gens]),
            np.array([np.mean(w) if w else np.nan for w in win_ticks]))


def verified_standing(view: LeagueView, role: str = "main", against: str = "main_exploiter"
                      ) -> tuple[list[int], np.ndarray, np.ndarray]:
    """:func:`brawlkit.league.records.verified_standing` of the view, as plot arrays:
    ``(generations, lowest, mean)``."""
    rows = records.verified_standing(view.members, view.matches, role, against)
    return ([g for g, _, _ in rows], np.array([lo for _, lo, _ in rows]),
            np.array([mean for _, _, mean in rows]))


def plot_exploiter_edge(view: LeagueView, ax: Any = None) -> Any:
    """The main exploiters' edge over Main by generation (:func:`exploiter_edge`), their
    resets, and — where Main verified what it ships against them — Main's lowest and mean
    verified win rate (:func:`verified_standing`).  Healthy: each fresh lineage's edge
    climbs more slowly, and peaks lower, as Main patches what they found."""
    ax = _ax(ax, (10, 3.4))
    gens, edge, _, _ = exploiter_edge(view)
    vgens, vmin, vmean = verified_standing(view)
    if not gens and not vgens:
        return empty(ax, "no main exploiter has played Main yet")
    if gens:
        ax.plot(gens, edge, "o-", color=ROLE_COLOURS["main_exploiter"], lw=1.2, ms=4,
                label="main exploiter vs Main (its training games)")
    if vgens:
        ax.plot(vgens, vmin, "s--", color=ROLE_COLOURS["main"], lw=1, ms=3,
                label="Main verified (deterministic): lowest")
        ax.plot(vgens, vmean, ":", color=ROLE_COLOURS["main"], lw=1,
                label="Main verified (deterministic): mean")
    for g in resets(view.members, "main_exploiter"):
        ax.axvline(g - 0.5, color="0.8", lw=0.8, zorder=0)
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel("generation (grey: a main exploiter reset)")
    generation_axis(ax)
    ax.set_ylabel("win rate (draws half)")
    ax.set_title("the exploiters' edge over Main", fontsize=10)
    ax.legend(fontsize=LEGEND_SIZE, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return ax


def progress_files(runs_root: str | Path, role: str) -> list[Path]:
    """A role's trainer logs in time order: per run directory (oldest first) the parts a
    ``--resume`` set aside (``progress_until_gen_XXXX.csv``), then ``progress.csv``."""
    out: list[Path] = []
    for rdir in sorted(p for p in Path(runs_root, role).glob("*") if p.is_dir()):
        out += sorted(rdir.glob("progress_until_gen_*.csv"))
        if (rdir / "progress.csv").is_file():
            out.append(rdir / "progress.csv")
    return out


def read_progress(runs_root: str | Path, role: str) -> list[dict[str, float]]:
    """Every row of a role's trainer logs (:func:`progress_files`) as floats (blank or
    non-numeric cells left out), with ``time/total_timesteps`` made cumulative: SB3
    counts from 0 again after a resume or an exploiter's reset, and the role should
    read as one time line."""
    rows: list[dict[str, float]] = []
    offset = prev = 0.0
    for path in progress_files(runs_root, role):
        try:
            with open(path, newline="") as f:
                for raw in csv.DictReader(f):
                    row = {}
                    for k, v in raw.items():
                        try:
                            if k and v not in (None, ""):
                                row[k] = float(v)
                        except (TypeError, ValueError):
                            continue
                    if "time/total_timesteps" in row:
                        t = row["time/total_timesteps"]
                        if t < prev:  # counting restarted
                            offset += prev
                        prev = t
                        row["time/total_timesteps"] = t + offset
                    rows.append(row)
        except OSError:
            continue
    return rows


def _series(rows: list[dict[str, float]], key: str) -> tuple[np.ndarray, np.ndarray]:
    pts = [(r["time/total_timesteps"], r[key]) for r in rows
           if key in r and "time/total_timesteps" in r and math.isfinite(r[key])]
    if not pts:
        return np.zeros(0), np.zeros(0)
    a = np.array(pts)
    return a[:, 0], a[:, 1]


def resets(members: Sequence[Member], role: str) -> list[int]:
    """Generations at which ``role`` started a new lineage (a member with no parent
    after the first): the exploiters' resets."""
    return sorted(m.generation for m in members
                  if m.role == role and m.parent is None and m.generation > 0)


def plot_exploiter_modes(view: LeagueView, runs_root: str | Path, axes: Any = None) -> Any:
    """The main exploiter's share of rollouts against Main's newest checkpoint versus
    its fallback (Main's history) over training time, and the resets of every role
    whose declaration resets it (:data:`RESETTING_ROLES`: both exploiters).
    Healthy: it switches to the fallback when Main outgrows it and back once it
    catches up; resets restart its climb."""
    import matplotlib.pyplot as plt

    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(12, 3.4))
    rows = read_progress(runs_root, "main_exploiter")
    ax = axes[0]
    for key, colour in (("curriculum/branch/main", "tab:blue"),
                        ("curriculum/branch/main_history", "tab:cyan")):
        x, y = _series(rows, key)
        if len(x):
            ax.plot(x, y, color=colour, lw=1, label=key.rsplit("/", 1)[-1])
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel("main exploiter's env steps")
    steps_axis(ax)
    ax.set_ylabel("share of episodes")
    ax.set_title("main exploiter: target (Main) vs fallback (Main's history)", fontsize=10)
    if rows:
        ax.legend(fontsize=LEGEND_SIZE)
    else:
        empty(ax, f"no progress.csv of main_exploiter under {runs_root}")
    ax = axes[1]
    any_reset = False
    for i, role in enumerate(RESETTING_ROLES):
        gens = resets(view.members, role)
        any_reset |= bool(gens)
        ax.eventplot([gens], lineoffsets=i, colors=ROLE_COLOURS[role], linelengths=0.6)
    ax.set_yticks(range(len(RESETTING_ROLES)), RESETTING_ROLES, fontsize=TICK_SIZE)
    ax.set_ylim(-0.6, len(RESETTING_ROLES) - 0.4)
    ax.set_xlim(-0.5, view.max_generation() + 0.5)  # the whole time line, not just the resets
    ax.set_xlabel("generation")
    generation_axis(ax)
    ax.set_title("resets (a new lineage)", fontsize=10)
    if not any_reset:
        empty(ax, "no resets yet")
    return axes


def plot_entropy_and_spam(runs_root: str | Path, axes: Any = None,
                          roles: Sequence[str] = TRAINED_ROLES) -> Any:
    """Per role over training time: the policy's entropy (SB3's ``train/entropy_loss``
    is its negative) and ``play/spam_fraction`` (share of an episode spent on its single
    most-used action pattern). Healthy: entropy falls slowly and stays above the collapse, spam stays low."""
    import matplotlib.pyplot as plt

    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(12, 3.4))
    shown = False
    for role in roles:
        rows = read_progress(runs_root, role)
        colour = ROLE_COLOURS.get(role, "grey")
        x, y = _series(rows, "train/entropy_loss")
        if len(x):
            axes[0].plot(x, -y, color=colour, lw=1, label=role)
            shown = True
        x, y = _series(rows, "play/spam_fraction")
        if len(x):
            axes[1].plot(x, y, color=colour, lw=1, label=role)
    for ax, title in zip(axes, ("entropy", "spam fraction"), strict=True):
        ax.set_xlabel("env steps of the role")
        steps_axis(ax)
        ax.tick_params(labelsize=TICK_SIZE)
        ax.set_title(f"{title} per role", fontsize=10)
        if shown:
            ax.legend(fontsize=LEGEND_SIZE)
        else:
            empty(ax, f"no progress.csv under {runs_root}")
    return axes


def plot_ratings_by_kind(entries: Sequence[dict[str, Any]], ax: Any = None, top: int = 40) -> Any:
    """Bots and humans on one scale: the ``top`` entries of a ratings list (``elo
    --json``'s ``members``, or ``GET /ratings``) by Bradley–Terry, the headline, with its
    95 % interval, the live Elo beside it (``x``), coloured by kind; a rating of few
    games says so. Healthy: the newest Main generations near the top, the CPU levels in
    order, humans placed among the bots they beat."""
    colours = {"bot": "tab:blue", "baseline": "black", "cpu": "tab:gray", "human": "tab:orange"}
    rows = sorted((e for e in entries if e.get("games", 0)),
                  key=lambda e: -float(e.get("bt_rating", e["rating"])))[:top]
    ax = _ax(ax, (10, max(3.0, 0.22 * len(rows) + 1)))
    if not rows:
        empty(ax, "no rated games yet")
        return ax
    y = np.arange(len(rows))[::-1]
    kinds = [str(e.get("kind", "bot")) for e in rows]
    for yi, e, k in zip(y, rows, kinds, strict=True):
        c = colours.get(k, "tab:purple")
        bt = float(e.get("bt_rating", e["rating"]))
        if e.get("bt_lo") is not None and e.get("bt_hi") is not None:
            ax.plot([e["bt_lo"], e["bt_hi"]], [yi, yi], color=c, lw=3, alpha=0.45)
        ax.plot(bt, yi, "o", color=c, ms=5)
        ax.plot(float(e["rating"]), yi, "x", color="k", ms=5)
    few = [e.get("few_games", False) for e in rows]
    ax.set_yticks(y, [f"{e['id']} (few games)" if f else str(e["id"]) for e, f in zip(rows, few, strict=True)],
                  fontsize=TICK_SIZE if len(rows) <= 25 else 7)
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=c, marker="o", lw=3, alpha=0.7, label=f"{k}: BT (95 %)")
               for k, c in colours.items() if k in kinds]
    handles.append(Line2D([], [], color="k", marker="x", lw=0, label="live Elo"))
    ax.legend(handles=handles, fontsize=LEGEND_SIZE, loc="lower right")
    ax.set_xlabel("rating (Bradley–Terry with its 95 % interval; live Elo beside it)")
    ax.set_title("ratings of bots and humans (one scale)")
    return ax
