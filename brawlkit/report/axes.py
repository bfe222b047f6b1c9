"""Axis helpers every notebook plot shares, so they read at a glance.

Why: raw step counts (``1200000``) overlap as ticks, a generation axis with ticks at
0.2, 0.4 … suggests generations that do not exist, and an empty axis gives no hint
whether the data is missing or the plot broken.
"""

from __future__ import annotations

from typing import Any

#: tick and legend sizes readable in a notebook and in the README's pictures
TICK_SIZE = 8
LEGEND_SIZE = 8


def human_count(x: float, _pos: Any = None) -> str:
    """``1500`` → ``1.5k``, ``2000000`` → ``2M``: step counts as a person says them."""
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            v = x / div
            return f"{v:.0f}{suffix}" if v == round(v) else f"{v:.1f}{suffix}"
    return f"{x:.0f}"


def steps_axis(ax: Any, axis: str = "x") -> Any:
    """Format an axis of env steps in k/M."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    a = ax.xaxis if axis == "x" else ax.yaxis
    a.set_major_formatter(FuncFormatter(human_count))
    a.set_major_locator(MaxNLocator(nbins=6))
    return ax


def generation_axis(ax: Any, axis: str = "x") -> Any:
    """Integer ticks only: generations are whole numbers."""
    from matplotlib.ticker import MaxNLocator

    (ax.xaxis if axis == "x" else ax.yaxis).set_major_locator(MaxNLocator(integer=True))
    return ax


def empty(ax: Any, why: str) -> Any:
    """Say on the panel itself why it is empty (``no resets yet``), in grey."""
    ax.text(0.5, 0.5, why, ha="center", va="center", transform=ax.transAxes, color="0.35",
            fontsize=10, wrap=True)
    return ax
