"""The bot pool: every checkpoint's native bot playing the others (and humans), so
ratings keep moving for the whole league.  ``python -m brawlkit botpool``;
docs/botpool.md.  Modules: ``engine`` (:class:`BotPool`, the loop composing the
rest), ``options`` (what a run is asked to do), ``roster`` (which bots may play,
their live Elo), ``pairing`` (who plays whom), ``seats`` (bots waiting for humans),
``recording`` (results, voids, kept replays), ``servers`` (the pool's servers and bot
processes), ``procs`` (one bot process), ``sources`` (bots and ratings from a league
directory / registry), ``poster`` (results to the registry), ``replays`` (upset
replays), ``status`` (the live table), ``cli``."""
