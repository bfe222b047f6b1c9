"""The notebooks' plots with controls where a person is looking, static where no one is.

Why detected, not a parameter to flip: a person opening ``elo_drift.ipynb`` in
JupyterLab or Colab should get the filters without knowing about a flag, and papermill
(or nbconvert) must still write plain PNGs, since widgets need a live front end and
show nothing in an executed file. :func:`live_kernel` tells them apart; a notebook's
``interactive`` parameter (``None``: detect) or ``BRAWLKIT_INTERACTIVE=0/1`` forces
either.

A :class:`Panel` is one plot function and its controls: every change of a control
redraws the figure from the same function the static path calls, and the panel keeps
the figure it drew last (``panel.fig``) so a test can check what a redraw shows.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from brawlkit.common.kernel import in_kernel
from brawlkit.report.league_plots import ROLE_COLOURS, LeagueView

#: the front ends a kernel has when a person is looking; papermill, nbconvert and
#: nbclient start kernels without any of these marks
_LIVE_ENV = ("JPY_SESSION_NAME",)  # set by jupyter_server (JupyterLab, Notebook 7)


def live_kernel() -> bool:
    """True in an IPython kernel a person is looking at: started by a Jupyter server
    (JupyterLab, ``make lab``: ``JPY_SESSION_NAME``) or by Colab (``google.colab``);
    False under papermill, nbconvert and in plain Python. ``BRAWLKIT_INTERACTIVE`` set to
    ``0`` or ``1`` decides instead."""
    forced = os.environ.get("BRAWLKIT_INTERACTIVE", "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    if not in_kernel():
        return False
    # not VS Code's marks: its terminals carry them too, and papermill run from one would
    # then draw widgets into a file; other front ends set BRAWLKIT_INTERACTIVE=1
    return "google.colab" in sys.modules or any(os.environ.get(k) for k in _LIVE_ENV)


def want_interactive(interactive: bool | None) -> bool:
    """A notebook's ``interactive`` parameter: None detects (:func:`live_kernel`)."""
    return live_kernel() if interactive is None else bool(interactive)


class Panel:
    """One figure and its controls.

    ``draw(**values)`` returns a matplotlib figure; ``defaults`` are the values the
    static path draws with; ``controls()`` builds the ipywidgets (one per keyword of
    ``draw``) only when interactive, so papermill never creates a widget.
    """

    def __init__(self, draw: Callable[..., Any], defaults: dict[str, Any],
                 controls: Callable[[], dict[str, Any]], interactive: bool | None = None,
                 title: str = ""):
        self.draw = draw
        self.defaults = dict(defaults)
        self.make_controls = controls
        self.interactive = want_interactive(interactive)
        self.title = title
        self.controls: dict[str, Any] = {}
        self.fig: Any = None
        self.redraws = 0
        self.widget: Any = None

    def values(self) -> dict[str, Any]:
        if not self.controls:
            return dict(self.defaults)
        return {**self.defaults, **{k: _plain(c.value) for k, c in self.controls.items()}}

    def _render(self) -> None:
        import matplotlib.pyplot as plt

        self.fig = self.draw(**self.values())
        self.redraws += 1
        plt.show()

    def show(self) -> Panel:
        """Display the panel: controls above the figure in a live kernel, else the
        figure alone (a PNG in papermill's output)."""
        if not self.interactive:
            self._render()
            return self
        import ipywidgets as w
        from IPython.display import display

        self.controls = self.make_controls()
        out = w.Output()

        def redraw(_change: Any = None) -> None:
            out.clear_output(wait=True)
            with out:
                self._render()

        for c in self.controls.values():
            c.observe(redraw, names="value")
        rows = [w.HBox(list(self.controls.values()))]
        if self.title:
            rows.insert(0, w.HTML(f"<b>{self.title}</b>"))
        self.widget = w.VBox([*rows, out])
        display(self.widget)
        redraw()
        return self


def _plain(v: Any) -> Any:
    """Widget values as the plot functions take them (tuples of a SelectMultiple as
    lists, an empty selection as None: no filter)."""
    if isinstance(v, tuple) and v and all(isinstance(x, str) for x in v):
        return list(v)
    if v == () or v == "":
        return None
    return v


# ------------------------------------------------------------- the league's panels
def _fig(ax: Any) -> Any:
    first = ax[0] if isinstance(ax, (list, tuple)) or hasattr(ax, "shape") else ax
    fig = first.figure
    fig.tight_layout()
    return fig


def _roles_control(view: LeagueView, roles: Sequence[str]) -> Any:
    import ipywidgets as w

    present = [r for r in ROLE_COLOURS if any(m.role == r for m in view.members)]
    return w.SelectMultiple(options=present, value=tuple(r for r in roles if r in present),
                            description="roles", rows=min(5, max(2, len(present))))


def _members_control(view: LeagueView) -> Any:
    import ipywidgets as w

    return w.SelectMultiple(options=view.select(), value=(), description="members",
                            rows=5, layout=w.Layout(width="22em"))


