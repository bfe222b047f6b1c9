"""The live status table (rich), redrawn about twice a second by the pool's loop."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.console import Group
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from brawlkit.botpool.pool import BotPool

MAX_BOT_ROWS = 20


def render(pool: BotPool) -> Group:
    now = time.monotonic()
    head = Table.grid(padding=(0, 2))
    for _ in range(7):
        head.add_column()
    posted = "" if pool.poster is None else \
        f"registry: {pool.poster.posted} posted, {pool.poster.queued} queued"
    head.add_row(
        f"[bold]matches[/] {pool.completed}" + (f"/{pool.o.matches}" if pool.o.matches else ""),
        f"[bold]humans[/] {pool.human_completed}",
        f"[bold]void[/] {pool.voids}",
        f"[bold]server restarts[/] {pool.server_restarts}",
        f"[bold]bots[/] {len(pool.bots)}",
        f"[bold]up[/] {(now - pool.t0) / 60:.1f} min",
        posted)

    pairs = Table(title="pairs in flight", title_justify="left", expand=False)
    for c in ("pair", "a (creator)", "elo", "b", "elo", "arena", "for"):
        pairs.add_column(c)
    for p in sorted(pool.pairs.values(), key=lambda p: p.slot):
        pairs.add_row(str(p.slot), p.a.id, f"{p.rating_a:.0f}", p.b.id, f"{p.rating_b:.0f}",
                      str(p.proc_a.arena or "-"), f"{now - p.started:.0f} s")

    humans = Table(title="human queue (oldest first: HELLO ANY meets it)", title_justify="left")
    for c in ("bot", "elo", "arena", "state"):
        humans.add_column(c)
    for s in sorted(pool.seats, key=lambda s: s.since):
        if s.engaged_at is not None:
            who = s.opponent.name if s.opponent and s.opponent.name else "a human"
            state = f"playing {who} for {now - s.engaged_at:.0f} s"
        else:
            state = f"waiting {now - s.since:.0f} s"
        humans.add_row(s.bot.id, f"{s.rating:.0f}", str(s.proc.arena or "-"), state)

    bots = Table(title="bots (this run's W/D/L, live Elo)", title_justify="left")
    for c in ("bot", "elo", "W", "D", "L", "started"):
        bots.add_column(c, justify="right" if c != "bot" else "left")
    ids = sorted(set(pool.bots) | set(pool.wdl), key=lambda i: -pool.rating(i))
    for bid in ids[:MAX_BOT_ROWS]:
        w, d, losses = pool.wdl.get(bid, [0, 0, 0])
        bots.add_row(bid, f"{pool.rating(bid):.0f}", str(w), str(d), str(losses),
                     str(pool.starts[bid]))
    if len(ids) > MAX_BOT_ROWS:
        bots.add_row(f"... {len(ids) - MAX_BOT_ROWS} more", "", "", "", "", "")
    parts: list[object] = [head, pairs]
    if pool.o.human_bots:
        parts.append(humans)
    parts.append(bots)
    parts.append(Text("Ctrl-C stops every bot and server, flushes the results and prints a summary",
                      style="dim"))
    return Group(*parts)  # type: ignore[arg-type]
