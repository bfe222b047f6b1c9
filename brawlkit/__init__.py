"""brawlkit — packet-level RL toolkit for BRAWLPIT.

Kept import-light on purpose: `python -m brawlkit --help` and the PARENA
compiler (run by the native build, possibly with a bare system Python) must not
pull in torch or numpy.
"""

__version__ = "0.1.0"