def _generations_control(view: LeagueView) -> Any:
    import ipywidgets as w

    top = max(1, view.max_generation())
    return w.IntRangeSlider(min=0, max=top, value=(0, top), step=1, description="generations",
                            continuous_update=False)


def _window_control(view: LeagueView) -> Any:
    import ipywidgets as w

    n = max(1, len(view.matches))
    return w.IntRangeSlider(min=0, max=n, value=(0, n), step=1, description="matches",
                            continuous_update=False, layout=w.Layout(width="28em"))


def _gens(view: LeagueView, g: Any) -> tuple[int, int] | None:
    """A generation range that covers everything is no filter (keeps titles short)."""
    if g is None:
        return None
    lo, hi = int(g[0]), int(g[1])
    return None if (lo, hi) == (0, max(1, view.max_generation())) else (lo, hi)


def _window(view: LeagueView, win: Any) -> tuple[int, int] | None:
    return None if win is None else (int(win[0]), int(win[1]))


def elo_drift_panel(view: LeagueView, roles: Sequence[str], interactive: bool | None = None) -> Panel:
    """Elo over the match log; controls: roles, members, match window, generations."""
    from brawlkit.report import league_plots as lp

    def draw(roles: Any = None, members: Any = None, window: Any = None,
             generations: Any = None) -> Any:
        return _fig(lp.plot_elo_drift(view, roles=roles, members=members,
                                      window=_window(view, window),
                                      generations=_gens(view, generations)))

    return Panel(draw, {"roles": list(roles)},
                 lambda: {"roles": _roles_control(view, roles), "members": _members_control(view),
                          "window": _window_control(view),
                          "generations": _generations_control(view)}, interactive,
                 "Elo drift")


def strength_panel(view: LeagueView, roles: Sequence[str], interactive: bool | None = None) -> Panel:
    """Bradley–Terry strength per generation; controls: roles, generations."""
    from brawlkit.report import league_plots as lp

    def draw(roles: Any = None, generations: Any = None) -> Any:
        return _fig(lp.plot_rating_by_generation(view, roles=roles,
                                                 generations=_gens(view, generations)))

    return Panel(draw, {"roles": list(roles)},
                 lambda: {"roles": _roles_control(view, roles),
                          "generations": _generations_control(view)}, interactive,
                 "Strength per generation")


def _members_panel(view: LeagueView, roles: Sequence[str], interactive: bool | None,
                   plot: Any, title: str) -> Panel:
    """A league plot of members with the roles, members and generations controls (the
    Bradley–Terry and payoff panels differ only in the plot and the title)."""

    def draw(roles: Any = None, members: Any = None, generations: Any = None) -> Any:
        return _fig(plot(view, roles=roles, members=members,
                         generations=_gens(view, generations)))

    return Panel(draw, {"roles": list(roles)},
                 lambda: {"roles": _roles_control(view, roles), "members": _members_control(view),
                          "generations": _generations_control(view)}, interactive, title)


def bt_panel(view: LeagueView, roles: Sequence[str], interactive: bool | None = None) -> Panel:
    """Bradley–Terry with intervals beside Elo; controls: roles, members, generations."""
    from brawlkit.report import league_plots as lp

    return _members_panel(view, roles, interactive, lp.plot_bt_vs_elo, "Bradley–Terry vs Elo")


def payoff_panel(view: LeagueView, roles: Sequence[str], interactive: bool | None = None) -> Panel:
    """The payoff matrix; controls: roles, members, generations."""
    from brawlkit.report import league_plots as lp

    return _members_panel(view, roles, interactive, lp.plot_payoff, "Payoff")


def spread_panel(view: LeagueView, roles: Sequence[str], interactive: bool | None = None) -> Panel:
    """Entropy and action std per role and generation; controls: roles, generations."""
    from brawlkit.report import league_plots as lp

    def draw(roles: Any = None, generations: Any = None) -> Any:
        return _fig(lp.plot_policy_spread(view, roles=roles,
                                          generations=_gens(view, generations)))

    return Panel(draw, {"roles": list(roles)},
                 lambda: {"roles": _roles_control(view, roles),
                          "generations": _generations_control(view)}, interactive,
                 "Entropy and action std")


def figure_summary(fig: Any) -> dict[str, Any]:
    """What a figure shows, as data: per axes its title, legend texts and number of
    lines — what a test compares before and after a control changes."""
    out = []
    for ax in fig.axes:
        leg = ax.get_legend()
        out.append({"title": ax.get_title(), "lines": len(ax.get_lines()),
                    "legend": [t.get_text() for t in leg.get_texts()] if leg else [],
                    "texts": [t.get_text() for t in ax.texts],
                    "xticks": [t.get_text() for t in ax.get_xticklabels()],
                    "yticks": [t.get_text() for t in ax.get_yticklabels()]})
    return {"axes": out}
