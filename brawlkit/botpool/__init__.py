"""The bot pool: every checkpoint's native bot playing the others (and humans), so
ratings keep moving for the whole league.  ``python -m brawlkit botpool``;
docs/botpool.md.  Modules: ``pool`` (the loop), ``procs`` (one bot process),
``sources`` (bots and ratings from a league directory / registry), ``poster``
(results to the registry), ``replays`` (upset replays), ``status`` (the live table),
``cli``."""
