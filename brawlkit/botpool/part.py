"""What the bot-vs-bot pairing and the human seats share: one base, so the two halves of
the pool are wired to the same options, draw, roster, recorder and bot processes."""

from __future__ import annotations

import random
from collections.abc import Callable

from brawlkit.botpool.options import Options
from brawlkit.botpool.recording import Recorder
from brawlkit.botpool.roster import Roster
from brawlkit.botpool.servers import BotProcesses, GameServer


class PoolPart:
    """A part of the pool that starts bots on ``server``: the pool's options, its one
    seeded draw (``--seed`` replays pairs and seats alike), the roster of playable bots,
    the recorder of results, the bot processes and the pool's voice."""

    def __init__(self, opts: Options, rng: random.Random, roster: Roster, recorder: Recorder,
                 server: GameServer, bot_procs: BotProcesses,
                 say: Callable[[str], None]) -> None:
        self.o = opts
        self.rng = rng
        self.roster, self.recorder = roster, recorder
        self.server, self.bot_procs = server, bot_procs
        self.say = say
        self.setup()

    def setup(self) -> None:
        """The part's own state (after the shared parts are in place)."""
