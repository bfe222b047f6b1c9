"""Native export: the ``.bpw`` blob format (``bpw.py``), the policy network and
its numpy forward (``actor.py``), and ``python -m brawlkit export`` (``cli.py``).
The C twins are ``native/src/policy.c`` (loader + forward) and ``bot.c``."""
