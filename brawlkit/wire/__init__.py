"""The wire: constants parsed from ``native/include/brawlpit.h``, the packet
mirrors and packers (``protocol``), and the ``brawlpit_server`` launcher
(``server``).  The protocol itself is documented in ``docs/protocol.md``."""
