"""brawlkit — packet-level RL toolkit for BRAWLPIT.

Kept import-light on purpose: `python -m brawlkit --help` and the PARENA
compiler (run by the native build, possibly with a bare system Python) must not
pull in torch or numpy.
"""

__version__ = "0.1.0"

from typing import TYPE_CHECKING, Any  # stdlib only: this file must stay light

if TYPE_CHECKING:
    from brawlkit.env.parallel import BrawlpitParallelEnv


def make_parallel_env(**kwargs: Any) -> "BrawlpitParallelEnv":
    """One BRAWLPIT match as a PettingZoo ``ParallelEnv`` (agents ``player_0``, ``player_1``).

    Keyword arguments go to :class:`brawlkit.env.parallel.BrawlpitParallelEnv`
    (docs/pettingzoo.md).  Imported on call, so ``import brawlkit`` stays light.
    """
    from brawlkit.env.parallel import BrawlpitParallelEnv

    return BrawlpitParallelEnv(**kwargs)
