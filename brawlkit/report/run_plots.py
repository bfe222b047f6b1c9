"""Plots of a training run, read from its CSV logs and checkpoint JSONs.

Static matplotlib, so papermill runs the notebooks headless.  Every function
takes a run dir (``runs/<role>/<run>``) or the frame the loaders return and an
optional ``ax``; :func:`plot_run` draws the whole dashboard.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from brawlkit.report.axes import LEGEND_SIZE, TICK_SIZE, empty, steps_axis

STEP = "time/total_timesteps"


def load_progress(run_dir: str | Path) -> pd.DataFrame:
    """All ``progress*.csv`` of a run (resumed runs keep one per part), by step."""
    parts = []
    for p in sorted(Path(run_dir).glob("progress*.csv")):
        try:
            df = pd.read_csv(p)
        except (pd.errors.EmptyDataError, pd.errors.ParserError):
            continue
        if STEP in df.columns and len(df):
            parts.append(df)
    if not parts:
        return pd.DataFrame({STEP: []})
    return pd.concat(parts, ignore_index=True).sort_values(STEP, kind="stable").reset_index(drop=True)


def load_evals(run_dir: str | Path) -> pd.DataFrame:
    """One row per generation: steps and win/draw rate per evaluated opponent."""
    rows = []
    for p in sorted(Path(run_dir).glob("gen_*.json")):
        try:
            meta = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        row: dict[str, Any] = {"generation": meta.get("generation"), "steps": meta.get("steps")}
        for opp, ev in (meta.get("eval") or {}).items():
            row[f"win_rate/{opp}"] = ev.get("win_rate")
            row[f"draw_rate/{opp}"] = ev.get("draw_rate")
            row[f"spam_fraction/{opp}"] = ev.get("spam_fraction")
            if "sampled_win_rate" in ev:
                row[f"sampled_win_rate/{opp}"] = ev["sampled_win_rate"]
        rows.append(row)
    return pd.DataFrame(rows).sort_values("generation") if rows else pd.DataFrame()


def _series(df: pd.DataFrame, key: str) -> tuple[np.ndarray, np.ndarray]:
    if key not in df.columns:
        return np.array([]), np.array([])
    sub = df[[STEP, key]].dropna()
    return sub[STEP].to_numpy(), sub[key].to_numpy()


def _ax(ax: Any) -> Any:
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(6, 3.5))
    ax.tick_params(labelsize=TICK_SIZE)
    return ax


def _empty(ax: Any, what: str) -> None:
    empty(ax, f"no {what} logged yet")


def plot_entropy_std(df: pd.DataFrame, ax: Any = None) -> Any:
    """Policy entropy (−train/entropy_loss) and the Gaussian action std over training."""
    ax = _ax(ax)
    x, ent = _series(df, "train/entropy_loss")
    xs, std = _series(df, "train/std")
    if not len(x) and not len(xs):
        _empty(ax, "train/entropy_loss or train/std")
        return ax
    ax.plot(x, -ent, label="entropy", color="tab:blue")
    ax.set_xlabel("env steps")
    steps_axis(ax)
    ax.set_ylabel("entropy", color="tab:blue")
    ax2 = ax.twinx()
    ax2.tick_params(labelsize=TICK_SIZE)
    ax2.plot(xs, std, label="action std", color="tab:orange")
    ax2.set_ylabel("action std", color="tab:orange")
    ax.set_title("entropy and action std")
    return ax


def plot_reward_tiers(df: pd.DataFrame, ax: Any = None, smooth: int = 20) -> Any:
    """Mean per-episode reward of every tier (``reward/<tier>``), rolling mean over
    ``smooth`` logged points (each rollout logs the few episodes that ended in it).

    One small panel per tier, each on its own y scale: the outcome tier is tens of
    times the shaping tiers, and on one shared axis it flattens them into a line.
    ``ax`` (one Axes) is split into the panels; returns the list of panels."""
    import matplotlib.pyplot as plt

    keys = [c for c in df.columns if c.startswith("reward/")]
    if not keys:
        ax = _ax(ax)
        _empty(ax, "reward/<tier>")
        ax.set_title("reward by tier")
        return [ax]
    ncols = min(3, len(keys))
    nrows = -(-len(keys) // ncols)
    if ax is None:
        fig = plt.figure(figsize=(4 * ncols, 2.4 * nrows + 0.4))
        grid = fig.add_gridspec(nrows, ncols)
    else:
        fig = ax.figure
        grid = ax.get_subplotspec().subgridspec(nrows, ncols, hspace=0.9, wspace=0.35)
        ax.remove()
    panels = []
    for i, k in enumerate(keys):
        pax = fig.add_subplot(grid[i // ncols, i % ncols])
        pax.tick_params(labelsize=TICK_SIZE - 1)
        x, y = _series(df, k)
        if len(x):
            y = pd.Series(y).rolling(max(1, min(smooth, len(y) // 3 or 1)), min_periods=1).mean()
            pax.plot(x, y.to_numpy(), color=f"C{i}")
            lo, hi = float(np.nanmin(y)), float(np.nanmax(y))
            if lo <= 0 <= hi:
                pax.axhline(0, color="grey", lw=0.5)
        else:
            _empty(pax, k)
        steps_axis(pax)
        pax.set_title(k.split("/", 1)[1], fontsize=9)
        panels.append(pax)
    if ax is None:
        fig.suptitle("reward per episode, by tier (each on its own scale)", fontsize=10)
        fig.tight_layout()
    return panels


def plot_win_rates(evals: pd.DataFrame, ax: Any = None) -> Any:
    """Win rate vs each evaluated CPU level, per generation: the deterministic policy
    (solid: what ships) and the sampled one PPO trains with (dashed, same colour)."""
    ax = _ax(ax)
    cols = [c for c in evals.columns if c.startswith("win_rate/")]
    for c in sorted(cols, key=lambda c: (len(c), c)):
        name = c.split("/", 1)[1].replace("_", " ")
        (line,) = ax.plot(evals["steps"], evals[c], marker="o", label=f"{name} deterministic")
        sampled = f"sampled_{c}"
        if sampled in evals.columns:
            ax.plot(evals["steps"], evals[sampled], ls="--", marker="x", color=line.get_color(),
                    label=f"{name} sampled")
    if not cols:
        _empty(ax, "evaluation")
    else:
        ax.legend(fontsize=LEGEND_SIZE)
    ax.axhline(0.8, color="grey", ls=":", lw=1)
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel("env steps")
    steps_axis(ax)
    ax.set_ylabel("win rate")
    ax.set_title("win rate by CPU level (per generation)")
    return ax


def plot_spam(df: pd.DataFrame, evals: pd.DataFrame | None = None, ax: Any = None) -> Any:
    """Share of an episode spent on the single most-used action pattern."""
    ax = _ax(ax)
    x, y = _series(df, "play/spam_fraction")
    if len(x):
        y = pd.Series(y).rolling(max(1, min(20, len(y) // 3 or 1)), min_periods=1).mean().to_numpy()
        ax.plot(x, y, label="training (stochastic)")
    if evals is not None and len(evals):
        for c in [c for c in evals.columns if c.startswith("spam_fraction/")]:
            ax.plot(evals["steps"], evals[c], marker="o", ls="--",
                    label=f"eval {c.split('/', 1)[1]} (deterministic)")
    if not len(x) and (evals is None or not len(evals)):
        _empty(ax, "play/spam_fraction")
    else:
        ax.legend(fontsize=LEGEND_SIZE)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("env steps")
    steps_axis(ax)
    ax.set_ylabel("spam fraction")
    ax.set_title("one-move spam")
    return ax


def plot_run(run_dir: str | Path) -> Any:
    """The 2×2 dashboard of a run; returns the figure."""
    import matplotlib.pyplot as plt

    df, ev = load_progress(run_dir), load_evals(run_dir)
    fig, axes = plt.subplots(2, 2, figsize=(12, 7.5))
    plot_entropy_std(df, axes[0, 0])
    plot_reward_tiers(df, axes[0, 1])
    plot_win_rates(ev, axes[1, 0])
    plot_spam(df, ev, axes[1, 1])
    fig.suptitle(str(run_dir))
    fig.tight_layout()
    return fig
