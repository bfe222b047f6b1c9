"""The names of the ways N envs are stepped together, declared once and light.

:mod:`brawlkit.env.vecenv` builds them (it imports SB3, hence torch);
:class:`~brawlkit.training.config.TrainConfig` validates ``--vec`` against the same
names without loading either.
"""

#: ``inproc``: :class:`~brawlkit.env.vecenv.BrawlpitVecEnv`, all envs in this process;
#: ``subproc``: SB3's ``SubprocVecEnv``
VEC_KINDS: tuple[str, ...] = ("inproc", "subproc")
#: measured faster on 2 cores (README, "bench train")
DEFAULT_VEC = "inproc"
