"""The live status table (rich), redrawn about twice a second by the pool's loop.

It draws a :class:`StatusView` — plain numbers and the pairs and seats in flight,
taken by :meth:`~brawlkit.botpool.engine.BotPool.status_view` — rather than reading
the pool itself: the table then needs nothing from the engine (which imports this
module), and what it shows is one consistent moment.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Group
from rich.table import Table
from rich.text import Text

from brawlkit.botpool.pairing import Pair
from brawlkit.botpool.seats import Seat

MAX_BOT_ROWS = 20


@dataclass(frozen=True)
class BotRow:
    """One bot's line: live Elo, this run's W/D/L, games started."""

    id: str
    rating: float
    wins: int
    draws: int
    losses: int
    started: int


@dataclass(frozen=True)
class StatusView:
    now: float                  # time.monotonic() when taken
    up_since: float             # time.monotonic() at the pool's start
    completed: int
    target: int                 # --matches (0: until stopped)
    human_completed: int
    voids: int
    server_restarts: int
    bot_count: int
    registry: tuple[int, int] | None   # (posted, queued), None without a registry
    pairs: list[Pair]
    seats: list[Seat] | None    # None: no human seats in this run
    bots: list[BotRow]          # highest Elo first


def render(view: StatusView) -> Group:
    parts: list[object] = [_head(view), _pairs(view)]
    if view.seats is not None:
        parts.append(_seats(view, view.seats))
    parts.append(_bots(view))
    parts.append(Text("Ctrl-C stops every bot and server, flushes the results and prints a summary",
                      style="dim"))
    return Group(*parts)  # type: ignore[arg-type]


def _head(v: StatusView) -> Table:
    head = Table.grid(padding=(0, 2))
    for _ in range(7):
        head.add_column()
    posted = "" if v.registry is None else \
        f"registry: {v.registry[0]} posted, {v.registry[1]} queued"
    head.add_row(
        f"[bold]matches[/] {v.completed}" + (f"/{v.target}" if v.target else ""),
        f"[bold]humans[/] {v.human_completed}",
        f"[bold]void[/] {v.voids}",
        f"[bold]server restarts[/] {v.server_restarts}",
        f"[bold]bots[/] {v.bot_count}",
        f"[bold]up[/] {(v.now - v.up_since) / 60:.1f} min",
        posted)
    return head


def _pairs(v: StatusView) -> Table:
    pairs = Table(title="pairs in flight", title_justify="left", expand=False)
    for c in ("pair", "a (creator)", "elo", "b", "elo", "arena", "for"):
        pairs.add_column(c)
    for p in sorted(v.pairs, key=lambda p: p.slot):
        pairs.add_row(str(p.slot), p.a.id, f"{p.rating_a:.0f}", p.b.id, f"{p.rating_b:.0f}",
                      str(p.proc_a.arena or "-"), f"{v.now - p.started:.0f} s")
    return pairs


def _seats(v: StatusView, seats: list[Seat]) -> Table:
    humans = Table(title="human queue (oldest first: HELLO ANY meets it)", title_justify="left")
    for c in ("bot", "elo", "arena", "state"):
        humans.add_column(c)
    for s in sorted(seats, key=lambda s: s.since):
        if s.engaged_at is not None:
            who = s.opponent.name if s.opponent and s.opponent.name else "a human"
            state = f"playing {who} for {v.now - s.engaged_at:.0f} s"
        else:
            state = f"waiting {v.now - s.since:.0f} s"
        humans.add_row(s.bot.id, f"{s.rating:.0f}", str(s.proc.arena or "-"), state)
    return humans


def _bots(v: StatusView) -> Table:
    bots = Table(title="bots (this run's W/D/L, live Elo)", title_justify="left")
    for c in ("bot", "elo", "W", "D", "L", "started"):
        bots.add_column(c, justify="right" if c != "bot" else "left")
    for r in v.bots[:MAX_BOT_ROWS]:
        bots.add_row(r.id, f"{r.rating:.0f}", str(r.wins), str(r.draws), str(r.losses),
                     str(r.started))
    if len(v.bots) > MAX_BOT_ROWS:
        bots.add_row(f"... {len(v.bots) - MAX_BOT_ROWS} more", "", "", "", "", "")
    return bots
