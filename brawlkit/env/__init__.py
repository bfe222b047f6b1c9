"""The environment: BRAWLPIT as a Gymnasium env over real UDP packets.

``BrawlpitEnv`` (``brawlpit.py``) speaks the wire protocol through a
``UdpClient`` (``client.py``); ``observation.py`` builds the 31 values from the
snapshot bytes, ``actions.py`` turns the policy's vector into a command,
``rewards.py`` scores each step; ``vecenv.py`` steps N envs at once and
``sim.py`` runs the same simulation in-process (the benchmarks' reference).

Importing this package registers the Gymnasium id ``brawlkit/Brawlpit-v0``::

    import gymnasium, brawlkit.env
    env = gymnasium.make("brawlkit/Brawlpit-v0", opponent="cpu:3")
    # or, with no import: gymnasium.make("brawlkit.env:brawlkit/Brawlpit-v0", ...)
"""

from __future__ import annotations

import gymnasium

from brawlkit.env.brawlpit import BrawlpitEnv, EnvError, Opponent, parse_opponent

__all__ = ["ENV_ID", "BrawlpitEnv", "EnvError", "Opponent", "parse_opponent"]

#: the Gymnasium id of :class:`BrawlpitEnv` (keyword arguments pass through ``make``)
ENV_ID = "brawlkit/Brawlpit-v0"

if ENV_ID not in gymnasium.registry:
    # no max_episode_steps here: a match ends by itself (terminated) at the 150 s cap;
    # BrawlpitEnv(max_episode_steps=...) is the opt-in truncation
    gymnasium.register(id=ENV_ID, entry_point="brawlkit.env.brawlpit:BrawlpitEnv",
                       disable_env_checker=False)
